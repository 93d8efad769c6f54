"""Hotline on a real GPU: parity of the CUDA trainer, measured step times beside the time model.

Three parts, each in its own ``try`` (a failure records its traceback in the JSON and the next
part still runs; the JSON is rewritten after every part, so a run cut short keeps what finished):

* ``equivalence``: the unit tests' small case (``tests/test_hotline.py``: 6 fields x 40 rows,
  D = 8, 6 mini-batches of 64) trained with every scheme on ``--device`` against the CPU trainer;
  max |difference| of the merged table, the dense parameters and the per-step losses. Then the
  benchmark's DLRM workload (26 x 13,000 rows, D = 16, batch 1,024) for a few mini-batches:
  hybrid on the CPU against hybrid and Hotline on the device.
* ``pipeline``: ``benchmarks/hotline_pipeline.py``'s workload (numpy ``default_rng(0)``; 26 tables,
  key column t = ``(zipf(1.2) % R) + R t``; DLRM D = 16, bottom 512-256-64, top 512-256; a hot
  set from a 5% profile holding 12% of the table bytes) at R = 13,000 / batch 1,024 and
  R = 100,000 / batch 4,096: hybrid (every row in pinned host memory), Hotline, Hotline without
  the overlap and accelerator-only (every row in device memory), the same mini-batches,
  interleaved step by step, each eager and with every ``--captures`` (``cuda_graphs``: the
  micro-batch step captured by ``torch.compile(mode="reduce-overhead")``; on CUDA by default);
  per-step wall time (mean / median / p95 / min / max), the speedups per round of steps,
  Hotline's host split (made on the planner thread: its seconds and the step's wait for it), and
  the time model's seconds for the same mini-batches (this machine's rates fitted from the
  measured spans, eager and per capture: the launch cost ``step_overhead_us`` and the split
  ``host_split_ns_per_lookup`` refitted; and the stage's V100 / A100 servers).
* ``stage``: the ``hotline`` stage's own functions (``workbench.experiments.hotline``: every
  scheme trained one epoch with test AUC, ``fit_machine``, the modelled seconds per scheme, the
  budget x batch sweep) on a synthetic zipf split of the same shape, on ``--device``.

Usage (the GPU check of docs/hotline_cuda.md)::

    python benchmarks/hotline_cuda.py --device cuda --out results/hotline_cuda/run3/run.json
    python benchmarks/hotline_cuda.py   # default: cuda, benchmarks/results/hotline_cuda.json; on a
                                        # machine without CUDA it says so and exits 0 (make bench)
    python benchmarks/hotline_cuda.py --device cpu --size tiny     # a smoke test of the script
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
import yaml

from workbench.cluster.accelerator_time import step_seconds
from workbench.cluster.config import HardwareConfig
from workbench.data.popularity import (
    FLOAT_BYTES,
    hot_keys,
    hot_mask,
    popular_mask,
    profile_counts,
)
from workbench.models.config import ModelConfig
from workbench.models.ctr import build_model, flops_per_sample
from workbench.training.capture import CAPTURES, EAGER, Capture
from workbench.training.components import ModelSpec
from workbench.training.hotline import StepRecord, TieredTrainer, microbatch_counts
from workbench.training.hotline_epoch import Schedule, train_scheme
from workbench.training.trainer import Split
from workbench.utils.io import write_json

REPO = Path(__file__).resolve().parent.parent
HARDWARE = ("v100_pcie3", "a100_pcie4")
VARIANTS = ("hybrid", "hotline", "hotline_sequential", "accel_only")
MODEL_KIND = {"hybrid": "hybrid", "hotline": "hotline", "hotline_sequential": "hotline",
              "accel_only": "hot"}
STAGE_MODEL = ModelConfig(name="dlrm", embedding_dim=16, bottom_mlp=[512, 256, 64],
                          top_mlp=[512, 256], optimizer="adam", lr_dense=1e-3, lr_sparse=0.01)
TINY_MODEL = ModelConfig(name="dlrm", embedding_dim=8, bottom_mlp=[16], top_mlp=[16],
                         optimizer="adam", lr_dense=1e-3, lr_sparse=0.05)
SIZES: dict[str, dict[str, Any]] = {
    "full": {
        "model": STAGE_MODEL, "parity_steps": 8,
        "workloads": {
            "r13k_b1024": {"tables": 26, "rows_per_table": 13_000, "batch": 1024, "zipf": 1.2,
                           "steps": 50, "warmup": 5},
            "r100k_b4096": {"tables": 26, "rows_per_table": 100_000, "batch": 4096,
                            "zipf": 1.2, "steps": 30, "warmup": 5}},
        "stage": {"tables": 26, "rows_per_table": 13_000, "zipf": 1.2, "train_batches": 60,
                  "test": 8192, "batch_size": 1024, "batch_sweep": [1024, 4096],
                  "sweep_steps": 8, "sweep_warmup": 2, "online_every": 20, "eval_every": 20,
                  "fae_phase_batches": 8}},
    "tiny": {
        "model": TINY_MODEL, "parity_steps": 3,
        "workloads": {
            "tiny": {"tables": 8, "rows_per_table": 500, "batch": 128, "zipf": 1.2,
                     "steps": 6, "warmup": 1}},
        "stage": {"tables": 8, "rows_per_table": 500, "zipf": 1.2, "train_batches": 8,
                  "test": 256, "batch_size": 128, "batch_sweep": [128], "sweep_steps": 2,
                  "sweep_warmup": 1, "online_every": 3, "eval_every": 4,
                  "fae_phase_batches": 2}},
}
N_DENSE = 13
BUDGET_FRACTION = 0.12


# -- helpers --------------------------------------------------------------------------------------
def stats(samples: list[float]) -> dict[str, float | int]:
    """Mean, median, p95, min, max, n of repeated measurements."""
    a = np.asarray(samples, dtype=float)
    if a.size == 0:
        return {"n": 0}
    return {"n": int(a.size), "mean": float(a.mean()), "median": float(np.median(a)),
            "p95": float(np.percentile(a, 95)), "min": float(a.min()), "max": float(a.max()),
            "std": float(a.std(ddof=1)) if a.size > 1 else 0.0}


def hardware() -> dict[str, HardwareConfig]:
    """The stage's configured servers (``workbench/conf/hardware/<name>.yaml``)."""
    out = {}
    for name in HARDWARE:
        raw = yaml.safe_load((REPO / "workbench" / "conf" / "hardware" / f"{name}.yaml")
                             .read_text())
        out[name] = HardwareConfig(**raw)
    return out


