"""The claim record: one row of the claims table, judged by the register, and the gathering of
every section's rows into one row per register entry.

    Measurement (workbench.claims.<paper>) --recorded_claim--> Claim --section.json--> row
    rows of every section --collect--> one row per register entry, judged again (rejudge)

A row measures one entry of the claims register ([`workbench.claims.register`][],
``workbench/conf/claims.yaml``): it takes the paper, the claim, the paper's value and the rule
from the register, and the verdict from [`workbench.claims.register.judge`][]. [`collect`][]
judges every row again from the register, requires exactly one row per entry of a gathered
section (a register entry whose rule is ``not_comparable`` needs none: the register writes it),
and fails on a key not in the register or two rows for one claim. Context (other datasets,
units, baselines) goes into the section's tables and notes, never into claim rows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import InitVar, asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from workbench.claims import register as reg
from workbench.claims.measurement import Measurement
from workbench.claims.verdict import STATES, Verdict
from workbench.utils.errors import WorkbenchError

CLAIM_COLUMNS = ["key", "register", "paper", "claim", "basis", "paper_value", "measured", "mean",
                 "ci_low", "ci_high", "seeds", "ours", "setting", "assumed", "holds", "state",
                 "verdict", "rule", "note", "measurement_id"]


class CatalogueError(WorkbenchError, ValueError):
    """Claim rows and the claims register disagree (a key not in it, a missing or a second row)."""


@dataclass
class Claim:
    """One row of the claims table (a notebook adds it with
    [`Section.record`][workbench.report.sections.Section.record]).

    Give either ``verdict`` (from [`workbench.claims.verdict`][]) or ``state`` and ``rule``.

    Attributes:
        paper: short paper name (HET, ESD, RecD, Hotline, FlexShard).
        claim: the claim in words.
        paper_value: the paper's number with its source tag, e.g. ``"90% [P]"``.
        measured: what this run measured, formatted (mean with its interval over seeds).
        setting: the exact setting of the measurement (dataset, sizes, knobs).
        verdict: sets ``state`` and ``rule`` (not stored itself).
        note: caveats (sample size, ...).
        key: the register key of the claim this row measures.
        state: one of [`workbench.claims.verdict.STATES`][].
        rule: the rule that decided the state, with the numbers.
        basis: the paper's method, or our formalisation (papers known from their abstract).
        mean, ci_low, ci_high: the measured effect and its 95% interval (the rule's unit).
        seeds: how many seeds (repeats) the measurement holds.
        assumed: the assumed parameters at their committed values, with their ranges.
        holds: the state across each assumed parameter's range, in words.
        measurement: the payload the register judges (``values``, or ``a``/``b``).
        conditions: assumed parameter -> the sweep's points (``value`` plus a payload).
        register: the register version that last rewrote the claim's entry (``"v2"``).
        ours: the register's committed setting of ours (dataset, scale, mode, clock, dense
            sync, unit), as written before the run.

    Raises:
        ValueError: no verdict and no valid state.
    """

    paper: str
    claim: str
    paper_value: str
    measured: str
    setting: str
    verdict: InitVar[Verdict | None] = None
    note: str = ""
    key: str = ""
    state: str = ""
    rule: str = ""
    basis: str = ""
    mean: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    seeds: int = 0
    assumed: str = ""
    holds: str = ""
    measurement: dict[str, Any] = field(default_factory=dict)
    conditions: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    register: str = ""
    ours: str = ""

    def __post_init__(self, verdict: Verdict | None) -> None:
        if verdict is not None:
            self.state, self.rule = verdict.state, verdict.rule
        if self.state not in STATES:
            raise ValueError(f"claim {self.claim!r}: state {self.state!r} is not one of {STATES} "
                             "(pass verdict=...)")


def _jsonable(value: Any) -> Any:
    """Numpy scalars and arrays (and NaN) in a payload as plain JSON values."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (np.integer, np.floating, float)):
        return reg.finite_or_none(value)
    return value.item() if hasattr(value, "item") else value


