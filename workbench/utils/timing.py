"""Wall-clock timing shared by the throughput stages and the benchmarks.

Timings on a shared machine are noisy, so a comparison runs every contender once per round,
alternating, for several rounds and keeps each one's best (least disturbed) time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping


def best_seconds(runs: Mapping[str, Callable[[], object]], repeats: int,
                 warmup: bool = False) -> dict[str, float]:
    """Best wall time of each callable over ``repeats`` alternating rounds.

    Args:
        runs: name -> callable to time.
        repeats: rounds; each round calls every callable once, in the mapping's order.
        warmup: call each callable once, untimed, first (JIT compilation, allocator, caches).

    Returns:
        name -> the shortest time in seconds.
    """
    if repeats < 1:
        raise ValueError(f"repeats = {repeats}: must be >= 1")
    if warmup:
        for fn in runs.values():
            fn()
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeats):
        for name, fn in runs.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def pin_one_core() -> None:
    """Pin this process to the first CPU it may use (no-op where affinity is unsupported)."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
