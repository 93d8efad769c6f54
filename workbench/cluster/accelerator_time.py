r"""Hotline's time model: one mini-batch of each scheme on an accelerator server, as a timeline.

Our formalisation (Hotline's method section is unavailable; the pipeline of
[`workbench.training.hotline`][]). The rates come from a
[`HardwareConfig`][workbench.cluster.config.HardwareConfig] (a V100 / A100-class server from
``workbench/conf/hardware/``, or this machine's rates fitted from the measured runs). With
``r = 4 D`` bytes per row and ``F`` the training FLOPs
(3 x forward) of one sample:

    compute(n)  = [n > 0] (overhead + n F / (peak x efficiency))    one micro-batch's fwd + bwd
    dense       = dense_update                                      once per mini-batch
    accel(u)    = u r / accelerator_gbps          gather or update of u rows in HBM
    host(u)     = u r / host_gbps                 gather or write-back of u rows in DRAM
    link(u)     = [u > 0] (latency + u r / link_gbps)

    split(n)    = n x host_split_ns_per_lookup    Hotline's host split of n lookups

    hybrid:   host(U) -> link(U) -> compute(B) -> dense -> link(U) -> host(U)        (in series)
    hotline:  accel(Up) -> compute(Bp)                 } in parallel, the next phase starts
              host(Unc) -> link(Unc)                    } at the later of the two ends
              -> accel(Unh) -> compute(Bn) -> dense -> accel(Up + Unh) -> link(Unc) -> host(Unc)
              split(B F) of the NEXT mini-batch, from 0 on the planner thread: the step ends
              at the later of the two (a step never ends before its successor's plan)
    hot:      accel(U) -> compute(B) -> dense -> accel(U)  (accelerator-only; FAE's hot batches)

    U: distinct keys of the mini-batch; Up: of its popular micro-batch (Bp samples);
    Unh / Unc: distinct hot / cold keys of its non-popular micro-batch (Bn samples)

FAE's normal batches are hybrid steps; its phase switches move the hot rows over the link
(``link(H)`` each way, [`sync_seconds`][]). A multi-accelerator server's dense AllReduce is
not modelled (one accelerator).
"""

from __future__ import annotations

from workbench.cluster.config import HardwareConfig

__all__ = ["Phase", "step_timeline", "step_seconds", "sync_seconds"]

Phase = tuple[str, str, float, float]  # lane, phase, start s, end s


class _Rates:
    def __init__(self, hw: HardwareConfig, row_bytes: int, train_flops: float) -> None:
        self.hw, self.row, self.flops = hw, row_bytes, train_flops

    def compute(self, n: int) -> float:
        if n <= 0:
            return 0.0
        return (self.hw.step_overhead_us * 1e-6
                + n * self.flops / (self.hw.peak_tflops * 1e12 * self.hw.compute_efficiency))

    def dense(self) -> float:
        return self.hw.dense_update_us * 1e-6

    def accel(self, u: int) -> float:
        return u * self.row / (self.hw.accelerator_gbps * 1e9)

    def host(self, u: int) -> float:
        return u * self.row / (self.hw.host_gbps * 1e9)

    def split(self, lookups: int) -> float:
        return lookups * self.hw.host_split_ns_per_lookup * 1e-9

    def link(self, u: int) -> float:
        return 0.0 if u <= 0 else (self.hw.link_latency_us * 1e-6
                                   + u * self.row / (self.hw.link_gbps * 1e9))


def _series(out: list[Phase], start: float, steps: list[tuple[str, str, float]]) -> float:
    """Append ``steps`` back to back from ``start`` (zero-length ones skipped); return the end."""
    t = start
    for lane, phase, seconds in steps:
        if seconds > 0:
            out.append((lane, phase, t, t + seconds))
            t += seconds
    return t


def step_timeline(kind: str, hw: HardwareConfig, row_bytes: int, train_flops: float, *,
                  samples: int, popular: int, unique_all: int, unique_popular: int,
                  unique_np_hot: int, unique_np_cold: int, lookups: int = 0) -> list[Phase]:
    """The modelled phases of one mini-batch.

    Args:
        kind: ``hybrid``, ``hotline`` or ``hot`` (every row in the accelerator tier).
        hw: the server's rates.
        row_bytes: bytes of one embedding row (4 D).
        train_flops: training FLOPs of one sample (3 x forward).
        samples: samples of the mini-batch (the fields below are those of
            [`workbench.training.hotline.MicroBatchCounts`][]).
        popular: samples whose every key is hot.
        unique_all: distinct keys of the mini-batch.
        unique_popular: distinct keys of the popular micro-batch (all hot).
        unique_np_hot: distinct hot keys of the non-popular micro-batch.
        unique_np_cold: distinct cold keys of the non-popular micro-batch (gathered from host).
        lookups: the mini-batch's lookups (B F; Hotline's host split is per lookup).

    Returns:
        ``[(lane, phase, start, end), ...]``; the step ends at the largest ``end``.
    """
    r = _Rates(hw, row_bytes, train_flops)
    out: list[Phase] = []
    if kind == "hybrid":
        u = unique_all
        _series(out, 0.0, [("host", "gather all", r.host(u)), ("link", "upload", r.link(u)),
                           ("accelerator", "compute mini-batch", r.compute(samples)),
                           ("accelerator", "dense update", r.dense()),
                           ("link", "download", r.link(u)), ("host", "write-back", r.host(u))])
    elif kind == "hot":
        u = unique_all
        _series(out, 0.0, [("accelerator", "gather hot", r.accel(u)),
                           ("accelerator", "compute mini-batch", r.compute(samples)),
                           ("accelerator", "dense update", r.dense()),
                           ("accelerator", "update hot", r.accel(u))])
    elif kind == "hotline":
        pop_end = _series(out, 0.0, [("accelerator", "gather hot (popular)",
                                      r.accel(unique_popular)),
                                     ("accelerator", "compute popular", r.compute(popular))])
        cold_end = _series(out, 0.0, [("host", "gather non-popular", r.host(unique_np_cold)),
                                      ("link", "upload non-popular", r.link(unique_np_cold))])
        _series(out, max(pop_end, cold_end), [
            ("accelerator", "gather hot (non-popular)", r.accel(unique_np_hot)),
            ("accelerator", "compute non-popular", r.compute(samples - popular)),
            ("accelerator", "dense update", r.dense()),
            ("accelerator", "update hot", r.accel(unique_popular + unique_np_hot)),
            ("link", "download", r.link(unique_np_cold)),
            ("host", "write-back", r.host(unique_np_cold))])
        _series(out, 0.0, [("planner", "classify next", r.split(lookups))])
    else:
        raise ValueError(f"kind {kind!r}: must be 'hybrid', 'hotline' or 'hot'")
    return out


def step_seconds(kind: str, hw: HardwareConfig, row_bytes: int, train_flops: float,
                 **counts: int) -> float:
    """The modelled time of one mini-batch (the end of [`step_timeline`][])."""
    phases = step_timeline(kind, hw, row_bytes, train_flops, **counts)
    return max((end for _, _, _, end in phases), default=0.0)


def sync_seconds(hw: HardwareConfig, row_bytes: int, hot_rows: int) -> float:
    """One FAE phase switch: the hot rows over the link (one direction)."""
    return _Rates(hw, row_bytes, 0.0).link(hot_rows)
