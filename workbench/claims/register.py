"""The claims register: one entry per distinct claim of the five papers, and how each is judged.

The register is one configuration file, ``workbench/conf/claims.yaml``, written before the run:
for every claim the paper's words and value ([P] full text, [A] abstract), the paper's setting as
far as known, our committed setting, the stage and column that measure it and the function
that does (``measure``: [`workbench.claims`][]), the least number of seeds, the rule, the
assumed parameters with the plausible range each is swept over, and where a figure needs it the
paper's whole table (``paper_table``). The measures only *measure*; the register *judges*:

    workbench/conf/claims.yaml --load()--> Register --judge(entry, measurement)--> Verdict
    workbench/claims/<paper>.py: measure(results, entry) --> Measurement (values per seed,
        conditions = {param: [points]}) --> a claim row: the notebook's section (section.json),
        the report stage and make check, all judged here (reports/claims.csv: one row per entry)

A measurement is a payload whose shape follows the rule's kind:

    factor, percent   values: [x_seed0, x_seed1, ...]           (mean and 95% interval)
    less, close       a: [...], b: [...], labels: [...]          (one deterministic replay)
    decline           values: [[series_seed0], [series_seed1]]   (the drop's 95% interval)
    not_comparable    nothing (the reason is the register's)

``conditions`` maps each assumed parameter to its sweep: a list of points ``{"value": v,
**payload}``; every point is judged by the same rule ([`judge`][]) and
[`holds`][] states, in words, over which part of the range the committed state holds, e.g.
``"host rate 0.25-10 GB/s: reproduced at 1.5-2.5; direction only at 0.25-1, 5-10"``. A register
range the sweep does not cover is said in the text, never hidden. A point may carry
``"committed": True`` where the committed value is measured, not set (``committed: measured``
in the register, e.g. the calibrated per-row cost): it is the committed measurement placed in
its own sweep. [`reading`][] gives a point's value and the side of the paper's it falls on.

A row measured with fewer seeds than its entry asks for is ``not comparable`` (the rule says
how many ran).
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from workbench.claims import verdict
from workbench.claims.verdict import Estimate, Verdict
from workbench.utils.errors import WorkbenchError

REGISTER_FILE = Path(__file__).resolve().parents[1] / "conf" / "claims.yaml"
PAPERS = ("HET", "ESD", "RecD", "Hotline", "FlexShard")
BASES = {"paper": "the paper's method [P]", "formalisation": "our formalisation [A]"}
#: What a claim's value rests on: a measurement of the mechanism running, or only a time model.
EVIDENCE = ("measured", "modelled")
KINDS = ("factor", "percent", "less", "close", "decline", "not_comparable")
_REQUIRED = ("key", "paper", "claim", "paper_value", "basis", "paper_setting", "ours",
             "measured_by", "section", "seeds", "rule")


class RegisterError(WorkbenchError, ValueError):
    """The register file is malformed (the message names the entry and the field)."""


@dataclass(frozen=True)
class Assumption:
    """A parameter the claim's result depends on that the paper does not fix for us.

    Attributes:
        name: the parameter, as the notebook's ``conditions`` names it.
        committed: the value of the committed setting (a number, a category, or ``measured``).
        lo, hi: the plausible range of a numeric parameter (None for categories).
        values: the plausible values of a categorical parameter (empty for numbers).
        unit: the unit shown after numbers.
        why: why this range.
    """

    name: str
    committed: Any
    lo: float | None = None
    hi: float | None = None
    values: tuple[str, ...] = ()
    unit: str = ""
    why: str = ""

    @property
    def numeric(self) -> bool:
        return self.lo is not None

    def describe(self) -> str:
        """``"host rate 5 GB/s (range 0.25-10)"`` / ``"dataset taobao_sample (of a, b, c)"``."""
        unit = f" {self.unit}" if self.unit else ""
        if self.numeric:
            return f"{self.name} {self.committed}{unit} (range {self.lo:g}-{self.hi:g}{unit})"
        return f"{self.name} {self.committed} (of {', '.join(self.values)})"


@dataclass(frozen=True)
class Entry:
    """One claim of the register (see the module docstring and ``claims.yaml``)."""

    key: str
    paper: str
    claim: str
    paper_value: str
    basis: str
    paper_setting: str
    ours: Mapping[str, Any]
    measured_by: Mapping[str, Any]
    section: str
    seeds: int
    rule: Mapping[str, Any]
    assumed: tuple[Assumption, ...] = ()
    measure: str = ""
    paper_table: Mapping[str, Any] = field(default_factory=dict)
    version: int = 1
    evidence: str = "measured"
    shown_in: tuple[str, ...] = ()

    @property
    def register(self) -> str:
        """``"v2"``: the register version that last rewrote this entry (its ``version``)."""
        return f"v{self.version}"

    @property
    def kind(self) -> str:
        return str(self.rule["kind"])

    @property
    def formalisation(self) -> bool:
        return self.basis == "formalisation"

    @property
    def modelled(self) -> bool:
        """Whether the value comes only from a time model (``evidence: modelled``)."""
        return self.evidence == "modelled"

    @property
    def wall_clock(self) -> bool:
        """Whether the measurement is timed on this machine (``ours.unit`` says wall clock).

        Such a row's interval widens on a busy machine, so a quick run may honestly say ``tie``
        where the committed run shows the direction.
        """
        return "wall clock" in str(self.ours.get("unit", ""))

    @property
    def paper_number(self) -> float:
        """The paper's number the rule compares with (``rule.paper``), for figures.

        Raises:
            RegisterError: the rule's paper value is not one number.
        """
        value = self.rule.get("paper")
        if not isinstance(value, (int, float)):
            raise _fail(f"claim {self.key!r}", f"rule paper {value!r} is not one number")
        return float(value)

    def ours_text(self) -> str:
        """Our committed setting in one line."""
        return "; ".join(f"{k} {v}" for k, v in self.ours.items() if str(v) != "-")

    @property
    def stages(self) -> tuple[str, ...]:
        """The stages it is measured from: ``measured_by``'s stage, then its ``also``."""
        return (str(self.measured_by["stage"]),
                *(str(s) for s in self.measured_by.get("also", ())))


