"""Benchmark: dispatch throughput per dispatcher on the reference workload (samples per second).

The reference workload (issue 19; Herald's setting), stated so anyone can rerun it::

    rng = numpy.random.default_rng(0)
    26 tables; column t of a batch = (rng.zipf(1.2, n) % 100_000) + 100_000 t   (2.6M rows)
    W workers x 128 samples per global batch, W in {8, 16, 32}; links 0.1 .. 1 Gb/s
    (geometric); and a 1,024-sample batch at 32 workers (32 samples each: ``batch1024``)
    20,000-line LRU cache per worker (ESD's cost model reads it), 20,000-line snapshot per
    worker (LAIA's own simulation of the caches)

plus the workbench's own workload at 8 workers (``own``: Zipf(1.05) ranks through a seeded
permutation in each of 26 tables of 38,462 rows, 10% caches). Each batch the dispatcher decides
(timed: ``decide``, the cost model's reading of the caches or LAIA's snapshot update included),
then every worker reads and writes its samples' keys through its cache (untimed), so the next
decision sees the state the plan produced. Each configuration runs ``--runs`` times from fresh
caches (the decisions are the same every run; the times are not): the per-batch decision times
after the first five batches of every run (JIT compilation, cold caches) are pooled, and the
JSON gives their median, mean, 95th percentile, min and max (the mean and the p95 show the slow
tail a median hides). Samples/s = batch size / a decision time (median and mean).

Targets (issue 35), on the reference workload: ``laia`` and ``esd_heuristic`` at least 300,000
samples/s (median) at 32 workers; ``esd_exact`` (the transportation optimum) at most 25 ms per
1,024-sample batch at 32 workers (p95). ``random`` is the floor (the cost of a decision that
reads nothing).

Usage: python benchmarks/dispatch_throughput.py [--batches 40] [--runs 5] [--out ...json]
"""

from __future__ import annotations

import time

import numpy as np

from workbench.cluster.config import CacheConfig, ClusterConfig
from workbench.cluster.edge_cluster import EdgeCluster
from workbench.dispatch.registry import make_dispatcher
from workbench.utils.io import write_json
from workbench.utils.timing import bench_parser, machine, pin_one_core, spread

TABLES, SKIP = 26, 5
TARGET_SAMPLES_PER_S = 300_000  # laia and esd_heuristic, median, at TARGET_WORKERS
TARGET_EXACT_MS = 25.0  # esd_exact, p95 of a 1,024-sample batch, at TARGET_WORKERS
TARGET_WORKERS = 32
DISPATCHERS = ("random", "laia", "esd_heuristic", "esd_greedy", "hybriddis", "esd_exact")
TARGETED = ("laia", "esd_heuristic")
_REFERENCE_KEYS = "(default_rng(0).zipf(1.2, n) % 100000) + 100000 t per table t"
WORKLOADS = {
    "reference": {"rows_per_table": 100_000, "zipf_a": 1.2, "cache_lines": 20_000,
                  "workers": [8, 16, 32], "per_worker": 128, "dispatchers": list(DISPATCHERS),
                  "keys": _REFERENCE_KEYS},
    "batch1024": {"rows_per_table": 100_000, "zipf_a": 1.2, "cache_lines": 20_000,
                  "workers": [32], "per_worker": 32, "dispatchers": ["esd_exact"],
                  "keys": _REFERENCE_KEYS},
    "own": {"rows_per_table": 38_462, "zipf_a": 1.05, "cache_lines": 100_001, "workers": [8],
            "per_worker": 128, "dispatchers": list(DISPATCHERS),
            "keys": "per table, Zipf ranks (inverse CDF) through a seeded permutation, "
                    "default_rng(0)"},
}


def reference_keys(samples: int, rows_per_table: int, zipf_a: float) -> np.ndarray:
    """``[samples, 26]``: column t is ``(rng.zipf(a, samples) % rows) + rows t``."""
    rng = np.random.default_rng(0)
    return np.stack([(rng.zipf(zipf_a, samples) % rows_per_table) + rows_per_table * t
                     for t in range(TABLES)], axis=1).astype(np.int64)


def own_keys(samples: int, rows_per_table: int, zipf_a: float, seed: int = 0) -> np.ndarray:
    """``[samples, 26]`` global keys, each table Zipf(a) over a seeded rank->row map."""
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(np.arange(1, rows_per_table + 1, dtype=np.float64) ** -zipf_a)
    cdf /= cdf[-1]
    ranks = np.minimum(np.searchsorted(cdf, rng.random((samples, TABLES))), rows_per_table - 1)
    perm = np.stack([rng.permutation(rows_per_table) for _ in range(TABLES)], axis=1)
    return perm[ranks, np.arange(TABLES)] + np.arange(TABLES) * rows_per_table


