"""Benchmark: up to which batch size the deduplicated ILP (``esd_exact``, ``exact_mode: dedup``)
is exact within its time limit, on this machine.

Instances as ``dispatch_throughput.py``'s own workload: Zipf(1.05) keys over 26 tables (1M rows), 8
workers (4 for the smallest) with links 0.1..1 Gb/s and 10% LRU caches warmed by random dispatch;
the cost model prices every (worker, key). For each batch size: whether HiGHS proved optimality
within ``--time-limit``, the wall time against the limit (model build included), the plan returned
(``dedup-milp`` or a named fallback) and its dedup cost against the regret + swap heuristic and the
additive (transportation) optimum.

Usage: python benchmarks/dedup_ilp.py [--time-limit 1.0] [--out ...json]
"""

from __future__ import annotations

import platform

import numpy as np

from workbench.cluster.config import CacheConfig, ClusterConfig
from workbench.cluster.edge_cluster import EdgeCluster
from workbench.dispatch.base import RandomPermutation
from workbench.dispatch.cost_model import CostModel
from workbench.dispatch.exact import solve_dedup_ilp, solve_transport
from workbench.dispatch.heuristic import regret_swap
from workbench.dispatch.objective import additive_matrix, dedup_cost
from workbench.utils.io import write_json
from workbench.utils.timing import bench_parser

TABLES, ROWS_PER_TABLE = 26, 38_462


def instance(per_worker: int, workers: int, seed: int = 0):
    """A warmed cluster's cost model output for one batch of ``workers x per_worker``."""
    from dispatch_throughput import own_keys

    rows = TABLES * ROWS_PER_TABLE
    cluster = EdgeCluster(ClusterConfig(workers=workers, bandwidth_gbps=list(
        np.geomspace(0.1, 1.0, workers))), CacheConfig(policy="lru", ratio=0.1), rows, dim=4)
    n = workers * per_worker
    keys = own_keys(n * 11, ROWS_PER_TABLE, 1.05, seed)
    rng = np.random.default_rng(seed)
    for t in range(10):  # warm the caches
        batch = keys[t * n:(t + 1) * n]
        x = RandomPermutation.draw(workers, per_worker, rng)
        for w in range(workers):
            cluster.read(w, batch[x == w].ravel(), want_values=False)
            cluster.write(w, batch[x == w].ravel(), -0.01)
        cluster.end_iteration()
    return CostModel(cluster).batch(keys[10 * n:11 * n]), np.full(workers, per_worker)


def main() -> None:
    parser = bench_parser(__file__, __doc__)
    parser.add_argument("--time-limit", type=float, default=1.0)
    args = parser.parse_args()
    results = []
    (cost, indptr, indices), cap = instance(4, 2)  # compile the start plans' kernels first
    solve_dedup_ilp(cost, indptr, indices, cap, args.time_limit)
    for per_worker, workers in ((4, 2), (8, 2), (4, 4), (6, 4), (8, 4), (8, 8), (16, 8), (32, 8),
                                (64, 8), (128, 8)):
        (cost, indptr, indices), cap = instance(per_worker, workers)
        ilp = solve_dedup_ilp(cost, indptr, indices, cap, args.time_limit)
        heur = regret_swap(cost, indptr, indices, cap)
        trans = solve_transport(additive_matrix(cost, indptr, indices), cap)
        row = {"samples": int(cap.sum()), "workers": workers, "proven_optimal": ilp.optimal,
               "plan": ilp.method, "wall_s": ilp.seconds,
               "wall_over_limit": ilp.seconds / args.time_limit, "mip_gap": ilp.mip_gap,
               "status": ilp.status,
               "ilp_cost": ilp.objective, "heuristic_cost": heur.objective,
               "transport_cost": dedup_cost(cost, indptr, indices, trans.assignment)}
        results.append(row)
        print(f"N={row['samples']:5d} W={workers}: optimal={ilp.optimal!s:5s} plan={ilp.method}"
              f" wall {ilp.seconds:.2f}s ({row['wall_over_limit']:.2f}x limit), gap "
              f"{'-' if ilp.mip_gap is None else f'{ilp.mip_gap:.1%}'}; cost ILP "
              f"{ilp.objective:.4g}, heuristic {heur.objective:.4g}, transport "
              f"{row['transport_cost']:.4g}")
    exact_up_to = max([r["samples"] for r in results if r["proven_optimal"]], default=0)
    write_json(args.out, {"benchmark": "dedup_ilp", "time_limit_s": args.time_limit,
                          "results": results, "exact_up_to_samples": exact_up_to,
                          "max_wall_over_limit": max(r["wall_over_limit"] for r in results),
                          "machine": {"python": platform.python_version()}})


if __name__ == "__main__":
    main()
