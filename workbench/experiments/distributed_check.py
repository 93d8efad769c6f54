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

from workbench.cluster.cache import COUNTERS
from workbench.cluster.config import CacheConfig, ClusterConfig
from workbench.cluster.edge_network import (
    EdgeNetwork,
    NetworkUnavailableError,
)
from workbench.cluster.time_model import (
    BYTES_PER_FLOAT,
    ComputeCost,
    Links,
    SoftwareCost,
)
from workbench.data.config import DatasetConfig
from workbench.data.keys import table_rows
from workbench.data.schema import DatasetMeta
from workbench.experiments.config import DistributedCheckConfig, EsdConfig
from workbench.experiments.context import RunContext
from workbench.experiments.sizing import largest_fit, require_samples
from workbench.models.config import ModelConfig
from workbench.training.clock import ModelShape, clock_costs, clock_summary
from workbench.training.components import (
    SystemKind,
    SystemSpec,
)
from workbench.training.distributed import (
    DistributedJob,
    DistributedProcessError,
    DistributedResult,
    run_distributed,
)
from workbench.training.emulator_check import (
    BAND,
    BYTE_COLUMNS,
    EmulatedRun,
    byte_frame,
    compare,
    fit_ring_step,
    fit_software,
    on_real_links,
    phase_frame,
    phase_ratios,
    run_emulated,
)
from workbench.training.trainer import Split, load_split

log = logging.getLogger(__name__)


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
