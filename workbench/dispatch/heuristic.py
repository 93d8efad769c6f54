"""ESD's heuristics: greedy dispatch on marginal deduplicated costs, and its regret + swap form.

**Greedy (``greedy_marginal``).** Samples in a given order (default: batch order); each goes to
the worker with room whose *marginal* dedup cost ``sum_{k in K_i, k not yet claimed on j} A_jk``
is the smallest (ties to the lowest worker index); its keys are then claimed on that worker, so a
key shared by several samples of one worker is paid once (the models are in
[`workbench.dispatch.objective`][]). O(nnz x W) for the whole batch. In batch order it fails in
a telling way: when costs scale with a worker's link time, the fastest worker is the cheapest for
almost every sample, so it fills first with whatever samples come first, and the plan costs
what random costs (kept as ``esd_greedy`` for that lesson).

**Regret + swap (``regret_swap``, ESD's heuristic)**:

    C[i, j] = sum_{k in K_i} A[j, k]                   additive cost (upper bound of the marginal)
    regret_i = second smallest_j C[i, j] - smallest_j C[i, j]
    order    = samples by decreasing regret            (Vogel: who loses most if not served first)
    x        = greedy_marginal(order)                  capacity-feasible, deduplicated
    repeat up to `rounds` times:                       local improvement under capacity
        D[i, b] = sum_{k in K_i} A[b, k] [no sample on b uses k]
                - sum_{k in K_i} A[x_i, k] [i is the only sample on x_i using k]
        for every worker pair (a, b): samples on a ordered by D[., b], samples on b by D[., a]
            (ties by sample index); pair them off in that order while the estimated swap gain
            is positive, and swap a pair iff its exact delta (recomputed on the current claim
            counts) is < 0. Only candidates under (-1e-12 - the other side's best) are kept,
            in a heap popped as far as the pairing goes: no other can be reached before the
            estimate stops being a gain.
    stop when a round swaps nothing

Every swap keeps each worker's count, so the plan stays feasible for any capacities; the
deduplicated cost never rises (a swap is applied only when its exact delta is negative).
O(rounds x (nnz x W + W^2 x N)).

**The additive model (``regret_swap_additive``)**: with private keys (sample i alone uses key i
at ``A[j, i] = C[i, j]``, [`private_keys`][workbench.dispatch.objective.private_keys]) nothing is
ever shared, so the marginal is ``C[i, j]``, ``D[i, b] = C[i, b] - C[i, x_i]`` and a swap's exact
change is ``(C[i, b] - C[i, a]) + (C[j, a] - C[j, b])``: the same plan, objective and swap count as
``regret_swap`` on the keyed form, from ``C`` alone (no claim counts). One swap loop serves both
models (the state's type picks the model's deltas and swap test when the kernel compiles).
"""

from __future__ import annotations

import time

import numba as nb
import numpy as np
from numba.extending import overload

from workbench.dispatch.objective import (
    Solution,
    _additive_kernel,
    _dedup_kernel,
    check_cap,
    check_keys,
)


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
        A [`Solution`][] with ``objective`` the dedup cost (the sum of the chosen marginals,
        equal to `dedup_cost` up to float rounding), ``optimal=False``.
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


@nb.njit(cache=True)
def _unique_rows(indptr, indices, n_keys):  # pragma: no cover - compiled
    """The CSR with repeats inside a sample removed (claim counts need each key once)."""
    stamp = np.zeros(n_keys, dtype=np.int64)
    out_ptr = np.zeros(indptr.size, dtype=np.int64)
    out = np.empty(indices.size, dtype=np.int64)
    nnz = 0
    for i in range(indptr.size - 1):
        for p in range(indptr[i], indptr[i + 1]):
            k = indices[p]
            if stamp[k] != i + 1:
                stamp[k] = i + 1
                out[nnz] = k
                nnz += 1
        out_ptr[i + 1] = nnz
    return out_ptr, out[:nnz]


@nb.njit(cache=True)
def _move_delta(A, indptr, indices, count, i, a, b):  # pragma: no cover - compiled
    """Exact change of the dedup cost when sample i moves from worker a to worker b."""
    d = 0.0
    for p in range(indptr[i], indptr[i + 1]):
        k = indices[p]
        if count[b, k] == 0:
            d += A[b, k]
        if count[a, k] == 1:
            d -= A[a, k]
    return d


@nb.njit(cache=True)
def _apply_move(indptr, indices, count, x, i, a, b):  # pragma: no cover - compiled
    for p in range(indptr[i], indptr[i + 1]):
        k = indices[p]
        count[a, k] -= 1
        count[b, k] += 1
    x[i] = b