@dataclass(frozen=True)
class Register:
    """The loaded register: its version, the file's digest and the entries in order."""

    version: int
    sha256: str
    entries: tuple[Entry, ...] = field(default_factory=tuple)

    def __getitem__(self, key: str) -> Entry:
        for e in self.entries:
            if e.key == key:
                return e
        raise KeyError(f"claim {key!r} is not in the register ({REGISTER_FILE.name}); known: "
                       + ", ".join(e.key for e in self.entries))

    def keys(self) -> list[str]:
        return [e.key for e in self.entries]

    def label(self) -> str:
        """``"register v1 (sha256 1a2b3c4d5e6f)"``."""
        return f"register v{self.version} (sha256 {self.sha256[:12]})"


def _fail(where: str, problem: str) -> RegisterError:
    return RegisterError(f"{REGISTER_FILE.name}: {where}: {problem}")


def _assumption(key: str, raw: Mapping[str, Any]) -> Assumption:
    where = f"claim {key!r}, assumed {raw.get('name', '?')!r}"
    if "name" not in raw or "committed" not in raw:
        raise _fail(where, "needs 'name' and 'committed'")
    if ("range" in raw) == ("values" in raw):
        raise _fail(where, "needs exactly one of 'range: [lo, hi]' and 'values: [...]'")
    if "range" in raw:
        lo, hi = (float(x) for x in raw["range"])
        if not lo < hi:
            raise _fail(where, f"range {raw['range']} must have lo < hi")
        committed = raw["committed"]
        if isinstance(committed, (int, float)) and not lo <= float(committed) <= hi:
            raise _fail(where, f"committed {committed} lies outside the range {lo:g}-{hi:g}")
        return Assumption(str(raw["name"]), committed, lo, hi, (), str(raw.get("unit", "")),
                          str(raw.get("why", "")))
    values = tuple(str(v) for v in raw["values"])
    if str(raw["committed"]) not in values:
        raise _fail(where, f"committed {raw['committed']!r} is not one of {list(values)}")
    return Assumption(str(raw["name"]), str(raw["committed"]), None, None, values,
                      str(raw.get("unit", "")), str(raw.get("why", "")))


