"""Benchmark: dispatch throughput per dispatcher on the reference workload (samples per second).

The reference workload (issue 19; Herald's setting), stated so anyone can rerun it::

    rng = numpy.random.default_rng(0)
    26 tables; column t of a batch = (rng.zipf(1.2, n) % 100_000) + 100_000 t   (2.6M rows)
    W workers x 128 samples per global batch, W in {8, 16}; links 0.1 .. 1 Gb/s (geometric)
    20,000-line LRU cache per worker (ESD's cost model reads it), 20,000-line snapshot per
    worker (LAIA's own simulation of the caches)

plus the workbench's own workload at 8 workers (``own``: Zipf(1.05) ranks through a seeded
permutation in each of 26 tables of 38,462 rows, 10% caches). Each batch the dispatcher decides
(timed: ``decide``, the cost model's reading of the caches or LAIA's snapshot update included),
then every worker reads and writes its samples' keys through its cache (untimed), so the next
decision sees the state the plan produced. Samples/s = batch size / the median decision time
over the batches after the first five (JIT compilation, cold caches); min and max are given too.

Targets: ``laia`` and ``esd_heuristic`` at least 200,000 samples/s at 8 and 16 workers on the
reference workload; ``random`` is the floor (the cost of a decision that reads nothing).

Usage: python benchmarks/dispatch_throughput.py [--batches 40] [--out ...json]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np

from workbench.cluster.config import CacheConfig, ClusterConfig
from workbench.cluster.edge_cluster import EdgeCluster
from workbench.dispatch.registry import make_dispatcher
from workbench.utils.io import write_json
from workbench.utils.timing import pin_one_core, spread

TABLES, PER_WORKER, SKIP = 26, 128, 5
TARGET = 200_000
DISPATCHERS = ("random", "laia", "esd_heuristic", "esd_greedy", "hybriddis", "esd_exact")
TARGETED = ("laia", "esd_heuristic")
WORKLOADS = {
    "reference": {"rows_per_table": 100_000, "zipf_a": 1.2, "cache_lines": 20_000,
                  "workers": [8, 16],
                  "keys": "(default_rng(0).zipf(1.2, n) % 100000) + 100000 t per table t"},
    "own": {"rows_per_table": 38_462, "zipf_a": 1.05, "cache_lines": 100_001, "workers": [8],
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


def measure(name: str, keys: np.ndarray, workers: int, rows: int, cache_lines: int,
            batches: int) -> dict:
    """Decision times of ``name`` over ``batches`` global batches (module docstring)."""
    cluster = EdgeCluster(ClusterConfig(workers=workers, bandwidth_gbps=list(
        np.geomspace(0.1, 1.0, workers))), CacheConfig(policy="lru", rows=cache_lines), rows,
        dim=8)
    dispatcher = make_dispatcher(name, cluster, np.full(workers, PER_WORKER, dtype=np.int64))
    n = workers * PER_WORKER
    seconds, methods = [], set()
    for t in range(batches):
        batch = keys[t * n:(t + 1) * n]
        start = time.perf_counter()
        decision = dispatcher.decide(batch, t)
        seconds.append(time.perf_counter() - start)
        methods.add(decision.method.split(":")[0])
        for w in range(workers):  # advance the caches (untimed)
            k = batch[decision.assignment == w].ravel()
            cluster.read(w, k, want_values=False)
            cluster.write(w, k, -0.01)
        cluster.end_iteration()
    timed = seconds[SKIP:]
    ms = spread([1e3 * s for s in timed])
    return {"dispatcher": name, "workers": workers, "batch": n, "ms_per_batch": ms,
            "samples_per_s": {"median": n / (ms["median"] / 1e3), "min": n / (ms["max"] / 1e3),
                              "max": n / (ms["min"] / 1e3), "n": ms["n"]},
            "methods": sorted(methods)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).parent / "results" / "dispatch_throughput.json")
    args = parser.parse_args()
    pin_one_core()
    results = []
    for workload, w in WORKLOADS.items():
        make = reference_keys if workload == "reference" else own_keys
        rows = TABLES * w["rows_per_table"]
        for workers in w["workers"]:
            keys = make(workers * PER_WORKER * args.batches, w["rows_per_table"], w["zipf_a"])
            for name in DISPATCHERS:
                r = measure(name, keys, workers, rows, w["cache_lines"], args.batches)
                r["workload"] = workload
                if workload == "reference" and name in TARGETED:
                    r["meets_target"] = bool(r["samples_per_s"]["median"] >= TARGET)
                results.append(r)
                sp = r["samples_per_s"]
                print(f"{workload:9s} W={workers:<2d} {name:14s} {sp['median']:10,.0f} "
                      f"samples/s [{sp['min']:,.0f}, {sp['max']:,.0f}]  "
                      f"{r['ms_per_batch']['median']:7.2f} ms/batch", flush=True)
    write_json(args.out, {
        "benchmark": "dispatch_throughput",
        "metric": "samples per global batch / median seconds of decide() over the batches "
                  f"after the first {SKIP}; min and max from the slowest and fastest batch",
        "setting": {"tables": TABLES, "per_worker": PER_WORKER, "batches": args.batches,
                    "links_gbps": "geomspace(0.1, 1, W)", "cache_policy": "lru", "cores": 1},
        "workloads": WORKLOADS,
        "target_samples_per_s": TARGET, "targeted": list(TARGETED),
        "results": results,
        "meets_targets": bool(all(r.get("meets_target", True) for r in results)),
        "machine": {"python": platform.python_version(), "processor": platform.processor(),
                    "cpus": os.cpu_count()}})


if __name__ == "__main__":
    main()
