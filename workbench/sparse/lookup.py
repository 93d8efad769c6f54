"""Pooled embedding lookups on a jagged feature, and RecD's on the unique rows of a dedup group.

``pooled_lookup(table, jt)[s] = sum (or mean) of table[id] over the ids of list s``; the
deduplicated form pools the unique rows only and expands the result through the group's inverse
lookup: ``dedup_pooled_lookup(table, ikjt, key) = pooled_lookup(table, ikjt[key])[inverse]``,
equal to the lookup on ``ikjt.expand()[key]`` (forward exactly, gradients up to summation order).
"""

from __future__ import annotations

from typing import Literal

import torch

from workbench.sparse.jagged_tensor import InverseKeyedJaggedTensor, JaggedTensor

__all__ = ["dedup_pooled_lookup", "pooled_lookup"]


def pooled_lookup(table: torch.Tensor, jt: JaggedTensor, mode: Literal["sum", "mean"] = "sum",
                  sparse: bool = True) -> torch.Tensor:
    """Embedding-bag lookup: pool the rows of ``table`` named by each list of ``jt``.

    The gradient w.r.t. ``table`` is row-indexed by default (``sparse=True``): a sparse COO
    tensor holding one ``[D]`` row per looked-up id (uncoalesced; duplicates are summed by the
    optimizer), as DLRM trainers use. A dense gradient is a full ``[num_rows, D]`` tensor
    zero-filled by the backward and swept by the optimizer at every step, a cost that grows
    with the table rather than with the batch (on a 1M-row table the whole step is several
    times slower, ``benchmarks/embedding_backward.py``). ``torch.optim.SGD`` and ``Adagrad``
    (both without weight decay) and ``SparseAdam`` accept sparse gradients; ``Adam``, ``AdamW``
    and weight decay need ``sparse=False``.

    Args:
        table: ``[num_rows, D]`` embedding table (gradients flow to it).
        jt: ``B`` lists of row ids.
        mode: ``"sum"`` or ``"mean"``; an empty list pools to zeros.
        sparse: gradient w.r.t. ``table`` as a sparse COO tensor (row-indexed) if True, dense
            ``[num_rows, D]`` if False.

    Returns:
        ``[B, D]`` pooled embeddings (forward identical either way).

    Raises:
        ValueError: an unknown ``mode``.
        IndexError: an id outside ``[0, num_rows)``.

    Example:
        >>> table = torch.ones(4, 2, requires_grad=True)
        >>> out = pooled_lookup(table, JaggedTensor(np.array([0, 3, 3]), np.array([2, 1])))
        >>> out.sum().backward()
        >>> table.grad.is_sparse, table.grad.to_dense()[3].tolist()
        (True, [2.0, 2.0])
    """
    if mode not in ("sum", "mean"):
        raise ValueError(f"mode must be 'sum' or 'mean', got {mode!r}")
    ids = torch.from_numpy(jt.values())
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= table.shape[0]):
        raise IndexError(f"ids out of range for a table with {table.shape[0]} rows")
    offsets = torch.from_numpy(jt.offsets()[:-1])
    return torch.nn.functional.embedding_bag(ids, table, offsets, mode=mode, sparse=sparse)


def dedup_pooled_lookup(table: torch.Tensor, ikjt: InverseKeyedJaggedTensor, key: str,
                        mode: Literal["sum", "mean"] = "sum", sparse: bool = True) -> torch.Tensor:
    """RecD lookup: pool on the unique rows of ``key``, then expand through the inverse lookup.

    Equals ``pooled_lookup(table, ikjt.expand()[key], mode, sparse)``: forward exactly,
    gradients w.r.t. ``table`` up to floating-point summation order. The expansion's backward
    sums the gradients of duplicate samples per unique row first, so a sparse table gradient
    holds one row per id of the *unique* rows (fewer than the KJT path's).

    Args:
        table: ``[num_rows, D]`` embedding table.
        ikjt: the deduplicated batch.
        key: feature to look up.
        mode: ``"sum"`` or ``"mean"``.
        sparse: row-indexed (sparse COO) gradient w.r.t. ``table`` if True (the default; see
            [`pooled_lookup`][]), dense if False.

    Returns:
        ``[B, D]`` pooled embeddings (``unique_out[inverse]``).
    """
    unique_out = pooled_lookup(table, ikjt[key], mode, sparse)
    inverse = torch.from_numpy(ikjt.inverse_lookup(key))
    return unique_out.index_select(0, inverse)
