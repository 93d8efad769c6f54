"""Config schemas of HET's stages and the clock's calibration: access skew, cache replay,
training (short and long runs), time model, table-size and epoch replays, calibration."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from workbench.cluster.config import UNBOUNDED
from workbench.utils.validation import ConfigError, check_each, in_range, nonempty

#: The staleness clock of every HET claim's cache (Table 1's Cache s=10 and s=100, Table 2's
#: bounds in HET's unit, Fig. 7's and Fig. 9a's Cache s=100): the paper's per-iteration clock
#: (section 3.1: a row's clock ticks once per iteration that updates it;
#: :data:`workbench.cluster.cache.CLOCKS`), so a bound s means what it means in the paper.
HET_CLOCK: Literal["update", "iteration"] = "iteration"


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
    bound_sweep: list[int] = field(default_factory=lambda: [0, 1, 10, 100, 1000, UNBOUNDED],
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
        dense_mode: where the dense AllReduce runs in these runs (the register's committed
            placement; [`workbench.cluster.dense_sync`][]): ``concurrent`` beside the
            embeddings' Write, as HET's workflow (Fig. 5) runs it.
        dense_link: the ring's link under ``concurrent``: ``shared`` (the worker's one NIC,
            as on HET's cluster A) or ``separate``.
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
    dense_mode: Literal["after_backward", "overlapped", "ps", "concurrent"] = "concurrent"
    dense_link: Literal["shared", "separate"] = "shared"

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
        default_factory=lambda: ["after_backward", "overlapped", "ps", "concurrent"],
        metadata=nonempty())
    row_cost_us_sweep: list[float] = field(
        default_factory=lambda: [0.5, 1.0, 2.0, 5.0, 10.0, 20.0],
        metadata=in_range(0.0, 1e6))

    def __post_init__(self) -> None:
        check_dense_modes("experiments.het_time.dense_modes", self.dense_modes)


def check_dense_modes(key: str, modes: list[str]) -> None:
    """Each of ``modes`` one of [`workbench.cluster.dense_sync.DENSE_MODES`][], once."""
    from workbench.cluster.dense_sync import DENSE_MODES
    check_each(key, modes, lambda m: m in DENSE_MODES, f"one of {DENSE_MODES}")
    if len(set(modes)) != len(modes):
        raise ConfigError(f"{key} = {modes}: each mode at most once")


@dataclass(frozen=True)
class HetScaleConfig:
    """HET's replays against the table size ([`workbench.experiments.het_scale`][]).

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
class HetEpochConfig:
    """HET's replay claims from one whole Criteo Kaggle epoch
    ([`workbench.experiments.het_epoch`][]).

    Attributes:
        dataset: the synthetic dataset whose generator draws the keys (its skew).
        scale: fraction of Criteo Kaggle's cardinalities (1.0: its 33.76M rows).
        samples: samples replayed (45,840,617: one HET epoch).
        workers: the worker counts of Fig. 9a (Cache s=100 at each).
        models: the models Fig. 7 is clocked for.
        bandwidths_gbps: Fig. 7's links (HET's clusters A and B).
        dense_modes: the dense modes swept (``concurrent`` on each of ``dense_links``).
        dense_links: the ring's links under ``concurrent``.
        fig2_dim: Fig. 2's embedding width.
        fig9_ps_shards: servers of the scaling study (HET's four).
        row_cost_us_sweep: per-row software costs (us, client and server each) Fig. 7's
            embedding communication is clocked at beside the calibrated one.
        fig8_policies: Fig. 8's cache policies, each replayed at every size of
            ``fig8_ratios`` (``cluster.workers`` workers, s = 100 in HET's clock).
        fig8_ratios: Fig. 8's cache sizes (fractions of the table).
        chunk_rows: samples whose keys are drawn at a time.
        jobs: replays run side by side (processes).
        memory_gb: the replays' memory budget (null: 80% of the available memory).
    """

    dataset: str = "synthetic"
    scale: float = field(default=1.0, metadata=in_range(0.0, 1.0, lo_open=True))
    samples: int = field(default=45_840_617, metadata=in_range(1, None))
    workers: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 16, 32],
                               metadata=nonempty(in_range(1, 1024)))
    models: list[str] = field(default_factory=lambda: ["wdl", "deepfm", "dcn"],
                              metadata=nonempty())
    bandwidths_gbps: list[float] = field(default_factory=lambda: [1.0, 10.0],
                                         metadata=nonempty(in_range(0.0, None, lo_open=True)))
    dense_modes: list[Literal["after_backward", "overlapped", "ps", "concurrent"]] = field(
        default_factory=lambda: ["after_backward", "concurrent"], metadata=nonempty())
    dense_links: list[Literal["shared", "separate"]] = field(
        default_factory=lambda: ["shared", "separate"], metadata=nonempty())
    fig2_dim: int = field(default=32, metadata=in_range(1, None))
    fig9_ps_shards: int = field(default=4, metadata=in_range(1, 4096))
    row_cost_us_sweep: list[float] = field(
        default_factory=lambda: [0.5, 1.0, 2.0, 5.0, 10.0, 20.0],
        metadata=nonempty(in_range(0.0, None)))
    fig8_policies: list[Literal["lru", "lfu", "lfuopt"]] = field(
        default_factory=lambda: ["lru", "lfu", "lfuopt"])
    fig8_ratios: list[float] = field(default_factory=lambda: [0.03, 0.05, 0.10, 0.15],
                                     metadata=in_range(0.0, 1.0, lo_open=True))
    chunk_rows: int = field(default=1_000_000, metadata=in_range(1, None))
    jobs: int = field(default=2, metadata=in_range(1, 256))
    memory_gb: float | None = field(default=None, metadata=in_range(0.0, None, lo_open=True))


