"""Config schemas of eSD's stage: cost sweeps, decision time, end-to-end training."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from workbench.experiments.config.het import check_dense_modes
from workbench.utils.validation import ConfigError, check_each, in_range, nonempty


@dataclass(frozen=True)
class EsdConfig:
    """ESD experiments: dispatchers compared on expected transmission cost and end to end.

    Attributes:
        dataset: the dataset whose train split is dispatched.
        dispatchers: the dispatchers compared.
        workers: edge workers of the base setting.
        per_worker: samples per worker per batch of the base setting.
        embedding_dim: D of the rows on the wire and of the model trained end to end; null:
            the model's own (``models.<train_model>.embedding_dim``).
        batches: global batches per run.
        warmup_max: at most this many warm-up batches before measuring (a point that never
            reaches steady state is flagged).
        warmup_window: batches per hit-rate window of the steady-state test.
        warmup_tolerance: steady state = every cache full and the hit rate of two consecutive
            windows within this (absolute).
        cache_ratio: cache rows per worker as a fraction of the table.
        bound: staleness bound of the caches (read and write).
        max_bandwidth_gbps: the fastest worker's link.
        bandwidth_spread: fastest / slowest link of the base setting (log-spaced in between).
        latency_ms: link latency of every worker.
        exact_mode: the model every ESD dispatcher optimises: ``additive`` (each sample pays
            its keys; esd_exact = the transportation problem) or ``dedup`` (a key shared on a
            worker is paid once; esd_exact = the ILP).
        objective: ``total`` (the paper's summed weighted cost) or ``makespan`` (the slowest
            worker's cost; additive mode only).
        time_limit_s: MILP time limit of the dedup solver.
        hybrid_budget_fraction: hybriddis' decision budget = this x the previous iteration's
            compute on the clock (the time the decision hides behind).
        hybrid_predictor: ``fitted`` (the exact solver takes ``exact_time_fit``'s ``a + b V``
            seconds for V = N x W variables: a least-squares fit of its measured solves,
            committed, so runs stay deterministic), ``fixed`` (``exact_seconds_per_variable`` x
            V: a prior) or ``online`` (a + b V refitted to this run's solves:
            machine-dependent).
        hybrid_lookahead: the batches this stage's hybriddis may decide ahead of the training,
            so the most decision budgets it saves for the exact solver (1: none; see
            [`workbench.dispatch.hybriddis`][]). The combined and real-process stages decide
            one batch at a time.
        heuristic_rounds: swap rounds of ``esd_heuristic`` (regret greedy + swaps).
        capacity: samples per worker: ``equal`` shares, or ``proportional`` to each worker's
            rate (speed and link; the global batch unchanged).
        small_instance: hybriddis runs the exact solver whenever N x W is at most this.
        exact_seconds_per_variable: the ``fixed`` predictor's exact-solver seconds per
            sample-worker variable (null: learn it from measured solves, machine-dependent).
        exact_time_fit: the ``fitted`` predictor's ``[a, b]`` (seconds, seconds per variable),
            fitted to the exact solver's measured solves on this stage's sweeps
            (``benchmarks/exact_time_fit.py``; the stage's ``exact_times.csv`` holds each run's
            own solves, the residuals).
        predictor_sweep: hybriddis' predictors of the predictor sweep (hybriddis alone, as the
            budget sweep).
        worker_sweep: workers of the scaling sweep.
        cache_sweep: cache ratios of the cache sweep.
        spread_sweep: bandwidth spreads of the heterogeneity sweep.
        batch_sweep: samples per worker of the batch-size sweep.
        capacity_sweep: capacity rules of the capacity sweep (``equal``, ``proportional``).
        budget_sweep: hybriddis' budget fractions of the budget sweep (hybriddis alone: the
            budget changes no other dispatcher).
        train_dispatchers: dispatchers trained end to end (test AUC against emulated time).
        train_model: the model trained end to end (a key of ``models``).
        train_spreads: bandwidth spreads the end-to-end training runs at (each dispatcher
            trained at each: a cost-aware dispatcher decides for its links); the base
            ``bandwidth_spread`` is added when missing.
        train_dense_modes: dense synchronisation modes every end-to-end run is clocked in
            (exact: the trained run's traffic does not depend on time); the cluster's own
            ``dense_mode`` is the headline.
        train_dense_scales: the dense bytes scaled by each of these when clocking the
            end-to-end runs (1 = the model's; a what-if that moves the dense share of the step:
            a smaller or larger dense part, or one synchronised off the edge links).
        train_latencies_ms: every link's latency when clocking the end-to-end runs (a what-if:
            the ring AllReduce pays it ``2 (W - 1)`` times a step, each message once); the base
            ``latency_ms`` is added when missing.
        train_replicates: end-to-end runs of every train dispatcher at the base spread, with
            seeds ``seed + r`` (a new initialisation and data order each; replicate 0 is the
            main run): the speedup claim's mean and interval.
    """

    dataset: str = "synthetic"
    dispatchers: list[str] = field(default_factory=lambda: [
        "random", "contiguous", "laia", "esd_greedy", "esd_heuristic", "esd_exact",
        "hybriddis"], metadata=nonempty())
    workers: int = field(default=8, metadata=in_range(1, 1024))
    per_worker: int = field(default=64, metadata=in_range(1, None))
    embedding_dim: int | None = field(default=None, metadata=in_range(1, 65_536))
    batches: int = field(default=40, metadata=in_range(1, None))
    warmup_max: int = field(default=400, metadata=in_range(0, None))
    warmup_window: int = field(default=5, metadata=in_range(1, None))
    warmup_tolerance: float = field(default=0.01, metadata=in_range(0.0, 1.0))
    cache_ratio: float = field(default=0.05, metadata=in_range(0.0, 1.0, lo_open=True))
    bound: int = field(default=100, metadata=in_range(0, None))
    max_bandwidth_gbps: float = field(default=1.0, metadata=in_range(0.0, None, lo_open=True))
    bandwidth_spread: float = field(default=10.0, metadata=in_range(1.0, None))
    latency_ms: float = field(default=1.0, metadata=in_range(0.0, None))
    exact_mode: Literal["additive", "dedup"] = "additive"
    objective: Literal["total", "makespan"] = "total"
    time_limit_s: float = field(default=0.5, metadata=in_range(0.0, None, lo_open=True))
    hybrid_budget_fraction: float = field(default=1.0, metadata=in_range(0.0, None))
    hybrid_predictor: Literal["fixed", "fitted", "online"] = "fixed"
    hybrid_lookahead: int = field(default=1, metadata=in_range(1, 10_000))
    heuristic_rounds: int = field(default=1, metadata=in_range(0, 1000))
    capacity: Literal["equal", "proportional"] = "equal"
    small_instance: int = field(default=2048, metadata=in_range(0, None))
    exact_seconds_per_variable: float | None = field(default=2.5e-6,
                                                     metadata=in_range(0.0, None, lo_open=True))
    exact_time_fit: list[float] | None = None
    predictor_sweep: list[str] = field(default_factory=lambda: ["fixed"])
    worker_sweep: list[int] = field(default_factory=lambda: [2, 4, 8, 16],
                                    metadata=nonempty(in_range(1, 1024)))
    cache_sweep: list[float] = field(default_factory=lambda: [0.01, 0.05, 0.1, 0.2],
                                     metadata=nonempty())
    spread_sweep: list[float] = field(default_factory=lambda: [1.0, 10.0, 100.0],
                                      metadata=nonempty())
    batch_sweep: list[int] = field(default_factory=lambda: [32, 64, 128],
                                   metadata=nonempty(in_range(1, None)))
    capacity_sweep: list[str] = field(default_factory=lambda: ["equal", "proportional"],
                                      metadata=nonempty())
    budget_sweep: list[float] = field(default_factory=lambda: [0.5, 1.0, 4.0],
                                      metadata=nonempty(in_range(0.0, None)))
    train_dispatchers: list[str] = field(default_factory=lambda: [
        "random", "laia", "hybriddis"], metadata=nonempty())
    train_model: str = "wdl"
    train_spreads: list[float] = field(default_factory=lambda: [1.0, 10.0, 100.0],
                                       metadata=nonempty(in_range(1.0, None)))
    train_dense_modes: list[str] = field(
        default_factory=lambda: ["after_backward", "overlapped", "ps"], metadata=nonempty())
    train_dense_scales: list[float] = field(
        default_factory=lambda: [0.0, 0.05, 0.1, 0.25, 0.5, 1.0],
        metadata=nonempty(in_range(0.0, 100.0)))
    train_latencies_ms: list[float] = field(default_factory=lambda: [1.0],
                                            metadata=nonempty(in_range(0.0, 1000.0)))
    train_replicates: int = field(default=3, metadata=in_range(1, 20))

    def dispatcher_options(self, predictor: str | None = None) -> dict[str, Any]:
        """Keyword arguments of ``make_dispatcher`` for the cost-aware dispatchers (the solver
        mode, limits, objective, swap rounds and HybridDis' time predictor: ``predictor``, by
        default ``hybrid_predictor``; ``fitted`` is the fixed predictor at
        ``exact_time_fit``)."""
        predictor = predictor or self.hybrid_predictor
        time_model: dict[str, Any] = {"seconds_per_variable": self.exact_seconds_per_variable,
                                      "predictor": predictor}
        if predictor == "fitted":
            assert self.exact_time_fit is not None  # __post_init__ requires it
            a, b = self.exact_time_fit
            time_model = {"seconds_per_variable": b, "intercept_s": a, "predictor": "fixed"}
        return dict(mode=self.exact_mode, time_limit_s=self.time_limit_s,
                    small_instance=self.small_instance, objective=self.objective,
                    heuristic_rounds=self.heuristic_rounds, **time_model)

    def __post_init__(self) -> None:
        allowed = ("contiguous", "random", "laia", "esd_heuristic", "esd_greedy", "esd_exact",
                   "hybriddis")
        for key in ("dispatchers", "train_dispatchers"):
            check_each(key, getattr(self, key), lambda name: name in allowed, f"one of {allowed}")
        check_each("predictor_sweep", self.predictor_sweep,
                   lambda p: p in ("fixed", "fitted", "online"), "'fixed', 'fitted' or 'online'")
        if "fitted" in (self.hybrid_predictor, *self.predictor_sweep):
            fit = self.exact_time_fit
            if fit is None or len(fit) != 2 or min(fit) < 0:
                raise ConfigError(f"experiments.esd.exact_time_fit = {fit}: the fitted predictor "
                                  "needs [a, b] >= 0 (seconds, seconds per variable); "
                                  "python benchmarks/exact_time_fit.py measures them")
        check_each("cache_sweep", self.cache_sweep, lambda r: 0 < r <= 1, "in (0, 1]")
        check_each("spread_sweep", self.spread_sweep, lambda r: r >= 1, ">= 1")
        check_dense_modes("experiments.esd.train_dense_modes", self.train_dense_modes)
        if 1.0 not in self.train_dense_scales:
            raise ConfigError(f"experiments.esd.train_dense_scales = {self.train_dense_scales}: "
                              "must include 1.0 (the model's own dense bytes)")
        check_each("capacity_sweep", self.capacity_sweep,
                   lambda c: c in ("equal", "proportional"), "'equal' or 'proportional'")
        if self.objective == "makespan" and self.exact_mode != "additive":
            raise ConfigError("objective = 'makespan' needs exact_mode = 'additive'")
