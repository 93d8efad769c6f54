r"""HET's replay claims at the paper's setting: one whole Criteo Kaggle epoch at its cardinality.

HET trains on Criteo Kaggle: 33.76M embedding rows, 45,840,617 samples per epoch (44,766
iterations of 8 workers x 128). This stage replays exactly that much traffic: the synthetic
generator's keys (the dataset's skew) at ``exp.scale`` of Criteo Kaggle's cardinalities,
``exp.samples`` samples, drawn once into a memory-mapped file under the data root (deleted at
the end) and read a window at a time by every replay:

    keys [45.8M, 26] (int32, on disk) --+--> Hybrid, no cache   at W in {1, 8}       --+
                                        +--> Cache s=100 (LRU 10%) at W in exp.workers --+
                                        +--> LRU / LFU / LFUOpt at 3-15%, W = 8 (Fig. 8) --+
      each replay: its own process, flushed at the end (dirty rows pushed and counted)   |
                                                                                          v
      counters [iterations, W, counters] --clock--> model x bandwidth x dense placement

Every configuration is replayed in its own process, ``exp.jobs`` side by side, started largest
first while the estimated memory of those running fits ``exp.memory_gb``
([`cluster_gb`][]: the key-major slot table and ~89 bytes per cache line, measured).

What each figure reads (the clock: [`workbench.cluster.time_model.epoch_time`][]):

* **Fig. 7** (``fig7.csv``): per model, bandwidth and dense placement, Hybrid and Cache s=100
  at ``cluster.workers``: ``comm_embedding_s`` (the embedding exchange alone: the clock at zero
  dense bytes, exact because it is additive; the unit of HET's "embedding communication"),
  ``comm_total_s`` (the dense sync added, hidden or not) and ``comm_s`` (not hidden);
  ``fig7_row_cost.csv``: the embedding communication at each per-row software cost of
  ``exp.row_cost_us_sweep``.
* **Fig. 8** (``fig8.csv``): each policy of ``exp.fig8_policies`` at each cache size of
  ``exp.fig8_ratios``, ``cluster.workers`` workers, s = 100 in HET's clock: the miss rate
  (misses / unique keys over the reads that ended with the cache full, HET's
  ``overall_miss_rate``) and the rows moved; the paper's sizes over the paper's whole epoch.
* **Fig. 9a** (``fig9_workers.csv``): Cache s=100 at each worker count, 128 samples per worker
  and iteration (the paper's batch), ``exp.fig9_ps_shards`` servers: samples per second and the
  speedup over one worker, per dense placement.
* **Fig. 2** (``fig2.csv``): one worker, PS without cache, D = ``exp.fig2_dim``, no overlap.
* ``counts.csv``: per configuration the rows pulled and pushed, Cache's pushed rows per pulled
  row, the dirty rows the flush at the end pushed (``dirty_at_end``) and the miss rate.

A dense placement is a dense mode ([`workbench.cluster.dense_sync`][]) and, for
``concurrent``, the link its ring uses (``shared`` NIC or a ``separate`` path): the register's
committed placement is one of them, the others its sweep.

Outputs (``results/het_epoch/<dataset>/``): the CSVs above and ``summary.json``
(deterministic), ``resources.json`` (measured: the draw's and each replay's seconds, each
replay's peak resident memory, the stage's wall time).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from workbench.cluster.cache import C_INDEX
from workbench.cluster.config import CacheConfig, ClusterConfig
from workbench.cluster.construction import resized_cluster
from workbench.cluster.edge_cluster import cache_capacity, summarize
from workbench.cluster.time_model import ComputeCost, SoftwareCost, epoch_time
from workbench.data.config import SyntheticConfig
from workbench.data.synthetic_keys import write_keys
from workbench.experiments.config import HET_CLOCK, HetEpochConfig
from workbench.experiments.context import RunContext
from workbench.models.config import ModelConfig
from workbench.models.ctr import build_model, dense_parameter_count
from workbench.training.clock import ModelShape, clock_costs, clock_summary, replay_epoch
from workbench.training.components import SystemKind
from workbench.utils.fanout import LOCAL, FanoutConfig, fan_out

log = logging.getLogger(__name__)
N_DENSE, N_SPARSE = 13, 26  # the synthetic generator's shape (Criteo's): the calibrated models
HYBRID_LABEL, CACHE_LABEL = "Hybrid, no cache", "Cache s=100"
CACHE_BOUND = 100


@dataclass(frozen=True)
class Replay:
    """One configuration: a system (no cache, or Cache s=100) at ``workers`` workers."""

    system: str
    workers: int
    cache: CacheConfig


@dataclass(frozen=True)
class Placement:
    """Where the dense AllReduce runs: a dense mode and, under ``concurrent``, its ring's link."""

    mode: Literal["after_backward", "overlapped", "ps", "concurrent"]
    link: Literal["shared", "separate"] = "shared"

    @property
    def label(self) -> str:
        """``after_backward`` or ``concurrent/shared``: the name in the CSVs and the register."""
        return f"{self.mode}/{self.link}" if self.mode == "concurrent" else self.mode

    def on(self, cluster: ClusterConfig) -> ClusterConfig:
        """``cluster`` with this placement."""
        return dataclasses.replace(cluster, dense_mode=self.mode, dense_link=self.link)


