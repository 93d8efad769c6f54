"""ESD dispatch as optimisation: the models, the cost of an assignment, and the solvers' result.

The cost model ([`workbench.dispatch.cost_model`][]) turns the cache states of the W workers
into cost inputs for one global batch of N samples; the solvers only decide which sample goes to
which worker. Nothing here reads a cache:

      cost_model                                  exact, heuristic
    +----------------------+   C[N, W]          +-------------------------------------------+
    | cache states, links, | -----------------> | solve_transport   exact, additive (SSP)   |
    | read/write bounds    |   A[W, U] + CSR    | solve_dedup_ilp   exact, dedup (MILP)     |
    |                      | -----------------> | greedy_marginal   ESD heuristic (numba)   |
    +----------------------+   cap[W]           +-------------------------------------------+
                                                        |  Solution(assignment x[N], objective,
                                                        v           method, optimal, ...)

Notation. Samples ``i = 0..N-1``, workers ``j = 0..W-1``, capacities ``b_j = cap[j]`` with
``sum_j b_j = N``. Sample ``i`` uses the key set ``K_i`` (CSR ``indptr``/``indices`` into
``0..U-1``; a key repeated inside one sample counts once). ``A[j, k] >= 0`` is the cost of key
``k`` on worker ``j`` (e.g. ``tau_j`` x misses/update pulls/pushes); ``C[i, j]`` is the cost of
sending sample ``i`` to worker ``j``; built from keys, ``C[i, j] = sum_{k in K_i} A[j, k]``.

Additive model (transportation problem; totally unimodular, so the LP optimum is integral):

    min   sum_ij C_ij x_ij
    s.t.  sum_j x_ij = 1        for every sample i
          sum_i x_ij = b_j      for every worker j
          x_ij in {0, 1}        (equivalently 0 <= x_ij <= 1)

Makespan variant (BSP: the slowest worker's communication; a MILP):

    min   T
    s.t.  sum_i C_ij x_ij <= T  for every worker j
          sum_j x_ij = 1,  sum_i x_ij = b_j,  x_ij in {0, 1}

Deduplicated model (a key needed by several samples on one worker is paid once there; an ILP):

    min   sum_jk A_jk y_jk
    s.t.  y_jk >= x_ij          for every i, every k in K_i, every j   (only where A_jk > 0)
          sum_j x_ij = 1,  sum_i x_ij = b_j
          x_ij in {0, 1},  0 <= y_jk <= 1

``y`` may be continuous: for a binary ``x`` and ``A >= 0`` the optimum sets
``y_jk = max_{i: k in K_i} x_ij``, which is 0 or 1. Pairs with ``A_jk = 0`` need no ``y``.
For any assignment, dedup cost <= additive cost; with pairwise disjoint key sets they are equal.

Every solver ([`workbench.dispatch.exact`][], [`workbench.dispatch.heuristic`][]) returns a
[`Solution`][] whose ``assignment`` is ``int64[N]`` of worker indices with exactly ``cap[j]``
entries equal to ``j``; this module evaluates any assignment under both models.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

__all__ = ["Solution", "dedup_cost", "additive_cost", "additive_matrix", "private_keys",
           "check_assignment"]


@dataclass
class Solution:
    """One dispatch decision for a global batch.

    Attributes:
        assignment: ``int64[N]``, the worker of every sample; worker ``j`` appears ``cap[j]`` times.
        objective: the objective value of ``assignment`` (total additive cost, makespan, or
            dedup cost, depending on the solver).
        method: which algorithm produced ``assignment`` (``transport-lsa``, ``makespan-milp``,
            ``transport-lsa (makespan fallback)``, ``dedup-milp``, ``greedy-marginal``).
        optimal: whether ``assignment`` is proven optimal for the solver's objective.
        seconds: wall time of the solver call.
        status: a human-readable solver status (includes any fallback taken).
        mip_gap: relative MIP gap reported by HiGHS (``None`` for non-MILP methods).
        dual_bound: the best proven lower bound (``None`` when not available).
    """

    assignment: np.ndarray
    objective: float
    method: str
    optimal: bool
    seconds: float
    status: str
    mip_gap: float | None = None
    dual_bound: float | None = None


def check_cap(cap, n: int, w: int | None = None) -> np.ndarray:
    cap = np.asarray(cap)
    if cap.ndim != 1 or (w is not None and cap.size != w):
        raise ValueError(f"cap: expected shape ({w},), got {cap.shape}")
    if not np.issubdtype(cap.dtype, np.integer):
        if not np.all(np.equal(np.mod(cap, 1), 0)):
            raise ValueError("cap: capacities must be integers")
    cap = cap.astype(np.int64)
    if np.any(cap < 0):
        raise ValueError("cap: capacities must be >= 0")
    if int(cap.sum()) != n:
        raise ValueError(f"cap: capacities sum to {int(cap.sum())}, must equal N = {n}")
    return cap


def check_keys(A, indptr, indices) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    A = np.asarray(A, dtype=np.float64)
    if not (A.flags.c_contiguous or A.flags.f_contiguous):
        A = np.ascontiguousarray(A)  # the kernels take either order (the cost model's is F)
    if A.ndim != 2:
        raise ValueError(f"A: expected a 2-D [W, U] array, got shape {A.shape}")
    if not np.all(np.isfinite(A)) or np.any(A < 0):
        raise ValueError("A: costs must be finite and >= 0")
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    indices = np.ascontiguousarray(indices, dtype=np.int64)
    if indptr.ndim != 1 or indptr.size < 1 or indptr[0] != 0 or indptr[-1] != indices.size \
            or np.any(np.diff(indptr) < 0):
        raise ValueError("indptr: must start at 0, be non-decreasing and end at len(indices)")
    if indices.size and (indices.min() < 0 or indices.max() >= A.shape[1]):
        raise ValueError(f"indices: keys must lie in 0..{A.shape[1] - 1}")
    return A, indptr, indices


def check_assignment(x, cap) -> np.ndarray:
    """Validate an assignment against capacities.

    Args:
        x: worker index of every sample.
        cap: ``int[W]`` capacities.

    Returns:
        ``x`` as ``int64[N]``.

    Raises:
        ValueError: when a worker index is out of range or a worker's count differs from its cap.
    """
    x = np.asarray(x, dtype=np.int64)
    cap = np.asarray(cap, dtype=np.int64)
    if x.size and (x.min() < 0 or x.max() >= cap.size):
        raise ValueError("assignment: worker index out of range")
    counts = np.bincount(x, minlength=cap.size)
    if not np.array_equal(counts, cap):
        raise ValueError(f"assignment: per-worker counts {counts.tolist()} != cap {cap.tolist()}")
    return x


def additive_cost(C, x) -> float:
    """Additive cost ``sum_i C[i, x_i]`` of an assignment.

    Args:
        C: ``float[N, W]`` cost of each sample on each worker.
        x: ``int[N]`` worker of each sample.

    Returns:
        The total cost.
    """
    C = np.asarray(C, dtype=np.float64)
    x = np.asarray(x, dtype=np.int64)
    return float(C[np.arange(C.shape[0]), x].sum())


@nb.njit(cache=True)
def _dedup_kernel(A, indptr, indices, x):  # pragma: no cover - compiled
    claimed = np.zeros(A.shape, dtype=np.uint8)
    total = 0.0
    for i in range(indptr.size - 1):
        j = x[i]
        for p in range(indptr[i], indptr[i + 1]):
            k = indices[p]
            if claimed[j, k] == 0:
                claimed[j, k] = 1
                total += A[j, k]
    return total


@nb.njit(cache=True)
def _additive_kernel(A, indptr, indices, C):  # pragma: no cover - compiled
    w = A.shape[0]
    stamp = np.zeros(A.shape[1], dtype=np.int64)  # stamp[k] == i + 1: k already seen in sample i
    for i in range(indptr.size - 1):
        for p in range(indptr[i], indptr[i + 1]):
            k = indices[p]
            if stamp[k] != i + 1:
                stamp[k] = i + 1
                for j in range(w):
                    C[i, j] += A[j, k]


def dedup_cost(A, indptr, indices, x) -> float:
    """Deduplicated cost: every (worker, key) pair used by the assignment is paid once.

    Args:
        A: ``float[W, U]`` per-(worker, key) cost.
        indptr: ``int[N + 1]`` CSR row pointer of the sample -> keys incidence.
        indices: ``int[nnz]`` keys (``0..U-1``); repeats inside a sample count once.
        x: ``int[N]`` worker of each sample.

    Returns:
        ``sum_j sum_{k used on j} A[j, k]``.
    """
    A, indptr, indices = check_keys(A, indptr, indices)
    x = np.ascontiguousarray(x, dtype=np.int64)
    if x.shape != (indptr.size - 1,) or (x.size and (x.min() < 0 or x.max() >= A.shape[0])):
        raise ValueError("x: expected one worker index in 0..W-1 per sample")
    return float(_dedup_kernel(A, indptr, indices, x))


def additive_matrix(A, indptr, indices) -> np.ndarray:
    """Additive cost matrix of keyed samples: ``C[i, j] = sum_{k in K_i} A[j, k]`` (``K_i`` a set).

    Args:
        A: ``float[W, U]`` per-(worker, key) cost.
        indptr: ``int[N + 1]`` CSR row pointer.
        indices: ``int[nnz]`` keys.

    Returns:
        ``float64[N, W]``.
    """
    A, indptr, indices = check_keys(A, indptr, indices)
    C = np.zeros((indptr.size - 1, A.shape[0]))
    _additive_kernel(A, indptr, indices, C)
    return C


def private_keys(C) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The additive model in the keyed form the dedup solvers take: sample ``i`` uses key ``i``
    alone, at cost ``A'[j, i] = C[i, j]``, so the dedup cost of any assignment on ``(A', CSR)``
    *is* its additive cost ``sum_i C[i, x_i]``.

    Args:
        C: ``float[N, W]`` cost of each sample on each worker.

    Returns:
        ``(A' float64[W, N], indptr int64[N + 1], indices int64[N])``; ``A'`` is ``C.T``, a
        view of ``C`` made C-contiguous (no copy when it is), so ``A'.T`` gives the additive
        solvers their ``C[N, W]`` back without copying it twice.
    """
    C = np.ascontiguousarray(C, dtype=np.float64)
    private = np.arange(C.shape[0] + 1, dtype=np.int64)
    return C.T, private, private[:-1]
