"""Report sections: what each notebook writes, one page per section, and the claims they carry.

Notebooks describe what they produce through a [`Section`][]; [`Section.save`][] writes the
section's record and its page, and the ``report`` stage gathers every section into the index,
``reports/README.md`` ([`workbench.report.index`][]):

    notebooks/<nb>.py --papermill--> reports/<nb>/section.json   (figures, tables, notes, claims)
                                     reports/<nb>/README.md      (the section's page: write_page)
                                     reports/<nb>/*.png, *.csv
    reports/*/section.json --report--> reports/README.md   (the index: verdict counts, a short
                                       reports/claims.csv   claims table, links to the pages)

The page is a pure function of ``section.json`` ([`page`][]), so the ``report`` stage rewrites
a missing or outdated page to the same bytes the notebook would have written
([`write_page`][]); a notebook run by hand writes the same page into ``scratch/<nb>/``.

A claim row measures one entry of the claims register ([`workbench.report.register`][],
``workbench/conf/claims.yaml``): a notebook calls [`Section.measure`][] with the entry's key,
the samples over seeds and the sweep of every assumed parameter; the row takes the paper, the
claim, the paper's value and the rule from the register, and the verdict from
[`workbench.report.register.judge`][]. The report judges every row again from the register
([`collect`][]), requires exactly one row per entry of a gathered section (a register entry
whose rule is ``not_comparable`` needs none: the register writes it), and fails on a key not in
the register or two rows for one claim. Context (other datasets, units, baselines) goes into the
section's tables and notes, never into claim rows.

Provenance ([`provenance`][]): the commit the report was built from and, when tracked sources
differ from it (anything outside the generated [`GENERATED`][] paths), the list of them.

Each figure and table names the files it is drawn from (``reads=``, required: ``()`` for one
drawn from the register or the notebook's own numbers). A
[`ReadLog`][workbench.report.lineage.ReadLog] holds every name to what the notebook really
opened (a path it never opened is an error), and [`Section.save`][] maps each file to the
stage output holding it with that
output's ``dvc.lock`` hash ([`workbench.report.lineage`][]); the page shows them under each
item and, under ``## Provenance``, the commit, the digest of the notebook's configuration
([`config_digest`][]) and every stage output read:

    item  --reads--> results/<stage>/<ds>/<file>  --locate--> (stage, output, dvc.lock md5,
                                                               whether the output still has it)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import platform
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import InitVar, asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from workbench.claims import Measurement
from workbench.report import display, lineage, plotting
from workbench.report import register as reg
from workbench.report.notebook_registry import NOTEBOOKS
from workbench.report.plotting import save_figure
from workbench.report.verdict import STATES, Verdict
from workbench.utils.errors import MissingInputError, UserError, WorkbenchError
from workbench.utils.io import write_json, write_text
from workbench.utils.paths import REPO_ROOT, notebook_output, repo_relative

log = logging.getLogger(__name__)

SECTION_FILE = "section.json"
PAGE_FILE = "README.md"  # the section's page, beside its section.json
PAGE_MARK = "from the run outputs; do not edit."  # in every page a notebook writes
CLAIM_COLUMNS = ["key", "register", "paper", "claim", "basis", "paper_value", "measured", "mean",
                 "ci_low", "ci_high", "seeds", "ours", "setting", "assumed", "holds", "state",
                 "verdict", "rule", "note", "measurement_id"]
GENERATED = ("results/", "reports/", "data/", "dvc.lock", "params.yaml")  # not "sources"
PROVENANCE_PACKAGES = ["torch", "numpy", "pandas", "pyarrow", "scipy", "numba", "hydra-core",
                       "dvc", "papermill", "jupytext", "matplotlib", "seaborn"]


class CatalogueError(WorkbenchError, ValueError):
    """Claim rows and the claims register disagree (a key not in it, a missing or a second row)."""


@dataclass
class Claim:
    """One row of the claims table (build it with [`Section.measure`][]).

    Give either ``verdict`` (from [`workbench.report.verdict`][]) or ``state`` and ``rule``.

    Attributes:
        paper: short paper name (HET, ESD, RecD, Hotline, FlexShard).
        claim: the claim in words.
        paper_value: the paper's number with its source tag, e.g. ``"90% [P]"``.
        measured: what this run measured, formatted (mean with its interval over seeds).
        setting: the exact setting of the measurement (dataset, sizes, knobs).
        verdict: sets ``state`` and ``rule`` (not stored itself).
        note: caveats (sample size, ...).
        key: the register key of the claim this row measures.
        state: one of [`workbench.report.verdict.STATES`][].
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


