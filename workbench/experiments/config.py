"""Config schemas of the experiments, one section per experiment stage module of this package.

==========================  =====================================================================
schema                      stage module
==========================  =====================================================================
``DatasetStatsConfig``      :mod:`workbench.experiments.dataset_stats`
``HetCacheConfig``          :mod:`workbench.experiments.het_cache`
``HetTrainConfig``          :mod:`workbench.experiments.het_train`
``HetTimeConfig``           :mod:`workbench.experiments.het_time`
``HetScaleConfig``          :mod:`workbench.experiments.het_scale`
``EsdConfig``               :mod:`workbench.experiments.esd`
``RecdConfig``              :mod:`workbench.experiments.dedup`, :mod:`workbench.experiments.recd`
``HotlineConfig``           :mod:`workbench.experiments.hotline`
``FlexShardConfig``         :mod:`workbench.experiments.flexshard`
``DistributedCheckConfig``  :mod:`workbench.experiments.distributed_check`
``CalibrationConfig``       :mod:`workbench.experiments.calibrate`
``CombinedConfig``          :mod:`workbench.experiments.combined`
==========================  =====================================================================

Each schema is mounted at ``experiments.<stage module>`` (``RecdConfig`` at
``experiments.recd``).

The schemas sit in this light module, not in the stage modules, so that composing and validating
the configuration (every stage's first step, ``make params``) does not import torch, numba and
scipy: 0.3 s instead of about 4 s per process on this machine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from workbench.utils.validation import ConfigError, check_each, in_range, nonempty


@dataclass(frozen=True)
class DatasetStatsConfig:
    """Dataset statistics and HET Fig. 3 (access skew).

    Attributes:
        top_fractions: fractions of rows whose share of lookups is reported.
        skew_claim_fraction: HET's claim: the top ``skew_claim_fraction`` of rows ...
        skew_claim_share: ... get this share of the updates (0.9 on Criteo, HET Fig. 3).
        rank_points: points kept per curve in the rank plot (log-spaced).
    """

    top_fractions: list[float] = field(default_factory=lambda: [0.01, 0.1], metadata=nonempty())
    skew_claim_fraction: float = field(default=0.1, metadata=in_range(0.0, 1.0, lo_open=True))
    skew_claim_share: float = field(default=0.9, metadata=in_range(0.0, 1.0, lo_open=True))
    rank_points: int = field(default=200, metadata=in_range(10, 100_000))

    def __post_init__(self) -> None:
        check_each("top_fractions", self.top_fractions, lambda f: 0 < f <= 1, "in (0, 1]")


@dataclass(frozen=True)
class HetCacheConfig:
    """HET cache experiments: trace replay through the emulated cluster (HET Fig. 8 and traffic).

    Attributes:
        datasets: datasets (keys of ``datasets``) the experiment runs on.
        workers: edge workers W of the base setting.
        batch_size: samples per worker per iteration b.
        min_steps: replay the train split for as many epochs as needed to reach this many
            iterations (small datasets are passed several times, as in training).
        max_samples: use at most this many train samples (null = all).
        dim: embedding width D used for byte counts.
        policy: cache policy of the traffic and sweep runs.
        cache_ratio: cache size (fraction of the table) of the traffic and sweep runs.
        cache_ratios: cache sizes of the miss-rate figure (HET Fig. 8: 3/5/10/15%).
        policies: policies of the miss-rate figure.
        miss_rate_bound: staleness bound of the miss-rate runs.
        system_bounds: staleness bounds of the "cache s=..." systems.
        bound_sweep: bounds of the rows-moved-vs-staleness sweep (1e9 stands for infinity).
        worker_sweep: worker counts of the scaling sweep.
        order: ``bsp`` (every worker reads before any writes within a step) or ``sequential``.
        dispatcher: how a global batch is split among workers.
        claim_bound: the cache system whose reduction is compared with HET's 88% claim.
    """

    datasets: list[str] = field(default_factory=lambda: ["synthetic"], metadata=nonempty())
    workers: int = field(default=8, metadata=in_range(1, 1024))
    batch_size: int = field(default=128, metadata=in_range(1, None))
    min_steps: int = field(default=200, metadata=in_range(1, None))
    max_samples: int | None = field(default=None, metadata=in_range(1, None))
    dim: int = field(default=128, metadata=in_range(1, 65_536))
    policy: Literal["lru", "lfu", "lfuopt"] = "lfuopt"
    cache_ratio: float = field(default=0.1, metadata=in_range(0.0, 1.0, lo_open=True))
    cache_ratios: list[float] = field(default_factory=lambda: [0.03, 0.05, 0.1, 0.15],
                                      metadata=nonempty())
    policies: list[str] = field(default_factory=lambda: ["lru", "lfu", "lfuopt"],
                                metadata=nonempty())
    miss_rate_bound: int = field(default=100, metadata=in_range(0, None))
    system_bounds: list[int] = field(default_factory=lambda: [0, 10, 100], metadata=nonempty())
    bound_sweep: list[int] = field(default_factory=lambda: [0, 1, 10, 100, 1000, 10**9],
                                   metadata=nonempty())
    worker_sweep: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 16, 32],
                                    metadata=nonempty(in_range(1, 4096)))
    order: Literal["bsp", "sequential"] = "bsp"
    dispatcher: Literal["contiguous", "random"] = "contiguous"
    claim_bound: int = field(default=100, metadata=in_range(0, None))

    def __post_init__(self) -> None:
        check_each("cache_ratios", self.cache_ratios, lambda r: 0 < r <= 1, "in (0, 1]")
        check_each("policies", self.policies, lambda p: p in ("lru", "lfu", "lfuopt"),
                   "one of 'lru', 'lfu', 'lfuopt'")
        for key in ("system_bounds", "bound_sweep"):
            check_each(key, getattr(self, key), lambda b: b >= 0, ">= 0")
        if self.claim_bound not in self.system_bounds:
            raise ConfigError(f"claim_bound = {self.claim_bound}: must be one of "
                              f"system_bounds {self.system_bounds}")


@dataclass(frozen=True)
class HetTrainConfig:
    """HET training experiments: real training through the emulated cluster (Fig. 6, Tables 1-2).

    Attributes:
        dataset: the dataset (a key of ``datasets``).
        model: the model (a key of ``models``) of Fig. 6 and Table 2 (HET: WDL).
        systems: HET's systems: ``ps`` (PS, ASP, no cache), ``hybrid`` (PS for sparse,
            AllReduce for dense, no cache), ``allreduce`` (sparse via AllGather), and
            ``cache`` with every bound of ``cache_bounds``.
        cache_bounds: staleness bounds of the cache systems (HET: 10 and 100).
        staleness: Table 2's bounds as published (-1 = infinity).
        staleness_units: how Table 2 applies them: ``paper`` (HET's per-embedding clock, a
            tick per iteration that updates the row, bound as published) and/or ``scaled``
            (Hetu's per-gradient-row clock, bound scaled to this run's length).
        het_iterations: iterations of one HET epoch (45.84M samples / 1,024), the unit of the
            staleness scaling: s_here = ceil(s x iterations_here / het_iterations).
        epochs: passes over the train split.
        eval_every: evaluate test AUC every this many iterations.
        max_train_samples: cap on train samples (null = all).
        max_test_samples: cap on test samples (null = all).
        asp_staleness: dense-gradient delay of ASP in iterations (null = workers - 1).
        replicates: runs of the claims' systems (Hybrid and Cache s=100 of Table 1, Table 2's
            bounds in HET's unit) with seeds ``seed + r``: replicate 0 is the main run, the
            others each draw a new initialisation and a new data order (HET: 5 runs averaged).
    """

    dataset: str = "synthetic"
    model: str = "wdl"
    systems: list[str] = field(default_factory=lambda: ["ps", "hybrid", "allreduce", "cache"],
                               metadata=nonempty())
    cache_bounds: list[int] = field(default_factory=lambda: [10, 100],
                                    metadata=nonempty(in_range(0, None)))
    staleness: list[int] = field(default_factory=lambda: [0, 100, 10_000, -1], metadata=nonempty())
    staleness_units: list[str] = field(default_factory=lambda: ["paper", "scaled"],
                                       metadata=nonempty())
    het_iterations: int = field(default=44_766, metadata=in_range(1, None))
    epochs: int = field(default=1, metadata=in_range(1, 1000))
    eval_every: int = field(default=25, metadata=in_range(1, None))
    max_train_samples: int | None = field(default=None, metadata=in_range(1, None))
    max_test_samples: int | None = field(default=None, metadata=in_range(1, None))
    asp_staleness: int | None = field(default=None, metadata=in_range(0, None))
    replicates: int = field(default=5, metadata=in_range(1, 20))

    def __post_init__(self) -> None:
        check_each("systems", self.systems, lambda s: s in ("ps", "hybrid", "allreduce", "cache"),
                   "one of 'ps', 'hybrid', 'allreduce', 'cache'")
        check_each("staleness", self.staleness, lambda b: b >= -1, ">= 0, or -1 for infinity")
        check_each("staleness_units", self.staleness_units, lambda u: u in ("paper", "scaled"),
                   "one of 'paper', 'scaled'")


@dataclass(frozen=True)
class HetTimeConfig:
    """HET time-model figures: Fig. 2, Fig. 7 and Fig. 9 from replayed traffic + FLOP model.

    Attributes:
        dataset: the dataset whose key trace is replayed.
        models: the models of Fig. 2 and Fig. 7 (keys of ``models``).
        bandwidths_gbps: the clusters of Fig. 7 (HET: 1 and 10 Gb/s).
        fig2_dim: embedding width of Fig. 2 (HET: 32).
        fig9_ps_shards: parameter-server shards of the scaling study (HET: 4 servers).
        worker_sweep: Fig. 9a worker counts.
        dim_sweep: Fig. 9c embedding widths (time model only).
        max_samples: cap on replayed train samples (null = all).
        dense_modes: the dense synchronisation modes Fig. 7 and Fig. 9a are also computed in
            (``cluster.dense_mode``'s values; the figures and claims use the cluster's own,
            the others are shown beside them).
    """

    dataset: str = "synthetic"
    models: list[str] = field(default_factory=lambda: ["wdl", "deepfm", "dcn"],
                              metadata=nonempty())
    bandwidths_gbps: list[float] = field(default_factory=lambda: [1.0, 10.0],
                                         metadata=nonempty(in_range(0.0, None, lo_open=True)))
    fig2_dim: int = field(default=32, metadata=in_range(1, 65_536))
    fig9_ps_shards: int = field(default=4, metadata=in_range(1, 4096))
    worker_sweep: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 16, 32],
                                    metadata=nonempty(in_range(1, 4096)))
    dim_sweep: list[int] = field(default_factory=lambda: [128, 256, 512, 1024, 2048, 4096],
                                 metadata=nonempty(in_range(1, 65_536)))
    max_samples: int | None = field(default=None, metadata=in_range(1, None))
    dense_modes: list[str] = field(
        default_factory=lambda: ["after_backward", "overlapped", "ps"], metadata=nonempty())
    row_cost_us_sweep: list[float] = field(
        default_factory=lambda: [0.5, 1.0, 2.0, 5.0, 10.0, 20.0],
        metadata=in_range(0.0, 1e6))

    def __post_init__(self) -> None:
        check_dense_modes("experiments.het_time.dense_modes", self.dense_modes)


def check_dense_modes(key: str, modes: list[str]) -> None:
    """Each of ``modes`` one of :data:`workbench.cluster.dense_sync.DENSE_MODES`, once."""
    from workbench.cluster.dense_sync import DENSE_MODES
    check_each(key, modes, lambda m: m in DENSE_MODES, f"one of {DENSE_MODES}")
    if len(set(modes)) != len(modes):
        raise ConfigError(f"{key} = {modes}: each mode at most once")


@dataclass(frozen=True)
class HetScaleConfig:
    """HET's replays against the table size (:mod:`workbench.experiments.het_scale`).

    Attributes:
        dataset: the synthetic dataset whose generator draws the keys (its skew; the table
            size is each scale's).
        scales: fractions of Criteo Kaggle's cardinalities (1.0: its 33.8M rows).
        samples: samples replayed at every scale.
        bandwidths_gbps: the links the replays are clocked on (Fig. 7's 1 and 10 Gb/s).
        chunk_rows: samples whose keys are drawn at a time.
    """

    dataset: str = "synthetic"
    scales: list[float] = field(default_factory=lambda: [0.01, 0.1, 0.3, 1.0],
                                metadata=nonempty(in_range(0.0, 1.0, lo_open=True)))
    samples: int = field(default=10_000_000, metadata=in_range(1, None))
    bandwidths_gbps: list[float] = field(default_factory=lambda: [1.0, 10.0],
                                         metadata=nonempty(in_range(0.0, None, lo_open=True)))
    chunk_rows: int = field(default=1_000_000, metadata=in_range(1, None))


@dataclass(frozen=True)
class EsdConfig:
    """ESD experiments: dispatchers compared on expected transmission cost and end to end.

    Attributes:
        dataset: the dataset whose train split is dispatched.
        dispatchers: the dispatchers compared.
        workers: edge workers of the base setting.
        per_worker: samples per worker per batch of the base setting.
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
        hybrid_predictor: ``fixed`` (the exact solver takes ``exact_seconds_per_variable`` x
            N x W seconds: deterministic) or ``online`` (fitted a + b V to observed solves).
        heuristic_rounds: swap rounds of ``esd_heuristic`` (regret greedy + swaps).
        capacity: samples per worker: ``equal`` shares, or ``proportional`` to each worker's
            rate (speed and link; the global batch unchanged).
        small_instance: hybriddis runs the exact solver whenever N x W is at most this.
        exact_seconds_per_variable: hybriddis' predicted exact-solver seconds per
            sample-worker variable (null: learn it from measured solves, machine-dependent).
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
            a smaller dense part, or one synchronised off the edge links).
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
    hybrid_predictor: Literal["fixed", "online"] = "fixed"
    heuristic_rounds: int = field(default=1, metadata=in_range(0, 1000))
    capacity: Literal["equal", "proportional"] = "equal"
    small_instance: int = field(default=2048, metadata=in_range(0, None))
    exact_seconds_per_variable: float | None = field(default=2.5e-6,
                                                     metadata=in_range(0.0, None, lo_open=True))
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
    train_replicates: int = field(default=3, metadata=in_range(1, 20))

    def dispatcher_options(self) -> dict[str, Any]:
        """Keyword arguments of ``make_dispatcher`` for the cost-aware dispatchers (the solver
        mode, limits, objective, swap rounds and HybridDis' time predictor)."""
        return dict(mode=self.exact_mode, time_limit_s=self.time_limit_s,
                    small_instance=self.small_instance,
                    seconds_per_variable=self.exact_seconds_per_variable,
                    objective=self.objective, heuristic_rounds=self.heuristic_rounds,
                    predictor=self.hybrid_predictor)

    def __post_init__(self) -> None:
        allowed = ("contiguous", "random", "laia", "esd_heuristic", "esd_greedy", "esd_exact",
                   "hybriddis")
        for key in ("dispatchers", "train_dispatchers"):
            check_each(key, getattr(self, key), lambda name: name in allowed, f"one of {allowed}")
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


@dataclass(frozen=True)
class TransformStepConfig:
    """One preprocessing transform of a sparse feature (:mod:`workbench.sparse.transforms`).

    Attributes:
        op: ``hash`` (id -> splitmix64(id, salt) mod num_buckets), ``remap`` (id -> table[id]),
            ``bucketize`` (value -> bucket of ``boundaries``), ``truncate`` (keep ``max_length``
            elements, the ``last`` or ``first``).
        num_buckets: ``hash`` only.
        salt: ``hash`` only.
        table: ``remap`` only.
        boundaries: ``bucketize`` only, strictly increasing.
        max_length: ``truncate`` only.
        keep: ``truncate`` only.
    """

    op: Literal["hash", "remap", "bucketize", "truncate"] = "hash"
    num_buckets: int | None = field(default=None, metadata=in_range(1, None))
    salt: int = field(default=0, metadata=in_range(0, None))
    table: list[int] | None = None
    boundaries: list[float] | None = None
    max_length: int | None = field(default=None, metadata=in_range(0, None))
    keep: Literal["last", "first"] = "last"

    def spec(self) -> dict[str, Any]:
        """The step as :func:`~workbench.sparse.transforms.from_spec` reads it (its own args)."""
        args = {"hash": ("num_buckets", "salt"), "remap": ("table",),
                "bucketize": ("boundaries",), "truncate": ("max_length", "keep")}[self.op]
        out: dict[str, Any] = {"op": self.op}
        for name in args:
            value = getattr(self, name)
            if value is None:
                raise ConfigError(f"op = {self.op!r} needs {name}")
            out[name] = value
        return out


@dataclass(frozen=True)
class RecdConfig:
    """RecD experiments: session-clustered partitions, batch dedup, IKJT preprocessing/training.

    Attributes:
        datasets: the datasets with users or sessions the RecD stages run on.
        session_gap_s: on timestamped sources a user's rows further apart than this start a new
            session (request); null = one session per user.
        history: ``snapshot`` (every sample of a session carries the history the session started
            with, as a feature store serves it per request) or ``per_sample`` (the preprocessed
            per-sample history, which changes every sample and so never deduplicates).
        window: rows per written partition, i.e. the clustering window (log order).
        window_sweep: windows of the storage and dedup sweeps.
        batch_sizes: batch sizes of the dedup-factor sweep.
        dedup_groups: RecD's ``dedup_sparse_features``; null = one group of the user-side
            features and the sequence features; the other features are not deduplicated.
        transforms: per sparse feature, its preprocessing chain; empty = ``hash`` every feature
            into its table size after truncating sequences to ``max_history``.
        max_history: sequence length after truncation (and the model's sequence length).
        preprocess_batch_sizes: reader batch sizes of the preprocessing-throughput sweep (sizes
            above the rows of a dataset's partitions are skipped).
        preprocess_rows: rows preprocessed per timed run (at most the partitions' rows).
        repeats: timing repeats (the best is kept, alternating KJT and IKJT).
        train_batch_size: batch size of the training runs.
        train_batches: batches of each training run.
        embedding_dim: embedding width of the RecD model.
        bottom_mlp: bottom MLP hidden widths (dense features -> ... -> D is appended, as in
            ``models.dlrm``).
        top_mlp: top MLP hidden widths (a final 1-unit layer is appended).
        seq_heads: attention heads of the sequence tower.
        lr: Adagrad learning rate.
    """

    datasets: list[str] = field(default_factory=lambda: ["synthetic_sessions"],
                                metadata=nonempty())
    session_gap_s: int | None = field(default=1800, metadata=in_range(1, None))
    history: Literal["snapshot", "per_sample"] = "snapshot"
    window: int = field(default=16384, metadata=in_range(1, None))
    window_sweep: list[int] = field(default_factory=lambda: [1024, 4096, 16384, 65536],
                                    metadata=nonempty())
    batch_sizes: list[int] = field(default_factory=lambda: [32, 128, 512, 2048],
                                   metadata=nonempty())
    dedup_groups: list[list[str]] | None = None
    transforms: dict[str, list[TransformStepConfig]] = field(default_factory=dict)
    max_history: int = field(default=20, metadata=in_range(1, 10_000))
    preprocess_batch_sizes: list[int] = field(default_factory=lambda: [512, 2048, 8192],
                                              metadata=nonempty())
    preprocess_rows: int = field(default=65536, metadata=in_range(1, None))
    repeats: int = field(default=3, metadata=in_range(1, 100))
    train_batch_size: int = field(default=512, metadata=in_range(1, None))
    train_batches: int = field(default=40, metadata=in_range(1, None))
    embedding_dim: int = field(default=32, metadata=in_range(1, 4096))
    bottom_mlp: list[int] = field(default_factory=lambda: [64])
    top_mlp: list[int] = field(default_factory=lambda: [64])
    seq_heads: int = field(default=2, metadata=in_range(1, 64))
    lr: float = field(default=0.05, metadata=in_range(0.0, None, lo_open=True))

    def __post_init__(self) -> None:
        for key in ("window_sweep", "batch_sizes", "preprocess_batch_sizes", "bottom_mlp",
                    "top_mlp"):
            check_each(key, getattr(self, key), lambda n: n >= 1, "an integer >= 1")
        if self.embedding_dim % self.seq_heads:
            raise ConfigError(f"seq_heads = {self.seq_heads}: must divide embedding_dim = "
                              f"{self.embedding_dim}")
        for key, steps in self.transforms.items():
            for i, step in enumerate(steps):
                try:
                    step.spec()
                except ConfigError as err:
                    raise ConfigError(f"transforms.{key}[{i}]: {err}") from None


@dataclass(frozen=True)
class HotlineConfig:
    """Hotline experiments: popular / non-popular micro-batches against the hybrid and FAE.

    Attributes:
        dataset: the dataset trained (a key of ``datasets``).
        model: the model trained (a key of ``models``; FAE and Hotline use DLRM).
        popularity_datasets: datasets of the popular-fraction figure (the ``hotline_popularity``
            stage).
        profile_rate: fraction of the train inputs profiled, drawn with replacement (FAE: 5%).
        budget_mb_full: hot-memory budgets in MiB for the FULL Criteo Kaggle tables (FAE: 128,
            256, 512), scaled to the tables here by their fraction of the table bytes.
        budget_mb: the base setting's budget (one of ``budget_mb_full``).
        full_scale_rows: rows of the full tables the budgets are given for (Criteo Kaggle).
        full_scale_dim: embedding width of the full tables (FAE's Criteo Kaggle: 16).
        popularity_fractions: hot-memory budgets of the popular-fraction curve, as fractions of
            the table bytes.
        schemes: schemes trained end to end (AUC against time).
        batch_size: mini-batch of the training runs.
        batch_sweep: mini-batches of the speedup sweep.
        sweep_steps: timed mini-batches per sweep point and scheme (after ``sweep_warmup``).
        sweep_warmup: untimed mini-batches per sweep point and scheme.
        fae_phase_batches: FAE's mini-batches per round of hot and normal phases.
        online_every: also train Hotline with the hot set re-profiled from the mini-batches seen
            every this many mini-batches (null: offline profile only).
        eval_every: evaluate test AUC every this many mini-batches.
        max_train_samples: train samples of the training runs (null = all).
        max_test_samples: test samples (null = all).
        hardware: servers of the time model (keys of ``hardware``).
        rows_unit: how the servers' time model counts the rows a mini-batch moves: ``lookups``
            (one per lookup: the Intel-optimised hybrid's ``EmbeddingBag`` path gathers, sends
            pooled vectors and updates per lookup) or ``unique`` (each distinct row once, as
            the measured implementation here does). This machine's model always uses
            ``unique`` (it is fitted on that implementation).
        link: the host-accelerator link of the measured CPU runs: ``off`` (copies at memory
            speed: a CPU has no link), ``scaled`` (shaped so that link time / compute time is the
            first ``hardware`` server's: its link bandwidth x this machine's measured compute
            seconds per sample / the server's modelled ones) or ``fixed`` (``link_gbps``).
            Ignored on CUDA, where the link is real.
        link_gbps: the shaped link's bandwidth in GB/s with ``link = fixed``.
        device: ``cpu`` (the accelerator tier is a separate tensor store), ``cuda`` (device
            memory; fails without a GPU) or ``auto`` (cuda when available).
        threads: torch intra-op threads of the compute (Hotline's gather thread is one more).
        timeline_step: the mini-batch (1-based, after the first evaluation) whose phases the
            timeline figure shows.
        host_rate_sweep: host gather + update rates (GB/s) at which every server's time model
            is re-evaluated, in both ``rows_unit`` (``conditions.csv``): the claims' assumed
            parameter.
    """

    dataset: str = "synthetic"
    model: str = "dlrm"
    popularity_datasets: list[str] = field(default_factory=lambda: ["synthetic"],
                                           metadata=nonempty())
    profile_rate: float = field(default=0.05, metadata=in_range(0.0, 1.0, lo_open=True))
    budget_mb_full: list[float] = field(default_factory=lambda: [128.0, 256.0, 512.0],
                                        metadata=nonempty(in_range(0.0, None, lo_open=True)))
    budget_mb: float = field(default=256.0, metadata=in_range(0.0, None, lo_open=True))
    full_scale_rows: int = field(default=33_762_577, metadata=in_range(1, None))
    full_scale_dim: int = field(default=16, metadata=in_range(1, 65_536))
    popularity_fractions: list[float] = field(
        default_factory=lambda: [0.001, 0.003, 0.01, 0.03, 0.06, 0.12, 0.24, 0.5, 1.0],
        metadata=nonempty())
    schemes: list[str] = field(default_factory=lambda: ["hybrid", "hotline", "fae",
                                                        "accel_only"], metadata=nonempty())
    batch_size: int = field(default=1024, metadata=in_range(1, None))
    batch_sweep: list[int] = field(default_factory=lambda: [256, 1024, 4096],
                                   metadata=nonempty(in_range(1, None)))
    sweep_steps: int = field(default=12, metadata=in_range(1, None))
    sweep_warmup: int = field(default=2, metadata=in_range(0, None))
    fae_phase_batches: int = field(default=16, metadata=in_range(1, None))
    online_every: int | None = field(default=50, metadata=in_range(1, None))
    eval_every: int = field(default=25, metadata=in_range(1, None))
    max_train_samples: int | None = field(default=None, metadata=in_range(1, None))
    max_test_samples: int | None = field(default=None, metadata=in_range(1, None))
    hardware: list[str] = field(default_factory=lambda: ["v100_pcie3", "a100_pcie4"],
                                metadata=nonempty())
    rows_unit: Literal["lookups", "unique"] = "lookups"
    link: Literal["off", "scaled", "fixed"] = "scaled"
    link_gbps: float = field(default=0.25, metadata=in_range(0.0, None, lo_open=True))
    device: Literal["cpu", "cuda", "auto"] = "cpu"
    threads: int = field(default=1, metadata=in_range(1, 1024))
    timeline_step: int = field(default=60, metadata=in_range(1, None))
    host_rate_sweep: list[float] = field(
        default_factory=lambda: [0.25, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 7.5, 10.0],
        metadata=nonempty(in_range(0.0, None, lo_open=True)))

    def __post_init__(self) -> None:
        check_each("popularity_fractions", self.popularity_fractions, lambda f: 0 < f <= 1,
                   "in (0, 1]")
        check_each("schemes", self.schemes, lambda s: s in ("hybrid", "hotline", "fae",
                                                            "accel_only"),
                   "one of 'hybrid', 'hotline', 'fae', 'accel_only'")
        if "hybrid" not in self.schemes or "hotline" not in self.schemes:
            raise ConfigError(f"schemes = {self.schemes}: must include 'hybrid' and 'hotline' "
                              "(the speedups are Hotline's against the hybrid)")
        if self.budget_mb not in self.budget_mb_full:
            raise ConfigError(f"budget_mb = {self.budget_mb}: must be one of budget_mb_full "
                              f"{self.budget_mb_full}")


@dataclass(frozen=True)
class FlexShardConfig:
    """FlexShard experiments: sharding plans of a sequence embedding table on a two-level topology.

    Attributes:
        datasets: datasets with a sequence feature (the ``flexshard`` stage runs on each).
        claims_dataset: the dataset whose results the claims rows report (one of ``datasets``).
        sequence_feature: the sequence (list) column sharded; null = the dataset's first.
        embedding_dim: D (a row is 4 D bytes).
        per_device_batch: samples each device trains per iteration (data parallel).
        profile_batches: iterations (of the base topology's global batch) whose lookups estimate
            the rows' access probabilities, counted per occurrence.
        replay_batches: the iterations after them, replayed through every plan.
        probability_estimator: ``good_turing`` (the profile's unseen rows share the
            Good-Turing missing mass, counted per iteration: the lookups on rows seen in only
            one profiled iteration / all lookups, so a row the profile missed is not free for
            the planner; the seen rows' frequencies are scaled by the rest) or
            ``frequency`` (raw frequencies: unseen rows have probability 0).
        plans: the plans compared (``tw``, ``rw``, ``cw``, ``twrw``, ``hot_dp``, ``flexshard``).
        cw_shards: column shards of ``cw`` (must divide ``embedding_dim``).
        memory_limit: ``rw`` (FlexShard and hot_dp may use at most RW's memory per device,
            weights + buffers) or ``none``.
        candidate_cuts: cut positions the planner evaluates (every pair of them).
        replicated_fractions: fractions of the rows replicated on every device for the
            memory-against-savings curve (the authors' figure: 0.1% .. 1.1%).
        device_sweep: device counts of the scaling sweep (multiples of the topology's
            ``devices_per_node``).
        skew_sweep: slow-node NIC speeds of the skew sweep (1 = no skew).
    """

    datasets: list[str] = field(default_factory=lambda: ["synthetic_sessions"],
                                metadata=nonempty())
    claims_dataset: str = "synthetic_sessions"
    sequence_feature: str | None = None
    embedding_dim: int = field(default=64, metadata=in_range(1, 65_536))
    per_device_batch: int = field(default=512, metadata=in_range(1, None))
    profile_batches: int = field(default=4, metadata=in_range(1, None))
    replay_batches: int = field(default=4, metadata=in_range(1, None))
    probability_estimator: Literal["good_turing", "frequency"] = "good_turing"
    plans: list[str] = field(default_factory=lambda: ["tw", "rw", "cw", "twrw", "hot_dp",
                                                      "flexshard"], metadata=nonempty())
    cw_shards: int = field(default=4, metadata=in_range(1, 4096))
    memory_limit: Literal["rw", "none"] = "rw"
    candidate_cuts: int = field(default=256, metadata=in_range(2, 100_000))
    replicated_fractions: list[float] = field(
        default_factory=lambda: [0.001, 0.002, 0.003, 0.004, 0.005, 0.006, 0.007, 0.008, 0.009,
                                 0.010, 0.011], metadata=nonempty())
    device_sweep: list[int] = field(default_factory=lambda: [8, 16, 32, 64],
                                    metadata=nonempty(in_range(1, 65_536)))
    skew_sweep: list[float] = field(default_factory=lambda: [1.0, 0.5, 0.25, 0.1],
                                    metadata=nonempty())

    def __post_init__(self) -> None:
        if self.claims_dataset not in self.datasets:
            raise ConfigError(f"claims_dataset = {self.claims_dataset!r}: must be one of "
                              f"datasets {self.datasets}")
        allowed = ("tw", "rw", "cw", "twrw", "hot_dp", "flexshard")
        check_each("plans", self.plans, lambda p: p in allowed, f"one of {allowed}")
        for need in ("rw", "flexshard"):
            if need not in self.plans:
                raise ConfigError(f"plans = {self.plans}: must include '{need}' (the claims "
                                  "compare FlexShard with row-wise)")
        if self.embedding_dim % self.cw_shards:
            raise ConfigError(f"cw_shards = {self.cw_shards}: must divide embedding_dim = "
                              f"{self.embedding_dim}")
        check_each("replicated_fractions", self.replicated_fractions, lambda f: 0 <= f <= 1,
                   "in [0, 1]")
        check_each("skew_sweep", self.skew_sweep, lambda f: 0 < f <= 1, "in (0, 1]")


@dataclass(frozen=True)
class DistributedCheckConfig:
    """The emulator checked against real processes (the ``distributed_check`` stage).

    The same small run goes through the emulated cluster and through the distributed backend
    (:mod:`workbench.training.distributed`): W worker processes and a parameter-server process
    on loopback, links shaped in the sender. Model and dataset are ``het_train``'s (so the
    calibrated compute cost exists); the cluster is this section's.

    Attributes:
        steps: BSP iterations of every run.
        batch_size: the global batch (a multiple of ``workers``).
        warmup: first iterations left out of the timing comparison (JIT, page faults).
        workers: worker processes W of the validation runs.
        bandwidth_gbps: the workers' links (one value, or one per worker).
        latency_ms: the workers' one-way latencies.
        speed: the workers' relative compute speeds in (0, 1] (a slower worker sleeps the
            difference; a real process cannot run faster than it does).
        bounds: staleness bounds s checked (read and write); s = 0 also checks parameters.
        cache_policy: the workers' cache policy.
        cache_ratio: cache capacity as a fraction of the table rows.
        dispatcher: the validation runs' baseline dispatch (drawn by every worker).
        param_rtol: relative tolerance of the s = 0 parameter check: the dense gradients are
            summed by the all_reduce instead of one batched backward pass, so the reduction
            order differs (stated beside the result).
        optimizer: the dense optimizer of the check's runs (``model``: the model's own). Plain
            SGD by default: Adam divides by the root of the second moment, so a parameter whose
            gradient is near zero turns a 1e-7 reduction-order difference into a full step, and
            the parameter check would measure Adam's sensitivity, not the backend.
        esd_dispatchers: dispatchers compared end to end in wall time, each in its own
            dispatcher process (a baseline among them runs there too, for a fair comparison).
        esd_workers: workers of the ESD comparison.
        esd_bandwidth_gbps: their links (heterogeneous edge links).
        esd_latency_ms: their latencies.
        esd_cache_ratio: their caches (small, as in the ESD stage).
        esd_bound: their staleness bound.
        timeout_s: timeout of every torch.distributed call (a dead peer fails the run), and
            how long a process may stay silent (stopped, frozen) or busy outside any exchange
            before the launcher stops the run naming it.
        deadline_s: wall-clock limit of one distributed run (at least ``timeout_s``).
        dense_modes: the dense synchronisation modes every run is made in
            (:mod:`workbench.training.dense_reducer`): ``after_backward`` (one flat
            all_reduce) and ``overlapped`` (DDP's buckets during backward).
        bucket_mb: DDP's bucket size of the ``overlapped`` runs, MiB (every bucket, the first
            too: small enough that the check's model spans several buckets).
        networks: where the runs' links are shaped, each run on each: ``token_bucket`` (every
            process on this machine's loopback, each link shaped in its sender) and
            ``kernel`` (one network namespace per process, links shaped by the kernel's
            ``tc``, one ``torchrun`` per node: :mod:`workbench.cluster.edge_network`); where
            namespaces are not permitted the kernel network is skipped with its reason in
            ``summary.json`` and the report (at least one network must run).
    """

    steps: int = field(default=30, metadata=in_range(2, 100_000))
    batch_size: int = field(default=256, metadata=in_range(1, 1_000_000))
    warmup: int = field(default=2, metadata=in_range(0, 1000))
    workers: int = field(default=2, metadata=in_range(1, 64))
    bandwidth_gbps: list[float] = field(default_factory=lambda: [0.1, 1.0],
                                        metadata=nonempty(in_range(0.0, None, lo_open=True)))
    latency_ms: list[float] = field(default_factory=lambda: [2.0, 0.5],
                                    metadata=nonempty(in_range(0.0, None)))
    speed: list[float] = field(default_factory=lambda: [1.0],
                               metadata=nonempty(in_range(0.0, 1.0, lo_open=True)))
    bounds: list[int] = field(default_factory=lambda: [0, 10],
                              metadata=nonempty(in_range(0, None)))
    cache_policy: Literal["lru", "lfu", "lfuopt", "none"] = "lru"
    cache_ratio: float = field(default=0.1, metadata=in_range(0.0, 1.0, lo_open=True))
    dispatcher: Literal["contiguous", "random"] = "random"
    param_rtol: float = field(default=1e-4, metadata=in_range(0.0, 1.0, lo_open=True))
    optimizer: Literal["model", "sgd", "adam", "adagrad"] = "sgd"
    esd_dispatchers: list[str] = field(default_factory=lambda: ["random", "laia", "hybriddis"],
                                       metadata=nonempty())
    esd_workers: int = field(default=4, metadata=in_range(2, 64))
    esd_bandwidth_gbps: list[float] = field(
        default_factory=lambda: [0.02, 0.05, 0.2, 1.0],
        metadata=nonempty(in_range(0.0, None, lo_open=True)))
    esd_latency_ms: list[float] = field(default_factory=lambda: [5.0, 2.0, 1.0, 0.5],
                                        metadata=nonempty(in_range(0.0, None)))
    esd_cache_ratio: float = field(default=0.05, metadata=in_range(0.0, 1.0, lo_open=True))
    esd_bound: int = field(default=100, metadata=in_range(0, None))
    timeout_s: float = field(default=60.0, metadata=in_range(1.0, None))
    deadline_s: float = field(default=600.0, metadata=in_range(1.0, None))
    networks: list[str] = field(default_factory=lambda: ["token_bucket", "kernel"],
                                metadata=nonempty())
    dense_modes: list[str] = field(default_factory=lambda: ["after_backward", "overlapped"],
                                   metadata=nonempty())
    bucket_mb: float = field(default=0.125, metadata=in_range(0.0, 1e6, lo_open=True))

    def __post_init__(self) -> None:
        check_each("networks", self.networks, lambda n: n in ("token_bucket", "kernel"),
                   "one of ('token_bucket', 'kernel')")
        # the modes the backend runs (workbench.training.dense_reducer.REAL_MODES)
        check_each("dense_modes", self.dense_modes,
                   lambda m: m in ("after_backward", "overlapped"),
                   "one of ('after_backward', 'overlapped'): dense on the parameter server "
                   "(ps) is modelled, not run in real processes")
        if len(set(self.networks)) != len(self.networks):
            raise ConfigError(f"networks = {self.networks}: each network at most once")
        if 0 not in self.bounds:
            raise ConfigError(f"bounds = {self.bounds}: must include 0 (the parameter check)")
        if self.batch_size % self.workers or self.batch_size % self.esd_workers:
            raise ConfigError(f"batch_size = {self.batch_size}: must be a multiple of workers "
                              f"= {self.workers} and esd_workers = {self.esd_workers}")
        if self.warmup >= self.steps:
            raise ConfigError(f"warmup = {self.warmup}: must be below steps = {self.steps}")
        if self.deadline_s < self.timeout_s:
            raise ConfigError(f"deadline_s = {self.deadline_s:g}: must be >= timeout_s = "
                              f"{self.timeout_s:g} (a run cannot end before its first timeout)")
        for key, n in (("bandwidth_gbps", self.workers), ("latency_ms", self.workers),
                       ("speed", self.workers), ("esd_bandwidth_gbps", self.esd_workers),
                       ("esd_latency_ms", self.esd_workers)):
            values = getattr(self, key)
            if len(values) not in (1, n):
                raise ConfigError(f"{key} has {len(values)} values: give 1 or exactly {n}")
        allowed = ("contiguous", "random", "laia", "esd_heuristic", "esd_greedy", "esd_exact",
                   "hybriddis")
        check_each("esd_dispatchers", self.esd_dispatchers, lambda d: d in allowed,
                   f"one of {allowed}")


@dataclass(frozen=True)
class CalibrationConfig:
    """The machine calibration the emulated clock reads (the ``calibrate`` stage).

    Attributes:
        batch_sizes: per-worker batch sizes each model step is timed at (the fit of
            ``seconds = per_batch + per_sample x samples`` needs at least two).
        repeats: timed steps per batch size (the median is kept) and software-cost repeats.
        warmup: untimed steps before the timed ones.
        threads: torch threads of the timed steps (the trainer's workers use one).
        software_sizes: message sizes (rows) of the software-cost fit.
    """

    batch_sizes: list[int] = field(default_factory=lambda: [32, 64, 128, 256],
                                   metadata=nonempty(in_range(1, 1_000_000)))
    repeats: int = field(default=5, metadata=in_range(1, 1000))
    warmup: int = field(default=2, metadata=in_range(0, 1000))
    threads: int = field(default=1, metadata=in_range(1, 1024))
    software_sizes: list[int] = field(default_factory=lambda: [1, 8, 64, 512, 4096],
                                      metadata=nonempty(in_range(1, 1_000_000)))

    def __post_init__(self) -> None:
        for key in ("batch_sizes", "software_sizes"):
            if len(set(getattr(self, key))) < 2:
                raise ConfigError(f"{key} = {getattr(self, key)}: the linear fit needs at "
                                  "least two different sizes")


#: The mechanisms the ``combined`` experiment switches on and off, in the ablation's order.
MECHANISMS = ("esd", "het", "recd", "hotline", "flexshard")


@dataclass(frozen=True)
class CombinedConfig:
    """The five mechanisms in one training run through ESD's edge cluster, and their ablation.

    Attributes:
        dataset: the dataset trained on.
        model: the model trained (a key of ``models``).
        mechanisms: the mechanisms the ablation switches (a subset of :data:`MECHANISMS`);
            the runs are: none, each alone, all, all but each, and all with LAIA dispatching.
        pairs: pairs of mechanisms also run together alone (their interaction: does one
            shrink the other's gain?).
        esd_dispatcher: the dispatcher when ``esd`` is on (``hybriddis`` or an ESD solver).
        baseline_dispatcher: the dispatcher when it is off.
        workers: edge workers.
        per_worker: samples per worker per global batch.
        max_bandwidth_gbps: the fastest edge link.
        bandwidth_spread: fastest / slowest link (log-spaced in between).
        latency_ms: link latency of every worker.
        cache_policy: the HET cache's policy when ``het`` is on (off: no cache).
        cache_ratio: cache rows per worker as a fraction of the table.
        bound: the HET cache's staleness bound (read and write).
        profile_rate: fraction of the train inputs profiled for the hot and replicated sets
            (drawn with replacement, as FAE and Hotline profile).
        hot_fraction: Hotline's accelerator budget, as a fraction of the table's rows.
        replicated_fraction: FlexShard's replicated tier, as a fraction of the table's rows.
        target_auc: the test AUC whose emulated time-to-target is reported (null: the
            dataset's ``target_auc``).
        epochs: passes over the train samples.
        eval_every: iterations between evaluations.
        max_train_samples: train samples used (null: all).
        max_test_samples: test samples evaluated (null: all).
    """

    dataset: str = "synthetic"
    model: str = "wdl"
    mechanisms: list[str] = field(default_factory=lambda: list(MECHANISMS), metadata=nonempty())
    pairs: list[list[str]] = field(default_factory=lambda: [
        ["esd", "recd"], ["esd", "het"], ["het", "hotline"], ["hotline", "flexshard"]])
    esd_dispatcher: str = "hybriddis"
    baseline_dispatcher: str = "random"
    workers: int = field(default=8, metadata=in_range(2, 1024))
    per_worker: int = field(default=64, metadata=in_range(1, None))
    max_bandwidth_gbps: float = field(default=1.0, metadata=in_range(0.0, None, lo_open=True))
    bandwidth_spread: float = field(default=10.0, metadata=in_range(1.0, None))
    latency_ms: float = field(default=1.0, metadata=in_range(0.0, None))
    cache_policy: Literal["lru", "lfu", "lfuopt"] = "lru"
    cache_ratio: float = field(default=0.05, metadata=in_range(0.0, 1.0, lo_open=True))
    bound: int = field(default=100, metadata=in_range(0, None))
    profile_rate: float = field(default=0.05, metadata=in_range(0.0, 1.0, lo_open=True))
    hot_fraction: float = field(default=0.01, metadata=in_range(0.0, 1.0, lo_open=True))
    replicated_fraction: float = field(default=0.005, metadata=in_range(0.0, 1.0, lo_open=True))
    target_auc: float | None = field(default=None, metadata=in_range(0.5, 1.0))
    epochs: int = field(default=1, metadata=in_range(1, None))
    eval_every: int = field(default=10, metadata=in_range(1, None))
    max_train_samples: int | None = field(default=None, metadata=in_range(1, None))
    max_test_samples: int | None = field(default=None, metadata=in_range(1, None))

    def __post_init__(self) -> None:
        check_each("mechanisms", self.mechanisms, lambda m: m in MECHANISMS,
                   f"one of {MECHANISMS}")
        for i, pair in enumerate(self.pairs):
            if len(pair) != 2 or len(set(pair)) != 2 or not set(pair) <= set(self.mechanisms):
                raise ConfigError(f"experiments.combined.pairs[{i}] = {pair}: must be two "
                                  f"different mechanisms of {self.mechanisms}")
        if len(set(self.mechanisms)) != len(self.mechanisms):
            raise ConfigError(f"experiments.combined.mechanisms = {self.mechanisms}: each at "
                              "most once")
        esd = ("esd_heuristic", "esd_greedy", "esd_exact", "hybriddis")
        if self.esd_dispatcher not in esd:
            raise ConfigError(f"experiments.combined.esd_dispatcher = {self.esd_dispatcher!r}: "
                              f"must be one of {esd}")
        if self.baseline_dispatcher not in ("contiguous", "random", "laia"):
            raise ConfigError("experiments.combined.baseline_dispatcher = "
                              f"{self.baseline_dispatcher!r}: must be contiguous, random or "
                              "laia")


@dataclass(frozen=True)
class ExperimentsConfig:
    """Settings of every experiment the pipeline runs."""

    dataset_stats: DatasetStatsConfig = field(default_factory=DatasetStatsConfig)
    het_cache: HetCacheConfig = field(default_factory=HetCacheConfig)
    het_train: HetTrainConfig = field(default_factory=HetTrainConfig)
    het_time: HetTimeConfig = field(default_factory=HetTimeConfig)
    het_scale: HetScaleConfig = field(default_factory=HetScaleConfig)
    esd: EsdConfig = field(default_factory=EsdConfig)
    recd: RecdConfig = field(default_factory=RecdConfig)
    hotline: HotlineConfig = field(default_factory=HotlineConfig)
    flexshard: FlexShardConfig = field(default_factory=FlexShardConfig)
    distributed_check: DistributedCheckConfig = field(default_factory=DistributedCheckConfig)
    calibrate: CalibrationConfig = field(default_factory=CalibrationConfig)
    combined: CombinedConfig = field(default_factory=CombinedConfig)
