"""Benchmark: which ESD cost model ranks dispatch plans the way the cluster realises them.

On the ESD base setting (``params.yaml``: ``experiments.esd``; the preprocessed dataset must
exist, e.g. after ``make repro``) the caches are warmed to steady state, then for each of
``--batches`` batches three plans are made on the *same* cache state:

* ``dedup_heuristic``: regret + swap on the deduplicated model (a shared key paid once);
* ``additive_heuristic``: regret + swap on the additive model (each sample pays its keys);
* ``additive_optimum``: the transportation optimum of the additive model.

Each plan is realised on a copy of the cluster (one batch of reads and writes); the record
holds each plan's predicted costs under both models and its realised transfer seconds, pulled
and pushed rows. The state then advances with the additive optimum's plan. This is the evidence
behind ``exact_mode: additive`` as the default model of every ESD solver.

Usage: python benchmarks/esd_objective_ranking.py [--params params.yaml] [--batches 15]
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np

from workbench.cluster.edge_cluster import EdgeCluster
from workbench.config import load
from workbench.data.keys import sample_keys, table_rows
from workbench.data.pipeline import processed_dir
from workbench.data.preprocess import read_split
from workbench.data.schema import DatasetMeta
from workbench.dispatch.exact import solve_transport
from workbench.dispatch.heuristic import regret_swap
from workbench.dispatch.objective import (
    additive_cost,
    additive_matrix,
    dedup_cost,
    private_keys,
)
from workbench.dispatch.registry import make_dispatcher
from workbench.experiments.esd import (
    edge_cluster,
    edge_cluster_config,
    warm_up,
    worker_capacities,
)
from workbench.utils.io import write_json
from workbench.utils.timing import bench_parser


def replay(cluster: EdgeCluster, batch: np.ndarray, x: np.ndarray) -> dict:
    """One batch of reads then writes by plan ``x``; the iteration's record."""
    for w in range(cluster.workers):
        cluster.read(w, batch[x == w].ravel(), want_values=False)
    for w in range(cluster.workers):
        cluster.write(w, batch[x == w].ravel(), -0.01)
    return cluster.end_iteration()


def main() -> None:
    parser = bench_parser(__file__, __doc__)
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--batches", type=int, default=15)
    args = parser.parse_args()
    cfg = load(params=args.params)
    exp = cfg.experiments.esd
    processed = processed_dir(cfg.paths.resolve("data"), exp.dataset)
    meta = DatasetMeta.read(processed)
    keys = sample_keys(read_split(processed, "train", columns=meta.categorical), meta)
    wire = cfg.models[exp.train_model].embedding_dim
    links = edge_cluster_config(exp, exp.workers, exp.bandwidth_spread)
    cluster = edge_cluster(exp, links, table_rows(meta), exp.cache_ratio, wire)
    caps = worker_capacities(links, exp.per_worker, "equal")
    disp = make_dispatcher("esd_exact", cluster, caps, wire_dim=wire)
    warm, steady, _ = warm_up(cluster, keys, disp, exp, wire)
    n = int(caps.sum())
    tau = wire * 4 / cluster.links.bandwidth_Bps
    plans = ("dedup_heuristic", "additive_heuristic", "additive_optimum")
    records = []
    for t in range(warm, warm + args.batches):
        batch = keys[np.arange(t * n, (t + 1) * n) % len(keys)]
        A, indptr, indices = disp.cost_model.batch(batch)
        C = additive_matrix(A, indptr, indices)
        x = {"dedup_heuristic": regret_swap(A, indptr, indices, caps, 1).assignment,
             "additive_heuristic": regret_swap(*private_keys(C), caps, 1).assignment,
             "additive_optimum": solve_transport(C, caps).assignment}
        row = {"batch": t}
        for name in plans:
            rec = replay(copy.deepcopy(cluster), batch, x[name])
            row[name] = {"dedup_cost": dedup_cost(A, indptr, indices, x[name]),
                         "additive_cost": additive_cost(C, x[name]),
                         "realised_s": float(((rec["pulled_rows"] + rec["pushed_rows"])
                                              * tau).sum()),
                         "pulled_rows": int(rec["pulled_rows"].sum()),
                         "pushed_rows": int(rec["pushed_rows"].sum())}
        records.append(row)
        replay(cluster, batch, x["additive_optimum"])
    mean = {name: {k: float(np.mean([r[name][k] for r in records]))
                   for k in records[0][name]} for name in plans}
    agree = {model: int(sum(
        (r["dedup_heuristic"][model] < r["additive_optimum"][model])
        == (r["dedup_heuristic"]["realised_s"] < r["additive_optimum"]["realised_s"])
        for r in records)) for model in ("dedup_cost", "additive_cost")}
    for name in plans:
        m = mean[name]
        print(f"{name:19s} predicted dedup {m['dedup_cost']:.4g}, additive "
              f"{m['additive_cost']:.4g}; realised {m['realised_s']:.5f} s/batch "
              f"({m['pulled_rows']:.0f} pulled, {m['pushed_rows']:.0f} pushed rows)")
    print(f"ranking dedup heuristic vs additive optimum as realised, of {len(records)} "
          f"batches: dedup model {agree['dedup_cost']}, additive model {agree['additive_cost']}")
    write_json(args.out, {"benchmark": "esd_objective_ranking", "dataset": exp.dataset,
                          "warmup_batches": warm, "steady": steady, "mean": mean,
                          "ranking_agrees_with_realised": agree, "batches": records})


if __name__ == "__main__":
    main()
