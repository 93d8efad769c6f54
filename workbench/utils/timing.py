"""Wall-clock timing shared by the throughput stages and the benchmarks.

Timings on a shared machine are noisy, so a comparison runs every contender once per round,
alternating, for several rounds and keeps each one's best (least disturbed) time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass


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


@dataclass(frozen=True)
class ChildRun:
    """What :func:`run_measured` saw of a child process.

    Attributes:
        exit_code: the child's exit code.
        seconds: wall seconds from spawn to exit.
        peak_rss_mb: the child's peak RSS (``wait4``'s ``ru_maxrss``).
        floor_mb: this process's peak RSS when it spawned the child. A child starts in its
            parent's address space (fork or vfork, then exec), and Linux carries that space's
            high-water mark into the child's ``ru_maxrss``: a peak at the floor says nothing
            about the child, one above it is the child's own.
    """

    exit_code: int
    seconds: float
    peak_rss_mb: float
    floor_mb: float


def run_measured(argv: list[str]) -> ChildRun:
    """Run a command in a child process and measure its wall time and peak RSS (its output goes
    to this process's stdout and stderr)."""
    import resource
    import subprocess

    floor_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv)
    _, status, usage = os.wait4(proc.pid, 0)
    return ChildRun(os.waitstatus_to_exitcode(status), time.perf_counter() - t0,
                    usage.ru_maxrss / 1024, floor_mb)
