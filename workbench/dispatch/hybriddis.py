"""ESD's dispatchers on the cost model: the heuristic, the exact solver and HybridDis.

**Our formalisation** (the cost model: `workbench/dispatch/cost_model.py`): the ESD paper's
method section is not available. Per global batch the cost model
([`workbench.dispatch.cost_model`][]) prices every (worker, key) on the real cache states; then

* every solver optimises the model of ``mode``: ``additive`` (default; every sample pays its
  own keys, the transportation problem) or ``dedup`` (a key shared by samples on one worker is
  paid once). The dedup model is myopic at steady state: it rewards piling samples that share
  missing keys onto one worker, whose misses then evict rows its other samples need; on the same
  cache states the dedup heuristic's plans are predicted cheaper than the additive optimum's and
  realise about a third more (``benchmarks/esd_objective_ranking.py``);
* ``esd_heuristic``: regret-ordered greedy on marginal costs plus pairwise swaps
  ([`regret_swap`][workbench.dispatch.heuristic.regret_swap]; in additive mode its equal on ``C``
  alone, [`regret_swap_additive`][workbench.dispatch.heuristic.regret_swap_additive]);
  ``esd_greedy``: the plain greedy in batch order
  ([`greedy_marginal`][workbench.dispatch.heuristic.greedy_marginal]), kept as a named variant
  because it shows how a cost-blind order fails (the fastest worker fills first);
* ``esd_exact``: the additive transportation optimum (``mode="additive"``) or the deduplicated
  ILP under a time limit (``mode="dedup"``) ([`workbench.dispatch.exact`][]);
* ``hybriddis``: per batch, the cheap heuristic always, plus the exact solver when the instance
  is small or its predicted time fits the decision budget; it keeps the plan with the lower
  cost under the model (so it is never worse than the heuristic on the same state) and records
  which ran and how long it took.

  *Budget*: the time the decision can hide behind, i.e. the previous iteration's compute on
  the emulated clock (the trainer calls [`HybridDis.set_budget`][] every iteration; the
  ESD sweeps set the calibrated compute of one iteration) times ``budget_fraction``.
  *Look-ahead* ``K`` (``SolverOptions.lookahead``): the dispatcher may decide up to ``K``
  batches ahead of the training, so the budget it does not spend on a batch (the heuristic's
  batches) is saved, up to ``K`` budgets; the exact solver runs when the saved budget covers
  its predicted time, and its time is drawn from the saving. So at a budget ``b`` below the
  exact solver's time ``t`` (and ``t <= K b``), the exact solver decides about ``b / t`` of the
  batches and the heuristic the rest; ``K = 1`` (the default) saves nothing: the exact solver
  runs on every batch or on none:

      saved <- min(saved + b, K b)
      exact if N x W <= small_instance or t <= saved;  then saved <- max(0, saved - t)
  *Predictor* of the exact solver's seconds for V = N x W variables: ``t(V) = a + b V``;
  ``fixed`` keeps ``a = intercept_s, b = seconds_per_variable`` (deterministic runs: a prior,
  or a least-squares fit of measured solves, [`fit_exact_time`][]); ``online`` refits
  ``(a, b)`` by least squares on the last 32 observed (V, wall seconds) solves, starting from the
  fixed prior (adaptive; runs then depend on machine speed).
  *Charge*: when the exact solver runs, ``max(0, t - saved)`` seconds go on the emulated clock
  (``Decision.charged_s``), with ``t`` the predicted time under ``fixed`` and the measured wall
  time under ``online``:

      keys --cost model--> A[W, U], CSR --+--> regret_swap ----------------------+--> cheaper plan
                                          |                                      |
                                          +--> exact (if N x W small or the -----+
                                               predicted time <= saved budget)

Each dispatcher is one strategy class on the shared machinery of [`EsdDispatcher`][] (the
cost model, the model of ``mode``, the exact solver and its time predictor):
[`EsdGreedy`][], [`EsdHeuristic`][], [`EsdExact`][] and [`HybridDis`][]. Their
settings are one [`SolverOptions`][] record (``EsdConfig.dispatcher_options()`` as fields).
"""

from __future__ import annotations

import time
from abc import abstractmethod
from dataclasses import dataclass

import numpy as np

from workbench.dispatch.base import Decision, Dispatcher
from workbench.dispatch.cost_model import CostModel
from workbench.dispatch.exact import solve_dedup_ilp, solve_transport
from workbench.dispatch.heuristic import greedy_marginal, regret_swap, regret_swap_additive
from workbench.dispatch.objective import (
    Solution,
    dedup_cost,
    private_keys,
)


