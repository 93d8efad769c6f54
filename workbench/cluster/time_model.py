"""The emulated cluster's clock: links, software costs, compute and overlap.

The emulated cluster's clock (`workbench/cluster/edge_cluster.py`), extended with the three
things a linear ``L + bytes/B`` clock misses (issue 12).

**Messages and bytes.** Per iteration, worker j makes one read transfer (its ``u_j`` unique keys
with their versions go up, 8 + 8 bytes each; the ``pulled_j`` rows come down, ``D x 4`` bytes
each) and, when it pushes anything, one write transfer (``D x 4`` bytes plus 8 + 8 bytes of key
and update count per pushed row). With ``overlap = prefetch`` the push of iteration t and the
read of iteration t + 1 travel as ONE fused message (HET's client), so one latency instead of
two.

**Software cost.** Every message costs ``c_msg`` seconds on the client and ``s_msg`` on the
server, every row handled (a key sent, a row received or pushed) ``c_row`` and ``s_row``
(serialisation, hash look-ups); defaults are measured on this machine
([`workbench.cluster.software_cost`][], the ``calibrate`` stage). The parameter servers are
shared by every worker: ``ps_shards`` of them move the iteration's bytes over their own links and
process every message, so no worker's PS traffic finishes before the servers have:

    bytes_j   = 16 u_j + D4 pulled_j + (D4 + 16) pushed_j
    msgs_j    = [u_j > 0] + [pushed_j > 0]            (none)   |   1  (prefetch: fused)
    lats_j    = 2 [u_j > 0] + [pushed_j > 0]          (none)   |   2  (prefetch: fused)
    rows_j    = u_j + pulled_j + pushed_j
    link_j    = lats_j L_j + bytes_j / B_j + msgs_j c_msg + rows_j c_row

A read is a request and its reply, a round trip: two one-way latencies ``L_j``; a push one.
    server    = sum_k bytes_k / PS bandwidth + (s_msg sum_k msgs_k + s_row sum_k rows_k) / shards
    comm_j    = max(link_j, server)

**Compute** ``compute_j = (a + b x samples_j) / speed_j``: ``a`` (per batch) and ``b`` (per
sample) are the calibrated forward + backward + optimizer time of the model on this machine
(``calibrate`` stage), or, with ``cluster.compute = flops``, ``b = 3 x forward FLOPs /
(gflops x 1e9)`` and ``a = 0`` ([`ComputeCost`][]).

**Overlap.** ``none``: a worker reads, computes, then writes: ``iter_j = compute_j + comm_j``.
With Hotline's popular micro-batch (``hidden_j`` of the compute needs no row of this
iteration's transfer) the two overlap even so: ``iter_j = max(hidden_j, comm_j) + compute_j -
hidden_j``.
``prefetch`` (HET: asynchronous requests, the next batch's keys prefetched, push and pull fused):
the communication of one iteration runs while the previous one computes, so in the steady state
``iter_j = max(compute_j, comm_j)``. The protocol's order of reads and writes is the same under
both (every push of step t lands before any read of step t + 1 in the emulator), so training
results do not move, only time:

    none:      |--read--|====compute====|--write--|--read--|====compute====|--write--|
    prefetch:  |====compute t====|====compute t+1====|        (compute-bound: comm hidden)
               |--push t-1 + read t+1--|
    BSP step = max_j iter_j + dense exposed
    ASP      = each worker advances its own clock by iter_j (+ its dense push/pull)

**Dense synchronisation** (``cluster.dense_mode``, [`workbench.cluster.dense_sync`][]):
``after_backward`` (one flat ring AllReduce after backward, all of it exposed),
``overlapped`` (DDP's buckets, all-reduced while backward still runs; the part past the end of
the gating worker's backward is exposed), ``ps`` (dense push and pull over each worker's own
link, inside ``comm_j``) or ``concurrent`` (HET's Fig. 5: the ring beside the embedding
exchange, on the workers' own links or a separate peer path; ``w_j``, the write after
backward, is ``comm_j`` less the read's round trip, all of the AllGather's). The ring pays
``2 (W - 1)`` steps of the slowest link's ``L_j + c_step + bytes / (W B_j)`` (``c_step``:
[`SoftwareCost.collective_step_s`][]). The AllGather of the ``allreduce`` system (replicated
embeddings) is never overlapped: every worker needs every update before its next forward pass.

Counters per worker per iteration (the differences of [`workbench.cluster.cache.COUNTERS`][]
across the iteration) give miss pulls, stale pulls, pushes at the write bound, dirty-eviction
pushes, direct pushes of uncached keys, metadata bytes, embedding bytes and seconds; every
figure is computed from these records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from workbench.cluster.cache import COUNTERS
from workbench.cluster.config import ClusterConfig
from workbench.cluster.dense_sync import DenseSync, ring_seconds
from workbench.cluster.routes import HYBRID, Routes, SparseRoute

BYTES_PER_FLOAT = 4
KEY_META_BYTES = 16  # 8-byte key + 8-byte version (read) or update count (push)


@dataclass(frozen=True)
class SoftwareCost:
    """Per-message and per-row CPU seconds of a parameter-server exchange (serialisation, hash
    look-ups), on the client and on the server.

    Attributes:
        client_message_s: client seconds per message sent.
        client_row_s: client seconds per row handled (key sent, row received or pushed).
        server_message_s: server seconds per message served.
        server_row_s: server seconds per row handled.
        source: where the numbers come from (shown next to every timed setting).
        collective_step_s: seconds of one step of the dense ring AllReduce beyond its link
            time (the collective library's own cost: not the PS protocol's; 0 in the calibrated
            clock, fitted from real processes by ``distributed_check``).
    """

    client_message_s: float = 0.0
    client_row_s: float = 0.0
    server_message_s: float = 0.0
    server_row_s: float = 0.0
    source: str = "none"
    collective_step_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("client_message_s", "client_row_s", "server_message_s", "server_row_s",
                     "collective_step_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"software cost {name} = {value}: must be finite and >= 0")

    def describe(self) -> str:
        """``client 12 us/msg + 0.1 us/row, server ...`` with the source."""
        ring = (f", ring step {1e6 * self.collective_step_s:.3g} us"
                if self.collective_step_s else "")
        return (f"software cost client {1e6 * self.client_message_s:.3g} us/msg + "
                f"{1e6 * self.client_row_s:.3g} us/row, server "
                f"{1e6 * self.server_message_s:.3g} us/msg + {1e6 * self.server_row_s:.3g} "
                f"us/row{ring} ({self.source})")


@dataclass(frozen=True)
class ComputeCost:
    """Seconds of one worker's forward + backward + optimizer step on ``n`` samples:
    ``(per_batch_s + per_sample_s x n) / speed``.

    Attributes:
        per_batch_s: fixed seconds per step (kernel launches, optimizer over dense params).
        per_sample_s: seconds per sample.
        source: how the numbers were obtained (calibration or FLOP model), shown in reports.
    """

    per_batch_s: float
    per_sample_s: float
    source: str

    def __post_init__(self) -> None:
        for name in ("per_batch_s", "per_sample_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"compute cost {name} = {value}: must be finite and >= 0")

    @classmethod
    def from_flops(cls, train_flops_per_sample: float, gflops: float) -> ComputeCost:
        """The FLOP model: ``train FLOPs per sample / (gflops x 1e9)`` per sample, no fixed
        part."""
        return cls(0.0, train_flops_per_sample / (gflops * 1e9),
                   f"FLOP-modelled at {gflops:g} GFLOP/s")

    def seconds(self, samples: np.ndarray | float, speed: np.ndarray | float = 1.0) -> np.ndarray:
        """Compute seconds of ``samples`` per worker at relative ``speed``."""
        samples = np.asarray(samples, dtype=np.float64)
        return np.where(samples > 0, self.per_batch_s + self.per_sample_s * samples, 0.0) \
            / np.asarray(speed, dtype=np.float64)

    def describe(self) -> str:
        """``0.21 ms/sample + 1.3 ms/step (source)``."""
        return (f"compute {1e3 * self.per_sample_s:.3g} ms/sample + "
                f"{1e3 * self.per_batch_s:.3g} ms/step ({self.source})")


OVERLAPS = ("none", "prefetch")


@dataclass(frozen=True)
class Links:
    """Per-worker link and compute parameters in SI units, the servers' software cost, the
    overlap of communication with computation and the dense synchronisation."""

    bandwidth_Bps: np.ndarray
    latency_s: np.ndarray
    speed: np.ndarray
    ps_Bps: float = math.inf
    ps_shards: int = 1
    software: SoftwareCost = SoftwareCost()
    overlap: str = "none"
    dense: DenseSync = DenseSync()

    def __post_init__(self) -> None:
        if self.overlap not in OVERLAPS:
            raise ValueError(f"overlap {self.overlap!r}: must be one of {OVERLAPS}")

    @classmethod
    def from_config(cls, cfg: ClusterConfig, software: SoftwareCost | None = None) -> Links:
        """Expand the config's per-worker lists (Gb/s, ms) to arrays (bytes/s, s); ``ps_Bps``
        is the servers' aggregate bandwidth (shards x per-shard bandwidth).

        Args:
            cfg: the cluster.
            software: the resolved software cost (see ``workbench.experiments.calibrate``);
                None: no software cost (counter-only replays).
        """
        return cls(bandwidth_Bps=np.array(cfg.per_worker("bandwidth_gbps")) * 1e9 / 8,
                   latency_s=np.array(cfg.per_worker("latency_ms")) * 1e-3,
                   speed=np.array(cfg.per_worker("speed"), dtype=np.float64),
                   ps_Bps=cfg.ps_shards * cfg.ps_bandwidth_gbps * 1e9 / 8,
                   ps_shards=cfg.ps_shards,
                   software=software if software is not None else SoftwareCost(),
                   overlap=cfg.overlap, dense=cfg.dense_sync())

    def server_seconds(self, total_bytes: np.ndarray, messages: np.ndarray | float = 0.0,
                       rows: np.ndarray | float = 0.0) -> np.ndarray:
        """Time the parameter servers need to move ``total_bytes`` (their shared links) and
        to process ``messages`` and ``rows`` (spread over the shards)."""
        sw = self.software
        return (np.asarray(total_bytes, dtype=np.float64) / self.ps_Bps
                + (sw.server_message_s * np.asarray(messages, dtype=np.float64)
                   + sw.server_row_s * np.asarray(rows, dtype=np.float64)) / self.ps_shards)

    def transfer_seconds(self, nbytes: np.ndarray, messages: np.ndarray | float = 1.0,
                         rows: np.ndarray | float = 0.0,
                         latencies: np.ndarray | float | None = None) -> np.ndarray:
        """``latencies x L_j + messages x c_msg + bytes_j / B_j + rows x c_row`` per worker
        (``latencies``: one-way crossings, default one per message)."""
        messages = np.asarray(messages, dtype=np.float64)
        crossings = messages if latencies is None else np.asarray(latencies, dtype=np.float64)
        return (crossings * self.latency_s + messages * self.software.client_message_s
                + np.asarray(nbytes, dtype=np.float64) / self.bandwidth_Bps
                + self.software.client_row_s * np.asarray(rows, dtype=np.float64))

    def allreduce_seconds(self, dense_bytes: float) -> float:
        """One flat ring AllReduce of ``dense_bytes`` over all workers
        ([`ring_seconds`][workbench.cluster.dense_sync.ring_seconds]: per-step latency and software
        cost, bounded by the slowest link)."""
        return ring_seconds(dense_bytes, self.bandwidth_Bps, self.latency_s,
                            self.software.collective_step_s)

    def dense_seconds(self, dense_bytes: float, backward_s: np.ndarray | float = 0.0
                      ) -> tuple[np.ndarray, np.ndarray]:
        """``(total, exposed)`` seconds of the dense AllReduce in this cluster's mode
        ([`DenseSync.seconds`][])."""
        bandwidth, latency = self.dense.ring_links(self.bandwidth_Bps, self.latency_s)
        return self.dense.seconds(dense_bytes, bandwidth, latency,
                                  self.software.collective_step_s, backward_s)


def time_model(counters: np.ndarray, links: Links, dim: int,
               compute_s: np.ndarray | float = 0.0, dense_bytes: float = 0.0,
               routes: Routes = HYBRID,
               hidden_s: np.ndarray | float = 0.0) -> dict[str, np.ndarray]:
    """Bytes and seconds of iterations from their counter deltas (the time model above).

    Args:
        counters: counter deltas ``[iterations, workers, len(COUNTERS)]``.
        links: the workers' links, software cost and overlap.
        dim: embedding width D (bytes scale with it; the counters do not depend on it).
        compute_s: compute seconds, broadcastable to ``[iterations, workers]``.
        dense_bytes: dense parameter bytes synchronised per iteration.
        routes: the system's dense and sparse routes ([`Routes`][workbench.cluster.routes.Routes]:
            the dense gradients go to the parameter server as
            [`dense_on_ps`][workbench.cluster.routes.Routes.dense_on_ps] says for ``links.dense``'s
            mode).
        hidden_s: the part of ``compute_s`` that needs none of this iteration's communication
            (Hotline's popular micro-batch, whose rows are all in the worker's hot tier), so it
            runs while the rows are fetched even without prefetch: ``iter_j = max(hidden_j,
            comm_j) + compute_j - hidden_j`` under ``none`` (under ``prefetch`` every compute
            already overlaps the communication).

    Returns:
        Arrays ``[iterations, workers]``: ``pulled_rows``, ``pushed_rows``,
        ``embedding_bytes``, ``meta_bytes``, ``dense_bytes``, ``messages``, ``comm_s`` (PS
        traffic incl. software cost: the embedding rows, and the dense push/pull in the ``ps``
        mode; overlapped or not), ``compute_s``, ``iter_s`` (the worker's iteration without
        the AllReduce: compute + comm, or their max under prefetch), ``dense_s`` (the part of
        the AllReduce the step sees), ``dense_total_s`` (the whole AllReduce, hidden or not)
        and ``step_s`` (the BSP iteration time: the slowest worker's ``iter_s`` plus
        ``dense_s``).
    """
    col = {name: counters[..., i] for i, name in enumerate(COUNTERS)}
    shape = col["reads"].shape
    workers = shape[-1]
    row_bytes = dim * BYTES_PER_FLOAT
    pulled = col["miss_pulls"] + col["stale_pulls"]
    pushed = (col["bound_pushes"] + col["evict_pushes"] + col["uncached_pushes"]
              + col["flush_pushes"])
    unique = col["unique_read"]
    dense_ps = routes.dense_on_ps(links.dense.mode)
    fused = links.overlap == "prefetch"
    if routes.sparse is SparseRoute.PS:
        read_bytes = KEY_META_BYTES * unique + row_bytes * pulled
        push_bytes = (row_bytes + KEY_META_BYTES) * pushed
        nbytes = read_bytes + push_bytes
        rows = unique + pulled + pushed
        if dense_ps:  # dense push + pull over the same links and servers (one row each way)
            nbytes = nbytes + 2.0 * dense_bytes * (dense_bytes > 0)
            rows = rows + 2 * (dense_bytes > 0)
        dense_on_ps = dense_ps and dense_bytes > 0
        reads = (unique > 0) | dense_on_ps  # a round trip: request and reply
        if fused:
            messages = (reads | (pushed > 0)).astype(np.float64)
            crossings = 2.0 * reads + (~reads & (pushed > 0))
        else:
            messages = reads.astype(np.float64) + (pushed > 0) + dense_on_ps
            crossings = 2.0 * reads + (pushed > 0) + dense_on_ps
        link = links.transfer_seconds(nbytes, messages, rows, crossings)
        server = links.server_seconds(nbytes.sum(-1, keepdims=True),
                                      messages.sum(-1, keepdims=True),
                                      rows.sum(-1, keepdims=True))
        comm = np.where(messages > 0, np.maximum(link, server), 0.0)
        if links.dense.mode == "concurrent":  # the write after backward: past the read's trip
            write = np.maximum(comm - links.transfer_seconds(
                read_bytes, reads.astype(np.float64), unique + pulled, 2.0 * reads), 0.0)
        embedding = row_bytes * (pulled + pushed)
        meta = KEY_META_BYTES * (unique + pushed)
    else:  # SparseRoute.ALLGATHER with a ring of dense gradients (Routes checks the pair)
        # Every worker receives every other worker's updated rows (ring all-gather): rows
        # plus an 8-byte key each; W-1 hops, each paying the worst latency and one message.
        keys = col["unique_written"].sum(-1, keepdims=True) * (workers - 1) / workers
        seconds = keys * (row_bytes + KEY_META_BYTES // 2) / float(links.bandwidth_Bps.min())
        seconds = seconds + (workers - 1) * (float(links.latency_s.max())
                                             + links.software.client_message_s)
        seconds = seconds + keys * links.software.client_row_s
        comm = np.broadcast_to(seconds, shape).astype(np.float64)
        embedding = np.broadcast_to(keys * row_bytes, shape)
        meta = np.broadcast_to(keys * (KEY_META_BYTES // 2), shape)
        messages = np.full(shape, float(workers - 1))
        pulled = np.zeros(shape, np.int64)
        pushed = np.zeros(shape, np.int64)
        fused = False  # the AllGather cannot be prefetched: see the module docstring
        write = comm  # all of it after backward
    compute = np.broadcast_to(np.asarray(compute_s, dtype=np.float64), shape)
    hidden = np.minimum(np.broadcast_to(np.asarray(hidden_s, dtype=np.float64), shape), compute)
    iteration = np.maximum(compute, comm) if fused else np.maximum(hidden, comm) + compute - hidden
    if dense_ps:  # already inside comm
        dense = total = np.zeros(shape)
        wire = np.full(shape, 2.0 * dense_bytes)
        step = iteration.max(-1, keepdims=True)
    else:  # the gating worker (the slowest) ends its backward when its iteration ends
        gate = iteration.argmax(-1)[..., None]
        backward = links.dense.backward_share * np.take_along_axis(compute, gate, -1)
        total, exposed = links.dense_seconds(dense_bytes, backward)
        if links.dense.mode == "concurrent":
            step = links.dense.concurrent_step(
                iteration, comm, write, compute, fused, total,
                links.dense.own_link_wire(dense_bytes, links.bandwidth_Bps))
            exposed = step - iteration.max(-1, keepdims=True)
        else:
            step = iteration.max(-1, keepdims=True) + exposed
        dense, total = np.broadcast_to(exposed, shape), np.broadcast_to(total, shape)
        wire = np.full(shape, 2 * (workers - 1) / workers * dense_bytes)
    return {"pulled_rows": pulled, "pushed_rows": pushed,
            "embedding_bytes": np.asarray(embedding, dtype=np.float64),
            "meta_bytes": np.asarray(meta, dtype=np.float64), "dense_bytes": wire,
            "messages": np.asarray(messages, dtype=np.float64),
            "comm_s": np.asarray(comm, dtype=np.float64), "compute_s": compute.copy(),
            "iter_s": np.asarray(iteration, dtype=np.float64),
            "dense_s": np.array(dense, dtype=np.float64),
            "dense_total_s": np.array(total, dtype=np.float64),
            "step_s": np.broadcast_to(step, shape).copy()}


def epoch_time(counters: np.ndarray, cluster: ClusterConfig, dim: int, compute: ComputeCost,
               software: SoftwareCost, per_worker: int, dense_bytes: float,
               routes: Routes) -> dict[str, float]:
    """Per-epoch seconds of a replayed epoch: ``epoch_s``, ``compute_s``, ``comm_s`` (not
    hidden) and ``comm_total_s`` (hidden or not); see the module docstring."""
    links = Links.from_config(cluster, software)
    t = time_model(counters, links, dim, compute.seconds(per_worker, links.speed), dense_bytes,
                   routes)
    step = t["step_s"][:, 0]
    slowest_compute = t["compute_s"].max(axis=1)
    comm_total = t["comm_s"].max(axis=1) + t["dense_total_s"][:, 0]
    return {"epoch_s": float(step.sum()), "compute_s": float(slowest_compute.sum()),
            "comm_s": float((step - slowest_compute).sum()),
            "comm_total_s": float(comm_total.sum()),
            "dense_exposed_s": float(t["dense_s"][:, 0].sum())}
