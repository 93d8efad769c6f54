"""Benchmark: what Hotline's accelerator path took off its critical path, each change against
the code it replaced, timed in the same run on the same mini-batches.

The workload is ``hotline_pipeline.py``'s (numpy ``default_rng(0)``; 26 zipf(1.2) tables; DLRM
D = 16, bottom 512-256-64, top 512-256; a hot set from a 5% profile with 12% of the table
bytes) at 26 x 13,000 rows / batch 1,024 and 26 x 100,000 rows / batch 4,096, the two sizes of
the H200 runs (``docs/hotline_cuda.md``). Three parts:

* ``split``: the popular / non-popular split, the previous code (``torch`` masks over the
  mini-batch, a sort of the non-popular and of the popular micro-batch's keys: the H200 runs'
  "classify" phase) against :func:`~workbench.training.microbatch_plan.plan_minibatch` (one
  sort); and, through the trainer, the host time a Hotline step spends on it: "classify" when
  made on the step (``overlap = False``) against "wait for classify" when the plan was made on
  the planner thread during the previous step.
* ``gather``: the non-popular micro-batch's rows, the previous assembly (slots uploaded and
  looked up, a gather of the hot rows, an empty tensor, two scatters) against one
  ``gather_fused``; their updates (two ``index_add_`` + a scatter of the hot deltas and a cold
  split) against one ``update_fused``.
* ``capture``: one micro-batch's forward + backward, eager against ``torch.compile`` (CPU:
  inductor; the padded shapes of ``workbench/training/capture.py``), at the popular
  micro-batch's size and the whole mini-batch's. On a CPU this is the Python dispatch cost the
  capture removes, not a GPU's launch cost (``hotline_cuda.py`` measures that).

Timings alternate the contenders round by round (``repeat_seconds``); medians with their spread.

Usage: python benchmarks/hotline_critical_path.py [--rounds 30]
       [--out benchmarks/results/hotline_critical_path.json] [--parts split gather capture]
"""

from __future__ import annotations

import functools
import platform
import time
from typing import Any

import numpy as np
import torch

from workbench.cluster.tiered_store import TieredEmbeddingStore
from workbench.data.popularity import hot_keys, profile_counts
from workbench.models.config import ModelConfig
from workbench.models.ctr import build_model
from workbench.training.capture import CAPTURES, MicroBatchStep
from workbench.training.components import ModelSpec
from workbench.training.hotline import TieredTrainer
from workbench.training.microbatch_plan import plan_minibatch
from workbench.utils.io import write_json
from workbench.utils.timing import bench_parser, repeat_seconds, spread

SIZES = {"r13k_b1024": (13_000, 1024), "r100k_b4096": (100_000, 4096)}
TABLES, DIM, ZIPF, BUDGET_FRACTION = 26, 16, 1.2, 0.12
MODEL = ModelConfig(name="dlrm", embedding_dim=DIM, bottom_mlp=[512, 256, 64],
                    top_mlp=[512, 256], optimizer="adam", lr_dense=1e-3, lr_sparse=0.01)


def workload(rows_per_table: int, batch: int, batches: int) -> dict[str, Any]:
    """Keys, dense features, labels, the initial table and the hot set."""
    rng = np.random.default_rng(0)
    n = batch * batches
    keys = np.stack([(rng.zipf(ZIPF, n) % rows_per_table) + rows_per_table * t
                     for t in range(TABLES)], axis=1).astype(np.int64)
    rows = TABLES * rows_per_table
    table = rng.uniform(-0.05, 0.05, (rows, DIM)).astype(np.float32)
    hot = hot_keys(profile_counts(keys, rows, 0.05, rng), int(BUDGET_FRACTION * rows * DIM * 4),
                   DIM)
    return {"keys": keys, "dense": rng.normal(size=(n, 13)).astype(np.float32),
            "labels": (rng.random(n) < 0.25).astype(np.float32), "table": table, "hot": hot,
            "rows": rows, "batch": batch}


def previous_split(store: TieredEmbeddingStore, keys: np.ndarray) -> tuple:
    """The split as the H200 runs' code made it (``step_hotline``'s "classify" and the
    popular micro-batch's sort)."""
    keys_t = torch.from_numpy(keys)
    popular = store.is_hot(keys_t).all(dim=1)
    pop_idx = torch.nonzero(popular).flatten()
    np_idx = torch.nonzero(~popular).flatten()
    uniq_n, inv_n = np.unique(keys[np_idx.numpy()], return_inverse=True)
    hot_n = store.is_hot(torch.from_numpy(uniq_n))
    hot_pos, cold_pos = torch.nonzero(hot_n).flatten(), torch.nonzero(~hot_n).flatten()
    uniq_p, inv_p = np.unique(keys[pop_idx.numpy()], return_inverse=True)
    return pop_idx, np_idx, uniq_n, inv_n, hot_pos, cold_pos, uniq_p, inv_p


