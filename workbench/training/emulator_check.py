"""The emulator set against real processes: the same run emulated and distributed, compared.

[`run_emulated`][] runs the emulated [`Trainer`][workbench.training.trainer.Trainer] on a
[`DistributedJob`][workbench.training.distributed.DistributedJob]'s config; [`compare`][] checks
the two runs' cache counters, rows, bytes, versions and parameters; the frames set the wall
seconds per phase beside the emulated clock's ([`phase_frame`][], [`phase_ratios`][]), fit the
software cost per message and per row and the ring's step from the measured exchanges
([`fit_software`][], [`fit_ring_step`][]), and set a kernel network's interface counters against
the backend's and the clock's bytes ([`byte_frame`][]). The ``distributed_check`` stage
([`workbench.experiments.distributed_check`][]) runs them on each network.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pandas as pd
import torch

from workbench.cluster.cache import COUNTERS
from workbench.cluster.config import ClusterConfig
from workbench.cluster.edge_network import (
    PACKET_HEADER_BYTES,
)
from workbench.cluster.time_model import (
    BYTES_PER_FLOAT,
    KEY_META_BYTES,
    ComputeCost,
    Links,
    SoftwareCost,
    time_model,
)
from workbench.cluster.wire import CATEGORIES, GLOO_TRANSFER_BYTES, HEADER_BYTES
from workbench.training.components import (
    ClusterSetup,
    Mechanisms,
    ModelSpec,
)
from workbench.training.distributed import (
    DistributedJob,
    DistributedResult,
)
from workbench.training.trainer import Split, Trainer


@dataclasses.dataclass
class EmulatedRun:
    """An emulated run of ``steps`` iterations: per-(iteration, worker) records, the flushed
    table and versions, the dense parameters, the flush's counters."""

    history: pd.DataFrame
    table: np.ndarray
    versions: np.ndarray
    dense_state: dict[str, torch.Tensor]
    flush_counters: np.ndarray
    dense_bytes: float = 0.0


def run_emulated(job: DistributedJob, train: Split, compute: ComputeCost,
                 software: SoftwareCost, budget_fraction: float = 1.0) -> EmulatedRun:
    """The emulated trainer on the job's config for ``job.steps`` iterations, then a flush.

    The job's dispatcher (name and solver settings) is built on the emulated cluster; a
    cost-aware one's decision budget is ``budget_fraction`` x one iteration's compute.
    """
    trainer = Trainer(ModelSpec(job.model_cfg, job.n_dense, job.n_sparse, job.table_rows),
                      job.system, ClusterSetup(job.cluster_cfg, job.cache_cfg, compute, software),
                      job.dispatcher_spec, Mechanisms(budget_fraction=budget_fraction),
                      seed=job.seed)
    for step in range(job.steps):
        trainer.step(train, step * job.model_cfg.batch_size)
    assert trainer.cluster is not None  # the emulated trainer always has its cluster
    before = trainer.cluster.counters()
    trainer.cluster.flush()
    return EmulatedRun(trainer.cluster.history(), trainer.cluster.server.values.copy(),
                       trainer.cluster.server.versions.copy(),
                       {k: v.detach().clone() for k, v in trainer.model.state_dict().items()},
                       trainer.cluster.counters() - before, float(trainer.dense_bytes))


