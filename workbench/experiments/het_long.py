"""HET's Tables 1 and 2 from long training runs: a bound of 100 iterations a small share of the run.

HET trains one 44,766-iteration epoch of 8 x 128; ``het_train``'s runs are 351 iterations, where
a bound of s = 100 iterations is 28% of the run. This stage trains the same model through the
same emulated cluster (``het_train``'s model, cluster and dense placement; HET's per-iteration
clock, [`HET_CLOCK`][workbench.experiments.config.HET_CLOCK]) on a train split of at least
``min_iterations`` global batches (``synthetic_long``: 10,019 iterations), so s = 100 is 1% of
the run:

* **Table 1**: emulated seconds for Hybrid (no cache) and Cache s = ``table1_bound`` to reach
  the dataset's target AUC, and their ratio, per seed; also at every target of
  ``target_sweep`` (the register's assumed range), from the same curves.
* **Table 2**: final test AUC of the cache at every bound of ``bounds`` (HET's unit, as
  published), per seed.

Every (system, seed) pair is one run: seed ``seed + r`` draws the initialisation and, for
r > 0, a permutation of the train split (r = 0 reads it in file order), as ``het_train``'s
replicates do. Runs are independent, so ``jobs`` of them run side by side, each in its own
spawned process with one torch thread (bit-identical to a run alone). A run evaluates every
``eval_every`` iterations up to ``eval_until`` and every ``eval_every_late`` after it
([`EvalSchedule`][workbench.training.components.EvalSchedule]); time to target is interpolated
between evaluations ([`time_to_target`][workbench.training.metrics.time_to_target]).

The stage is frozen in ``dvc.yaml`` (as ``calibrate``): ``dvc repro`` keeps the committed
results, and ``make het-long`` recomputes them.

Outputs (``results/het_long/<dataset>/``): ``metrics.csv`` (every evaluation of every run),
``runs.csv`` (per run: final AUC, time and iterations to the target),
``targets.csv`` (per seed and target of the sweep: each Table 1 system's time to it),
``summary.json`` (the setting, the clock, and the runs), ``resources.json`` (this machine's wall
seconds and peak memory per run: the only machine-specific output).
"""

from __future__ import annotations

import dataclasses
import logging
import resource
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from workbench.cluster.config import UNBOUNDED, CacheConfig, ClusterConfig
from workbench.data.config import DatasetConfig
from workbench.data.keys import table_rows
from workbench.data.schema import DatasetMeta
from workbench.dispatch.registry import DispatcherSpec
from workbench.experiments.config import HET_CLOCK, HetLongConfig, HetTrainConfig
from workbench.experiments.context import RunContext
from workbench.models.config import ModelConfig
from workbench.training.clock import ModelShape, clock_costs, clock_summary
from workbench.training.components import (
    ClusterSetup,
    EvalSchedule,
    Mechanisms,
    ModelSpec,
    SystemKind,
    SystemSpec,
)
from workbench.training.metrics import time_to_target
from workbench.training.trainer import Trainer, load_split
from workbench.utils.fanout import LOCAL, FanoutConfig, fan_out
from workbench.utils.validation import ConfigError

log = logging.getLogger(__name__)
HYBRID = "Hybrid, no cache"


def cache_label(bound: int) -> str:
    """``Cache s=100``, ``Cache s=inf``: a cache system's name (-1 = infinity)."""
    return f"Cache s={'inf' if bound < 0 else bound}"


def systems(exp: HetLongConfig) -> list[tuple[SystemSpec, int | None]]:
    """Hybrid, then the cache at every bound (HET's clock), each with its published bound."""
    out: list[tuple[SystemSpec, int | None]] = [(SystemSpec(HYBRID, SystemKind.HYBRID), None)]
    out += [(SystemSpec(cache_label(b), SystemKind.CACHE, UNBOUNDED if b < 0 else b, HET_CLOCK), b)
            for b in exp.bounds]
    return out


@dataclasses.dataclass(frozen=True)
class Run:
    """One training run: a system at a seed (everything a spawned process needs)."""

    processed: str
    shape: ModelSpec
    system: SystemSpec
    setup: ClusterSetup
    dispatch: DispatcherSpec
    switches: Mechanisms
    seed: int
    replicate: int
    schedule: EvalSchedule
    max_test_samples: int | None


