r"""The emulator checked against real processes: the same runs, emulated and distributed, on
each network of ``exp.networks``.

The networks: the sender-shaped token bucket on loopback, and the kernel-shaped edge network of
[`workbench.cluster.edge_network`][], skipped with its reason where namespaces are not permitted.

Two parts, on ``het_train``'s dataset and model (their compute cost is calibrated):

* **Validation** (a small BSP run per staleness bound of ``exp.bounds``, W workers on shaped,
  heterogeneous links): the emulated cluster ([`workbench.training.trainer`][]) and the
  distributed backend ([`workbench.training.distributed`][]) run the same config, seed and
  dispatch. Checked exactly: every cache counter of every (iteration, worker), the rows pulled and
  pushed and the embedding bytes (what the clock counts), the metadata bytes (the real protocol
  carries the clock's 16 B per key and per pushed row plus a reply mask of one bit per key and an
  8-byte version per pulled row: checked to the byte), the server's row versions. At s = 0 also
  the trained parameters (table and dense), within ``param_rtol`` (the dense gradients are summed
  by a gloo all_reduce instead of one batched backward pass: another reduction order). Timed:
  the wall seconds per phase (pull, push, compute, all-reduce, iteration) against the emulated
  clock's on the same links (on the kernel network without netem: at the veths' own latency),
  and the software cost per message and per row fitted from the measured exchanges.
* **ESD on real processes**: the dispatchers of ``exp.esd_dispatchers`` in a dispatcher process
  that sends each worker its samples, on heterogeneous edge links (20 Mb/s to 1 Gb/s by
  default); wall time per iteration end to end and per phase beside the emulated clock's.

On the kernel network every worker's interface counters (bytes and packets both ways) are set
against the backend's own accounting and the clock's ([`byte_frame`][]).

Outputs (``results/distributed_check/<ds>/``): ``check.json`` (deterministic: counters, bytes,
versions, parameter differences, per network and bound), ``phases.csv`` (per network, run,
iteration and worker), ``esd.csv`` and ``bytes.csv`` (MEASURED wall seconds and kernel counters
beside the emulated ones; they change from run to run), ``summary.json`` (the settings, the
networks that ran and why one did not, the phase ratios per network and run, the fitted software
cost).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch

from workbench.cluster.cache import COUNTERS
from workbench.cluster.config import CacheConfig, ClusterConfig
from workbench.cluster.edge_network import (
    PACKET_HEADER_BYTES,
    EdgeNetwork,
    NetworkUnavailableError,
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
from workbench.data.config import DatasetConfig
from workbench.data.keys import table_rows
from workbench.data.schema import DatasetMeta
from workbench.experiments.config import DistributedCheckConfig, EsdConfig
from workbench.experiments.context import RunContext
from workbench.experiments.sizing import largest_fit, require_samples
from workbench.models.config import ModelConfig
from workbench.training.clock import ModelShape, clock_costs, clock_summary
from workbench.training.distributed import (
    DistributedJob,
    DistributedProcessError,
    DistributedResult,
    run_distributed,
)
from workbench.training.trainer import (
    ClusterSetup,
    Mechanisms,
    ModelSpec,
    Split,
    SystemKind,
    SystemSpec,
    Trainer,
    load_split,
)

log = logging.getLogger(__name__)


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


def available_networks(wanted: list[str]) -> tuple[list[str], dict[str, str]]:
    """The networks of ``wanted`` that can run here, and the reason for each skipped one
    (the kernel network where namespaces are not permitted); raise if none can."""
    skipped = {}
    if "kernel" in wanted:
        reason = EdgeNetwork.available()
        if reason is not None:
            log.warning("the kernel network is skipped: %s", reason)
            skipped["kernel"] = reason
    ran = [n for n in wanted if n not in skipped]
    if not ran:
        raise NetworkUnavailableError(
            f"experiments.distributed_check.networks = {wanted}: {skipped['kernel']}")
    return ran, skipped


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


@dataclass
class _EsdRuns:
    """What every ESD run of the stage shares."""

    exp: DistributedCheckConfig
    esd: EsdConfig
    model_cfg: ModelConfig
    cluster: ClusterConfig
    cache: CacheConfig
    train: Split
    compute: ComputeCost
    software: SoftwareCost
    shape: dict[str, Any]
    seed: int

    def run(self, name: str, network: str, mode: str
            ) -> tuple[dict[str, Any], DistributedJob, EmulatedRun, DistributedResult]:
        """Dispatcher ``name`` in its own process on ``network`` in dense ``mode``: its row of
        ``esd.csv``, the job the clock ran (on the real links), the emulated and the real
        run."""
        from workbench.dispatch.registry import SolverOptions

        exp = self.exp
        job = DistributedJob(self.model_cfg, system=SystemSpec(
            f"Cache s={exp.esd_bound}", SystemKind.CACHE, exp.esd_bound),
            cluster_cfg=with_mode(self.cluster, mode, exp.bucket_mb),
            cache_cfg=self.cache, steps=exp.steps, seed=self.seed, dispatcher=name,
            timeout_s=exp.timeout_s, deadline_s=exp.deadline_s, network=network, **self.shape)
        options = (SolverOptions() if name in ("contiguous", "random", "laia")
                   else SolverOptions(**self.esd.dispatcher_options()))
        budget = self.esd.hybrid_budget_fraction * float(
            self.compute.seconds(job.capacity_array(), 1.0).max())
        # a baseline goes through the dispatcher process too (same message path for all)
        forced = dataclasses.replace(job, dispatcher_options=options, decision_budget_s=budget,
                                     force_dispatcher_process=True)
        real = run_real(forced, self.train,
                        f"ESD run of {name} on the {network} network ({mode})")
        clock_job = on_real_links(forced, real)
        emulated = run_emulated(clock_job, self.train, self.compute, self.software,
                                budget_fraction=self.esd.hybrid_budget_fraction)
        steady_emu = emulated.history[emulated.history["iteration"] >= exp.warmup]
        steady = real.history[real.history["iteration"] >= exp.warmup]
        wall = steady.groupby("iteration")["wall_s"].max()
        row: dict[str, Any] = {
            "network": network, "dense_mode": mode, "dispatcher": name,
            "step_s_measured": float(wall.mean()),
            "step_s_emulated": float(steady_emu.groupby("iteration")["step_s"].max().mean()),
            "embedding_bytes_measured": float((steady["sent_rows_bytes"]
                                               + steady["recv_rows_bytes"]).sum()),
            "embedding_bytes_emulated": float(steady_emu["embedding_bytes"].sum()),
            "pulled_rows": int((steady["miss_pulls"] + steady["stale_pulls"]).sum()),
            "decision_s_mean": float(np.mean(real.server["decision_s"])),
            "dispatch_wait_s_mean": float(steady["dispatch_wait_s"].mean()),
            "counters_identical": bool(np.array_equal(
                emulated.history[list(COUNTERS)].to_numpy(),
                real.history[list(COUNTERS)].to_numpy())),
            "wall_s": real.wall_s}
        log.info("%s on the %s network (%s): %.1f ms per iteration measured, %.1f ms emulated",
                 name, network, mode, 1e3 * row["step_s_measured"],
                 1e3 * row["step_s_emulated"])
        return row, clock_job, emulated, real


def with_mode(cluster: ClusterConfig, mode: str, bucket_mb: float) -> ClusterConfig:
    """``cluster`` in dense ``mode`` with DDP buckets of ``bucket_mb`` (the first one too)."""
    return dataclasses.replace(cluster, dense_mode=mode,  # type: ignore[arg-type]
                               bucket_mb=bucket_mb, first_bucket_mb=bucket_mb)


@dataclass
class _Collected:
    """What the stage gathers from each run: its phases, their ratios per clock and, on the
    kernel network, its bytes."""

    warmup: int
    software: SoftwareCost
    dim: int
    phases: list[pd.DataFrame] = field(default_factory=list)
    ratios: list[dict[str, Any]] = field(default_factory=list)
    wire: list[pd.DataFrame] = field(default_factory=list)
    runs: list[tuple[dict[str, Any], DistributedJob, EmulatedRun, DistributedResult]] = \
        field(default_factory=list)

    def add(self, network: str, label: str, bound: int, clock_job: DistributedJob,
            emulated: EmulatedRun, real: DistributedResult) -> pd.DataFrame:
        """Record run ``label`` on ``network`` (the clock on ``clock_job``'s links, in its dense
        mode); its phases on the calibrated clock."""
        mode = clock_job.cluster_cfg.dense_mode
        key = {"network": network, "dense_mode": mode, "run": label}
        phases = phase_frame(emulated, real, self.warmup,
                             Links.from_config(clock_job.cluster_cfg, self.software), self.dim)
        phases.insert(0, "bound", bound)
        for name, value in reversed(key.items()):
            phases.insert(0, name, value)
        self.phases.append(phases)
        self.ratios.append({**key, "clock": "calibrated", **phase_ratios(phases)})
        self.runs.append((key, clock_job, emulated, real))
        if network == "kernel":
            self.wire.append(byte_frame(emulated, real).assign(run=label, network=network,
                                                               dense_mode=mode))
        return phases

    def refit(self, network: str, software: SoftwareCost) -> None:
        """The phase ratios of every run on ``network`` again, on the clock with ``software``
        (fitted on this network's validation runs: in sample for them, out of sample for the
        ESD runs)."""
        for key, clock_job, emulated, real in self.runs:
            if key["network"] != network:
                continue
            phases = phase_frame(emulated, real, self.warmup,
                                 Links.from_config(clock_job.cluster_cfg, software), self.dim)
            sample = "in sample" if key["run"].startswith("validation") else "out of sample"
            self.ratios.append({**key, "clock": f"refit ({sample})", **phase_ratios(phases)})


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


def run_real(job: DistributedJob, train: Split, what: str) -> DistributedResult:
    """[`run_distributed`][], its one-line failures (a process died, stopped or hung, the
    deadline passed) prefixed with this stage's config section and the run (``what``)."""
    try:
        return run_distributed(job, train)
    except DistributedProcessError as err:
        raise DistributedProcessError(
            f"experiments.distributed_check, {what}: {err}; nothing was written") from None


