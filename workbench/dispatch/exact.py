"""ESD's exact solvers: the additive transportation problem, its makespan variant, the dedup ILP.

The models are in [`workbench.dispatch.objective`][]. The additive problem is totally
unimodular, so its LP optimum is integral: a numba successive-shortest-path solver finds it
(``transport-ssp``; ``benchmarks/dispatch_throughput.py`` times it up to 4,096 samples x 32
workers), falling back to scipy's
``linear_sum_assignment`` on the expanded worker slots should it meet a numerical cycle. The
makespan variant and the deduplicated ILP are MILPs solved by HiGHS (``highspy``) under a hard
time limit, started from a feasible plan (the total-cost optimum; the better of the regret + swap
heuristic and the additive optimum), so they always return a plan no worse than their start;
costs are scaled so HiGHS' absolute tolerances do not stop it early. ``Solution.method`` names the
plan actually returned and ``optimal`` says whether HiGHS proved it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import highspy
import numba as nb
import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.sparse import csc_array

from workbench.dispatch.heuristic import regret_swap
from workbench.dispatch.objective import (
    Solution,
    additive_cost,
    additive_matrix,
    check_cap,
    check_keys,
    dedup_cost,
)

OBJECTIVES = ("total", "makespan")
_HIGHS_OPTIONS: dict[str, bool | int | str] = {"output_flag": False, "threads": 1,
                                               "presolve": "off", "random_seed": 0}
_INTERRUPTS = (highspy.cb.HighsCallbackType.kCallbackSimplexInterrupt,
               highspy.cb.HighsCallbackType.kCallbackIpmInterrupt,
               highspy.cb.HighsCallbackType.kCallbackMipInterrupt)


@nb.njit(cache=True, inline="always")
def _edge_join(C, edge, arg, s, a):  # pragma: no cover - compiled
    """Sample ``s`` joins worker ``a``: row ``a`` of the residual graph takes it into its
    minima (the lowest-index sample among equal minima, as a scan in index order would)."""
    w = C.shape[1]
    base = C[s, a]
    for b in range(w):
        if b != a:
            d = C[s, b] - base
            if d < edge[a, b] or (d == edge[a, b] and s < arg[a, b]):
                edge[a, b] = d
                arg[a, b] = s


@nb.njit(cache=True, inline="always")
def _edge_leave(C, edge, arg, members, count, pos, s, a):  # pragma: no cover - compiled
    """Sample ``s`` leaves worker ``a``: drop it from ``a``'s members and recompute the
    entries of row ``a`` it was the minimum of, over ``a``'s remaining samples."""
    w = C.shape[1]
    last = members[a, count[a] - 1]  # swap-remove: members are unordered
    members[a, pos[s]] = last
    pos[last] = pos[s]
    count[a] -= 1
    for b in range(w):
        if arg[a, b] != s:
            continue
        best = np.inf
        who = -1
        for m in range(count[a]):
            t = members[a, m]
            d = C[t, b] - C[t, a]
            if d < best or (d == best and t < who):
                best = d
                who = t
        edge[a, b] = best
        arg[a, b] = who


