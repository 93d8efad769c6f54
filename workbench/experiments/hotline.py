r"""Hotline experiments: popular inputs, the micro-batch pipeline against its baselines, timelines.

Our formalisation of Hotline (ISCA 2024; the time model:
`workbench/cluster/accelerator_time.py`): the paper's method section is unavailable, the pipeline
follows its abstracts and FAE's public profiler. Two stages:

* ``hotline_popularity@<ds>`` ([`popularity`][]): for each hot-memory budget (a fraction of the
  table bytes; FAE's 128 / 256 / 512 MiB at full Criteo Kaggle scale among them), the hot set of
  a ``profile_rate`` profile and of a full pass, the share of inputs that are popular and of
  lookups that hit -> ``results/hotline_popularity/<ds>/``.
* ``hotline`` ([`run`][]): on ``exp.dataset``, MEASURED on this machine (CPU threads, or CUDA):

      profile 5% -> hot set at budget_mb (scaled) -> for each scheme: train one epoch for real
      (hybrid, hotline [+ online re-profiling], fae, accel_only), test AUC every eval_every
      mini-batches, every step's phases (spans) and micro-batch sizes
      -> this machine's rates fitted from the spans (compute a + b n, gather / link bandwidths)
      -> the time model (workbench.cluster.accelerator_time) on every step's sizes, for this
         machine (fitted) and each configured server (V100 / A100-class, assumed rates)
      sweep: budgets x batch sizes, hybrid vs hotline (and hotline without overlap), measured
         medians and modelled sums on the same mini-batches

Outputs (``results/hotline/<ds>/``): ``metrics.csv`` (AUC against measured and modelled time),
``steps.csv`` (every step: sizes, measured wall, modelled seconds per server), ``timeline.csv``
(one mini-batch per scheme: measured spans and modelled phases), ``sweep.csv``,
``conditions.csv`` (every server's modelled speedup at each host rate of ``host_rate_sweep`` in
both rows units: the claims' assumed parameters), ``summary.json``. Wall-clock columns are
measured and change from run to run (AUC, sizes and the modelled seconds on the configured
servers do not).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
import torch

from workbench.cluster.accelerator_time import step_seconds, step_timeline, sync_seconds
from workbench.cluster.config import HardwareConfig
from workbench.data.config import DatasetConfig
from workbench.data.keys import read_keys, table_rows
from workbench.data.popularity import (
    FLOAT_BYTES,
    hot_keys,
    hot_mask,
    popular_mask,
    profile_counts,
    scaled_budget_bytes,
)
from workbench.data.schema import DatasetMeta
from workbench.experiments.config import HotlineConfig
from workbench.experiments.sizing import require_samples
from workbench.models.config import ModelConfig
from workbench.models.ctr import build_model, flops_per_sample
from workbench.training.capture import CAPTURES
from workbench.training.components import ModelSpec
from workbench.training.hotline import (
    MicroBatchCounts,
    StepRecord,
    TieredTrainer,
    microbatch_counts,
)
from workbench.training.hotline_epoch import Schedule, train_scheme
from workbench.training.trainer import load_split

log = logging.getLogger(__name__)

LABELS = {"hybrid": "CPU-GPU hybrid", "hotline": "Hotline", "hotline_online": "Hotline (online)",
          "fae": "FAE", "accel_only": "Accelerator-only", "hotline_sequential":
          "Hotline, no overlap"}
THIS_MACHINE = "this_machine"
COMPUTE_PHASES = {"compute mini-batch": "samples", "compute popular": "popular",
                  "compute non-popular": "non_popular"}


# -- popularity ---------------------------------------------------------------------------------
def popularity(processed: Path, out: Path, exp: HotlineConfig, *, dim: int, seed: int) -> None:
    """The ``hotline_popularity`` stage on one dataset; writes ``out`` whole.

    Args:
        processed: ``data/processed/<ds>``.
        out: ``results/hotline_popularity/<ds>``.
        exp: the budgets and the profile rate.
        dim: embedding width of the model (a hot row is ``4 dim`` bytes).
        seed: seeds the profile's draw.

    Raises:
        ValueError: the train split has no rows.
    """
    from workbench.data.pipeline import unavailable_result
    from workbench.utils.io import atomic_dir, write_json

    with atomic_dir(out) as tmp:
        if unavailable_result(processed, tmp / "summary.json"):
            return
        meta = DatasetMeta.read(processed)
        keys = read_keys(processed, meta)
        if keys.shape[0] == 0:
            raise ValueError(f"{processed}: the train split has no rows; nothing to profile")
        rows = table_rows(meta)
        counts = {"profile": profile_counts(keys, rows, exp.profile_rate,
                                            np.random.default_rng(seed)),
                  "full pass": np.bincount(keys.ravel(), minlength=rows).astype(np.int64)}
        fae = {scaled_budget_bytes(mb, exp.full_scale_rows, exp.full_scale_dim, rows, dim)
               / (rows * dim * FLOAT_BYTES): mb for mb in exp.budget_mb_full}
        records = []
        for profile, c in counts.items():
            for fraction in sorted(set(exp.popularity_fractions) | set(fae)):
                budget = int(fraction * rows * dim * FLOAT_BYTES)
                mask = hot_mask(hot_keys(c, budget, dim), rows)
                records.append({
                    "dataset": processed.name, "profile": profile, "budget_fraction": fraction,
                    "budget_bytes": budget, "hot_rows": int(mask.sum()),
                    "popular_fraction": float(popular_mask(keys, mask).mean()),
                    "lookup_hit_share": float(mask[keys].mean()),
                    "fae_budget_mb": fae.get(fraction, float("nan"))})
        frame = pd.DataFrame(records)
        frame.to_csv(tmp / "popularity.csv", index=False, float_format="%.6g")
        write_json(tmp / "summary.json", {
            "dataset": processed.name, "available": True, "train_samples": int(keys.shape[0]),
            "features": int(keys.shape[1]), "table_rows": rows, "dim": dim,
            "profile_rate": exp.profile_rate,
            "profiled_rows_seen": int((counts["profile"] > 0).sum()),
            "rows_seen": int((counts["full pass"] > 0).sum())})
    base = frame[(frame["profile"] == "profile") & (frame["fae_budget_mb"] == exp.budget_mb)]
    log.info("%s: %.1f%% of the inputs popular at FAE's %g MiB (scaled), %d budgets profiled",
             processed.name, 100 * base["popular_fraction"].iloc[0], exp.budget_mb,
             len(frame) // 2)


# -- the time model on measured steps -------------------------------------------------------------
Models = dict[str, tuple[HardwareConfig, str]]  # name -> (server, rows unit)


def modelled_seconds(kind: str, counts: MicroBatchCounts, synced: int, hw: HardwareConfig,
                     unit: str, row_bytes: int, flops: float) -> float:
    return (step_seconds(kind, hw, row_bytes, flops, **counts.model_inputs(unit))
            + sync_seconds(hw, row_bytes, synced))


def host_rate_conditions(steps: pd.DataFrame, records: list[StepRecord],
                         servers: dict[str, HardwareConfig], rates: list[float], row_bytes: int,
                         flops: float) -> pd.DataFrame:
    """Every server's modelled epoch per scheme re-evaluated at each host rate, in both rows
    units: ``server, rows_unit, host_gbps, scheme, model_s, speedup`` (hybrid / scheme).

    ``records`` are the steps of ``steps`` in its row order; the step counts are the ones
    trained, so only the host's rate and the way its rows are counted change.
    """
    schemes = steps["scheme"].to_numpy()
    rows = []
    for name, hw in servers.items():
        for unit in ("lookups", "unique"):
            for rate in rates:
                at = dataclasses.replace(hw, host_gbps=float(rate))
                seconds = pd.Series([modelled_seconds(r.kind, cast(MicroBatchCounts, r.counts),
                                                      r.synced_rows, at, unit, row_bytes, flops)
                                     for r in records])
                totals = seconds.groupby(schemes).sum()
                rows += [{"server": name, "rows_unit": unit, "host_gbps": float(rate),
                          "scheme": scheme, "model_s": float(total),
                          "speedup": float(totals["hybrid"] / total)}
                         for scheme, total in totals.items()]
    return pd.DataFrame(rows)


def step_frame(scheme: str, steps: list[StepRecord]) -> pd.DataFrame:
    """One row per step: sizes, kind, measured wall time, loss, rows moved between tiers."""
    frame = pd.DataFrame([asdict(cast(MicroBatchCounts, s.counts)) for s in steps])
    frame.insert(0, "step", np.arange(1, len(steps) + 1))
    frame.insert(0, "scheme", scheme)
    frame["kind"] = [s.kind for s in steps]
    frame["wall_s"] = [s.wall_s for s in steps]
    frame["loss"] = [s.loss for s in steps]
    frame["synced_rows"] = [s.synced_rows for s in steps]
    frame["plan_s"] = [s.plan_s for s in steps]
    return frame


def span_frame(scheme: str, steps: list[StepRecord]) -> pd.DataFrame:
    return pd.DataFrame([{"scheme": scheme, "step": t, "kind": s.kind, **asdict(span)}
                         for t, s in enumerate(steps, start=1) for span in s.spans])


def fit_machine(steps: pd.DataFrame, spans: pd.DataFrame, row_bytes: int,
                flops: float) -> HardwareConfig:
    """This machine's rates as the time model reads them, fitted from measured spans.

    Compute: ``seconds = a + b n`` by least squares over every compute span (``n`` its
    micro-batch's samples); the dense update: the median of its spans; gather, link and accelerator
    bandwidths: bytes moved / seconds over the hybrid's host gathers and uploads and the
    accelerator-tier gathers (accelerator-only's, else Hotline's popular ones); Hotline's host
    split: its plans' seconds / lookups (0 without a Hotline step).
    """
    merged = spans.merge(steps, on=["scheme", "step"], suffixes=("", "_step"))
    merged["non_popular"] = merged["samples"] - merged["popular"]
    comp = merged[merged["phase"].isin(list(COMPUTE_PHASES))]
    n = comp.apply(lambda r: r[COMPUTE_PHASES[r["phase"]]], axis=1).to_numpy(float)
    sec = (comp["end"] - comp["start"]).to_numpy(float)
    b, a = np.polyfit(n, sec, 1) if np.unique(n).size > 1 else (float(np.median(sec / n)), 0.0)
    b, a = max(float(b), 1e-12), max(float(a), 0.0)
    dense = merged[merged["phase"] == "dense update"]
    dense_s = float((dense["end"] - dense["start"]).median()) if len(dense) else 0.0

    def rate(phase: str, rows_col: str, scheme: str | None = None) -> float:
        part = merged[merged["phase"] == phase]
        if scheme is not None:
            part = part[part["scheme"] == scheme]
        seconds = float((part["end"] - part["start"]).sum())
        return float(part[rows_col].sum()) * row_bytes / seconds / 1e9 if seconds > 0 else 1.0

    accel = (rate("gather hot", "unique_all", "accel_only")
             if (merged["scheme"] == "accel_only").any()
             else rate("gather hot (popular)", "unique_popular"))
    split = steps[(steps["kind"] == "hotline") & (steps["plan_s"] > 0)]
    split_ns = (float(split["plan_s"].sum() / split["lookups_all"].sum()) * 1e9
                if len(split) else 0.0)
    return HardwareConfig(
        label="this machine (fitted from the measured spans)", peak_tflops=flops / b / 1e12,
        compute_efficiency=1.0, step_overhead_us=a * 1e6, dense_update_us=dense_s * 1e6,
        accelerator_gbps=accel,
        host_gbps=rate("gather all", "unique_all", "hybrid"),
        link_gbps=rate("upload", "unique_all", "hybrid"), link_latency_us=0.0,
        memory_gb=1e6, host_split_ns_per_lookup=split_ns,
        source="fitted: compute a + b n over the measured compute spans; bandwidths = bytes / "
               "seconds of the measured gathers and uploads; the split = plan seconds / lookups")


# -- the stage ----------------------------------------------------------------------------------
def _device(exp: HotlineConfig) -> str:
    """The device the stage runs on (``auto``: CUDA when torch sees it), checked against the
    capture."""
    from workbench.utils.validation import ConfigError

    if exp.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("experiments.hotline.device = 'cuda', but torch sees no CUDA device "
                          "(use cpu or auto)")
    device = exp.device if exp.device != "auto" else (
        "cuda" if torch.cuda.is_available() else "cpu")
    if exp.capture == "cuda_graphs" and device != "cuda":
        raise ConfigError(f"experiments.hotline.capture = 'cuda_graphs' needs a CUDA device "
                          f"(the device is {device!r}): use capture eager or compile")
    return device


@dataclass(frozen=True, eq=False)
class Rig:
    """What every measured run of the stage shares.

    Attributes:
        exp: the experiment's settings (threads, mini-batches, schemes, sweeps).
        model: the model trained and its inputs (``table_rows`` = the table's rows).
        table: ``float32[rows, D]``, every run's initial embedding table.
        device: ``cpu`` or ``cuda``.
        seed: seeds every model's initialisation.
        link_gbps: the measured runs' host-accelerator link ([`measured_link`][]); None:
            memory speed.
    """

    exp: HotlineConfig
    model: ModelSpec
    table: np.ndarray
    device: str
    seed: int
    link_gbps: float | None = None

    def trainer(self, hot: np.ndarray, overlap: bool = True) -> TieredTrainer:
        """A trainer of the model from the initial table, ``hot`` in the accelerator tier."""
        return TieredTrainer(self.model, self.table, hot, device=self.device, seed=self.seed,
                             threads=self.exp.threads, overlap=overlap, link_gbps=self.link_gbps,
                             capture=CAPTURES[self.exp.capture])


def train_all(rig: Rig, hot: np.ndarray, budget: int, train, test,
               progress: bool) -> tuple[list, list, list]:
    """Train every scheme one epoch; return (metrics frames, (name, steps) pairs, span frames)."""
    exp, table = rig.exp, rig.table
    rows = table.shape[0]
    plan = [(s, s) for s in exp.schemes]
    if exp.online_every:
        plan.insert(plan.index(("hotline", "hotline")) + 1, ("hotline_online", "hotline"))
    base_hot = hot_mask(hot, rows)
    metrics, step_inputs, spans = [], [], []
    for name, scheme in plan:
        start_hot = {"hybrid": np.zeros(0, np.int64), "accel_only": np.arange(rows),
                     "hotline_online": np.zeros(0, np.int64)}.get(name, hot)
        trainer = rig.trainer(start_hot)
        schedule = Schedule(exp.batch_size, exp.eval_every, exp.fae_phase_batches,
                            online_every=exp.online_every if name == "hotline_online" else None,
                            budget_bytes=budget)
        try:
            frame, steps = train_scheme(scheme, trainer, train, test, schedule, is_hot=base_hot,
                                        progress=progress)
        finally:
            trainer.close()
        frame.insert(0, "scheme", name)
        metrics.append(frame)
        step_inputs.append((name, steps))
        spans.append(span_frame(name, steps))
        log.info("%s: final AUC %.4f, %.2f s measured over %d mini-batches",
                 LABELS[name], frame["auc"].iloc[-1], frame["wall_s"].iloc[-1], len(steps))
    return metrics, step_inputs, spans


def sweep_budgets(rig: Rig, counts_full: np.ndarray, train, models: Models, row_bytes: int,
           flops: float) -> pd.DataFrame:
    """Budgets x batch sizes: hybrid, Hotline and Hotline without overlap on the same mini-batches,
    alternating step by step; measured medians and modelled sums."""
    exp = rig.exp
    rows, dim = rig.table.shape
    records = []
    n = len(train)
    for mb in exp.budget_mb_full:
        budget = scaled_budget_bytes(mb, exp.full_scale_rows, exp.full_scale_dim, rows, dim)
        hot = hot_keys(counts_full, budget, dim)
        is_hot = hot_mask(hot, rows)
        for batch in exp.batch_sweep:
            variants = {"hybrid": (np.zeros(0, np.int64), True), "hotline": (hot, True),
                        "hotline_sequential": (hot, False)}
            trainers = {v: rig.trainer(h, overlap=o) for v, (h, o) in variants.items()}
            walls: dict[str, list[float]] = {v: [] for v in variants}
            modelled: dict[str, float] = {}
            try:
                for t in range(exp.sweep_warmup + exp.sweep_steps):
                    idx = np.arange(t * batch, (t + 1) * batch) % n
                    args = (train.dense[idx], train.keys[idx], train.labels[idx])
                    following = train.keys[(idx + batch) % n]  # planned during the step
                    for v, tr in trainers.items():
                        wall = (tr.step_hybrid(*args) if v == "hybrid"
                                else tr.step_hotline(*args, following)).wall_s
                        if t >= exp.sweep_warmup:
                            walls[v].append(wall)
                    if t < exp.sweep_warmup:
                        continue
                    c = microbatch_counts(train.keys[idx], is_hot)
                    for name, (hw, unit) in models.items():
                        for kind in ("hybrid", "hotline", "hot"):
                            key = f"{name}:{kind}"
                            modelled[key] = modelled.get(key, 0.0) + modelled_seconds(
                                kind, c, 0, hw, unit, row_bytes, flops)
            finally:
                for tr in trainers.values():
                    tr.close()
            base = {"budget_mb_full": mb, "budget_bytes": budget, "batch_size": batch,
                    "hot_rows": int(hot.size), "steps": exp.sweep_steps}
            med = {v: float(np.median(w)) for v, w in walls.items()}
            spread = {v: float((np.max(w) - np.min(w)) / med[v]) if med[v] > 0 else 0.0
                      for v, w in walls.items()}
            idx_all = (np.arange(exp.sweep_warmup * batch, (exp.sweep_warmup + exp.sweep_steps)
                                 * batch) % n)
            popular = float(popular_mask(train.keys[idx_all], is_hot).mean())
            records.append({**base, "source": "measured", "popular_fraction": popular,
                            "hybrid_s": med["hybrid"], "hotline_s": med["hotline"],
                            "hotline_sequential_s": med["hotline_sequential"],
                            "accel_only_s": float("nan"),
                            "spread": max(spread.values())})
            for name in models:
                per = {k: modelled[f"{name}:{k}"] / exp.sweep_steps
                       for k in ("hybrid", "hotline", "hot")}
                records.append({**base, "source": name, "popular_fraction": popular,
                                "hybrid_s": per["hybrid"], "hotline_s": per["hotline"],
                                "hotline_sequential_s": float("nan"),
                                "accel_only_s": per["hot"], "spread": 0.0})
    frame = pd.DataFrame(records)
    frame["speedup"] = frame["hybrid_s"] / frame["hotline_s"]
    frame["overlap_gain"] = frame["hotline_sequential_s"] / frame["hotline_s"]
    return frame


def timeline_frame(steps: pd.DataFrame, spans: pd.DataFrame, models: Models, row_bytes: int,
              flops: float, at: int) -> pd.DataFrame:
    """The measured spans and the modelled phases of one mini-batch of each scheme (of each kind
    for FAE: a hot and a normal one), the first at or after step ``at``."""
    out = []
    count_cols = [f.name for f in fields(MicroBatchCounts)]
    for (scheme, kind), part in steps.groupby(["scheme", "kind"], sort=False):
        later = part[part["step"] >= at]
        row = (later if len(later) else part).iloc[0]
        label = f"{LABELS[scheme]} ({'normal' if kind == 'hybrid' else kind})" \
            if scheme == "fae" else LABELS[scheme]
        measured = spans[(spans["scheme"] == scheme) & (spans["step"] == row["step"])]
        for _, s in measured.iterrows():
            out.append({"source": "measured", "scheme": scheme, "label": label, "kind": kind,
                        "step": int(row["step"]), "lane": s["lane"], "phase": s["phase"],
                        "start": s["start"], "end": s["end"]})
        c = MicroBatchCounts(**{k: int(row[k]) for k in count_cols})
        for name, (hw, unit) in models.items():
            for lane, phase, start, end in step_timeline(kind, hw, row_bytes, flops,
                                                         **c.model_inputs(unit)):
                out.append({"source": name, "scheme": scheme, "label": label, "kind": kind,
                            "step": int(row["step"]), "lane": lane, "phase": phase,
                            "start": start, "end": end})
    return pd.DataFrame(out)


def measured_link(rig: Rig, train, server: HardwareConfig, flops: float,
                  steps: int = 4) -> tuple[float | None, dict[str, Any]]:
    """The link bandwidth of the measured runs (``rig.exp.link``) and how it was set.

    ``scaled``: this machine's compute seconds per sample, the median of ``steps`` untimed
    hybrid steps on the first mini-batches (after one warm-up), against ``server``'s modelled
    ones: ``link = server.link_gbps x server s/sample / this machine's s/sample``, so that a
    row takes the same share of a sample's compute on both.
    """
    exp, device = rig.exp, rig.device
    if device != "cpu" or exp.link == "off":
        return None, {"link": "off" if device == "cpu" else "real (cuda)"}
    if exp.link == "fixed":
        return exp.link_gbps, {"link": "fixed", "link_gbps": exp.link_gbps}
    # timed at memory speed: the link is what this measures
    trainer = dataclasses.replace(rig, link_gbps=None).trainer(np.zeros(0, np.int64))
    per_sample = []
    try:
        for t in range(steps + 1):
            idx = np.arange(t * exp.batch_size, (t + 1) * exp.batch_size) % len(train)
            record = trainer.step_hybrid(train.dense[idx], train.keys[idx], train.labels[idx])
            span = next(s for s in record.spans if s.phase == "compute mini-batch")
            if t:
                per_sample.append((span.end - span.start) / record.samples)
    finally:
        trainer.close()
    machine = float(np.median(per_sample))
    modelled = flops / (server.peak_tflops * 1e12 * server.compute_efficiency)
    gbps = server.link_gbps * modelled / machine
    return gbps, {"link": "scaled", "link_gbps": gbps, "scaled_to": server.label,
                  "machine_compute_s_per_sample": machine,
                  "server_compute_s_per_sample": modelled}


@dataclass
class Trained:
    """Every scheme trained on the rig and its steps modelled on each server.

    Attributes:
        steps: one row per trained step (``step_frame``), with ``model_<server>_s`` per server.
        spans: the measured phases of every step (``span_frame``).
        metrics: the evaluations of every scheme.
        models: server -> (hardware, rows unit): this machine fitted from the spans, and the
            configured servers.
        records: the steps' records, in ``steps``' row order.
        machine: this machine's fitted hardware.
    """

    steps: pd.DataFrame
    spans: pd.DataFrame
    metrics: pd.DataFrame
    models: Models
    records: list[StepRecord]
    machine: HardwareConfig


def train_and_model(rig: Rig, hot: np.ndarray, budget: int, train, test,
                    servers: dict[str, HardwareConfig], row_bytes: int, flops: float,
                    progress: bool = False) -> Trained:
    """Train every scheme ([`train_all`][]), fit this machine from the measured spans and
    model every step on it and on ``servers`` (rows counted per ``rig.exp.rows_unit``)."""
    metric_frames, step_inputs, span_frames = train_all(rig, hot, budget, train, test,
                                                        progress)
    spans = pd.concat(span_frames, ignore_index=True)
    steps = pd.concat([step_frame(name, s) for name, s in step_inputs], ignore_index=True)
    machine = fit_machine(steps, spans, row_bytes, flops)
    models: Models = {THIS_MACHINE: (machine, "unique"),
                      **{n: (hw, rig.exp.rows_unit) for n, hw in servers.items()}}
    records = [r for _, s in step_inputs for r in s]  # in the frame's row order
    for name, (hw, unit) in models.items():
        steps[f"model_{name}_s"] = [modelled_seconds(r.kind, r.counts, r.synced_rows, hw, unit,
                                                     row_bytes, flops) for r in records]
    return Trained(steps, spans, pd.concat(metric_frames, ignore_index=True), models, records,
                   machine)


def hot_tier(exp: HotlineConfig, model: ModelConfig, shape: tuple[int, int], rows: int,
             keys: np.ndarray, seed: int) -> tuple[float, np.ndarray, np.ndarray, int, np.ndarray]:
    """What a Hotline run is set up with, seeded in this order: torch (the model whose train
    FLOPs per sample are counted), the table, the profile of the train ``keys``; returns
    ``(flops, table, the profile's counts, the hot tier's bytes, the hot rows)``."""
    dim = model.embedding_dim
    torch.manual_seed(seed)
    flops = 3.0 * flops_per_sample(build_model(model, *shape), *shape, dim)
    table = np.random.default_rng(seed).uniform(-model.init_scale, model.init_scale,
                                                (rows, dim)).astype(np.float32)
    counts_full = profile_counts(keys, rows, exp.profile_rate, np.random.default_rng(seed + 1))
    budget = scaled_budget_bytes(exp.budget_mb, exp.full_scale_rows, exp.full_scale_dim, rows,
                                 dim)
    return flops, table, counts_full, budget, hot_keys(counts_full, budget, dim)


def run(processed: Path, out: Path, exp: HotlineConfig, *, dataset: DatasetConfig,
        model: ModelConfig, hardware: dict[str, HardwareConfig], seed: int,
        progress: bool = False) -> None:
    """The ``hotline`` stage (see the module docstring); writes ``out`` whole.

    Args:
        processed: ``data/processed/<exp.dataset>``.
        out: ``results/hotline/<exp.dataset>`` (replaced whole).
        exp: the experiment's settings.
        dataset: the dataset (its ``target_auc``).
        model: the model trained (``models.<exp.model>``).
        hardware: every configured server (``exp.hardware`` picks the modelled ones).
        seed: seeds the table, the model, the profile.
        progress: show progress bars.
    """
    from workbench.utils.io import atomic_dir, write_json

    meta = DatasetMeta.read(processed)
    train = load_split(processed, meta, "train", exp.max_train_samples)
    require_samples(len(train), exp.batch_size, dataset.name,
                    f"one mini-batch of experiments.hotline.batch_size = {exp.batch_size}",
                    f"set experiments.hotline.batch_size <= {len(train)}")
    test = load_split(processed, meta, "test", exp.max_test_samples)
    require_samples(len(test), 1, dataset.name, "a test split to evaluate AUC on",
                    "use a dataset with a test split")
    device = _device(exp)
    rows, dim = table_rows(meta), model.embedding_dim
    shape = (len(meta.dense), len(meta.categorical))
    row_bytes = FLOAT_BYTES * dim
    flops, table, counts_full, budget, hot = hot_tier(exp, model, shape, rows, train.keys, seed)
    is_hot = hot_mask(hot, rows)
    popular = float(popular_mask(train.keys, is_hot).mean())
    hit_share = float(is_hot[train.keys].mean())
    log.info("hot set: %d of %d rows (%.1f%% of the table bytes = FAE's %g MiB at full scale); "
             "%.1f%% of the train inputs are popular", hot.size, rows, 100 * budget /
             (rows * row_bytes), exp.budget_mb, 100 * popular)
    servers = {name: hardware[name] for name in exp.hardware}

    started = time.perf_counter()
    rig = Rig(exp, ModelSpec(model, *shape, rows), table, device, seed)
    link_gbps, link_info = measured_link(rig, train, servers[exp.hardware[0]], flops)
    rig = dataclasses.replace(rig, link_gbps=link_gbps)
    if link_gbps is not None:
        log.info("measured runs: host-accelerator link shaped to %.3g GB/s (%s)", link_gbps,
                 link_info["link"])
    trained = train_and_model(rig, hot, budget, train, test, servers, row_bytes, flops,
                              progress)
    steps, spans, metrics = trained.steps, trained.spans, trained.metrics
    models, records = trained.models, trained.records
    for name in models:
        cumulative = steps.groupby("scheme")[f"model_{name}_s"].cumsum()
        at = pd.concat([steps[["scheme", "step"]], cumulative.rename("t")], axis=1)
        metrics = metrics.merge(at.rename(columns={"t": f"model_{name}_s"}),
                                on=["scheme", "step"], how="left")
        metrics[f"model_{name}_s"] = metrics[f"model_{name}_s"].fillna(0.0)
    timeline = timeline_frame(steps, spans, models, row_bytes, flops, exp.timeline_step)
    conditions = host_rate_conditions(steps, records, servers, exp.host_rate_sweep, row_bytes,
                                      flops)
    sweep = sweep_budgets(rig, counts_full, train, models, row_bytes, flops)
    full_table_gb = exp.full_scale_rows * exp.full_scale_dim * FLOAT_BYTES / 1e9
    totals = steps.groupby("scheme")[["wall_s", *[f"model_{n}_s" for n in models]]].sum()
    finals = metrics.groupby("scheme").tail(1).set_index("scheme")
    runs = []
    for name in totals.index:
        runs.append({"scheme": name, "label": LABELS[name], "steps": int(
            (steps["scheme"] == name).sum()), "final_auc": float(finals.loc[name, "auc"]),
            "final_logloss": float(finals.loc[name, "logloss"]),
            "measured_s": float(totals.loc[name, "wall_s"]),
            **{f"model_{n}_s": float(totals.loc[name, f"model_{n}_s"]) for n in models}})
    by = {r["scheme"]: r for r in runs}

    def speedups(column: str) -> dict[str, float]:
        return {s: by["hybrid"][column] / by[s][column] for s in by}

    summary: dict[str, Any] = {
        "dataset": dataset.name, "model": exp.model, "device": device, "threads": exp.threads,
        "capture": exp.capture,
        "torch": torch.__version__, "measured_link": link_info, "train_samples": len(train),
        "test_samples": len(test),
        "batch_size": exp.batch_size, "embedding_dim": dim, "table_rows": rows,
        "table_bytes": rows * row_bytes, "budget_mb_full": exp.budget_mb,
        "budget_bytes": budget, "budget_fraction": budget / (rows * row_bytes),
        "hot_rows": int(hot.size), "popular_fraction": popular, "lookup_hit_share": hit_share,
        "features": shape[1],
        "profile_rate": exp.profile_rate, "fae_phase_batches": exp.fae_phase_batches,
        "online_every": exp.online_every, "train_flops_per_sample": flops,
        "full_scale_table_gb": full_table_gb, "target_auc": dataset.target_auc,
        "servers": {n: {**asdict(hw), "rows_unit": unit,
                        "fits_full_table": full_table_gb <= hw.memory_gb}
                    for n, (hw, unit) in models.items()},
        "runs": runs, "speedup_measured": speedups("measured_s"),
        "speedup_modelled": {n: speedups(f"model_{n}_s") for n in models},
        "stage_seconds": time.perf_counter() - started}
    with atomic_dir(out) as tmp:
        metrics.to_csv(tmp / "metrics.csv", index=False, float_format="%.6g")
        steps.to_csv(tmp / "steps.csv", index=False, float_format="%.6g")
        timeline.to_csv(tmp / "timeline.csv", index=False, float_format="%.6g")
        sweep.to_csv(tmp / "sweep.csv", index=False, float_format="%.6g")
        conditions.to_csv(tmp / "conditions.csv", index=False, float_format="%.6g")
        write_json(tmp / "summary.json", summary)
    log.info("Hotline vs hybrid: %.2fx measured; %s modelled",
             summary["speedup_measured"]["hotline"],
             ", ".join(f"{n} {v['hotline']:.2f}x" for n, v in summary["speedup_modelled"].items()))
