r"""Hotline's popular / non-popular micro-batch pipeline and its baselines, executed for real.

Our formalisation of Hotline (ISCA 2024; the paper's method section is unavailable here: from the
abstracts and FAE's public code; the time model is `workbench/cluster/accelerator_time.py`). Every
scheme trains the same model on the same mini-batches from a
[`TieredEmbeddingStore`][workbench.cluster.tiered_store.TieredEmbeddingStore]; they differ only in
where rows live and what overlaps:

  hybrid      (Intel-optimised CPU-GPU DLRM: every row in host memory)
     host  |--gather all--|                                         |--write-back--|
     link                 |-up-|                            |-down-|
     accel                     |======= compute B =======|dense|

  hotline     (hot rows in the accelerator tier; one mini-batch = popular + non-popular micro-batch)
     plan  |classify t+1 ...|                    (a thread of its own, while step t runs)
     host  |--gather non-popular cold rows--|                               |-write-back-|
     link                                    |-up-|                  |-down-|
     accel |hot|=== compute popular ===| wait |hot+cold|== compute non-pop ==|dense|update|
           (the gather runs on a background thread / CUDA side stream; the cold rows are
            staged behind the hot tier, so "hot+cold" is ONE gather and "update" ONE index_add)

  fae         (FAE: popular and non-popular inputs in separate mini-batches and phases)
     hot phase:    |hot|=== compute B ===|dense|   ...   then sync hot rows accel -> host
     normal phase: hybrid steps on the host copy   ...   then sync hot rows host -> accel

  accel_only  every row in the accelerator tier (when the table fits the budget)

An epoch of any scheme is [`train_scheme`][workbench.training.hotline_epoch.train_scheme]
(`workbench/training/hotline_epoch.py`: FAE's phases, evaluation, online re-profiling).

A mini-batch's loss is ``sum_i l_i / B``; each micro-batch back-propagates its share, so the dense
gradients of the two micro-batches add up to the mini-batch's and the dense parameters take ONE
optimizer step per mini-batch. Embedding rows get plain SGD on the per-sample loss
(``row -= lr_sparse x sum over occurrences of dl_i/drow``), applied after both micro-batches
have run, so every sample reads the rows as they were at the start of the mini-batch. Hotline's
parameters therefore equal the hybrid baseline's after any number of steps, up to float32
summation order (tested). FAE changes the order in which samples are seen (phases), so its
accuracy is compared, not asserted equal.

The split into micro-batches is
[`plan_minibatch`][workbench.training.microbatch_plan.plan_minibatch] (one sort of the mini-batch's
keys); with ``overlap`` the next mini-batch's plan is made on a planner thread while this one trains
(``next_keys`` of [`TieredTrainer.step_hotline`][]), so the split is off the critical path (the step
waits for it only if it is late; a plan made before an online re-profile, or for other keys, is
redone). Each micro-batch's forward and backward is a
[`MicroBatchStep`][workbench.training.capture.MicroBatchStep]: eager by default (the reference: the
CPU results are bitwise those of the unfused, unplanned version), or captured (``torch.compile``;
CUDA graphs on a GPU), equal to float32 rounding.

Each step records [`Span`][] s (lane, phase, start, end in seconds from the step's start)
measured with ``time.perf_counter`` (CUDA: events, resolved after the step's synchronisation),
so the timeline figure shows what really overlapped. The CPU "accelerator" is the main thread
with ``threads`` torch threads; the "gather hardware" is one more thread, as Hotline adds a
gathering accelerator beside the GPU.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import numpy as np
import torch
from torch import Tensor

from workbench.cluster.tiered_store import TieredEmbeddingStore
from workbench.models.ctr import build_model
from workbench.models.recipe import Recipe
from workbench.training.capture import EAGER, Capture, MicroBatchStep
from workbench.training.components import ModelSpec
from workbench.training.microbatch_plan import MicroBatchPlan, plan_minibatch
from workbench.training.trainer import Split, dense_optimizer

__all__ = [
    "SCHEMES",
    "LANES",
    "Span",
    "StepRecord",
    "MicroBatchCounts",
    "microbatch_counts",
    "TieredTrainer",
]

SCHEMES = ("hybrid", "hotline", "fae", "accel_only")
LANES = ("host", "link", "accelerator", "planner")


@dataclass(frozen=True)
class Span:
    """One phase of a step on one lane, seconds from the step's start."""

    lane: str
    phase: str
    start: float
    end: float


