"""ESD: expected-transmission-cost sample dispatching, and the dispatchers it is compared with.

**Our formalisation** (DESIGN.md §3.3): the ESD paper's method section is not available, so the
cost model below is ours; every figure built on it says so.

Per global batch of N samples and W workers, with ``tau_j = D x 4 / B_j`` the seconds worker j
spends moving one row over its link, and the real state of every worker's HET cache::

    A[j, k] = tau_j x ( [k absent at j]                      miss pull
                      + [k cached at j, stale beyond s_read]  update pull
                      + [k absent at j] x P_j(dirty evict) )  expected push of a dirty victim
            + sum_{j' != j} tau_j' x [k dirty at j']          sync push another worker makes

    additive:      C[i, j] = sum_{k in K_i} A[j, k]           transportation problem (exact, LP)
    deduplicated:  sum_j sum_{k used on j} A[j, k]            ILP: a key is paid once per worker

``P_j(dirty evict)`` = dirty lines / capacity when j's cache is full (else 0). Worker j takes
``cap_j`` samples (equal shares by default).

Dispatchers (all assign exactly ``cap_j`` samples to worker j):

* ``contiguous``, ``random``: what frameworks do (:mod:`workbench.dispatch`);
* ``laia``: Herald's greedy hit-count scheduler on its own LRU snapshots (:mod:`workbench.laia`);
* ``esd_heuristic``: greedy on the deduplicated cost with marginal costs;
* ``esd_exact``: the additive transportation optimum (``mode="additive"``) or the deduplicated
  ILP under a time limit (``mode="dedup"``);
* ``hybriddis``: per batch, the cheap heuristic always, plus the exact solver when the instance
  is small or its predicted time fits the decision budget (predicted from the time per variable
  of earlier solves); it keeps the plan with the lower deduplicated cost (so it is never worse
  than the heuristic on the same state) and records which ran and how long it took.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numba as nb
import numpy as np

from workbench.cache import LINE_UPDATES, LINE_VERSION
from workbench.cluster import EdgeCluster
from workbench.dispatch import assign

DISPATCHERS = ("contiguous", "random", "laia", "esd_heuristic", "esd_exact", "hybriddis")


@dataclass
class Decision:
    """One batch's dispatch.

    Attributes:
        assignment: worker of every sample (``int64[N]``).
        method: what decided (e.g. ``"exact"`` or ``"heuristic"`` for hybriddis).
        seconds: wall time of the decision (not part of the emulated clock: the paper overlaps
            it with the previous iteration's compute).
        predicted_cost: the cost model's value of the assignment (NaN for cost-blind
            dispatchers).
        sync_plan_sizes: LAIA's ``|cplan[w]|`` per worker (zeros for the others).
    """

    assignment: np.ndarray
    method: str
    seconds: float
    predicted_cost: float = float("nan")
    sync_plan_sizes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


class CostModel:
    """Per-(worker, key) expected transmission costs from the cluster's real cache states.

    Args:
        cluster: the emulated cluster whose caches and links are read.
        wire_dim: embedding width used for row bytes (the cluster may move narrower rows).
    """

    def __init__(self, cluster: EdgeCluster, wire_dim: int | None = None) -> None:
        self.cluster = cluster
        dim = cluster.dim if wire_dim is None else wire_dim
        self.tau = dim * 4 / cluster.links.bandwidth_Bps  # seconds per row, per worker

    def key_costs(self, uniq: np.ndarray) -> np.ndarray:
        """``A[W, U]`` for the unique keys ``uniq`` (one compiled pass per worker)."""
        caches = self.cluster.caches
        cost = np.empty((len(caches), len(uniq)))
        dirty = np.zeros((len(caches), len(uniq)), dtype=np.bool_)
        versions = self.cluster.server.versions
        for j, cache in enumerate(caches):
            _worker_key_costs(cache.slot_of, cache.lines, versions, uniq,
                              cache.spec.read_bound, float(self.tau[j]),
                              cache.dirty_fraction(), cost[j], dirty[j])
        sync = self.tau[:, None] * dirty
        cost += sync.sum(axis=0, keepdims=True) - sync  # others' pushes of keys dirty there
        return cost

    def batch(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(A[W, U], indptr, indices)``: key costs and the samples' unique keys as CSR."""
        n, f = keys.shape
        uniq, inv = _unique_unsorted(np.ascontiguousarray(keys, dtype=np.int64).ravel(),
                                     self.cluster.server.scratch)
        indptr, indices = _sample_sets(inv.reshape(n, f))
        return self.key_costs(uniq), indptr, indices


