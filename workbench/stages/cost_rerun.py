"""A stage's cost measured without touching the committed results: a rerun into a copy.


    python -m workbench.stages.cost_rerun hotline recd@taobao_sample ...

copies ``results/`` into ``scratch/costs-run/results``, runs each stage's ``dvc.lock`` command
with ``paths.results`` pointing at the copy (so it reads the same inputs and writes its outputs
there, recording its cost as every run does: [`workbench.stages.costs`][]), and keeps only the
record, marked ``"rerun_into_copy": true``, in ``results/costs/``. Only stages whose outputs all
lie under ``results/`` can (the data stages, the notebooks and the report write elsewhere: run
those through ``dvc repro``, which records their costs too).
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workbench.report.lineage import load_lock
from workbench.stages.costs import COSTS_DIR
from workbench.utils.errors import UserError
from workbench.utils.io import write_json
from workbench.utils.paths import REPO_ROOT

__all__ = ["COPY", "measure", "main"]


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
    lock = load_lock(root)
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
    """``python -m workbench.stages.cost_rerun STAGE_ID ...``."""
    parser = argparse.ArgumentParser(prog="python -m workbench.stages.cost_rerun",
                                     description="Measure stages' costs by rerunning them into "
                                                 "a copy of results/ (the committed outputs "
                                                 "stay as they are).")
    parser.add_argument("stages", nargs="+", help="dvc.lock stage ids, e.g. hotline "
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
