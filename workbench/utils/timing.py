"""Wall-clock timing shared by the throughput stages and the benchmarks.

Timings on a shared machine are noisy, so a comparison runs every contender once per round,
alternating, for several rounds. The stages keep each one's best (least disturbed) time; the
benchmarks report the median with the mean, the 95th percentile, min and max
([`spread`][]).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


def repeat_seconds(runs: Mapping[str, Callable[[], object]], repeats: int,
                   warmup: bool = False) -> dict[str, list[float]]:
    """Wall times of each callable over ``repeats`` alternating rounds.

    Args:
        runs: name -> callable to time.
        repeats: rounds; each round calls every callable once, in the mapping's order, so a
            disturbance of the machine hits every contender alike.
        warmup: call each callable once, untimed, first (JIT compilation, allocator, caches).

    Returns:
        name -> its ``repeats`` times in seconds, in round order.
    """
    if repeats < 1:
        raise ValueError(f"repeats = {repeats}: must be >= 1")
    if warmup:
        for fn in runs.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, fn in runs.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return times


def best_seconds(runs: Mapping[str, Callable[[], object]], repeats: int,
                 warmup: bool = False) -> dict[str, float]:
    """Best wall time of each callable over ``repeats`` alternating rounds
    ([`repeat_seconds`][]): the least disturbed run.

    Returns:
        name -> the shortest time in seconds.
    """
    return {name: min(t) for name, t in repeat_seconds(runs, repeats, warmup).items()}


def spread(samples: Sequence[float]) -> dict[str, float | int]:
    """Median, mean, 95th percentile, min and max of repeated measurements (a benchmark's
    summary of one contender). The mean and the p95 show a slow tail the median hides.

    Args:
        samples: one value per run or per batch (seconds, or a rate).

    Returns:
        ``{"median", "mean", "p95", "min", "max", "n"}``; ``p95`` interpolates linearly
        between the order statistics (numpy's default).
    """
    if len(samples) == 0:
        raise ValueError("spread of no samples")
    arr = sorted(float(x) for x in samples)
    return {"median": float(statistics.median(arr)), "mean": float(statistics.fmean(arr)),
            "p95": float(np.percentile(arr, 95)), "min": arr[0], "max": arr[-1],
            "n": len(arr)}


def paired_ratio(times: Mapping[str, Sequence[float]], num: str,
                 den: str) -> dict[str, float | int]:
    """[`spread`][] of ``times[num][i] / times[den][i]`` over the rounds i of
    [`repeat_seconds`][] (a ratio per round, so a drift of the machine cancels out).

    Returns:
        ``{"median", "min", "max", "n"}`` of the per-round ratios.
    """
    return spread([a / b for a, b in zip(times[num], times[den], strict=True)])


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; else what ``platform`` knows)."""
    import platform

    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as f:
            names = [line.split(":", 1)[1].strip() for line in f
                     if line.startswith("model name")]
        cpu = names[0] if names else cpu
    return cpu


def machine() -> dict[str, str | int]:
    """Where and when a benchmark ran, for its JSON: the UTC date, the CPU model, the CPUs,
    Python's and numpy's versions (no host name: results are shared)."""
    import datetime
    import platform

    cpu = cpu_model()
    return {"date": datetime.datetime.now(datetime.UTC).date().isoformat(), "cpu": cpu,
            "cpus": os.cpu_count() or 0, "python": platform.python_version(),
            "numpy": np.__version__}


def bench_parser(script: str, doc: str | None, *, whole_doc: bool = False
                 ) -> argparse.ArgumentParser:
    """A benchmark's command line: the docstring's first line (``whole_doc``: all of it) as
    its description, and ``--out``, the JSON it writes (default
    ``results/<the script's name>.json`` beside the script).

    Args:
        script: the benchmark's ``__file__``.
        doc: its ``__doc__``.
        whole_doc: show the whole docstring under ``--help``, laid out as written.
    """
    text = doc or ""
    parser = (argparse.ArgumentParser(description=text,
                                      formatter_class=argparse.RawDescriptionHelpFormatter)
              if whole_doc else argparse.ArgumentParser(description=text.split("\n")[0]))
    path = Path(script)
    parser.add_argument("--out", type=Path, default=path.parent / "results" / f"{path.stem}.json",
                        help="the JSON it writes (default: %(default)s)")
    return parser


def pin_one_core() -> None:
    """Pin this process to the first CPU it may use (no-op where affinity is unsupported)."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})


@dataclass(frozen=True)
class ChildRun:
    """What [`run_measured`][] saw of a child process.

    Attributes:
        exit_code: the child's exit code.
        seconds: wall seconds from spawn to exit.
        peak_rss_mb: the child's peak RSS (``wait4``'s ``ru_maxrss``).
        floor_mb: this process's peak RSS when it spawned the child. A child starts in its
            parent's address space (fork or vfork, then exec), and Linux carries that space's
            high-water mark into the child's ``ru_maxrss``: a peak at the floor says nothing
            about the child, one above it is the child's own.
        cpu_seconds: the child's user plus system CPU seconds (all its threads and waited-for
            children).
    """

    exit_code: int
    seconds: float
    peak_rss_mb: float
    floor_mb: float
    cpu_seconds: float = 0.0


def run_measured(argv: list[str], env: dict[str, str] | None = None,
                 stdout: Any = None) -> ChildRun:
    """Run a command in a child process (with ``env``, default this process's environment) and
    measure its wall time, CPU time and peak RSS (its output goes to this process's stdout and
    stderr, or its stdout to the open file ``stdout``)."""
    import resource
    import subprocess

    floor_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=stdout)
    _, status, usage = os.wait4(proc.pid, 0)
    return ChildRun(os.waitstatus_to_exitcode(status), time.perf_counter() - t0,
                    usage.ru_maxrss / 1024, floor_mb, usage.ru_utime + usage.ru_stime)


def describe_checkout(checkout: Path | str) -> str:
    """A baseline checkout as its short commit, for a benchmark's JSON (no machine paths)."""
    import subprocess

    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=checkout,
                          capture_output=True, text=True)
    return f"commit {head.stdout.strip()}" if head.returncode == 0 else "a checkout (not git)"
