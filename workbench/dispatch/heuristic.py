"""ESD's heuristic: greedy dispatch with marginal deduplicated costs (one numba kernel per batch).

Samples in a given order (default: batch order); each goes to the worker with room whose
*marginal* dedup cost ``sum_{k in K_i, k not yet claimed on j} A_jk`` is the smallest (ties to
the lowest worker index); its keys are then claimed on that worker, so a key shared by several
samples of one worker is paid once (the models are in :mod:`workbench.dispatch.objective`).
O(nnz x W) for the whole batch.
"""

from __future__ import annotations

import time

import numba as nb
import numpy as np

from workbench.dispatch.objective import Solution, check_cap, check_keys


@nb.njit(cache=True)
def _greedy_kernel(A, indptr, indices, cap, order, x):  # pragma: no cover - compiled
    w, u = A.shape
    room = cap.copy()
    claimed = np.zeros((w, u), dtype=np.uint8)
    stamp = np.zeros(u, dtype=np.int64)  # stamp[k] == t + 1: key k already seen in sample t
    marg = np.empty(w)
    total = 0.0
    for t in range(order.size):
        i = order[t]
        for j in range(w):
            marg[j] = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            k = indices[p]
            if stamp[k] == t + 1:
                continue
            stamp[k] = t + 1
            for j in range(w):
                if claimed[j, k] == 0:
                    marg[j] += A[j, k]
        best = -1
        best_v = np.inf
        for j in range(w):
            if room[j] > 0 and (best < 0 or marg[j] < best_v):
                best = j
                best_v = marg[j]
        x[i] = best
        room[best] -= 1
        total += best_v
        for p in range(indptr[i], indptr[i + 1]):
            claimed[best, indices[p]] = 1
    return total


def greedy_marginal(A, indptr, indices, cap, order=None) -> Solution:
    """ESD heuristic: capacity-aware greedy on marginal deduplicated costs.

    Samples are taken in ``order`` (default ``0..N-1``). Sample ``i`` goes to the worker ``j``
    with room minimising ``sum_{k in K_i, k not claimed on j} A[j, k]`` (keys already claimed on
    ``j`` by earlier samples of this batch cost nothing more); exact ties go to the lowest worker
    index; then ``K_i`` is claimed on ``j``. One numba pass over the batch (O(nnz x W)).

    Args:
        A: ``float[W, U]`` per-(worker, key) cost, ``>= 0``.
        indptr: ``int[N + 1]`` CSR row pointer.
        indices: ``int[nnz]`` keys in ``0..U-1``.
        cap: ``int[W]`` capacities summing to N.
        order: optional permutation of ``0..N-1``: the order samples are placed in.

    Returns:
        A :class:`Solution` with ``objective`` the dedup cost (the sum of the chosen marginals,
        equal to :func:`dedup_cost` up to float rounding), ``optimal=False``.
    """
    t0 = time.perf_counter()
    A, indptr, indices = check_keys(A, indptr, indices)
    n = indptr.size - 1
    cap = check_cap(cap, n, A.shape[0])
    if order is None:
        order = np.arange(n, dtype=np.int64)
    else:
        order = np.ascontiguousarray(order, dtype=np.int64)
        if order.shape != (n,) or (n and (order.min() < 0 or order.max() >= n)) \
                or not np.all(np.bincount(order, minlength=n) == 1):
            raise ValueError("order: must be a permutation of 0..N-1")
    x = np.empty(n, dtype=np.int64)
    total = _greedy_kernel(A, indptr, indices, cap, order, x)
    return Solution(x, float(total), "greedy-marginal", False, time.perf_counter() - t0,
                    "heuristic")
