"""Sample dispatch: the interface every dispatcher implements, and the two baselines.

A dispatcher assigns each of the N samples of a global batch to one of the W workers, worker j
getting exactly its capacity ``cap_j`` (``sum_j cap_j = N``; equal shares ``b`` by default):

    keys[N, F] --Dispatcher.decide(keys, batch_id)--> Decision(assignment int64[N], method, ...)

A dispatcher is an object of its strategy: the name is resolved to a class once, when the
dispatcher is built ([`workbench.dispatch.registry.make_dispatcher`][]), and every batch calls
the object's [`Dispatcher.decide`][]; nothing parses a name per batch. The baselines every
framework has ([`BaselineDispatcher`][]: cost-blind, one draw of the run's random stream per
batch, [`BaselineDispatcher.draw`][]):

* ``contiguous`` ([`Contiguous`][]): worker ``w`` gets samples ``[w b, (w + 1) b)``;
* ``random`` ([`RandomPermutation`][]): a seeded random permutation of the batch, then
  contiguous slices.

The cost-aware dispatchers build on this interface: LAIA ([`workbench.dispatch.laia`][]), ESD's
heuristic, exact solver and HybridDis ([`workbench.dispatch.hybriddis`][]); names map to them in
[`workbench.dispatch.registry`][]. [`run_dispatch`][] drives any dispatcher through the
emulated cluster; [`build_trace`][] cuts a whole dataset's keys into the per-worker trace a
baseline dispatcher produces ([`iter_trace`][]: the same trace, a window of steps at a time):

    trace[step, w, :] = keys of the b samples worker w got in global batch `step` (b x F keys)

(a final partial batch is dropped).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from workbench.cluster.edge_cluster import EdgeCluster
from workbench.utils.validation import ConfigError

BASELINES = ("contiguous", "random")
#: Keys per window of :func:`iter_trace` by default (int64: 32 MiB).
TRACE_WINDOW_KEYS = 1 << 22

#: One batch's draw of a baseline: ``(workers, per_worker, rng) -> worker of every sample``.
Draw = Callable[[int, "int | np.ndarray", np.random.Generator], np.ndarray]


def trace_steps(keys: np.ndarray, workers: int, per_worker: int) -> int:
    """Global batches of ``workers x per_worker`` samples in ``keys`` (one epoch).

    Raises:
        ValueError: the data holds less than one global batch.
    """
    n = keys.shape[0]
    steps = n // (workers * per_worker)
    if steps == 0:
        raise ValueError(f"{n} samples hold no global batch of {workers} workers x {per_worker}")
    return steps


def iter_trace(keys: np.ndarray, workers: int, per_worker: int, dispatcher: str = "contiguous",
               seed: int = 0, epochs: int = 1, window_steps: int | None = None
               ) -> Iterator[np.ndarray]:
    """The trace of [`build_trace`][], a window of consecutive steps at a time.

    Yields ``int64[window, workers, per_worker x F]`` windows (the last one shorter) whose
    concatenation is [`build_trace`][]'s trace, with the same random draws: only one window
    is in memory, whatever the dataset's size.

    Args:
        keys: as [`build_trace`][].
        workers: as [`build_trace`][].
        per_worker: as [`build_trace`][].
        dispatcher: as [`build_trace`][].
        seed: as [`build_trace`][].
        epochs: as [`build_trace`][].
        window_steps: steps per window (None: about ``TRACE_WINDOW_KEYS`` keys per window).

    Raises:
        ValueError: the data holds less than one global batch (raised here, not when the
            first window is drawn).
        ConfigError: ``dispatcher`` is not a baseline (raised here too).
    """
    draw = baseline(dispatcher).draw  # the name is resolved once, not per step
    steps = trace_steps(keys, workers, per_worker)
    features = keys.shape[1]
    if window_steps is None:
        window_steps = max(1, TRACE_WINDOW_KEYS // (workers * per_worker * max(1, features)))
    if window_steps < 1:
        raise ValueError(f"window_steps = {window_steps}: must be at least 1")
    return _trace_windows(keys, workers, per_worker, draw, seed, steps * epochs, steps,
                          window_steps)


def _trace_windows(keys: np.ndarray, workers: int, per_worker: int, draw: Draw, seed: int,
                   total: int, steps: int, window_steps: int) -> Iterator[np.ndarray]:
    batch = workers * per_worker
    rng = np.random.default_rng(seed)
    per_epoch = keys[: steps * batch].reshape(steps, batch, keys.shape[1])
    for start in range(0, total, window_steps):
        out = np.empty((min(window_steps, total - start), workers, per_worker * keys.shape[1]),
                       dtype=np.int64)
        for i in range(len(out)):  # step start + i: epoch (start + i) // steps
            owner = draw(workers, per_worker, rng)
            order = np.argsort(owner, kind="stable")
            out[i] = per_epoch[(start + i) % steps][order].reshape(workers, -1)
        yield out


def build_trace(keys: np.ndarray, workers: int, per_worker: int, dispatcher: str = "contiguous",
                seed: int = 0, epochs: int = 1) -> np.ndarray:
    """Cut per-sample keys into ``[steps, workers, per_worker x F]`` (``epochs`` passes): the
    windows of [`iter_trace`][] concatenated (for a dataset too large to hold its trace
    twice, replay [`iter_trace`][] instead).

    Args:
        keys: ``[n, F]`` keys per sample, in data order (any integer dtype; the trace is int64).
        workers: W.
        per_worker: samples per worker per iteration b.
        dispatcher: how a global batch is split among workers.
        seed: seed of the ``random`` dispatcher.
        epochs: passes over the data (the same order every epoch).

    Raises:
        ValueError: the data holds less than one global batch.
    """
    steps = trace_steps(keys, workers, per_worker)
    out = np.empty((steps * epochs, workers, per_worker * keys.shape[1]), dtype=np.int64)
    done = 0
    for window in iter_trace(keys, workers, per_worker, dispatcher, seed, epochs):
        out[done: done + len(window)] = window
        done += len(window)
    return out


@dataclass
class Decision:
    """One batch's dispatch.

    Attributes:
        assignment: worker of every sample (``int64[N]``).
        method: what decided (e.g. ``"exact"`` or ``"heuristic"`` for hybriddis).
        seconds: wall time of the decision (not part of the emulated clock: the paper overlaps
            it with the previous iteration's compute).
        predicted_cost: the cost model's value of the assignment (NaN for cost-blind
            dispatchers).
        sync_plan_sizes: LAIA's ``|cplan[w]|`` per worker (zeros for the others).
        charged_s: decision seconds the emulated clock must add to the iteration: the part of
            the decision that did not fit the budget it hides behind (0 for every dispatcher
            but hybriddis' exact solves; see [`workbench.dispatch.hybriddis`][]).
        exact_s: wall seconds of the exact solver's solve alone, when it ran (NaN otherwise):
            what HybridDis' predictor estimates.
    """

    assignment: np.ndarray
    method: str
    seconds: float
    predicted_cost: float = float("nan")
    sync_plan_sizes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    charged_s: float = 0.0
    exact_s: float = float("nan")


class Dispatcher(ABC):
    """A dispatch strategy: assigns each sample of a global batch to a worker.

    Each strategy is one subclass, named by its class attribute ``name`` (the name the
    registry, the configs and the result tables use).

    Args:
        workers: W.
        capacities: samples per worker (``int[W]``, summing to the batch size).
    """

    name: ClassVar[str]

    def __init__(self, workers: int, capacities: np.ndarray) -> None:
        self.workers = workers
        self.capacities = np.asarray(capacities, dtype=np.int64)

    def set_budget(self, seconds: float) -> None:
        """The time the next decision can hide behind (the previous iteration's compute).

        Only HybridDis reads it ([`HybridDis`][workbench.dispatch.hybriddis.HybridDis]); every other
        strategy ignores it.
        """
        return None

    @abstractmethod
    def decide(self, keys: np.ndarray, batch_id: int) -> Decision:
        """Dispatch one batch (``keys``: ``int64[N, F]`` global keys)."""


class BaselineDispatcher(Dispatcher):
    """A cost-blind baseline: one draw of its seeded random stream per batch, keys unread.

    Args:
        workers: W.
        capacities: samples per worker.
        seed: seeds the random stream (the ``random`` baseline's permutations).
    """

    def __init__(self, workers: int, capacities: np.ndarray, seed: int = 0) -> None:
        super().__init__(workers, capacities)
        self.rng = np.random.default_rng(seed)

    @staticmethod
    @abstractmethod
    def draw(workers: int, per_worker: int | np.ndarray,
             rng: np.random.Generator) -> np.ndarray:
        """Worker index of every sample of one global batch.

        Args:
            workers: number of workers W.
            per_worker: samples per worker: one ``b`` for all, or ``int[W]`` capacities.
            rng: the run's random stream.

        Returns:
            ``int64[sum of capacities]``, worker w appearing exactly its capacity times.
        """

    def owners(self) -> np.ndarray:
        """The next batch's worker of every sample (one draw of the stream)."""
        return self.draw(self.workers, self.capacities, self.rng)

    def decide(self, keys: np.ndarray, batch_id: int) -> Decision:
        """Dispatch one batch (``keys``: ``int64[N, F]`` global keys, not read)."""
        start = time.perf_counter()
        out = self.owners()
        return Decision(out, self.name, time.perf_counter() - start)


class Contiguous(BaselineDispatcher):
    """``contiguous``: worker ``w`` gets consecutive samples (its capacity's worth)."""

    name = "contiguous"

    @staticmethod
    def draw(workers: int, per_worker: int | np.ndarray,
             rng: np.random.Generator) -> np.ndarray:
        """Workers in order, each repeated its capacity times (``rng`` is not drawn from)."""
        return np.repeat(np.arange(workers, dtype=np.int64), per_worker)


class RandomPermutation(BaselineDispatcher):
    """``random``: a seeded random permutation of the batch, then contiguous slices."""

    name = "random"

    @staticmethod
    def draw(workers: int, per_worker: int | np.ndarray,
             rng: np.random.Generator) -> np.ndarray:
        """[`Contiguous.draw`][] permuted by one ``rng.permutation`` of the batch."""
        base = np.repeat(np.arange(workers, dtype=np.int64), per_worker)
        return base[rng.permutation(len(base))]


_BASELINE_CLASSES: dict[str, type[BaselineDispatcher]] = {
    cls.name: cls for cls in (Contiguous, RandomPermutation)}
assert tuple(_BASELINE_CLASSES) == BASELINES


def baseline(name: str) -> type[BaselineDispatcher]:
    """The baseline strategy called ``name`` (resolve it once, then draw per batch).

    Raises:
        ConfigError: ``name`` is not a baseline (the message names the allowed ones).
    """
    try:
        return _BASELINE_CLASSES[name]
    except KeyError:
        raise ConfigError(f"dispatcher {name!r}: must be one of "
                          f"{', '.join(BASELINES)}") from None


def run_dispatch(cluster: EdgeCluster, keys: np.ndarray, dispatcher: Dispatcher, batches: int,
                 update: float = -0.01, wire_dim: int | None = None,
                 progress: bool = False, start: int = 0) -> list[dict]:
    """Dispatch and replay ``batches`` global batches of ``keys`` (``[samples, F]``).

    Global batch t (``start <= t < start + batches``) is samples ``[t N, (t + 1) N)`` with N =
    the capacities' sum, wrapping around the trace. Each batch: the dispatcher decides on the
    current cache states; every worker reads its samples' keys through its cache; then every
    worker writes one constant update per key occurrence (BSP order); the cluster closes the
    iteration.

    Returns:
        One record per batch: ``assignment``, ``method``, ``decision_s``, ``exact_s``,
        ``predicted_cost``,
        ``sync_plan_sizes``, and per worker ``pulled_rows``, ``pushed_rows``, ``comm_s`` and
        ``transfer_s`` (rows x tau_j: the weighted transmission cost, latency excluded), both
        at the cluster's ``wire_dim``.

    Raises:
        ValueError: ``wire_dim`` is given and is not the cluster's.
    """
    from tqdm.auto import tqdm

    n = int(dispatcher.capacities.sum())
    dim = cluster.wire_dim if wire_dim is None else wire_dim
    if dim != cluster.wire_dim:  # comm_s is clocked by the cluster: one width for both
        raise ValueError(f"wire_dim {dim} differs from the cluster's {cluster.wire_dim}: build "
                         f"the EdgeCluster with wire_dim={dim}")
    tau = dim * 4 / cluster.links.bandwidth_Bps
    out = []
    for t in tqdm(range(start, start + batches), disable=not progress, desc=dispatcher.name,
                  unit="batch"):
        idx = (np.arange(t * n, (t + 1) * n)) % len(keys)
        batch = keys[idx]
        decision = dispatcher.decide(batch, t)
        owned = [np.flatnonzero(decision.assignment == w) for w in range(cluster.workers)]
        for w, pos in enumerate(owned):
            cluster.read(w, batch[pos].ravel(), want_values=False)
        for w, pos in enumerate(owned):
            cluster.write(w, batch[pos].ravel(), update)
        rec = cluster.end_iteration()
        moved = rec["pulled_rows"] + rec["pushed_rows"]
        out.append({"samples": [idx[pos] for pos in owned], "method": decision.method,
                    "decision_s": decision.seconds, "charged_s": decision.charged_s,
                    "exact_s": decision.exact_s,
                    "predicted_cost": decision.predicted_cost,
                    "sync_plan_sizes": decision.sync_plan_sizes,
                    "pulled_rows": rec["pulled_rows"], "pushed_rows": rec["pushed_rows"],
                    "comm_s": rec["comm_s"], "transfer_s": moved * tau})
    return out
