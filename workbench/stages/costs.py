r"""What a stage run cost, recorded when it ran: the inputs of the claim -> command -> cost table.

Every successful ``python -m workbench.stages <stage>`` (which is what ``dvc repro`` runs)
writes ``<results>/costs/<stage id>.json`` (``<data>/costs/`` for the data stages, whose outputs
are not committed and which a fresh clone reruns), the stage id being its name in ``dvc.yaml``
(``dedup@taobao_sample``, ``notebook@esd``, ``het_train``; a single-dataset stage run on
another dataset than the pipeline's records as ``het_train@<dataset>``, never over its record):

    seconds       wall time of the stage, from its start to its output written
    cpu_seconds   user + system CPU of the process and the children it waited for
    cores         cpu_seconds / seconds: the cores it kept busy on average
    peak_rss_mb   the largest resident memory of the process or of one of its children
    output_mb     the bytes under its output path when it finished
    machine       the CPU model, its logical cores and memory (the costs are this machine's)

The record sits outside every DVC output (``results/costs/`` is no stage's ``outs``), so it
never makes a stage's output differ between runs; it changes only when the stage really ran.
``workbench.report.costs`` turns the records into the claims' cost table.

A stage's cost can also be measured without touching the committed results: see
[`workbench.stages.cost_rerun`][].
"""

from __future__ import annotations

import datetime as dt
import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.utils.io import write_json
from workbench.utils.timing import cpu_model

__all__ = ["COSTS_DIR", "Meter", "machine", "output_bytes"]

COSTS_DIR = "costs"


def _cpu_seconds() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _peak_rss_mb() -> float:
    """Peak resident memory of this process or of its largest waited-for child (Linux: KiB)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return max(own.ru_maxrss, kids.ru_maxrss) / 1024


def output_bytes(path: Path) -> int:
    """Bytes of the files under ``path`` (a file: its size; missing: 0)."""
    if path.is_file():
        return path.stat().st_size
    if not path.is_dir():
        return 0
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def machine() -> dict[str, Any]:
    """The machine the costs were measured on."""
    memory = None
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        pass
    return {"cpu": cpu_model(), "logical_cores": len(os.sched_getaffinity(0)),
            "memory_gib": round(memory, 1) if memory else None}


@dataclass
class Meter:
    """Measures one stage run: create it before the stage, [`record`][] after.

    Attributes:
        stage_id: the stage's name in ``dvc.yaml`` (with ``@<item>`` for a matrix stage).
    """

    stage_id: str

    def __post_init__(self) -> None:
        self._wall = time.perf_counter()
        self._cpu = _cpu_seconds()

    def record(self, results: Path, output: Path) -> Path:
        """Write the run's cost to ``results/costs/<stage id>.json``; returns that path."""
        seconds = time.perf_counter() - self._wall
        cpu = _cpu_seconds() - self._cpu
        record = {"stage": self.stage_id, "seconds": round(seconds, 3),
                  "cpu_seconds": round(cpu, 3),
                  "cores": round(cpu / seconds, 2) if seconds > 0 else 0.0,
                  "peak_rss_mb": round(_peak_rss_mb(), 1),
                  "output_mb": round(output_bytes(output) / 2**20, 3),
                  "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d"),
                  "machine": machine()}
        path = results / COSTS_DIR / f"{self.stage_id}.json"
        write_json(path, record)
        return path

