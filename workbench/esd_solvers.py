"""ESD dispatch solvers: the pure optimisation layer (DESIGN.md §3.3, our formalisation).

The cost model (another module) turns the cache states of the W workers into cost inputs for one
global batch of N samples; this module only decides which sample goes to which worker::

      cost model                                  esd_solvers
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

Additive model (transportation problem; totally unimodular, so the LP optimum is integral)::

    min   sum_ij C_ij x_ij
    s.t.  sum_j x_ij = 1        for every sample i
          sum_i x_ij = b_j      for every worker j
          x_ij in {0, 1}        (equivalently 0 <= x_ij <= 1)

Makespan variant (BSP: the slowest worker's communication; a MILP)::

    min   T
    s.t.  sum_i C_ij x_ij <= T  for every worker j
          sum_j x_ij = 1,  sum_i x_ij = b_j,  x_ij in {0, 1}

Deduplicated model (a key needed by several samples on one worker is paid once there; an ILP)::

    min   sum_jk A_jk y_jk
    s.t.  y_jk >= x_ij          for every i, every k in K_i, every j   (only where A_jk > 0)
          sum_j x_ij = 1,  sum_i x_ij = b_j
          x_ij in {0, 1},  0 <= y_jk <= 1

``y`` may be continuous: for a binary ``x`` and ``A >= 0`` the optimum sets
``y_jk = max_{i: k in K_i} x_ij``, which is 0 or 1. Pairs with ``A_jk = 0`` need no ``y``.
For any assignment, dedup cost <= additive cost; with pairwise disjoint key sets they are equal.

Heuristic (ESD greedy with marginal costs): samples in a given order; each goes to the worker
with room whose *marginal* dedup cost ``sum_{k in K_i, k not yet claimed on j} A_jk`` is the
smallest (ties to the lowest worker index); its keys are then claimed on that worker.

Every solver returns a :class:`Solution` whose ``assignment`` is ``int64[N]`` of worker indices
with exactly ``cap[j]`` entries equal to ``j``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numba as nb
import numpy as np
from scipy.optimize import Bounds, LinearConstraint, linear_sum_assignment, milp
from scipy.sparse import csr_array

__all__ = ["Solution", "solve_transport", "solve_dedup_ilp", "greedy_marginal", "dedup_cost",
           "additive_cost", "additive_matrix", "check_assignment"]

OBJECTIVES = ("total", "makespan")


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


# ------------------------------------------------------------------------------------------
# Validation and evaluators
# ------------------------------------------------------------------------------------------
def _check_cap(cap, n: int, w: int | None = None) -> np.ndarray:
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


def _check_keys(A, indptr, indices) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    A = np.ascontiguousarray(A, dtype=np.float64)
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
    A, indptr, indices = _check_keys(A, indptr, indices)
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
    A, indptr, indices = _check_keys(A, indptr, indices)
    C = np.zeros((indptr.size - 1, A.shape[0]))
    _additive_kernel(A, indptr, indices, C)
    return C


# ------------------------------------------------------------------------------------------
# Exact additive solver (transportation problem) and makespan MILP
# ------------------------------------------------------------------------------------------
@nb.njit(cache=True)
def _transport_ssp(C, cap, x, rtol):  # pragma: no cover - compiled
    """Successive shortest paths on the W-worker residual graph; False on a numerical cycle.

    Samples are inserted in index order. Before inserting sample i, samples 0..i-1 are placed
    optimally (min-cost flow invariant: no negative cycle in the residual graph). The residual
    graph on the workers has an edge a -> b of cost min_{s on a} (C[s, b] - C[s, a]) (move the
    cheapest sample from a to b); the new sample enters worker j at cost C[i, j]; the path ends
    at a worker with room. Bellman-Ford over W nodes finds the shortest such path (ties: the
    lowest-index sample per edge, the lowest-index end worker); augmenting moves one sample per
    edge of the path. O(N^2 W + N W^3).
    """
    n, w = C.shape
    room = cap.copy()
    edge = np.empty((w, w))
    arg = np.empty((w, w), dtype=np.int64)
    dist = np.empty(w)
    pred = np.empty(w, dtype=np.int64)
    for i in range(n):
        edge[:, :] = np.inf
        arg[:, :] = -1
        for s in range(i):
            a = x[s]
            base = C[s, a]
            for b in range(w):
                if b != a:
                    d = C[s, b] - base
                    if d < edge[a, b]:
                        edge[a, b] = d
                        arg[a, b] = s
        for j in range(w):
            dist[j] = C[i, j]
            pred[j] = -1
        for _ in range(w - 1):
            changed = False
            for a in range(w):
                for b in range(w):
                    if arg[a, b] >= 0:
                        nd = dist[a] + edge[a, b]
                        if nd < dist[b] - rtol * max(1.0, abs(dist[b])):
                            dist[b] = nd
                            pred[b] = a
                            changed = True
            if not changed:
                break
        end = -1
        for j in range(w):
            if room[j] > 0 and (end < 0 or dist[j] < dist[end]):
                end = j
        room[end] -= 1
        b = end
        steps = 0
        while pred[b] >= 0:
            a = pred[b]
            x[arg[a, b]] = b
            b = a
            steps += 1
            if steps > w:
                return False
        x[i] = b
    return True


def _transport_lsa(C: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Transportation optimum via ``linear_sum_assignment`` on the slot-expanded N x N matrix."""
    slots = np.repeat(np.arange(cap.size, dtype=np.int64), cap)
    rows, cols = linear_sum_assignment(C[:, slots])
    x = np.empty(C.shape[0], dtype=np.int64)
    x[rows] = slots[cols]
    return x