def _entry(raw: Mapping[str, Any], index: int) -> Entry:
    key = str(raw.get("key", f"#{index + 1}"))
    missing = [f for f in _REQUIRED if f not in raw]
    if missing:
        raise _fail(f"claim {key!r}", f"missing field(s) {', '.join(missing)}")
    if raw["paper"] not in PAPERS:
        raise _fail(f"claim {key!r}", f"paper {raw['paper']!r} is not one of {PAPERS}")
    if raw["basis"] not in BASES:
        raise _fail(f"claim {key!r}", f"basis {raw['basis']!r} is not one of {list(BASES)}")
    rule = dict(raw["rule"])
    if rule.get("kind") not in KINDS:
        raise _fail(f"claim {key!r}", f"rule kind {rule.get('kind')!r} is not one of {KINDS}")
    seeds = raw["seeds"]
    if not isinstance(seeds, int) or seeds < 1:
        raise _fail(f"claim {key!r}", f"seeds {seeds!r} must be an integer >= 1")
    entry = Entry(key, str(raw["paper"]), str(raw["claim"]), str(raw["paper_value"]),
                  str(raw["basis"]), str(raw["paper_setting"]), dict(raw["ours"]),
                  dict(raw["measured_by"]), str(raw["section"]), seeds, rule,
                  tuple(_assumption(key, a) for a in raw.get("assumed") or ()),
                  str(raw.get("measure") or ""), dict(raw.get("paper_table") or {}),
                  raw.get("version", 1), str(raw.get("evidence", "measured")),
                  _names(key, "shown_in", raw.get("shown_in") or ()))
    if entry.evidence not in EVIDENCE:
        raise _fail(f"claim {key!r}", f"evidence {entry.evidence!r} is not one of "
                    f"{list(EVIDENCE)}")
    if not isinstance(entry.version, int) or entry.version < 1:
        raise _fail(f"claim {key!r}", f"version {entry.version!r} must be an integer >= 1 (the "
                    "register version that last rewrote the entry)")
    if entry.kind == "not_comparable" and entry.measure:
        raise _fail(f"claim {key!r}", f"measure {entry.measure!r}: a not_comparable claim is "
                    "not measured (remove the measure, or give the rule a kind that judges it)")
    try:  # the paper's value must make a valid rule (a mistake here is the register's)
        judge(entry, _probe(entry))
    except ValueError as err:
        raise _fail(f"claim {key!r}", f"rule {rule}: {err}") from None
    return entry


def _names(key: str, field_name: str, raw: Any) -> tuple[str, ...]:
    """A list of plain names (``shown_in``: figure and table names of the entry's section)."""
    if not isinstance(raw, (list, tuple)) or not all(isinstance(n, str) and n for n in raw):
        raise _fail(f"claim {key!r}", f"{field_name} {raw!r} must be a list of names")
    return tuple(raw)


def _probe(entry: Entry) -> dict[str, Any]:
    """A well-formed measurement for ``entry``'s kind (validates the rule's arguments)."""
    kind, rule = entry.kind, entry.rule
    if kind == "decline":
        return {"values": [list(rule["paper"])]}
    if kind in ("less", "close"):
        return {"a": [0.1], "b": [0.2]}
    return {"values": [1.5]} if kind in ("factor", "percent") else {}


