"""Benchmark: FlexShard's planner and replay on a 64-device, multi-million-row instance.

The instance, stated so anyone can rerun it: numpy ``default_rng(0)``; a table of ``--rows`` rows
(10M by default, Criteo's C3) whose access probabilities are a Zipf law ``p_r ~ 1 / r^a`` (a = 1.05)
over a random permutation of the ids; 8 nodes x 8 devices of the default topology
(``workbench/conf/topology/two_level.yaml``: NVLink 300 GB/s, NIC 25 GB/s per device); 256 candidate
cut positions (about 33,000 pairs of cut points), searched twice (tier-2 owners weighted by
bandwidth and equal) as the ``flexshard`` stage does; lambda = 512 samples x 20 lookups per device;
D = 64.

Timed (median, mean, p95, min and max of ``--repeats`` runs, 5 by default): ranking the rows
once and, per search, building the prefix sums and evaluating every pair (``evaluate_cuts``),
choosing within RW's memory (``best_cut``), building the plan (``tiered``), and replaying one
iteration of 64 x 512 x 20 lookups through it (``replay_traffic``), in lookups per second.

Usage: python benchmarks/flexshard_planner.py [--rows 10000000] [--repeats 5]
       [--out benchmarks/results/flexshard_planner.json]
"""

from __future__ import annotations

import time

import numpy as np

from workbench.sharding.config import TopologyConfig
from workbench.sharding.planner import best_cut, candidate_cuts, evaluate_cuts
from workbench.sharding.plans import rank_order, row_wise, tiered
from workbench.sharding.topology import Topology
from workbench.sharding.traffic import expected_traffic, memory, replay_traffic
from workbench.utils.io import write_json
from workbench.utils.timing import bench_parser, machine, spread

ZIPF, DIM, PER_DEVICE, LENGTH, CANDIDATES = 1.05, 64, 512, 20, 256


def main() -> None:
    parser = bench_parser(__file__, __doc__, whole_doc=True)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    n = args.rows
    p = np.empty(n)
    p[rng.permutation(n)] = 1.0 / np.arange(1, n + 1) ** ZIPF
    p /= p.sum()
    topo = Topology.from_config(TopologyConfig(nodes=8, devices_per_node=8))
    lam, rb = PER_DEVICE * LENGTH, 4 * DIM
    rw = row_wise(n, topo)
    limit = float(memory(rw, expected_traffic(rw, p, lam, rb, topo), rb, topo)["total"].max())
    cuts = candidate_cuts(n, CANDIDATES)
    lookups = topo.devices * PER_DEVICE * LENGTH
    src = np.repeat(np.arange(topo.devices), PER_DEVICE * LENGTH)
    ids = rng.choice(n, size=lookups, p=p)
    times = {"evaluate_cuts": [], "best_cut": [], "tiered": [], "replay": []}
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        order = rank_order(p)
        searches = [evaluate_cuts(p, topo, lam, rb, cuts, weighted=w, order=order)
                    for w in (True, False)]
        t1 = time.perf_counter()
        picks = [(s, best_cut(s, limit)) for s in searches]
        s, k = min(picks, key=lambda sk: sk[0].seconds[sk[1]])
        t2 = time.perf_counter()
        plan = tiered(p, int(s.t1[k]), int(s.t2[k]), topo, order=order)
        t3 = time.perf_counter()
        replay_traffic(plan, src, ids, rb, topo)
        t4 = time.perf_counter()
        for key, dt in zip(times, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            times[key].append(dt)
    total = [sum(v) for v in zip(*(times[k] for k in ("evaluate_cuts", "best_cut", "tiered")),
                                 strict=True)]
    result = {
        "benchmark": "flexshard_planner", "machine": machine(), "rows": n,
        "devices": topo.devices, "candidate_cuts": int(cuts.size),
        "pairs_per_search": int(searches[0].t1.size), "searches": 2,
        "plan_seconds": spread(total), **{f"{k}_seconds": spread(v) for k, v in times.items()},
        "replay_lookups_per_s": spread([lookups / t for t in times["replay"]]),
        "chosen": {"t1": int(s.t1[k]), "t2": int(s.t2[k]),
                   "expected_seconds": float(s.seconds[k])}}
    write_json(args.out, result)
    print(f"{n:,} rows, {topo.devices} devices, {cuts.size} cuts ({searches[0].t1.size:,} pairs x "
          f"2 searches): planning {result['plan_seconds']['median']:.2f} s median "
          f"(min {result['plan_seconds']['min']:.2f}, max {result['plan_seconds']['max']:.2f}); "
          f"replay {result['replay_lookups_per_s']['median'] / 1e6:.1f} M lookups/s")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