def compare(emulated: EmulatedRun, real: DistributedResult) -> dict[str, Any]:
    """The exact checks of one bound: counters, rows, bytes, versions, parameter differences."""
    emu, dis = emulated.history, real.history
    counters_emu = emu[list(COUNTERS)].to_numpy()
    counters_dis = dis[list(COUNTERS)].to_numpy()
    flush_dis = np.asarray(real.server["flush_counters"])
    pulled = emu["pulled_rows"].to_numpy()
    unique = emu["unique_read"].to_numpy()
    measured_rows = (dis["sent_rows_bytes"] + dis["recv_rows_bytes"]).to_numpy()
    measured_meta = (dis["sent_meta_bytes"] + dis["recv_meta_bytes"]).to_numpy()
    # the real protocol's metadata beyond the clock's: a reply mask bit per key, a version per
    # pulled row (see workbench.cluster.remote_ps)
    extra_meta = np.ceil(unique / 8) + 8 * pulled
    table_diff = np.abs(emulated.table.astype(np.float64) - real.table)
    scale = np.abs(emulated.table).max() or 1.0
    dense_abs = max(float((emulated.dense_state[k] - real.dense_state[k]).abs().max())
                    for k in emulated.dense_state)
    dense_scale = max(float(v.abs().max()) for v in emulated.dense_state.values()) or 1.0
    return {
        "iterations": int(emu["iteration"].max() + 1), "workers": int(emu["worker"].max() + 1),
        "counters_identical": bool(np.array_equal(counters_emu, counters_dis)
                                   and np.array_equal(emulated.flush_counters, flush_dis)),
        "counter_cells": int(counters_emu.size),
        "counter_mismatches": int((counters_emu != counters_dis).sum()),
        "pulled_rows_emulated": int(pulled.sum()),
        "pulled_rows_distributed": int((dis["miss_pulls"] + dis["stale_pulls"]).sum()),
        "pushed_rows_emulated": int(emu["pushed_rows"].sum()),
        "pushed_rows_distributed": int(dis[["bound_pushes", "evict_pushes", "uncached_pushes",
                                            "flush_pushes"]].to_numpy().sum()),
        "embedding_bytes_emulated": float(emu["embedding_bytes"].sum()),
        "embedding_bytes_measured": float(measured_rows.sum()),
        "embedding_bytes_identical": bool(np.array_equal(emu["embedding_bytes"].to_numpy(),
                                                         measured_rows)),
        "meta_bytes_emulated": float(emu["meta_bytes"].sum()),
        "meta_bytes_measured": float(measured_meta.sum()),
        "meta_bytes_protocol_extra": float(extra_meta.sum()),
        "meta_bytes_explained": bool(np.array_equal(emu["meta_bytes"].to_numpy() + extra_meta,
                                                    measured_meta)),
        "header_bytes_measured": float((dis["sent_header_bytes"]
                                        + dis["recv_header_bytes"]).sum()),
        "header_bytes_per_message": HEADER_BYTES,
        "versions_identical": bool(np.array_equal(emulated.versions, real.versions)),
        "table_max_abs_diff": float(table_diff.max()),
        "table_max_rel_diff": float(table_diff.max() / scale),
        "dense_max_abs_diff": dense_abs,
        "dense_max_rel_diff": dense_abs / dense_scale,
    }


def clock_exchanges(history: pd.DataFrame, links: Links, dim: int) -> pd.DataFrame:
    """The clock's seconds of each worker's pull exchange and push, apart (its ``comm_s`` is
    their sum where the workers' links, not the server's, bound the iteration): each
    ``crossings x L + messages x c_msg + bytes / B + rows x c_row`` on the worker's link (a
    pull crosses twice: request and reply)."""
    w = history["worker"].to_numpy()
    unique = history["unique_read"].to_numpy(np.float64)
    pulled = history["pulled_rows"].to_numpy(np.float64)
    pushed = history["pushed_rows"].to_numpy(np.float64)
    row_bytes = BYTES_PER_FLOAT * dim
    per_worker = Links(links.bandwidth_Bps[w], links.latency_s[w], links.speed[w],
                       software=links.software)
    pull = per_worker.transfer_seconds(KEY_META_BYTES * unique + row_bytes * pulled,
                                       unique > 0, unique + pulled, 2.0 * (unique > 0))
    push = per_worker.transfer_seconds((row_bytes + KEY_META_BYTES) * pushed, pushed > 0,
                                       pushed)
    return pd.DataFrame({"pull": np.where(unique > 0, pull, 0.0),
                         "push": np.where(pushed > 0, push, 0.0)}, index=history.index)