@nb.njit(cache=True)
def _keyed_deltas(state, x, D):  # pragma: no cover - compiled
    """``D[i, b]``: the exact dedup change of moving sample i from ``x[i]`` to b (0 on x[i])."""
    A, indptr, indices, count = state
    n, w = D.shape
    for i in range(n):
        for b in range(w):
            D[i, b] = 0.0 if b == x[i] else _move_delta(A, indptr, indices, count, i, x[i], b)


@nb.njit(cache=True)
def _keyed_swap(state, x, i, j, a, b):  # pragma: no cover - compiled
    """Swap sample i (on a) with sample j (on b) iff the exact change of the dedup cost, on the
    current claim counts, is negative; return whether it did."""
    A, indptr, indices, count = state
    d1 = _move_delta(A, indptr, indices, count, i, a, b)
    _apply_move(indptr, indices, count, x, i, a, b)
    d2 = _move_delta(A, indptr, indices, count, j, b, a)
    if d1 + d2 < -1e-12:
        _apply_move(indptr, indices, count, x, j, b, a)
        return True
    _apply_move(indptr, indices, count, x, i, b, a)
    return False


@nb.njit(cache=True)
def _additive_deltas(state, x, D):  # pragma: no cover - compiled
    """``D[i, b] = C[i, b] - C[i, x[i]]`` (0 on x[i]): with private keys, exactly what
    `_keyed_deltas` gives (``(0 + A[b, i]) - A[a, i]``), from ``C`` alone."""
    C = state[0]
    n, w = D.shape
    for i in range(n):
        a = x[i]
        here = C[i, a]
        for b in range(w):
            D[i, b] = 0.0 if b == a else C[i, b] - here


@nb.njit(cache=True)
def _additive_swap(state, x, i, j, a, b):  # pragma: no cover - compiled
    """`_keyed_swap` with private keys: the same test on ``C`` alone."""
    C = state[0]
    if (C[i, b] - C[i, a]) + (C[j, a] - C[j, b]) < -1e-12:
        x[i] = b
        x[j] = a
        return True
    return False


@nb.njit(cache=True, _nrt=False, inline="always")
def _before(keep, values, p, q):  # pragma: no cover - compiled
    """Candidate ``p`` comes before ``q``: a smaller delta, ties by sample index."""
    return values[p] < values[q] or (values[p] == values[q] and keep[p] < keep[q])


@nb.njit(cache=True, _nrt=False)
def _sift_down(keep, values, p, m):  # pragma: no cover - compiled
    """Restore the heap below position ``p`` of the first ``m`` candidates."""
    while True:
        c = 2 * p + 1
        if c >= m:
            return
        if c + 1 < m and _before(keep, values, c + 1, c):
            c += 1
        if not _before(keep, values, c, p):
            return
        keep[p], keep[c] = keep[c], keep[p]
        values[p], values[c] = values[c], values[p]
        p = c