def env_info(device: str) -> dict[str, Any]:
    info: dict[str, Any] = {
        "python": sys.version.split()[0], "platform": platform.platform(),
        "machine": platform.machine(), "torch": torch.__version__,
        "numpy": np.__version__, "pandas": pd.__version__,
        "cuda_available": torch.cuda.is_available(), "torch_cuda": torch.version.cuda,
        "device": device, "cpu_count": os.cpu_count(),
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "float32_matmul_precision": torch.get_float32_matmul_precision()}
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        info.update({"gpu": torch.cuda.get_device_name(0), "gpu_memory_gib": p.total_memory
                     / 2**30, "multiprocessors": p.multi_processor_count,
                     "capability": f"{p.major}.{p.minor}",
                     "cudnn": torch.backends.cudnn.version()})
    return info


def zipf_data(w: dict, n: int, seed: int = 0) -> tuple[Split, np.ndarray]:
    """``n`` samples of the workload (hotline_pipeline.py's generator; labels from a fixed
    logistic model of the keys and the first dense feature, so AUC means something) and the
    initial table."""
    rng = np.random.default_rng(seed)
    rows_t, tables = w["rows_per_table"], w["tables"]
    keys = np.stack([(rng.zipf(w["zipf"], n) % rows_t) + rows_t * t for t in range(tables)],
                    axis=1).astype(np.int64)
    dense = rng.normal(size=(n, N_DENSE)).astype(np.float32)
    weights = np.random.default_rng(99).normal(scale=0.5, size=rows_t * tables)
    logit = weights[keys].sum(axis=1) / np.sqrt(tables) + dense[:, 0] - 1.0
    labels = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.float32)
    return Split(dense, keys, labels), rng


def max_diff(a: np.ndarray | list[np.ndarray], b: np.ndarray | list[np.ndarray]) -> float:
    if isinstance(a, list):
        return max(float(np.abs(p - q).max()) for p, q in zip(a, b, strict=True))
    return float(np.abs(np.asarray(a) - np.asarray(b)).max())