def placements(exp: HetEpochConfig) -> list[Placement]:
    """The dense placements swept: each mode, and ``concurrent`` on each link."""
    out = []
    for mode in exp.dense_modes:
        out += ([Placement(mode, link) for link in exp.dense_links] if mode == "concurrent"
                else [Placement(mode)])
    return out


def fig8_label(policy: str, ratio: float) -> str:
    """A Fig. 8 configuration's name in ``counts.csv`` (e.g. ``LFU 3%``)."""
    return f"{policy.upper().replace('OPT', 'Opt')} {100 * ratio:g}%"


def fig8_caches(exp: HetEpochConfig, cache: CacheConfig) -> dict[tuple[str, float], CacheConfig]:
    """Fig. 8's caches, (policy, ratio) -> config: s = 100 in HET's clock, ``cache``'s other
    settings."""
    return {(policy, ratio): dataclasses.replace(cache, policy=policy, ratio=ratio,
                                                 read_bound=CACHE_BOUND,
                                                 write_bound=CACHE_BOUND, clock=HET_CLOCK)
            for policy in exp.fig8_policies for ratio in exp.fig8_ratios}


def replays(exp: HetEpochConfig, workers: int, cache: CacheConfig) -> list[Replay]:
    """The configurations: Hybrid at one worker (Fig. 2) and at ``workers`` (Fig. 7), Cache
    s=100 at ``workers`` and at every count of ``exp.workers`` (Fig. 9a), and every Fig. 8
    cache at ``workers`` (Cache s=100's replay where it is the same cache)."""
    cached = dataclasses.replace(cache, read_bound=CACHE_BOUND, write_bound=CACHE_BOUND,
                                 clock=HET_CLOCK)
    out = [Replay(HYBRID_LABEL, w, CacheConfig(policy="none")) for w in sorted({1, workers})]
    out += [Replay(CACHE_LABEL, w, cached) for w in sorted({workers, *exp.workers})]
    return out + [Replay(fig8_label(policy, ratio), workers, config)
                  for (policy, ratio), config in fig8_caches(exp, cache).items()
                  if config != cached]


def cluster_gb(rows: int, workers: int, lines: int) -> float:
    """Resident memory of a replay's cluster (GB): 0.4 GB for the server's rows at width 1 and
    the process, 4 bytes per table row per worker (the key-major slot table) and 89 bytes per
    cache line (its metadata, LRU queue, value and gradient; measured at 33.76M rows: 3.9 GB
    at 8 workers, 14.3 GB at 32)."""
    return 0.4 + workers * (4.0 * rows + 89.0 * max(lines, 1)) / 1e9


