"""Benchmark: training samples per second of the DLRM Criteo Kaggle configuration.

Three loops over the same data and the same model module (``workbench/conf/model/dlrm.yaml``:
bottom 13-512-256-64-16, top 512-256-1, D = 16, global batch 1,024) at Criteo Kaggle's
per-feature shape (26 tables, ``--cardinality-scale`` of their rows: 0.1 by default, 3.4M rows,
the millions a user meets; until issue 35 it ran at 0.01, 337k rows, where the cluster's
random-row traffic stays in the processor's caches), one torch thread each:

* ``reference``: a straightforward PyTorch loop: ``nn.Embedding(sparse=True)`` tables
  (one concatenated table) updated by ``torch.optim.SGD``, Adam on the dense parameters, as
  facebookresearch/dlrm's ``dlrm_s_pytorch.py`` does on CPU;
* ``plain``: the workbench trainer, single process (``SystemSpec("plain")``);
* ``cluster``: the workbench trainer through the emulated cluster, 8 workers, HET cache s=100
  (LRU, 10% of the table).

Timed in ``--repeats`` alternating rounds (reference, plain, cluster) after a warm-up, one core;
the JSON holds each loop's median, mean, p95, min and max samples/s and the per-round ratios.
Targets (issue 4): plain within 10% of the reference; the cluster at most 1.5x slower than plain.

Usage: python benchmarks/train_throughput.py [--iterations 60] [--out ...json]
"""

from __future__ import annotations

import time

import numpy as np
import torch

from workbench.cluster.config import CacheConfig, ClusterConfig
from workbench.config import load
from workbench.data.config import SyntheticConfig
from workbench.data.synthetic import generate
from workbench.models.ctr import build_model
from workbench.training.components import ClusterSetup, ModelSpec, SystemSpec
from workbench.training.trainer import Split, Trainer
from workbench.utils.io import write_json
from workbench.utils.timing import (
    bench_parser,
    machine,
    paired_ratio,
    pin_one_core,
    repeat_seconds,
    spread,
)


def make_data(rows: int, cardinality_scale: float, seed: int = 0) -> tuple[Split, int]:
    """Synthetic Criteo-like samples as a :class:`Split`: Criteo Kaggle's 26 tables, each at
    ``cardinality_scale`` of its row count (1.0: the 33.8M rows in all)."""
    table, cards = generate(SyntheticConfig(rows=rows, cardinality_scale=cardinality_scale),
                            seed)
    frame = table.frame
    offsets = np.r_[0, np.cumsum([cards[c] for c in table.categorical])[:-1]]
    keys = frame[table.categorical].to_numpy(np.int64) + offsets
    dense = np.log1p(np.clip(np.nan_to_num(frame[table.dense].to_numpy(np.float32)), 0, None))
    labels = frame["label"].to_numpy(np.float32).copy()  # writable: torch.from_numpy views it
    return Split(dense.astype(np.float32), keys, labels), \
        int(sum(cards.values()))


def reference_loop(model_cfg, data: Split, rows: int, iterations: int) -> float:
    """Seconds for ``iterations`` steps of the straightforward PyTorch loop."""
    torch.manual_seed(0)
    model = build_model(model_cfg, data.dense.shape[1], data.keys.shape[1])
    table = torch.nn.Embedding(rows, model_cfg.embedding_dim, sparse=True)
    torch.nn.init.uniform_(table.weight, -model_cfg.init_scale, model_cfg.init_scale)
    dense_opt = torch.optim.Adam(model.parameters(), lr=model_cfg.lr_dense)
    sparse_opt = torch.optim.SGD(table.parameters(), lr=model_cfg.lr_sparse)
    batch = model_cfg.batch_size
    start = time.perf_counter()
    for it in range(iterations):
        sl = slice(it * batch, (it + 1) * batch)
        keys = torch.from_numpy(data.keys[sl])
        logits = model(torch.from_numpy(data.dense[sl]), table(keys))
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            logits, torch.from_numpy(data.labels[sl]))
        dense_opt.zero_grad()
        sparse_opt.zero_grad()
        loss.backward()
        dense_opt.step()
        sparse_opt.step()
    return time.perf_counter() - start


