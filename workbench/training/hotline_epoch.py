"""One epoch of a Hotline scheme ([`workbench.training.hotline`][]): the mini-batch plan (FAE's
alternating phases of popular and non-popular mini-batches, or the split's order), the step of
each, the phase syncs, online re-profiling of the hot set, and evaluation on the test split.

    plan = fae_schedule(popular, B, phase)    (fae)   or   [B consecutive samples, ...]
    for each mini-batch: (phase sync) -> TieredTrainer.step_<kind> -> (re-profile) -> (evaluate)
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from workbench.data.popularity import OnlineProfile
from workbench.training.hotline import SCHEMES, Span, StepRecord, TieredTrainer, microbatch_counts
from workbench.training.metrics import auc_score
from workbench.training.trainer import Split, log_loss

__all__ = ["Schedule", "fae_schedule", "train_scheme"]


def fae_schedule(popular: np.ndarray, batch_size: int,
                 phase_batches: int) -> list[tuple[str, np.ndarray]]:
    """FAE's schedule of one epoch: popular and non-popular samples in separate mini-batches,
    run in alternating phases.

    The popular samples (in their order) are cut into ``hot`` mini-batches of ``batch_size``, the
    others into ``normal`` ones (a last short batch each). With ``T`` batches in all there are
    ``S = ceil(T / phase_batches)`` rounds; round k runs the k-th of S equal consecutive shares of
    the hot batches, then of the normal batches, so both kinds finish together.

    Returns:
        ``[(kind, sample indices), ...]`` in execution order.
    """
    if batch_size < 1 or phase_batches < 1:
        raise ValueError("batch_size and phase_batches must be >= 1")
    groups = {}
    for kind, mask in (("hot", popular), ("normal", ~popular)):
        idx = np.flatnonzero(mask)
        groups[kind] = [idx[i:i + batch_size] for i in range(0, idx.size, batch_size)]
    total = len(groups["hot"]) + len(groups["normal"])
    rounds = max(1, math.ceil(total / phase_batches))
    out = []
    for k in range(rounds):
        for kind in ("hot", "normal"):
            batches = groups[kind]
            lo, hi = (len(batches) * k) // rounds, (len(batches) * (k + 1)) // rounds
            out += [(kind, b) for b in batches[lo:hi]]
    return out


def _evaluate(trainer: TieredTrainer, test: Split) -> tuple[float, float]:
    logits = trainer.predict(test)
    return auc_score(test.labels, logits), log_loss(test.labels, logits)


@dataclass(frozen=True)
class Schedule:
    """How a scheme walks its epoch ([`train_scheme`][]).

    Attributes:
        batch_size: samples per mini-batch.
        eval_every: evaluate every this many mini-batches (and at the end).
        fae_phase_batches: FAE's mini-batches per round of phases ([`fae_schedule`][]).
        online_every: Hotline online: re-profile the hot set from the mini-batches seen every
            this many mini-batches (``budget_bytes`` sizes it); None: no re-profiling.
        budget_bytes: the hot-memory budget of the online re-profiling.
    """

    batch_size: int
    eval_every: int
    fae_phase_batches: int = 16
    online_every: int | None = None
    budget_bytes: int | None = None


def train_scheme(scheme: str, trainer: TieredTrainer, train: Split, test: Split,
                 schedule: Schedule, *, is_hot: np.ndarray | None = None,
                 progress: bool = False) -> tuple[pd.DataFrame, list[StepRecord]]:
    """Train one epoch of ``train`` with ``scheme``; evaluate on ``test`` every
    ``schedule.eval_every`` mini-batches and at the end.

    Args:
        scheme: one of [`SCHEMES`][workbench.training.hotline.SCHEMES].
        trainer: the trainer, its store holding the scheme's hot set.
        train: the training split (its order is the mini-batch order, except FAE's phases).
        test: the evaluation split.
        schedule: mini-batch size, evaluation cadence, FAE's phases, online re-profiling.
        is_hot: ``bool[rows]`` FAE's classification of inputs (its profiled hot set).
        progress: show a progress bar.

    Returns:
        ``(metrics, steps)``: one metrics row per evaluation (``step``, ``samples``,
        ``wall_s`` = measured training time so far, ``auc``, ``logloss``) and every step's
        record.
    """
    from tqdm.auto import tqdm

    if scheme not in SCHEMES:
        raise ValueError(f"scheme {scheme!r}: must be one of {SCHEMES}")
    batch_size, eval_every = schedule.batch_size, schedule.eval_every
    online_every, budget_bytes = schedule.online_every, schedule.budget_bytes
    n = len(train)
    if scheme == "fae":
        if is_hot is None:
            raise ValueError("fae needs is_hot (the profiled hot set)")
        plan = fae_schedule(is_hot[train.keys].all(axis=1), batch_size,
                            schedule.fae_phase_batches)
    else:
        kind = {"hybrid": "hybrid", "hotline": "hotline", "accel_only": "hot"}[scheme]
        plan = [(kind, np.arange(i, min(i + batch_size, n))) for i in range(0, n, batch_size)]
    step_fn = {"hybrid": trainer.step_hybrid, "normal": trainer.step_hybrid,
               "hot": trainer.step_hot}  # Hotline's steps also take the next mini-batch
    online = OnlineProfile(trainer.store.rows) if online_every else None
    rows, steps, wall, samples, previous = [], [], 0.0, 0, None
    auc, loss = _evaluate(trainer, test)
    rows.append({"step": 0, "samples": 0, "wall_s": 0.0, "auc": auc, "logloss": loss})
    for t, (kind, idx) in enumerate(tqdm(plan, desc=scheme, disable=not progress), start=1):
        sync, moved = [], 0
        if scheme == "fae" and kind != previous:
            begin = time.perf_counter()
            moved = trainer.store.sync_to_hot() if kind == "hot" else (
                trainer.store.sync_to_host() if previous == "hot" else 0)
            if moved:
                sync = [Span("link", "phase sync", 0.0, time.perf_counter() - begin)]
            previous = kind
        keys = train.keys[idx]
        if kind == "hotline":  # the next mini-batch is planned while this one trains
            record = trainer.step_hotline(train.dense[idx], keys, train.labels[idx],
                                          train.keys[plan[t][1]] if t < len(plan) else None)
        else:
            record = step_fn[kind](train.dense[idx], keys, train.labels[idx])
        record.counts = microbatch_counts(keys, (trainer.store.slot >= 0).numpy())
        if sync:
            shift = sync[0].end
            record.spans = sync + [Span(s.lane, s.phase, s.start + shift, s.end + shift)
                                   for s in record.spans]
            record.wall_s += shift
        if online is not None:
            assert online_every  # there is an online profile only with it
            online.observe(keys)
            if online.batches % online_every == 0:
                begin = time.perf_counter()
                moved += trainer.store.set_hot(online.hot(budget_bytes or 0,
                                                          trainer.store.dim))
                record.wall_s += time.perf_counter() - begin
        record.synced_rows = moved
        steps.append(record)
        wall += record.wall_s
        samples += record.samples
        if t % eval_every == 0 or t == len(plan):
            if scheme == "fae" and previous == "normal":
                # the host copy is current during a normal phase: refresh the hot tier so that
                # the evaluated table is (the next hot phase reloads it anyway: no change)
                trainer.store.sync_to_hot()
            auc, loss = _evaluate(trainer, test)
            rows.append({"step": t, "samples": samples, "wall_s": wall, "auc": auc,
                         "logloss": loss})
    return pd.DataFrame(rows), steps
