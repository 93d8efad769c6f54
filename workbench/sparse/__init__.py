"""Layer 3, sparse formats: jagged batches, RecD's deduplicated ones, and the reader that makes
them.

Imports ``data`` and ``utils``; not ``cluster`` or ``dispatch``.

| module | what it holds |
| --- | --- |
| ``jagged_tensor`` | KeyedJaggedTensor and InverseKeyedJaggedTensor |
| ``dedup`` | RecD's row dedup: ``to_ikjt`` (hash or sort, exact) and ``to_ikjt_by_request`` |
| ``lookup`` | pooled embedding lookups, on a KJT's lists or an IKJT's unique rows |
| ``transforms`` | feature transforms on every row or on unique rows |
| ``reader`` | RecD's reader from partitions to batches, with exact dedup factors |
| ``torchrec_interop`` | to and from ``torchrec.KeyedJaggedTensor`` (extra ``torchrec``) |
"""
