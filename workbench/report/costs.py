r"""The claim -> command -> cost table: for each claim of the register, the command that
regenerates exactly it and what that costs, from the costs the stages recorded when they ran.

For a claim measured from stages ``S`` (the register's ``measured_by``: its stage and ``also``),
the stages behind it are ``S`` with every stage upstream of them, read from ``dvc.lock`` (a
stage is upstream when one of its outputs is, or holds, a dependency path of a stage behind the
claim)::

    command      make claim KEY=<key>: python -m workbench.repro -f <S>, then the claim judged
    minutes      sum of the recorded wall seconds of the stages behind it (run one at a time;
                 ``make repro`` runs independent stages side by side, so it takes less)
    own minutes  the same over S alone (when their inputs are already in place)
    cores        the most cores one of them kept busy (CPU seconds / wall seconds)
    peak memory  the largest peak resident memory of one of them
    disk         the bytes their outputs hold
    accelerator  whether a GPU helps (a stage of ACCELERATED)

A stage without a record (:mod:`workbench.stages.costs`: it has not run since costs were
recorded) is named under "not recorded", and the sums say they are partial. The stages with an
output under ``data/`` (``download``, ``preprocess``, ``dedup``) keep their records in
``data/costs/``: those outputs are not committed either.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from workbench.report import register as reg

__all__ = ["ACCELERATED", "stage_graph", "behind", "read_costs", "cost_table", "markdown"]

#: Stages whose work a GPU takes over when one is configured (``device: cuda``).
ACCELERATED = {"hotline": "Hotline's tiers and micro-batches (experiments.hotline.device)"}
COLUMNS = ["key", "paper", "command", "stages", "minutes", "own_minutes", "cores",
           "peak_memory_mb", "disk_mb", "accelerator", "not_recorded"]


def _base(stage_id: str) -> str:
    return stage_id.split("@", 1)[0]


def stage_graph(lock: dict[str, Any]) -> dict[str, set[str]]:
    """Each stage id of ``dvc.lock`` -> the stage ids directly upstream of it."""
    stages = lock.get("stages", {})
    outs = {stage: [str(o["path"]).rstrip("/") for o in entry.get("outs", [])]
            for stage, entry in stages.items()}
    graph: dict[str, set[str]] = {}
    for stage, entry in stages.items():
        ups: set[str] = set()
        for dep in entry.get("deps", []):
            path = str(dep["path"]).rstrip("/")
            for other, paths in outs.items():
                if other != stage and any(path == o or path.startswith(o + "/")
                                          or o.startswith(path + "/") for o in paths):
                    ups.add(other)
        graph[stage] = ups
    return graph


def behind(stages: Iterable[str], graph: dict[str, set[str]]) -> list[str]:
    """``stages`` and everything upstream of them (sorted)."""
    todo, seen = list(stages), set()
    while todo:
        s = todo.pop()
        if s not in seen:
            seen.add(s)
            todo.extend(graph.get(s, ()))
    return sorted(seen)


def read_costs(results: Path) -> dict[str, dict[str, Any]]:
    """The recorded cost of every stage id (``results/costs/*.json``)."""
    folder = results / "costs"
    if not folder.is_dir():
        return {}
    return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}


def _claim_stage_ids(entry: reg.Entry, graph: dict[str, set[str]]) -> list[str]:
    return sorted(s for s in graph if _base(s) in entry.stages)


def cost_table(register: reg.Register, lock: dict[str, Any],
               costs: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """One row per register entry (register order); see the module docstring."""
    graph = stage_graph(lock)
    rows = []
    for e in register.entries:
        own = _claim_stage_ids(e, graph)
        if e.kind == "not_comparable" or not own:
            rows.append({"key": e.key, "paper": e.paper, "command": "-",
                         "stages": "-", "accelerator": "-", "not_recorded": "",
                         "minutes": None, "own_minutes": None, "cores": None,
                         "peak_memory_mb": None, "disk_mb": None})
            continue
        every = behind(own, graph)
        found = [costs[s] for s in every if s in costs]
        missing = [s for s in every if s not in costs]
        own_found = [costs[s] for s in own if s in costs]
        rows.append({
            "key": e.key, "paper": e.paper, "command": f"make claim KEY={e.key}",
            "stages": ", ".join(sorted({_base(s) for s in own})),
            "minutes": sum(c["seconds"] for c in found) / 60 if found else None,
            "own_minutes": sum(c["seconds"] for c in own_found) / 60 if own_found else None,
            "cores": max((c["cores"] for c in found), default=None),
            "peak_memory_mb": max((c["peak_rss_mb"] for c in found), default=None),
            "disk_mb": sum(c["output_mb"] for c in found) if found else None,
            "accelerator": "helps: " + ACCELERATED[_base(own[0])]
            if any(_base(s) in ACCELERATED for s in own) else "no",
            "not_recorded": ", ".join(missing)})
    return pd.DataFrame(rows, columns=COLUMNS)


def _num(value: Any, fmt: str, unit: str = "") -> str:
    return "-" if value is None or pd.isna(value) else format(value, fmt) + unit


def markdown(table: pd.DataFrame, costs: dict[str, dict[str, Any]]) -> str:
    """The table as the report's page ``reports/costs.md``."""
    machines = sorted({json.dumps(c.get("machine", {}), sort_keys=True) for c in costs.values()})
    on = "; ".join(
        f"{m.get('cpu', '?')}, {m.get('logical_cores', '?')} cores, {m.get('memory_gib', '?')} GiB"
        for m in map(json.loads, machines)) or "no stage has recorded its cost yet"
    lines = [
        "# Claim -> command -> cost", "",
        "Generated by the `report` stage from the register and the costs the stages recorded when "
        "they ran (`results/costs/`, `workbench/stages/costs.py`); do not edit. `make claim "
        "KEY=<key>` reruns every stage behind the claim (`python -m workbench.repro -f`) and "
        "judges it. Minutes add the stages one after another; `make repro` runs independent "
        "stages side by side. A stage listed under *not recorded* has not run since costs were "
        "recorded: its sum is partial (run it, or `make claim`, to record it).", "",
        f"Measured on: {on}.", "",
        "| claim | command | stages | minutes (own) | cores | peak memory | disk | GPU | "
        "not recorded |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in table.itertuples():
        partial = "+" if r.not_recorded and not pd.isna(r.minutes) else ""
        minutes = (f"{_num(r.minutes, '.1f')}{partial} ({_num(r.own_minutes, '.1f')})"
                   if r.command != "-" else "-")
        lines.append(
            f"| `{r.key}` | {'`' + r.command + '`' if r.command != '-' else '-'} | {r.stages} | "
            f"{minutes} | {_num(r.cores, '.1f')} | {_num(r.peak_memory_mb, ',.0f', ' MB')} | "
            f"{_num(r.disk_mb, ',.1f', ' MB')} | {r.accelerator} | {r.not_recorded or '-'} |")
    return "\n".join(lines) + "\n"


def write(register: reg.Register, root: Path, results: Path, out: Path,
          data: Path | None = None) -> pd.DataFrame:
    """Build the table from ``root/dvc.lock``, ``results/costs`` and ``data/costs`` (the data
    stages' records: not committed, as their outputs) and write ``out``."""
    lock_path = root / "dvc.lock"
    lock = yaml.safe_load(lock_path.read_text()) if lock_path.is_file() else {}
    costs = {**(read_costs(data) if data is not None else {}), **read_costs(results)}
    table = cost_table(register, lock or {}, costs)
    out.write_text(markdown(table, costs))
    return table
