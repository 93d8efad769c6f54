"""HET convergence experiments: real training through the emulated cluster.

* **Fig. 6 / Table 1**: the test AUC of the model against emulated time for HET's systems (PS
  ASP, Hybrid, AllReduce, Cache s=10, Cache s=100) and a single-process reference, and the time
  each needs to reach the dataset's target AUC. The caches' bounds tick in HET's
  per-iteration clock ([`HET_CLOCK`][workbench.experiments.config.HET_CLOCK]), as do Table 2's in
  HET's unit and Fig. 7's replays (``het_epoch``): one clock for the three.
* **Table 2**: final test AUC for staleness bounds s in {0, 100, 10k, inf}, in one or both units
  (``staleness_units``):

  - ``paper``: HET's own unit, the per-embedding clock of section 3.1 (a tick per iteration in
    which the worker updates the row; [`workbench.cluster.cache.CLOCKS`][] ``iteration``),
    the bound as published: s = 100 means the same thing as in the paper, though this run is
    far shorter than HET's 44,766-iteration epoch, so s = 10k never triggers a sync here;
  - ``scaled``: Hetu's code unit (a tick per gradient row, ``update``) with the bound scaled by
    the run length, ``s_here = ceil(s x iterations_here / het_iterations)`` (infinite stays
    infinite), so each bound is the same fraction of the run as in HET's.

Time comes from the cluster's clock: the calibrated compute cost of the model on this machine
(or the FLOP model), the measured software cost, and the configured overlap
([`workbench.cluster.time_model`][]). Time to target is interpolated between evaluations
(`time_to_target`).

**Replicates** (``replicates``): the systems the claims rest on (Hybrid and Cache s=100 of
Table 1, Table 2's bounds in HET's unit) are trained again with seeds ``seed + r``, each with a
new initialisation and a new data order (a permutation of the train split); replicate 0 is the
main run, in file order.

Outputs (``results/het_train/<dataset>/``): ``metrics.csv`` (one row per evaluation per run),
``replicates.csv`` (the evaluations of every replicate of the claims' systems), ``summary.json``
(time to target, final AUC, the bounds and their unit, the clock's costs, and per replicate the
time to target and the final AUC of each claims' system).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Any, Literal

import numpy as np
import pandas as pd

from workbench.cluster.config import UNBOUNDED, CacheConfig, ClusterConfig
from workbench.data.config import DatasetConfig
from workbench.data.keys import table_rows
from workbench.data.schema import DatasetMeta
from workbench.dispatch.registry import DispatcherSpec
from workbench.experiments.config import HET_CLOCK, HetTrainConfig
from workbench.experiments.context import RunContext
from workbench.experiments.sizing import largest_fit, require_samples
from workbench.models.config import ModelConfig
from workbench.training.clock import ModelShape, clock_costs, clock_summary
from workbench.training.components import (
    ClusterSetup,
    Mechanisms,
    ModelSpec,
    SystemKind,
    SystemSpec,
)
from workbench.training.metrics import time_to_target
from workbench.training.trainer import Split, Trainer, load_split

log = logging.getLogger(__name__)


def systems(cfg: HetTrainConfig) -> list[SystemSpec]:
    """The configured systems, in HET's order, plus the single-process reference."""
    out = [SystemSpec("Single process (reference)", SystemKind.PLAIN)]
    labels = {"ps": "PS (ASP), no cache", "hybrid": "Hybrid, no cache",
              "allreduce": "AllReduce (sparse AllGather)"}
    for name in cfg.systems:
        if name == "cache":
            out += [SystemSpec(f"Cache s={b}", SystemKind.CACHE, b, HET_CLOCK)
                    for b in cfg.cache_bounds]
        else:
            out.append(SystemSpec(labels[name], SystemKind(name)))
    return out


def scaled_bound(s: int, iterations: int, het_iterations: int) -> int:
    """HET's bound ``s`` scaled to a run of ``iterations`` (-1 = infinity)."""
    if s < 0:
        return UNBOUNDED
    return int(math.ceil(s * iterations / het_iterations))