#: The key under which a payload (the row's measurement, each sweep point) carries what the
#: register read from it, so the pages (and the holds text) use it without judging again.
JUDGED = reg.JUDGED


def _judged(entry: reg.Entry, payload: dict[str, Any], *, point: bool = True
            ) -> dict[str, Any]:
    """``payload`` with [`JUDGED`][]: the effect in words and its side of the paper's value
    ([`workbench.claims.register.reading`][]) and, for a sweep point, its state and the
    estimate's mean in the rule's unit. A payload already judged is judged afresh."""
    plain = {k: v for k, v in payload.items() if k != JUDGED}
    text, side = reg.reading(entry, plain)
    judged: dict[str, Any] = {"reading": text, "side": side}
    if point:
        est = reg.estimate(entry, plain)
        judged.update(state=reg.judge(entry, plain).state,
                      mean=None if est is None else reg.finite_or_none(est.mean))
    return {**plain, JUDGED: judged}


def measured_claim(entry: reg.Entry, *, text: str, setting: str, note: str = "",
                   measurement: dict[str, Any], conditions: dict[str, list[dict[str, Any]]]
                   ) -> Claim:
    """The claim row of ``entry`` from a measurement (numpy values made plain JSON), judged by
    the register (see [`workbench.claims.register`][]); the report stage calls it again on the
    stored row."""
    measurement = _judged(entry, _jsonable(measurement), point=False)
    conditions = {name: [_judged(entry, p) for p in points]
                  for name, points in _jsonable(conditions).items()}
    verdict = reg.row_verdict(entry, measurement)
    est = reg.estimate(entry, measurement)
    return Claim(entry.paper, entry.claim, entry.paper_value, text, setting, verdict=verdict,
                 note=note, key=entry.key, basis=reg.BASES[entry.basis],
                 mean=None if est is None else reg.finite_or_none(est.mean),
                 ci_low=None if est is None else reg.finite_or_none(est.lo),
                 ci_high=None if est is None else reg.finite_or_none(est.hi),
                 seeds=reg.samples(entry, measurement),
                 assumed="; ".join(a.describe() for a in entry.assumed),
                 holds=reg.holds(entry, conditions), measurement=measurement,
                 conditions=conditions, register=entry.register, ours=entry.ours_text())


def recorded_claim(entry: reg.Entry, m: Measurement) -> Claim:
    """The claim row of a measurement from [`workbench.claims`][], judged by the register."""
    return measured_claim(entry, text=m.text, setting=m.setting, note=m.note,
                          measurement=dict(m.payload), conditions=dict(m.conditions))


def measured_row(entry: reg.Entry, m: Measurement) -> dict[str, Any]:
    """[`recorded_claim`][] as ``section.json`` holds it (JSON values): the row
    [`Section.record`][workbench.report.sections.Section.record] writes for the same
    measurement."""
    return cast(dict[str, Any], json.loads(json.dumps(asdict(recorded_claim(entry, m)))))


def register_claim(entry: reg.Entry) -> Claim:
    """The row of a register entry that needs no measurement (a ``not_comparable`` rule)."""
    return Claim(entry.paper, entry.claim, entry.paper_value, "-", entry.ours_text() or "-",
                 verdict=reg.judge(entry, {}), key=entry.key, basis=reg.BASES[entry.basis],
                 register=entry.register, ours=entry.ours_text())


def verdict_text(row: dict[str, Any]) -> str:
    """The state as the claims table shows it: ``"reproduced (our formalisation)"`` for a paper
    known from its abstract."""
    formal = row.get("basis") == reg.BASES["formalisation"]
    return row["state"] + (" (our formalisation)" if formal else "")


