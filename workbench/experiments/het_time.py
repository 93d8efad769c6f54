"""HET time figures from replayed traffic and the calibrated clock (time model only).

The bytes a system moves depend on the key trace, the cache and the bounds, not on the model or
the link speed; so each system's trace is replayed once through the cluster with per-iteration
records, and [`workbench.cluster.time_model`][] turns the recorded counters into seconds for
any model (dense bytes, calibrated compute), bandwidth and embedding width. The clock has what
makes 10 Gb/s more than a rescaled 1 Gb/s: a per-message and per-row software cost measured on
this machine and link latencies (neither shrinks with bandwidth), and, under
``cluster.overlap = prefetch``, communication hidden behind compute (so once a system's
communication is shorter than its compute, faster links stop paying):

* **Fig. 2**: share of epoch time spent communicating, one worker with embeddings on a remote
  PS (no cache, dense on the PS), D = ``fig2_dim``, per model, 1 Gb/s, no overlap (HET
  measured TensorFlow's PS, which fetches a batch's embeddings before computing it);
* **Fig. 7**: per-epoch time split into compute and communication for PS, Hybrid, AllReduce,
  Cache s=10 and s=100, per model, at each bandwidth; with the communication-time speedup of
  Cache s=100 over each system;
* **Fig. 9a**: speedup (samples/s relative to one worker) against 1..32 workers;
* **Fig. 9c**: per-epoch time against the embedding width D = 128..4096 (a table of
  rows x 4096 floats does not fit a laptop, so this panel is the time model only).

Fig. 7 and Fig. 9a are computed in every dense synchronisation mode of ``exp.dense_modes``
(column ``dense_mode``; [`workbench.cluster.dense_sync`][]): the cluster's own
(``cluster.dense_mode``) is what the figures and claims use, the others are shown beside it.
Fig. 2 (HET's PS system: dense on the PS) and Fig. 9c use the cluster's mode only.
``fig7_row_cost.csv`` has Hybrid and Cache s=100 of Fig. 7 again with the per-row software cost
(client and server each) at every value of ``exp.row_cost_us_sweep`` instead of the calibrated
one: a per-key cost does not shrink with bandwidth, so it decides how much of the cache's gain
survives at 10 Gb/s (Fig. 7b's shape).

Every row has ``epoch_s`` (the emulated epoch), ``compute_s`` (the slowest worker's compute,
summed), ``comm_s`` (= epoch - compute: the communication NOT hidden, what a stacked bar shows)
``comm_total_s`` (the slowest worker's communication plus the whole AllReduce, hidden or not:
what "communication time" means in the speedup labels) and ``dense_exposed_s`` (the part of the
AllReduce the steps saw).

Outputs (``results/het_time/<dataset>/``): ``fig2.csv``, ``fig7.csv``, ``fig9_workers.csv``,
``fig9_dim.csv``, ``summary.json`` (with the clock's calibrated costs per model and width).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import numpy as np
import pandas as pd

from workbench.cluster.config import CacheConfig, ClusterConfig
from workbench.cluster.construction import resized_cluster
from workbench.cluster.time_model import ComputeCost, SoftwareCost, epoch_time
from workbench.data.keys import read_keys, table_rows
from workbench.data.schema import DatasetMeta
from workbench.experiments.config import HET_CLOCK, HetTimeConfig
from workbench.experiments.context import RunContext
from workbench.experiments.sizing import fitting, require_global_batch
from workbench.models.config import ModelConfig
from workbench.models.ctr import build_model, dense_parameter_count
from workbench.training.clock import ModelShape, clock_costs, clock_summary, replay_counters
from workbench.training.components import SystemKind

log = logging.getLogger(__name__)
#: HET's systems: (label, cache bound or None for no cache, kind: how it synchronises).
SYSTEMS = (("PS (ASP), no cache", None, SystemKind.PS),
           ("Hybrid, no cache", None, SystemKind.HYBRID),
           ("AllReduce (sparse AllGather)", None, SystemKind.ALLREDUCE),
           ("Cache s=10", 10, SystemKind.CACHE),
           ("Cache s=100", 100, SystemKind.CACHE))


def run(ctx: RunContext, exp: HetTimeConfig, *, per_worker: int,
        models: dict[str, ModelConfig], base_model: str, cluster: ClusterConfig,
        cache: CacheConfig, dispatcher: str) -> None:
    """The ``het_time`` stage: replays + time model; writes ``out`` whole.

    Args:
        ctx: where it reads and writes, the seed, the clock's calibration, progress bars.
        exp: the experiment's settings.
        per_worker: samples per worker per iteration (the HET cache experiments' batch).
        models: every configured model (Fig. 2 and 7 use ``exp.models``).
        base_model: the model of the scaling study (Fig. 9: HET's training model).
        cluster: the emulated cluster of the base setting.
        cache: the cache policy and size of the cache systems (their bound is the system's).
        dispatcher: the baseline dispatch of every global batch.
    """
    processed, out, seed, calibration, progress = (ctx.processed, ctx.out, ctx.seed,
                                                   ctx.calibration, ctx.progress)
    from tqdm.auto import tqdm
    cluster.require_emulated("het_time")

    from workbench.utils.io import atomic_dir, write_json

    meta = DatasetMeta.read(processed)
    keys = read_keys(processed, meta, max_rows=exp.max_samples)
    rows = table_rows(meta)
    require_global_batch(len(keys), cluster.workers, per_worker, meta.name, "cluster.workers",
                         "experiments.het_cache.batch_size")
    skipped: dict[str, list[int]] = {}
    worker_sweep = fitting("experiments.het_time.worker_sweep", exp.worker_sweep,
                           lambda w: len(keys) >= w * per_worker, skipped)
    n_dense, n_sparse = len(meta.dense), len(meta.categorical)

    clocks: dict[str, dict[str, Any]] = {}

    def model_cost(name: str, dim: int | None = None,
                   on: ClusterConfig = cluster) -> tuple[ComputeCost, SoftwareCost, float]:
        """The clock's compute and software costs of model ``name`` at width ``dim``, and its
        dense bytes."""
        mcfg = models[name] if dim is None else dataclasses.replace(models[name],
                                                                    embedding_dim=dim)
        compute, software = clock_costs(on, calibration, ModelShape(name, mcfg, n_dense,
                                                                    n_sparse))
        clocks[f"{name}/D{mcfg.embedding_dim}"] = clock_summary(on, compute, software)
        return compute, software, 4.0 * dense_parameter_count(build_model(mcfg, n_dense,
                                                                          n_sparse))

    replays: dict[tuple[Any, int], np.ndarray] = {}

    def counters(bound: int | None, workers: int) -> np.ndarray:
        if (bound, workers) not in replays:
            system_cache = (CacheConfig(policy="none") if bound is None else
                            dataclasses.replace(cache, read_bound=bound, write_bound=bound,
                                                    clock=HET_CLOCK))
            replays[(bound, workers)] = replay_counters(keys, rows, workers, per_worker,
                                                        system_cache, dispatcher, seed)
        return replays[(bound, workers)]

    fig7, fig2, fig9w, fig9d, row_cost = [], [], [], [], []
    modes = [cluster.dense_mode] + [m for m in exp.dense_modes if m != cluster.dense_mode]
    jobs = len(exp.models) * (len(exp.bandwidths_gbps) * (len(SYSTEMS) * len(modes)
                                                         + 2 * len(exp.row_cost_us_sweep)) + 1) + \
        len(worker_sweep) * 3 * len(modes) + len(exp.dim_sweep) * 3
    bar = tqdm(total=jobs, disable=not progress, desc="het_time", unit="point")
    fig2_cluster = dataclasses.replace(resized_cluster(cluster, workers=1, bandwidth=1.0),
                                       overlap="none")
    for model in exp.models:
        compute, software, dense_bytes = model_cost(model)
        dim = models[model].embedding_dim
        for mode in modes:
            for bw in exp.bandwidths_gbps:
                for label, bound, kind in SYSTEMS:
                    t = epoch_time(counters(bound, cluster.workers),
                                   resized_cluster(cluster, bandwidth=bw, dense_mode=mode), dim,
                                   compute, software, per_worker, dense_bytes, kind.routes)
                    fig7.append({"model": model, "dense_mode": mode, "bandwidth_gbps": bw,
                                 "system": label, **t})
                    bar.update()
        for row_us in exp.row_cost_us_sweep:  # Fig. 7b's sensitivity to a per-key cost
            swept = dataclasses.replace(software, client_row_s=row_us * 1e-6,
                                        server_row_s=row_us * 1e-6,
                                        source=f"{row_us:g} us per row (swept)")
            for bw in exp.bandwidths_gbps:
                for label, bound, kind in (SYSTEMS[1], SYSTEMS[4]):
                    t = epoch_time(counters(bound, cluster.workers),
                                   resized_cluster(cluster, bandwidth=bw), dim, compute, swept,
                                   per_worker, dense_bytes, kind.routes)
                    row_cost.append({"model": model, "row_us": row_us, "bandwidth_gbps": bw,
                                     "system": label, **t})
                    bar.update()
        f2_compute, f2_software, f2_dense = model_cost(model, exp.fig2_dim, fig2_cluster)
        t = epoch_time(counters(None, 1), fig2_cluster, exp.fig2_dim, f2_compute, f2_software,
                       per_worker, f2_dense, SystemKind.PS.routes)
        fig2.append({"model": model, "dim": exp.fig2_dim, **t,
                     "comm_share": t["comm_s"] / t["epoch_s"]})
        bar.update()
    compute, software, dense_bytes = model_cost(base_model)
    dim = models[base_model].embedding_dim
    for mode in modes:
        for workers in worker_sweep:
            for label, bound, kind in (SYSTEMS[0], SYSTEMS[1], SYSTEMS[4]):
                t = epoch_time(counters(bound, workers),
                               resized_cluster(cluster, workers=workers,
                                               ps_shards=exp.fig9_ps_shards, dense_mode=mode),
                               dim, compute, software, per_worker, dense_bytes, kind.routes)
                samples = counters(bound, workers).shape[0] * workers * per_worker
                fig9w.append({"model": base_model, "dense_mode": mode, "workers": workers,
                              "system": label, **t, "samples": samples,
                              "samples_per_s": samples / t["epoch_s"]})
                bar.update()
    for d in exp.dim_sweep:
        d_compute, d_software, d_dense = model_cost(base_model, d)
        for label, bound, kind in (SYSTEMS[0], SYSTEMS[1], SYSTEMS[4]):
            t = epoch_time(counters(bound, cluster.workers),
                           resized_cluster(cluster, ps_shards=exp.fig9_ps_shards), d, d_compute,
                           d_software, per_worker, d_dense, kind.routes)
            fig9d.append({"model": base_model, "dim": d, "system": label, **t})
            bar.update()
    bar.close()
    fig9w = pd.DataFrame(fig9w)
    one = fig9w[fig9w["workers"] == min(worker_sweep)].set_index(
        ["dense_mode", "system"])["samples_per_s"]
    fig9w["speedup"] = fig9w["samples_per_s"] / pd.Series(
        list(zip(fig9w["dense_mode"], fig9w["system"]))).map(one).to_numpy()
    summary = {"dataset": meta.name, "samples": int(len(keys)), "table_rows": rows,
               "per_worker_batch": per_worker, "workers": cluster.workers,
               "cluster": cluster.name, "overlap": cluster.overlap,
               "dense_mode": cluster.dense_mode, "dense_modes": modes,
               "dense_sync": cluster.dense_sync().describe(),
               "cache_policy": cache.policy, "cache_ratio": cache.ratio,
               "cache_clock": HET_CLOCK, "fig2_overlap": "none",
               "fig9_model": base_model, "fig9_ps_shards": exp.fig9_ps_shards,
               "skipped": skipped, "clock": clocks}
    with atomic_dir(out) as tmp:
        for name, table in (("fig2", pd.DataFrame(fig2)), ("fig7", pd.DataFrame(fig7)),
                            ("fig7_row_cost", pd.DataFrame(row_cost)),
                            ("fig9_workers", fig9w), ("fig9_dim", pd.DataFrame(fig9d))):
            table.to_csv(tmp / f"{name}.csv", index=False, float_format="%.6g")
        write_json(tmp / "summary.json", summary)
