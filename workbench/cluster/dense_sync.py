r"""Dense synchronisation: how the dense gradients travel, and how much of it an iteration sees.

The embedding rows travel to and from the parameter server (:mod:`workbench.cluster.time_model`);
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

The ring (all three modes' collective, W workers): ``2 (W - 1)`` steps, in each of which every
worker sends ``bytes / W`` to its neighbour and every link runs at once, so one step takes the
slowest link's ``L_j + c_step + bytes / (W B_j)`` (``c_step``: the collective's own software
cost per step)::

    ring(bytes) = 2 (W - 1) x max_j ( L_j + c_step + bytes / (W B_j) )

Bucketed schedule of one BSP iteration that ends (the slowest worker's backward done) at ``E``;
backward takes ``b = backward_share x compute`` of that worker and produces the gradients at a
constant rate in bytes, so bucket ``i`` (cumulative bytes ``c_i`` of ``total``) is ready at
``r_i``::

    r_i = E - b + b c_i / total
    f_0 = r_0 + ring(bytes_0);   f_i = max(r_i, f_{i-1}) + ring(bytes_i)
    exposed = max(0, f_last - E)

    backward   |=========== b ===========|E
    bucket 0        r_0|--ring 0--|
    bucket 1                    r_1|----ring 1----|      exposed = f_1 - E
                                                 f_1

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

__all__ = ["DENSE_MODES", "DenseSync", "ring_seconds"]

#: ``cluster.dense_mode``: see the module docstring.
DENSE_MODES = ("after_backward", "overlapped", "ps")
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


@dataclass(frozen=True)
class DenseSync:
    """The dense synchronisation mode and its parameters (``cluster.dense_mode`` and friends).

    Attributes:
        mode: one of :data:`DENSE_MODES`.
        bucket_mb: DDP's bucket size (``bucket_cap_mb``), MiB.
        first_bucket_mb: DDP's first bucket (the last layers' gradients, ready first), MiB.
        backward_share: the share of a worker's compute that is the backward pass, over which
            the gradients become ready (an assumed parameter: backward is about 2/3 of forward
            + backward FLOPs; the sweeps show its range).
    """

    mode: str = "after_backward"
    bucket_mb: float = 25.0
    first_bucket_mb: float = 1.0
    backward_share: float = 2.0 / 3.0

    def __post_init__(self) -> None:
        if self.mode not in DENSE_MODES:
            raise ValueError(f"dense mode {self.mode!r}: must be one of {DENSE_MODES}")
        for name in ("bucket_mb", "first_bucket_mb"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} = {value}: must be a finite number > 0")
        if not 0.0 <= self.backward_share <= 1.0:
            raise ValueError(f"backward_share = {self.backward_share}: must be in [0, 1]")

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
        return "after_backward (one flat ring AllReduce)"