def staleness_systems(exp: HetTrainConfig, iterations: int) -> list[tuple[SystemSpec, dict]]:
    """Table 2's systems: every bound of ``exp.staleness`` in every unit of
    ``exp.staleness_units`` (see the module docstring)."""
    out = []
    for unit in exp.staleness_units:
        for s in exp.staleness:
            name = "inf" if s < 0 else f"{s:,}"
            clock: Literal["update", "iteration"]
            if unit == "paper":
                bound, clock = (UNBOUNDED if s < 0 else s), HET_CLOCK
            else:
                bound, clock = scaled_bound(s, iterations, exp.het_iterations), "update"
            out.append((SystemSpec(f"s={name} ({unit})", SystemKind.CACHE, bound, clock),
                        {"het_bound": s, "bound": bound, "unit": unit, "clock": clock}))
    return out


CLAIMS_SYSTEMS = ("Hybrid, no cache", "Cache s=100")  # Table 1's claim: the ratio of the two


def run_key(system: SystemSpec) -> tuple:
    """What decides a training run: a bound of 0 or infinity means the same in either clock
    unit, so such systems share one run."""
    return (system.kind, system.bound,
            system.clock if 0 < system.bound < UNBOUNDED else None)


def claims_system(group: str, system: SystemSpec, extra: dict[str, Any]) -> bool:
    """Whether a run carries a claim (and is replicated): Table 1's two systems, Table 2's
    bounds in HET's own unit."""
    return ((group == "systems" and system.label in CLAIMS_SYSTEMS)
            or (group == "staleness" and extra.get("unit") == "paper"))


def replicate_runs(exp: HetTrainConfig, seed: int,
                   runs: list[tuple[str, SystemSpec, dict[str, Any]]],
                   main: dict[tuple, pd.DataFrame], build: Any, train: Split, test: Split,
                   target: float, progress: bool) -> tuple[list[dict[str, Any]], pd.DataFrame]:
    """Every replicate of the claims' ``runs`` (replicate 0: the main run's ``main`` metrics).

    Returns:
        One record per (replicate, run): its seed, time to target and final AUC; and the
        evaluations of every replicate (``replicate, group, system, iteration, time_s,
        test_auc``).
    """
    records, frames = [], []
    for r in range(exp.replicates):
        data = train if r == 0 else train.take(np.random.default_rng(seed + r).permutation(
            len(train)))
        done: dict[tuple, pd.DataFrame] = {}
        for group, system, extra in runs:
            same = run_key(system)
            if r == 0:
                done[same] = main[same]
            elif same not in done:
                done[same] = build(system, r).fit(data, test, epochs=exp.epochs,
                                                  eval_every=exp.eval_every, progress=progress)
            metrics = done[same]
            records.append({"replicate": r, "seed": seed + r, "group": group,
                            "system": system.label, **extra,
                            "time_to_target_s": time_to_target(metrics, target),
                            "final_auc": float(metrics["test_auc"].iloc[-1])})
            frames.append(metrics[["iteration", "time_s", "test_auc"]].assign(
                replicate=r, group=group, system=system.label))
        log.info("replicate %d of %d done", r + 1, exp.replicates)
    cols = ["replicate", "group", "system", "iteration", "time_s", "test_auc"]
    return records, pd.concat(frames, ignore_index=True)[cols]