@nb.njit(cache=True)
def _worker_key_costs(slot_of, lines, versions, uniq, read_bound, tau, p_dirty, out, dirty):
    """Row j of A: tau x (miss x (1 + p_dirty) + stale); and which keys are dirty at j."""
    for u in range(uniq.shape[0]):
        k = uniq[u]
        s = slot_of[k]
        if s < 0:
            out[u] = tau * (1.0 + p_dirty)
            dirty[u] = False
        else:
            out[u] = tau if versions[k] - lines[s, LINE_VERSION] > read_bound else 0.0
            dirty[u] = lines[s, LINE_UPDATES] > 0


@nb.njit(cache=True)
def _unique_unsorted(keys, scratch):
    """Distinct keys in first-appearance order and each occurrence's index among them.

    Uses the server's dedup scratch (see :func:`workbench.cache._unique`): O(n), no sort; the
    cost model does not need the keys ordered.
    """
    scratch[0, 0] += 1
    tick = scratch[0, 0]
    uniq = np.empty(keys.shape[0], np.int64)
    inv = np.empty(keys.shape[0], np.int64)
    m = 0
    for i in range(keys.shape[0]):
        k = keys[i] + 1
        if scratch[k, 0] != tick:
            scratch[k, 0] = tick
            scratch[k, 1] = m
            uniq[m] = k - 1
            m += 1
        inv[i] = scratch[k, 1]
    return uniq[:m], inv


@nb.njit(cache=True)
def _sample_sets(inv):
    """CSR of each sample's distinct unique-key indices (insertion-sorted within a sample)."""
    n, f = inv.shape
    indptr = np.zeros(n + 1, np.int64)
    indices = np.empty(n * f, np.int64)
    row = np.empty(f, np.int64)
    nnz = 0
    for i in range(n):
        for c in range(f):
            v = inv[i, c]
            p = c
            while p > 0 and row[p - 1] > v:
                row[p] = row[p - 1]
                p -= 1
            row[p] = v
        for c in range(f):
            if c == 0 or row[c] != row[c - 1]:
                indices[nnz] = row[c]
                nnz += 1
        indptr[i + 1] = nnz
    return indptr, indices[:nnz]


class Dispatcher:
    """Base class: assigns each sample of a global batch to a worker.

    Args:
        name: dispatcher name.
        workers: W.
        capacities: samples per worker (``int[W]``, summing to the batch size).
        seed: random stream of ``random``.
    """

    def __init__(self, name: str, workers: int, capacities: np.ndarray, seed: int = 0) -> None:
        self.name = name
        self.workers = workers
        self.capacities = np.asarray(capacities, dtype=np.int64)
        self.rng = np.random.default_rng(seed)

    def decide(self, keys: np.ndarray, batch_id: int) -> Decision:
        """Dispatch one batch (``keys``: ``int64[N, F]`` global keys)."""
        start = time.perf_counter()
        out = assign(self.name, self.workers, self.capacities, self.rng)
        return Decision(out, self.name, time.perf_counter() - start)


