r"""HET's replays against the table size: Criteo Kaggle's shape at fractions of its cardinality.

The HET stages replay the pipeline's dataset, whose tables are 1% of Criteo Kaggle's 33.8M rows
(the synthetic default). How the cache's gain depends on that scale is measured here: the
synthetic generator's keys alone ([`keys`][workbench.data.synthetic.SyntheticGenerator.keys], the
same skew as the dataset, no labels) at each fraction of ``exp.scales`` of Criteo Kaggle's
cardinalities, ``exp.samples`` samples each (the same at every scale), replayed through the
emulated cluster by Hybrid (no cache: every key pulled and pushed every iteration) and Cache
s = 100 (the cluster's cache policy and ratio):

    scale -> key trace [samples, 26] -> replay (Hybrid, Cache s=100) -> counters per iteration
                                                                     -> clock at each bandwidth

Per scale and system: rows pulled and pushed (the clock's embedding traffic, independent of the
model and of time), Cache's pushed rows per pulled row (how far its write-back has got: a short
replay defers most writes), the dirty rows a flush at the end would push (``dirty_at_end``:
counted, not charged to the clock) and the rows moved with them, and, on the cluster's clock
at each of ``exp.bandwidths_gbps`` (Fig. 7's 1 and 10 Gb/s), the epoch, its communication
time (hidden or not, as Fig. 7's labels) and its embedding communication alone (the clock at zero
dense bytes: the unit of HET's claim). The ratios Hybrid / Cache s=100 are the figure.

Outputs (``results/het_scale/<dataset>/``): ``table_size.csv`` (deterministic),
``resources.json`` (measured: each scale's replay seconds and the process's peak resident
memory after it, scales in ascending order so that the last is the largest's), ``summary.json``.
"""

from __future__ import annotations

import dataclasses
import logging
import resource
import time
from typing import Any

import pandas as pd

from workbench.cluster.cache import C_INDEX
from workbench.cluster.config import CacheConfig, ClusterConfig
from workbench.cluster.construction import resized_cluster
from workbench.cluster.edge_cluster import summarize
from workbench.cluster.routes import HYBRID
from workbench.cluster.time_model import epoch_time
from workbench.data.config import SyntheticConfig
from workbench.data.synthetic_keys import draw_keys
from workbench.experiments.config import HET_CLOCK, HetScaleConfig
from workbench.experiments.context import RunContext
from workbench.models.config import ModelConfig
from workbench.models.ctr import build_model, dense_parameter_count
from workbench.training.clock import ModelShape, clock_costs, clock_summary, replay_epoch

log = logging.getLogger(__name__)
N_DENSE = 13  # the synthetic generator's shape (Criteo's): the clock's calibrated model
#: The systems compared: (label, cache bound or None for no cache).
SYSTEMS = (("Hybrid, no cache", None), ("Cache s=100", 100))


