"""Benchmark: the distributed backend's iteration time against the emulated clock and against
unshaped links, for 2, 4 and 8 workers on this machine.

The instance, stated so anyone can rerun it: a synthetic batch stream (numpy ``default_rng(0)``;
8 categorical features with Zipf(1.2) keys over 20,000 rows, 4 dense features, 30% positives);
WDL with D = 16, a 64-64 deep MLP, plain SGD; global batch 64 x W; HET cache LRU at 10% of the
table, s = 10; links 100 Mb/s with 1 ms latency for every worker (``--gbps``, ``--latency-ms``);
``--steps`` BSP iterations of which the first ``--warmup`` are dropped.

Per worker count W, three numbers per iteration (means over the timed iterations):

* ``shaped_s``: the distributed backend, links shaped in the sender (what the
  ``distributed_check`` stage runs);
* ``unshaped_s``: the same processes, links unshaped (loopback speed): the backend's own cost --
  gloo messages, framing, the cache kernels, process scheduling on this machine's cores;
* ``emulated_s``: the emulated clock's BSP step for the same run (compute = this machine's
  one-thread step time fitted from the unshaped run's measured compute, software cost off:
  the clock's pure ``L + bytes / B``).

With more processes than cores (8 workers + a server on 2 cores) the measured times include
waiting for a core, which the clock does not model: the JSON records ``os.cpu_count()``.

Usage: python benchmarks/distributed_backend.py [--workers 2 4 8] [--steps 12] [--warmup 2]
       [--gbps 0.1] [--latency-ms 1.0] [--out benchmarks/results/distributed_backend.json]
"""

from __future__ import annotations

import dataclasses
import os
import platform
import time

import numpy as np

from workbench.cluster.config import CacheConfig, ClusterConfig
from workbench.cluster.time_model import ComputeCost, SoftwareCost
from workbench.models.config import ModelConfig
from workbench.training.components import SystemSpec
from workbench.training.distributed import DistributedJob, run_distributed
from workbench.training.emulator_check import run_emulated
from workbench.training.trainer import Split
from workbench.utils.io import write_json
from workbench.utils.timing import bench_parser

ROWS, FEATURES, DENSE, PER_WORKER = 20_000, 8, 4, 64


def stream(samples: int) -> Split:
    """The synthetic batch stream (see the module docstring)."""
    rng = np.random.default_rng(0)
    keys = (rng.zipf(1.2, size=(samples, FEATURES)) - 1) % ROWS
    return Split(rng.normal(size=(samples, DENSE)).astype(np.float32), keys.astype(np.int64),
                 (rng.random(samples) < 0.3).astype(np.float32))


def main() -> None:
    parser = bench_parser(__file__, __doc__, whole_doc=True)
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--gbps", type=float, default=0.1)
    parser.add_argument("--latency-ms", type=float, default=1.0)
    args = parser.parse_args()
    if args.warmup >= args.steps:
        parser.error("--warmup must be below --steps")
    model = ModelConfig(name="wdl", embedding_dim=16, deep_mlp=[64, 64], optimizer="sgd",
                        lr_dense=0.05, lr_sparse=0.05)
    rows = []
    for workers in args.workers:
        cluster = ClusterConfig(workers=workers, bandwidth_gbps=[args.gbps],
                                latency_ms=[args.latency_ms], overlap="none", software="off",
                                ps_bandwidth_gbps=args.gbps * workers)
        job = DistributedJob(
            dataclasses.replace(model, batch_size=PER_WORKER * workers),
            n_dense=DENSE, n_sparse=FEATURES, table_rows=ROWS,
            system=SystemSpec("Cache s=10", "cache", 10), cluster_cfg=cluster,
            cache_cfg=CacheConfig(policy="lru", ratio=0.1), steps=args.steps,
            dispatcher="random", timeout_s=120, deadline_s=900)
        train = stream(args.steps * PER_WORKER * workers)
        runs = {}
        for shaped in (True, False):
            start = time.perf_counter()
            result = run_distributed(dataclasses.replace(job, shaped=shaped), train)
            timed = result.history[result.history["iteration"] >= args.warmup]
            runs[shaped] = (timed, time.perf_counter() - start, result.startup_s)
        unshaped = runs[False][0]
        compute = ComputeCost(0.0, float(unshaped["compute_s"].mean()) / PER_WORKER,
                              "fitted from the unshaped run's measured compute")
        emulated = run_emulated(job, train, compute, SoftwareCost(0, 0, 0, 0, "off")).history
        emulated = emulated[emulated["iteration"] >= args.warmup]

        def per_iteration(frame, column):
            return float(frame.groupby("iteration")[column].max().mean())

        row = {"workers": workers,
               "shaped_s": per_iteration(runs[True][0], "wall_s"),
               "unshaped_s": per_iteration(unshaped, "wall_s"),
               "emulated_s": per_iteration(emulated, "step_s"),
               "shaped_run_wall_s": runs[True][1], "startup_s": runs[True][2],
               "shaped_phases_s": {k: float(runs[True][0][k].mean()) for k in
                                   ("pull_s", "compute_s", "allreduce_s", "push_s")},
               "unshaped_phases_s": {k: float(unshaped[k].mean()) for k in
                                     ("pull_s", "compute_s", "allreduce_s", "push_s")}}
        row["shaped_over_emulated"] = row["shaped_s"] / row["emulated_s"]
        row["shaped_over_unshaped"] = row["shaped_s"] / row["unshaped_s"]
        rows.append(row)
        print(f"W={workers}: shaped {1e3 * row['shaped_s']:.1f} ms, unshaped "
              f"{1e3 * row['unshaped_s']:.1f} ms, emulated {1e3 * row['emulated_s']:.1f} ms "
              f"per iteration (shaped / emulated {row['shaped_over_emulated']:.2f}x)",
              flush=True)
    write_json(args.out, {
        "benchmark": "distributed_backend", "machine": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(), "steps": args.steps, "warmup": args.warmup,
        "gbps": args.gbps, "latency_ms": args.latency_ms, "per_worker_batch": PER_WORKER,
        "rows": ROWS, "features": FEATURES, "runs": rows})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