def part_split(w: dict, rounds: int) -> dict[str, Any]:
    store = TieredEmbeddingStore(w["table"], w["hot"])
    b = w["batch"]
    batches = [w["keys"][i * b:(i + 1) * b] for i in range(rounds)]
    it = {"previous": iter(batches), "plan_minibatch": iter(batches)}
    slot = store.slot.numpy()
    times = repeat_seconds({
        "previous": lambda: previous_split(store, next(it["previous"])),
        "plan_minibatch": lambda: plan_minibatch(next(it["plan_minibatch"]), slot,
                                                 int(store.hot.shape[0]))}, rounds - 1,
        warmup=True)
    out: dict[str, Any] = {name: spread(t) for name, t in times.items()}
    out["speedup"] = out["previous"]["median"] / out["plan_minibatch"]["median"]
    # through the trainer: the host time a step spends on the split, made on it or prefetched
    spec = ModelSpec(MODEL, 13, TABLES, w["rows"])
    on_step: dict[str, list[float]] = {"made on the step": [], "prefetched": []}
    for label, prefetch in (("made on the step", False), ("prefetched", True)):
        trainer = TieredTrainer(spec, w["table"], w["hot"])
        try:
            for t in range(min(rounds, 12)):
                sl, nxt = slice(t * b, (t + 1) * b), slice((t + 1) * b, (t + 2) * b)
                rec = trainer.step_hotline(w["dense"][sl], w["keys"][sl], w["labels"][sl],
                                           w["keys"][nxt] if prefetch else None)
                if t:  # the first step has no prefetched plan
                    on_step[label].append(sum(s.end - s.start for s in rec.spans
                                              if s.phase in ("classify", "wait for classify")))
        finally:
            trainer.close()
    # without the next keys, each step makes its own plan on its critical path ("classify");
    # with them, it waits for the plan the planner thread made during the previous step
    out["host_seconds_per_step"] = {k: spread(v) for k, v in on_step.items()}
    return out


def part_gather(w: dict, rounds: int) -> dict[str, Any]:
    store = TieredEmbeddingStore(w["table"], w["hot"])
    b = w["batch"]
    plans = [plan_minibatch(w["keys"][i * b:(i + 1) * b], store.slot.numpy(),
                            int(store.hot.shape[0])) for i in range(rounds)]
    store.reserve_staging(max(int(p.cold_keys.numel()) for p in plans))
    staged = {i: store.gather_host(p.cold_keys) for i, p in enumerate(plans)}
    delta = {i: torch.randn((p.uniq_n.numel(), DIM)) * 1e-3 for i, p in enumerate(plans)}
    state = {"i": 0}

    def previous_gather() -> torch.Tensor:
        p, cold = plans[state["i"]], staged[state["i"]]
        hot_pos = torch.nonzero(p.sources_n < store.hot.shape[0]).flatten()
        cold_pos = torch.nonzero(p.sources_n >= store.hot.shape[0]).flatten()
        slots = store.slots(p.uniq_n[hot_pos])
        rows = torch.empty((p.uniq_n.numel(), DIM))
        rows[hot_pos] = store.gather_hot(slots)
        rows[cold_pos] = store.upload(cold)
        return rows

    def fused_gather() -> torch.Tensor:
        p = plans[state["i"]]
        store.stage(staged[state["i"]])
        return store.gather_fused(p.sources_n)

    def previous_update() -> None:
        p, d = plans[state["i"]], delta[state["i"]]
        hot_pos = torch.nonzero(p.sources_n < store.hot.shape[0]).flatten()
        cold_pos = torch.nonzero(p.sources_n >= store.hot.shape[0]).flatten()
        store.update_hot(store.slots(p.uniq_n[hot_pos]), d[hot_pos])
        store.update_host(p.cold_keys, store.download(d[cold_pos]))

    def fused_update() -> None:
        p, d = plans[state["i"]], delta[state["i"]]
        n = int(p.cold_keys.numel())  # the area holds this round's rows (fused_gather)
        store.update_fused(p.sources_n, d)
        store.write_host(p.cold_keys, store.download(store.staged(n)))

    def advance() -> None:
        state["i"] = (state["i"] + 1) % rounds

    times = repeat_seconds({"previous gather": previous_gather, "fused gather": fused_gather,
                            "previous update": previous_update, "fused update": fused_update,
                            "next": advance}, rounds, warmup=True)
    times.pop("next")
    out: dict[str, Any] = {name: spread(t) for name, t in times.items()}
    out["gather_speedup"] = out["previous gather"]["median"] / out["fused gather"]["median"]
    out["update_speedup"] = out["previous update"]["median"] / out["fused update"]["median"]
    out["note"] = ("the fused gather's time includes staging the cold rows into the buffer "
                   "(as the previous one's includes their upload copy); the fused update writes "
                   "whole staged rows back (index_copy_), the previous one adds the deltas")
    return out


