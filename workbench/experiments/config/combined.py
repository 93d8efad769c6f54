"""Config schemas of the five mechanisms in one training run (combined)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from workbench.utils.validation import ConfigError, check_each, in_range, nonempty

MECHANISMS = ("esd", "het", "recd", "hotline", "flexshard")


@dataclass(frozen=True)
class CombinedConfig:
    """The five mechanisms in one training run through ESD's edge cluster, and their ablation.

    Attributes:
        dataset: the dataset trained on.
        model: the model trained (a key of ``models``).
        mechanisms: the mechanisms the ablation switches (a subset of [`MECHANISMS`][]);
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
