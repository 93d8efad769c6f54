"""HET cache experiments: the train split's key trace replayed through the emulated cluster.

Every run cuts the trace of a dataset ([`workbench.dispatch.base.iter_trace`][]: W workers,
b samples per worker per iteration, one concatenated table; drawn again for every run, a window
of steps at a time, so no run holds the whole trace), replays it through W HET caches
([`workbench.cluster.cache`][]) with one constant update per key occurrence, and reads the
counters. Nothing here trains a model:
the rows a cache moves depend only on the keys, the policy, the capacity and the bounds.

Runs (``results/het_cache/<dataset>/``):

* ``miss_rate.csv`` (HET Fig. 8): miss rate for cache sizes 3/5/10/15% x LRU, LFU, LFUOpt;
* ``systems.csv``: embedding rows moved per epoch for PS without cache (ASP), Hybrid without
  cache, and the cache with s = 0 / 10 / 100 (the 88% claim compares Cache s=100 with Hybrid);
* ``bounds.csv``: rows moved and miss rate against the staleness bound;
* ``workers.csv``: rows moved and miss rate against the number of workers (1..32);
* ``summary.json``: the setting (table rows, steps, epochs, samples).

Rows moved per epoch = (rows pulled + rows pushed, over all workers) / epochs; embedding bytes =
rows x D x 4. Miss rate = misses / unique keys over the reads that ended with the cache full
(HET's ``overall_miss_rate``, which leaves out the cold start; empty when the cache never
fills), pooled over workers; ``miss_rate_all_reads`` counts every read, compulsory misses
included.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from workbench.cluster.config import CacheConfig, CachePolicy, ClusterConfig
from workbench.cluster.edge_cluster import EdgeCluster, replay, summarize
from workbench.data.keys import read_keys, table_rows
from workbench.data.schema import DatasetMeta
from workbench.dispatch.base import iter_trace
from workbench.experiments.config import HetCacheConfig
from workbench.experiments.sizing import fitting, require_global_batch

log = logging.getLogger(__name__)
UPDATE = -0.01  # a constant -lr x grad stand-in: values do not affect the counters
VALUE_DIM = 4   # width of the rows actually moved in the replay (bytes use the configured D)


@dataclass
class RunResult:
    """Pooled counters of one replay."""

    rows_pulled: int
    rows_pushed: int
    miss_rate: float
    miss_rate_all: float
    stale_pulls: int
    evict_pushes: int
    keys_read: int

    @property
    def rows_moved(self) -> int:
        """Rows pulled plus rows pushed."""
        return self.rows_pulled + self.rows_pushed


def run_once(trace: np.ndarray | Iterable[np.ndarray], rows: int, policy: CachePolicy,
             ratio: float, read_bound: int, write_bound: int, order: str) -> RunResult:
    """Replay a trace with one cache setting; pool the counters over workers.

    Args:
        trace: ``[steps, W, keys]``, or consecutive windows of it ([`iter_trace`][]) replayed
            one after the other on the same cluster (the same counters as the whole trace).
    """
    windows = [trace] if isinstance(trace, np.ndarray) else trace
    cluster: EdgeCluster | None = None
    for window in windows:
        if cluster is None:
            cluster = EdgeCluster(
                ClusterConfig(workers=window.shape[1]),
                CacheConfig(policy=policy, ratio=ratio if policy != "none" else 1.0,
                            read_bound=read_bound, write_bound=write_bound),
                table_rows=rows, dim=VALUE_DIM)
        replay(cluster, window, update=UPDATE, order=order, record=False)
    if cluster is None:
        raise ValueError("empty trace: nothing to replay")
    totals = cluster.counters().sum(axis=0, keepdims=True)
    (s,) = summarize(totals)
    return RunResult(rows_pulled=int(s["pulled_rows"]), rows_pushed=int(s["pushed_rows"]),
                     miss_rate=float(s["miss_rate"]),
                     miss_rate_all=s["misses"] / max(1, s["unique_read"]),
                     stale_pulls=int(s["stale_pulls"]),
                     evict_pushes=int(s["evict_pushes"]), keys_read=int(s["keys_read"]))


def _epochs_for(samples: int, workers: int, per_worker: int, min_steps: int) -> tuple[int, int]:
    steps = samples // (workers * per_worker)
    if steps == 0:
        raise ValueError(f"{samples} train samples hold no global batch of {workers} x "
                         f"{per_worker}: lower experiments.het_cache.batch_size")
    return steps, max(1, math.ceil(min_steps / steps))


def run_all(keys: np.ndarray, rows: int, cfg: HetCacheConfig, seed: int,
            progress: bool = False, dataset: str = "the dataset"
            ) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
    """Every run of the experiment on per-sample keys ``[n, F]``.

    Raises:
        DatasetTooSmall: the keys hold no global batch of the base setting (the message names
            ``experiments.het_cache.batch_size`` and a value that fits).

    Returns:
        ``({"miss_rate": ..., "systems": ..., "bounds": ..., "workers": ...}, summary)``; worker
        counts whose global batch exceeds the data are left out and listed in
        ``summary["skipped"]``.
    """
    if cfg.max_samples is not None:
        keys = keys[: cfg.max_samples]
    require_global_batch(len(keys), cfg.workers, cfg.batch_size, dataset,
                         "experiments.het_cache.workers", "experiments.het_cache.batch_size")
    skipped: dict[str, list[int]] = {}
    worker_sweep = fitting("experiments.het_cache.worker_sweep", cfg.worker_sweep,
                           lambda w: len(keys) >= w * cfg.batch_size, skipped)

    def trace_for(workers: int) -> tuple[int, int]:
        """``(steps over all epochs, epochs)`` of the trace of ``workers`` workers."""
        steps, epochs = _epochs_for(len(keys), workers, cfg.batch_size, cfg.min_steps)
        return steps * epochs, epochs

    def windows(workers: int) -> Iterable[np.ndarray]:
        return iter_trace(keys, workers, cfg.batch_size, cfg.dispatcher, seed=seed,
                          epochs=trace_for(workers)[1])

    row_bytes = cfg.dim * 4
    jobs: list[tuple[str, dict[str, Any]]] = []
    for ratio in cfg.cache_ratios:
        for policy in cfg.policies:
            jobs.append(("miss_rate", {"policy": policy, "cache_ratio": ratio,
                                       "bound": cfg.miss_rate_bound, "workers": cfg.workers}))
    jobs.append(("systems", {"system": "PS (ASP), no cache", "policy": "none", "bound": 0,
                             "workers": cfg.workers, "cache_ratio": 0.0}))
    jobs.append(("systems", {"system": "Hybrid, no cache", "policy": "none", "bound": 0,
                             "workers": cfg.workers, "cache_ratio": 0.0}))
    for bound in cfg.system_bounds:
        jobs.append(("systems", {"system": f"Cache s={bound}", "policy": cfg.policy,
                                 "bound": bound, "workers": cfg.workers,
                                 "cache_ratio": cfg.cache_ratio}))
    for bound in cfg.bound_sweep:
        jobs.append(("bounds", {"policy": cfg.policy, "bound": bound, "workers": cfg.workers,
                                "cache_ratio": cfg.cache_ratio}))
    for workers in worker_sweep:
        jobs.append(("workers", {"policy": cfg.policy, "bound": cfg.claim_bound,
                                 "workers": workers, "cache_ratio": cfg.cache_ratio}))
    done: dict[tuple, RunResult] = {}
    tables: dict[str, list[dict[str, Any]]] = {k: [] for k in ("miss_rate", "systems", "bounds",
                                                               "workers")}
    for table, job in tqdm(jobs, disable=not progress, desc="het_cache", unit="run"):
        steps, epochs = trace_for(job["workers"])
        key = (job["policy"], job["cache_ratio"], job["bound"], job["workers"])
        if key not in done:  # PS and Hybrid move the same embedding rows: replay once
            done[key] = run_once(windows(job["workers"]), rows, job["policy"],
                                 job["cache_ratio"] or 1.0, job["bound"], job["bound"],
                                 cfg.order)
        r = done[key]
        tables[table].append({
            **job, "epochs": epochs, "steps": int(steps),
            "rows_pulled_per_epoch": r.rows_pulled / epochs,
            "rows_pushed_per_epoch": r.rows_pushed / epochs,
            "rows_moved_per_epoch": r.rows_moved / epochs,
            "embedding_bytes_per_epoch": r.rows_moved * row_bytes / epochs,
            "rows_moved_per_key": r.rows_moved / max(1, r.keys_read),
            "rows_moved_per_sample": r.rows_moved / (steps * job["workers"] * cfg.batch_size),
            "miss_rate": r.miss_rate, "miss_rate_all_reads": r.miss_rate_all,
            "stale_pulls_per_epoch": r.stale_pulls / epochs,
            "dirty_evictions_per_epoch": r.evict_pushes / epochs})
    frames = {k: pd.DataFrame(v) for k, v in tables.items()}
    steps, epochs = trace_for(cfg.workers)
    summary = {"samples": int(len(keys)), "features": int(keys.shape[1]), "table_rows": rows,
               "workers": cfg.workers, "batch_size": cfg.batch_size, "epochs": epochs,
               "steps": int(steps), "dim": cfg.dim, "policy": cfg.policy,
               "cache_ratio": cfg.cache_ratio, "order": cfg.order,
               "dispatcher": cfg.dispatcher, "skipped": skipped}
    return frames, summary


def run(processed: Path, out: Path, cfg: HetCacheConfig, seed: int,
        progress: bool = False) -> None:
    """The ``het_cache`` stage for one dataset: read ``processed``, write ``out`` whole."""
    from workbench.data.pipeline import unavailable_result
    from workbench.utils.io import atomic_dir, write_json

    with atomic_dir(out) as tmp:
        if unavailable_result(processed, tmp / "summary.json"):
            return
        meta = DatasetMeta.read(processed)
        keys = read_keys(processed, meta, max_rows=cfg.max_samples)
        frames, summary = run_all(keys, table_rows(meta), cfg, seed, progress, meta.name)
        for name, frame in frames.items():
            frame.to_csv(tmp / f"{name}.csv", index=False, float_format="%.6g")
        write_json(tmp / "summary.json", {"dataset": meta.name, "available": True, **summary})
        log.info("%s: %d runs over %d samples", meta.name, sum(map(len, frames.values())),
                 summary["samples"])
