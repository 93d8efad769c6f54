"""The typed components a [`Trainer`][workbench.training.trainer.Trainer] is built from.

    Trainer(ModelSpec        what is trained: model config, dense / sparse features, table rows
            SystemSpec       which of HET's systems (a SystemKind, its bound and clock)
            ClusterSetup     where: the cluster's links and speeds, the caches, the clock's costs,
                             the samples of each worker
            DispatcherSpec   who trains which sample (workbench.dispatch.registry)
            Mechanisms)      the switches: dedup, replicated rows, popular overlap, ASP delay,
                             the dispatch decision's budget

and an [`EvalSchedule`][] for a long run's evaluations.

Systems (HET's, section 5):

| system | embeddings | dense parameters | synchronisation |
| --- | --- | --- | --- |
| ``plain`` | local table | local | one process |
| ``ps`` | PS, no cache | PS push/pull | ASP (delayed gradient) |
| ``hybrid`` | PS, no cache | AllReduce | BSP |
| ``allreduce`` | replicated, AllGather | AllReduce | BSP |
| ``cache`` | HET cache (bound s) | AllReduce | BSP |
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

import numpy as np

from workbench.cluster.config import CacheConfig, ClusterConfig
from workbench.cluster.routes import DenseRoute, Routes, SparseRoute
from workbench.cluster.time_model import ComputeCost, SoftwareCost
from workbench.dispatch.registry import DispatcherSpec
from workbench.models.config import ModelConfig

__all__ = ["CONTIGUOUS", "KINDS", "NO_MECHANISMS", "ClusterSetup", "EvalSchedule", "Mechanisms",
           "ModelSpec", "SystemKind", "SystemSpec"]


class SystemKind(StrEnum):
    """HET's training systems, and a single process as the reference.

    | kind | what it is | dense | embeddings |
    | --- | --- | --- | --- |
    | plain | one process, no cluster (the reference) | - | - |
    | ps | parameter server, asynchronous (ASP: per-worker clocks) | ps | ps |
    | hybrid | HET's Hybrid: embeddings on the PS, no cache | ring | ps |
    | allreduce | embeddings replicated, updates all-gathered | ring | allgather |
    | cache | Hybrid with HET's bounded-staleness cache per worker | ring | ps |
    """

    PLAIN = "plain"
    PS = "ps"
    HYBRID = "hybrid"
    ALLREDUCE = "allreduce"
    CACHE = "cache"

    @property
    def routes(self) -> Routes:
        """How its dense gradients and embedding rows travel (the time model charges them)."""
        return Routes(DenseRoute.PS if self is SystemKind.PS else DenseRoute.ALLREDUCE,
                      SparseRoute.ALLGATHER if self is SystemKind.ALLREDUCE else SparseRoute.PS)

    @property
    def single(self) -> bool:
        """One process, no cluster: one worker, no communication."""
        return self is SystemKind.PLAIN

    @property
    def asynchronous(self) -> bool:
        """Workers run on their own clocks (ASP) and apply stale dense gradients."""
        return self is SystemKind.PS

    @property
    def cached(self) -> bool:
        """Each worker reads through HET's cache (with the system's bound)."""
        return self is SystemKind.CACHE

    @property
    def replicates_hot_rows(self) -> bool:
        """It can keep FlexShard's replicated rows on every worker (Hybrid and Cache)."""
        return self in (SystemKind.HYBRID, SystemKind.CACHE)


#: Every system kind's name.
KINDS = tuple(k.value for k in SystemKind)


