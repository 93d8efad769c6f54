r"""Dense synchronisation: how the dense gradients travel, and how much of it an iteration sees.

The embedding rows travel to and from the parameter server ([`workbench.cluster.time_model`][]);
the dense parameters (the MLPs, a few hundred kB to a few MB) are synchronised once per
iteration in one of three modes (``cluster.dense_mode``):

* ``after_backward``: one flat ring AllReduce of every dense gradient once the backward pass
  has finished (the distributed backend's ``dist.all_reduce`` of one flattened buffer). Fully
  exposed: it adds to every BSP step.
* ``overlapped``: PyTorch DDP's bucketed AllReduce. The gradients are packed into buckets in
  the order backward produces them (the first bucket ``first_bucket_mb``, DDP's 1 MiB, the
  others ``bucket_mb``, DDP's 25 MiB); each bucket's AllReduce starts once backward has
  produced it and the previous bucket's AllReduce is done (one communication stream). Only what
  runs past the end of backward is exposed.
* ``ps``: each worker pushes its dense gradient and pulls the parameters over its own link to
  the parameter server, in the same messages as its embedding rows (one row each way; fused
  into the prefetched message under ``overlap = prefetch``): no collective at all, the bytes
  count in the worker's PS communication instead (systems without a parameter server, the
  AllGather baseline, keep the ``after_backward`` ring).
* ``concurrent`` (HET's client, its Fig. 5: Write and AllReduce together, its communication
  asynchronous): one flat ring AllReduce that starts when the gating worker's backward ends and
  runs while the embedding exchange is still on the wire, each on the link it uses
  (``link``, below).

The ring's links (``link``, the ``concurrent`` mode's link class): ``shared``, the workers'
own NICs, the same links their parameter-server traffic crosses (one GPU per node, HET's
cluster A); ``separate``, a worker-to-worker path of its own (``peer_bandwidth_gbps``,
``peer_latency_ms``: GPUs of one node over PCIe or NVLink), which the embedding traffic never
crosses.

The ring (all three modes' collective, W workers): ``2 (W - 1)`` steps, in each of which every
worker sends ``bytes / W`` to its neighbour and every link runs at once, so one step takes the
slowest link's ``L_j + c_step + bytes / (W B_j)`` (``c_step``: the collective's own software
cost per step):

    ring(bytes) = 2 (W - 1) x max_j ( L_j + c_step + bytes / (W B_j) )

Bucketed schedule of one BSP iteration that ends (the slowest worker's backward done) at ``E``;
backward takes ``b = backward_share x compute`` of that worker and produces the gradients at a
constant rate in bytes, so bucket ``i`` (cumulative bytes ``c_i`` of ``total``) is ready at
``r_i``:

    r_i = E - b + b c_i / total
    f_0 = r_0 + ring(bytes_0);   f_i = max(r_i, f_{i-1}) + ring(bytes_i)
    exposed = max(0, f_last - E)

    backward   |=========== b ===========|E
    bucket 0        r_0|--ring 0--|
    bucket 1                    r_1|----ring 1----|      exposed = f_1 - E
                                                 f_1

Concurrent schedule of one BSP iteration (times from its start; worker j's compute ``c_j``, its
embedding communication ``comm_j`` of which ``w_j`` is the write after backward, ``R`` the
ring, ``R^b_j = 2 (W - 1) bytes / (W B_j)`` the ring's wire time on worker j's link):

    none:      E = max_j t_j,  t_j = iter_j - w_j  (read, compute: the write starts at t_j)
               separate: step = max( max_j iter_j, E + R )
               shared:   step = max( max_j iter_j + R^b_j, E + R )
    prefetch:  (the embedding exchange already runs during compute; the next forward needs
               both the rows and the ring's parameters)
               separate: step = max( max_j comm_j, max_j c_j + R )
               shared:   step = max( max_j (comm_j + R^b_j), max_j c_j + R )
    exposed = step - max_j iter_j

    write      t_j|--w_j--|
    ring         E|------R------|          (shared: w_j and R^b_j queue on one link)

A shared link is work-conserving: both transfers finish no earlier than the later one's start
plus all the work still queued, and the write is counted whole (its latency too), so the shared
rows are an upper bound. Properties: ``separate`` <= ``shared`` <= ``after_backward`` on the
same links, and ``R = 0`` gives the step without dense sync.

Properties (``tests/test_clock.py``): one bucket gives exactly the flat AllReduce; the exposed
time never exceeds the same buckets all-reduced after backward; without per-step costs (``L = 0``,
``c_step = 0``) it never exceeds the flat AllReduce. With latency each bucket pays its own
``2 (W - 1)`` latencies, so many small buckets can lose to one flat AllReduce on slow-latency
links: the price DDP pays for overlap, which the sweeps show.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["DENSE_LINKS", "DENSE_MODES", "DenseSync", "ring_seconds", "ring_wire_seconds"]

#: ``cluster.dense_mode``: see the module docstring.
DENSE_MODES = ("after_backward", "overlapped", "ps", "concurrent")
#: ``cluster.dense_link``: the ring's links in the ``concurrent`` mode (module docstring).
DENSE_LINKS = ("shared", "separate")
MIB = 2 ** 20


def ring_seconds(nbytes: float, bandwidth_Bps: np.ndarray, latency_s: np.ndarray,
                 message_s: float = 0.0) -> float:
    """Ring AllReduce of ``nbytes`` over the workers' links (module docstring).

    Args:
        nbytes: bytes reduced (every worker holds them).
        bandwidth_Bps: each worker's link, bytes per second.
        latency_s: each worker's one-way latency, seconds.
        message_s: software cost of one step's send and receive, seconds.
    """
    workers = len(bandwidth_Bps)
    if workers <= 1 or nbytes <= 0:
        return 0.0
    step = latency_s + message_s + nbytes / (workers * bandwidth_Bps)
    return 2 * (workers - 1) * float(np.max(step))


def ring_wire_seconds(nbytes: float, bandwidth_Bps: np.ndarray) -> np.ndarray:
    """Each worker's link busy with the ring's bytes: ``2 (W - 1) bytes / (W B_j)``.

    Args:
        nbytes: bytes reduced.
        bandwidth_Bps: each worker's link, bytes per second.
    """
    workers = len(bandwidth_Bps)
    if workers <= 1 or nbytes <= 0:
        return np.zeros(workers)
    return 2 * (workers - 1) * nbytes / (workers * np.asarray(bandwidth_Bps, dtype=np.float64))


@dataclass(frozen=True)
class DenseSync:
    """The dense synchronisation mode and its parameters (``cluster.dense_mode`` and friends).

    Attributes:
        mode: one of [`DENSE_MODES`][].
        bucket_mb: DDP's bucket size (``bucket_cap_mb``), MiB.
        first_bucket_mb: DDP's first bucket (the last layers' gradients, ready first), MiB.
        backward_share: the share of a worker's compute that is the backward pass, over which
            the gradients become ready (an assumed parameter: backward is about 2/3 of forward
            + backward FLOPs; the sweeps show its range).
        link: the ring's links in the ``concurrent`` mode, one of [`DENSE_LINKS`][].
        peer_bandwidth_gbps: the worker-to-worker path's bandwidth, Gb/s (``separate``).
        peer_latency_ms: its one-way latency, ms (``separate``).
    """

    mode: str = "after_backward"
    bucket_mb: float = 25.0
    first_bucket_mb: float = 1.0
    backward_share: float = 2.0 / 3.0
    link: str = "shared"
    peer_bandwidth_gbps: float = 100.0
    peer_latency_ms: float = 0.005

    def __post_init__(self) -> None:
        if self.mode not in DENSE_MODES:
            raise ValueError(f"dense mode {self.mode!r}: must be one of {DENSE_MODES}")
        for name in ("bucket_mb", "first_bucket_mb"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} = {value}: must be a finite number > 0")
        if not 0.0 <= self.backward_share <= 1.0:
            raise ValueError(f"backward_share = {self.backward_share}: must be in [0, 1]")
        if self.link not in DENSE_LINKS:
            raise ValueError(f"dense link {self.link!r}: must be one of {DENSE_LINKS}")
        if not (math.isfinite(self.peer_bandwidth_gbps) and self.peer_bandwidth_gbps > 0):
            raise ValueError(f"peer_bandwidth_gbps = {self.peer_bandwidth_gbps}: must be a "
                             "finite number > 0")
        if not (math.isfinite(self.peer_latency_ms) and self.peer_latency_ms >= 0):
            raise ValueError(f"peer_latency_ms = {self.peer_latency_ms}: must be a finite "
                             "number >= 0")

    @property
    def on_peer_links(self) -> bool:
        """Whether the ring runs on the worker-to-worker path (``concurrent``, ``separate``)."""
        return self.mode == "concurrent" and self.link == "separate"

    def ring_links(self, bandwidth_Bps: np.ndarray, latency_s: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
        """The links the ring crosses: the workers' own, or the peer path ([`on_peer_links`][]).

        Args:
            bandwidth_Bps: the workers' links, bytes per second.
            latency_s: their one-way latencies, seconds.
        """
        if not self.on_peer_links:
            return bandwidth_Bps, latency_s
        ones = np.ones(len(bandwidth_Bps))
        return ones * self.peer_bandwidth_gbps * 1e9 / 8, ones * self.peer_latency_ms * 1e-3

    def own_link_wire(self, nbytes: float, bandwidth_Bps: np.ndarray) -> np.ndarray:
        """The ring's wire seconds on each worker's own link ``R^b_j`` (module docstring):
        [`ring_wire_seconds`][], or zeros where the ring runs on the peer path."""
        if self.on_peer_links:
            return np.zeros(len(bandwidth_Bps))
        return ring_wire_seconds(nbytes, bandwidth_Bps)

    def concurrent_step(self, iteration_s: np.ndarray, comm_s: np.ndarray,
                        write_s: np.ndarray, compute_s: np.ndarray, prefetch: bool,
                        ring_s: np.ndarray | float, wire_s: np.ndarray) -> np.ndarray:
        """The BSP step of the ``concurrent`` schedule (module docstring), ``[..., 1]``.

        Args:
            iteration_s: each worker's iteration without dense sync, ``[..., W]``.
            comm_s: its embedding communication, ``[..., W]``.
            write_s: the part of it after backward (``none``), ``[..., W]``.
            compute_s: its compute, ``[..., W]``.
            prefetch: whether the embedding exchange overlaps compute (``overlap = prefetch``).
            ring_s: the ring's seconds ``R``.
            wire_s: the ring's wire seconds on each worker's own link ``R^b_j``, ``[W]``
                ([`own_link_wire`][]: zeros on ``separate``).
        """
        ring = np.asarray(ring_s, dtype=np.float64)
        if prefetch:  # iter_j = max(c_j, comm_j): both terms already bound it
            links = (comm_s + wire_s).max(-1, keepdims=True)
            gate = compute_s.max(-1, keepdims=True)
        else:
            links = (iteration_s + wire_s).max(-1, keepdims=True)
            gate = (iteration_s - write_s).max(-1, keepdims=True)
        return np.maximum(links, gate + ring)

    def buckets(self, dense_bytes: float) -> np.ndarray:
        """Bytes of each bucket in the order they become ready (one bucket unless
        ``overlapped``)."""
        if dense_bytes <= 0:
            return np.zeros(0)
        if self.mode != "overlapped":
            return np.array([float(dense_bytes)])
        first = min(float(dense_bytes), self.first_bucket_mb * MIB)
        rest = float(dense_bytes) - first
        size = self.bucket_mb * MIB
        full = int(rest // size)
        tail = rest - full * size
        sizes = [first] + [size] * full + ([tail] if tail > 0 else [])
        return np.array(sizes)

    def seconds(self, dense_bytes: float, bandwidth_Bps: np.ndarray, latency_s: np.ndarray,
                message_s: float, backward_s: np.ndarray | float = 0.0
                ) -> tuple[np.ndarray, np.ndarray]:
        """``(total, exposed)`` seconds of the collective per iteration.

        Args:
            dense_bytes: bytes of the dense gradients.
            bandwidth_Bps: the workers' links, bytes per second.
            latency_s: their one-way latencies, seconds.
            message_s: software cost of one ring step.
            backward_s: per iteration, the gating worker's backward time ``b`` (only the
                ``overlapped`` mode reads it).

        Returns:
            Arrays shaped like ``backward_s``: the collective's whole time (hidden or not) and
            the part past the end of backward (what the BSP step adds).
        """
        b = np.maximum(np.asarray(backward_s, dtype=np.float64), 0.0)
        sizes = self.buckets(dense_bytes)
        rings = [ring_seconds(s, bandwidth_Bps, latency_s, message_s) for s in sizes]
        total = np.full(b.shape, float(sum(rings)))
        if self.mode != "overlapped" or len(sizes) == 0:
            return total, total.copy()
        cum = np.cumsum(sizes) / sizes.sum()
        finish = np.full(b.shape, -np.inf)  # relative to the end of backward E
        for share, ring in zip(cum, rings):
            finish = np.maximum(-b + b * share, finish) + ring
        return total, np.maximum(finish, 0.0)

    def describe(self) -> str:
        """``overlapped (DDP buckets 1 + 25 MiB, backward 67% of compute)`` etc."""
        if self.mode == "overlapped":
            return (f"overlapped (DDP buckets {self.first_bucket_mb:g} + {self.bucket_mb:g} "
                    f"MiB, backward {100 * self.backward_share:.0f}% of compute)")
        if self.mode == "ps":
            return "ps (dense push + pull over each worker's own link)"
        if self.mode == "concurrent":
            path = ("the workers' own links" if self.link == "shared" else
                    f"a separate {self.peer_bandwidth_gbps:g} Gb/s, {self.peer_latency_ms:g} ms "
                    "peer path")
            return f"concurrent (one flat ring AllReduce beside the embedding exchange, on {path})"
        return "after_backward (one flat ring AllReduce)"