def train_one(run: Run) -> dict[str, Any]:
    """Train ``run`` (in a pool's process): its evaluations, wall seconds and peak memory."""
    processed = Path(run.processed)
    meta = DatasetMeta.read(processed)
    train = load_split(processed, meta, "train", None)
    if run.replicate:
        train = train.take(np.random.default_rng(run.seed).permutation(len(train)))
    test = load_split(processed, meta, "test", run.max_test_samples)
    start = time.perf_counter()
    metrics = Trainer(run.shape, run.system, run.setup, run.dispatch, run.switches,
                      seed=run.seed).fit(train, test, epochs=1, eval_every=run.schedule)
    return {"metrics": metrics, "train_s": time.perf_counter() - start,
            "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6}


def run_all(runs: list[Run], jobs: int, progress: bool,
            fanout: FanoutConfig = LOCAL) -> list[dict[str, Any]]:
    """Every run, ``jobs`` at a time on ``fanout``'s backend; results in ``runs``' order."""

    def done(i: int, result: dict[str, Any]) -> None:
        r = runs[i]
        log.info("%s, seed %d: final AUC %.4f, %.0f s, peak %.1f GB", r.system.label, r.seed,
                 result["metrics"]["test_auc"].iloc[-1], result["train_s"],
                 result["peak_rss_gb"])

    return fan_out(train_one, [(r,) for r in runs],
                   [f"{r.system.label}, seed {r.seed}" for r in runs], jobs=jobs,
                   config=fanout, done=done, progress=progress, desc="het_long", unit="run")


def target_table(metrics: pd.DataFrame, targets: list[float], names: list[str]) -> pd.DataFrame:
    """Per replicate and target: each of ``names``' emulated seconds to it (NaN: never)."""
    rows = []
    for (rep, seed), frame in metrics.groupby(["replicate", "seed"]):
        for target in targets:
            row: dict[str, Any] = {"replicate": rep, "seed": seed, "target_auc": target}
            for name in names:
                curve = frame[frame["system"] == name]
                row[name] = time_to_target(curve, target)
            rows.append(row)
    return pd.DataFrame(rows)


@dataclasses.dataclass(frozen=True)
class Plan:
    """Every run of the stage and the setting they share.

    Attributes:
        runs: every system at every seed, in seed-major order.
        bounds: each system's published bound (None: Hybrid; -1: infinity).
        train_samples: the train split's samples.
        test_samples: the test samples each evaluation reads.
        iterations: global batches of one pass over the train split.
        cluster: the emulated cluster, its dense sync placed as ``het_train``'s.
        clock: the clock's description ([`clock_summary`][workbench.training.clock.clock_summary]).
    """

    runs: list[Run]
    bounds: dict[str, int | None]
    train_samples: int
    test_samples: int
    iterations: int
    cluster: ClusterConfig
    clock: dict[str, Any]


def plan(ctx: RunContext, exp: HetLongConfig, *, train_exp: HetTrainConfig,
         model: ModelConfig, cluster: ClusterConfig, cache: CacheConfig,
         dispatcher: str) -> Plan:
    """The stage's runs (arguments as [`run`][]'s).

    Raises:
        ConfigError: the train split holds fewer than ``exp.min_iterations`` global batches
            (names the key and the dataset).
    """
    cluster.require_emulated("het_long")
    cluster = dataclasses.replace(cluster, dense_mode=train_exp.dense_mode,
                                  dense_link=train_exp.dense_link)
    meta = DatasetMeta.read(ctx.processed)
    train_samples = meta.rows["train"]
    test_samples = min(meta.rows["test"], exp.max_test_samples or meta.rows["test"])
    iterations = train_samples // model.batch_size
    if iterations < exp.min_iterations:
        raise ConfigError(
            f"experiments.het_long.min_iterations = {exp.min_iterations:,}: dataset "
            f"{meta.name} holds {iterations:,} iterations of {model.batch_size} "
            f"({train_samples:,} train samples); give a longer dataset "
            "(experiments.het_long.dataset=synthetic_long) or lower the key")
    compute, software = clock_costs(cluster, ctx.calibration, ModelShape(
        train_exp.model, model, len(meta.dense), len(meta.categorical)))
    shape = ModelSpec(model, len(meta.dense), len(meta.categorical), table_rows(meta))
    setup = ClusterSetup(cluster, cache, compute, software)
    schedule = EvalSchedule(exp.eval_every, exp.eval_until, exp.eval_every_late)
    chosen = systems(exp)
    runs = [Run(str(ctx.processed), shape, system, setup, DispatcherSpec(dispatcher),
                Mechanisms(asp_staleness=train_exp.asp_staleness), ctx.seed + r, r, schedule,
                exp.max_test_samples)
            for r in range(exp.seeds) for system, _ in chosen]
    return Plan(runs, {system.label: bound for system, bound in chosen}, train_samples,
                test_samples, iterations, cluster, clock_summary(cluster, compute, software))


def run(ctx: RunContext, exp: HetLongConfig, *, train_exp: HetTrainConfig,
        dataset: DatasetConfig, model: ModelConfig, cluster: ClusterConfig, cache: CacheConfig,
        dispatcher: str) -> None:
    """The ``het_long`` stage: every system at every seed; writes ``out`` whole.

    Args:
        ctx: where it reads and writes, the seed, the clock's calibration, progress bars.
        exp: the stage's settings.
        train_exp: ``het_train``'s settings (the model's name, the dense placement, the ASP
            delay): the long runs differ from its runs only in length.
        dataset: the dataset (its ``target_auc`` is Table 1's target).
        model: the model trained (``models.<train_exp.model>``).
        cluster: the emulated cluster.
        cache: every worker's cache (the systems set its bound).
        dispatcher: the baseline dispatch of every global batch.

    Raises:
        ConfigError: the train split is too short ([`plan`][]).
    """
    from workbench.utils.io import atomic_dir, write_json

    setting = plan(ctx, exp, train_exp=train_exp, model=model, cluster=cluster, cache=cache,
                   dispatcher=dispatcher)
    runs, on = setting.runs, setting.cluster
    start = time.perf_counter()
    results = run_all(runs, exp.jobs, ctx.progress, ctx.fanout)
    wall_s = time.perf_counter() - start

    frames, records = [], []
    for r, result in zip(runs, results, strict=True):
        metrics = result["metrics"]
        frames.append(metrics.assign(replicate=r.replicate, seed=r.seed, system=r.system.label))
        records.append({
            "replicate": r.replicate, "seed": r.seed, "system": r.system.label,
            "het_bound": setting.bounds[r.system.label],
            "final_auc": float(metrics["test_auc"].iloc[-1]),
            "time_to_target_s": time_to_target(metrics, dataset.target_auc),
            "iterations_to_target": time_to_target(metrics, dataset.target_auc, "iteration"),
            "time_s": float(metrics["time_s"].iloc[-1]),
            "comm_s": float(metrics["comm_s"].iloc[-1])})
    metrics = pd.concat(frames, ignore_index=True)
    lead = ["replicate", "seed", "system"]
    metrics = metrics[lead + [c for c in metrics.columns if c not in lead]]
    table1 = [HYBRID, cache_label(exp.table1_bound)]
    targets = sorted({dataset.target_auc, *exp.target_sweep})
    summary = {
        "dataset": dataset.name, "model": train_exp.model, "target_auc": dataset.target_auc,
        "train_samples": setting.train_samples, "test_samples": setting.test_samples,
        "iterations": setting.iterations, "batch_size": model.batch_size,
        "workers": on.workers, "cluster": on.name,
        "dense_sync": f"{on.dense_mode}/{on.dense_link}",
        "cache_policy": cache.policy, "cache_ratio": cache.ratio, "cache_clock": HET_CLOCK,
        "bounds": exp.bounds, "table1": table1, "seeds": exp.seeds,
        "het_iterations": train_exp.het_iterations, "embedding_dim": model.embedding_dim,
        "eval": dataclasses.asdict(runs[0].schedule), "clock": setting.clock,
        "runs": records}
    resources = {"jobs": exp.jobs, "wall_s": round(wall_s, 1),
                 "runs": [{"system": r.system.label, "seed": r.seed,
                           "train_s": round(res["train_s"], 1),
                           "peak_rss_gb": round(res["peak_rss_gb"], 2)}
                          for r, res in zip(runs, results, strict=True)]}
    with atomic_dir(ctx.out) as tmp:
        metrics.to_csv(tmp / "metrics.csv", index=False, float_format="%.6g")
        pd.DataFrame(records).to_csv(tmp / "runs.csv", index=False, float_format="%.6g")
        target_table(metrics, targets, table1).to_csv(tmp / "targets.csv", index=False,
                                                      float_format="%.6g")
        write_json(tmp / "summary.json", summary)
        write_json(tmp / "resources.json", resources)