def part_capture(w: dict, rounds: int) -> dict[str, Any]:
    b = w["batch"]
    plan = plan_minibatch(w["keys"][:b], TieredEmbeddingStore(w["table"], w["hot"]).slot.numpy(),
                          int(w["hot"].size))
    out: dict[str, Any] = {}
    for label, samples in (("popular micro-batch", plan.pop_idx.numpy()),
                           ("whole mini-batch", np.arange(b))):
        uniq, inv = np.unique(w["keys"][:b][samples], return_inverse=True)
        inv = torch.from_numpy(inv.reshape(len(samples), TABLES))
        rows = torch.from_numpy(w["table"][uniq])
        dense, labels = torch.from_numpy(w["dense"][samples]), torch.from_numpy(
            w["labels"][samples])
        steps = {}
        for name in ("eager", "compile"):
            torch.manual_seed(0)
            model = build_model(MODEL, 13, TABLES)
            steps[name] = MicroBatchStep(model, CAPTURES[name], torch.device("cpu"), 0.01)
        begin = time.perf_counter()
        steps["compile"](rows, inv, dense, labels, b)  # capture (compile) once
        compile_s = time.perf_counter() - begin
        args = (rows, inv, dense, labels, b)
        times = repeat_seconds({n: functools.partial(s, *args) for n, s in steps.items()},
                               rounds, warmup=True)
        res: dict[str, Any] = {n: spread(t) for n, t in times.items()}
        res.update({"samples": int(len(samples)), "distinct_rows": int(uniq.size),
                    "compile_seconds": compile_s,
                    "speedup": res["eager"]["median"] / res["compile"]["median"]})
        out[label] = res
    return out


PARTS = {"split": part_split, "gather": part_gather, "capture": part_capture}


def main() -> None:
    parser = bench_parser(__file__, __doc__, whole_doc=True)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    parser.add_argument("--parts", nargs="+", default=list(PARTS), choices=list(PARTS))
    parser.add_argument("--threads", type=int, default=1, help="torch compute threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    results: dict[str, Any] = {}
    for size in args.sizes:
        rows_per_table, batch = SIZES[size]
        w = workload(rows_per_table, batch, args.rounds + 2)
        results[size] = {}
        for part in args.parts:
            results[size][part] = r = PARTS[part](w, args.rounds)
            if part == "split":
                h = r["host_seconds_per_step"]
                print(f"{size} split: previous {r['previous']['median'] * 1e3:.2f} ms, "
                      f"plan_minibatch {r['plan_minibatch']['median'] * 1e3:.2f} ms "
                      f"({r['speedup']:.2f}x); host time on the step: made on it "
                      f"{h['made on the step']['median'] * 1e3:.2f} ms, prefetched "
                      f"{h['prefetched']['median'] * 1e3:.2f} ms")
            elif part == "gather":
                print(f"{size} gather: previous {r['previous gather']['median'] * 1e3:.2f} ms, "
                      f"fused {r['fused gather']['median'] * 1e3:.2f} ms "
                      f"({r['gather_speedup']:.2f}x); update previous "
                      f"{r['previous update']['median'] * 1e3:.2f} ms, fused "
                      f"{r['fused update']['median'] * 1e3:.2f} ms ({r['update_speedup']:.2f}x)")
            else:
                for label, c in r.items():
                    print(f"{size} capture, {label} ({c['samples']} samples): eager "
                          f"{c['eager']['median'] * 1e3:.2f} ms, compiled "
                          f"{c['compile']['median'] * 1e3:.2f} ms ({c['speedup']:.2f}x; "
                          f"compile {c['compile_seconds']:.0f} s)")
    write_json(args.out, {"benchmark": "hotline_critical_path", "threads": args.threads,
                          "torch": torch.__version__, "machine": platform.machine(),
                          "processor": platform.processor(), "rounds": args.rounds,
                          "results": results})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
