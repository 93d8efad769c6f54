r"""What a stage run cost, recorded when it ran: the inputs of the claim -> command -> cost table.

Every successful ``python -m workbench.stages <stage>`` (which is what ``dvc repro`` runs)
writes ``<results>/costs/<stage id>.json`` (``<data>/costs/`` for the data stages, whose outputs
are not committed and which a fresh clone reruns), the stage id being its name in ``dvc.yaml``
(``dedup@taobao_sample``, ``notebook@esd``, ``het_train``)::

    seconds       wall time of the stage, from its start to its output written
    cpu_seconds   user + system CPU of the process and the children it waited for
    cores         cpu_seconds / seconds: the cores it kept busy on average
    peak_rss_mb   the largest resident memory of the process or of one of its children
    output_mb     the bytes under its output path when it finished
    machine       the CPU model, its logical cores and memory (the costs are this machine's)

The record sits outside every DVC output (``results/costs/`` is no stage's ``outs``), so it
never makes a stage's output differ between runs; it changes only when the stage really ran.
``workbench.report.costs`` turns the records into the claims' cost table.

A stage's cost can also be measured without touching the committed results::

    python -m workbench.stages.costs measure hotline recd@taobao_sample ...

copies ``results/`` into ``scratch/costs-run/results``, runs each stage's ``dvc.lock`` command
with ``paths.results`` pointing at the copy (so it reads the same inputs and writes its outputs
there), and keeps only the record, marked ``"rerun_into_copy": true``, in ``results/costs/``.
Only stages whose outputs all lie under ``results/`` can (the data stages, the notebooks and the
report write elsewhere: run those through ``dvc repro``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from workbench.utils.errors import UserError
from workbench.utils.io import write_json
from workbench.utils.paths import REPO_ROOT
from workbench.utils.timing import cpu_model

__all__ = ["COSTS_DIR", "Meter", "machine", "output_bytes", "measure"]

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
    """Measures one stage run: create it before the stage, :meth:`record` after.

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


COPY = Path("scratch") / "costs-run" / "results"  # where measure() reruns, under the project


def _command(stage_id: str, lock: dict[str, Any]) -> list[str]:
    """The stage's ``dvc.lock`` command as an argument list, checked to write only results."""
    entry = lock.get("stages", {}).get(stage_id)
    if entry is None:
        known = ", ".join(sorted(lock.get("stages", {})))
        raise UserError(f"{stage_id!r} is not a stage of dvc.lock (stage ids: {known})")
    outs = [str(o["path"]) for o in entry.get("outs", [])]
    if not outs or not all(o.startswith("results/") for o in outs):
        raise UserError(f"{stage_id} writes {outs}, not only under results/: measure it by "
                        "running it (dvc repro), which records its cost too")
    argv = shlex.split(entry["cmd"])
    if argv[:3] != ["python", "-m", "workbench.stages"]:
        raise UserError(f"{stage_id}: unexpected command {entry['cmd']!r}")
    return [sys.executable, *argv[1:]]


def measure(stage_ids: Sequence[str], root: Path = REPO_ROOT) -> list[Path]:
    """Rerun each stage into a copy of ``results/`` and keep its cost record (module docstring).

    Args:
        stage_ids: the stages' ``dvc.lock`` names (``hotline``, ``recd@taobao_sample``).
        root: the project root (``dvc.lock``, ``params.yaml``, ``results/``).

    Returns:
        The records written under ``results/costs/``.

    Raises:
        UserError: a stage not in ``dvc.lock`` or writing outside ``results/``, or a run that
            failed (the copy is left for a look).
    """
    lock = yaml.safe_load((root / "dvc.lock").read_text()) or {}
    commands = {s: _command(s, lock) for s in stage_ids}  # every id checked before any run
    copy = root / COPY
    written = []
    for stage_id, argv in commands.items():
        if copy.exists():
            shutil.rmtree(copy)
        shutil.copytree(root / "results", copy)
        print(f"costs: {stage_id} into {COPY} ...", flush=True)
        done = subprocess.run([*argv, f"paths.results={copy}"], cwd=root, check=False)
        if done.returncode:
            raise UserError(f"{stage_id} failed (exit {done.returncode}); its partial outputs "
                            f"are in {COPY}")
        record = json.loads((copy / COSTS_DIR / f"{stage_id}.json").read_text())
        record["rerun_into_copy"] = True
        path = root / "results" / COSTS_DIR / f"{stage_id}.json"
        write_json(path, record)
        print(f"costs: {stage_id} {record['seconds'] / 60:.1f} min, "
              f"{record['peak_rss_mb']:,.0f} MB peak -> {path.relative_to(root)}", flush=True)
        written.append(path)
    shutil.rmtree(copy, ignore_errors=True)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m workbench.stages.costs measure STAGE_ID ...``."""
    parser = argparse.ArgumentParser(prog="python -m workbench.stages.costs",
                                     description="Measure stages' costs by rerunning them into "
                                                 "a copy of results/ (the committed outputs "
                                                 "stay as they are).")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("measure", help="rerun stages into a copy, keep their cost records")
    run.add_argument("stages", nargs="+", help="dvc.lock stage ids, e.g. hotline "
                                               "recd@taobao_sample")
    args = parser.parse_args(argv)
    try:
        measure(args.stages)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