@dataclass
class StepRecord:
    """What one mini-batch step did and how long it took.

    Attributes:
        kind: ``hybrid``, ``hotline`` or ``hot`` (every row in the accelerator tier).
        samples: samples of the mini-batch.
        popular: popular samples (the popular micro-batch; all for ``hot``, 0 for ``hybrid``).
        wall_s: measured wall time of the step.
        loss: mean training loss of the mini-batch.
        spans: measured phases.
        counts: the mini-batch's micro-batch sizes under the hot set it ran with
            ([`microbatch_counts`][]; filled by
            [`train_scheme`][workbench.training.hotline_epoch.train_scheme], outside the
            timing).
        synced_rows: rows moved between the tiers before or after the step (FAE's phase
            switch, an online re-profile).
        plan_s: Hotline: how long making the mini-batch's micro-batch plan took, wherever it
            ran (on the planner thread during the previous step when prefetched).
    """

    kind: str
    samples: int
    popular: int
    wall_s: float
    loss: float
    spans: list[Span] = field(default_factory=list)
    counts: MicroBatchCounts | None = None
    synced_rows: int = 0
    plan_s: float = 0.0


@dataclass(frozen=True)
class MicroBatchCounts:
    """Sizes of one mini-batch's micro-batches (the time model's inputs).

    Attributes:
        samples: B.
        popular: samples whose every key is hot.
        unique_all: distinct keys of the mini-batch.
        unique_popular: distinct keys of the popular micro-batch (all hot).
        unique_np_hot: distinct hot keys of the non-popular micro-batch.
        unique_np_cold: distinct cold keys of the non-popular micro-batch (gathered from host).
        lookups_all, lookups_popular, lookups_np_hot, lookups_np_cold: the same counted per
            lookup (an ``EmbeddingBag`` path that gathers, sends and updates one row per lookup).
    """

    samples: int
    popular: int
    unique_all: int
    unique_popular: int
    unique_np_hot: int
    unique_np_cold: int
    lookups_all: int = 0
    lookups_popular: int = 0
    lookups_np_hot: int = 0
    lookups_np_cold: int = 0

    def model_inputs(self, unit: str) -> dict[str, int]:
        """The time model's keyword arguments with rows counted per ``unit``: ``unique`` (each
        distinct row once per mini-batch) or ``lookups`` (one row per lookup)."""
        if unit not in ("unique", "lookups"):
            raise ValueError(f"unit {unit!r}: must be 'unique' or 'lookups'")
        pre = "unique" if unit == "unique" else "lookups"
        return {"samples": self.samples, "popular": self.popular,
                "unique_all": getattr(self, f"{pre}_all"),
                "unique_popular": getattr(self, f"{pre}_popular"),
                "unique_np_hot": getattr(self, f"{pre}_np_hot"),
                "unique_np_cold": getattr(self, f"{pre}_np_cold"), "lookups": self.lookups_all}


def microbatch_counts(keys: np.ndarray, is_hot: np.ndarray) -> MicroBatchCounts:
    """Count one mini-batch's micro-batches: ``keys`` ``int64[B, F]``, ``is_hot`` ``bool[rows]``."""
    hot = is_hot[keys]
    popular = hot.all(axis=1)
    unique_np = np.unique(keys[~popular])
    np_hot = is_hot[unique_np]
    np_lookups_hot = int(hot[~popular].sum())
    return MicroBatchCounts(
        samples=int(keys.shape[0]), popular=int(popular.sum()),
        unique_all=int(np.unique(keys).size), unique_popular=int(np.unique(keys[popular]).size),
        unique_np_hot=int(np_hot.sum()), unique_np_cold=int((~np_hot).sum()),
        lookups_all=int(keys.size), lookups_popular=int(popular.sum()) * keys.shape[1],
        lookups_np_hot=np_lookups_hot,
        lookups_np_cold=int((~popular).sum()) * keys.shape[1] - np_lookups_hot)


