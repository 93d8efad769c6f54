"""Layer 3, sparse formats: jagged batches, RecD's deduplicated ones, and the reader that makes
them.

Imports ``data`` and ``utils``; not ``cluster`` or ``dispatch``.

| module | what it holds |
| --- | --- |
| ``jagged_tensor`` | KeyedJaggedTensor and InverseKeyedJaggedTensor |
| ``transforms`` | feature transforms on every row or on unique rows |
| ``reader`` | RecD's reader from partitions to batches, with exact dedup factors |
| ``torchrec_interop`` | to and from ``torchrec.KeyedJaggedTensor`` (extra ``torchrec``) |
"""
