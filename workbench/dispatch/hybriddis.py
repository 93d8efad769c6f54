"""ESD's dispatchers on the cost model: the heuristic, the exact solver and HybridDis.

**Our formalisation** (DESIGN.md §3.3): the ESD paper's method section is not available. Per
global batch the cost model (:mod:`workbench.dispatch.cost_model`) prices every (worker, key) on
the real cache states; then

* ``esd_heuristic``: greedy on the deduplicated cost with marginal costs
  (:mod:`workbench.dispatch.heuristic`);
* ``esd_exact``: the additive transportation optimum (``mode="additive"``) or the deduplicated
  ILP under a time limit (``mode="dedup"``) (:mod:`workbench.dispatch.exact`);
* ``hybriddis``: per batch, the cheap heuristic always, plus the exact solver when the instance
  is small or its predicted time fits the decision budget (predicted from the time per variable
  of earlier solves); it keeps the plan with the lower deduplicated cost (so it is never worse
  than the heuristic on the same state) and records which ran and how long it took::

      keys --cost model--> A[W, U], CSR --+--> greedy_marginal ------------------+--> cheaper plan
                                          |                                      |
                                          +--> exact (if N x W small or the -----+
                                               predicted time <= budget)
"""

from __future__ import annotations

import time

import numpy as np

from workbench.dispatch.base import Decision, Dispatcher
from workbench.dispatch.cost_model import CostModel
from workbench.dispatch.exact import solve_dedup_ilp, solve_transport
from workbench.dispatch.heuristic import greedy_marginal
from workbench.dispatch.objective import additive_matrix, dedup_cost


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
        if self.mode == "additive":
            return solve_transport(additive_matrix(cost, indptr, indices), self.capacities,
                                   objective=self.objective, time_limit_s=self.time_limit_s)
        return solve_dedup_ilp(cost, indptr, indices, self.capacities, self.time_limit_s)

    def decide(self, keys: np.ndarray, batch_id: int) -> Decision:
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
