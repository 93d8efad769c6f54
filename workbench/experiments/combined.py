r"""The five mechanisms in one training run through ESD's edge cluster, and their ablation.

**Our composition.** Each paper's mechanism comes from its own stage (and carries that stage's
formalisation: ESD's, Hotline's and FlexShard's are ours); here they meet in ONE trainer
([`Trainer`][workbench.training.trainer.Trainer]) on ESD's heterogeneous edge cluster:

    mechanism  on                                             off
    ---------  ---------------------------------------------  ------------------------------
    esd        HybridDis on the cost model of the real caches  random dispatch
               (rows replicated on every worker cost nothing)
    het        HET caches (LRU, bound s) + the client's        no cache: every key pulled and
               prefetch (push and pull fused, overlapped       pushed each iteration (HET's
               with compute)                                   "Hybrid"), no overlap
    recd       IKJT reads: a worker reads each distinct key    one row per occurrence, one
               once and writes one summed update per key       update row per occurrence
    hotline    hot tier: the rows a profile of the inputs      -
               finds hottest, up to the accelerator budget,
               on every worker; its popular micro-batch's
               compute hides the other rows' fetch
    flexshard  FlexShard's replicated tier: the rows with the  -
               highest estimated access probability (Good-
               Turing on the profile), on every worker

    replicated rows (hotline | flexshard): read locally, never pulled; their updates join the
    dense AllReduce (4 D bytes per row touched in the iteration), so the tier trades PS traffic
    for AllReduce traffic over the slowest link.

What does not carry over, said where the result is shown: on an edge star (one PS, one device
per worker, no peer links) FlexShard's per-node and row-sharded tiers have no counterpart, so its
placement is its replicated tier; under HET's prefetch every compute already overlaps the
communication, so Hotline's micro-batch overlap only shows when ``het`` is off.

Runs (``ablation.csv``, one row each): ``none``; each mechanism alone; the configured pairs;
``all``; all but each; and ``all (laia)``, all with Herald's LAIA dispatching instead of ESD.
Every run trains the same model from the same initial parameters on the same samples, on the
calibrated clock.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from workbench.cluster.config import CacheConfig, ClusterConfig
from workbench.cluster.time_model import ComputeCost, SoftwareCost
from workbench.data.config import DatasetConfig
from workbench.data.keys import table_rows
from workbench.data.popularity import hot_keys, hot_mask, profile_counts
from workbench.data.schema import DatasetMeta
from workbench.experiments.config import MECHANISMS, CombinedConfig, EsdConfig
from workbench.experiments.context import RunContext, say_if_reversed
from workbench.experiments.sizing import require_global_batch
from workbench.models.config import ModelConfig

if TYPE_CHECKING:  # the trainer imports torch: loaded by the training only
    from workbench.training.trainer import Split, Trainer

log = logging.getLogger(__name__)

#: The ablation's columns of bytes, rows and time summed over a run (see :func:`ablation_row`).
TOTALS = ("embedding_bytes", "meta_bytes", "dense_bytes", "pulled_rows", "pushed_rows")


def runs(mechanisms: list[str], pairs: Sequence[Sequence[str]] = ()
         ) -> list[tuple[str, frozenset[str], bool]]:
    """The ablation's runs: ``(name, mechanisms on, LAIA instead of ESD)``.

    none; each mechanism alone; each pair of ``pairs``; all; all but each; all with LAIA (when
    ``esd`` is switched).
    """
    every = frozenset(mechanisms)
    out: list[tuple[str, frozenset[str], bool]] = [("none", frozenset(), False)]
    out += [(f"{m} only", frozenset([m]), False) for m in mechanisms]
    out += [(f"{a} + {b}", frozenset([a, b]), False) for a, b in pairs]
    out.append(("all", every, False))
    if len(mechanisms) > 2:
        out += [(f"all - {m}", every - {m}, False) for m in mechanisms]
    if "esd" in every:
        out.append(("all (laia)", every, True))
    return out


def replicated_sets(keys: np.ndarray, rows: int, exp: CombinedConfig, dim: int,
                    seed: int) -> dict[str, np.ndarray]:
    """Hotline's hot set and FlexShard's replicated tier, as ``bool[rows]`` masks.

    One profile of ``profile_rate`` of the train inputs (drawn with replacement, seeded) feeds
    both: Hotline keeps the most-counted rows that fit ``hot_fraction`` of the table
    ([`hot_keys`][workbench.data.popularity.hot_keys]); FlexShard ranks rows by their Good-Turing
    access probability and replicates the first ``replicated_fraction`` (its tier 0).
    """
    from workbench.sharding.planner import estimate_probability
    from workbench.sharding.plans import rank_order

    counts = profile_counts(keys, rows, exp.profile_rate, np.random.default_rng(seed + 7))
    budget = int(round(exp.hot_fraction * rows)) * 4 * dim
    hot = hot_mask(hot_keys(counts, budget, dim), rows)
    tier0 = rank_order(estimate_probability(counts))[: int(round(exp.replicated_fraction * rows))]
    return {"hotline": hot, "flexshard": hot_mask(tier0, rows)}


def dispatcher_for(exp: CombinedConfig, on: frozenset[str], laia: bool) -> str:
    """The dispatcher of a run: LAIA when asked, ESD's when ``esd`` is on, else the
    baseline."""
    if laia:
        return "laia"
    return exp.esd_dispatcher if "esd" in on else exp.baseline_dispatcher


def run_cluster(exp: CombinedConfig, cluster: ClusterConfig, het: bool) -> ClusterConfig:
    """ESD's base edge links with the clock settings of ``cluster``; overlap is HET's
    prefetch when ``het`` is on, none otherwise."""
    from workbench.cluster.construction import clock_cluster

    return dataclasses.replace(clock_cluster(exp, cluster),
                               overlap="prefetch" if het else "none")


def ablation_row(name: str, on: frozenset[str], dispatcher: str, metrics: pd.DataFrame,
                 history: pd.DataFrame, trainer, target: float) -> dict[str, Any]:
    """One row of ``ablation.csv``: switches, bytes moved, emulated time and AUC of a run."""
    from workbench.training.metrics import time_to_target

    totals = {k: float(history[k].sum()) for k in TOTALS}
    workers = trainer.workers  # every worker sends 2 (W-1)/W of the ring; summed over workers
    replicated_bytes = 2 * (workers - 1) * 4 * trainer.dim * trainer.replicated_synced
    last = metrics.iloc[-1]
    return {"run": name, **{m: m in on for m in MECHANISMS}, "dispatcher": dispatcher,
            "bytes": totals["embedding_bytes"] + totals["meta_bytes"] + totals["dense_bytes"],
            "ps_bytes": totals["embedding_bytes"] + totals["meta_bytes"],
            "allreduce_bytes": totals["dense_bytes"], "replicated_sync_bytes": replicated_bytes,
            "pulled_rows": totals["pulled_rows"], "pushed_rows": totals["pushed_rows"],
            "lookup_rows": float(trainer.lookup_rows),
            "time_s": float(last["time_s"]), "compute_s": float(last["compute_s"]),
            "comm_s": float(last["comm_s"]), "decision_s": float(last["decision_s"]),
            "final_auc": float(last["test_auc"]),
            "time_to_target_s": time_to_target(metrics, target),
            "iterations": int(last["iteration"])}


@dataclass(frozen=True, eq=False)
class Ablation:
    """What every run of the ablation shares ([`train_run`][] varies only the switches).

    Attributes:
        train: the train split (every run trains on the same samples, in order).
        test: the test split (every evaluation).
        meta: the dataset's schema (the model's inputs, the table's rows).
        exp: the ablation's settings.
        esd: the ESD solvers' settings (mode, limits, HybridDis' budget).
        model: the model trained (its batch becomes ``exp.workers x exp.per_worker``).
        cluster: the clock's settings (compute, software cost); the links are ESD's.
        compute: the clock's compute cost.
        software: the clock's software cost.
        sets: Hotline's and FlexShard's replicated rows ([`replicated_sets`][]).
        seed: seeds the model and the dispatchers.
    """

    train: Split
    test: Split
    meta: DatasetMeta
    exp: CombinedConfig
    esd: EsdConfig
    model: ModelConfig
    cluster: ClusterConfig
    compute: ComputeCost
    software: SoftwareCost
    sets: dict[str, np.ndarray]
    seed: int


def train_run(ablation: Ablation, on: frozenset[str], laia: bool, progress: bool = False
              ) -> tuple[pd.DataFrame, pd.DataFrame, Trainer]:
    """Train one combination of mechanisms (``on``; LAIA dispatching when ``laia``); returns
    ``(evaluations, per-iteration cluster history, trainer)``."""
    from workbench.dispatch.registry import DispatcherSpec, SolverOptions
    from workbench.training.components import (
        ClusterSetup,
        Mechanisms,
        ModelSpec,
        SystemKind,
        SystemSpec,
    )
    from workbench.training.trainer import Trainer

    exp, esd, meta, sets = ablation.exp, ablation.esd, ablation.meta, ablation.sets
    het = "het" in on
    replicated = None
    for mech in ("hotline", "flexshard"):
        if mech in on:
            replicated = sets[mech] if replicated is None else replicated | sets[mech]
    dispatcher = dispatcher_for(exp, on, laia)
    model_cfg = dataclasses.replace(ablation.model, batch_size=exp.workers * exp.per_worker)
    system = SystemSpec(f"cache s={exp.bound}", SystemKind.CACHE, exp.bound) if het \
        else SystemSpec("hybrid", SystemKind.HYBRID)
    cache = CacheConfig(policy=exp.cache_policy, ratio=exp.cache_ratio)
    trainer = Trainer(
        ModelSpec(model_cfg, len(meta.dense), len(meta.categorical), table_rows(meta)), system,
        ClusterSetup(run_cluster(exp, ablation.cluster, het), cache, ablation.compute,
                     ablation.software),
        DispatcherSpec(dispatcher, SolverOptions(**esd.dispatcher_options())),
        Mechanisms(dedup="recd" in on, replicated=replicated, overlap_popular="hotline" in on,
                   budget_fraction=esd.hybrid_budget_fraction),
        seed=ablation.seed)
    metrics = trainer.fit(ablation.train, ablation.test, epochs=exp.epochs,
                          eval_every=exp.eval_every, progress=progress)
    assert trainer.cluster is not None  # the emulated trainer always has its cluster
    return metrics, trainer.cluster.history(), trainer


def run(ctx: RunContext, exp: CombinedConfig, *, esd: EsdConfig, dataset: DatasetConfig,
        model: ModelConfig, cluster: ClusterConfig) -> None:
    """The ``combined`` stage: every run of the ablation; writes ``out`` whole.

    Outputs: ``ablation.csv`` (one row per run: [`ablation_row`][]), ``train.csv`` (every
    run's evaluations), ``iterations.csv`` (per run and iteration: bytes and seconds, summed
    over workers), ``summary.json`` (settings, the replicated sets, the clock).

    Args:
        ctx: where it reads and writes, the seed, the clock's calibration, progress bars.
        exp: the ablation's settings.
        esd: the ESD solvers' settings (mode, limits, HybridDis' budget).
        dataset: the dataset (its ``target_auc`` unless ``exp.target_auc`` is set).
        model: the model trained (``models.<exp.model>``).
        cluster: the clock's settings (compute, software cost); links are ESD's.
    """
    processed, out, seed, calibration, progress = (ctx.processed, ctx.out, ctx.seed,
                                                   ctx.calibration, ctx.progress)
    from tqdm.auto import tqdm

    from workbench.training.clock import ModelShape, clock_costs, clock_summary
    from workbench.training.trainer import load_split
    from workbench.utils.io import atomic_dir, write_json

    meta = DatasetMeta.read(processed)
    train = load_split(processed, meta, "train", exp.max_train_samples)
    test = load_split(processed, meta, "test", exp.max_test_samples)
    require_global_batch(len(train), exp.workers, exp.per_worker, meta.name,
                         "experiments.combined.workers", "experiments.combined.per_worker")
    if len(test) == 0:
        raise ValueError(f"{meta.name}: the test split is empty; the ablation needs test AUC")
    rows = table_rows(meta)
    target = exp.target_auc if exp.target_auc is not None else dataset.target_auc
    sets = replicated_sets(train.keys, rows, exp, model.embedding_dim, seed)
    clock = run_cluster(exp, cluster, het=True)
    compute, software = clock_costs(clock, calibration, ModelShape(
        exp.model, model, len(meta.dense), len(meta.categorical)))
    plan = runs(exp.mechanisms, exp.pairs)
    ablation = Ablation(train, test, meta, exp, esd, model, cluster, compute, software, sets,
                        seed)
    table, curves, iterations = [], [], []
    for name, on, laia in tqdm(plan, disable=not progress, desc="combined"):
        metrics, history, trainer = train_run(ablation, on, laia)
        table.append(ablation_row(name, on, dispatcher_for(exp, on, laia), metrics, history,
                                  trainer, target))
        curves.append(metrics.assign(run=name))
        per_iter = history.groupby("iteration")[list(TOTALS)].sum()
        per_iter["step_s"] = history.groupby("iteration")["step_s"].first()
        iterations.append(per_iter.reset_index().assign(run=name))
        log.info("%s: %.4g s emulated, %.4g MB moved, AUC %.4f", name, table[-1]["time_s"],
                 table[-1]["bytes"] / 1e6, table[-1]["final_auc"])
    times = {row["run"]: row["time_s"] for row in table}
    if "all" in times and "none" in times:
        say_if_reversed(log, "all five mechanisms against none", times["all"], times["none"],
                        "every paper's (each mechanism saves time)")
    popular = {m: float(sets[m][train.keys].all(axis=1).mean()) for m in sets}
    summary = {**dataclasses.asdict(exp), "dataset": meta.name, "table_rows": rows,
               "train_samples": len(train), "test_samples": len(test), "target_auc": target,
               "esd_options": esd.dispatcher_options(),
               "hybrid_budget_fraction": esd.hybrid_budget_fraction,
               "replicated_rows": {m: int(s.sum()) for m, s in sets.items()},
               "replicated_overlap_rows": int((sets["hotline"] & sets["flexshard"]).sum()),
               "popular_fraction": popular,
               "replicated_lookup_share": {m: float(s[train.keys].mean())
                                           for m, s in sets.items()},
               "clock": clock_summary(clock, compute, software),
               "composition": "ours: each mechanism as its own stage formalises it"}
    with atomic_dir(out) as tmp:
        pd.DataFrame(table).to_csv(tmp / "ablation.csv", index=False, float_format="%.6g")
        pd.concat(curves).to_csv(tmp / "train.csv", index=False, float_format="%.6g")
        pd.concat(iterations).to_csv(tmp / "iterations.csv", index=False, float_format="%.6g")
        write_json(tmp / "summary.json", summary)