def clock_frame(emulated: EmulatedRun, links: Links, dim: int) -> pd.DataFrame:
    """The clock of an emulated run's recorded traffic on ``links`` (any software cost and
    dense mode: [`time_model`][workbench.cluster.time_model.time_model] on its counters and
    compute), per (iteration, worker): ``comm_s``, ``dense_s``, ``dense_total_s``, ``step_s`` and
    the pull and push exchanges apart ([`clock_exchanges`][]).

    In the ``concurrent`` dense mode on shared links the ring's bytes, handed over at the end of
    backward, leave before the push and hold it up by their wire time ``R^b_j``
    ([`own_link_wire`][workbench.cluster.dense_sync.DenseSync.own_link_wire]): the push and the
    exchange carry
    it, and ``dense_s`` is each worker's wait past its push, ``step - iter_j - R^b_j``."""
    history = emulated.history
    iterations = int(history["iteration"].nunique())
    workers = len(history) // iterations
    t = time_model(history[list(COUNTERS)].to_numpy().reshape(iterations, workers, -1), links,
                   dim, history["compute_s"].to_numpy(np.float64).reshape(iterations, workers),
                   emulated.dense_bytes)
    frame = pd.DataFrame({k: t[k].ravel() for k in ("comm_s", "dense_s", "dense_total_s",
                                                   "step_s")}, index=history.index)
    exchanges = clock_exchanges(history, links, dim)
    if links.dense.mode == "concurrent":
        wire = links.dense.own_link_wire(emulated.dense_bytes, links.bandwidth_Bps)
        held = np.where(history["pushed_rows"].to_numpy() > 0,
                        wire[history["worker"].to_numpy()], 0.0)
        exchanges["push"] += held
        frame["comm_s"] += held
        frame["dense_s"] = np.maximum(frame["step_s"] - t["iter_s"].ravel() - held, 0.0)
    return pd.concat([frame, exchanges], axis=1)


def phase_frame(emulated: EmulatedRun, real: DistributedResult, warmup: int, links: Links,
                dim: int) -> pd.DataFrame:
    """Per (iteration, worker): the measured wall seconds per phase beside the emulated clock's
    on ``links`` (iterations before ``warmup`` dropped).

    Phases: the pull exchange (request to reply); the push on the wire (from the worker's send
    to the server having all of it, one machine-wide clock: on the kernel network a socket
    takes the bytes long before they cross the link); PS communication = both; compute (to the
    end of backward); the dense collective (every bucket's, hidden or not); the dense sync the
    worker waited for past backward (with the optimizer step and the wait for the slowest
    worker); the iteration (slowest worker) against the clock's BSP step. In the ``concurrent``
    mode the dense sync waited for is all the worker waited past its own push (the round's ACK,
    then what is left of the ring), as the clock's ``dense_s`` counts it ([`clock_frame`][]).
    """
    clock = clock_frame(emulated, links, dim)
    dis = real.history.set_index(["iteration", "worker"])
    waited = dis["allreduce_s"]
    if links.dense.mode == "concurrent":  # past its push: the round's ACK, then the ring
        waited = waited + dis["push_s"] - dis["push_wire_s"]
    emu = pd.concat([emulated.history[["iteration", "worker", "compute_s", "unique_read",
                                       "pulled_rows", "pushed_rows", "embedding_bytes",
                                       "meta_bytes", "messages"]], clock],
                    axis=1).set_index(["iteration", "worker"])
    frame = pd.DataFrame({
        "compute_measured": dis["compute_s"], "compute_emulated": emu["compute_s"],
        "pull_measured": dis["pull_s"], "pull_emulated": emu["pull"],
        "push_measured": dis["push_wire_s"], "push_emulated": emu["push"],
        "comm_measured": dis["pull_s"] + dis["push_wire_s"], "comm_emulated": emu["comm_s"],
        "allreduce_measured": waited, "allreduce_emulated": emu["dense_s"],
        "collective_measured": dis["allreduce_total_s"],
        "collective_emulated": emu["dense_total_s"], "buckets": dis["buckets"],
        "wait_measured": dis["push_s"] - dis["push_wire_s"],
        "wall_measured": dis["wall_s"], "step_emulated": emu["step_s"],
        "pull_s": dis["pull_s"], "push_send_s": dis["push_send_s"],
        "unique_read": emu["unique_read"], "pulled_rows": emu["pulled_rows"],
        "pushed_rows": emu["pushed_rows"], "embedding_bytes": emu["embedding_bytes"],
        "meta_bytes": emu["meta_bytes"], "messages_emulated": emu["messages"]}).reset_index()
    return frame[frame["iteration"] >= warmup].reset_index(drop=True)