def trainer_loop(model_cfg, data: Split, rows: int, iterations: int, system: SystemSpec,
                 cluster: ClusterConfig, cache: CacheConfig) -> float:
    """Seconds for ``iterations`` steps of the workbench trainer."""
    trainer = Trainer(ModelSpec(model_cfg, data.dense.shape[1], data.keys.shape[1], rows),
                      system, ClusterSetup(cluster, cache), seed=0)
    start = time.perf_counter()
    for it in range(iterations):
        trainer.step(data, it * model_cfg.batch_size)
    return time.perf_counter() - start


def main() -> None:
    parser = bench_parser(__file__, __doc__)
    parser.add_argument("--iterations", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cardinality-scale", type=float, default=0.1,
                        help="each table at this share of Criteo Kaggle's rows (0.1: 3.4M rows "
                             "in all, millions as a user meets; 1.0: the full 33.8M)")
    args = parser.parse_args()
    cfg = load()
    model_cfg = cfg.models["dlrm"]
    pin_one_core()
    torch.set_num_threads(1)
    data, rows = make_data(model_cfg.batch_size * (args.iterations + 5), args.cardinality_scale)
    cluster = ClusterConfig(workers=8)
    cache = CacheConfig(policy="lru", ratio=0.1)
    samples = args.iterations * model_cfg.batch_size
    loops = {
        "reference": lambda: reference_loop(model_cfg, data, rows, args.iterations),
        "plain": lambda: trainer_loop(model_cfg, data, rows, args.iterations,
                                      SystemSpec("plain", "plain"), cluster, cache),
        "cluster": lambda: trainer_loop(model_cfg, data, rows, args.iterations,
                                        SystemSpec("Cache s=100", "cache", 100), cluster,
                                        cache)}
    # alternating rounds after a warm-up (JIT compilation, allocator); median, min and max
    times = repeat_seconds(loops, args.repeats, warmup=True)
    rate = {name: spread([samples / t for t in ts]) for name, ts in times.items()}
    # ratios per round (each round runs the three loops back to back on the same machine state)
    plain_vs_ref = paired_ratio(times, "reference", "plain")
    slowdown = paired_ratio(times, "cluster", "plain")
    result = {
        "benchmark": "train_throughput", "model": "dlrm (Criteo Kaggle configuration)",
        "setting": {"iterations": args.iterations, "batch_size": model_cfg.batch_size,
                    "table_rows": rows, "cardinality_scale": args.cardinality_scale,
                    "embedding_dim": model_cfg.embedding_dim,
                    "torch_threads": 1, "cluster_workers": 8, "cache": "lru 10%, s=100",
                    "repeats": args.repeats, "timing": "alternating rounds, median/min/max"},
        "samples_per_s": rate,
        "plain_vs_reference": plain_vs_ref,
        "cluster_slowdown_vs_plain": slowdown,
        "targets": {"plain_vs_reference_at_least": 0.9, "cluster_slowdown_at_most": 1.5},
        "meets_targets": bool(plain_vs_ref["median"] >= 0.9 and slowdown["median"] <= 1.5),
        "machine": {**machine(), "torch": torch.__version__}}
    for name, r in rate.items():
        print(f"{name:9s} {r['median']:9.0f} samples/s (mean {r['mean']:.0f}) "
              f"[{r['min']:.0f}, {r['max']:.0f}]")
    print(f"plain / reference = {plain_vs_ref['median']:.3f}; "
          f"cluster slowdown = {slowdown['median']:.3f}")
    write_json(args.out, result)


if __name__ == "__main__":
    main()