def _fewer_steps(exp: DistributedCheckConfig, samples: int) -> str:
    """The settings that fit ``samples`` train samples, as the fix of a too-small dataset: fewer
    steps (at least 2 and above ``warmup``), else a smaller batch too (a multiple of both
    worker counts)."""
    key = "experiments.distributed_check"
    least = max(2, exp.warmup + 1)
    if samples // exp.batch_size >= least:
        return f"set {key}.steps={samples // exp.batch_size}"
    step = math.lcm(exp.workers, exp.esd_workers)
    batch = largest_fit(samples, least, multiple_of=step)
    if batch % step == 0 and batch * least <= samples:  # largest_fit says 1 when none fits
        return f"set {key}.steps={least} and {key}.batch_size={batch}"
    return (f"use a larger dataset (at least {least} x {step} = {least * step} train samples: "
            f"{least} steps, the least above warmup = {exp.warmup}, of the smallest batch, "
            f"one sample per worker)")


def run(ctx: RunContext, exp: DistributedCheckConfig, *, dataset: DatasetConfig,
        model_name: str, model: ModelConfig, cluster: ClusterConfig, cache: CacheConfig,
        esd: EsdConfig) -> None:
    """The ``distributed_check`` stage; writes ``out`` whole (see the module docstring).

    ``esd`` gives the cost-aware dispatchers' settings (the ``esd`` stage's); their decision
    budget is ``esd.hybrid_budget_fraction`` x the calibrated compute of one iteration.
    """
    processed, out, seed, calibration = ctx.processed, ctx.out, ctx.seed, ctx.calibration
    from workbench.utils.io import atomic_dir, write_json

    meta = DatasetMeta.read(processed)
    needed = exp.steps * exp.batch_size
    train = load_split(processed, meta, "train", needed)
    require_samples(len(train), needed, dataset.name,
                    f"{exp.steps} iterations of experiments.distributed_check.batch_size = "
                    f"{exp.batch_size}", _fewer_steps(exp, len(train)))
    # the clock's compute is the calibration of the model as configured (its own optimizer)
    model_cfg = dataclasses.replace(
        model, batch_size=exp.batch_size,
        optimizer=model.optimizer if exp.optimizer == "model" else exp.optimizer)
    shape: dict[str, Any] = dict(n_dense=len(meta.dense), n_sparse=len(meta.categorical),
                                 table_rows=table_rows(meta))
    check_cluster = dataclasses.replace(
        cluster, name="distributed_check", workers=exp.workers,
        bandwidth_gbps=list(exp.bandwidth_gbps), latency_ms=list(exp.latency_ms),
        speed=list(exp.speed), overlap="none", sync="bsp")
    compute, software = clock_costs(check_cluster, calibration, ModelShape(
        model_name, model, shape["n_dense"], shape["n_sparse"]))
    cache_cfg = dataclasses.replace(cache, policy=exp.cache_policy, ratio=exp.cache_ratio,
                                    rows=None)
    networks, skipped = available_networks(exp.networks)
    checks, esd_rows = [], []
    collected = _Collected(exp.warmup, software, model_cfg.embedding_dim)
    fitted: dict[str, Any] = {}
    kernel_network: dict[str, Any] = {}
    esd_cluster = dataclasses.replace(
        cluster, name="distributed_check_esd", workers=exp.esd_workers,
        bandwidth_gbps=list(exp.esd_bandwidth_gbps), latency_ms=list(exp.esd_latency_ms),
        speed=[1.0], overlap="none", sync="bsp")
    esd_cache = dataclasses.replace(cache_cfg, ratio=exp.esd_cache_ratio)
    esd_runs = _EsdRuns(exp, esd, model_cfg, esd_cluster, esd_cache, train, compute, software,
                        shape, seed)
    for network in networks:
        validation = []
        for mode in exp.dense_modes:
            mode_cluster = with_mode(check_cluster, mode, exp.bucket_mb)
            for bound in exp.bounds:
                system = SystemSpec(f"Cache s={bound}", SystemKind.CACHE, bound)
                job = DistributedJob(model_cfg, system=system,
                                     cluster_cfg=mode_cluster, cache_cfg=cache_cfg,
                                     steps=exp.steps, seed=seed, dispatcher=exp.dispatcher,
                                     timeout_s=exp.timeout_s, deadline_s=exp.deadline_s,
                                     network=network, **shape)
                real = run_real(job, train, f"validation run s = {bound} on the {network} "
                                            f"network ({mode})")
                clock_job = on_real_links(job, real)
                emulated = run_emulated(clock_job, train, compute, software)
                check = {"network": network, "dense_mode": mode, "bound": bound,
                         **compare(emulated, real), "wall_s": real.wall_s,
                         "startup_s": real.startup_s}
                log.info("%s network (%s), s=%d: counters identical %s, table rel diff %.2e, "
                         "dense rel diff %.2e", network, mode, bound,
                         check["counters_identical"], check["table_max_rel_diff"],
                         check["dense_max_rel_diff"])
                checks.append(check)
                validation.append(collected.add(network, f"validation s = {bound}", bound,
                                                clock_job, emulated, real))
                if network == "kernel":
                    kernel_network = {k: v for k, v in real.network.items() if k != "nodes"}
            # the clock's costs depend on the cluster's compute and software settings only,
            # which the ESD cluster shares with the validation's: ``compute`` and ``software``
            # serve both
            for name in exp.esd_dispatchers:
                row, esd_job, emulated, real = esd_runs.run(name, network, mode)
                esd_rows.append(row)
                collected.add(network, f"ESD {name}", exp.esd_bound, esd_job, emulated, real)
        # the software costs are fitted on the validation runs (the links of check_cluster)
        runs = pd.concat(validation, ignore_index=True)
        pulls = fit_software(runs, clock_job.cluster_cfg,
                             BYTES_PER_FLOAT * model_cfg.embedding_dim)
        ring = fit_ring_step(runs) if "after_backward" in exp.dense_modes else {"step_s": 0.0}
        fitted[network] = {**pulls, "ring_step_s": ring["step_s"],
                           "ring_residual_median_s": ring.get("residual_median_s")}
        collected.refit(network, SoftwareCost(
            pulls["message_s"], pulls["row_s"], 0.0, 0.0,
            source=f"fitted on the {network} network's validation runs",
            collective_step_s=ring["step_s"]))
    if not checks[0]["counters_identical"]:
        log.error("the distributed backend's counters differ from the emulator's")
    phases = pd.concat(collected.phases, ignore_index=True)
    esd_frame = pd.DataFrame(esd_rows)
    base = esd_frame.groupby(["network", "dense_mode"])["step_s_measured"].transform("first")
    base_emu = esd_frame.groupby(["network", "dense_mode"])["step_s_emulated"].transform(
        "first")
    esd_frame["speedup_measured"] = base / esd_frame["step_s_measured"]
    esd_frame["speedup_emulated"] = base_emu / esd_frame["step_s_emulated"]
    bytes_frame = (pd.concat(collected.wire, ignore_index=True) if collected.wire
                   else pd.DataFrame(columns=BYTE_COLUMNS))

    summary = {
        "dataset": dataset.name, "model": model_name, "steps": exp.steps,
        "batch_size": exp.batch_size, "warmup": exp.warmup, "seed": seed,
        "workers": exp.workers, "bandwidth_gbps": check_cluster.per_worker("bandwidth_gbps"),
        "latency_ms": check_cluster.per_worker("latency_ms"),
        "speed": check_cluster.per_worker("speed"), "cache_policy": exp.cache_policy,
        "cache_ratio": exp.cache_ratio, "param_rtol": exp.param_rtol,
        "optimizer": model_cfg.optimizer, "lr_dense": model_cfg.lr_dense,
        "clock": clock_summary(check_cluster, compute, software),
        "networks": networks, "networks_skipped": skipped, "kernel_network": kernel_network,
        "phase_ratios": collected.ratios, "band": list(BAND), "fitted_software": fitted,
        "dense_modes": list(exp.dense_modes), "bucket_mb": exp.bucket_mb,
        "esd_workers": exp.esd_workers, "esd_baseline": str(exp.esd_dispatchers[0]),
        "esd_bandwidth_gbps": esd_cluster.per_worker("bandwidth_gbps"),
        "esd_latency_ms": esd_cluster.per_worker("latency_ms"),
        "parameters_within_tolerance": bool(all(
            c["table_max_rel_diff"] <= exp.param_rtol
            and c["dense_max_rel_diff"] <= exp.param_rtol for c in checks if c["bound"] == 0)),
        "counters_identical": bool(all(c["counters_identical"] for c in checks)),
    }
    if phases.empty or esd_frame.empty:
        raise RuntimeError("distributed_check produced no timed iterations")
    with atomic_dir(out) as tmp:
        write_json(tmp / "check.json", {"bounds": [
            {k: v for k, v in c.items() if k not in ("wall_s", "startup_s")} for c in checks]})
        phases.to_csv(tmp / "phases.csv", index=False, float_format="%.6g")
        esd_frame.to_csv(tmp / "esd.csv", index=False, float_format="%.6g")
        bytes_frame.to_csv(tmp / "bytes.csv", index=False, float_format="%.6g")
        write_json(tmp / "summary.json", {**summary, "runs": [
            {"network": c["network"], "dense_mode": c["dense_mode"], "bound": c["bound"],
             "wall_s": c["wall_s"], "startup_s": c["startup_s"]} for c in checks]})
