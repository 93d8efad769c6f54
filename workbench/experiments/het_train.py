"""HET convergence experiments: real training through the emulated cluster.

* **Fig. 6 / Table 1**: the test AUC of the model against emulated time for HET's systems (PS
  ASP, Hybrid, AllReduce, Cache s=10, Cache s=100) and a single-process reference, and the time
  each needs to reach the dataset's target AUC.
* **Table 2**: final test AUC for staleness bounds s in {0, 100, 10k, inf}. HET's bounds are
  counts of updates over runs of tens of thousands of iterations; this run is shorter, so each
  bound is scaled by the run length: ``s_here = ceil(s x iterations_here / het_iterations)``
  (infinite stays infinite).

Outputs (``results/het_train/<dataset>/``): ``metrics.csv`` (one row per evaluation per run),
``summary.json`` (time to target, final AUC, the scaled bounds, the compute model).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from workbench.cluster.config import CacheConfig, ClusterConfig
from workbench.data.config import DatasetConfig
from workbench.data.keys import sample_keys, table_rows
from workbench.data.preprocess import read_split
from workbench.data.schema import LABEL, DatasetMeta
from workbench.experiments.config import HetTrainConfig
from workbench.experiments.sizing import largest_fit, require_samples
from workbench.models.config import ModelConfig
from workbench.training.trainer import Split, SystemSpec, Trainer, time_to_target

log = logging.getLogger(__name__)
INFINITE = 10**9


def load_split(processed: Path, meta: DatasetMeta, split: str, limit: int | None) -> Split:
    """One encoded split as arrays (dense float32, global keys, labels)."""
    frame = read_split(processed, split, columns=[LABEL, *meta.dense, *meta.categorical])
    if limit is not None:
        frame = frame.iloc[:limit]
    return Split(dense=frame[meta.dense].to_numpy(np.float32),
                 keys=sample_keys(frame, meta),
                 labels=frame[LABEL].to_numpy(np.float32))


def systems(cfg: HetTrainConfig) -> list[SystemSpec]:
    """The configured systems, in HET's order, plus the single-process reference."""
    out = [SystemSpec("Single process (reference)", "plain")]
    labels = {"ps": "PS (ASP), no cache", "hybrid": "Hybrid, no cache",
              "allreduce": "AllReduce (sparse AllGather)"}
    for name in cfg.systems:
        if name == "cache":
            out += [SystemSpec(f"Cache s={b}", "cache", b) for b in cfg.cache_bounds]
        else:
            out.append(SystemSpec(labels[name], name))
    return out


def scaled_bound(s: int, iterations: int, het_iterations: int) -> int:
    """HET's bound ``s`` scaled to a run of ``iterations`` (-1 = infinity)."""
    if s < 0:
        return INFINITE
    return int(math.ceil(s * iterations / het_iterations))


def run(processed: Path, out: Path, exp: HetTrainConfig, *, dataset: DatasetConfig,
        model: ModelConfig, cluster: ClusterConfig, cache: CacheConfig, dispatcher: str,
        seed: int, progress: bool = False) -> None:
    """The ``het_train`` stage: every system and every Table 2 bound; writes ``out`` whole.

    Args:
        processed: ``data/processed/<exp.dataset>``.
        out: ``results/het_train/<exp.dataset>`` (replaced whole).
        exp: the experiment's settings.
        dataset: the dataset (its ``target_auc``).
        model: the model trained (``models.<exp.model>``).
        cluster: the emulated cluster.
        cache: every worker's cache (the systems set its bound).
        dispatcher: the baseline dispatch of every global batch.
        seed: seeds the model and the dispatcher.
        progress: show progress bars.
    """
    from workbench.utils.io import atomic_dir, write_json

    meta = DatasetMeta.read(processed)
    train = load_split(processed, meta, "train", exp.max_train_samples)
    require_samples(len(train), model.batch_size, dataset.name,
                    f"one global batch of models.{exp.model}.batch_size = {model.batch_size}",
                    f"set models.{exp.model}.batch_size="
                    f"{largest_fit(len(train), 1, cluster.workers)} (a multiple of "
                    f"cluster.workers = {cluster.workers})")
    test = load_split(processed, meta, "test", exp.max_test_samples)
    iterations = exp.epochs * (len(train) // model.batch_size)

    def trainer(system: SystemSpec) -> Trainer:
        return Trainer(model, len(meta.dense), len(meta.categorical), table_rows(meta),
                       system, cluster, cache, seed=seed,
                       dispatcher=dispatcher, asp_staleness=exp.asp_staleness)

    runs: list[tuple[str, SystemSpec, dict[str, Any]]] = [
        ("systems", s, {}) for s in systems(exp)]
    for s in exp.staleness:
        bound = scaled_bound(s, iterations, exp.het_iterations)
        runs.append(("staleness", SystemSpec(f"s={'inf' if s < 0 else s}", "cache", bound),
                     {"het_bound": s, "bound": bound}))
    frames, summary_runs = [], []
    for group, system, extra in runs:
        tr = trainer(system)
        metrics = tr.fit(train, test, epochs=exp.epochs, eval_every=exp.eval_every,
                         progress=progress)
        metrics.insert(0, "system", system.label)
        metrics.insert(0, "group", group)
        frames.append(metrics)
        final = metrics.iloc[-1]
        summary_runs.append({
            "group": group, "system": system.label, "kind": system.kind,
            "bound": system.bound, **extra,
            "time_to_target_s": time_to_target(metrics, dataset.target_auc),
            "final_auc": float(final["test_auc"]), "final_logloss": float(final["test_logloss"]),
            "time_s": float(final["time_s"]), "compute_s": float(final["compute_s"]),
            "comm_s": float(final["comm_s"]), "bytes": float(final["bytes"])})
        log.info("%s: final AUC %.4f after %.2f emulated s", system.label,
                 summary_runs[-1]["final_auc"], summary_runs[-1]["time_s"])
    example = trainer(SystemSpec("probe", "plain"))
    summary = {
        "dataset": dataset.name, "model": exp.model, "target_auc": dataset.target_auc,
        "train_samples": len(train), "test_samples": len(test), "iterations": iterations,
        "batch_size": model.batch_size, "workers": cluster.workers,
        "cluster": cluster.name, "cache_policy": cache.policy,
        "cache_ratio": cache.ratio, "gflops": cluster.gflops,
        "flops_per_sample_train": example.flops, "dense_parameters": example.dense_bytes // 4,
        "embedding_dim": model.embedding_dim, "het_iterations": exp.het_iterations,
        "compute_model": "FLOP-modelled: 3 x forward FLOPs x samples / (gflops x speed)",
        "runs": summary_runs}
    with atomic_dir(out) as tmp:
        pd.concat(frames, ignore_index=True).to_csv(tmp / "metrics.csv", index=False,
                                                    float_format="%.6g")
        write_json(tmp / "summary.json", summary)
