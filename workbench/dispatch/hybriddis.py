"""ESD's dispatchers on the cost model: the heuristic, the exact solver and HybridDis.

**Our formalisation** (the cost model: `workbench/dispatch/cost_model.py`): the ESD paper's method section is not available. Per
global batch the cost model (:mod:`workbench.dispatch.cost_model`) prices every (worker, key) on
the real cache states; then

* every solver optimises the model of ``mode``: ``additive`` (default; every sample pays its
  own keys, the transportation problem) or ``dedup`` (a key shared by samples on one worker is
  paid once). The dedup model is myopic at steady state: it rewards piling samples that share
  missing keys onto one worker, whose misses then evict rows its other samples need; on the same
  cache states the dedup heuristic's plans are predicted cheaper than the additive optimum's and
  realise about a third more (``benchmarks/esd_objective_ranking.py``);
* ``esd_heuristic``: regret-ordered greedy on marginal costs plus pairwise swaps
  (:func:`~workbench.dispatch.heuristic.regret_swap`); ``esd_greedy``: the plain greedy in batch
  order (:func:`~workbench.dispatch.heuristic.greedy_marginal`), kept as a named variant because
  it shows how a cost-blind order fails (the fastest worker fills first);
* ``esd_exact``: the additive transportation optimum (``mode="additive"``) or the deduplicated
  ILP under a time limit (``mode="dedup"``) (:mod:`workbench.dispatch.exact`);
* ``hybriddis``: per batch, the cheap heuristic always, plus the exact solver when the instance
  is small or its predicted time fits the decision budget; it keeps the plan with the lower
  cost under the model (so it is never worse than the heuristic on the same state) and records
  which ran and how long it took.

  *Budget*: the time the decision can hide behind, i.e. the previous iteration's compute on
  the emulated clock (the trainer calls :meth:`EsdDispatcher.set_budget` every iteration; the
  ESD sweeps set the calibrated compute of one iteration) times ``budget_fraction``.
  *Predictor* of the exact solver's seconds for V = N x W variables: ``t(V) = a + b V``;
  ``fixed`` keeps ``a = 0, b = seconds_per_variable`` (deterministic runs); ``online`` refits
  ``(a, b)`` by least squares on the last 32 observed (V, wall seconds) solves, starting from the
  fixed prior (adaptive; runs then depend on machine speed).
  *Charge*: when the exact solver runs, ``max(0, t - budget)`` seconds go on the emulated clock
  (``Decision.charged_s``), with ``t`` the predicted time under ``fixed`` and the measured wall
  time under ``online``::

      keys --cost model--> A[W, U], CSR --+--> regret_swap ----------------------+--> cheaper plan
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
from workbench.dispatch.heuristic import greedy_marginal, regret_swap
from workbench.dispatch.objective import additive_matrix, dedup_cost, private_keys


class EsdDispatcher(Dispatcher):
    """ESD on the cost model: ``esd_heuristic``, ``esd_exact`` or ``hybriddis``.

    Args:
        name: ``esd_heuristic``, ``esd_greedy``, ``esd_exact`` or ``hybriddis``.
        workers: W.
        capacities: samples per worker.
        cost_model: reads the cluster's cache states and links.
        mode: the model every solver optimises: ``additive`` (the exact solver is the
            transportation problem, exact in polynomial time) or ``dedup`` (the exact solver is
            the ILP under ``time_limit_s``).
        time_limit_s: MILP time limit of the dedup solver.
        budget_s: hybriddis' decision budget per batch.
        small_instance: hybriddis always runs the exact solver when N x W is at most this.
        objective: ``total`` (the paper's: the summed weighted cost) or ``makespan`` (the
            slowest worker's cost, a MILP under ``time_limit_s``; additive mode only).
        seconds_per_variable: hybriddis' predictor: the exact solver's expected seconds per
            sample-worker variable (calibrated by ``benchmarks/dispatch_throughput.py``). Fixed,
            the switch is deterministic; None learns it from the measured solves instead
            (adaptive, but then runs depend on machine speed).
        heuristic_rounds: swap rounds of the regret heuristic.
        predictor: ``fixed`` or ``online`` (see the module docstring); None: ``online`` when
            ``seconds_per_variable`` is None, else ``fixed``.
    """

    def __init__(self, name: str, workers: int, capacities: np.ndarray, cost_model: CostModel,
                 mode: str = "additive", time_limit_s: float = 1.0, budget_s: float = 0.05,
                 small_instance: int = 2048, seconds_per_variable: float | None = None,
                 objective: str = "total", heuristic_rounds: int = 1,
                 predictor: str | None = None) -> None:
        super().__init__(name, workers, capacities)
        self.heuristic_rounds = heuristic_rounds
        if predictor is None:
            predictor = "online" if seconds_per_variable is None else "fixed"
        if predictor not in ("fixed", "online"):
            raise ValueError(f"hybriddis predictor {predictor!r}: must be 'fixed' or 'online'")
        if predictor == "fixed" and seconds_per_variable is None:
            raise ValueError("the fixed predictor needs seconds_per_variable")
        self.predictor = predictor
        self._observed: list[tuple[float, float]] = []
        self._fit = (0.0, seconds_per_variable or 0.0)
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

    def set_budget(self, seconds: float) -> None:
        """The time the next decision can hide behind (the previous iteration's compute)."""
        self.budget_s = float(seconds)

    def predict_seconds(self, variables: int) -> float:
        """The exact solver's predicted seconds for ``variables`` = N x W."""
        a, b = self._fit
        return max(0.0, a + b * variables)

    def _observe(self, variables: int, seconds: float) -> None:
        if self.predictor != "online":
            return
        self._observed = (self._observed + [(float(variables), seconds)])[-32:]
        v = np.array([o[0] for o in self._observed])
        t = np.array([o[1] for o in self._observed])
        if len(self._observed) >= 3 and np.ptp(v) > 0:
            b, a = np.polyfit(v, t, 1)
            self._fit = (max(float(a), 0.0), max(float(b), 0.0))
        else:  # one size seen so far: a rate through the origin
            self._fit = (0.0, float(t.sum() / v.sum()))

    def _model(self, cost, indptr, indices):
        """The cost inputs of the model every solver of this dispatcher optimises.

        ``dedup``: the cost model's ``(A, CSR)`` as they are. ``additive``: each sample's keys
        made private (:func:`~workbench.dispatch.objective.private_keys`), so that the dedup
        cost *is* the additive cost and the heuristic optimises what the exact solver does.
        """
        if self.mode == "dedup":
            return cost, indptr, indices
        return private_keys(additive_matrix(cost, indptr, indices))

    def _exact(self, cost, indptr, indices):
        if self.mode == "additive":
            return solve_transport(cost.T, self.capacities, objective=self.objective,
                                   time_limit_s=self.time_limit_s)
        return solve_dedup_ilp(cost, indptr, indices, self.capacities, self.time_limit_s)

    def decide(self, keys: np.ndarray, batch_id: int) -> Decision:
        start = time.perf_counter()
        cost, indptr, indices = self._model(*self.cost_model.batch(keys))
        variables = keys.shape[0] * self.workers
        method = {"esd_heuristic": "heuristic", "esd_greedy": "greedy",
                  "esd_exact": "exact"}.get(self.name)
        predicted = self.predict_seconds(variables)
        if method is None:  # hybriddis
            method = ("exact" if variables <= self.small_instance or predicted <= self.budget_s
                      else "heuristic")
        heuristic = None
        charged = 0.0
        if method == "greedy":
            solution = greedy_marginal(cost, indptr, indices, self.capacities)
        if method == "heuristic" or self.name == "hybriddis":
            heuristic = regret_swap(cost, indptr, indices, self.capacities,
                                    self.heuristic_rounds)
            solution = heuristic
        if method == "exact":
            t0 = time.perf_counter()
            solution = self._exact(cost, indptr, indices)
            wall = time.perf_counter() - t0
            self._observe(variables, wall)
            if self.name == "hybriddis":
                spent = wall if self.predictor == "online" else predicted
                charged = max(0.0, spent - self.budget_s)
            method = f"exact:{solution.method}"  # which plan: the optimum or a fallback
            if heuristic is not None and (
                    dedup_cost(cost, indptr, indices, heuristic.assignment)
                    < dedup_cost(cost, indptr, indices, solution.assignment)):
                solution, method = heuristic, f"{method}>heuristic"  # keep the cheaper plan
        x = np.asarray(solution.assignment, dtype=np.int64)
        return Decision(x, method, time.perf_counter() - start,
                        predicted_cost=float(dedup_cost(cost, indptr, indices, x)),
                        charged_s=charged)
