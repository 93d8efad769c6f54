"""Layer 3, sparse formats: KeyedJaggedTensor / InverseKeyedJaggedTensor (``jagged_tensor``),
feature transforms on every row or on unique rows (``transforms``), RecD's reader from
partitions to batches with exact dedup factors (``reader``) and the conversions to and from
``torchrec.KeyedJaggedTensor`` (``torchrec_interop``, the optional ``torchrec`` extra). Imports
``data`` and ``utils``; not ``cluster`` or ``dispatch``."""