# -- part 1: equivalence --------------------------------------------------------------------------
def _unit_case() -> tuple[ModelSpec, Split, Split, np.ndarray, np.ndarray]:
    """tests/test_hotline.py's data: 6 fields x 40 rows, D = 8, 6 mini-batches of 64."""
    f, vocab, dim, batch, steps = 6, 40, 8, 64, 6
    rows = f * vocab

    def split(n: int, seed: int) -> Split:
        rng = np.random.default_rng(seed)
        local = np.minimum(rng.zipf(2.0, size=(n, f)) - 1, vocab - 1)
        keys = (local + np.arange(f) * vocab).astype(np.int64)
        dense = rng.random((n, N_DENSE), dtype=np.float32)
        weights = np.random.default_rng(99).normal(size=rows)
        logit = weights[keys].sum(axis=1) + 2 * dense[:, 0] - 1
        labels = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.float32)
        return Split(dense, keys, labels)

    train, test = split(steps * batch, 0), split(128, 1)
    table = np.random.default_rng(5).uniform(-0.05, 0.05, (rows, dim)).astype(np.float32)
    hot = hot_keys(np.bincount(train.keys.ravel(), minlength=rows), 24 * 4 * dim, dim)
    return ModelSpec(TINY_MODEL, N_DENSE, f, rows), train, test, table, hot


def _train(spec: ModelSpec, train: Split, test: Split, table: np.ndarray, scheme: str,
           hot: np.ndarray, device: str, batch: int, overlap: bool = True,
           is_hot: np.ndarray | None = None, capture: Capture = EAGER,
           **schedule: Any) -> dict[str, Any]:
    trainer = TieredTrainer(spec, table, hot, device=device, seed=0, overlap=overlap,
                            capture=capture)
    try:
        metrics, steps = train_scheme(scheme, trainer, train, test,
                                      Schedule(batch, 3, **schedule), is_hot=is_hot)
        return {"table": trainer.store.table().copy(),
                "params": [p.detach().cpu().numpy().copy() for p in trainer.model.parameters()],
                "losses": np.array([s.loss for s in steps]), "auc": metrics["auc"].to_numpy(),
                "steps": steps, "hot_device": trainer.store.hot.device.type,
                "host_pinned": bool(trainer.store.host.is_pinned()),
                "param_device": next(trainer.model.parameters()).device.type}
    finally:
        trainer.close()


def _compare(a: dict, b: dict) -> dict[str, float]:
    return {"table": max_diff(a["table"], b["table"]), "params": max_diff(a["params"],
                                                                          b["params"]),
            "losses": max_diff(a["losses"], b["losses"]), "auc": max_diff(a["auc"], b["auc"])}