def run(ctx: RunContext, exp: HetScaleConfig, *, synthetic: SyntheticConfig, model_name: str,
        model: ModelConfig, per_worker: int, cluster: ClusterConfig, cache: CacheConfig,
        dispatcher: str) -> None:
    """The ``het_scale`` stage; writes ``ctx.out`` whole (see the module docstring).

    Args:
        ctx: where it writes, the seed, the clock's calibration, progress bars.
        exp: the scales, samples and bandwidths.
        synthetic: the generator settings of the dataset whose skew is replayed.
        model_name: the model timed (HET's training model: its calibrated compute, its dense
            bytes).
        model: its config.
        per_worker: samples per worker per iteration (the HET cache experiments' batch).
        cluster: the workers, the clock's settings and dense mode.
        cache: the cache policy and ratio of Cache s=100.
        dispatcher: the baseline dispatch of every global batch.
    """
    from tqdm.auto import tqdm

    from workbench.utils.io import atomic_dir, write_json

    cluster.require_emulated("het_scale")
    compute, software = clock_costs(cluster, ctx.calibration,
                                    ModelShape(model_name, model, N_DENSE, 26))
    dense_bytes = 4.0 * dense_parameter_count(build_model(model, N_DENSE, 26))
    dim = model.embedding_dim
    rows_out: list[dict[str, Any]] = []
    resources: list[dict[str, Any]] = []
    bar = tqdm(total=len(exp.scales) * len(SYSTEMS), disable=not ctx.progress,
               desc="het_scale", unit="replay")
    for scale in sorted(exp.scales):
        start = time.perf_counter()
        keys, rows = draw_keys(synthetic, scale, exp.samples, ctx.seed, exp.chunk_rows)
        drawn = time.perf_counter() - start
        for label, bound in SYSTEMS:
            system_cache = (CacheConfig(policy="none") if bound is None else
                            dataclasses.replace(cache, read_bound=bound, write_bound=bound,
                                                    clock=HET_CLOCK))
            begin = time.perf_counter()
            counters, flushed = replay_epoch(keys, rows, cluster.workers, per_worker,
                                             system_cache, dispatcher, ctx.seed)
            replayed = time.perf_counter() - begin
            epoch = summarize(counters.sum(axis=(0, 1)))[0]
            pulled, pushed = int(epoch["pulled_rows"]), int(epoch["pushed_rows"])
            dirty = int(flushed[:, C_INDEX["flush_pushes"]].sum())
            row: dict[str, Any] = {
                "scale": scale, "table_rows": rows, "samples": int(len(keys)),
                "system": label, "pulled_rows": pulled, "pushed_rows": pushed,
                "rows_moved": pulled + pushed, "pushed_per_pulled": pushed / max(1, pulled),
                "dirty_at_end": dirty, "rows_moved_flushed": pulled + pushed + dirty}
            for bw in exp.bandwidths_gbps:
                on = resized_cluster(cluster, bandwidth=bw)
                t = epoch_time(counters, on, dim, compute, software, per_worker, dense_bytes,
                               HYBRID)
                row[f"epoch_s_{bw:g}g"] = t["epoch_s"]
                row[f"comm_total_s_{bw:g}g"] = t["comm_total_s"]
                row[f"comm_embedding_s_{bw:g}g"] = epoch_time(
                    counters, on, dim, compute, software, per_worker, 0.0, HYBRID)["comm_total_s"]
            rows_out.append(row)
            resources.append({"scale": scale, "system": label, "draw_s": drawn,
                              "replay_s": replayed, "key_reads": int(keys.size),
                              "key_reads_per_s": keys.size / replayed,
                              "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                              / 1e6})
            log.info("scale %g (%s rows), %s: %s rows moved, replay %.1f s, peak %.1f GB", scale,
                     f"{rows:,}", label, f"{row['rows_moved']:,}", replayed,
                     resources[-1]["peak_rss_gb"])
            bar.update()
        del keys
    bar.close()
    table = pd.DataFrame(rows_out)
    if table.empty or (table["rows_moved"] == 0).any():
        raise RuntimeError("het_scale: a replay moved no rows")
    wide = table.pivot_table(index=["scale", "table_rows"], columns="system",
                             values=["rows_moved", "rows_moved_flushed", "pushed_per_pulled"]
                             + [f"comm_{kind}_s_{bw:g}g" for bw in exp.bandwidths_gbps
                                for kind in ("total", "embedding")])
    ratios = pd.DataFrame({
        "rows_moved": wide["rows_moved"]["Hybrid, no cache"] / wide["rows_moved"]["Cache s=100"],
        "rows_moved_flushed": wide["rows_moved_flushed"]["Hybrid, no cache"]
        / wide["rows_moved_flushed"]["Cache s=100"],
        "cache_pushed_per_pulled": wide["pushed_per_pulled"]["Cache s=100"]})
    for bw in exp.bandwidths_gbps:
        for kind, name in (("total", f"comm_{bw:g}g"), ("embedding", f"comm_embedding_{bw:g}g")):
            col = f"comm_{kind}_s_{bw:g}g"
            ratios[name] = wide[col]["Hybrid, no cache"] / wide[col]["Cache s=100"]
    summary = {"dataset_skew": {"top1_share": synthetic.top1_share},
               "scales": sorted(exp.scales), "samples": exp.samples, "model": model_name,
               "workers": cluster.workers, "per_worker_batch": per_worker,
               "cache_policy": cache.policy, "cache_ratio": cache.ratio,
               "dense_mode": cluster.dense_mode, "bandwidths_gbps": list(exp.bandwidths_gbps),
               "clock": clock_summary(cluster, compute, software),
               "ratios": [{"scale": s, "table_rows": int(r), **v}
                          for (s, r), v in ratios.to_dict("index").items()]}
    with atomic_dir(ctx.out) as tmp:
        table.to_csv(tmp / "table_size.csv", index=False, float_format="%.6g")
        write_json(tmp / "resources.json", {"runs": resources})
        write_json(tmp / "summary.json", summary)