@dataclass(frozen=True)
class SolverOptions:
    """The settings of ESD's solvers (every cost-aware dispatcher but LAIA reads them).

    Attributes:
        mode: the model every solver optimises: ``additive`` (the exact solver is the
            transportation problem, exact in polynomial time) or ``dedup`` (the exact solver is
            the ILP under ``time_limit_s``).
        time_limit_s: MILP time limit of the dedup and makespan solvers.
        budget_s: hybriddis' decision budget per batch until the first
            [`set_budget`][workbench.dispatch.base.Dispatcher.set_budget].
        small_instance: hybriddis always runs the exact solver when N x W is at most this.
        seconds_per_variable: hybriddis' predictor: the exact solver's expected seconds per
            sample-worker variable. Fixed, the switch is deterministic; None learns it from the
            measured solves instead (adaptive, but then runs depend on machine speed).
        intercept_s: the fixed predictor's seconds at zero variables (``a``; 0: a rate through
            the origin).
        objective: ``total`` (the paper's: the summed weighted cost) or ``makespan`` (the
            slowest worker's cost, a MILP under ``time_limit_s``; additive mode only).
        heuristic_rounds: swap rounds of the regret heuristic.
        predictor: ``fixed`` or ``online`` (see the module docstring); None: ``online`` when
            ``seconds_per_variable`` is None, else ``fixed``.
        lookahead: hybriddis' look-ahead K: the batches it may decide ahead of the training,
            so the most budgets it can save for the exact solver (1: none saved).

    Raises:
        ValueError: an unknown mode, objective or predictor, ``makespan`` with the dedup
            mode, or the fixed predictor without ``seconds_per_variable``.
    """

    mode: str = "additive"
    time_limit_s: float = 1.0
    budget_s: float = 0.05
    small_instance: int = 2048
    seconds_per_variable: float | None = None
    intercept_s: float = 0.0
    objective: str = "total"
    heuristic_rounds: int = 1
    predictor: str | None = None
    lookahead: int = 1

    def __post_init__(self) -> None:
        if self.lookahead < 1:
            raise ValueError(f"hybriddis lookahead {self.lookahead}: must be at least 1")
        if self.predictor not in (None, "fixed", "online"):
            raise ValueError(f"hybriddis predictor {self.predictor!r}: must be 'fixed' or "
                             "'online'")
        if self.resolved_predictor == "fixed" and self.seconds_per_variable is None:
            raise ValueError("the fixed predictor needs seconds_per_variable")
        if self.mode not in ("additive", "dedup"):
            raise ValueError(f"esd mode {self.mode!r}: must be 'additive' or 'dedup'")
        if self.objective not in ("total", "makespan") or (self.objective == "makespan"
                                                            and self.mode != "additive"):
            raise ValueError(f"esd objective {self.objective!r} with mode {self.mode!r}: use "
                             "'total', or 'makespan' with the additive mode")

    @property
    def resolved_predictor(self) -> str:
        """``predictor``, or its default: ``online`` without ``seconds_per_variable``, else
        ``fixed``."""
        if self.predictor is None:
            return "online" if self.seconds_per_variable is None else "fixed"
        return self.predictor


def fit_exact_time(variables: np.ndarray, seconds: np.ndarray) -> tuple[float, float]:
    """HybridDis' fixed predictor fitted to measured solves: ``(a, b)`` of ``t(V) = a + b V``
    by least squares over the pairs, both clipped at zero (a rate through the origin when
    every solve has the same V).

    Raises:
        ValueError: no solves, or the arrays differ in length.
    """
    v, t = np.asarray(variables, dtype=float), np.asarray(seconds, dtype=float)
    if v.size == 0 or v.shape != t.shape:
        raise ValueError(f"fit_exact_time: {v.size} sizes and {t.size} times: need equal, "
                         "non-empty arrays")
    if np.ptp(v) == 0:
        return 0.0, max(float(t.sum() / v.sum()), 0.0)
    b, a = np.polyfit(v, t, 1)
    if a < 0:  # through the origin instead of a negative intercept
        return 0.0, max(float((v * t).sum() / (v * v).sum()), 0.0)
    return float(a), max(float(b), 0.0)