@dataclass(frozen=True)
class HetLongConfig:
    """HET's Tables 1 and 2 from long training runs ([`workbench.experiments.het_long`][]).

    The model, the dense placement and the cluster are ``het_train``'s; the target AUC is the
    dataset's ``target_auc``.

    Attributes:
        dataset: the dataset trained on (its train split sets the run's length).
        bounds: the cache's staleness bounds in HET's clock (Table 2; -1 = infinity); Table 1
            reads the one that equals ``table1_bound``.
        table1_bound: Table 1's Cache bound (HET: s = 100).
        seeds: runs of every system, with seeds ``seed + r``: a new initialisation and data order
            each (r = 0 in file order).
        min_iterations: refuse a train split shorter than this many iterations (the point of
            the stage: a bound of 100 a small share of the run).
        eval_every: iterations between evaluations up to ``eval_until`` ...
        eval_until: ... (where the time to target is resolved) ...
        eval_every_late: ... and after it.
        max_test_samples: cap on test samples (null = all).
        target_sweep: target AUCs the time to target is also read at (the register's range).
        jobs: runs side by side (processes, one torch thread each).
    """

    dataset: str = "synthetic_long"
    bounds: list[int] = field(default_factory=lambda: [0, 100, 10_000, -1], metadata=nonempty())
    table1_bound: int = field(default=100, metadata=in_range(0, None))
    seeds: int = field(default=3, metadata=in_range(1, 20))
    min_iterations: int = field(default=10_000, metadata=in_range(1, None))
    eval_every: int = field(default=20, metadata=in_range(1, None))
    eval_until: int = field(default=2_000, metadata=in_range(0, None))
    eval_every_late: int = field(default=250, metadata=in_range(1, None))
    max_test_samples: int | None = field(default=20_000, metadata=in_range(1, None))
    target_sweep: list[float] = field(default_factory=lambda: [0.765, 0.77, 0.775, 0.78],
                                      metadata=nonempty(in_range(0.5, 1.0)))
    jobs: int = field(default=2, metadata=in_range(1, 256))

    def __post_init__(self) -> None:
        check_each("bounds", self.bounds, lambda b: b >= -1, ">= 0, or -1 for infinity")
        if self.table1_bound not in self.bounds:
            raise ConfigError(f"table1_bound = {self.table1_bound}: must be one of bounds = "
                              f"{self.bounds}")


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
