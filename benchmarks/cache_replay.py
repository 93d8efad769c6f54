"""Benchmark: HET cache replay throughput per policy (key accesses per second, one core).

A Zipf(1.05) trace over a 1M-row table, 1,000 keys per step; each step one worker reads its keys
through the cache and writes one update per key occurrence (the replay command's loop, Python
driver included). Key accesses = keys read + keys written. Target (issue 3): >= 5 million key
accesses per second for every policy, on one core.

Usage: python benchmarks/cache_replay.py [--steps 3000] [--out benchmarks/results/cache_replay.json]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np

from workbench.cluster.cache import POLICIES
from workbench.cluster.config import CacheConfig, ClusterConfig
from workbench.cluster.edge_cluster import EdgeCluster, replay
from workbench.utils.io import write_json
from workbench.utils.timing import pin_one_core

ROWS = 1_000_000
KEYS_PER_STEP = 1_000
ZIPF_EXPONENT = 1.05
TARGET = 5e6


def zipf_trace(steps: int, seed: int = 0) -> np.ndarray:
    """``[steps, 1, KEYS_PER_STEP]`` keys with P(rank r) ~ r^-1.05 over a seeded rank->key map."""
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(np.arange(1, ROWS + 1, dtype=np.float64) ** -ZIPF_EXPONENT)
    cdf /= cdf[-1]
    ranks = np.minimum(np.searchsorted(cdf, rng.random(steps * KEYS_PER_STEP)), ROWS - 1)
    return rng.permutation(ROWS)[ranks].reshape(steps, 1, KEYS_PER_STEP).astype(np.int64)


def measure(policy: str, trace: np.ndarray, dim: int, repeats: int) -> dict:
    """Best of ``repeats`` timed replays (JIT compiled beforehand)."""
    best = np.inf
    for _ in range(repeats):
        cluster = EdgeCluster(ClusterConfig(workers=1), CacheConfig(policy=policy, ratio=0.1),
                              table_rows=ROWS, dim=dim)
        start = time.perf_counter()
        replay(cluster, trace, record=False)
        best = min(best, time.perf_counter() - start)
    counters = cluster.caches[0].counter_dict()
    accesses = counters["keys_read"] + counters["keys_written"]
    return {"policy": policy, "seconds": best, "key_accesses": accesses,
            "key_accesses_per_s": accesses / best,
            "steps_per_s": trace.shape[0] / best,
            "miss_rate": counters["full_misses"] / max(1, counters["full_unique"]),
            "meets_target": bool(accesses / best >= TARGET)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).parent / "results" / "cache_replay.json")
    args = parser.parse_args()
    pin_one_core()
    trace = zipf_trace(args.steps)
    warm = zipf_trace(50, seed=1)
    results = []
    for policy in POLICIES:
        replay(EdgeCluster(ClusterConfig(workers=1), CacheConfig(policy=policy, ratio=0.1),
                           table_rows=ROWS, dim=args.dim), warm, record=False)  # compile
        results.append(measure(policy, trace, args.dim, args.repeats))
        r = results[-1]
        print(f"{policy:7s} {r['key_accesses_per_s'] / 1e6:6.2f} M key accesses/s "
              f"(miss rate {r['miss_rate']:.3f})")
    write_json(args.out, {
        "benchmark": "cache_replay", "target_key_accesses_per_s": TARGET,
        "setting": {"rows": ROWS, "keys_per_step": KEYS_PER_STEP, "steps": args.steps,
                    "zipf_exponent": ZIPF_EXPONENT, "cache_ratio": 0.1, "bound": 100,
                    "dim": args.dim, "workers": 1, "cores": 1},
        "machine": {"python": platform.python_version(), "processor": platform.processor(),
                    "cpus": os.cpu_count()},
        "results": results})


if __name__ == "__main__":
    main()
