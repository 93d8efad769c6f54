"""Configuration: Hydra ``conf/`` -> validated, typed dataclasses -> code.

Config flows one way::

    conf/*.yaml --(Hydra compose + overrides)--> DictConfig --(validate)--> WorkbenchConfig
                 \\--(python -m workbench.config dump)--> params.yaml (what DVC tracks)

* ``conf/`` is the only hand-edited configuration. ``params.yaml`` is generated from it (``make
  params``; ``dvc exp run`` does the same composition) and committed, because ``dvc repro`` reads
  only ``params.yaml``; a test asserts the two agree.
* Pipeline stages read ``params.yaml`` (``--params params.yaml``), so ``dvc exp run -S key=value``
  works. Interactive use composes ``conf/`` with Hydra overrides on the command line::

      python -m workbench.data.prepare dataset=criteo_kaggle dataset.max_rows=100000

* Every value is checked before any work starts. A bad value stops with
  ``ConfigError: dataset.synthetic.rows = -5: must be an integer >= 1`` — the key, the value and
  what is allowed.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from omegaconf import DictConfig, ListConfig, OmegaConf

REPO_ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = REPO_ROOT / "conf"
PARAMS_FILE = REPO_ROOT / "params.yaml"


class ConfigError(ValueError):
    """A configuration value is missing, unknown or outside its allowed range."""


def _range(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
           hi_open: bool = False) -> dict[str, Any]:
    """Field metadata: the allowed numeric interval."""
    return {"range": (lo, hi, lo_open, hi_open)}


# --------------------------------------------------------------------------------------------
# Dataset
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SessionConfig:
    """Session structure of the synthetic data (RecD's dedup opportunity).

    Attributes:
        enabled: group consecutive samples into user sessions sharing the user-side features.
        mean_length: mean samples per session (geometric lengths).
        user_features: the categorical features that are user-side (constant in a session).
    """

    enabled: bool = False
    mean_length: float = field(default=8.0, metadata=_range(1.0, None))
    user_features: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SequenceConfig:
    """An optional user-history sequence feature (list of item ids) for the synthetic data.

    Attributes:
        enabled: add the list column ``hist_<item_feature>``.
        length: maximum history length.
        item_feature: the categorical feature whose ids the history holds.
    """

    enabled: bool = False
    length: int = field(default=20, metadata=_range(1, 10_000))
    item_feature: str = "C3"


@dataclass(frozen=True)
class SyntheticConfig:
    """The embedded default: a seeded generator calibrated to Criteo Kaggle.

    Attributes:
        rows: samples to generate (train + test).
        cardinality_scale: Criteo Kaggle's per-feature cardinalities are multiplied by this.
        min_cardinality: lower bound of a scaled cardinality.
        top1_share: target share of lookups taken by the top 1% of rows of each feature.
        dense_missing_rate: probability that a dense value is missing.
        ctr: target positive rate of the labels.
        label_noise: scale of the hidden model's logit noise (larger = harder to learn).
        sessions: session structure.
        sequence: optional user-history feature.
    """

    rows: int = field(default=400_000, metadata=_range(10, 2_000_000_000))
    cardinality_scale: float = field(default=0.01, metadata=_range(0.0, 1.0, lo_open=True))
    min_cardinality: int = field(default=2, metadata=_range(2, None))
    top1_share: float = field(default=0.6, metadata=_range(0.01, 1.0, lo_open=False, hi_open=True))
    dense_missing_rate: float = field(default=0.2, metadata=_range(0.0, 1.0, hi_open=True))
    ctr: float = field(default=0.25, metadata=_range(0.0, 1.0, lo_open=True, hi_open=True))
    label_noise: float = field(default=1.0, metadata=_range(0.0, None))
    sessions: SessionConfig = field(default_factory=SessionConfig)
    sequence: SequenceConfig = field(default_factory=SequenceConfig)


@dataclass(frozen=True)
class DatasetConfig:
    """One dataset: where it comes from and how it is turned into the columnar schema.

    Attributes:
        name: the dataset's name (also its directory under ``data/``).
        source: ``synthetic`` (embedded generator), ``url`` (a registry download), or ``local``
            (files already on disk at ``path``).
        format: raw format for ``url``/``local`` sources (see ``workbench.data.parsers``).
        registry: registry entry for ``url`` sources (``workbench.data.registry``).
        path: directory (or file) holding the raw files of a ``local`` source.
        files: file names inside ``path`` to read (empty = the registry's/format's defaults).
        days: Criteo 1TB days to download (``day_N.gz``).
        max_rows: keep at most this many rows (null = all).
        test_fraction: the last fraction of rows (chronological order) is the test split.
        min_count: categorical values seen fewer times than this map to id 0 (missing/rare).
        history_length: length of the user-history sequence feature (0 = none), where supported.
        strict: fail on the first malformed row (with file and line) instead of counting it.
        optional: a ``local`` source whose files are absent is recorded as unavailable (the
            pipeline goes on and the report says where to put the files) instead of failing.
        target_auc: the time-to-target AUC used by training experiments on this dataset.
        synthetic: generator settings (``source: synthetic`` only).
    """

    name: str = "synthetic"
    source: Literal["synthetic", "url", "local"] = "synthetic"
    format: str = "parquet"
    registry: str | None = None
    path: str | None = None
    files: list[str] = field(default_factory=list)
    days: list[int] = field(default_factory=list)
    max_rows: int | None = field(default=None, metadata=_range(1, None))
    test_fraction: float = field(default=0.1, metadata=_range(0.0, 1.0, lo_open=True, hi_open=True))
    min_count: int = field(default=1, metadata=_range(1, None))
    history_length: int = field(default=0, metadata=_range(0, 10_000))
    strict: bool = False
    optional: bool = False
    target_auc: float = field(default=0.75, metadata=_range(0.5, 1.0, hi_open=True))
    synthetic: SyntheticConfig | None = None


# --------------------------------------------------------------------------------------------
# Model, cluster, cache, dispatch
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ModelConfig:
    """A compact recommendation model: DLRM and HET's three (WDL, DeepFM, DCN).

    Attributes:
        name: architecture.
        embedding_dim: width D of every embedding row.
        bottom_mlp: DLRM's bottom MLP hidden sizes (dense features -> ... -> D is appended).
        top_mlp: DLRM's top MLP hidden sizes (a final 1-unit layer is appended).
        deep_mlp: hidden sizes of the deep part of WDL, DeepFM and DCN (HET: 3 x 256).
        cross_layers: DCN's cross layers.
        lr_dense: learning rate of the dense parameters.
        lr_sparse: plain-SGD learning rate of the embedding rows (as in HET).
        optimizer: optimizer of the dense parameters.
        batch_size: global mini-batch size (all workers together).
        init_scale: embedding rows start uniform in [-init_scale, init_scale].
    """

    name: Literal["dlrm", "wdl", "deepfm", "dcn"] = "dlrm"
    embedding_dim: int = field(default=16, metadata=_range(1, 65_536))
    bottom_mlp: list[int] = field(default_factory=lambda: [512, 256, 64])
    top_mlp: list[int] = field(default_factory=lambda: [512, 256])
    deep_mlp: list[int] = field(default_factory=lambda: [256, 256, 256])
    cross_layers: int = field(default=3, metadata=_range(0, 64))
    lr_dense: float = field(default=0.1, metadata=_range(0.0, None, lo_open=True))
    lr_sparse: float = field(default=0.1, metadata=_range(0.0, None, lo_open=True))
    optimizer: Literal["sgd", "adagrad", "adam"] = "adagrad"
    batch_size: int = field(default=1024, metadata=_range(1, None))
    init_scale: float = field(default=0.05, metadata=_range(0.0, None))

    def __post_init__(self) -> None:
        for key in ("bottom_mlp", "top_mlp", "deep_mlp"):
            for i, width in enumerate(getattr(self, key)):
                if width < 1:
                    raise ConfigError(f"{key}[{i}] = {width}: must be >= 1")


@dataclass(frozen=True)
class ClusterConfig:
    """The emulated edge cluster (DESIGN.md §3).

    Per-worker lists hold either one value (every worker) or exactly ``workers`` values.

    Attributes:
        name: profile name.
        workers: number of edge workers W.
        bandwidth_gbps: link bandwidth to the parameter server, Gb/s.
        latency_ms: one-way link latency, ms.
        speed: relative compute speed (1.0 = the reference worker).
        ps_shards: parameter-server shards (rows are spread evenly over them).
        ps_bandwidth_gbps: network bandwidth of one parameter-server shard, Gb/s: the server
            side is shared by all workers, so an iteration's PS traffic takes at least
            total bytes / (ps_shards x ps_bandwidth).
        sync: ``bsp`` (all pushes of step t before reads of t+1) or ``asp``.
        gflops: effective GFLOP/s of a speed-1.0 worker on the model's dense compute; the
            emulated compute time of a batch is its modelled FLOPs / (gflops x speed).
    """

    name: str = "homogeneous_1g"
    workers: int = field(default=8, metadata=_range(1, 4096))
    bandwidth_gbps: list[float] = field(default_factory=lambda: [1.0])
    latency_ms: list[float] = field(default_factory=lambda: [0.05])
    speed: list[float] = field(default_factory=lambda: [1.0])
    ps_shards: int = field(default=1, metadata=_range(1, 4096))
    ps_bandwidth_gbps: float = field(default=1.0, metadata=_range(0.0, None, lo_open=True))
    sync: Literal["bsp", "asp"] = "bsp"
    gflops: float = field(default=1000.0, metadata=_range(0.0, None, lo_open=True))

    def __post_init__(self) -> None:
        for key, lo_open in (("bandwidth_gbps", True), ("latency_ms", False), ("speed", True)):
            values = getattr(self, key)
            if len(values) not in (1, self.workers):
                raise ConfigError(f"{key} has {len(values)} values: give 1 (all workers) "
                                  f"or exactly workers = {self.workers}")
            for i, v in enumerate(values):
                if v < 0 or (lo_open and v == 0):
                    bound = "> 0" if lo_open else ">= 0"
                    raise ConfigError(f"{key}[{i}] = {v}: must be {bound}")

    def per_worker(self, key: str) -> list[float]:
        """The per-worker values of ``bandwidth_gbps``, ``latency_ms`` or ``speed``."""
        values = getattr(self, key)
        return list(values) * self.workers if len(values) == 1 else list(values)


@dataclass(frozen=True)
class CacheConfig:
    """Per-worker embedding cache with HET's bounded staleness (DESIGN.md §3.1).

    Attributes:
        policy: eviction policy, or ``none`` (pull and push every key every iteration).
        ratio: cache capacity as a fraction of the table rows, in (0, 1].
        rows: absolute capacity in rows (overrides ``ratio`` when set).
        read_bound: staleness bound s for reads (pull iff server_ver - version > s).
        write_bound: push a line once it holds more than this many unpushed updates.
    """

    policy: Literal["lru", "lfu", "lfuopt", "none"] = "lru"
    ratio: float = field(default=0.1, metadata=_range(0.0, 1.0, lo_open=True))
    rows: int | None = field(default=None, metadata=_range(1, None))
    read_bound: int = field(default=100, metadata=_range(0, None))
    write_bound: int = field(default=100, metadata=_range(0, None))


@dataclass(frozen=True)
class DispatchConfig:
    """Which sample of a global batch goes to which worker.

    Attributes:
        name: dispatcher (``contiguous``: consecutive slices; ``random``: a seeded permutation).
    """

    name: Literal["contiguous", "random"] = "contiguous"


# --------------------------------------------------------------------------------------------
# Experiments, profile, paths, pipeline
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class DatasetStatsConfig:
    """Dataset statistics and HET Fig. 3 (access skew).

    Attributes:
        top_fractions: fractions of rows whose share of lookups is reported.
        skew_claim_fraction: HET's claim: the top ``skew_claim_fraction`` of rows ...
        skew_claim_share: ... get this share of the updates (0.9 on Criteo, HET Fig. 3).
        rank_points: points kept per curve in the rank plot (log-spaced).
    """

    top_fractions: list[float] = field(default_factory=lambda: [0.01, 0.1])
    skew_claim_fraction: float = field(default=0.1, metadata=_range(0.0, 1.0, lo_open=True))
    skew_claim_share: float = field(default=0.9, metadata=_range(0.0, 1.0, lo_open=True))
    rank_points: int = field(default=200, metadata=_range(10, 100_000))

    def __post_init__(self) -> None:
        for i, f in enumerate(self.top_fractions):
            if not 0 < f <= 1:
                raise ConfigError(f"top_fractions[{i}] = {f}: must be in (0, 1]")


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

    datasets: list[str] = field(default_factory=lambda: ["synthetic"])
    workers: int = field(default=8, metadata=_range(1, 1024))
    batch_size: int = field(default=128, metadata=_range(1, None))
    min_steps: int = field(default=200, metadata=_range(1, None))
    max_samples: int | None = field(default=None, metadata=_range(1, None))
    dim: int = field(default=128, metadata=_range(1, 65_536))
    policy: Literal["lru", "lfu", "lfuopt"] = "lfuopt"
    cache_ratio: float = field(default=0.1, metadata=_range(0.0, 1.0, lo_open=True))
    cache_ratios: list[float] = field(default_factory=lambda: [0.03, 0.05, 0.1, 0.15])
    policies: list[str] = field(default_factory=lambda: ["lru", "lfu", "lfuopt"])
    miss_rate_bound: int = field(default=100, metadata=_range(0, None))
    system_bounds: list[int] = field(default_factory=lambda: [0, 10, 100])
    bound_sweep: list[int] = field(default_factory=lambda: [0, 1, 10, 100, 1000, 10**9])
    worker_sweep: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 16, 32])
    order: Literal["bsp", "sequential"] = "bsp"
    dispatcher: Literal["contiguous", "random"] = "contiguous"
    claim_bound: int = field(default=100, metadata=_range(0, None))

    def __post_init__(self) -> None:
        for i, r in enumerate(self.cache_ratios):
            if not 0 < r <= 1:
                raise ConfigError(f"cache_ratios[{i}] = {r}: must be in (0, 1]")
        for i, p in enumerate(self.policies):
            if p not in ("lru", "lfu", "lfuopt"):
                raise ConfigError(f"policies[{i}] = {p!r}: must be one of 'lru', 'lfu', 'lfuopt'")
        for key in ("system_bounds", "bound_sweep"):
            for i, b in enumerate(getattr(self, key)):
                if b < 0:
                    raise ConfigError(f"{key}[{i}] = {b}: must be >= 0")
        for i, w in enumerate(self.worker_sweep):
            if w < 1:
                raise ConfigError(f"worker_sweep[{i}] = {w}: must be >= 1")
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
        staleness: Table 2's bounds in HET's units (-1 = infinity), scaled to this run's length.
        het_iterations: iterations of one HET epoch (45.84M samples / 1,024), the unit of the
            staleness scaling: s_here = ceil(s x iterations_here / het_iterations).
        epochs: passes over the train split.
        eval_every: evaluate test AUC every this many iterations.
        max_train_samples: cap on train samples (null = all).
        max_test_samples: cap on test samples (null = all).
        asp_staleness: dense-gradient delay of ASP in iterations (null = workers - 1).
    """

    dataset: str = "synthetic"
    model: str = "wdl"
    systems: list[str] = field(default_factory=lambda: ["ps", "hybrid", "allreduce", "cache"])
    cache_bounds: list[int] = field(default_factory=lambda: [10, 100])
    staleness: list[int] = field(default_factory=lambda: [0, 100, 10_000, -1])
    het_iterations: int = field(default=44_766, metadata=_range(1, None))
    epochs: int = field(default=1, metadata=_range(1, 1000))
    eval_every: int = field(default=25, metadata=_range(1, None))
    max_train_samples: int | None = field(default=None, metadata=_range(1, None))
    max_test_samples: int | None = field(default=None, metadata=_range(1, None))
    asp_staleness: int | None = field(default=None, metadata=_range(0, None))

    def __post_init__(self) -> None:
        for i, name in enumerate(self.systems):
            if name not in ("ps", "hybrid", "allreduce", "cache"):
                raise ConfigError(f"systems[{i}] = {name!r}: must be one of 'ps', 'hybrid', "
                                  "'allreduce', 'cache'")
        for i, b in enumerate(self.staleness):
            if b < -1:
                raise ConfigError(f"staleness[{i}] = {b}: must be >= 0, or -1 for infinity")


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
    """

    dataset: str = "synthetic"
    models: list[str] = field(default_factory=lambda: ["wdl", "deepfm", "dcn"])
    bandwidths_gbps: list[float] = field(default_factory=lambda: [1.0, 10.0])
    fig2_dim: int = field(default=32, metadata=_range(1, 65_536))
    fig9_ps_shards: int = field(default=4, metadata=_range(1, 4096))
    worker_sweep: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 16, 32])
    dim_sweep: list[int] = field(default_factory=lambda: [128, 256, 512, 1024, 2048, 4096])
    max_samples: int | None = field(default=None, metadata=_range(1, None))


@dataclass(frozen=True)
class EsdConfig:
    """ESD experiments: dispatchers compared on expected transmission cost and end to end.

    Attributes:
        dataset: the dataset whose train split is dispatched.
        dispatchers: the dispatchers compared.
        workers: edge workers of the base setting.
        per_worker: samples per worker per batch of the base setting.
        batches: global batches per run.
        warmup: first batches left out of the averages (cold caches).
        cache_ratio: cache rows per worker as a fraction of the table.
        bound: staleness bound of the caches (read and write).
        max_bandwidth_gbps: the fastest worker's link.
        bandwidth_spread: fastest / slowest link of the base setting (log-spaced in between).
        latency_ms: link latency of every worker.
        exact_mode: ``additive`` (transportation problem) or ``dedup`` (ILP) for esd_exact.
        objective: ``total`` (the paper's summed weighted cost) or ``makespan`` (the slowest
            worker's cost; additive mode only).
        time_limit_s: MILP time limit of the dedup solver.
        hybrid_budget_s: hybriddis' decision budget per batch.
        small_instance: hybriddis runs the exact solver whenever N x W is at most this.
        exact_seconds_per_variable: hybriddis' predicted exact-solver seconds per
            sample-worker variable (null: learn it from measured solves, machine-dependent).
        worker_sweep: workers of the scaling sweep.
        cache_sweep: cache ratios of the cache sweep.
        spread_sweep: bandwidth spreads of the heterogeneity sweep.
        batch_sweep: samples per worker of the batch-size sweep.
        train_dispatchers: dispatchers trained end to end (test AUC against emulated time).
        train_model: the model trained end to end (a key of ``models``).
    """

    dataset: str = "synthetic"
    dispatchers: list[str] = field(default_factory=lambda: [
        "random", "contiguous", "laia", "esd_heuristic", "esd_exact", "hybriddis"])
    workers: int = field(default=8, metadata=_range(1, 1024))
    per_worker: int = field(default=64, metadata=_range(1, None))
    batches: int = field(default=40, metadata=_range(1, None))
    warmup: int = field(default=5, metadata=_range(0, None))
    cache_ratio: float = field(default=0.05, metadata=_range(0.0, 1.0, lo_open=True))
    bound: int = field(default=100, metadata=_range(0, None))
    max_bandwidth_gbps: float = field(default=1.0, metadata=_range(0.0, None, lo_open=True))
    bandwidth_spread: float = field(default=10.0, metadata=_range(1.0, None))
    latency_ms: float = field(default=1.0, metadata=_range(0.0, None))
    exact_mode: Literal["additive", "dedup"] = "additive"
    objective: Literal["total", "makespan"] = "total"
    time_limit_s: float = field(default=0.5, metadata=_range(0.0, None, lo_open=True))
    hybrid_budget_s: float = field(default=0.02, metadata=_range(0.0, None))
    small_instance: int = field(default=2048, metadata=_range(0, None))
    exact_seconds_per_variable: float | None = field(default=2.5e-6,
                                                     metadata=_range(0.0, None, lo_open=True))
    worker_sweep: list[int] = field(default_factory=lambda: [2, 4, 8, 16])
    cache_sweep: list[float] = field(default_factory=lambda: [0.01, 0.05, 0.1, 0.2])
    spread_sweep: list[float] = field(default_factory=lambda: [1.0, 10.0, 100.0])
    batch_sweep: list[int] = field(default_factory=lambda: [32, 64, 128])
    train_dispatchers: list[str] = field(default_factory=lambda: [
        "random", "laia", "hybriddis"])
    train_model: str = "wdl"

    def __post_init__(self) -> None:
        allowed = ("contiguous", "random", "laia", "esd_heuristic", "esd_exact", "hybriddis")
        for key in ("dispatchers", "train_dispatchers"):
            for i, name in enumerate(getattr(self, key)):
                if name not in allowed:
                    raise ConfigError(f"{key}[{i}] = {name!r}: must be one of {allowed}")
        for i, r in enumerate(self.cache_sweep):
            if not 0 < r <= 1:
                raise ConfigError(f"cache_sweep[{i}] = {r}: must be in (0, 1]")
        for i, r in enumerate(self.spread_sweep):
            if r < 1:
                raise ConfigError(f"spread_sweep[{i}] = {r}: must be >= 1")
        if self.objective == "makespan" and self.exact_mode != "additive":
            raise ConfigError("objective = 'makespan' needs exact_mode = 'additive'")


@dataclass(frozen=True)
class TransformStepConfig:
    """One preprocessing transform of a sparse feature (:mod:`workbench.transforms`).

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
    num_buckets: int | None = field(default=None, metadata=_range(1, None))
    salt: int = field(default=0, metadata=_range(0, None))
    table: list[int] | None = None
    boundaries: list[float] | None = None
    max_length: int | None = field(default=None, metadata=_range(0, None))
    keep: Literal["last", "first"] = "last"

    def spec(self) -> dict[str, Any]:
        """The step as :func:`workbench.transforms.from_spec` reads it (only its own args)."""
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

    datasets: list[str] = field(default_factory=lambda: ["synthetic_sessions"])
    session_gap_s: int | None = field(default=1800, metadata=_range(1, None))
    history: Literal["snapshot", "per_sample"] = "snapshot"
    window: int = field(default=16384, metadata=_range(1, None))
    window_sweep: list[int] = field(default_factory=lambda: [1024, 4096, 16384, 65536])
    batch_sizes: list[int] = field(default_factory=lambda: [32, 128, 512, 2048])
    dedup_groups: list[list[str]] | None = None
    transforms: dict[str, list[TransformStepConfig]] = field(default_factory=dict)
    max_history: int = field(default=20, metadata=_range(1, 10_000))
    preprocess_batch_sizes: list[int] = field(default_factory=lambda: [512, 2048, 8192])
    preprocess_rows: int = field(default=65536, metadata=_range(1, None))
    repeats: int = field(default=3, metadata=_range(1, 100))
    train_batch_size: int = field(default=512, metadata=_range(1, None))
    train_batches: int = field(default=40, metadata=_range(1, None))
    embedding_dim: int = field(default=32, metadata=_range(1, 4096))
    bottom_mlp: list[int] = field(default_factory=lambda: [64])
    top_mlp: list[int] = field(default_factory=lambda: [64])
    seq_heads: int = field(default=2, metadata=_range(1, 64))
    lr: float = field(default=0.05, metadata=_range(0.0, None, lo_open=True))

    def __post_init__(self) -> None:
        for key in ("window_sweep", "batch_sizes", "preprocess_batch_sizes", "bottom_mlp",
                    "top_mlp"):
            for i, n in enumerate(getattr(self, key)):
                if n < 1:
                    raise ConfigError(f"{key}[{i}] = {n}: must be an integer >= 1")
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
class ExperimentsConfig:
    """Settings of every experiment the pipeline runs."""

    dataset_stats: DatasetStatsConfig = field(default_factory=DatasetStatsConfig)
    het_cache: HetCacheConfig = field(default_factory=HetCacheConfig)
    het_train: HetTrainConfig = field(default_factory=HetTrainConfig)
    het_time: HetTimeConfig = field(default_factory=HetTimeConfig)
    esd: EsdConfig = field(default_factory=EsdConfig)
    recd: RecdConfig = field(default_factory=RecdConfig)


@dataclass(frozen=True)
class ProfileConfig:
    """Run size. ``default`` is the full embedded reproduction; ``ci`` shrinks everything.

    Attributes:
        name: ``default`` or ``ci``.
        synthetic_rows: rows of the synthetic dataset.
        cardinality_scale: scale of Criteo's cardinalities for the synthetic dataset.
        sample_max_rows: rows read from each real sample (null = all).
        het_max_samples: train samples replayed by the HET cache experiments (null = all).
        het_min_steps: iterations the HET cache experiments replay at least.
        het_batch_size: samples per worker per iteration of the HET cache experiments.
        train_epochs: epochs of the training experiments.
        train_eval_every: iterations between two test evaluations.
        train_max_samples: train samples of the training experiments (null = all).
        train_max_test: test samples of the training experiments (null = all).
        het_embedding_dim: embedding width of HET's models (WDL, DeepFM, DCN).
        esd_per_worker: samples per worker per batch of the ESD experiments.
        esd_batches: global batches per ESD run.
        recd_rows: rows of the synthetic sessions dataset of the RecD experiments.
        recd_window: rows per partition (clustering window) of the RecD experiments.
        recd_batches: batches of each RecD training run.
        recd_preprocess_rows: rows of each RecD preprocessing-throughput run.
        progress: show tqdm progress bars.
    """

    name: str = "default"
    synthetic_rows: int = field(default=400_000, metadata=_range(10, None))
    cardinality_scale: float = field(default=0.01, metadata=_range(0.0, 1.0, lo_open=True))
    sample_max_rows: int | None = field(default=None, metadata=_range(1, None))
    het_max_samples: int | None = field(default=None, metadata=_range(1, None))
    het_min_steps: int = field(default=200, metadata=_range(1, None))
    het_batch_size: int = field(default=128, metadata=_range(1, None))
    train_epochs: int = field(default=1, metadata=_range(1, None))
    train_eval_every: int = field(default=25, metadata=_range(1, None))
    train_max_samples: int | None = field(default=None, metadata=_range(1, None))
    train_max_test: int | None = field(default=None, metadata=_range(1, None))
    het_embedding_dim: int = field(default=128, metadata=_range(1, 65_536))
    esd_per_worker: int = field(default=64, metadata=_range(1, None))
    esd_batches: int = field(default=40, metadata=_range(1, None))
    recd_rows: int = field(default=200_000, metadata=_range(10, None))
    recd_window: int = field(default=16384, metadata=_range(1, None))
    recd_batches: int = field(default=40, metadata=_range(1, None))
    recd_preprocess_rows: int = field(default=65536, metadata=_range(1, None))
    progress: bool = True


@dataclass(frozen=True)
class PathsConfig:
    """Where stages read and write (relative paths are relative to the repository root)."""

    data: str = "data"
    results: str = "results"
    reports: str = "reports"
    shared_data: str = "../shared/data"

    def resolve(self, key: str) -> Path:
        """Absolute path of ``data``, ``results``, ``reports`` or ``shared_data``."""
        p = Path(getattr(self, key))
        return p if p.is_absolute() else REPO_ROOT / p


@dataclass(frozen=True)
class PipelineConfig:
    """What ``dvc repro`` runs.

    Attributes:
        datasets: the datasets (keys of ``datasets``) every per-dataset stage runs on.
        notebooks: the figure notebooks (``notebooks/<name>.py``) executed by papermill.
    """

    datasets: list[str] = field(default_factory=lambda: ["synthetic"])
    notebooks: list[str] = field(default_factory=lambda: ["datasets"])


@dataclass(frozen=True)
class WorkbenchConfig:
    """The whole validated configuration."""

    seed: int = field(default=0, metadata=_range(0, 2**32 - 1))
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    profile: ProfileConfig = field(default_factory=ProfileConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    datasets: dict[str, DatasetConfig] = field(default_factory=dict)
    model: ModelConfig = field(default_factory=ModelConfig)
    models: dict[str, ModelConfig] = field(default_factory=dict)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    cache: CacheConfig = field(default_factory=CacheConfig)
    dispatch: DispatchConfig = field(default_factory=DispatchConfig)
    experiments: ExperimentsConfig = field(default_factory=ExperimentsConfig)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)

    def __post_init__(self) -> None:
        for name in self.pipeline.datasets:
            if name not in self.datasets:
                raise ConfigError(f"pipeline.datasets names '{name}', which is not a key of "
                                  f"datasets (known: {sorted(self.datasets)})")
        for name in self.experiments.het_cache.datasets:
            if name not in self.pipeline.datasets:
                raise ConfigError(f"experiments.het_cache.datasets names '{name}', which is not "
                                  f"in pipeline.datasets {self.pipeline.datasets}")
        for owner, names, known in (
                ("experiments.het_train.dataset", [self.experiments.het_train.dataset],
                 self.pipeline.datasets),
                ("experiments.het_time.dataset", [self.experiments.het_time.dataset],
                 self.pipeline.datasets),
                ("experiments.het_train.model", [self.experiments.het_train.model],
                 list(self.models)),
                ("experiments.het_time.models", self.experiments.het_time.models,
                 list(self.models)),
                ("experiments.esd.dataset", [self.experiments.esd.dataset],
                 self.pipeline.datasets),
                ("experiments.esd.train_model", [self.experiments.esd.train_model],
                 list(self.models))):
            for name in names:
                if name not in known:
                    raise ConfigError(f"{owner} names '{name}', which is not one of {known}")
        for name in self.experiments.recd.datasets:
            if name not in self.pipeline.datasets:
                raise ConfigError(f"experiments.recd.datasets names '{name}', which is not "
                                  f"in pipeline.datasets {self.pipeline.datasets}")
        for key, model in self.models.items():
            if model.name != key:
                raise ConfigError(f"models.{key}.name = {model.name!r}: must equal its key")
        for key, ds in self.datasets.items():
            if ds.name != key:
                raise ConfigError(f"datasets.{key}.name = {ds.name!r}: must equal its key {key!r}")

    def dataset_named(self, name: str | None) -> DatasetConfig:
        """The dataset config ``datasets[name]``, or ``dataset`` when ``name`` is None."""
        if name is None:
            return self.dataset
        if name not in self.datasets:
            raise ConfigError(f"--dataset {name!r} is not configured: choose one of "
                              f"{sorted(self.datasets)} (conf/config.yaml mounts them under "
                              "datasets) or select one with the override dataset=<name>")
        return self.datasets[name]


# --------------------------------------------------------------------------------------------
# Generic conversion DictConfig -> dataclass, with validation
# --------------------------------------------------------------------------------------------

def _describe(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (list, dict):
        return str(tp).replace("typing.", "")
    return getattr(tp, "__name__", str(tp))


def _convert(value: Any, tp: Any, key: str, meta: dict[str, Any] | None = None) -> Any:
    """Convert a plain (OmegaConf-resolved) value to ``tp``, raising ConfigError on mismatch."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            if type(None) in args:
                return None
            raise ConfigError(f"{key} = null: a value is required")
        non_none = [a for a in args if a is not type(None)]
        return _convert(value, non_none[0], key, meta)
    if value is None:
        raise ConfigError(f"{key} = null: a value is required ({_describe(tp)})")
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"{key} = {value!r}: must be {_describe(tp)}")
        return value
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{key} = {value!r}: must be a mapping of {tp.__name__} fields")
        return from_dict(tp, value, key)
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{key} = {value!r}: must be a list")
        return [_convert(v, args[0], f"{key}[{i}]", meta) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key} = {value!r}: must be a mapping")
        return {str(k): _convert(v, args[1], f"{key}.{k}") for k, v in value.items()}
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key} = {value!r}: must be true or false")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key} = {value!r}: must be an integer{_range_text(meta)}")
        _check_range(value, key, meta)
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key} = {value!r}: must be a number{_range_text(meta)}")
        _check_range(float(value), key, meta)
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key} = {value!r}: must be a string")
        return value
    raise TypeError(f"unsupported config type {tp} at {key}")


def _range_text(meta: dict[str, Any] | None) -> str:
    if not meta or "range" not in meta:
        return ""
    lo, hi, lo_open, hi_open = meta["range"]
    parts = []
    if lo is not None:
        parts.append(f"{'>' if lo_open else '>='} {lo}")
    if hi is not None:
        parts.append(f"{'<' if hi_open else '<='} {hi}")
    return " " + " and ".join(parts)


def _check_range(value: float, key: str, meta: dict[str, Any] | None) -> None:
    if not meta or "range" not in meta:
        return
    lo, hi, lo_open, hi_open = meta["range"]
    bad = (lo is not None and (value < lo or (lo_open and value == lo))) or \
          (hi is not None and (value > hi or (hi_open and value == hi)))
    if bad:
        kind = "an integer" if isinstance(value, int) else "a number"
        raise ConfigError(f"{key} = {value!r}: must be {kind}{_range_text(meta)}")


def from_dict(cls: type, data: dict[str, Any], prefix: str = "") -> Any:
    """Build and validate dataclass ``cls`` from a plain dict.

    Args:
        cls: the dataclass type.
        data: plain (resolved) mapping; unknown keys are an error.
        prefix: dotted key of ``data`` in the whole config, for messages.

    Raises:
        ConfigError: naming the dotted key, the value and what is allowed.
    """
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    dot = f"{prefix}." if prefix else ""
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"unknown key {dot}{unknown[0]}: allowed keys of {prefix or 'the config'}"
                          f" are {sorted(fields)}")
    kwargs = {name: _convert(data[name], hints[name], f"{dot}{name}", dict(fields[name].metadata))
              for name in fields if name in data}
    try:
        return cls(**kwargs)
    except ConfigError as err:  # a cross-field check in __post_init__: its key is relative
        if not prefix:
            raise
        raise ConfigError(f"{dot}{err}") from None


def validate(cfg: DictConfig | dict[str, Any]) -> WorkbenchConfig:
    """Resolve interpolations and validate the whole config into :class:`WorkbenchConfig`."""
    if isinstance(cfg, (DictConfig, ListConfig)):
        try:
            data = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
        except Exception as err:  # interpolation errors name the key themselves
            raise ConfigError(f"cannot resolve the config: {err}") from err
    else:
        data = cfg
    return from_dict(WorkbenchConfig, data)


def compose(overrides: list[str] | None = None) -> DictConfig:
    """Compose ``conf/config.yaml`` with Hydra overrides (the command-line grammar)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return hydra_compose(config_name="config", overrides=list(overrides or []))
    except HydraException as err:
        raise ConfigError(f"bad override or config group: {err}") from err
    finally:
        GlobalHydra.instance().clear()


def load(overrides: list[str] | None = None, params: Path | str | None = None) -> WorkbenchConfig:
    """Load and validate the configuration.

    Args:
        overrides: Hydra overrides (``key=value``, ``group=option``, ``+key=value``). With
            ``params`` only ``key=value`` dot-list overrides apply.
        params: a composed ``params.yaml`` to read instead of composing ``conf/``.
    """
    overrides = list(overrides or [])
    if params is None:
        return validate(compose(overrides))
    path = Path(params)
    if not path.exists():
        raise ConfigError(f"{path} not found: run `make params` to generate it from conf/")
    cfg = OmegaConf.load(path)
    bad = [o for o in overrides if "=" not in o]
    if bad:
        raise ConfigError(f"override {bad[0]!r} is not key=value")
    cfg = OmegaConf.merge(cfg, OmegaConf.from_dotlist(overrides))
    return validate(cfg)


def to_yaml(cfg: DictConfig) -> str:
    """The resolved YAML text of a composed config (what ``params.yaml`` holds)."""
    return OmegaConf.to_yaml(OmegaConf.create(OmegaConf.to_container(cfg, resolve=True)),
                             sort_keys=False)


def stage_arguments(description: str, argv: list[str] | None = None) -> tuple[WorkbenchConfig,
                                                                               argparse.Namespace]:
    """Common command line of every stage entry point.

    ``--params FILE`` reads a composed params file (what DVC stages do); otherwise ``conf/`` is
    composed. Remaining arguments are Hydra overrides. ``--dataset NAME`` picks
    ``datasets.NAME`` (the pipeline's per-dataset stages); without it ``dataset`` is used.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--params", type=Path, default=None,
                        help="read this composed params file instead of composing conf/")
    parser.add_argument("--dataset", default=None, help="use datasets.<NAME> from the config")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. dataset=criteo_kaggle")
    args = parser.parse_args(argv)
    try:
        cfg = load(args.overrides, args.params)
        cfg.dataset_named(args.dataset)
    except ConfigError as err:
        parser.exit(2, f"ConfigError: {err}\n")
    return cfg, args


def main(argv: list[str] | None = None) -> None:
    """``python -m workbench.config dump [overrides] [-o params.yaml]``: write the composed config.

    ``check`` validates and prints the resolved config.
    """
    from workbench.io import write_text

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("command", choices=["dump", "check"])
    parser.add_argument("overrides", nargs="*")
    parser.add_argument("-o", "--out", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        composed = compose(args.overrides)
        validate(composed)
    except ConfigError as err:
        parser.exit(2, f"ConfigError: {err}\n")
    text = ("# GENERATED from conf/ by `python -m workbench.config dump` (make params).\n"
            "# Do not edit: change conf/ instead. dvc repro reads this file.\n" + to_yaml(composed))
    if args.command == "dump" and args.out is not None:
        if not args.out.exists() or args.out.read_text() != text:
            write_text(args.out, text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
