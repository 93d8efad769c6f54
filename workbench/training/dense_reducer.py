r"""The dense gradients of the distributed backend's workers, summed in one of two modes.

The real-process counterpart of [`workbench.cluster.dense_sync`][] (``cluster.dense_mode``):

* ``after_backward``: backward runs to the end, then one ``dist.all_reduce`` of every dense
  gradient flattened into one buffer (fully exposed);
* ``overlapped``: PyTorch's ``DistributedDataParallel`` with its bucketed reducer: a bucket is
  all-reduced as soon as backward has produced it, while backward goes on (DDP's
  ``bucket_cap_mb``; its 1 MiB first bucket at the defaults). A communication hook sums
  instead of averaging (the per-worker loss is already ``sum / global batch``), and runs each
  bucket's collective on one thread of its own, after the sender-side ring wait on the
  token-bucket network, so the wait overlaps backward as the transfer would.

Timings per iteration ([`Timing`][]):

    forward + backward ... last bucket handed over   -> compute_s   (backward done)
                          |--bucket 0--|--bucket 1--|   total_s     (every bucket's collective)
                                        ...........|->  exposed_s   (past the end of backward)

In ``after_backward`` the collective starts after backward, so ``exposed_s = total_s``.

* ``concurrent`` (HET's client, Fig. 5: Write and AllReduce together): backward runs to the
  end, then one ``dist.all_reduce`` of the flattened gradients starts on the collective thread
  and the worker pushes its embedding rows meanwhile; [`DenseReducer.finish`][] waits for the
  sum before the optimizer step (``exposed_s``: that wait). On the token-bucket network the
  ring's share waits in the worker's own link to the server (``dense_link = shared``: the two
  queue on one bucket) or in a peer link of its own (``separate``).

``ps`` (dense on the parameter server) has no real-process counterpart yet: the backend's
server holds embedding rows only.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import torch
import torch.distributed as dist

from workbench.cluster.shaped_link import ShapedLink
from workbench.cluster.time_model import BYTES_PER_FLOAT

__all__ = ["REAL_MODES", "DenseReducer", "Timing"]

#: The dense modes the backend runs in real processes.
REAL_MODES = ("after_backward", "overlapped", "concurrent")
DDP_DEFAULT_MB = (1.0, 25.0)  # DDP's first bucket and bucket_cap_mb when none is given


@dataclass
class Timing:
    """One iteration's dense synchronisation (module docstring), seconds."""

    compute_s: float = 0.0
    exposed_s: float = 0.0
    total_s: float = 0.0
    buckets: int = 0