def parse(text: str) -> Register:
    """The register from the YAML text ([`load`][] reads the file).

    Raises:
        RegisterError: a malformed entry, a duplicate key, a bad rule or range.
    """
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f"line {mark.line + 1}" if mark is not None else "?"
        raise _fail(line, f"not valid YAML ({getattr(err, 'problem', err)})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("claims"), list):
        raise _fail("top level", "needs 'version' and a list 'claims'")
    entries = tuple(_entry(r, i) for i, r in enumerate(raw["claims"]))
    version = int(raw.get("version", 0))
    ahead = [e.key for e in entries if e.version > version]
    if ahead:
        raise _fail(f"claim {ahead[0]!r}", f"version is above the register's ({version}): bump "
                    "the register's version first")
    keys = [e.key for e in entries]
    dupes = sorted({k for k in keys if keys.count(k) > 1})
    if dupes:
        raise _fail("claims", f"duplicate key(s) {', '.join(dupes)}: one entry per claim")
    return Register(version,
                    hashlib.sha256(text.encode("utf-8")).hexdigest(), entries)


@functools.lru_cache(maxsize=4)
def load(path: Path = REGISTER_FILE) -> Register:
    """The register in ``path`` (default: the package's ``conf/claims.yaml``), parsed once."""
    return parse(Path(path).read_text(encoding="utf-8"))


# --- judging --------------------------------------------------------------------------------

def _paper(value: Any) -> float | tuple[float, float]:
    return (float(value[0]), float(value[1])) if isinstance(value, (list, tuple)) \
        else float(value)


def judge(entry: Entry, measurement: Mapping[str, Any], *, check_seeds: bool = False
          ) -> Verdict:
    """The verdict of ``measurement`` (see the module docstring) under ``entry``'s rule.

    Args:
        entry: the register entry.
        measurement: the payload for the rule's kind; ``missing`` (optional) says why a value is
            missing.
        check_seeds: a measurement with fewer samples than ``entry.seeds`` is ``not
            comparable`` (the committed measurement; sweep points are single values).

    Raises:
        ValueError: the register's rule is malformed for its kind.
    """
    rule, kind = entry.rule, entry.kind
    missing = str(measurement.get("missing") or "no finite measured value")
    if kind == "not_comparable":
        return verdict.not_comparable(str(rule["reason"]))
    if check_seeds:
        n = samples(entry, measurement)
        if 0 < n < entry.seeds:
            return verdict.not_comparable(f"{n} seed(s) ran; the register asks for "
                                          f"{entry.seeds} ({entry.key})")
    values = measurement.get("values")
    if kind == "factor":
        return verdict.factor(values, _paper(rule["paper"]),
                              tie_tolerance=float(rule.get("tie_tolerance", verdict.FACTOR_TIE)),
                              missing=missing)
    if kind == "percent":
        return verdict.percent(values, _paper(rule["paper"]),
                               baseline=float(rule.get("baseline", 0.0)),
                               points=float(rule.get("points", verdict.PERCENT_POINTS)),
                               tie_tolerance=float(rule.get("tie_tolerance", 0.0)),
                               missing=missing)
    names = tuple(rule.get("names", ("A", "B")))
    if kind == "less":
        return verdict.less(measurement.get("a"), measurement.get("b"),  # type: ignore[arg-type]
                            paper_gap=_paper(rule["paper_gap"]),
                            tie_tolerance=float(rule.get("tie_tolerance", 0.5)),
                            labels=measurement.get("labels"), names=names,
                            missing=missing)
    if kind == "close":
        return verdict.close(measurement.get("a"), measurement.get("b"),  # type: ignore[arg-type]
                             tolerance=float(rule["tolerance"]), names=names,
                             missing=missing)
    return verdict.decline(values, list(rule["paper"]),  # type: ignore[arg-type]
                           labels=rule.get("labels"), missing=missing)


def samples(entry: Entry, measurement: Mapping[str, Any]) -> int:
    """How many seeds (repeats) the measurement holds (0: none; 1 for one replay)."""
    if entry.kind in ("less", "close"):
        return 1 if measurement.get("a") is not None else 0
    values = measurement.get("values")
    if values is None:
        return 0
    arr = np.asarray(values, dtype=float)
    return int(arr.shape[0]) if arr.ndim == 2 else int(np.atleast_1d(arr).size)


def estimate(entry: Entry, measurement: Mapping[str, Any]) -> Estimate | None:
    """The measured effect as a number with its interval, in the rule's natural unit: the
    factor, the fraction, the mean gap B - A and the largest |A - B| (points), the drop (points).
    None when there is nothing to measure."""
    kind = entry.kind
    if kind in ("factor", "percent"):
        return Estimate.of(measurement.get("values"))
    if kind in ("less", "close"):
        a, b = measurement.get("a"), measurement.get("b")
        if a is None or b is None:
            return None
        gap = 100 * (np.asarray(b, dtype=float) - np.asarray(a, dtype=float))
        return Estimate.of([float(gap.mean()) if kind == "less" else float(np.abs(gap).max())])
    if kind == "decline" and measurement.get("values") is not None:
        grid = np.atleast_2d(np.asarray(measurement["values"], dtype=float))
        return Estimate.of(100 * (grid[:, 0] - grid[:, -1]))
    return None


#: :func:`reading`'s sides: the measured effect beyond the paper's value, short of it, or in it.
OVER, UNDER, AT = "over", "under", "at"


def reading(entry: Entry, measurement: Mapping[str, Any]) -> tuple[str, str]:
    """The measured effect in words and which side of the paper's value it falls on.

    The effect is [`estimate`][]'s mean in the rule's unit (``2.70x``, ``70.3%``, ``+4.1
    pts``); the side is `OVER` when it goes further than the paper's value (or range) in
    the paper's direction, `UNDER` when it falls short (or goes the other way),
    `AT` inside the paper's range, and ``""`` where the rule has no paper value to be on a
    side of (``close``: a tolerance) or nothing was measured.
    """
    est = estimate(entry, measurement)
    if est is None or not math.isfinite(est.mean):
        return "-", ""
    m, rule, kind = est.mean, entry.rule, entry.kind
    if kind == "close":
        return f"{m:.2g} pts", ""
    if kind == "factor":
        text, paper, origin = f"{m:.2f}x", _paper(rule["paper"]), 1.0
    elif kind == "percent":
        text, paper = f"{100 * m:.1f}%", _paper(rule["paper"])
        origin = float(rule.get("baseline", 0.0))
    elif kind == "less":
        text, paper, origin = f"{m:+.2g} pts", _paper(rule["paper_gap"]), 0.0
    else:  # decline: the drop from the first point to the last, points
        series = [float(v) for v in rule["paper"]]
        text, paper, origin = f"{m:.2g} pts", 100 * (series[0] - series[-1]), 0.0
    lo, hi = (paper, paper) if isinstance(paper, float) else paper
    up = lo > origin
    if lo <= m <= hi:
        return text, AT
    return text, OVER if (m > hi) == up else UNDER


# --- conditions -----------------------------------------------------------------------------

def format_value(value: Any) -> str:
    """A setting's value as the register writes it: numbers in ``%g``, anything else as text."""
    return f"{value:g}" if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else str(value)


def _runs(points: list[tuple[Any, str]], numeric: bool = True) -> dict[str, list[str]]:
    """Contiguous runs of equal state along the (sorted) points: state -> ["a-b", "c"]; for
    categories, state -> the values."""
    out: dict[str, list[str]] = {}
    if not numeric:
        for value, state in points:
            out.setdefault(state, []).append(format_value(value))
        return out
    i = 0
    while i < len(points):
        j = i
        while j + 1 < len(points) and points[j + 1][1] == points[i][1]:
            j += 1
        lo, hi = format_value(points[i][0]), format_value(points[j][0])
        out.setdefault(points[i][1], []).append(lo if i == j else f"{lo}-{hi}")
        i = j + 1
    return out


#: The key under which the record stores what the register read from a payload
#: ([`workbench.claims.record`][]): a point judged there is not judged again here.
JUDGED = "judged"


def judge_points(entry: Entry, assumption: Assumption,
                 points: Sequence[Mapping[str, Any]]) -> list[tuple[Any, str]]:
    """Every point of one assumed parameter's sweep with its state, in the range's order
    (numbers ascending; categories in the register's order); a point the record judged already
    keeps its stored state."""
    return [(p["value"], p[JUDGED]["state"] if JUDGED in p else judge(entry, p).state)
            for p in sorted_points(assumption, points)]


def sorted_points(assumption: Assumption, points: Sequence[Mapping[str, Any]]
                  ) -> list[Mapping[str, Any]]:
    """One assumed parameter's sweep points in the range's order (numbers ascending;
    categories in the register's order)."""
    if assumption.numeric:
        return sorted(points, key=lambda p: float(p["value"]))
    order = {v: i for i, v in enumerate(assumption.values)}
    return sorted(points, key=lambda p: order.get(str(p["value"]), len(order)))


def holds_one(entry: Entry, assumption: Assumption,
              points: Sequence[Mapping[str, Any]] | None) -> str:
    """In words, the state over one assumed parameter's sweep (see the module docstring)."""
    unit = f" {assumption.unit}" if assumption.unit else ""
    if not points:
        return f"{assumption.name}: not swept"
    judged = judge_points(entry, assumption, points)
    states = [s for _, s in judged]
    if assumption.numeric:
        values = [float(v) for v, _ in judged]
        assert assumption.lo is not None and assumption.hi is not None
        span = f"{assumption.name} {min(values):g}-{max(values):g}{unit}"
        short = [f"{b:g}" for b in (assumption.lo, assumption.hi)
                 if not min(values) * (1 - 1e-9) <= b <= max(values) * (1 + 1e-9)]
        gap = (f" (the register's range {assumption.lo:g}-{assumption.hi:g} is not covered: "
               f"{', '.join(short)} not swept)") if short else ""
    else:
        span, gap = f"{assumption.name} {', '.join(format_value(v) for v, _ in judged)}", ""
        missing = [v for v in assumption.values if v not in {str(v) for v, _ in judged}]
        if missing:
            gap = f" ({', '.join(missing)} not measured)"
    if len(set(states)) == 1:
        return f"{states[0]} throughout {span}{gap}"
    runs = _runs(judged, assumption.numeric)
    return f"{span}: " + "; ".join(f"{state} at {', '.join(r)}{unit if assumption.numeric else ''}"
                                   for state, r in runs.items()) + gap


def holds(entry: Entry, conditions: Mapping[str, Sequence[Mapping[str, Any]]] | None) -> str:
    """[`holds_one`][] for every assumed parameter of ``entry``, joined by ``" · "``; empty
    when the entry assumes nothing.

    Raises:
        RegisterError: ``conditions`` names a parameter the entry does not assume.
    """
    conditions = conditions or {}
    unknown = sorted(set(conditions) - {a.name for a in entry.assumed})
    if unknown:
        raise _fail(f"claim {entry.key!r}", f"conditions {unknown} are not among its assumed "
                                            f"parameters {[a.name for a in entry.assumed]}")
    text = " · ".join(holds_one(entry, a, conditions.get(a.name)) for a in entry.assumed)
    return f"on the time model: {text}" if text and entry.modelled else text


def row_verdict(entry: Entry, measurement: Mapping[str, Any]) -> Verdict:
    """The claims table's verdict of ``entry``'s committed measurement: [`judge`][] with the
    seeds checked, ``modelled`` when the value comes only from a time model
    ([`workbench.claims.verdict.modelled`][])."""
    judged = judge(entry, measurement, check_seeds=True)
    return verdict.modelled(judged) if entry.modelled else judged


def finite_or_none(value: Any) -> float | None:
    """``value`` as a float, None when missing or not finite (for CSV and JSON cells)."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None