#: The band a phase ratio (measured / emulated) must fall in (issue 33's target).
BAND = (0.85, 1.15)


PHASES = ("pull", "push", "comm", "compute", "allreduce", "allreduce_with_wait", "iteration")


def phase_ratios(phases: pd.DataFrame) -> dict[str, float]:
    """Measured / emulated per phase: means over iterations and workers; ``allreduce`` is the
    dense collective itself (every bucket's; per iteration the shortest worker's, the last to
    enter it), ``allreduce_with_wait`` the dense sync each worker waited for past its backward
    (mean over workers: with the faster workers' wait for the slowest) against the clock's
    exposed part; the iteration wall against the emulated BSP step."""
    out = {}
    for phase in ("compute", "pull", "push", "comm", "allreduce"):
        emu = float(phases[f"{phase}_emulated"].mean())
        out[phase] = float(phases[f"{phase}_measured"].mean()) / emu if emu > 0 else math.nan
    out["allreduce_with_wait"] = out.pop("allreduce")
    step = phases.groupby("iteration").agg(wall=("wall_measured", "max"),
                                           step=("step_emulated", "max"),
                                           collective=("collective_measured", "min"),
                                           dense=("collective_emulated", "max"))
    dense = float(step["dense"].mean())
    out["allreduce"] = float(step["collective"].mean()) / dense if dense > 0 else math.nan
    out["iteration"] = float(step["wall"].mean() / step["step"].mean())
    return out


def fit_software(phases: pd.DataFrame, cluster: ClusterConfig, row_bytes: int
                 ) -> dict[str, float]:
    """The software cost of one pull exchange fitted from the measured pulls.

    Residual = measured pull seconds - the shaped links' share (two latencies, the request and
    reply bytes at the link's bandwidth); least squares ``residual = a + b x rows`` with rows =
    keys sent + rows pulled (``row_bytes`` each on the way down). ``a`` is the per-message cost of
    one request/reply (client and server, both directions), ``b`` the per-row cost; both
    constrained to be >= 0 (non-negative least squares).
    """
    from scipy.optimize import nnls

    bandwidth = np.array(cluster.per_worker("bandwidth_gbps")) * 1e9 / 8
    latency = np.array(cluster.per_worker("latency_ms")) * 1e-3
    w = phases["worker"].to_numpy()
    up = KEY_META_BYTES * phases["unique_read"].to_numpy() + HEADER_BYTES
    down = row_bytes * phases["pulled_rows"].to_numpy() + HEADER_BYTES
    link = 2 * latency[w] + (up + down) / bandwidth[w]
    residual = phases["pull_s"].to_numpy() - link
    rows = (phases["unique_read"] + phases["pulled_rows"]).to_numpy().astype(np.float64)
    design = np.stack([np.ones_like(rows), rows], axis=1)
    (a, b), _ = nnls(design, residual)  # costs are >= 0
    return {"message_s": float(a), "row_s": float(b), "samples": int(len(rows)),
            "residual_median_s": float(np.median(residual))}