class LaiaBaseline(Dispatcher):
    """Herald's LAIA (its own LRU snapshots; the caches it models are the workers')."""

    def __init__(self, workers: int, capacities: np.ndarray, rows: int,
                 cache_rows: int) -> None:
        from workbench.laia import LaiaDispatcher

        super().__init__("laia", workers, capacities)
        self.laia = LaiaDispatcher(workers, rows, cache_rows)

    def decide(self, keys: np.ndarray, batch_id: int) -> Decision:
        start = time.perf_counter()
        res = self.laia.dispatch(keys, [int(c) for c in self.capacities], batch_id)
        return Decision(np.asarray(res.assignment, dtype=np.int64), "laia",
                        time.perf_counter() - start,
                        sync_plan_sizes=np.array([len(p) for p in res.cplan], dtype=np.int64))


class EsdDispatcher(Dispatcher):
    """ESD on the cost model: ``esd_heuristic``, ``esd_exact`` or ``hybriddis``.

    Args:
        name: which of the three.
        workers: W.
        capacities: samples per worker.
        cost_model: reads the cluster's cache states and links.
        mode: ``additive`` (transportation problem, exact in polynomial time) or ``dedup`` (ILP
            under ``time_limit_s``) for the exact solver.
        time_limit_s: MILP time limit of the dedup solver.
        budget_s: hybriddis' decision budget per batch.
        small_instance: hybriddis always runs the exact solver when N x W is at most this.
        objective: ``total`` (the paper's: the summed weighted cost) or ``makespan`` (the
            slowest worker's cost, a MILP under ``time_limit_s``; additive mode only).
        seconds_per_variable: hybriddis' predictor: the exact solver's expected seconds per
            sample-worker variable (calibrated by ``benchmarks/dispatch_throughput.py``). Fixed,
            the switch is deterministic; None learns it from the measured solves instead
            (adaptive, but then runs depend on machine speed).
    """

    def __init__(self, name: str, workers: int, capacities: np.ndarray, cost_model: CostModel,
                 mode: str = "additive", time_limit_s: float = 1.0, budget_s: float = 0.05,
                 small_instance: int = 2048, seconds_per_variable: float | None = None,
                 objective: str = "total") -> None:
        super().__init__(name, workers, capacities)
        if mode not in ("additive", "dedup"):
            raise ValueError(f"esd mode {mode!r}: must be 'additive' or 'dedup'")
        if objective not in ("total", "makespan") or (objective == "makespan"
                                                       and mode != "additive"):
            raise ValueError(f"esd objective {objective!r} with mode {mode!r}: use 'total', or "
                             "'makespan' with the additive mode")
        self.objective = objective
        self.cost_model = cost_model
        self.mode = mode
        self.time_limit_s = time_limit_s
        self.budget_s = budget_s
        self.small_instance = small_instance
        self.learn = seconds_per_variable is None
        self.seconds_per_variable = seconds_per_variable  # hybriddis' predictor

    def _exact(self, cost, indptr, indices):
        from workbench.esd_solvers import additive_matrix, solve_dedup_ilp, solve_transport

        if self.mode == "additive":
            return solve_transport(additive_matrix(cost, indptr, indices), self.capacities,
                                   objective=self.objective, time_limit_s=self.time_limit_s)
        return solve_dedup_ilp(cost, indptr, indices, self.capacities, self.time_limit_s)

    def decide(self, keys: np.ndarray, batch_id: int) -> Decision:
        from workbench.esd_solvers import dedup_cost, greedy_marginal

        start = time.perf_counter()
        cost, indptr, indices = self.cost_model.batch(keys)
        variables = keys.shape[0] * self.workers
        method = {"esd_heuristic": "heuristic", "esd_exact": "exact"}.get(self.name)
        if method is None:  # hybriddis
            predicted = (None if self.seconds_per_variable is None
                         else self.seconds_per_variable * variables)
            method = ("exact" if variables <= self.small_instance or predicted is None
                      or predicted <= self.budget_s else "heuristic")
        heuristic = None
        if method == "heuristic" or self.name == "hybriddis":
            heuristic = greedy_marginal(cost, indptr, indices, self.capacities)
            solution = heuristic
        if method == "exact":
            t0 = time.perf_counter()
            solution = self._exact(cost, indptr, indices)
            rate = (time.perf_counter() - t0) / variables
            if self.learn:
                self.seconds_per_variable = rate if self.seconds_per_variable is None else \
                    0.5 * self.seconds_per_variable + 0.5 * rate
            if heuristic is not None and (
                    dedup_cost(cost, indptr, indices, heuristic.assignment)
                    < dedup_cost(cost, indptr, indices, solution.assignment)):
                solution, method = heuristic, "exact>heuristic"  # keep the cheaper plan
        x = np.asarray(solution.assignment, dtype=np.int64)
        return Decision(x, method, time.perf_counter() - start,
                        predicted_cost=float(dedup_cost(cost, indptr, indices, x)))