class EsdDispatcher(Dispatcher):
    """ESD on the cost model: what its strategies share (subclasses: [`EsdGreedy`][],
    [`EsdHeuristic`][], [`EsdExact`][], [`HybridDis`][]).

    Every decision prices the batch on the cost model, hands the model of ``options.mode`` to
    the strategy's `_plan`, and records the plan's cost under that model.

    Args:
        workers: W.
        capacities: samples per worker.
        cost_model: reads the cluster's cache states and links.
        options: the solvers' settings ([`SolverOptions`][]).
    """

    def __init__(self, workers: int, capacities: np.ndarray, cost_model: CostModel,
                 options: SolverOptions | None = None) -> None:
        super().__init__(workers, capacities)
        options = SolverOptions() if options is None else options
        self.options = options
        self.heuristic_rounds = options.heuristic_rounds
        self.predictor = options.resolved_predictor
        self._observed: list[tuple[float, float]] = []
        self._fit = (options.intercept_s, options.seconds_per_variable or 0.0)
        self.objective = options.objective
        self.cost_model = cost_model
        self.mode = options.mode
        self.time_limit_s = options.time_limit_s
        self.budget_s = options.budget_s
        self.small_instance = options.small_instance
        self.decided: dict[str, int] = {}  # batches per method ("heuristic", "exact:...")
        self._solve_s = float("nan")  # the last decision's exact solve, when it ran

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

    def _model(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The cost inputs of the model every solver of this dispatcher optimises.

        ``dedup``: the cost model's ``(A, CSR)`` as they are. ``additive``: each sample's keys
        made private ([`private_keys`][workbench.dispatch.objective.private_keys]), so that the
        dedup cost *is* the additive cost and the heuristic optimises what the exact solver does.
        """
        if self.mode == "dedup":
            return self.cost_model.batch(keys)
        return private_keys(self.cost_model.sample_costs(keys))

    def _exact(self, cost, indptr, indices):
        if self.mode == "additive":
            return solve_transport(cost.T, self.capacities, objective=self.objective,
                                   time_limit_s=self.time_limit_s)
        return solve_dedup_ilp(cost, indptr, indices, self.capacities, self.time_limit_s)

    def _timed_exact(self, cost, indptr, indices, variables: int) -> tuple[Solution, float]:
        """The exact solver's plan and its wall seconds (observed by the online predictor)."""
        t0 = time.perf_counter()
        solution = self._exact(cost, indptr, indices)
        wall = time.perf_counter() - t0
        self._observe(variables, wall)
        self._solve_s = wall
        return solution, wall

    def _heuristic(self, cost, indptr, indices) -> Solution:
        if self.mode == "additive":  # private keys: cost is a view C.T, the plan from C alone
            return regret_swap_additive(cost.T, self.capacities, self.heuristic_rounds)
        return regret_swap(cost, indptr, indices, self.capacities, self.heuristic_rounds)

    @abstractmethod
    def _plan(self, cost, indptr, indices, variables: int) -> tuple[Solution, str, float]:
        """The strategy's plan on the model: ``(solution, method, charged seconds)``."""

    def decide(self, keys: np.ndarray, batch_id: int) -> Decision:
        start = time.perf_counter()
        cost, indptr, indices = self._model(keys)
        variables = keys.shape[0] * self.workers
        self._solve_s = float("nan")
        solution, method, charged = self._plan(cost, indptr, indices, variables)
        self.decided[method] = self.decided.get(method, 0) + 1
        x = np.asarray(solution.assignment, dtype=np.int64)
        return Decision(x, method, time.perf_counter() - start,
                        predicted_cost=float(dedup_cost(cost, indptr, indices, x)),
                        charged_s=charged, exact_s=self._solve_s)


class EsdGreedy(EsdDispatcher):
    """``esd_greedy``: the plain marginal greedy in batch order (a named variant)."""

    name = "esd_greedy"

    def _plan(self, cost, indptr, indices, variables: int) -> tuple[Solution, str, float]:
        return greedy_marginal(cost, indptr, indices, self.capacities), "greedy", 0.0


class EsdHeuristic(EsdDispatcher):
    """``esd_heuristic``: ESD's regret-ordered greedy plus pairwise swaps."""

    name = "esd_heuristic"

    def _plan(self, cost, indptr, indices, variables: int) -> tuple[Solution, str, float]:
        return self._heuristic(cost, indptr, indices), "heuristic", 0.0


class EsdExact(EsdDispatcher):
    """``esd_exact``: the transportation optimum (additive) or the deduplicated ILP (dedup)."""

    name = "esd_exact"

    def _plan(self, cost, indptr, indices, variables: int) -> tuple[Solution, str, float]:
        solution, _ = self._timed_exact(cost, indptr, indices, variables)
        return solution, f"exact:{solution.method}", 0.0  # which plan: the optimum or a fallback


class HybridDis(EsdDispatcher):
    """``hybriddis``: the heuristic always, plus the exact solver when the instance is small or
    its predicted time fits the budget saved over the look-ahead; the cheaper plan wins, the
    overrun is charged."""

    name = "hybriddis"

    def __init__(self, workers: int, capacities: np.ndarray, cost_model: CostModel,
                 options: SolverOptions | None = None) -> None:
        super().__init__(workers, capacities, cost_model, options)
        self.lookahead = self.options.lookahead
        self.saved_s = 0.0  # the budget saved for the exact solver (at most lookahead budgets)

    def set_budget(self, seconds: float) -> None:
        """The time the next decision can hide behind (the previous iteration's compute)."""
        self.budget_s = float(seconds)

    def _plan(self, cost, indptr, indices, variables: int) -> tuple[Solution, str, float]:
        self.saved_s = min(self.saved_s + self.budget_s, self.lookahead * self.budget_s)
        predicted = self.predict_seconds(variables)
        exact = variables <= self.small_instance or predicted <= self.saved_s
        heuristic = self._heuristic(cost, indptr, indices)
        if not exact:
            return heuristic, "heuristic", 0.0
        solution, wall = self._timed_exact(cost, indptr, indices, variables)
        spent = wall if self.predictor == "online" else predicted
        charged = max(0.0, spent - self.saved_s)
        self.saved_s = max(0.0, self.saved_s - spent)
        method = f"exact:{solution.method}"  # which plan: the optimum or a fallback
        if (dedup_cost(cost, indptr, indices, heuristic.assignment)
                < dedup_cost(cost, indptr, indices, solution.assignment)):
            return heuristic, f"{method}>heuristic", charged  # keep the cheaper plan
        return solution, method, charged