def measured_claim(entry: reg.Entry, *, text: str, setting: str, note: str = "",
                   measurement: dict[str, Any], conditions: dict[str, list[dict[str, Any]]]
                   ) -> Claim:
    """The claim row of ``entry`` from a measurement, judged by the register (see
    [`workbench.report.register`][]); the report stage calls it again on the stored row."""
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
                          measurement=_jsonable(dict(m.payload)),
                          conditions=_jsonable(dict(m.conditions)))


def measured_row(entry: reg.Entry, m: Measurement) -> dict[str, Any]:
    """[`recorded_claim`][] as ``section.json`` holds it (JSON values): the row
    [`Section.record`][] writes for the same measurement."""
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


def _plain(value: Any) -> Any:
    """A configuration value as JSON-able data (dataclasses, mappings, paths)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value if isinstance(value, (str, int, float, bool, type(None))) else str(value)


def config_digest(config: Any, name: str) -> tuple[str, list[str]]:
    """The sha256 (first 12 hex digits) of the configuration notebook ``name`` reads: the
    sections its registry entry names (its DVC params, [`workbench.report.notebook_registry`][]),
    or the whole configuration for a notebook not in the registry.

    Returns:
        ``(digest, sections)``: the digest and the dotted sections it covers (empty: all).
    """
    keys = list(NOTEBOOKS[name].params) if name in NOTEBOOKS else []
    chosen: Any = _plain(config)
    if keys:
        picked = {}
        for dotted in keys:
            node: Any = config
            for part in dotted.split("."):
                node = node[part] if isinstance(node, Mapping) else getattr(node, part)
            picked[dotted] = _plain(node)
        chosen = picked
    text = json.dumps(chosen, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12], keys


@dataclass
class Section:
    """What one notebook contributes to the report. Build it, add items, then [`save`][].

    Args:
        name: the notebook's name (its output folder under ``reports/``).
        title: section heading.
        out_dir: where figures, tables and ``section.json`` are written; None (a notebook run by
            hand) is ``scratch/<name>``, a relative path is relative to the repository root
            ([`workbench.utils.paths.notebook_output`][]).
        intro: Markdown paragraph under the heading (say here when a model is ours).
        config: the notebook's configuration (its digest goes on the page; its results and
            data roots are where reads are logged); None: no digest, the project's roots.

    Every item is also shown in the notebook cell that adds it ([`workbench.report.display`][]).
    """

    name: str
    title: str
    out_dir: Path | str | None = None
    intro: str = ""
    config: Any = None
    items: list[dict[str, Any]] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.out_dir = notebook_output(self.name, self.out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        roots = ((self.config.paths.resolve("results"), self.config.paths.resolve("data"))
                 if self.config is not None else (REPO_ROOT / "results", REPO_ROOT / "data"))
        self._log = lineage.ReadLog.shared(roots)
        if self.intro:
            display.markdown(self.intro)

    @property
    def _out(self) -> Path:
        """``out_dir``: a ``Path`` once ``__post_init__`` has run."""
        return cast(Path, self.out_dir)

    def _reads(self, what: str, reads: Sequence[Path | str]) -> list[str]:
        """The files the notebook opened under each path of ``reads`` (a file or a folder;
        relative: from the repository root), as recorded paths.

        Raises:
            UserError: ``reads`` is a single path, or names a path the notebook never opened.
        """
        if isinstance(reads, (str, Path)):
            raise UserError(f"{what}: reads= takes a list of paths, got one path {reads!r}: "
                            f"write reads=[{str(reads)!r}]")
        files: list[Path] = []
        for path in reads:
            path = Path(path) if Path(path).is_absolute() else REPO_ROOT / path
            opened = self._log.under(path)
            if not opened:
                raise UserError(f"{what}: reads= names {repo_relative(path)}, which this "
                                "notebook has not opened: read it before drawing, or drop it "
                                "from reads=")
            files += opened
        return [repo_relative(f) for f in dict.fromkeys(sorted(files))]

    def figure(self, fig: Any, name: str, caption: str, setting: str, *,
               reads: Sequence[Path | str]) -> None:
        """Save ``fig`` as ``<name>.png``, record it with its caption, setting and the files it
        is drawn from (``reads``: files or folders the notebook opened; ``()``: none), show it.

        Returns nothing, so a cell ending in this call shows the figure, not a path."""
        files = self._reads(f"figure {name!r}", reads)
        path = save_figure(fig, self._out / f"{name}.png", close=False)
        readable = plotting.readability(fig, path)
        plotting.plt.close(fig)
        self.items.append({"kind": "figure", "file": path.name, "caption": caption,
                           "setting": setting, "reads": files,
                           "readability": readable.record()})
        display.image(path)
        for problem in readable.problems():  # the committed figures are held to none (tests)
            log.warning("figure %s: %s", name, problem)
            display.markdown(f"*Hard to read: {problem}.*")

    def table(self, frame: pd.DataFrame, name: str, caption: str, setting: str = "",
              floatfmt: str = ".4g", *, reads: Sequence[Path | str]) -> None:
        """Save ``frame`` as ``<name>.csv``, record it (a Markdown table in the report) with the
        files it is drawn from (``reads``, as for [`figure`][]), show it as a table."""
        files = self._reads(f"table {name!r}", reads)
        path = self._out / f"{name}.csv"
        write_text(path, frame.to_csv(index=False, float_format="%.6g"))
        self.items.append({"kind": "table", "file": path.name, "caption": caption,
                           "setting": setting, "reads": files,
                           "markdown": _markdown(frame, floatfmt)})
        display.table(frame, caption, floatfmt)

    def note(self, text: str) -> None:
        """A Markdown paragraph between items (shown rendered)."""
        self.items.append({"kind": "note", "text": text})
        display.markdown(text)

    def claim(self, claim: Claim) -> None:
        """Add a row to the claims table (shown when the section is saved)."""
        self.claims.append(claim)

    def measure(self, key: str, *, text: str, setting: str, note: str = "",
                conditions: dict[str, list[dict[str, Any]]] | None = None,
                **measurement: Any) -> Claim:
        """Measure the register's claim ``key``: add its row, judged by the register.

        Args:
            key: the register key (``workbench/conf/claims.yaml``).
            text: the measured value as shown (e.g. ``"2.73x (95% CI ...)"``).
            setting: the exact setting of the measurement.
            note: caveats.
            conditions: each assumed parameter's sweep: ``{name: [{"value": v, **payload}]}``.
            **measurement: the payload of the rule's kind (``values=[...]`` per seed, or
                ``a=..., b=..., labels=...``; ``missing=`` why a value is missing).

        Returns:
            The row (also added to the section).

        Raises:
            KeyError: ``key`` is not in the register.
        """
        entry = reg.load()[key]
        claim = measured_claim(entry, text=text, setting=setting, note=note,
                               measurement=_jsonable(measurement),
                               conditions=_jsonable(conditions or {}))
        self.claims.append(claim)
        return claim

    def record(self, m: Measurement) -> None:
        """Add the row of a measurement from [`workbench.claims`][] ([`measure`][] with its
        fields); the register judges it. Returns nothing, so a notebook cell that ends with it
        shows no ``Out[n]`` (the row is in the section's claims table; ``claims[-1]``)."""
        self.claims.append(recorded_claim(reg.load()[m.key], m))

    def lineage(self) -> dict[str, Any]:
        """The section's provenance: the commit (and whether sources differed from it), the
        configuration digest, every stage output the items read with its ``dvc.lock`` hash and
        whether it still has it, and the files read that no item names (claims, text)."""
        lock = lineage.load_lock(REPO_ROOT)
        named = {f for item in self.items for f in item.get("reads", [])}
        outputs: dict[str, dict[str, Any]] = {}
        for path in sorted(named):
            out = lineage.locate(path, lock)
            if out is not None and out.path not in outputs:
                outputs[out.path] = {"path": out.path, "stage": out.stage, "md5": out.md5,
                                     "current": lineage.dvc_md5(REPO_ROOT / out.path) == out.md5}
        dirty = dirty_sources(REPO_ROOT)
        digest, keys = (config_digest(self.config, self.name) if self.config is not None
                        else (None, []))
        return {"commit": _git("rev-parse", "HEAD", cwd=REPO_ROOT) or "unknown",
                "dirty": len(dirty) if dirty is not None else None,
                "config_sha256": digest, "config_sections": keys,
                "outputs": list(outputs.values()),
                "also_read": [p for p in (repo_relative(f) for f in sorted(self._log.files))
                              if p not in named]}

    def _link_claims(self) -> None:
        """Give every figure and table the numbers of the claims it shows: the items that read
        the file the claim is measured from ([`shows`][]), else, when none does, those that read
        any file of its stage (a figure of the medians beside a claim measured per round)."""
        register = reg.load()
        drawn = [i for i in self.items if "reads" in i]
        for item in drawn:
            item["claims"] = []
        for n, c in enumerate(self.claims, 1):
            if c.key not in register.keys():
                continue
            by = register[c.key].measured_by
            found = ([i for i in drawn if shows(by, i["reads"])]
                     or [i for i in drawn if shows({"stage": by["stage"]}, i["reads"])])
            for item in found:
                item["claims"].append(n)

    def save(self) -> None:
        """Write ``section.json`` and the section's page ``README.md`` (both atomically); show
        this section's claim rows and where the section went."""
        self._link_claims()
        path = self._out / SECTION_FILE
        write_json(path, {"name": self.name, "title": self.title, "intro": self.intro,
                          "items": self.items, "claims": [asdict(c) for c in self.claims],
                          "lineage": self.lineage()})
        write_page(self._out, json.loads(path.read_text()))  # the page is what the file says
        if self.claims:
            shown = ["paper", "claim", "paper_value", "measured", "state"]
            display.table(pd.DataFrame([asdict(c) for c in self.claims])[shown],
                          "Claims of this section (rows of the report's claims table)")
        kinds = pd.Series([i["kind"] for i in self.items], dtype=object).value_counts()
        display.markdown(f"*Section `{self.name}` written to `{repo_relative(self._out)}/` "
                         f"(page: `{PAGE_FILE}`): {kinds.get('figure', 0)} figures, "
                         f"{kinds.get('table', 0)} tables, {len(self.claims)} claim rows.*")


def shows(measured_by: Mapping[str, Any], reads: Sequence[str]) -> bool:
    """Whether an item drawn from ``reads`` shows the claim measured from ``measured_by`` (the
    register's ``{stage, file, ...}``): it read that file of that stage's results (any file of
    them when the register names none)."""
    stage, name = f"results/{measured_by['stage']}/", str(measured_by.get("file", "-"))
    return any(stage in path and (name == "-" or path.endswith("/" + name)) for path in reads)


def item_anchor(item: Mapping[str, Any]) -> str:
    """The anchor of a figure or table on its page: ``fig-<name>`` or ``tab-<name>``."""
    return ("fig-" if item["kind"] == "figure" else "tab-") + Path(item["file"]).stem


def _setting_once(item: Mapping[str, Any], shown: dict[str, str]) -> str:
    """A figure's or table's setting, or a link to the first item on the page with the same
    one (``shown``: setting -> that item's anchor, filled as the page is written)."""
    first = shown.setdefault(item["setting"], item_anchor(item))
    return item["setting"] if first == item_anchor(item) else f"as [above](#{first})"


def shown_in(section: Mapping[str, Any], number: int) -> list[Mapping[str, Any]]:
    """The figures, then the tables, of ``section`` that show its claim ``number``."""
    items = [i for i in section["items"] if number in i.get("claims", [])]
    return ([i for i in items if i["kind"] == "figure"]
            + [i for i in items if i["kind"] == "table"])


def claim_anchor(number: int) -> str:
    """The anchor of the ``number``-th claim (from 1) on its section's page, e.g. ``claim-3``:
    the slug Markdown renderers (GitHub, GitLab, VS Code) give its heading ``### Claim 3``."""
    return f"claim-{number}"


def page(section: dict[str, Any]) -> str:
    """The Markdown page of one section, from its ``section.json`` contents alone.

    Title, a line linking the report's index and the notebook, the intro, every claim row in
    full (paper value, ours, verdict, rule, setting, note, catalogue key) under a heading
    ``### Claim <n>`` (anchor [`claim_anchor`][]), then under ``## Results`` the figures
    (relative image links), tables (Markdown, with a link to the CSV) and notes in the order
    the notebook added them. Links are relative to the section's folder, which sits one level
    under the repository root (``reports/<nb>/``, ``scratch/<nb>/``).

    Args:
        section: the loaded ``section.json`` (``name``, ``title``, ``intro``, ``items``,
            ``claims``).

    Returns:
        The page text; the same ``section`` always gives the same text.
    """
    name = section["name"]
    lines = [f"# {section['title']}", "",
             f"A section of the [reproduction report](../README.md), written by the notebook "
             f"[`notebooks/{name}.py`](../../notebooks/{name}.py) {PAGE_MARK}", ""]
    if section["intro"]:
        lines += [section["intro"], ""]
    claims = section["claims"]
    if claims:
        lines += ["## Claims", "",
                  "Paper values: [P] from the paper's full text, [A] from its abstract. The "
                  "verdict holds in the setting given; the rule says how it was decided "
                  "(`workbench/report/verdict.py`).", ""]
        first: dict[tuple[str, str], int] = {}  # (field, text) -> the claim that shows it

        def once(field: str, text: str, number: int) -> str:
            """``text``, or a link to the earlier claim that shows the same (a long setting
            repeated on every card is shown once per page)."""
            text = _one_line(text)
            earlier = first.setdefault((field, text), number)
            return text if earlier == number else \
                f"as [claim {earlier}](#{claim_anchor(earlier)})"

        for number, c in enumerate(claims, 1):
            lines += [f"### Claim {number}", "", f"**{c['paper']}:** {_one_line(c['claim'])}",
                      "", f"- **Paper:** {_one_line(c['paper_value'])}",
                      f"- **Ours:** {_one_line(c['measured'])}",
                      f"- **Verdict:** {verdict_text(c)}"]
            if c.get("rule"):
                lines.append(f"- **Rule:** {_one_line(c['rule'])}")
            lines.append(f"- **Setting:** {once('setting', c['setting'], number)}")
            if c.get("seeds"):
                lines.append(f"- **Seeds:** {c['seeds']}")
            if c.get("assumed"):
                lines.append(f"- **Assumed:** {once('assumed', c['assumed'], number)}")
            if c.get("holds"):
                lines.append(f"- **Holds:** {_one_line(c['holds'])}")
            if c.get("note"):
                lines.append(f"- **Note:** {_one_line(c['note'])}")
            shown = shown_in(section, number)
            if shown:
                lines.append("- **Shown in:** " + ", ".join(
                    f"[{'figure' if i['kind'] == 'figure' else 'table'} "
                    f"*{_one_line(i['caption'])[:60].rstrip()}*](#{item_anchor(i)})"
                    for i in shown))
            if c.get("key"):
                lines.append(f"- **Register:** `{c['key']}` (`workbench/conf/claims.yaml`)")
            lines.append("")
    if section["items"]:
        lines += ["## Results", ""]
    found = section.get("lineage", {})
    shown_setting: dict[str, str] = {}  # an item's setting -> the first item showing it
    for item in section["items"]:
        if item["kind"] in ("figure", "table"):
            numbers = item.get("claims", [])
            lines += [f'<a id="{item_anchor(item)}"></a>', ""]
            if numbers:
                lines += ["*Shows " + ", ".join(f"[claim {n}](#{claim_anchor(n)})"
                                                for n in numbers) + ".*", ""]
        if item["kind"] == "figure":
            lines += [f"**{item['caption']}**", "", f"![{item['caption']}]({item['file']})", "",
                      f"*Setting:* {_setting_once(item, shown_setting)}", ""]
        elif item["kind"] == "table":
            lines += [f"**{item['caption']}** ([CSV]({item['file']}))", "", item["markdown"], ""]
            if item["setting"]:
                lines += [f"*Setting:* {_setting_once(item, shown_setting)}", ""]
        else:
            lines += [item["text"], ""]
        if "reads" in item:
            lines += [f"*Drawn from:* {drawn_from(item['reads'], found.get('outputs', []))}", ""]
    if found:
        lines += lineage_lines(found)
    return "\n".join(lines)


def _short(md5: str) -> str:
    return md5[:10] if md5 else "-"


def drawn_from(files: list[str], outputs: list[dict[str, Any]]) -> str:
    """One line naming an item's files, grouped by the stage output holding them, with the
    stage and the output's ``dvc.lock`` hash (a file no stage writes is named alone)."""
    if not files:
        return "no results file (the register's numbers or the notebook's own)"
    parts, left = [], list(files)
    for out in outputs:
        inside = [f for f in left if f.startswith(out["path"] + "/")]
        if inside:
            names = ", ".join(f"`{f[len(out['path']) + 1:]}`" for f in inside)
            parts.append(f"{names} of `{out['path']}` (stage `{out['stage']}`, dvc.lock "
                         f"`{_short(out['md5'])}`)")
            left = [f for f in left if f not in inside]
    parts += [f"`{f}` (no stage output)" for f in left]
    return "; ".join(parts)


def lineage_lines(found: dict[str, Any]) -> list[str]:
    """The page's ``## Provenance``: commit, configuration digest, the stage outputs read."""
    dirty = found.get("dirty")
    state = ("" if dirty == 0 else " (git state unknown)" if dirty is None
             else f" with {dirty} modified source(s)")
    sections = ", ".join(f"`{k}`" for k in found.get("config_sections", [])) or "all of it"
    lines = ["## Provenance", "",
             f"Drawn at commit `{found['commit']}`{state}"
             + (f"; configuration sha256 `{found['config_sha256']}` (over {sections})."
                if found.get("config_sha256") else "."), ""]
    if found.get("outputs"):
        lines += ["| stage output | stage | dvc.lock md5 | when drawn |",
                  "| --- | --- | --- | --- |"]
        lines += [f"| `{o['path']}` | `{o['stage']}` | `{_short(o['md5'])}` | "
                  f"{'as recorded' if o['current'] else 'differs from dvc.lock'} |"
                  for o in found["outputs"]]
        lines.append("")
    if found.get("also_read"):
        lines += ["Also read (for the claims and the text): "
                  + ", ".join(f"`{f}`" for f in found["also_read"]) + ".", ""]
    return lines


def write_page(out_dir: Path, section: dict[str, Any]) -> bool:
    """Write ``out_dir/README.md``, the [`page`][] of ``section``, unless it already holds
    exactly that text (an unchanged page keeps its file untouched).

    Returns:
        Whether the file was (re)written.

    Raises:
        UserError: ``out_dir`` holds a ``README.md`` (or a link) that no notebook wrote: it is
            never overwritten.
    """
    path = Path(out_dir) / PAGE_FILE
    text = page(section)
    if path.is_symlink() or path.exists():
        try:
            old = path.read_text(encoding="utf-8") if path.is_file() else ""
        except (OSError, UnicodeDecodeError):
            old = ""
        if old == text:
            return False
        if path.is_symlink() or PAGE_MARK not in old:
            raise UserError(f"{path} is not a page a notebook wrote (a file of yours?): it is "
                            f"left as it is; give out_dir a folder of its own, e.g. "
                            f"out_dir=scratch/{section.get('name', 'section')}")
    write_text(path, text)
    return True


def _one_line(text: str) -> str:
    """``text`` with its line breaks folded into spaces (one Markdown list item)."""
    return " ".join(str(text).split())


def files(results: Path, datasets: Sequence[str], *names: str) -> list[Path]:
    """``results/<dataset>/<name>`` for every dataset and name: what a per-dataset figure reads
    (its ``reads=``)."""
    return [Path(results) / d / n for d in datasets for n in names]


def per_dataset(results: Path, datasets: list[str], csvs: list[str], section: Section,
                summary: str = "summary.json"
                ) -> tuple[dict[str, dict[str, Any]], dict[str, pd.DataFrame]]:
    """Read a per-dataset stage's outputs for a notebook.

    For every dataset, ``results/<dataset>/<summary>``; a dataset whose summary says it was not
    ``available`` gets a note in ``section`` and is skipped; the others' ``<csv>.csv`` files are
    read with a ``dataset`` column and concatenated per name.

    Returns:
        The summaries of the available datasets (in order) and one frame per ``csvs`` name.

    Raises:
        RuntimeError: no dataset was available (the figures would be empty).
    """
    summaries: dict[str, dict[str, Any]] = {}
    frames: dict[str, list[pd.DataFrame]] = {name: [] for name in csvs}
    for dataset in datasets:
        info = json.loads((results / dataset / summary).read_text())
        if not info["available"]:
            section.note(f"Dataset `{dataset}` was not available in this run: {info['reason']}")
            continue
        summaries[dataset] = info
        for name in csvs:
            frames[name].append(pd.read_csv(results / dataset / f"{name}.csv")
                                .assign(dataset=dataset))
    if not summaries:
        raise RuntimeError(f"{results}: none of the datasets {datasets} was available")
    return summaries, {name: pd.concat(f, ignore_index=True) for name, f in frames.items()}


def _markdown(frame: pd.DataFrame, floatfmt: str = ".4g") -> str:
    """``frame`` as a Markdown table, with ``|`` inside cells escaped."""
    escaped = frame.copy()
    for col in escaped.columns:
        if escaped[col].dtype == object or pd.api.types.is_string_dtype(escaped[col]):
            escaped[col] = escaped[col].astype(str).str.replace("|", "\\|", regex=False)
    return escaped.to_markdown(index=False, floatfmt=floatfmt)


def _git(*args: str, cwd: Path) -> str | None:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def _generated(path: str) -> bool:
    return any(path == g or (g.endswith("/") and path.startswith(g)) for g in GENERATED)


def dirty_sources(repo: Path) -> list[str] | None:
    """Files outside [`GENERATED`][] that differ from HEAD (staged or not), and new files git
    does not ignore (a module not yet committed changes what ran just as an edit does).

    Returns:
        The paths, sorted (empty: clean), or None when git cannot tell (no git, no commit).
    """
    changed = _git("diff", "--name-only", "-z", "HEAD", "--", cwd=repo)
    if changed is None:
        return None
    new = _git("ls-files", "--others", "--exclude-standard", "-z", cwd=repo) or ""
    paths = set(changed.split("\0")) | set(new.split("\0"))
    return sorted(p for p in paths if p and not _generated(p))


def provenance(repo: Path, params: Path) -> dict[str, Any]:
    """Git commit, modified sources, Python and package versions, and the params file's digest.

    Returns:
        ``commit`` (or ``"unknown"``), ``dirty`` (None: git cannot tell), ``dirty_files``,
        ``python``, ``packages`` (name -> version), ``params_sha256`` (None: no params file).
    """
    versions = {}
    for pkg in PROVENANCE_PACKAGES:
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = "not installed"
    dirty = dirty_sources(repo)
    return {"commit": _git("rev-parse", "HEAD", cwd=repo) or "unknown",
            "dirty": bool(dirty) if dirty is not None else None, "dirty_files": dirty or [],
            "python": platform.python_version(), "packages": versions,
            "params_sha256": (hashlib.sha256(params.read_bytes()).hexdigest()
                              if params.is_file() else None)}


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


def collect(reports: Path, sections: list[str], register: reg.Register | None = None,
            measured: Mapping[str, Measurement] | None = None
            ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Load the sections and one claim row per register entry, judged from the register.

    Rows come in the register's order; each gets ``section`` and ``number`` (its place on its
    section's page; empty for a row the register writes itself). With ``measured`` (every
    entry's measurement from ``results/``, [`workbench.claims.measure_all`][]) the rows are
    the measures' own, and a section whose row differs from its measure is stale.

    Returns:
        ``(sections, claims)``: the loaded ``section.json`` contents and the judged rows.

    Raises:
        FileNotFoundError: a section's notebook stage has not run.
        ValueError: a section's claims predate verdict states.
        CatalogueError: a row without a key or with a key not in the register, two rows for one
            claim, a measured entry of a gathered section without its row, or (``measured``) a
            row that differs from its measure.
    """
    register = register or reg.load()
    loaded = []
    for name in sections:
        path = reports / name / SECTION_FILE
        if not path.exists():
            raise MissingInputError(f"{path} not found: the notebook stage for {name!r} has not "
                                    "run (dvc repro runs it)")
        loaded.append(json.loads(path.read_text()))
    stale = [s["name"] for s in loaded if any("state" not in c for c in s["claims"])]
    if stale:
        raise ValueError(f"the claims of {', '.join(stale)} carry no verdict state (written "
                         "before verdicts existed): rerun their notebook stage")
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
    fresh = {k: measured_row(register[k], m) for k, m in (measured or {}).items()
             if k in by_key}
    stale = [f"{k} (reports/{by_key[k][0]['section']}/{SECTION_FILE})"
             for k, row in fresh.items()
             if {f: v for f, v in by_key[k][0].items()
                 if f not in ("section", "number", "shown")} != row]
    if stale:
        raise CatalogueError("claim rows that differ from their measure in workbench/claims: "
                             + "; ".join(stale) + ". The section is older than the results or "
                             "the measure: rerun its notebook (dvc repro notebook@<name>).")
    claims = []
    for e in register.entries:
        if e.key in by_key:
            row = by_key[e.key][0]
            where = {k: row[k] for k in ("section", "number", "shown")}
            if e.key in fresh:
                row = {**fresh[e.key], **where}
            claims.append({**rejudge(row, register), **where})
        elif e.kind == "not_comparable" and e.section in sections:
            claims.append({**rejudge(asdict(register_claim(e)), register), "section": "",
                           "number": 0, "shown": ""})
    return loaded, claims