@nb.njit(cache=True, _nrt=False)
def _candidates(members, size, D, col, below, keep, values):  # pragma: no cover - compiled
    """The first ``size`` of ``members`` whose ``D[., col]`` is under ``below``, into ``keep``
    (their deltas into ``values``) as a binary min-heap by (delta, sample index): popped one at
    a time (`_pop`) they come in the order a stable argsort of the member list gives (members
    are ascending sample indices). A pair (t-th of a, t-th of b) is tried only while the deltas
    sum under -1e-12, so a member at or over ``below`` (-1e-12 - the other side's best) is never
    reached, and most pairs stop after a few: popping the few that are tried (O(m + t log m))
    instead of sorting all m (O(m log m), O(m^2) by insertion) makes the same swaps. Returns how
    many were kept."""
    m = 0
    for t in range(size):
        i = members[t]
        v = D[i, col]
        if v < below:
            keep[m] = i
            values[m] = v
            m += 1
    for p in range(m // 2 - 1, -1, -1):
        _sift_down(keep, values, p, m)
    return m


@nb.njit(cache=True, _nrt=False)
def _pop(keep, values, m):  # pragma: no cover - compiled
    """Remove the heap's first candidate (``keep[0]``, ``values[0]``); returns the new size."""
    m -= 1
    keep[0] = keep[m]
    values[0] = values[m]
    _sift_down(keep, values, 0, m)
    return m


@nb.njit(cache=True, _nrt=False)
def _column_min(members, size, D, col):  # pragma: no cover - compiled
    best = np.inf
    for t in range(size):
        best = min(best, D[members[t], col])
    return best


@nb.njit(cache=True, _nrt=False)
def _replace_member(members, size, w, old, new):  # pragma: no cover - compiled
    """In w's ascending member list, replace sample ``old`` by ``new`` (order kept)."""
    row = members[w]
    t = 0
    while row[t] != old:
        t += 1
    while t + 1 < size[w] and row[t + 1] < new:  # shift left over smaller members
        row[t] = row[t + 1]
        t += 1
    while t > 0 and row[t - 1] > new:  # or right over larger ones
        row[t] = row[t - 1]
        t -= 1
    row[t] = new


def _deltas(state, x, D):  # pragma: no cover - resolved at compile time (overload below)
    raise NotImplementedError


def _swap(state, x, i, j, a, b):  # pragma: no cover - resolved at compile time
    raise NotImplementedError


@overload(_deltas)
def _deltas_model(state, x, D):  # pragma: no cover - compiled
    """The model's move estimates: keyed ``(A, indptr, indices, count)`` or additive ``(C,)``
    (picked by the state's type when a kernel compiles, so the kernels stay cacheable)."""
    if len(state) == 4:
        return lambda state, x, D: _keyed_deltas(state, x, D)
    return lambda state, x, D: _additive_deltas(state, x, D)


@overload(_swap)
def _swap_model(state, x, i, j, a, b):  # pragma: no cover - compiled
    """The model's exact swap test (`_keyed_swap` or `_additive_swap`)."""
    if len(state) == 4:
        return lambda state, x, i, j, a, b: _keyed_swap(state, x, i, j, a, b)
    return lambda state, x, i, j, a, b: _additive_swap(state, x, i, j, a, b)


@nb.njit(cache=True)
def _swap_rounds(state, x, w, rounds):  # pragma: no cover - compiled
    """Pairwise swaps that lower the dedup cost (see the module docstring); returns
    ``(swaps, rounds run)``. The model is the state's: keyed ``(A, indptr, indices, count)``
    (claim counts) or additive ``(C,)``; its deltas fill the move estimates at a round's start,
    its swap test swaps iff the exact change is negative."""
    n = x.size
    D = np.empty((n, w))
    members = np.empty((w, n), np.int64)  # each worker's samples, ascending
    size = np.zeros(w, np.int64)
    for i in range(n):
        members[x[i], size[x[i]]] = i
        size[x[i]] += 1
    ka, kb = np.empty(n, np.int64), np.empty(n, np.int64)  # candidate heaps, reused by pairs
    va, vb = np.empty(n), np.empty(n)
    swaps = 0
    done = 0
    for _ in range(rounds):
        done += 1
        _deltas(state, x, D)
        improved = False
        for a in range(w):
            for b in range(a + 1, w):
                if size[a] == 0 or size[b] == 0:
                    continue
                min_a = _column_min(members[a], size[a], D, b)
                min_b = _column_min(members[b], size[b], D, a)
                if min_a + min_b >= -1e-12:
                    continue  # not even the two best candidates gain
                # best candidates a -> b first; only those that can pair into a gain
                na = _candidates(members[a], size[a], D, b, -1e-12 - min_b, ka, va)
                nb_ = _candidates(members[b], size[b], D, a, -1e-12 - min_a, kb, vb)
                while na > 0 and nb_ > 0:
                    i, j = ka[0], kb[0]
                    if va[0] + vb[0] >= -1e-12:
                        break  # the estimates only get worse down the lists
                    na = _pop(ka, va, na)
                    nb_ = _pop(kb, vb, nb_)
                    if x[i] != a or x[j] != b:
                        continue
                    if _swap(state, x, i, j, a, b):
                        _replace_member(members, size, a, i, j)
                        _replace_member(members, size, b, j, i)
                        swaps += 1
                        improved = True
        if not improved:
            break
    return swaps, done


@nb.njit(cache=True)
def _swap_improve(A, indptr, indices, x, rounds):  # pragma: no cover - compiled
    """`_swap_rounds` on the keyed (dedup) model, from the plan ``x``."""
    w, u = A.shape
    count = np.zeros((w, u), dtype=np.int32)
    for i in range(indptr.size - 1):
        for p in range(indptr[i], indptr[i + 1]):
            count[x[i], indices[p]] += 1
    return _swap_rounds((A, indptr, indices, count), x, w, rounds)


@nb.njit(cache=True)
def _additive_plan(C, cap, rounds, x):  # pragma: no cover - compiled
    """The regret order, the greedy and the swaps on ``C[N, W]`` alone (private keys): the
    plan into ``x``; returns ``(objective, swaps, rounds run)``."""
    n, w = C.shape
    regret = np.zeros(n)
    if w > 1:
        for i in range(n):
            lo, second = np.inf, np.inf
            for j in range(w):
                c = C[i, j]
                if c < lo:
                    lo, second = c, lo
                elif c < second:
                    second = c
            regret[i] = second - lo
    order = np.argsort(-regret, kind="mergesort")
    room = cap.copy()
    for t in range(n):  # nothing is ever claimed twice: the marginal is C[i, j]
        i = order[t]
        best = -1
        for j in range(w):
            if room[j] > 0 and (best < 0 or C[i, j] < C[i, best]):
                best = j
        x[i] = best
        room[best] -= 1
    swaps, done = (0, 0)
    if rounds > 0 and n:
        swaps, done = _swap_rounds((C,), x, w, rounds)
    total = 0.0
    for i in range(n):
        total += C[i, x[i]]
    return total, swaps, done


def regret_swap_additive(C, cap, rounds: int = 20) -> Solution:
    """[`regret_swap`][] on the additive model, from ``C[N, W]`` alone.

    The same plan, objective and status as ``regret_swap(*private_keys(C), cap, rounds)``
    (sample ``i`` alone uses key ``i``, at cost ``C[i, j]`` on worker ``j``), without the keyed
    form's claim counts: a key is never shared, so a marginal is ``C[i, j]`` and a swap's exact
    change is ``(C[i, b] - C[i, a]) + (C[j, a] - C[j, b])``. What the ESD dispatchers run in
    their (default) additive mode.

    Args:
        C: ``float[N, W]`` cost of each sample on each worker, ``>= 0``.
        cap: ``int[W]`` capacities summing to N.
        rounds: at most this many rounds of swaps (0: the regret-ordered greedy alone).

    Returns:
        A [`Solution`][] with the additive cost as ``objective``; ``status`` says how many
        swaps were made in how many rounds.
    """
    t0 = time.perf_counter()
    C = np.ascontiguousarray(C, dtype=np.float64)
    if C.ndim != 2 or not np.all(np.isfinite(C)) or np.any(C < 0):
        raise ValueError("C: expected a 2-D [N, W] array of finite costs >= 0")
    cap = check_cap(cap, C.shape[0], C.shape[1])
    x = np.empty(C.shape[0], dtype=np.int64)
    total, swaps, done = _additive_plan(C, cap, rounds, x)
    return Solution(x, float(total), "regret-swap", False, time.perf_counter() - t0,
                    f"heuristic: {swaps} swap(s) in {done} round(s)")


def regret_swap(A, indptr, indices, cap, rounds: int = 20) -> Solution:
    """ESD heuristic: regret-ordered marginal greedy, then pairwise swaps (module docstring).

    Args:
        A: ``float[W, U]`` per-(worker, key) cost, ``>= 0``.
        indptr: ``int[N + 1]`` CSR row pointer.
        indices: ``int[nnz]`` keys in ``0..U-1``.
        cap: ``int[W]`` capacities summing to N.
        rounds: at most this many rounds of swaps (0: the regret-ordered greedy alone).

    Returns:
        A [`Solution`][] with the dedup cost as ``objective``; ``status`` says how many swaps
        were made in how many rounds.
    """
    t0 = time.perf_counter()
    A, indptr, indices = check_keys(A, indptr, indices)
    n = indptr.size - 1
    cap = check_cap(cap, n, A.shape[0])
    indptr, indices = _unique_rows(indptr, indices, A.shape[1])
    C = np.zeros((n, A.shape[0]))
    _additive_kernel(A, indptr, indices, C)
    if A.shape[0] > 1:
        part = np.partition(C, 1, axis=1)
        regret = part[:, 1] - part[:, 0]
    else:
        regret = np.zeros(n)
    order = np.argsort(-regret, kind="stable").astype(np.int64)
    x = np.empty(n, dtype=np.int64)
    _greedy_kernel(A, indptr, indices, cap, order, x)
    swaps, done = _swap_improve(A, indptr, indices, x, rounds) if rounds > 0 and n else (0, 0)
    total = float(_dedup_kernel(A, indptr, indices, x))
    return Solution(x, total, "regret-swap", False, time.perf_counter() - t0,
                    f"heuristic: {swaps} swap(s) in {done} round(s)")