def _replay_one(keys_path: str, rows: int, config: Replay, per_worker: int, dispatcher: str,
                seed: int) -> dict[str, Any]:
    """One configuration's epoch, in its own process (the pool's worker)."""
    keys = np.load(keys_path, mmap_mode="r")
    start = time.perf_counter()
    counters, flushed = replay_epoch(keys, rows, config.workers, per_worker, config.cache,
                                     dispatcher, seed, dim=1)
    return {"counters": counters, "flushed": flushed,
            "replay_s": time.perf_counter() - start,
            "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6}


def available_gb() -> float:
    """This machine's available memory (GB), from ``/proc/meminfo`` (else the physical size)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1e6
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9


def run_replays(keys_path: Path, rows: int, configs: list[Replay], per_worker: int,
                dispatcher: str, seed: int, jobs: int, budget_gb: float,
                progress: bool, fanout: FanoutConfig = LOCAL
                ) -> dict[Replay, dict[str, Any]]:
    """Every configuration's epoch, ``jobs`` at a time on ``fanout``'s backend, largest
    first, a new one started only while the estimated memory of those running fits
    ``budget_gb`` ([`fan_out`][workbench.utils.fanout.fan_out]).

    Raises:
        RuntimeError: a configuration alone needs more than ``budget_gb`` (names it and the
            key that sets the budget); not with a scheduler's address, whose workers' memory
            limits apply.
    """
    need = {c: cluster_gb(rows, c.workers, cache_capacity(c.cache, rows)) for c in configs}
    too_big = [c for c in configs if need[c] > budget_gb and fanout.scheduler is None]
    if too_big:
        c = too_big[0]
        raise RuntimeError(
            f"het_epoch: {c.system} at {c.workers} workers needs about {need[c]:.1f} GB, more "
            f"than the memory budget {budget_gb:.1f} GB (experiments.het_epoch.memory_gb; "
            "null = 80% of the available memory): drop it from experiments.het_epoch.workers "
            "or lower experiments.het_epoch.scale")

    def done(i: int, result: dict[str, Any]) -> None:
        c = configs[i]
        log.info("%s at %d workers: replay %.0f s, peak %.1f GB (estimated %.1f)", c.system,
                 c.workers, result["replay_s"], result["peak_rss_gb"], need[c])

    results = fan_out(_replay_one, [(str(keys_path), rows, c, per_worker, dispatcher, seed)
                                    for c in configs],
                      [f"{c.system} at {c.workers} workers" for c in configs], jobs=jobs,
                      config=fanout, need=[need[c] for c in configs], budget_gb=budget_gb,
                      done=done, progress=progress, desc="het_epoch", unit="replay")
    return dict(zip(configs, results, strict=True))


def counts(config: Replay, result: dict[str, Any], per_worker: int) -> dict[str, Any]:
    """The rows a configuration moved, what its flush pushed and its miss rate
    ([`summarize`][workbench.cluster.edge_cluster.summarize] of the epoch's counters)."""
    counters, flushed = result["counters"], result["flushed"]
    epoch = summarize(counters.sum(axis=(0, 1)))[0]
    pulled, pushed = int(epoch["pulled_rows"]), int(epoch["pushed_rows"])
    dirty = int(flushed[:, C_INDEX["flush_pushes"]].sum())
    return {"system": config.system, "workers": config.workers,
            "iterations": int(counters.shape[0]),
            "samples": int(counters.shape[0] * config.workers * per_worker),
            "pulled_rows": pulled, "pushed_rows": pushed, "rows_moved": pulled + pushed,
            "pushed_per_pulled": pushed / max(1, pulled), "dirty_at_end": dirty,
            "rows_moved_flushed": pulled + pushed + dirty, "miss_rate": epoch["miss_rate"]}


def run(ctx: RunContext, exp: HetEpochConfig, *, synthetic: SyntheticConfig,
        models: dict[str, ModelConfig], base_model: str, per_worker: int,
        cluster: ClusterConfig, cache: CacheConfig, dispatcher: str, keys_dir: Path) -> None:
    """The ``het_epoch`` stage; writes ``ctx.out`` whole (see the module docstring).

    Args:
        ctx: where it writes, the seed, the clock's calibration, progress bars.
        exp: the epoch, worker counts, models, bandwidths, placements, jobs and memory budget.
        synthetic: the generator settings of the dataset whose skew is replayed.
        models: every configured model (Fig. 7 clocks ``exp.models``).
        base_model: the model of the scaling study (Fig. 9a: HET's training model).
        per_worker: samples per worker per iteration (HET's batch, 128).
        cluster: the workers of Fig. 7 and the clock's settings.
        cache: the cache policy and ratio of Cache s=100 (its bound is 100 in
            [`HET_CLOCK`][workbench.experiments.config.HET_CLOCK]'s unit).
        dispatcher: the baseline dispatch of every global batch.
        keys_dir: the folder (under the data root) of the epoch's key file while it runs.
    """
    from workbench.utils.io import atomic_dir, write_json

    cluster.require_emulated("het_epoch")
    began = time.perf_counter()
    configs = replays(exp, cluster.workers, cache)
    keys_dir.mkdir(parents=True, exist_ok=True)
    keys_path = keys_dir / f"het_epoch-{ctx.seed}-{os.getpid()}.npy"
    try:
        start = time.perf_counter()
        rows = write_keys(keys_path, synthetic, exp.scale, exp.samples, ctx.seed,
                          exp.chunk_rows, ctx.progress)
        drawn = time.perf_counter() - start
        log.info("het_epoch: %s samples' keys over %s rows drawn in %.0f s", f"{exp.samples:,}",
                 f"{rows:,}", drawn)
        budget = exp.memory_gb if exp.memory_gb is not None else 0.8 * available_gb()
        results = run_replays(keys_path, rows, configs, per_worker, dispatcher, ctx.seed,
                              exp.jobs, budget, ctx.progress, ctx.fanout)
    finally:
        keys_path.unlink(missing_ok=True)
    by = {(c.system, c.workers): results[c] for c in configs}
    count_table = pd.DataFrame([counts(c, results[c], per_worker) for c in configs])
    if (count_table["rows_moved"] == 0).any():
        raise RuntimeError("het_epoch: a replay moved no rows")

    clocks: dict[str, dict[str, Any]] = {}

    def model_cost(name: str, dim: int | None = None, on: ClusterConfig = cluster
                   ) -> tuple[ComputeCost, SoftwareCost, float, int]:
        mcfg = models[name] if dim is None else dataclasses.replace(models[name],
                                                                    embedding_dim=dim)
        compute, software = clock_costs(on, ctx.calibration,
                                        ModelShape(name, mcfg, N_DENSE, N_SPARSE))
        clocks[f"{name}/D{mcfg.embedding_dim}"] = clock_summary(on, compute, software)
        dense = 4.0 * dense_parameter_count(build_model(mcfg, N_DENSE, N_SPARSE))
        return compute, software, dense, mcfg.embedding_dim

    def embedding_s(system: str, workers: int, on: ClusterConfig, cost: tuple, routes: Any
                    ) -> float:
        """The epoch's embedding communication alone: its clock at zero dense bytes."""
        compute, software, _, dim = cost
        return epoch_time(by[(system, workers)]["counters"], on, dim, compute, software,
                          per_worker, 0.0, routes)["comm_total_s"]

    def clocked(system: str, workers: int, on: ClusterConfig, cost: tuple, routes: Any
                ) -> dict[str, float]:
        compute, software, dense, dim = cost
        t = epoch_time(by[(system, workers)]["counters"], on, dim, compute, software,
                       per_worker, dense, routes)
        return {**t, "comm_embedding_s": embedding_s(system, workers, on, cost, routes)}

    systems = ((HYBRID_LABEL, SystemKind.HYBRID.routes), (CACHE_LABEL, SystemKind.CACHE.routes))
    fig7, row_cost, fig9, fig2 = [], [], [], []
    for model in exp.models:
        cost = model_cost(model)
        for bw in exp.bandwidths_gbps:
            at = resized_cluster(cluster, bandwidth=bw)
            for place in placements(exp):
                for label, routes in systems:
                    fig7.append({"model": model, "bandwidth_gbps": bw,
                                 "dense_placement": place.label, "system": label,
                                 **clocked(label, cluster.workers, place.on(at), cost, routes)})
            for row_us in exp.row_cost_us_sweep:
                swept = dataclasses.replace(cost[1], client_row_s=row_us * 1e-6,
                                            server_row_s=row_us * 1e-6,
                                            source=f"{row_us:g} us per row (swept)")
                for label, routes in systems:
                    row_cost.append({"model": model, "row_us": row_us, "bandwidth_gbps": bw,
                                     "system": label, "comm_embedding_s": embedding_s(
                                         label, cluster.workers, at,
                                         (cost[0], swept, *cost[2:]), routes)})
        fig2_cluster = dataclasses.replace(resized_cluster(cluster, workers=1, bandwidth=1.0),
                                           overlap="none")
        t = clocked(HYBRID_LABEL, 1, fig2_cluster, model_cost(model, exp.fig2_dim,
                                                             fig2_cluster),
                    SystemKind.PS.routes)
        fig2.append({"model": model, "dim": exp.fig2_dim, **t,
                     "comm_share": t["comm_s"] / t["epoch_s"]})
    base = model_cost(base_model)
    for place in placements(exp):
        for workers in sorted(exp.workers):
            on = place.on(resized_cluster(cluster, workers=workers,
                                          ps_shards=exp.fig9_ps_shards))
            t = clocked(CACHE_LABEL, workers, on, base, SystemKind.CACHE.routes)
            samples = by[(CACHE_LABEL, workers)]["counters"].shape[0] * workers * per_worker
            fig9.append({"model": base_model, "dense_placement": place.label,
                         "workers": workers, "system": CACHE_LABEL, **t, "samples": samples,
                         "samples_per_s": samples / t["epoch_s"]})
    cached = {c.cache: c for c in configs if c.workers == cluster.workers}
    fig8 = pd.DataFrame([{"policy": policy, "cache_ratio": ratio,
                          **counts(cached[config], results[cached[config]], per_worker)}
                         for (policy, ratio), config in fig8_caches(exp, cache).items()])
    fig9w = pd.DataFrame(fig9)
    one = fig9w[fig9w["workers"] == min(exp.workers)].set_index("dense_placement")
    fig9w["speedup"] = fig9w["samples_per_s"] / fig9w["dense_placement"].map(
        one["samples_per_s"]).to_numpy()
    summary = {"dataset_skew": {"top1_share": synthetic.top1_share}, "scale": exp.scale,
               "table_rows": rows, "samples": exp.samples, "per_worker_batch": per_worker,
               "workers": cluster.workers, "fig9_workers": sorted(exp.workers),
               "fig9_ps_shards": exp.fig9_ps_shards, "fig9_model": base_model,
               "cluster": cluster.name, "overlap": cluster.overlap,
               "cache_policy": cache.policy, "cache_ratio": cache.ratio,
               "cache_clock": HET_CLOCK, "cache_bound": CACHE_BOUND,
               "dense_placements": [p.label for p in placements(exp)],
               "bandwidths_gbps": list(exp.bandwidths_gbps), "clock": clocks,
               "fig8": {"policies": list(exp.fig8_policies),
                        "ratios": list(exp.fig8_ratios), "workers": cluster.workers,
                        "bound": CACHE_BOUND, "clock": HET_CLOCK}}
    resources = {"draw_s": drawn, "jobs": exp.jobs, "budget_gb": budget,
                 "replays": [{"system": c.system, "workers": c.workers,
                              "replay_s": results[c]["replay_s"],
                              "peak_rss_gb": results[c]["peak_rss_gb"],
                              "estimated_gb": cluster_gb(rows, c.workers,
                                                         cache_capacity(c.cache, rows))}
                             for c in configs],
                 "stage_s": time.perf_counter() - began}
    with atomic_dir(ctx.out) as tmp:
        for name, table in (("counts", count_table), ("fig7", pd.DataFrame(fig7)),
                            ("fig8", fig8),
                            ("fig7_row_cost", pd.DataFrame(row_cost)), ("fig9_workers", fig9w),
                            ("fig2", pd.DataFrame(fig2))):
            table.to_csv(tmp / f"{name}.csv", index=False, float_format="%.6g")
        write_json(tmp / "summary.json", summary)
        write_json(tmp / "resources.json", resources)