def part_equivalence(device: str, size: dict, captures: list[str]) -> dict[str, Any]:
    spec, train, test, table, hot = _unit_case()
    rows, batch = spec.table_rows, 64
    none, every = np.zeros(0, np.int64), np.arange(rows)
    is_hot = hot_mask(hot, rows)
    cpu = {"hybrid": _train(spec, train, test, table, "hybrid", none, "cpu", batch),
           "fae": _train(spec, train, test, table, "fae", hot, "cpu", batch, is_hot=is_hot,
                         fae_phase_batches=2)}
    runs = {
        "hybrid": ("hybrid", none, True, {}),
        "hotline": ("hotline", hot, True, {}),
        "hotline_sequential": ("hotline", hot, False, {}),
        "accel_only": ("accel_only", every, True, {}),
        "hotline_online": ("hotline", none, True, {"online_every": 2,
                                                   "budget_bytes": 24 * 4 * 8}),
        "fae": ("fae", hot, True, {"fae_phase_batches": 2}),
        **{f"{s}:{c}": (s, h, True, {"capture": CAPTURES[c]}) for c in captures
           for s, h in (("hybrid", none), ("hotline", hot), ("accel_only", every))},
    }
    out: dict[str, Any] = {"tolerance": 1e-4, "case": "tests/test_hotline.py (6 x 40 rows, "
                           "D 8, 6 mini-batches of 64)", "schemes": {}}
    dev: dict[str, dict] = {}
    for name, (scheme, h, overlap, sched) in runs.items():
        try:
            dev[name] = r = _train(spec, train, test, table, scheme, h, device, batch,
                                   overlap=overlap, is_hot=is_hot, **sched)
            ref = cpu["fae"] if name == "fae" else cpu["hybrid"]
            entry: dict[str, Any] = {"vs_cpu": _compare(r, ref),
                                     "placement": {k: r[k] for k in ("hot_device", "host_pinned",
                                                                     "param_device")}}
            if name != "fae" and "hybrid" in dev:
                entry["vs_device_hybrid"] = _compare(r, dev["hybrid"])
            phases: dict[str, list[float]] = {}
            for s in r["steps"]:
                for sp in s.spans:
                    phases.setdefault(f"{sp.lane}:{sp.phase}", []).append(sp.end - sp.start)
            entry["span_median_s"] = {k: float(np.median(v)) for k, v in phases.items()}
            entry["popular_per_step"] = [s.popular for s in r["steps"]]
            entry["passed"] = max(entry["vs_cpu"]["table"], entry["vs_cpu"]["params"],
                                  entry["vs_cpu"]["losses"]) <= out["tolerance"]
        except Exception:
            entry = {"error": traceback.format_exc()}
        out["schemes"][name] = entry
    out["all_passed"] = all(e.get("passed", False) for e in out["schemes"].values())

    # the stage's model at the benchmark's size: a few mini-batches, CPU hybrid vs the device
    try:
        w = {**size["workloads"][next(iter(size["workloads"]))]}
        steps, model = size["parity_steps"], size["model"]
        rows = w["tables"] * w["rows_per_table"]
        data, rng = zipf_data(w, w["batch"] * steps)
        table = rng.uniform(-0.05, 0.05, (rows, model.embedding_dim)).astype(np.float32)
        hot = hot_keys(profile_counts(data.keys, rows, 0.05, rng),
                       int(BUDGET_FRACTION * rows * model.embedding_dim * 4),
                       model.embedding_dim)
        mspec = ModelSpec(model, N_DENSE, w["tables"], rows)
        test = Split(data.dense[: w["batch"]], data.keys[: w["batch"]],
                     data.labels[: w["batch"]])
        ref = _train(mspec, data, test, table, "hybrid", np.zeros(0, np.int64), "cpu",
                     w["batch"])
        moved = max_diff(ref["table"], table)
        big: dict[str, Any] = {"workload": w, "steps": steps, "table_moved_max": moved}
        for name, scheme, h in (("hybrid", "hybrid", np.zeros(0, np.int64)),
                                ("hotline", "hotline", hot),
                                ("accel_only", "accel_only", np.arange(rows))):
            r = _train(mspec, data, test, table, scheme, h, device, w["batch"])
            big[name] = _compare(r, ref)
        out["stage_model"] = big
    except Exception:
        out["stage_model"] = {"error": traceback.format_exc()}
    return out


# -- part 2: timed pipeline -----------------------------------------------------------------------
def _modelled_steps(records: dict[str, list[StepRecord]], spans_ok: bool, row_bytes: int,
                    flops: float) -> dict[str, Any]:
    """The time model on every measured step: this machine fitted from the spans (the stage's
    ``fit_machine``) and the configured servers (rows counted per lookup, the stage's default,
    and per distinct row)."""
    from workbench.experiments.hotline import fit_machine, span_frame, step_frame

    models: dict[str, tuple[HardwareConfig, str]] = {}
    fitted = None
    if spans_ok:
        steps = pd.concat([step_frame(v, r) for v, r in records.items()], ignore_index=True)
        spans = pd.concat([span_frame(v, r) for v, r in records.items()], ignore_index=True)
        fitted = fit_machine(steps, spans, row_bytes, flops)
        models["this_machine"] = (fitted, "unique")
    for name, hw in hardware().items():
        models[f"{name}:lookups"] = (hw, "lookups")
        models[f"{name}:unique"] = (hw, "unique")
    out: dict[str, Any] = {"fitted_this_machine": dataclasses.asdict(fitted) if fitted else None,
                           "per_variant": {}}
    for v, recs in records.items():
        per = {}
        for name, (hw, unit) in models.items():
            per[name] = stats([step_seconds(MODEL_KIND[v], hw, row_bytes, flops,
                                            **r.counts.model_inputs(unit))  # type: ignore[union-attr]
                               for r in recs])
        out["per_variant"][v] = per
    return out


