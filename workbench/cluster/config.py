"""Config schema of the emulated cluster: workers and links (``workbench/conf/cluster/``) and the
per-worker HET cache (``workbench/conf/cache/``)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Literal

from workbench.cluster.dense_sync import DenseSync
from workbench.utils.validation import ConfigError, in_range

#: The cache policies (``none``: no cache lines, every key pulled and pushed every iteration).
CachePolicy = Literal["lru", "lfu", "lfuopt", "none"]


@dataclass(frozen=True)
class ClusterConfig:
    """The emulated edge cluster (`workbench/cluster/edge_cluster.py`).

    Per-worker lists hold either one value (every worker) or exactly ``workers`` values.

    Attributes:
        name: profile name.
        backend: ``emulated`` (one process, the analytic clock) or ``distributed`` (W worker
            processes and a parameter-server process on torch.distributed, gloo, links shaped
            in wall time: [`workbench.training.distributed`][]; BSP cache / hybrid systems).
            The ``distributed_check`` stage runs both; ``het_train`` and ``het_time`` need
            ``emulated`` (they interleave evaluations and sweep ASP and AllGather systems).
        workers: number of edge workers W.
        bandwidth_gbps: link bandwidth to the parameter server, Gb/s.
        latency_ms: one-way link latency, ms.
        speed: relative compute speed (1.0 = the reference worker).
        ps_shards: parameter-server shards (rows are spread evenly over them).
        ps_bandwidth_gbps: network bandwidth of one parameter-server shard, Gb/s: the server
            side is shared by all workers, so an iteration's PS traffic takes at least
            total bytes / (ps_shards x ps_bandwidth).
        sync: ``bsp`` (all pushes of step t before reads of t+1) or ``asp``.
        compute: ``calibrated``: a worker's compute time is the model's forward + backward +
            optimizer time measured on this machine by the ``calibrate`` stage
            (``results/calibration/``), divided by ``speed``; ``flops``: the model's training
            FLOPs / (``gflops`` x ``speed``) (a what-if knob; no stage measures ``gflops``).
        gflops: effective GFLOP/s of a speed-1.0 worker under ``compute = flops``.
        overlap: ``none`` (read, compute, write in turn) or ``prefetch`` (HET: communication
            of one iteration hidden behind the previous one's compute; push and pull fused
            into one message). Changes time only, never the protocol's order.
        software: ``calibrated`` (per-message and per-row CPU costs measured on this machine
            by the ``calibrate`` stage), ``explicit`` (the four ``*_us`` values below) or
            ``off`` (no software cost: the plain ``L + bytes / B`` clock).
        client_message_us: client microseconds per message (``software = explicit``).
        client_row_us: client microseconds per row handled (``software = explicit``).
        server_message_us: server microseconds per message (``software = explicit``).
        server_row_us: server microseconds per row handled (``software = explicit``).
        dense_mode: how the dense gradients are synchronised ([`workbench.cluster.dense_sync`][]):
            ``after_backward`` (one flat ring AllReduce once backward is done, fully exposed),
            ``overlapped`` (DDP's buckets, all-reduced while backward runs), ``ps`` (dense
            push and pull over each worker's own link to the parameter server) or
            ``concurrent`` (HET's client: one ring beside the embedding exchange).
        bucket_mb: DDP's bucket size in MiB (``overlapped``).
        first_bucket_mb: DDP's first bucket in MiB (``overlapped``).
        backward_share: the share of a worker's compute that is backward, over which the
            buckets become ready (``overlapped``; an assumed parameter, swept by the stages).
        dense_link: the ring's links under ``dense_mode = concurrent``: ``shared`` (the
            workers' own links, beside their parameter-server traffic) or ``separate`` (a
            worker-to-worker path of its own).
        peer_bandwidth_gbps: that path's bandwidth, Gb/s (``separate``).
        peer_latency_ms: its one-way latency, ms (``separate``).
    """

    name: str = "homogeneous_1g"
    backend: Literal["emulated", "distributed"] = "emulated"
    workers: int = field(default=8, metadata=in_range(1, 4096))
    bandwidth_gbps: list[float] = field(default_factory=lambda: [1.0])
    latency_ms: list[float] = field(default_factory=lambda: [0.05])
    speed: list[float] = field(default_factory=lambda: [1.0])
    ps_shards: int = field(default=1, metadata=in_range(1, 4096))
    ps_bandwidth_gbps: float = field(default=1.0, metadata=in_range(0.0, None, lo_open=True))
    sync: Literal["bsp", "asp"] = "bsp"
    compute: Literal["calibrated", "flops"] = "calibrated"
    gflops: float = field(default=20.0, metadata=in_range(0.0, None, lo_open=True))
    overlap: Literal["none", "prefetch"] = "prefetch"
    software: Literal["calibrated", "explicit", "off"] = "calibrated"
    client_message_us: float = field(default=0.0, metadata=in_range(0.0, None))
    client_row_us: float = field(default=0.0, metadata=in_range(0.0, None))
    server_message_us: float = field(default=0.0, metadata=in_range(0.0, None))
    server_row_us: float = field(default=0.0, metadata=in_range(0.0, None))
    dense_mode: Literal["after_backward", "overlapped", "ps", "concurrent"] = "after_backward"
    bucket_mb: float = field(default=25.0, metadata=in_range(0.0, 1e6, lo_open=True))
    first_bucket_mb: float = field(default=1.0, metadata=in_range(0.0, 1e6, lo_open=True))
    backward_share: float = field(default=2.0 / 3.0, metadata=in_range(0.0, 1.0))
    dense_link: Literal["shared", "separate"] = "shared"
    peer_bandwidth_gbps: float = field(default=100.0, metadata=in_range(0.0, None, lo_open=True))
    peer_latency_ms: float = field(default=0.005, metadata=in_range(0.0, None))

    #: The clock's settings (what :meth:`with_clock_of` copies): not the links or workers.
    CLOCK_KEYS = ("compute", "gflops", "overlap", "software", "client_message_us",
                  "client_row_us", "server_message_us", "server_row_us", "dense_mode",
                  "bucket_mb", "first_bucket_mb", "backward_share", "dense_link",
                  "peer_bandwidth_gbps", "peer_latency_ms")

    def with_clock_of(self, other: ClusterConfig) -> ClusterConfig:
        """These links and workers with ``other``'s clock settings ([`CLOCK_KEYS`][])."""
        return dataclasses.replace(self, **{k: getattr(other, k) for k in self.CLOCK_KEYS})

    def dense_sync(self) -> DenseSync:
        """The dense synchronisation of ``dense_mode`` and its parameters."""
        return DenseSync(self.dense_mode, self.bucket_mb, self.first_bucket_mb,
                         self.backward_share, self.dense_link, self.peer_bandwidth_gbps,
                         self.peer_latency_ms)

    def __post_init__(self) -> None:
        for key, lo_open in (("bandwidth_gbps", True), ("latency_ms", False), ("speed", True)):
            values = getattr(self, key)
            if len(values) not in (1, self.workers):
                raise ConfigError(f"{key} has {len(values)} values: give 1 (all workers) "
                                  f"or exactly workers = {self.workers}")
            for i, v in enumerate(values):
                if not math.isfinite(v) or v < 0 or (lo_open and v == 0):
                    bound = "> 0" if lo_open else ">= 0"
                    raise ConfigError(f"{key}[{i}] = {v}: must be a finite number {bound}")

    def require_emulated(self, stage: str) -> None:
        """Raise a [`ConfigError`][] naming ``stage`` unless ``backend`` is ``emulated``."""
        if self.backend != "emulated":
            raise ConfigError(
                f"cluster.backend = {self.backend}: the {stage} stage runs on the emulated "
                "backend (it interleaves test evaluations and sweeps ASP and AllGather systems); "
                "the distributed backend runs the distributed_check stage (set "
                "cluster.backend=emulated here)")

    def per_worker(self, key: str) -> list[float]:
        """The per-worker values of ``bandwidth_gbps``, ``latency_ms`` or ``speed``."""
        values = getattr(self, key)
        return list(values) * self.workers if len(values) == 1 else list(values)


#: A staleness bound no run reaches: HET's ``s = infinity`` (what a sweep's -1 stands for).
UNBOUNDED = 10**9


@dataclass(frozen=True)
class CacheConfig:
    """Per-worker embedding cache with HET's bounded staleness (`workbench/cluster/cache.py`).

    Attributes:
        policy: eviction policy, or ``none`` (pull and push every key every iteration).
        ratio: cache capacity as a fraction of the table rows, in (0, 1].
        rows: absolute capacity in rows (overrides ``ratio`` when set).
        read_bound: staleness bound s for reads (pull iff server_ver - version > s).
        write_bound: push a line once it holds more than this many unpushed updates.
        clock: the unit of the bounds: ``update`` (one tick per gradient row, Hetu v1.0's code)
            or ``iteration`` (one tick per iteration in which the worker updates the row: the
            HET paper's clock, section 3.1).
    """

    policy: CachePolicy = "lru"
    ratio: float = field(default=0.1, metadata=in_range(0.0, 1.0, lo_open=True))
    rows: int | None = field(default=None, metadata=in_range(1, None))
    read_bound: int = field(default=100, metadata=in_range(0, None))
    write_bound: int = field(default=100, metadata=in_range(0, None))
    clock: Literal["update", "iteration"] = "update"


@dataclass(frozen=True)
class HardwareConfig:
    """An accelerator server for Hotline's time model (``workbench/conf/hardware/``,
    ``hardware.<name>``).

    Every rate is an *effective* one (what the operation sustains, not the spec sheet's peak);
    ``source`` says where each number comes from. Bandwidths are in GB/s (1e9 bytes per second).

    Attributes:
        label: name shown in figures.
        peak_tflops: the accelerator's fp32 peak.
        compute_efficiency: fraction of the peak the model's forward + backward sustains.
        step_overhead_us: fixed cost of one micro-batch's forward + backward (kernel launches).
        dense_update_us: the dense optimizer step, once per mini-batch.
        accelerator_gbps: gather / scatter of embedding rows in accelerator memory (HBM).
        host_gbps: gather / write-back of embedding rows in host memory (CPU DRAM).
        link_gbps: host <-> accelerator link (PCIe), one direction.
        link_latency_us: latency of one transfer over the link.
        memory_gb: accelerator memory for embedding rows (accelerator-only needs the table to fit).
        host_split_ns_per_lookup: Hotline's split of a mini-batch into its micro-batches on the
            host, per lookup (made for the next mini-batch while this one trains); 0: the split
            costs nothing on the step (the paper's own hardware classifies beside the GPU).
        source: where the numbers come from.
    """

    label: str = "accelerator"
    peak_tflops: float = field(default=15.7, metadata=in_range(0.0, None, lo_open=True))
    compute_efficiency: float = field(default=0.3, metadata=in_range(0.0, 1.0, lo_open=True))
    step_overhead_us: float = field(default=200.0, metadata=in_range(0.0, None))
    dense_update_us: float = field(default=100.0, metadata=in_range(0.0, None))
    accelerator_gbps: float = field(default=300.0, metadata=in_range(0.0, None, lo_open=True))
    host_gbps: float = field(default=5.0, metadata=in_range(0.0, None, lo_open=True))
    link_gbps: float = field(default=12.0, metadata=in_range(0.0, None, lo_open=True))
    link_latency_us: float = field(default=10.0, metadata=in_range(0.0, None))
    memory_gb: float = field(default=16.0, metadata=in_range(0.0, None, lo_open=True))
    host_split_ns_per_lookup: float = field(default=0.0, metadata=in_range(0.0, None))
    source: str = ""