def _transport_exact(C: np.ndarray, cap: np.ndarray) -> tuple[np.ndarray, str]:
    x = np.full(C.shape[0], -1, dtype=np.int64)
    if C.shape[0] and _transport_ssp(C, cap, x, 1e-12):
        return x, "transport-ssp"
    if C.shape[0] == 0:
        return x, "transport-ssp"
    return _transport_lsa(C, cap), "transport-lsa"


def solve_transport(C, cap, objective: str = "total", time_limit_s: float = 10.0) -> Solution:
    """Exact dispatch under the additive cost model.

    ``objective="total"`` solves the transportation problem
    ``min sum_i C[i, x_i]`` s.t. worker ``j`` gets ``cap[j]`` samples exactly, by successive
    shortest paths on the W-worker residual graph (a numba kernel, O(N^2 W + N W^3); exact and
    integral by construction, no LP rounding). Measured on N = 1,024, W = 8 (this machine):
    ~5-8 ms, against ~360 ms for ``linear_sum_assignment`` on the slot-expanded N x N matrix
    (~25 ms on tie-free random costs; cache-derived costs have many ties) and ~1.3 s for
    ``linprog(method="highs")`` on the LP. Should the kernel ever detect a numerical cycle it
    falls back to ``linear_sum_assignment`` (``method="transport-lsa"``).

    Ties: deterministic. Samples are inserted in index order; each goes along the cheapest
    augmenting path (a path must beat the incumbent by a relative 1e-12 to replace it; each edge
    moves the lowest-index cheapest sample; among equally cheap end workers the lowest index
    wins). The optimum returned among equal-cost ones is thus a fixed function of (C, cap).

    ``objective="makespan"`` minimises ``max_j sum_{i on j} C[i, j]`` with a MILP
    (``scipy.optimize.milp``, HiGHS) under ``time_limit_s``. The total-cost optimum is computed
    first as an incumbent: if HiGHS finds nothing better (or nothing at all) within the limit,
    that assignment is returned (``method`` says so). ``optimal`` is True only when HiGHS proved
    optimality.

    Args:
        C: ``float[N, W]`` cost of sending sample ``i`` to worker ``j`` (finite).
        cap: ``int[W]`` capacities summing to N.
        objective: ``"total"`` or ``"makespan"``.
        time_limit_s: wall-time limit for the makespan MILP (ignored for ``"total"``).

    Returns:
        A :class:`Solution`; ``objective`` is the total cost or the makespan.
    """
    t0 = time.perf_counter()
    C = np.ascontiguousarray(C, dtype=np.float64)
    if C.ndim != 2:
        raise ValueError(f"C: expected a 2-D [N, W] array, got shape {C.shape}")
    if not np.all(np.isfinite(C)):
        raise ValueError("C: costs must be finite")
    n, w = C.shape
    cap = _check_cap(cap, n, w)
    if objective not in OBJECTIVES:
        raise ValueError(f"objective {objective!r}: must be one of {OBJECTIVES}")
    x_total, method = _transport_exact(C, cap)
    if objective == "total":
        return Solution(x_total, additive_cost(C, x_total), method, True,
                        time.perf_counter() - t0, "optimal")
    return _solve_makespan(C, cap, x_total, time_limit_s, t0)