@nb.njit(cache=True)
def _transport_ssp(C, cap, x, rtol):  # pragma: no cover - compiled
    """Successive shortest paths on the W-worker residual graph; False on a numerical cycle.

    Samples are inserted in index order. Before inserting sample i, samples 0..i-1 are placed
    optimally (min-cost flow invariant: no negative cycle in the residual graph). The residual
    graph on the workers has an edge a -> b of cost min_{s on a} (C[s, b] - C[s, a]) (move the
    cheapest sample from a to b); the new sample enters worker j at cost C[i, j]; the path ends
    at a worker with room. Bellman-Ford over W nodes finds the shortest such path (ties: the
    lowest-index sample per edge, the lowest-index end worker); augmenting moves one sample per
    edge of the path.

    The edge minima are kept up to date rather than rebuilt for every sample: a sample joining
    a worker enters its row's minima (O(W)); one leaving it recomputes only the entries it was
    the minimum of, over that worker's samples. The graph is the one a rebuild from scratch
    gives, ties included. Bellman-Ford relaxes, after its first pass, only the workers whose
    distance moved since they were last relaxed (the others would change nothing), in the same
    order as full passes. Still O(N^2 W + N W^3) at worst (every move recomputing whole rows,
    W - 1 full passes), where rebuilding cost O(N^2 W) always; in practice paths are a move or
    two and the first pass dominates: O(N W^2).
    """
    n, w = C.shape
    room = cap.copy()
    edge = np.full((w, w), np.inf)
    arg = np.full((w, w), -1, dtype=np.int64)
    members = np.empty((w, max(1, cap.max())), dtype=np.int64)
    count = np.zeros(w, dtype=np.int64)
    pos = np.empty(n, dtype=np.int64)
    dist = np.empty(w)
    pred = np.empty(w, dtype=np.int64)
    moved = np.empty(w + 1, dtype=np.int64)
    source = np.empty(w + 1, dtype=np.int64)
    target = np.empty(w + 1, dtype=np.int64)
    bar = np.empty(w)  # dist[b] less the margin a new path must beat it by
    fresh = np.empty(w, dtype=np.bool_)  # dist[a] moved since row a was last relaxed
    for i in range(n):
        for j in range(w):
            dist[j] = C[i, j]
            bar[j] = dist[j] - rtol * max(1.0, abs(dist[j]))
            pred[j] = -1
            fresh[j] = True
        # Bellman-Ford in passes over a = 0..W-1. A row whose dist has not moved since it was
        # last relaxed would change nothing (its offers are what they were, every bar only
        # fell): it is skipped, so each pass does what a full pass does, in the same order.
        for _ in range(w - 1):
            changed = False
            for a in range(w):
                if not fresh[a]:
                    continue
                fresh[a] = False
                if count[a] == 0:  # no sample to move: no edge out of a
                    continue
                da = dist[a]  # no edge a -> a: dist[a] stays put over the row
                for b in range(w):  # every b != a has an edge (edge[a, a] is inf)
                    nd = da + edge[a, b]
                    if nd < bar[b]:
                        dist[b] = nd
                        bar[b] = nd - rtol * max(1.0, abs(nd))
                        pred[b] = a
                        fresh[b] = True
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
        while pred[b] >= 0:  # the path's moves, against the graph as it stands
            a = pred[b]
            moved[steps] = arg[a, b]
            source[steps] = a
            target[steps] = b
            b = a
            steps += 1
            if steps > w:
                return False
        for k in range(steps):
            s = moved[k]
            x[s] = target[k]
            _edge_leave(C, edge, arg, members, count, pos, s, source[k])
        for k in range(steps):
            s = moved[k]
            t = target[k]
            members[t, count[t]] = s
            pos[s] = count[t]
            count[t] += 1
            _edge_join(C, edge, arg, s, t)
        x[i] = b
        members[b, count[b]] = i
        pos[i] = count[b]
        count[b] += 1
        _edge_join(C, edge, arg, i, b)
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
    shortest paths on the W-worker residual graph (a numba kernel that keeps the graph's edges
    up to date as samples move rather than rebuilding them, and relaxes only the workers whose
    distance moved; exact and integral by construction, no LP rounding). Its times are
    ``benchmarks/dispatch_throughput.py``'s (``esd_exact``); at N = 1,024, W = 8 the kernel
    that rebuilt the graph took ~5-8 ms, against ~360 ms for ``linear_sum_assignment`` on the
    slot-expanded N x N matrix (~25 ms on tie-free random costs; cache-derived costs have many
    ties) and ~1.3 s for ``linprog(method="highs")`` on the LP. Should the kernel ever detect a
    numerical cycle it falls back to ``linear_sum_assignment`` (``method="transport-lsa"``).

    Ties: deterministic. Samples are inserted in index order; each goes along the cheapest
    augmenting path (a path must beat the incumbent by a relative 1e-12 to replace it; each edge
    moves the lowest-index cheapest sample; among equally cheap end workers the lowest index
    wins). The optimum returned among equal-cost ones is thus a fixed function of (C, cap).

    ``objective="makespan"`` minimises ``max_j sum_{i on j} C[i, j]`` with a MILP (HiGHS)
    under ``time_limit_s``, started from the total-cost optimum: if HiGHS neither proves
    optimality nor improves on it within the limit, that assignment is returned (``method``
    says so). ``optimal`` is True only when HiGHS proved
    optimality.

    Args:
        C: ``float[N, W]`` cost of sending sample ``i`` to worker ``j`` (finite).
        cap: ``int[W]`` capacities summing to N.
        objective: ``"total"`` or ``"makespan"``.
        time_limit_s: wall-time limit for the makespan MILP (ignored for ``"total"``).

    Returns:
        A [`Solution`][]; ``objective`` is the total cost or the makespan.
    """
    t0 = time.perf_counter()
    C = np.ascontiguousarray(C, dtype=np.float64)
    if C.ndim != 2:
        raise ValueError(f"C: expected a 2-D [N, W] array, got shape {C.shape}")
    if not np.all(np.isfinite(C)):
        raise ValueError("C: costs must be finite")
    n, w = C.shape
    cap = check_cap(cap, n, w)
    if objective not in OBJECTIVES:
        raise ValueError(f"objective {objective!r}: must be one of {OBJECTIVES}")
    x_total, method = _transport_exact(C, cap)
    if objective == "total":
        return Solution(x_total, additive_cost(C, x_total), method, True,
                        time.perf_counter() - t0, "optimal")
    return _solve_makespan(C, cap, x_total, time_limit_s, t0)


def _assignment_rows(n: int, w: int, cap: np.ndarray) -> tuple[np.ndarray, ...]:
    """COO rows of ``sum_j x_ij = 1`` and ``sum_i x_ij = cap_j`` over x laid out ``x[i * W + j]``.

    Returns:
        ``(rows, cols, vals, lower, upper)`` for the ``N + W`` rows.
    """
    var = np.arange(n * w, dtype=np.int64)
    rhs = np.concatenate([np.ones(n), cap.astype(np.float64)])
    return (np.concatenate([var // w, n + var % w]), np.concatenate([var, var]),
            np.ones(2 * var.size), rhs, rhs)


def _decode(xv: np.ndarray, n: int, w: int) -> np.ndarray:
    return np.asarray(xv[: n * w]).reshape(n, w).argmax(axis=1).astype(np.int64)


def _one_hot(x: np.ndarray, w: int) -> np.ndarray:
    v = np.zeros(x.size * w)
    v[np.arange(x.size) * w + x] = 1.0
    return v


def _makespan(C: np.ndarray, x: np.ndarray) -> float:
    loads = np.bincount(x, weights=C[np.arange(C.shape[0]), x], minlength=C.shape[1])
    return float(loads.max()) if loads.size else 0.0


@dataclass
class _MilpResult:
    """What `_highs_milp` found: ``values`` is None when it has no feasible point."""

    values: np.ndarray | None
    proven: bool
    improved: bool
    message: str
    gap: float | None
    bound: float | None


def _highs_milp(cost, rows, cols, vals, lower, upper, n_int, deadline, start,
                col_upper: float = 1.0) -> _MilpResult:
    """Minimise ``cost @ v`` s.t. ``lower <= M v <= upper`` (``M`` from COO ``rows, cols,
    vals``), the first ``n_int`` columns binary, the rest continuous in ``[0, col_upper]``.

    HiGHS (``highspy``) runs single-threaded from the feasible ``start`` (a MIP start, so an
    incumbent exists from the first node and the result is never worse than ``start``), with
    presolve off: its probing does not poll the clock (measured: 7.5 s under a 1 s limit on
    1,024 samples x 8 workers) and it removes nothing from these models. The time limit is
    enforced twice: HiGHS' own option, and an interrupt callback polled by the simplex and the
    branch and bound that stops it once ``deadline`` (``time.perf_counter()``) is past.
    """
    n_vars = cost.size
    m = int(lower.size)
    mat = csc_array((vals, (rows, cols)), shape=(m, n_vars))
    lp = highspy.HighsLp()
    lp.num_col_ = n_vars
    lp.num_row_ = m
    lp.col_cost_ = np.ascontiguousarray(cost, dtype=np.float64)
    lp.col_lower_ = np.zeros(n_vars)
    lp.col_upper_ = np.where(np.arange(n_vars) < n_int, 1.0, col_upper)
    lp.row_lower_ = np.where(np.isfinite(lower), lower, -highspy.kHighsInf)
    lp.row_upper_ = np.where(np.isfinite(upper), upper, highspy.kHighsInf)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = mat.indptr
    lp.a_matrix_.index_ = mat.indices
    lp.a_matrix_.value_ = mat.data
    lp.integrality_ = ([highspy.HighsVarType.kInteger] * n_int
                       + [highspy.HighsVarType.kContinuous] * (n_vars - n_int))
    h = highspy.Highs()
    for key, value in _HIGHS_OPTIONS.items():
        h.setOptionValue(key, value)
    h.setOptionValue("time_limit", max(deadline - time.perf_counter(), 1e-3))
    h.passModel(lp)
    sol = highspy.HighsSolution()
    sol.col_value = np.asarray(start, dtype=np.float64)
    sol.value_valid = True
    h.setSolution(sol)

    def interrupt(kind, message, data_out, data_in, user_data):
        if time.perf_counter() >= deadline:
            data_in.user_interrupt = True

    h.setCallback(interrupt, None)
    for kind in _INTERRUPTS:
        h.startCallback(kind)
    h.run()
    status = h.getModelStatus()
    info = h.getInfo()
    message = h.modelStatusToString(status)
    proven = status == highspy.HighsModelStatus.kOptimal
    values = None
    if info.primal_solution_status == 2:  # kSolutionStatusFeasible
        values = np.asarray(h.getSolution().col_value, dtype=np.float64)
    start_value = float(cost @ start)
    improved = values is not None and float(cost @ values) < start_value - 1e-9 * max(
        1.0, abs(start_value))
    gap = float(info.mip_gap) if np.isfinite(info.mip_gap) else None
    bound = float(info.mip_dual_bound) if np.isfinite(info.mip_dual_bound) else None
    return _MilpResult(values, proven, improved, message, gap, bound)


def _solve_makespan(C, cap, x_total, time_limit_s, t0) -> Solution:
    n, w = C.shape
    nx = n * w
    var = np.arange(nx, dtype=np.int64)
    # HiGHS' gap tolerances are absolute: scale costs to max 1; objectives are recomputed
    scale = float(np.abs(C).max()) if C.size and np.abs(C).max() > 0 else 1.0
    rows, cols, vals, lo, hi = _assignment_rows(n, w, cap)
    load_rows = n + w + np.concatenate([var % w, np.arange(w)])  # sum_i C_ij x_ij - T <= 0
    rows = np.concatenate([rows, load_rows])
    cols = np.concatenate([cols, var, np.full(w, nx)])
    vals = np.concatenate([vals, C.ravel() / scale, -np.ones(w)])
    lo = np.concatenate([lo, np.full(w, -np.inf)])
    hi = np.concatenate([hi, np.zeros(w)])
    cost = np.zeros(nx + 1)
    cost[-1] = 1.0  # min T
    fallback_val = _makespan(C, x_total)
    start = np.concatenate([_one_hot(x_total, w), [fallback_val / scale]])
    res = _highs_milp(cost, rows, cols, vals, lo, hi, nx, t0 + time_limit_s, start,
                      col_upper=np.inf)
    if res.values is not None and (res.proven or res.improved):
        x = _decode(res.values, n, w)
        return Solution(x, _makespan(C, x), "makespan-milp", res.proven,
                        time.perf_counter() - t0, res.message, res.gap,
                        None if res.bound is None else res.bound * scale)
    status = (f"{res.message}; the MILP did not improve on its start, the total-cost optimum "
              "(unproven for the makespan): returned it")
    return Solution(x_total, fallback_val, "transport (makespan fallback)", False,
                    time.perf_counter() - t0, status, res.gap,
                    None if res.bound is None else res.bound * scale)


# ------------------------------------------------------------------------------------------
# Exact deduplicated solver (ILP)
# ------------------------------------------------------------------------------------------
def solve_dedup_ilp(A, indptr, indices, cap, time_limit_s: float = 10.0) -> Solution:
    """Exact dispatch under the deduplicated cost model (MILP, HiGHS, under a hard time limit).

    The model is the module's dedup ILP, reduced without loss: a key used by one sample of the
    batch needs no ``y`` (at the optimum ``y_jk = x_ij``), so its cost joins that sample's ``x``
    cost; ``y_jk`` exists only for keys shared by two or more samples and pairs with
    ``A_jk > 0``. Variables ``x_ij`` are binary (laid out ``i * W + j``), ``y_jk`` continuous in
    ``[0, 1]`` (integral at any optimum).

    HiGHS starts from the better (dedup cost; the heuristic on a tie) of two cheap plans, the
    regret + swap heuristic ([`regret_swap`][]) and the additive optimum ([`solve_transport`][]
    on [`additive_matrix`][]), so it always holds a feasible plan and never returns a worse one.
    ``time_limit_s`` is a deadline on the whole call: HiGHS gets what is left after the start
    plans and the model build and is interrupted at the deadline (`_highs_milp`). What
    precedes its first poll of the clock (the start plans, the model build, HiGHS' setup) is not
    bounded: measured in ``benchmarks/dedup_ilp.py`` and the ``esd`` stage's probe (0.26-0.77 s
    past a 0.5 s limit on 512 x 8).

    The plan returned is named in ``method``: ``dedup-milp`` when HiGHS proved optimality or
    improved on the start, else the start's own name (``regret-swap`` or ``transport-ssp
    (additive optimum)``) with ``status`` saying that the MILP did not improve it and, when
    HiGHS got that far, its gap. On this workbench's instances the MILP proves optimality up to
    about 16 samples x 4 workers within a second (``benchmarks/dedup_ilp.py``).

    Args:
        A: ``float[W, U]`` per-(worker, key) cost, ``>= 0``.
        indptr: ``int[N + 1]`` CSR row pointer of the sample -> keys incidence.
        indices: ``int[nnz]`` keys in ``0..U-1``.
        cap: ``int[W]`` capacities summing to N.
        time_limit_s: wall-time limit of the whole call, in seconds.

    Returns:
        A [`Solution`][] with ``objective`` the dedup cost (recomputed by [`dedup_cost`][]),
        ``optimal`` True iff HiGHS proved optimality, ``mip_gap`` (relative) and ``dual_bound``
        (unscaled, the proven lower bound) from HiGHS, ``seconds`` the whole call's wall time.
    """
    t0 = time.perf_counter()
    A, indptr, indices = check_keys(A, indptr, indices)
    w, u = A.shape
    n = indptr.size - 1
    cap = check_cap(cap, n, w)
    nx = n * w
    best = _dedup_fallback(A, indptr, indices, cap)

    # unique (sample, key) incidences; keys of a single sample fold into its x cost
    rows_i = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    inc_i, inc_k = np.divmod(np.unique(rows_i * u + indices), u)
    single = np.bincount(inc_k, minlength=u)[inc_k] == 1
    x_cost = np.zeros((n, w))
    np.add.at(x_cost, inc_i[single], A[:, inc_k[single]].T)
    ii = np.repeat(inc_i[~single], w)
    kk = np.repeat(inc_k[~single], w)
    jj = np.tile(np.arange(w, dtype=np.int64), int((~single).sum()))
    pos = A[jj, kk] > 0
    ii, jj, kk = ii[pos], jj[pos], kk[pos]
    pair_codes, y_of = np.unique(jj * u + kk, return_inverse=True)
    # HiGHS' gap tolerances are absolute: scale the costs to max 1 (cost models in seconds
    # per row are ~1e-7) so that "optimal" means optimal; objectives are recomputed unscaled.
    scale = float(A.max()) if A.size and A.max() > 0 else 1.0
    cost = np.concatenate([x_cost.ravel(), A.ravel()[pair_codes]]) / scale
    m = ii.size
    rows, cols, vals, lo, hi = _assignment_rows(n, w, cap)
    link = n + w + np.arange(m)  # y_jk - x_ij >= 0
    rows = np.concatenate([rows, link, link])
    cols = np.concatenate([cols, nx + y_of, ii * w + jj])
    vals = np.concatenate([vals, np.ones(m), -np.ones(m)])
    lo = np.concatenate([lo, np.zeros(m)])
    hi = np.concatenate([hi, np.full(m, np.inf)])
    x0 = best.assignment
    used = np.zeros(w * u, dtype=bool)
    used[x0[rows_i] * u + indices] = True
    start = np.concatenate([_one_hot(x0, w), used[pair_codes].astype(np.float64)])
    res = _highs_milp(cost, rows, cols, vals, lo, hi, nx, t0 + time_limit_s, start)
    bound = None if res.bound is None else res.bound * scale
    if res.values is not None and (res.proven or res.improved):
        x = _decode(res.values, n, w)
        val = dedup_cost(A, indptr, indices, x)
        if val <= best.objective:
            return Solution(x, val, "dedup-milp", res.proven, time.perf_counter() - t0,
                            res.message, res.gap, bound)
    gap = "" if res.gap is None else f", gap {res.gap:.1%}"
    status = (f"{res.message}{gap}; the MILP did not improve on its start: returned "
              f"{best.method}")
    return Solution(best.assignment, best.objective, best.method, res.proven,
                    time.perf_counter() - t0, status, res.gap, bound)


def _dedup_fallback(A, indptr, indices, cap) -> Solution:
    """The better (dedup cost) of the regret + swap heuristic and the additive optimum; the
    heuristic on a tie."""
    heuristic = regret_swap(A, indptr, indices, cap)
    trans = solve_transport(additive_matrix(A, indptr, indices), cap)
    trans_val = dedup_cost(A, indptr, indices, trans.assignment)
    if trans_val < heuristic.objective:
        return Solution(trans.assignment, trans_val, trans.method + " (additive optimum)", False,
                        trans.seconds, "heuristic")
    return heuristic