def run(ctx: RunContext, exp: HetTrainConfig, *, dataset: DatasetConfig, model: ModelConfig,
        cluster: ClusterConfig, cache: CacheConfig, dispatcher: str) -> None:
    """The ``het_train`` stage: every system and every Table 2 bound; writes ``out`` whole.

    Args:
        ctx: where it reads and writes, the seed, the clock's calibration, progress bars.
        exp: the experiment's settings.
        dataset: the dataset (its ``target_auc``).
        model: the model trained (``models.<exp.model>``).
        cluster: the emulated cluster (its dense sync placed as ``exp.dense_mode`` and
            ``exp.dense_link`` say).
        cache: every worker's cache (the systems set its bound).
        dispatcher: the baseline dispatch of every global batch.
    """
    processed, out, seed, calibration, progress = (ctx.processed, ctx.out, ctx.seed,
                                                   ctx.calibration, ctx.progress)
    from workbench.utils.io import atomic_dir, write_json
    cluster.require_emulated("het_train")
    cluster = dataclasses.replace(cluster, dense_mode=exp.dense_mode, dense_link=exp.dense_link)

    meta = DatasetMeta.read(processed)
    train = load_split(processed, meta, "train", exp.max_train_samples)
    require_samples(len(train), model.batch_size, dataset.name,
                    f"one global batch of models.{exp.model}.batch_size = {model.batch_size}",
                    f"set models.{exp.model}.batch_size="
                    f"{largest_fit(len(train), 1, cluster.workers)} (a multiple of "
                    f"cluster.workers = {cluster.workers})")
    test = load_split(processed, meta, "test", exp.max_test_samples)
    compute, software = clock_costs(cluster, calibration, ModelShape(
        exp.model, model, len(meta.dense), len(meta.categorical)))
    iterations = exp.epochs * (len(train) // model.batch_size)

    shape = ModelSpec(model, len(meta.dense), len(meta.categorical), table_rows(meta))
    setup = ClusterSetup(cluster, cache, compute, software)
    dispatch = DispatcherSpec(dispatcher)
    switches = Mechanisms(asp_staleness=exp.asp_staleness)

    def trainer(system: SystemSpec) -> Trainer:
        return Trainer(shape, system, setup, dispatch, switches, seed=seed)

    runs: list[tuple[str, SystemSpec, dict[str, Any]]] = [
        ("systems", s, {"clock": s.clock or cache.clock}) for s in systems(exp)]
    runs += [("staleness", system, extra) for system, extra in staleness_systems(exp, iterations)]
    frames, summary_runs = [], []
    done: dict[tuple, pd.DataFrame] = {}
    for group, system, extra in runs:
        same = run_key(system)
        if same not in done:
            done[same] = trainer(system).fit(train, test, epochs=exp.epochs,
                                             eval_every=exp.eval_every, progress=progress)
        metrics = done[same].copy()
        metrics.insert(0, "system", system.label)
        metrics.insert(0, "group", group)
        frames.append(metrics)
        final = metrics.iloc[-1]
        summary_runs.append({
            "group": group, "system": system.label, "kind": system.kind,
            "bound": system.bound, **extra,
            "time_to_target_s": time_to_target(metrics, dataset.target_auc),
            "iterations_to_target": time_to_target(metrics, dataset.target_auc, "iteration"),
            "final_auc": float(final["test_auc"]), "final_logloss": float(final["test_logloss"]),
            "time_s": float(final["time_s"]), "compute_s": float(final["compute_s"]),
            "comm_s": float(final["comm_s"]), "bytes": float(final["bytes"])})
        log.info("%s: final AUC %.4f after %.2f emulated s", system.label,
                 summary_runs[-1]["final_auc"], summary_runs[-1]["time_s"])
    replicate_rows, curves = replicate_runs(
        exp, seed, [(g, sys, extra) for g, sys, extra in runs if claims_system(g, sys, extra)],
        done, lambda system, r: Trainer(shape, system, setup, dispatch, switches, seed=seed + r),
        train, test, dataset.target_auc, progress)
    example = trainer(SystemSpec("probe", SystemKind.PLAIN))
    summary = {
        "dataset": dataset.name, "model": exp.model, "target_auc": dataset.target_auc,
        "train_samples": len(train), "test_samples": len(test), "iterations": iterations,
        "batch_size": model.batch_size, "workers": cluster.workers,
        "cluster": cluster.name, "cache_policy": cache.policy,
        "cache_ratio": cache.ratio, "cache_clock": HET_CLOCK,
        "eval_every": exp.eval_every, "epochs": exp.epochs,
        "flops_per_sample_train": example.flops, "dense_parameters": example.dense_bytes // 4,
        "embedding_dim": model.embedding_dim, "het_iterations": exp.het_iterations,
        "clock": clock_summary(cluster, compute, software), "runs": summary_runs,
        "replicates": replicate_rows}
    with atomic_dir(out) as tmp:
        pd.concat(frames, ignore_index=True).to_csv(tmp / "metrics.csv", index=False,
                                                    float_format="%.6g")
        curves.to_csv(tmp / "replicates.csv", index=False, float_format="%.6g")
        write_json(tmp / "summary.json", summary)
