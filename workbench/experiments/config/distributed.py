"""Config schemas of the emulated cluster against real processes (distributed_check)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from workbench.utils.validation import ConfigError, check_each, in_range, nonempty


@dataclass(frozen=True)
class DistributedCheckConfig:
    """The emulator checked against real processes (the ``distributed_check`` stage).

    The same small run goes through the emulated cluster and through the distributed backend
    ([`workbench.training.distributed`][]): W worker processes and a parameter-server process
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
            ([`workbench.training.dense_reducer`][]): ``after_backward`` (one flat
            all_reduce), ``overlapped`` (DDP's buckets during backward) and ``concurrent``
            (one all_reduce beside the embedding push, HET's Fig. 5).
        bucket_mb: DDP's bucket size of the ``overlapped`` runs, MiB (every bucket, the first
            too: small enough that the check's model spans several buckets).
        networks: where the runs' links are shaped, each run on each: ``token_bucket`` (every
            process on this machine's loopback, each link shaped in its sender) and
            ``kernel`` (one network namespace per process, links shaped by the kernel's
            ``tc``, one ``torchrun`` per node: [`workbench.cluster.edge_network`][]); where
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
    dense_modes: list[str] = field(
        default_factory=lambda: ["after_backward", "overlapped", "concurrent"],
        metadata=nonempty())
    bucket_mb: float = field(default=0.125, metadata=in_range(0.0, 1e6, lo_open=True))

    def __post_init__(self) -> None:
        check_each("networks", self.networks, lambda n: n in ("token_bucket", "kernel"),
                   "one of ('token_bucket', 'kernel')")
        # the modes the backend runs (workbench.training.dense_reducer.REAL_MODES)
        check_each("dense_modes", self.dense_modes,
                   lambda m: m in ("after_backward", "overlapped", "concurrent"),
                   "one of ('after_backward', 'overlapped', 'concurrent'): dense on the "
                   "parameter server (ps) is modelled, not run in real processes")
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