def measure(name: str, keys: np.ndarray, workers: int, per_worker: int, rows: int,
            cache_lines: int, batches: int, runs: int) -> dict:
    """Decision times of ``name`` over ``batches`` global batches, ``runs`` times from fresh
    caches (module docstring)."""
    n = workers * per_worker
    seconds, methods = [], set()
    for _ in range(runs):
        cluster = EdgeCluster(ClusterConfig(workers=workers, bandwidth_gbps=list(
            np.geomspace(0.1, 1.0, workers))), CacheConfig(policy="lru", rows=cache_lines),
            rows, dim=8)
        dispatcher = make_dispatcher(name, cluster, np.full(workers, per_worker,
                                                            dtype=np.int64))
        for t in range(batches):
            batch = keys[t * n:(t + 1) * n]
            start = time.perf_counter()
            decision = dispatcher.decide(batch, t)
            if t >= SKIP:
                seconds.append(time.perf_counter() - start)
            methods.add(decision.method.split(":")[0])
            for w in range(workers):  # advance the caches (untimed)
                k = batch[decision.assignment == w].ravel()
                cluster.read(w, k, want_values=False)
                cluster.write(w, k, -0.01)
            cluster.end_iteration()
    ms = spread([1e3 * s for s in seconds])
    return {"dispatcher": name, "workers": workers, "batch": n, "runs": runs,
            "ms_per_batch": ms,
            "samples_per_s": {"median": n / (ms["median"] / 1e3), "mean": n / (ms["mean"] / 1e3),
                              "at_p95": n / (ms["p95"] / 1e3), "min": n / (ms["max"] / 1e3),
                              "max": n / (ms["min"] / 1e3), "n": ms["n"]},
            "methods": sorted(methods)}


def _target(workload: str, r: dict) -> dict | None:
    """The issue-35 target a result is held to, and whether it is met (None: no target)."""
    if r["workers"] != TARGET_WORKERS:
        return None
    if workload == "reference" and r["dispatcher"] in TARGETED:
        value = r["samples_per_s"]["median"]
        return {"what": "median samples/s >= ", "target": TARGET_SAMPLES_PER_S, "value": value,
                "met": bool(value >= TARGET_SAMPLES_PER_S)}
    if workload == "batch1024" and r["dispatcher"] == "esd_exact":
        value = r["ms_per_batch"]["p95"]
        return {"what": "p95 ms per 1,024-sample batch <= ", "target": TARGET_EXACT_MS,
                "value": value, "met": bool(value <= TARGET_EXACT_MS)}
    return None


def main() -> None:
    parser = bench_parser(__file__, __doc__)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    pin_one_core()
    results = []
    for workload, w in WORKLOADS.items():
        make = own_keys if workload == "own" else reference_keys
        rows = TABLES * w["rows_per_table"]
        for workers in w["workers"]:
            n = workers * w["per_worker"]
            keys = make(n * args.batches, w["rows_per_table"], w["zipf_a"])
            for name in w["dispatchers"]:
                r = measure(name, keys, workers, w["per_worker"], rows, w["cache_lines"],
                            args.batches, args.runs)
                r["workload"] = workload
                target = _target(workload, r)
                if target is not None:
                    r["target"] = target
                results.append(r)
                sp, ms = r["samples_per_s"], r["ms_per_batch"]
                print(f"{workload:9s} W={workers:<2d} N={n:<5d} {name:14s} "
                      f"{sp['median']:10,.0f} samples/s  {ms['median']:7.2f} ms median, "
                      f"{ms['mean']:7.2f} mean, {ms['p95']:7.2f} p95"
                      + ("" if target is None else
                         f"  target {'met' if target['met'] else 'NOT met'}"), flush=True)
    write_json(args.out, {
        "benchmark": "dispatch_throughput",
        "metric": "decide() seconds per global batch, pooled over the batches after the first "
                  f"{SKIP} of each of the runs; samples/s = batch / a decision time",
        "setting": {"tables": TABLES, "batches": args.batches, "runs": args.runs,
                    "links_gbps": "geomspace(0.1, 1, W)", "cache_policy": "lru", "cores": 1},
        "workloads": WORKLOADS,
        "targets": {"samples_per_s": TARGET_SAMPLES_PER_S, "exact_ms_p95": TARGET_EXACT_MS,
                    "workers": TARGET_WORKERS, "targeted": list(TARGETED)},
        "results": results,
        "meets_targets": bool(all(r["target"]["met"] for r in results if "target" in r)),
        "machine": machine()})


if __name__ == "__main__":
    main()