class DenseReducer:
    """Forward, backward and the sum of the workers' dense gradients.

    Args:
        model: the worker's model (identical parameters on every worker).
        group: the workers' process group.
        mode: one of [`REAL_MODES`][].
        ring: the sender-side ring link (token-bucket network) or None (the kernel shapes);
            under ``concurrent`` with a shared link, the worker's link to the server itself.
        ring_latency_s: the ring's latency on ``ring`` (its ``2 (W - 1)`` one-way latencies)
            when ``ring`` is a link shared with other traffic; None: ``ring``'s own.
        bucket_mb: DDP's ``bucket_cap_mb`` (``overlapped``).
        first_bucket_mb: DDP's first bucket; DDP sets it apart only at its defaults (1 and 25
            MiB), otherwise every bucket is ``bucket_mb``.
        waiting: the context manager that marks a wait on a peer (the supervision).
    """

    def __init__(self, model: torch.nn.Module, group, mode: str, ring: ShapedLink | None,
                 bucket_mb: float = 25.0, first_bucket_mb: float = 1.0,
                 waiting: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
                 ring_latency_s: float | None = None) -> None:
        if mode not in REAL_MODES:
            raise ValueError(f"dense mode {mode!r}: the distributed backend runs {REAL_MODES}")
        if (mode == "overlapped" and first_bucket_mb != bucket_mb
                and (first_bucket_mb, bucket_mb) != DDP_DEFAULT_MB):
            raise ValueError(f"first_bucket_mb = {first_bucket_mb} with bucket_mb = {bucket_mb}: "
                             "DDP sets the first bucket apart only at its defaults (1 and 25 "
                             "MiB); give first_bucket_mb = bucket_mb")
        self.model, self.group, self.mode, self.ring = model, group, mode, ring
        self.ring_latency_s = ring_latency_s
        self._pending: tuple[Future, torch.Tensor] | None = None
        self.workers = dist.get_world_size(group)
        self.share = 2 * (self.workers - 1) / self.workers  # ring bytes per reduced byte
        self.params = list(model.parameters())
        self.waiting = waiting
        self.timing = Timing()
        self.module: torch.nn.Module = model
        if mode == "overlapped":
            default = (first_bucket_mb, bucket_mb) == DDP_DEFAULT_MB
            self.module = torch.nn.parallel.DistributedDataParallel(
                model, process_group=group, bucket_cap_mb=None if default else bucket_mb)
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dense-reduce")
            self._lock = threading.Lock()

            def hook(state, bucket):  # unannotated: DDP checks string annotations literally
                return self._hook(bucket)

            self.module.register_comm_hook(None, hook)
        elif mode == "concurrent":
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dense-reduce")

    @property
    def deferred(self) -> bool:
        """Whether the sum may still run after [`forward_backward`][] returns (``concurrent``:
        call [`finish`][] before the optimizer step)."""
        return self.mode == "concurrent"

    def _ring_wait(self, nbytes: int) -> None:
        """The ring's sender-side link time for ``nbytes`` of gradients (token bucket only)."""
        if self.ring is None or self.workers <= 1:
            return
        self.ring.wait(int(self.share * nbytes), self.ring_latency_s)

    # -- DDP's buckets ----------------------------------------------------------------------

    def _hook(self, bucket: dist.GradBucket) -> torch.futures.Future:
        """Sum one bucket on the collective thread; record when it was handed over."""
        buffer = bucket.buffer()
        handed = time.perf_counter()
        with self._lock:
            self._last_handed = handed
        future: torch.futures.Future = torch.futures.Future()

        def reduce() -> None:
            try:
                start = time.perf_counter()
                with self.waiting():
                    self._ring_wait(buffer.numel() * BYTES_PER_FLOAT)
                    dist.all_reduce(buffer, group=self.group)
                with self._lock:
                    self._total += time.perf_counter() - start
                    self._buckets += 1
                future.set_result(buffer)
            except BaseException as err:  # handed to the reducer, raised by backward()
                future.set_exception(err)

        self._pool.submit(reduce)
        return future

    # -- one iteration ----------------------------------------------------------------------

    def forward_backward(self, forward: Callable[[torch.nn.Module], torch.Tensor],
                         slowdown: float = 0.0) -> float:
        """Run ``forward(module)`` (the loss), backward and the dense sum; the gradients are
        the workers' sum in ``p.grad``. Returns the loss; [`timing`][] holds the phases.

        Args:
            forward: computes this worker's loss with the module it is given.
            slowdown: a slower worker's extra compute, as a multiple of its measured forward +
                backward (``1 / speed - 1``), slept after backward (``after_backward``) or,
                estimated from the previous iteration, before forward (``overlapped``: the
                buckets leave during backward, so its length must stay the real one).
        """
        t0 = time.perf_counter()
        if self.mode == "overlapped" and slowdown > 0:
            time.sleep(self.timing.compute_s / (1.0 + slowdown) * slowdown)
        loss = forward(self.module)
        if self.mode == "overlapped":
            self._last_handed, self._total, self._buckets = t0, 0.0, 0
            with self.waiting():  # backward waits for the buckets' collectives at its end
                loss.backward()
            done = time.perf_counter()
            self.timing = Timing(self._last_handed - t0, done - self._last_handed,
                                 self._total, self._buckets)
            return float(loss.detach())
        loss.backward()
        if slowdown > 0:
            time.sleep((time.perf_counter() - t0) * slowdown)
        t1 = time.perf_counter()
        flat = torch.cat([p.grad.reshape(-1) if p.grad is not None else torch.zeros(p.numel())
                          for p in self.params])
        if self.mode == "concurrent":  # the sum runs while the caller pushes its rows
            self._pending = (self._pool.submit(self._reduce, flat), flat)
            self.timing = Timing(t1 - t0, 0.0, 0.0, 1)
            return float(loss.detach())
        self._reduce(flat)
        self._unflatten(flat)
        t2 = time.perf_counter()
        self.timing = Timing(t1 - t0, t2 - t1, t2 - t1, 1)
        return float(loss.detach())

    def _reduce(self, flat: torch.Tensor) -> float:
        """Sum ``flat`` over the workers (the ring's link time, then the peers); its seconds."""
        start = time.perf_counter()
        with self.waiting():
            self._ring_wait(flat.numel() * BYTES_PER_FLOAT)
            dist.all_reduce(flat, group=self.group)
        return time.perf_counter() - start

    def _unflatten(self, flat: torch.Tensor) -> None:
        offset = 0
        for p in self.params:
            p.grad = flat[offset: offset + p.numel()].view_as(p).clone()
            offset += p.numel()

    def finish(self) -> None:
        """Wait for a deferred sum (``concurrent``) and hand it to ``p.grad``; [`timing`][]
        gets the wait (``exposed_s``) and the collective's own seconds. A no-op otherwise."""
        if self._pending is None:
            return
        future, flat = self._pending
        self._pending = None
        start = time.perf_counter()
        with self.waiting():
            total = future.result()
        self._unflatten(flat)
        self.timing = Timing(self.timing.compute_s, time.perf_counter() - start, total, 1)

    def close(self) -> None:
        """Stop the collective thread."""
        if self.mode in ("overlapped", "concurrent"):
            self._pool.shutdown(wait=True)
