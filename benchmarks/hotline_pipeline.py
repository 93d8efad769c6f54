"""Benchmark: Hotline's micro-batch pipeline against the hybrid, FAE-style hot steps and
accelerator-only; and whether the background gather really overlaps.

Two workloads, stated here so anyone can rerun them (numpy ``default_rng(0)``; 26 tables, key
column t = ``(rng.zipf(a, n) % 13,000) + 13,000 t``; the stage's model: DLRM, D = 16, bottom
512-256-64, top 512-256; batch 1,024; a hot set from a 5% profile holding 12% of the table
bytes, FAE's 256 MB at full Criteo scale; one compute thread + Hotline's gather thread):

* ``dlrm``: a = 1.2, the host-accelerator copy at memory speed (a CPU has no link);
* ``slow_link``: a = 1.6 (more popular inputs) and the link shaped to 0.05 GB/s, so that moving
  the non-popular micro-batch's cold rows takes about as long as the popular micro-batch's
  compute: the case the pipeline is built for, to show that the overlap is real.

Usage: python benchmarks/hotline_pipeline.py [--steps 20] [--device cpu|cuda]
       [--out benchmarks/results/hotline_pipeline.json]
"""

from __future__ import annotations

import platform

import numpy as np
import torch

from workbench.data.popularity import hot_keys, hot_mask, popular_mask, profile_counts
from workbench.models.config import ModelConfig
from workbench.training.components import ModelSpec
from workbench.training.hotline import TieredTrainer
from workbench.utils.io import write_json
from workbench.utils.timing import bench_parser, spread

MODEL = {"tables": 26, "dim": 16, "bottom": [512, 256, 64], "top": [512, 256],
         "rows_per_table": 13_000, "batch": 1024}
WORKLOADS = {
    "dlrm": {**MODEL, "zipf": 1.2, "link_gbps": None},
    "slow_link": {**MODEL, "zipf": 1.6, "link_gbps": 0.05},
}
BUDGET_FRACTION = 0.12
VARIANTS = ("hybrid", "hotline", "hotline_sequential", "accel_only")


def keys_for(w: dict, n: int, rng: np.random.Generator) -> np.ndarray:
    """``int64[n, 26]`` global keys of the workload."""
    rows = w["rows_per_table"]
    cols = [(rng.zipf(w["zipf"], n) % rows) + rows * t for t in range(w["tables"])]
    return np.stack(cols, axis=1).astype(np.int64)


def run_workload(name: str, w: dict, steps: int, warmup: int, device: str) -> dict:
    """Every variant on the same mini-batches; see the module docstring."""
    rng = np.random.default_rng(0)
    batch, dim = w["batch"], w["dim"]
    rows = w["tables"] * w["rows_per_table"]
    n = batch * (steps + warmup)
    keys = keys_for(w, n, rng)
    dense = rng.normal(size=(n, 13)).astype(np.float32)
    labels = (rng.random(n) < 0.25).astype(np.float32)
    table = rng.uniform(-0.05, 0.05, (rows, dim)).astype(np.float32)
    counts = profile_counts(keys, rows, 0.05, rng)
    hot = hot_keys(counts, int(BUDGET_FRACTION * rows * dim * 4), dim)
    cfg = ModelConfig(name="dlrm", embedding_dim=dim, bottom_mlp=w["bottom"], top_mlp=w["top"],
                      optimizer="adam", lr_dense=1e-3, lr_sparse=0.01)
    hot_sets = {"hybrid": np.zeros(0, np.int64), "hotline": hot, "hotline_sequential": hot,
                "accel_only": np.arange(rows)}
    shape = ModelSpec(cfg, 13, w["tables"], rows)
    trainers = {v: TieredTrainer(shape, table, hot_sets[v], device=device, seed=0,
                                 overlap=v != "hotline_sequential", link_gbps=w["link_gbps"])
                for v in VARIANTS}
    walls = {v: [] for v in VARIANTS}
    parts, seq_ratio = [], []
    try:
        for t in range(steps + warmup):
            sl = slice(t * batch, (t + 1) * batch)
            args = (dense[sl], keys[sl], labels[sl])
            following = keys[sl.stop:sl.stop + batch]  # Hotline plans it during this step
            records = {"hybrid": trainers["hybrid"].step_hybrid(*args),
                       "hotline": trainers["hotline"].step_hotline(*args, following),
                       "hotline_sequential":
                           trainers["hotline_sequential"].step_hotline(*args, following),
                       "accel_only": trainers["accel_only"].step_hot(*args)}
            if t < warmup:
                continue
            for v, r in records.items():
                walls[v].append(r.wall_s)
            h = records["hotline"]
            parts.append(sum(s.end - s.start for s in h.spans) / h.wall_s)
            seq_ratio.append(records["hotline_sequential"].wall_s / h.wall_s)
    finally:
        for tr in trainers.values():
            tr.close()
    popular = float(popular_mask(keys, hot_mask(hot, rows)).mean())
    per = {v: {"step_s": spread(walls[v]),
               "samples_per_s": spread([batch / x for x in walls[v]])} for v in VARIANTS}
    return {"workload": {**w, "table_rows": rows,
                         "table_mb": rows * dim * 4 / 2**20, "budget_fraction": BUDGET_FRACTION,
                         "hot_rows": int(hot.size), "popular_fraction": popular,
                         "steps": steps, "warmup": warmup},
            "schemes": per,
            "hotline_sum_of_parts_over_wall": spread(parts),
            "hotline_sequential_over_pipelined": spread(seq_ratio),
            "hotline_speedup_over_hybrid": per["hybrid"]["step_s"]["median"]
            / per["hotline"]["step_s"]["median"]}


def main() -> None:
    parser = bench_parser(__file__, __doc__, whole_doc=True)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--threads", type=int, default=1,
                        help="torch compute threads (the gather thread is one more)")
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    results = {}
    for name in args.workloads:
        r = run_workload(name, WORKLOADS[name], args.steps, args.warmup, args.device)
        results[name] = r
        sp = {v: r["schemes"][v]["samples_per_s"]["median"] for v in VARIANTS}
        print(f"{name}: " + ", ".join(f"{v} {s:,.0f} samples/s" for v, s in sp.items()))
        print(f"  popular {100 * r['workload']['popular_fraction']:.1f}%; Hotline vs hybrid "
              f"{r['hotline_speedup_over_hybrid']:.2f}x; sequential / pipelined "
              f"{r['hotline_sequential_over_pipelined']['median']:.3f} "
              f"(min {r['hotline_sequential_over_pipelined']['min']:.3f}, max "
              f"{r['hotline_sequential_over_pipelined']['max']:.3f}); sum of parts / wall "
              f"{r['hotline_sum_of_parts_over_wall']['median']:.3f}")
    write_json(args.out, {
        "benchmark": "hotline_pipeline", "device": args.device, "threads": args.threads,
        "torch": torch.__version__, "machine": platform.machine(),
        "cuda": torch.cuda.get_device_name(0) if args.device == "cuda" else None,
        "results": results})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