def rejudge(row: dict[str, Any], register: reg.Register) -> dict[str, Any]:
    """``row`` judged again from the register entry of its key (its measurement and sweeps);
    a row without a stored measurement keeps its state."""
    entry = register[row["key"]]
    if entry.kind == "not_comparable":
        fresh = register_claim(entry)
        fresh.measured, fresh.setting, fresh.note = (row.get("measured", "-"),
                                                      row.get("setting", "-"),
                                                      row.get("note", ""))
        out = asdict(fresh)
    elif "measurement" in row and row["measurement"]:
        out = asdict(measured_claim(entry, text=row["measured"], setting=row["setting"],
                                    note=row.get("note", ""), measurement=row["measurement"],
                                    conditions=row.get("conditions") or {}))
    else:
        out = dict(row)
    out["verdict"] = verdict_text(out)
    return out


def item_anchor(item: Mapping[str, Any]) -> str:
    """The anchor of a figure or table on its page: ``fig-<name>`` or ``tab-<name>``."""
    return ("fig-" if item["kind"] == "figure" else "tab-") + Path(item["file"]).stem


def shown_in(section: Mapping[str, Any], number: int) -> list[Mapping[str, Any]]:
    """The figures, then the tables, of ``section`` that show its claim ``number``."""
    items = [i for i in section["items"] if number in i.get("claims", [])]
    return ([i for i in items if i["kind"] == "figure"]
            + [i for i in items if i["kind"] == "table"])


def collect(loaded: Sequence[Mapping[str, Any]], register: reg.Register | None = None
            ) -> list[dict[str, Any]]:
    """One claim row per register entry of the gathered sections, judged from the register.

    Rows come in the register's order; each gets ``section`` and ``number`` (its place on its
    section's page; empty for a row the register writes itself) and ``shown`` (the anchor of
    the first item showing it). The rows are the notebooks' measures (each claim is measured
    once, by the notebook that shows it); the report stage holds each section to the results
    it read ([`workbench.report.lineage.outdated`][]).

    Args:
        loaded: the sections' ``section.json`` contents (``name``, ``claims``, ``items``).
        register: the register (default: the committed one).

    Raises:
        CatalogueError: a row without a key or with a key not in the register, two rows for one
            claim, or a measured entry of a gathered section without its row.
    """
    register = register or reg.load()
    sections = [s["name"] for s in loaded]
    known = set(register.keys())
    by_key: dict[str, list[dict[str, Any]]] = {}
    bad = []
    for sec in loaded:
        for number, c in enumerate(sec["claims"], 1):
            if c.get("key") not in known:
                bad.append(f"{c.get('key')!r} ({sec['name']} #{number}: {c.get('claim')})")
                continue
            first = shown_in(sec, number)
            by_key.setdefault(c["key"], []).append({**c, "section": sec["name"],
                                                    "number": number,
                                                    "shown": item_anchor(first[0]) if first
                                                    else ""})
    if bad:
        raise CatalogueError(f"claim rows whose key is not in {reg.REGISTER_FILE.name}: "
                             + "; ".join(bad))
    twice = [k + " (" + ", ".join(f"{r['section']} #{r['number']}" for r in rows) + ")"
             for k, rows in by_key.items() if len(rows) > 1]
    if twice:
        raise CatalogueError("two or more rows for one claim: " + "; ".join(twice)
                             + ". One row per register entry; other datasets, units and "
                             "baselines go into the section as context.")
    absent = [f"{e.key} ({e.paper}: {e.claim}; expected from notebooks/{e.section}.py)"
              for e in register.entries if e.kind != "not_comparable"
              and e.section in sections and e.key not in by_key]
    if absent:
        raise CatalogueError("register claims with no claim row: " + "; ".join(absent)
                             + ". Each notebook must measure every register claim it covers "
                             "(section.measure(key, ...)), with missing= the reason when its "
                             "setting cannot measure it.")
    claims = []
    for e in register.entries:
        if e.key in by_key:
            row = by_key[e.key][0]
            where = {k: row[k] for k in ("section", "number", "shown")}
            claims.append({**rejudge(row, register), **where})
        elif e.kind == "not_comparable" and e.section in sections:
            claims.append({**rejudge(asdict(register_claim(e)), register), "section": "",
                           "number": 0, "shown": ""})
    return claims