def on_real_links(job: DistributedJob, real: DistributedResult) -> DistributedJob:
    """``job`` with the latencies its links really had: on the kernel network without netem
    the veths' own (probed), so that the clock is evaluated on the same links."""
    latency = real.network.get("effective_latency_ms")
    if latency is None or real.network.get("latency_applied"):
        return job
    return dataclasses.replace(job, cluster_cfg=dataclasses.replace(
        job.cluster_cfg, latency_ms=[float(v) for v in latency]))


BYTE_COLUMNS = ["network", "run", "worker", "iterations", "kernel_bytes", "kernel_packets",
                "header_bytes", "backend_bytes", "transfers", "gloo_framing_bytes",
                "allreduce_framing_bytes", "allreduce_framing_per_iteration", "clock_bytes",
                "kernel_over_backend", "kernel_over_clock"]


def byte_frame(emulated: EmulatedRun, real: DistributedResult) -> pd.DataFrame:
    """Per worker, over every iteration of a kernel-network run: the bytes on its link as the
    kernel counted them (both directions) against the backend's own accounting and the clock's.

    ``kernel = headers + backend + gloo framing + all-reduce framing``: headers are
    [`PACKET_HEADER_BYTES`][workbench.cluster.edge_network.PACKET_HEADER_BYTES] per packet counted;
    the backend counts every message's header and arrays sent and received and the all-reduce's ring
    share each way; gloo frames each point-to-point transfer with
    [`GLOO_TRANSFER_BYTES`][workbench.cluster.wire.GLOO_TRANSFER_BYTES]; what remains is the framing
    of the all-reduce's own transfers (gloo's ring, whose transfer count the backend does not see),
    shown per iteration. The clock counts embedding and metadata bytes and the ring share.
    """
    dis = real.history.groupby("worker").sum(numeric_only=True)
    emu = emulated.history.groupby("worker").sum(numeric_only=True)
    kernel = dis["kernel_tx_bytes"] + dis["kernel_rx_bytes"]
    packets = dis["kernel_tx_packets"] + dis["kernel_rx_packets"]
    backend = (sum(dis[f"{way}_{c}_bytes"] for way in ("sent", "recv") for c in CATEGORIES)
               + 2 * dis["allreduce_bytes"])
    transfers = dis["transfers_sent"] + dis["transfers_received"]
    headers = PACKET_HEADER_BYTES * packets
    framing = GLOO_TRANSFER_BYTES * transfers
    residual = kernel - headers - backend - framing
    iterations = real.history.groupby("worker").size()
    clock = emu["embedding_bytes"] + emu["meta_bytes"] + 2 * emu["dense_bytes"]
    frame = pd.DataFrame({
        "worker": dis.index, "iterations": iterations, "kernel_bytes": kernel,
        "kernel_packets": packets, "header_bytes": headers, "backend_bytes": backend,
        "transfers": transfers, "gloo_framing_bytes": framing,
        "allreduce_framing_bytes": residual,
        "allreduce_framing_per_iteration": residual / iterations, "clock_bytes": clock,
        "kernel_over_backend": kernel / backend, "kernel_over_clock": kernel / clock})
    return frame.reset_index(drop=True)


def fit_ring_step(phases: pd.DataFrame) -> dict[str, float]:
    """The dense collective's own cost per ring step, fitted from ``after_backward`` runs:
    per iteration the collective of the last worker to enter it beyond the ring's link time
    (the calibrated clock's, which has no per-step cost), over its ``2 (W - 1)`` steps; the
    median over iterations, >= 0."""
    flat = phases[phases["dense_mode"] == "after_backward"]
    workers = int(flat["worker"].max()) + 1
    per = flat.groupby(["run", "iteration"]).agg(measured=("collective_measured", "min"),
                                                  link=("collective_emulated", "max"))
    residual = (per["measured"] - per["link"]) / (2 * (workers - 1))
    return {"step_s": max(0.0, float(residual.median())), "samples": int(len(residual)),
            "residual_median_s": float(residual.median())}