def make_dispatcher(name: str, cluster: EdgeCluster, capacities: np.ndarray, *,
                    wire_dim: int | None = None, mode: str = "additive",
                    time_limit_s: float = 1.0, budget_s: float = 0.05,
                    small_instance: int = 2048, seconds_per_variable: float | None = None,
                    objective: str = "total", seed: int = 0) -> Dispatcher:
    """Build a dispatcher by name for ``cluster`` (LAIA's snapshots get the caches' capacity)."""
    workers = cluster.workers
    if name in ("contiguous", "random"):
        return Dispatcher(name, workers, capacities, seed)
    if name == "laia":
        return LaiaBaseline(workers, capacities, cluster.server.rows, cluster.spec.capacity)
    if name in ("esd_heuristic", "esd_exact", "hybriddis"):
        return EsdDispatcher(name, workers, capacities, CostModel(cluster, wire_dim), mode,
                             time_limit_s, budget_s, small_instance, seconds_per_variable,
                             objective)
    raise ValueError(f"dispatcher {name!r}: must be one of {DISPATCHERS}")


def run_dispatch(cluster: EdgeCluster, keys: np.ndarray, dispatcher: Dispatcher, batches: int,
                 update: float = -0.01, wire_dim: int | None = None,
                 progress: bool = False) -> list[dict]:
    """Dispatch and replay ``batches`` global batches of ``keys`` (``[samples, F]``).

    Global batch t is samples ``[t N, (t + 1) N)`` with N = the capacities' sum, wrapping
    around the trace. Each batch: the dispatcher decides on the current cache states; every
    worker reads its samples' keys through its cache; then every worker writes one constant
    update per key occurrence (BSP order); the cluster closes the iteration.

    Returns:
        One record per batch: ``assignment``, ``method``, ``decision_s``, ``predicted_cost``,
        ``sync_plan_sizes``, and per worker ``pulled_rows``, ``pushed_rows``, ``comm_s`` and
        ``transfer_s`` (rows x tau_j: the weighted transmission cost, latency excluded).
    """
    from tqdm.auto import tqdm

    n = int(dispatcher.capacities.sum())
    dim = cluster.dim if wire_dim is None else wire_dim
    tau = dim * 4 / cluster.links.bandwidth_Bps
    out = []
    for t in tqdm(range(batches), disable=not progress, desc=dispatcher.name, unit="batch"):
        idx = (np.arange(t * n, (t + 1) * n)) % len(keys)
        batch = keys[idx]
        decision = dispatcher.decide(batch, t)
        owned = [np.flatnonzero(decision.assignment == w) for w in range(cluster.workers)]
        for w, pos in enumerate(owned):
            cluster.read(w, batch[pos].ravel(), want_values=False)
        for w, pos in enumerate(owned):
            cluster.write(w, batch[pos].ravel(), update)
        rec = cluster.end_iteration()
        moved = rec["pulled_rows"] + rec["pushed_rows"]
        out.append({"samples": [idx[pos] for pos in owned], "method": decision.method,
                    "decision_s": decision.seconds, "predicted_cost": decision.predicted_cost,
                    "sync_plan_sizes": decision.sync_plan_sizes,
                    "pulled_rows": rec["pulled_rows"], "pushed_rows": rec["pushed_rows"],
                    "comm_s": rec["comm_s"], "transfer_s": moved * tau})
    return out