def _load_module(path: Path) -> Any:
    """Another version of ``workbench/training/hotline.py`` (``--compare-with``), imported under
    its own name, to time it beside this one on the same machine and mini-batches."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("hotline_compared", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["hotline_compared"] = module
    spec.loader.exec_module(module)
    return module


def run_workload(w: dict, model: ModelConfig, device: str, compare: Any = None,
                 captures: tuple[str, ...] = ()) -> dict[str, Any]:
    batch, dim = w["batch"], model.embedding_dim
    steps, warmup = w["steps"], w["warmup"]
    rows = w["tables"] * w["rows_per_table"]
    data, rng = zipf_data(w, batch * (steps + warmup))
    table = rng.uniform(-0.05, 0.05, (rows, dim)).astype(np.float32)
    hot = hot_keys(profile_counts(data.keys, rows, 0.05, rng),
                   int(BUDGET_FRACTION * rows * dim * 4), dim)
    is_hot = hot_mask(hot, rows)
    spec = ModelSpec(model, N_DENSE, w["tables"], rows)
    hot_sets = {"hybrid": np.zeros(0, np.int64), "hotline": hot, "hotline_sequential": hot,
                "accel_only": np.arange(rows)}
    trainers = {v: TieredTrainer(spec, table, hot_sets[v], device=device, seed=0,
                                 overlap=v != "hotline_sequential") for v in VARIANTS}
    for c in captures:  # the same schemes with the micro-batch step captured
        for v in ("hybrid", "hotline", "accel_only"):
            trainers[f"{v}:{c}"] = TieredTrainer(spec, table, hot_sets[v], device=device,
                                                 seed=0, capture=CAPTURES[c])
    if compare is not None:  # the other version's hybrid, Hotline and accelerator-only
        for v in ("hybrid", "hotline", "accel_only"):
            trainers[f"{v}@compared"] = compare.TieredTrainer(spec, table, hot_sets[v],
                                                              device=device, seed=0)
    step_fn = {"hybrid": "step_hybrid", "hotline": "step_hotline",
               "hotline_sequential": "step_hotline", "accel_only": "step_hot"}
    records: dict[str, list[StepRecord]] = {v: [] for v in trainers}
    errors: dict[str, str] = {}
    capturing: dict[str, int] = {}  # steps that captured a new graph (left out of the timing)
    try:
        for t in range(steps + warmup):
            sl = slice(t * batch, (t + 1) * batch)
            args = (data.dense[sl], data.keys[sl], data.labels[sl])
            following = data.keys[(t + 1) * batch:(t + 2) * batch] if t + 1 < steps + warmup \
                else None  # Hotline plans the next mini-batch while this one trains
            counts = microbatch_counts(data.keys[sl], is_hot)
            for v, tr in trainers.items():
                if v in errors:
                    continue
                graphs = len(getattr(getattr(tr, "micro", None), "shapes", ()))
                try:
                    base = v.split("@")[0].split(":")[0]
                    if base.startswith("hotline") and "@" not in v:
                        rec = tr.step_hotline(*args, following)
                    else:
                        rec = getattr(tr, step_fn[base])(*args)
                except Exception:
                    errors[v] = traceback.format_exc()
                    continue
                rec.counts = counts
                if len(getattr(getattr(tr, "micro", None), "shapes", ())) > graphs:
                    capturing[v] = capturing.get(v, 0) + 1  # compiled a shape: not timed
                elif t >= warmup:
                    records[v].append(rec)
    finally:
        for tr in trainers.values():
            tr.close()
    ok = {v: r for v, r in records.items() if r}
    walls = {v: [r.wall_s for r in recs] for v, recs in ok.items()}
    out: dict[str, Any] = {
        "workload": {**w, "table_rows": rows, "table_mb": rows * dim * 4 / 2**20,
                     "budget_fraction": BUDGET_FRACTION, "hot_rows": int(hot.size),
                     "popular_fraction": float(popular_mask(data.keys, is_hot).mean())},
        "errors": errors,
        "step_s": {v: stats(x) for v, x in walls.items()},
        "samples_per_s": {v: stats([batch / s for s in x]) for v, x in walls.items()}}
    # speedups: per step (paired) and per round (5 rounds of consecutive steps)
    rounds = 5
    speed: dict[str, Any] = {}
    for num, den in (("hybrid", "hotline"), ("accel_only", "hotline"),
                     ("hotline_sequential", "hotline"), ("hybrid", "accel_only")):
        if num in walls and den in walls:
            a, b = np.asarray(walls[num]), np.asarray(walls[den])
            chunks = [(np.median(x), np.median(y)) for x, y in
                      zip(np.array_split(a, rounds), np.array_split(b, rounds), strict=True)]
            speed[f"{num}/{den}"] = {"median_ratio": float(np.median(a) / np.median(b)),
                                     "mean_ratio": float(a.mean() / b.mean()),
                                     "per_step": stats(list(a / b)),
                                     "per_round": stats([x / y for x, y in chunks])}
    for c in captures:  # eager over captured (what the capture saves), and the captured ratios
        pairs = [(v, f"{v}:{c}") for v in ("hybrid", "hotline", "accel_only")]
        for num, den in [*pairs, (f"hybrid:{c}", f"hotline:{c}"),
                         (f"accel_only:{c}", f"hotline:{c}")]:
            if num in walls and den in walls:  # steps that captured a graph are left out:
                a, b = np.asarray(walls[num]), np.asarray(walls[den])  # medians, not pairs
                speed[f"{num}/{den}"] = {"median_ratio": float(np.median(a) / np.median(b)),
                                         "mean_ratio": float(a.mean() / b.mean())}
    for v in ("hybrid", "hotline", "accel_only"):  # the compared version over this one
        num, den = f"{v}@compared", v
        if num in walls and den in walls:
            a, b = np.asarray(walls[num]), np.asarray(walls[den])
            speed[f"{num}/{den}"] = {"median_ratio": float(np.median(a) / np.median(b)),
                                     "mean_ratio": float(a.mean() / b.mean()),
                                     "per_step": stats(list(a / b))}
    out["ratios"] = speed
    # where Hotline's time goes, and whether the cold upload really overlapped the popular compute
    phases: dict[str, dict[str, list[float]]] = {}
    overlap = []
    for v, recs in ok.items():
        for r in recs:
            for s in r.spans:
                phases.setdefault(v, {}).setdefault(f"{s.lane}:{s.phase}", []).append(
                    s.end - s.start)
            if v == "hotline":
                up = [s for s in r.spans if s.phase == "upload non-popular"]
                comp = [s for s in r.spans if s.phase == "compute popular"]
                if up and comp:
                    lo, hi = max(up[0].start, comp[0].start), min(up[0].end, comp[0].end)
                    overlap.append(max(0.0, hi - lo) / max(up[0].end - up[0].start, 1e-12))
    out["span_median_s"] = {v: {k: float(np.median(x)) for k, x in p.items()}
                            for v, p in phases.items()}
    out["hotline_split_s"] = {v: stats([r.plan_s for r in recs]) for v, recs in ok.items()
                              if any(getattr(r, "plan_s", 0.0) > 0 for r in recs)}
    out["graphs_captured"] = {v: len(tr.micro.shapes) for v, tr in trainers.items()
                              if hasattr(tr, "micro") and ":" in v}
    out["capturing_steps_left_out"] = capturing
    out["hotline_upload_overlapped_fraction"] = stats(overlap)
    flops = 3.0 * flops_per_sample(build_model(model, N_DENSE, w["tables"]), N_DENSE,
                                   w["tables"], dim)
    out["train_flops_per_sample"] = flops
    for group in ("", *captures):  # the model fitted to the eager runs and to each capture
        key = "modelled_step_s" + (f":{group}" if group else "")
        try:
            mine = ({v: r for v, r in ok.items() if "@" not in v and ":" not in v} if not group
                    else {v.split(":")[0]: r for v, r in ok.items() if v.endswith(f":{group}")})
            out[key] = _modelled_steps(mine, "hybrid" in mine, FLOAT_BYTES * dim, flops)
        except Exception:
            out[key] = {"error": traceback.format_exc()}
    return out


def part_pipeline(device: str, size: dict, captures: list[str],
                  compare: Path | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"compared_with": str(compare) if compare else None,
                           "captures": captures}
    module = _load_module(compare) if compare else None
    for name, w in size["workloads"].items():
        try:
            out[name] = run_workload(w, size["model"], device, module, tuple(captures))
        except Exception:
            out[name] = {"error": traceback.format_exc()}
    return out


# -- part 3: the stage's functions -----------------------------------------------------------------
def part_stage(device: str, size: dict, captures: list[str]) -> dict[str, Any]:
    from workbench.experiments.config import HotlineConfig
    from workbench.experiments.hotline import (
        LABELS,
        Rig,
        hot_tier,
        sweep_budgets,
        timeline_frame,
        train_and_model,
    )

    s, model = size["stage"], size["model"]
    exp = HotlineConfig(device=device, batch_size=s["batch_size"], batch_sweep=s["batch_sweep"],
                        sweep_steps=s["sweep_steps"], sweep_warmup=s["sweep_warmup"],
                        online_every=s["online_every"], eval_every=s["eval_every"],
                        fae_phase_batches=s["fae_phase_batches"], timeline_step=2, link="off")
    n = s["train_batches"] * s["batch_size"]
    data, _ = zipf_data(s, n + s["test"], seed=1)
    train = Split(data.dense[:n], data.keys[:n], data.labels[:n])
    test = Split(data.dense[n:], data.keys[n:], data.labels[n:])
    rows, dim = s["tables"] * s["rows_per_table"], model.embedding_dim
    row_bytes = FLOAT_BYTES * dim
    shape = (N_DENSE, s["tables"])
    seed = 0
    flops, table, counts_full, budget, hot = hot_tier(exp, model, shape, rows, train.keys, seed)
    rig = Rig(exp, ModelSpec(model, *shape, rows), table, device, seed)
    out: dict[str, Any] = {"setting": {**s, "table_rows": rows, "budget_bytes": budget,
                                       "hot_rows": int(hot.size), "popular_fraction": float(
                                           popular_mask(train.keys, hot_mask(hot, rows)).mean()),
                                       "train_flops_per_sample": flops}}
    started = time.perf_counter()
    trained = train_and_model(rig, hot, budget, train, test, hardware(), row_bytes, flops)
    out["train_seconds"] = time.perf_counter() - started
    steps, spans, metrics = trained.steps, trained.spans, trained.metrics
    models, machine = trained.models, trained.machine
    finals = metrics.groupby("scheme").tail(1).set_index("scheme")
    totals = steps.groupby("scheme")[["wall_s", *[f"model_{m}_s" for m in models]]].sum()
    runs = {}
    for name in totals.index:
        walls = steps.loc[steps["scheme"] == name, "wall_s"].tolist()
        runs[name] = {"label": LABELS[name], "steps": len(walls),
                      "final_auc": float(finals.loc[name, "auc"]),
                      "final_logloss": float(finals.loc[name, "logloss"]),
                      "measured_s": float(totals.loc[name, "wall_s"]),
                      "measured_step_s": stats(walls),
                      **{f"model_{m}_s": float(totals.loc[name, f"model_{m}_s"])
                         for m in models}}
    out["runs"] = runs
    out["speedup_measured"] = {k: runs["hybrid"]["measured_s"] / v["measured_s"]
                               for k, v in runs.items()}
    out["speedup_modelled"] = {m: {k: runs["hybrid"][f"model_{m}_s"] / v[f"model_{m}_s"]
                                   for k, v in runs.items()} for m in models}
    out["fitted_this_machine"] = dataclasses.asdict(machine)
    timeline = timeline_frame(steps, spans, models, row_bytes, flops, exp.timeline_step)
    out["timeline_rows"] = len(timeline)
    measured_tl = timeline[timeline["source"] == "measured"]
    out["timeline_measured"] = measured_tl[["scheme", "lane", "phase", "start", "end"]].to_dict(
        "records")
    started = time.perf_counter()
    sweep = sweep_budgets(rig, counts_full, train, models, row_bytes, flops)
    out["sweep_seconds"] = time.perf_counter() - started
    out["sweep"] = sweep.to_dict("records")
    return out


# -- main -----------------------------------------------------------------------------------------
PARTS = {"equivalence": part_equivalence, "pipeline": part_pipeline, "stage": part_stage}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    parser.add_argument("--size", default="full", choices=list(SIZES))
    parser.add_argument("--parts", nargs="+", default=list(PARTS), choices=list(PARTS))
    default_out = (Path(os.environ["OUT"]) / "hotline_cuda.json" if os.environ.get("OUT")
                   else REPO / "benchmarks" / "results" / "hotline_cuda.json")
    parser.add_argument("--out", type=Path, default=default_out)
    parser.add_argument("--captures", nargs="*", default=None, choices=list(CAPTURES)[1:],
                        help="capture variants of the equivalence and pipeline parts (default: "
                             "cuda_graphs on CUDA, none on the CPU)")
    parser.add_argument("--compare-with", type=Path, default=None,
                        help="another version of workbench/training/hotline.py: the pipeline "
                             "part times its hybrid, Hotline and accelerator-only beside these")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():  # make bench on a CPU machine
        print("hotline_cuda: torch sees no CUDA device; skipped (docs/hotline_cuda.md has the "
              "H200 runs, results/hotline_cuda/)")
        return
    captures = (args.captures if args.captures is not None
                else ["cuda_graphs"] if args.device == "cuda" else [])
    result: dict[str, Any] = {"benchmark": "hotline_cuda", "argv": sys.argv[1:],
                              "size": args.size, "captures": captures, "parts": {}}
    try:
        result["env"] = env_info(args.device)
    except Exception:
        result["env"] = {"error": traceback.format_exc()}
    write_json(args.out, result)
    for name in args.parts:
        begin = time.perf_counter()
        print(f"== {name}", flush=True)
        try:
            extra = {"compare": args.compare_with} if name == "pipeline" else {}
            result["parts"][name] = PARTS[name](args.device, SIZES[args.size], captures,
                                                **extra)
        except Exception:
            result["parts"][name] = {"error": traceback.format_exc()}
            print(result["parts"][name]["error"], flush=True)
        result["parts"][name]["seconds"] = time.perf_counter() - begin
        print(f"   {name}: {result['parts'][name]['seconds']:.1f} s", flush=True)
        write_json(args.out, result)
    summarize(result)
    print(f"wrote {args.out}")


def summarize(result: dict[str, Any]) -> None:
    """A few lines of the result on stdout."""
    eq = result["parts"].get("equivalence", {})
    for name, e in eq.get("schemes", {}).items():
        print(f"parity {name}: " + (f"passed={e['passed']} vs_cpu={e['vs_cpu']}"
                                    if "error" not in e else "ERROR " + e["error"][-400:]))
    if "stage_model" in eq:
        print(f"parity at the stage's size: {eq['stage_model']}")
    for name, r in result["parts"].get("pipeline", {}).items():
        if not isinstance(r, dict):
            continue
        if "step_s" not in r:
            print(f"pipeline {name}: {r}")
            continue
        print(f"pipeline {name}: " + ", ".join(
            f"{v} {s['median'] * 1e3:.2f} ms" for v, s in r["step_s"].items())
            + f"; errors {list(r['errors'])}")
        print("  ratios (median): " + ", ".join(f"{k} {v['median_ratio']:.2f}"
                                                for k, v in r["ratios"].items()))
        for v, sp in r.get("hotline_split_s", {}).items():
            print(f"  {v}: host split {sp['median'] * 1e3:.2f} ms (median), wait "
                  f"{r['span_median_s'][v].get('host:wait for classify', 0.0) * 1e3:.2f} ms")
        if r.get("graphs_captured"):
            print(f"  graphs captured: {r['graphs_captured']}")
        for key in (k for k in r if k.startswith("modelled_step_s")):
            m = r[key]
            if "error" in m:
                print(f"  {key}: ERROR {m['error'][-300:]}")
                continue
            fit = m.get("fitted_this_machine") or {}
            if fit:
                print(f"  {key} refit: launch {fit['step_overhead_us']:.0f} us, split "
                      f"{fit['host_split_ns_per_lookup']:.1f} ns/lookup")
            for v, per in m.get("per_variant", {}).items():
                print(f"  {key} {v}: " + ", ".join(f"{k} {s['median'] * 1e3:.2f} ms"
                                                   for k, s in per.items()))
    st = result["parts"].get("stage", {})
    if "runs" in st:
        for name, r in st["runs"].items():
            print(f"stage {name}: AUC {r['final_auc']:.4f} measured {r['measured_s']:.3f} s; "
                  + ", ".join(f"{k} {v:.3f}" for k, v in r.items() if k.startswith("model_")))


if __name__ == "__main__":
    main()
