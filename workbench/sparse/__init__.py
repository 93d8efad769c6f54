"""Layer 3, sparse formats: KeyedJaggedTensor / InverseKeyedJaggedTensor (``jagged_tensor``),
feature transforms on every row or on unique rows (``transforms``) and RecD's reader from
partitions to batches with exact dedup factors (``reader``). Imports ``data`` and ``utils``;
not ``cluster`` or ``dispatch``."""