class _Timeline:
    """Spans of one step: perf_counter on CPU; CUDA events for accelerator work."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.t0 = time.perf_counter()
        self.spans: list[Span] = []
        self._events: list[tuple[str, str, torch.cuda.Event, torch.cuda.Event]] = []
        if self.cuda:
            torch.cuda.synchronize()
            self.t0 = time.perf_counter()
            self.start_event = torch.cuda.Event(enable_timing=True)
            self.start_event.record()

    @contextmanager
    def span(self, lane: str, phase: str, device_work: bool = False):
        if self.cuda and device_work:
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            yield
            end.record()
            self._events.append((lane, phase, begin, end))
            return
        begin_s = time.perf_counter()
        yield
        self.spans.append(Span(lane, phase, begin_s - self.t0, time.perf_counter() - self.t0))

    def device_span(self, lane: str, phase: str, begin: torch.cuda.Event,
                    end: torch.cuda.Event) -> None:
        """A span timed by two CUDA events recorded on any stream (another thread's too)."""
        self._events.append((lane, phase, begin, end))

    def finish(self) -> tuple[float, list[Span]]:
        if self.cuda:
            torch.cuda.synchronize()
            for lane, phase, begin, end in self._events:
                self.spans.append(Span(lane, phase,
                                       self.start_event.elapsed_time(begin) / 1e3,
                                       self.start_event.elapsed_time(end) / 1e3))
        wall = time.perf_counter() - self.t0
        return wall, sorted(self.spans, key=lambda s: (s.start, s.lane))


_T = TypeVar("_T")


def _unique(keys: np.ndarray) -> tuple[Tensor, Tensor]:
    """The sorted distinct keys of host ``int64`` ``keys`` and the inverse (``keys``' shape):
    numpy's unique, which equals ``torch.unique(..., return_inverse=True)`` and runs 2-4x faster
    on one CPU thread (the host planning of every step is on the critical path)."""
    uniq, inverse = np.unique(keys, return_inverse=True)
    return (torch.from_numpy(uniq.astype(np.int64, copy=False)),
            torch.from_numpy(inverse.reshape(keys.shape).astype(np.int64, copy=False)))


class _Done(Generic[_T]):
    """A finished result with a future's ``result()`` (the sequential reference)."""

    def __init__(self, value: _T) -> None:
        self.value = value

    def result(self) -> _T:
        return self.value


class TieredTrainer:
    """Trains one model on a two-tier embedding store, one mini-batch at a time.

    Args:
        model: the model and its optimizer settings, the dense features and the categorical
            features F (``model.table_rows`` = the table's rows).
        table: ``float32[rows, D]`` initial embedding table (the same for every scheme).
        hot: hot keys (the accelerator tier); empty for the hybrid baseline, all rows for
            accelerator-only.
        device: ``cpu`` or ``cuda``.
        seed: seeds the model initialisation.
        threads: torch intra-op threads of the compute (the gather thread is one more).
        overlap: Hotline gathers the non-popular rows on the background thread while the popular
            micro-batch computes, and `plan` makes the next mini-batch's plan on the
            planner thread; ``False`` does both on the main thread, in sequence (the same work:
            the benchmark's reference for the overlap).
        link_gbps: CPU only: shape the host-accelerator copies to this bandwidth (GB/s;
            [`TieredEmbeddingStore`][workbench.cluster.tiered_store.TieredEmbeddingStore]); None:
            memory speed.
        capture: how each micro-batch's forward and backward runs (eager: the reference).
    """

    def __init__(self, model: ModelSpec, table: np.ndarray, hot: np.ndarray, *,
                 device: str = "cpu", seed: int = 0, threads: int = 1, overlap: bool = True,
                 link_gbps: float | None = None, capture: Capture = EAGER):
        if len(table) != model.table_rows:
            raise ValueError(f"table of {len(table)} rows: the model's has {model.table_rows}")
        if model.config.recipe != Recipe.WORKBENCH:
            raise ValueError(f"model recipe {model.config.recipe!r}: Hotline's trainer steps the "
                             "workbench recipe only (the emulated trainer, "
                             "workbench.training.trainer, trains the hetu recipe); set "
                             "recipe=workbench")
        torch.set_num_threads(threads)
        torch.manual_seed(seed)
        self.device = torch.device(device)
        model_cfg, n_dense = model.config, model.n_dense
        self.model = build_model(model_cfg, n_dense, model.n_sparse).to(self.device)
        self.optimizer = dense_optimizer(model_cfg, self.model)
        self.store = TieredEmbeddingStore(table, hot, self.device, link_gbps=link_gbps)
        self.lr_sparse = model_cfg.lr_sparse
        self.n_dense = n_dense
        self.overlap = overlap
        self.micro = MicroBatchStep(self.model, capture, self.device, self.lr_sparse)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hotline-gather")
        self._planner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hotline-plan")
        self._upcoming: tuple[np.ndarray, Future[MicroBatchPlan] | _Done[MicroBatchPlan]] | None
        self._upcoming = None
        self._side = torch.cuda.Stream() if self.device.type == "cuda" else None

    def close(self) -> None:
        """Stop the gather and planner threads."""
        self._pool.shutdown(wait=True)
        self._planner.shutdown(wait=True)

    def _make_plan(self, keys: np.ndarray) -> MicroBatchPlan:
        store = self.store
        return plan_minibatch(keys, store.slot.numpy(), int(store.hot.shape[0]), store.version)

    def _prefetch(self, keys: np.ndarray) -> None:
        """Start the plan of the mini-batch of ``keys`` (the next one): on the planner thread
        with ``overlap``, else now."""
        keys = np.array(keys, dtype=np.int64, copy=True)  # the caller may reuse its buffer
        plan = (self._planner.submit(self._make_plan, keys) if self.overlap
                else _Done(self._make_plan(keys)))
        self._upcoming = (keys, plan)

    # -- pieces ---------------------------------------------------------------------------------
    def _to_device(self, t: Tensor) -> Tensor:
        """A host tensor on the accelerator. CUDA: staged through pinned memory and copied
        asynchronously (a copy from pageable memory waits for the stream to drain first, which
        serialised every step's host planning with the device's work); CPU: ``t`` itself."""
        if self.device.type == "cpu":
            return t
        return t.pin_memory().to(self.device, non_blocking=True)

    def _tensors(self, dense: np.ndarray, labels: np.ndarray) -> tuple[Tensor | None, Tensor]:
        def tensor(a: np.ndarray) -> Tensor:  # a writable C-contiguous array (copied if not)
            return torch.from_numpy(np.require(a, requirements=["C", "W"]))

        d = self._to_device(tensor(dense)) if self.n_dense else None
        return d, self._to_device(tensor(labels))

    def _dense_step(self) -> None:
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def _whole_batch(self, tl: _Timeline, rows: Tensor, inverse: Tensor, d: Tensor | None,
                     y: Tensor) -> tuple[Tensor, Tensor]:
        """Forward + backward of the whole mini-batch, then its dense update."""
        with tl.span("accelerator", "compute mini-batch", device_work=True):
            delta, loss = self.micro(rows, self._to_device(inverse), d, y, len(y))
        with tl.span("accelerator", "dense update", device_work=True):
            self._dense_step()
        return delta, loss

    # -- the steps ------------------------------------------------------------------------------
    def step_hybrid(self, dense: np.ndarray, keys: np.ndarray, labels: np.ndarray) -> StepRecord:
        """CPU-GPU hybrid: gather every row from host memory, upload, compute, write back."""
        tl = _Timeline(self.device)
        with tl.span("host", "plan"):
            uniq, inverse = _unique(keys)
            d, y = self._tensors(dense, labels)
        with tl.span("host", "gather all"):
            staged = self.store.gather_host(uniq)
        with tl.span("link", "upload", device_work=True):
            rows = self.store.upload(staged)
        delta, loss = self._whole_batch(tl, rows, inverse, d, y)
        with tl.span("link", "download", device_work=True):
            delta_host = self.store.download(delta)
        with tl.span("host", "write-back"):
            self.store.update_host(uniq, delta_host)
        wall, spans = tl.finish()
        return StepRecord("hybrid", len(labels), 0, wall, float(loss) / len(labels), spans)

    def step_hot(self, dense: np.ndarray, keys: np.ndarray, labels: np.ndarray) -> StepRecord:
        """Every key in the accelerator tier (FAE's hot batches, accelerator-only)."""
        tl = _Timeline(self.device)
        with tl.span("host", "plan"):
            uniq, inverse = _unique(keys)
            d, y = self._tensors(dense, labels)
            if not bool(self.store.is_hot(uniq).all()):
                raise ValueError("step_hot: the mini-batch has keys outside the accelerator tier")
        with tl.span("accelerator", "gather hot", device_work=True):
            slots = self.store.slots(self._to_device(uniq))
            rows = self.store.gather_hot(slots)
        delta, loss = self._whole_batch(tl, rows, inverse, d, y)
        with tl.span("accelerator", "update hot", device_work=True):
            self.store.update_hot(slots, delta)
        wall, spans = tl.finish()
        return StepRecord("hot", len(labels), len(labels), wall, float(loss) / len(labels),
                          spans)

    def _stage_cold(self, keys: Tensor, tl: _Timeline) -> torch.cuda.Event | None:
        """Background: gather cold rows from host memory and upload them into the store's
        staging area (a CUDA side stream; reserve the area first, on the main thread).

        On CUDA the upload is asynchronous: its span is timed with events on the side stream
        (the host only enqueues it), and the returned event marks its end for the consumer."""
        begin = time.perf_counter()
        staged = self.store.gather_host(keys)
        mid = time.perf_counter()
        tl.spans.append(Span("host", "gather non-popular", begin - tl.t0, mid - tl.t0))
        if self._side is None:
            self.store.stage(staged)
            tl.spans.append(Span("link", "upload non-popular", mid - tl.t0,
                                 time.perf_counter() - tl.t0))
            return None
        with torch.cuda.stream(self._side):
            start = torch.cuda.Event(enable_timing=True)
            done = torch.cuda.Event(enable_timing=True)
            start.record(self._side)
            self.store.stage(staged)  # the pinned allocator keeps `staged` until the copy ends
            done.record(self._side)
        tl.device_span("link", "upload non-popular", start, done)
        return done

    def _current_plan(self, keys: np.ndarray, tl: _Timeline) -> MicroBatchPlan:
        """The step's plan: the prefetched one if it was made for ``keys`` under the current hot
        set (the step waits for it), else made now (on the critical path)."""
        begin = time.perf_counter()
        upcoming, self._upcoming = self._upcoming, None
        made = (upcoming[1].result() if upcoming is not None
                and np.array_equal(upcoming[0], keys) else None)
        phase = "wait for classify"
        if made is None or made.version != self.store.version:
            made, phase = self._make_plan(keys), "classify"
        tl.spans.append(Span("host", phase, begin - tl.t0, time.perf_counter() - tl.t0))
        return made

    def step_hotline(self, dense: np.ndarray, keys: np.ndarray, labels: np.ndarray,
                     next_keys: np.ndarray | None = None) -> StepRecord:
        """Hotline: the popular micro-batch computes while the non-popular micro-batch's cold
        rows are gathered and staged on the background thread; then the non-popular
        micro-batch reads its hot and staged cold rows in one gather; one dense update; every
        row updated with one ``index_add_`` per micro-batch; the cold rows written back.

        Args:
            dense: the mini-batch's dense features.
            keys: its keys, ``int64[B, F]``.
            labels: its labels.
            next_keys: the next mini-batch's keys: its plan is made on the planner thread while
                this step runs (and used if the next step's keys are these); None: none.
        """
        tl = _Timeline(self.device)
        total = len(labels)
        p = self._current_plan(keys, tl)
        if next_keys is not None:
            self._prefetch(next_keys)
        with tl.span("host", "plan"):
            d, y = self._tensors(dense, labels)
        n_cold = int(p.cold_keys.numel())
        future = None
        if p.np_idx.numel():
            self.store.reserve_staging(n_cold)
            future = (self._pool.submit(self._stage_cold, p.cold_keys, tl) if self.overlap
                      else _Done(self._stage_cold(p.cold_keys, tl)))
        updates, losses = [], []
        if p.pop_idx.numel():
            with tl.span("accelerator", "gather hot (popular)", device_work=True):
                slots_p = self._to_device(p.slots_p)
                rows_p = self.store.gather_fused(slots_p)
                pi = self._to_device(p.pop_idx)
            with tl.span("accelerator", "compute popular", device_work=True):
                delta_p, loss_p = self.micro(rows_p, self._to_device(p.inv_p),
                                             d[pi] if d is not None else None, y[pi], total)
            updates.append((slots_p, delta_p))
            losses.append(loss_p)
        if future is not None:
            with tl.span("accelerator", "wait for gather"):
                event = future.result()
                if event is not None:  # the rows were staged on the side stream
                    torch.cuda.current_stream().wait_event(event)
            with tl.span("accelerator", "gather hot (non-popular)", device_work=True):
                sources = self._to_device(p.sources_n)
                rows_n = self.store.gather_fused(sources)  # hot and staged cold rows at once
                ni = self._to_device(p.np_idx)
            with tl.span("accelerator", "compute non-popular", device_work=True):
                delta_n, loss_n = self.micro(rows_n, self._to_device(p.inv_n),
                                             d[ni] if d is not None else None, y[ni], total)
            updates.append((sources, delta_n))
            losses.append(loss_n)
        with tl.span("accelerator", "dense update", device_work=True):
            self._dense_step()
        with tl.span("accelerator", "update hot", device_work=True):
            for sources, delta in updates:  # popular first: the order of the sums is fixed
                self.store.update_fused(sources, delta)
        if n_cold:
            with tl.span("link", "download", device_work=True):
                rows_host = self.store.download(self.store.staged(n_cold))
            with tl.span("host", "write-back"):
                self.store.write_host(p.cold_keys, rows_host)
        wall, spans = tl.finish()
        if self._upcoming is not None and isinstance(self._upcoming[1], Future):
            nxt = self._upcoming[1]  # the next plan, if made within this step: its span
            made = nxt.result() if nxt.done() and nxt.exception() is None else None
            if made is not None and made.ended - tl.t0 <= wall:
                spans = [*spans, Span("planner", "classify next", made.started - tl.t0,
                                      made.ended - tl.t0)]
        loss = 0.0
        for part in losses:
            loss += float(part)
        return StepRecord("hotline", total, int(p.pop_idx.numel()), wall, loss / total, spans,
                          plan_s=p.seconds)

    # -- evaluation -----------------------------------------------------------------------------
    @torch.no_grad()
    def predict(self, split: Split, chunk: int = 8192) -> np.ndarray:
        """Logits of every sample of ``split`` on the current parameters."""
        table = torch.from_numpy(self.store.table())
        out = []
        for i in range(0, len(split), chunk):
            keys = torch.from_numpy(split.keys[i:i + chunk])
            d, _ = self._tensors(split.dense[i:i + chunk], split.labels[i:i + chunk])
            out.append(self.model(d, table[keys].to(self.device)).float().cpu().numpy())
        return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)