@dataclass(frozen=True)
class SystemSpec:
    """One training system.

    Attributes:
        label: name shown in figures (e.g. ``"Cache s=100"``).
        kind: a [`SystemKind`][] (its name is accepted and converted).
        bound: staleness bound of a ``cache`` system (read and write).
        clock: the bound's unit (``update`` / ``iteration``, see
            [`workbench.cluster.cache.CLOCKS`][]); None: the cache config's.

    Raises:
        ValueError: ``kind`` is not a system kind.
    """

    label: str
    kind: SystemKind
    bound: int = 0
    clock: Literal["update", "iteration"] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.kind, SystemKind):
            if self.kind not in KINDS:
                raise ValueError(f"system kind {self.kind!r}: must be one of {KINDS}")
            object.__setattr__(self, "kind", SystemKind(self.kind))

    def cache_config(self, cache: CacheConfig) -> CacheConfig:
        """The workers' cache under this system: ``cache`` with the system's bound (read and
        write) and clock for ``cache`` systems; no cache (pull and push every key) otherwise."""
        if not self.kind.cached:
            return CacheConfig(policy="none")
        return dataclasses.replace(cache, read_bound=self.bound, write_bound=self.bound,
                                   clock=self.clock or cache.clock)


@dataclass(frozen=True)
class ModelSpec:
    """What is trained: the model and the shape of the data it reads.

    Attributes:
        config: the model and its optimiser settings (``batch_size`` is the global batch).
        n_dense: dense features.
        n_sparse: categorical features F.
        table_rows: rows of the concatenated embedding table.
    """

    config: ModelConfig
    n_dense: int
    n_sparse: int
    table_rows: int


@dataclass(frozen=True)
class ClusterSetup:
    """Where a run trains: the emulated cluster, its caches and its clock's costs.

    Attributes:
        cluster: workers, links, speeds, compute throughput (``plain`` reads only the speed and
            compute settings of worker 0).
        cache: cache policy and size for ``cache`` systems (bounds come from the system).
        compute: the workers' compute cost (``workbench.training.clock.clock_costs``
            resolves the configured one); None: the FLOP model at ``cluster.gflops``.
        software: the per-message / per-row software cost of the clock; None: none.
        capacities: samples of each worker per global batch (``int[W]`` summing to the batch
            size); None: an equal share each.
    """

    cluster: ClusterConfig
    cache: CacheConfig = field(default_factory=CacheConfig)
    compute: ComputeCost | None = None
    software: SoftwareCost | None = None
    capacities: np.ndarray | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Mechanisms:
    """The trainer's mechanism switches; the defaults switch every one off (HET's systems as
    published).

    Attributes:
        dedup: RecD's deduplicated reads and writes (one row per distinct key per worker).
        replicated: ``bool[table_rows]``, rows held by every worker outside its cache (a hot
            tier); their updates are all-reduced each iteration. None: none.
        overlap_popular: Hotline's popular micro-batch hides the fetch (needs ``replicated``).
        asp_staleness: ASP dense-gradient delay in iterations of the ``ps`` system (None =
            workers - 1).
        budget_fraction: a cost-aware dispatcher's decision budget = this x the previous
            iteration's compute (its overrun is charged to the clock).

    Raises:
        ValueError: ``overlap_popular`` without replicated rows.
    """

    dedup: bool = False
    replicated: np.ndarray | None = field(default=None, compare=False)
    overlap_popular: bool = False
    asp_staleness: int | None = None
    budget_fraction: float = 1.0

    def __post_init__(self) -> None:
        if self.overlap_popular and self.replicated is None:
            raise ValueError("overlap_popular (Hotline's micro-batches) needs replicated rows")


#: The default dispatch: contiguous slices of every global batch.
CONTIGUOUS = DispatcherSpec("contiguous")
#: Every mechanism switch off.
NO_MECHANISMS = Mechanisms()


@dataclass(frozen=True)
class EvalSchedule:
    """When a long run evaluates: every ``every`` iterations up to ``until`` (where the early
    curve and a time to target need resolution), every ``then`` after it, and at the end.

    Attributes:
        every: iterations between evaluations up to ``until``.
        until: the last iteration of the dense part.
        then: iterations between evaluations after ``until``.
    """

    every: int
    until: int
    then: int

    def due(self, iteration: int) -> bool:
        """Whether ``iteration`` (counted from 1) is evaluated."""
        step = self.every if iteration <= self.until else self.then
        return iteration % step == 0