def _assignment_rows(n: int, w: int, cap: np.ndarray, n_vars: int) -> LinearConstraint:
    """``sum_j x_ij = 1`` and ``sum_i x_ij = cap_j`` over x laid out as ``x[i * W + j]``."""
    nx = n * w
    var = np.arange(nx, dtype=np.int64)
    rows = np.concatenate([var // w, n + var % w])
    cols = np.concatenate([var, var])
    mat = csr_array((np.ones(2 * nx), (rows, cols)), shape=(n + w, n_vars))
    rhs = np.concatenate([np.ones(n), cap.astype(np.float64)])
    return LinearConstraint(mat, rhs, rhs)


def _decode(xv: np.ndarray, n: int, w: int) -> np.ndarray:
    return np.asarray(xv[: n * w]).reshape(n, w).argmax(axis=1).astype(np.int64)


def _makespan(C: np.ndarray, x: np.ndarray) -> float:
    loads = np.bincount(x, weights=C[np.arange(C.shape[0]), x], minlength=C.shape[1])
    return float(loads.max()) if loads.size else 0.0


def _milp_stats(res) -> tuple[float | None, float | None]:
    gap = getattr(res, "mip_gap", None)
    bound = getattr(res, "mip_dual_bound", None)
    return (None if gap is None else float(gap)), (None if bound is None else float(bound))


def _solve_makespan(C, cap, x_total, time_limit_s, t0) -> Solution:
    n, w = C.shape
    nx = n * w
    c = np.zeros(nx + 1)
    c[-1] = 1.0  # min T
    var = np.arange(nx, dtype=np.int64)
    scale = float(np.abs(C).max()) if C.size and np.abs(C).max() > 0 else 1.0  # see dedup ILP
    load = csr_array((np.concatenate([C.ravel() / scale, -np.ones(w)]),
                      (np.concatenate([var % w, np.arange(w)]),
                       np.concatenate([var, np.full(w, nx)]))), shape=(w, nx + 1))
    cons = [_assignment_rows(n, w, cap, nx + 1), LinearConstraint(load, -np.inf, 0.0)]
    integrality = np.concatenate([np.ones(nx), [0]])
    lb = np.zeros(nx + 1)
    ub = np.concatenate([np.ones(nx), [np.inf]])
    remaining = max(time_limit_s - (time.perf_counter() - t0), 1e-3)
    res = milp(c, constraints=cons, integrality=integrality, bounds=Bounds(lb, ub),
               options={"time_limit": remaining})
    gap, bound = _milp_stats(res)
    fallback_val = _makespan(C, x_total)
    if res.x is not None:
        x = _decode(res.x, n, w)
        val = _makespan(C, x)
        proven = res.status == 0
        if proven or val <= fallback_val:
            return Solution(x, val, "makespan-milp", bool(proven), time.perf_counter() - t0,
                            res.message, gap, bound)
    status = (f"{res.message}; MILP incumbent missing or worse than the total-cost optimum: "
              "returned the total-cost optimum")
    return Solution(x_total, fallback_val, "transport (makespan fallback)", False,
                    time.perf_counter() - t0, status, gap, bound)


# ------------------------------------------------------------------------------------------
# Exact deduplicated solver (ILP)
# ------------------------------------------------------------------------------------------
def solve_dedup_ilp(A, indptr, indices, cap, time_limit_s: float = 10.0,
                    keep_better_heuristic: bool = True) -> Solution:
    """Exact dispatch under the deduplicated cost model (MILP, HiGHS, under a time limit).

    Variables ``x_ij`` (binary, laid out ``i * W + j``) and ``y_jk`` (continuous in ``[0, 1]``,
    integral at any optimum, see the module docstring) for the (worker, key) pairs with
    ``A_jk > 0`` among the keys the batch uses; rows ``y_jk - x_ij >= 0`` for every such pair and
    every sample ``i`` with ``k in K_i``. scipy's ``milp`` offers no warm start, so HiGHS
    solves from scratch.

    When the time limit hits without a feasible solution, the result is the better (lower dedup
    cost; greedy on a tie) of two cheap candidates: :func:`greedy_marginal` and the additive
    optimum (:func:`solve_transport` on :func:`additive_matrix`); ``method`` names the one
    returned and ``status`` says a fallback was taken. With ``keep_better_heuristic`` the same
    candidates also replace an unproven MILP incumbent that is worse than them (on N = 1,024
    instances the additive optimum's dedup cost often beats both the greedy and the incumbent
    HiGHS reaches in 30 s).

    Args:
        A: ``float[W, U]`` per-(worker, key) cost, ``>= 0``.
        indptr: ``int[N + 1]`` CSR row pointer of the sample -> keys incidence.
        indices: ``int[nnz]`` keys in ``0..U-1``.
        cap: ``int[W]`` capacities summing to N.
        time_limit_s: HiGHS wall-time limit in seconds.
        keep_better_heuristic: return a fallback candidate when it beats an unproven MILP
            incumbent.

    Returns:
        A :class:`Solution` with ``objective`` the dedup cost (recomputed by :func:`dedup_cost`),
        ``optimal`` True iff HiGHS proved optimality, ``mip_gap``/``dual_bound`` from HiGHS,
        ``seconds`` the whole call's wall time (model build included).
    """
    t0 = time.perf_counter()
    A, indptr, indices = _check_keys(A, indptr, indices)
    w, u = A.shape
    n = indptr.size - 1
    cap = _check_cap(cap, n, w)
    nx = n * w

    # unique (sample, key) incidences; (worker, key) pairs with positive cost get a y variable
    rows_i = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    inc = np.unique(rows_i * u + indices)
    inc_i, inc_k = np.divmod(inc, u)
    ii = np.repeat(inc_i, w)
    kk = np.repeat(inc_k, w)
    jj = np.tile(np.arange(w, dtype=np.int64), inc.size)
    pos = A[jj, kk] > 0
    ii, jj, kk = ii[pos], jj[pos], kk[pos]
    pair_codes, y_of = np.unique(jj * u + kk, return_inverse=True)
    ny = pair_codes.size
    n_vars = nx + ny
    # HiGHS' gap tolerances are absolute: scale the costs to max 1 (cost models in seconds
    # per row are ~1e-7) so that "optimal" means optimal; objectives are recomputed unscaled.
    scale = float(A.max()) if A.size and A.max() > 0 else 1.0
    c = np.concatenate([np.zeros(nx), A.ravel()[pair_codes] / scale])
    m = ii.size
    link = csr_array((np.concatenate([np.ones(m), -np.ones(m)]),
                      (np.concatenate([np.arange(m), np.arange(m)]),
                       np.concatenate([nx + y_of, ii * w + jj]))), shape=(m, n_vars))
    cons = [_assignment_rows(n, w, cap, n_vars)]
    if m:
        cons.append(LinearConstraint(link, 0.0, np.inf))
    integrality = np.concatenate([np.ones(nx), np.zeros(ny)])
    remaining = max(time_limit_s - (time.perf_counter() - t0), 1e-3)
    res = milp(c, constraints=cons, integrality=integrality,
               bounds=Bounds(np.zeros(n_vars), np.ones(n_vars)),
               options={"time_limit": remaining})
    gap, bound = _milp_stats(res)
    if res.x is not None:
        x = _decode(res.x, n, w)
        val = dedup_cost(A, indptr, indices, x)
        proven = res.status == 0
        if proven or not keep_better_heuristic:
            return Solution(x, val, "dedup-milp", bool(proven), time.perf_counter() - t0,
                            res.message, gap, bound)
        best = _dedup_fallback(A, indptr, indices, cap)
        if val <= best.objective:
            return Solution(x, val, "dedup-milp", False, time.perf_counter() - t0, res.message,
                            gap, bound)
        status = (f"{res.message}; {best.method} beat the unproven MILP incumbent "
                  f"({val:.6g}): returned {best.method}")
    else:
        best = _dedup_fallback(A, indptr, indices, cap)
        status = f"{res.message}; no feasible MILP solution: fell back to {best.method}"
    return Solution(best.assignment, best.objective, best.method, False,
                    time.perf_counter() - t0, status, gap, bound)


def _dedup_fallback(A, indptr, indices, cap) -> Solution:
    """The better (dedup cost) of the greedy and the additive optimum; greedy on a tie."""
    greedy = greedy_marginal(A, indptr, indices, cap)
    trans = solve_transport(additive_matrix(A, indptr, indices), cap)
    trans_val = dedup_cost(A, indptr, indices, trans.assignment)
    if trans_val < greedy.objective:
        return Solution(trans.assignment, trans_val, trans.method + " (additive optimum)", False,
                        trans.seconds, "heuristic")
    return greedy


# ------------------------------------------------------------------------------------------
# ESD heuristic: greedy with marginal dedup costs (numba kernel over the whole batch)
# ------------------------------------------------------------------------------------------
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
    A, indptr, indices = _check_keys(A, indptr, indices)
    n = indptr.size - 1
    cap = _check_cap(cap, n, A.shape[0])
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
