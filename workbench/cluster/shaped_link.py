"""A link shaped in the sender: token bucket at the configured bandwidth plus a fixed latency.

The distributed backend ([`workbench.cluster.remote_ps`][], [`workbench.training.distributed`][])
runs on the loopback interface, where every byte moves at memory speed. To make a heterogeneous
edge link real in wall time, each sender passes every message through the [`ShapedLink`][] of
the link it leaves on before handing it to torch.distributed:

    tokens(t) = min(burst, tokens(t0) + B (t - t0))        refilled at B bytes/s, capped at burst
    send(n):   wait until tokens >= n (n > burst: until the bucket is full, then go into debt),
               tokens -= n, then wait the one-way latency L, then transmit

so a train of messages is limited to ``B`` on average, a single message of ``n`` bytes on an idle
link takes ``L + max(0, n - burst) / B``, and with ``burst = 0`` exactly ``L + n / B`` -- the
emulated clock's ``L + bytes / B`` ([`workbench.cluster.time_model`][]). Waiting sleeps, which
releases the GIL, so a shaped send on one thread does not stall another thread's compute.

Several senders may share one bucket (a parameter server's own network link, shared by the
replies to every worker): [`ShapedLink`][] is thread-safe.
"""

from __future__ import annotations

import threading
import time

__all__ = ["ShapedLink"]


class ShapedLink:
    """One direction of a link: bandwidth ``bandwidth_Bps`` bytes/s, one-way ``latency_s``.

    Args:
        bandwidth_Bps: sustained rate in bytes per second (``inf``: unshaped).
        latency_s: one-way latency added to every message.
        burst_bytes: bucket depth: bytes that may leave at once after an idle period.
        clock: the time source (``time.perf_counter``; tests pass a fake one).
        sleep: the sleep function (``time.sleep``; tests pass a fake one).

    Example:

        link = ShapedLink(bandwidth_Bps=1e9 / 8, latency_s=5e-3)   # 1 Gb/s, 5 ms
        link.wait(len(payload))        # blocks until the bytes may leave
        dist.send(tensor, dst)
    """

    def __init__(self, bandwidth_Bps: float, latency_s: float = 0.0, burst_bytes: float = 0.0,
                 clock=time.perf_counter, sleep=time.sleep) -> None:
        if not bandwidth_Bps > 0:  # NaN fails too; inf is the unshaped link
            raise ValueError(f"bandwidth_Bps = {bandwidth_Bps}: must be > 0")
        for name, value in (("latency_s", latency_s), ("burst_bytes", burst_bytes)):
            if not 0 <= value < float("inf"):  # NaN fails too
                raise ValueError(f"{name} = {value}: must be a finite number >= 0")
        self.bandwidth_Bps = float(bandwidth_Bps)
        self.latency_s = float(latency_s)
        self.burst_bytes = float(burst_bytes)
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = self.burst_bytes
        self._stamp = clock()
        self.bytes_sent = 0
        self.messages = 0

    @property
    def shaped(self) -> bool:
        """Whether the link delays anything at all."""
        return self.bandwidth_Bps != float("inf") or self.latency_s > 0

    def delay(self, nbytes: int, latency_s: float | None = None) -> float:
        """Reserve ``nbytes`` and return the seconds the sender must wait before transmitting
        (the bucket's debt plus the latency); does not sleep.

        Args:
            nbytes: the message's bytes.
            latency_s: this message's latency in place of the link's (a collective sharing the
                bucket, e.g. a ring's ``2 (W - 1)`` one-way latencies); None: the link's.
        """
        latency = self.latency_s if latency_s is None else latency_s
        if self.bandwidth_Bps == float("inf"):
            with self._lock:
                self.bytes_sent += int(nbytes)
                self.messages += 1
            return latency
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst_bytes,
                               self._tokens + (now - self._stamp) * self.bandwidth_Bps)
            self._stamp = now
            self._tokens -= nbytes
            debt = max(0.0, -self._tokens) / self.bandwidth_Bps
            self.bytes_sent += int(nbytes)
            self.messages += 1
        return debt + latency

    def wait(self, nbytes: int, latency_s: float | None = None) -> float:
        """Block until ``nbytes`` may leave (token bucket, then latency, [`delay`][]'s
        ``latency_s`` if given); returns the seconds waited."""
        seconds = self.delay(nbytes, latency_s) if self.shaped or latency_s else 0.0
        if seconds > 0:
            self._sleep(seconds)
        return seconds
