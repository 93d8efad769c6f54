"""Report sections: what each notebook writes, one page per section, and the claims they carry.

Notebooks describe what they produce through a :class:`Section`; :meth:`Section.save` writes the
section's record and its page, and the ``report`` stage gathers every section into the index,
``reports/README.md`` (:mod:`workbench.report.index`)::

    notebooks/<nb>.py --papermill--> reports/<nb>/section.json   (figures, tables, notes, claims)
                                     reports/<nb>/README.md      (the section's page: write_page)
                                     reports/<nb>/*.png, *.csv
    reports/*/section.json --report--> reports/README.md   (the index: verdict counts, a short
                                       reports/claims.csv   claims table, links to the pages)

The page is a pure function of ``section.json`` (:func:`page`), so the ``report`` stage rewrites
a missing or outdated page to the same bytes the notebook would have written
(:func:`write_page`); a notebook run by hand writes the same page into ``scratch/<nb>/``.

A claim row is: paper, claim, paper value (with [P] full text / [A] abstract), measured value,
the exact setting it was measured in, its verdict state and the rule that decided it
(:mod:`workbench.report.verdict`), and a note. Rows carry the key of the headline claim they
measure (:mod:`workbench.report.catalogue`); the report adds a ``not built`` row for every
claim of a paper not built, and fails when a built claim of a gathered section has no row
(:func:`collect`). Where the workbench's model of a mechanism is ours (the paper's method section
is unavailable), the section says so next to the result.

Provenance (:func:`provenance`): the commit the report was built from and, when tracked sources
differ from it (anything outside the generated :data:`GENERATED` paths), the list of them.
"""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
from dataclasses import InitVar, asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, cast

import pandas as pd

from workbench.report import display
from workbench.report.catalogue import CATALOGUE
from workbench.report.plotting import save_figure
from workbench.report.verdict import STATES, Verdict, not_built
from workbench.utils.errors import MissingInputError, WorkbenchError
from workbench.utils.io import write_json, write_text
from workbench.utils.paths import notebook_output, repo_relative

SECTION_FILE = "section.json"
PAGE_FILE = "README.md"  # the section's page, beside its section.json
CLAIM_COLUMNS = ["paper", "claim", "paper_value", "measured", "setting", "state", "rule", "note"]
GENERATED = ("results/", "reports/", "data/", "dvc.lock", "params.yaml")  # not "sources"
PROVENANCE_PACKAGES = ["torch", "numpy", "pandas", "pyarrow", "scipy", "numba", "hydra-core",
                       "dvc", "papermill", "jupytext", "matplotlib", "seaborn"]


class CatalogueError(WorkbenchError, ValueError):
    """Claim rows and the catalogue of headline claims disagree."""


@dataclass
class Claim:
    """One row of the claims table.

    Give either ``verdict`` (from :mod:`workbench.report.verdict`) or ``state`` and ``rule``.

    Attributes:
        paper: short paper name (HET, ESD, RecD, Hotline, FlexShard).
        claim: the claim in words.
        paper_value: the paper's number with its source tag, e.g. ``"90% [P]"``.
        measured: what this run measured, formatted.
        setting: the exact setting of the measurement (dataset, sizes, knobs).
        verdict: sets ``state`` and ``rule`` (not stored itself).
        note: caveats (sample size, our formalisation, ...).
        key: the catalogue id of the headline claim this row measures (empty: none).
        state: one of :data:`workbench.report.verdict.STATES`.
        rule: the rule that decided the state, with the numbers.

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

    def __post_init__(self, verdict: Verdict | None) -> None:
        if verdict is not None:
            self.state, self.rule = verdict.state, verdict.rule
        if self.state not in STATES:
            raise ValueError(f"claim {self.claim!r}: state {self.state!r} is not one of {STATES} "
                             "(pass verdict=...)")


@dataclass
class Section:
    """What one notebook contributes to the report. Build it, add items, then :meth:`save`.

    Args:
        name: the notebook's name (its output folder under ``reports/``).
        title: section heading.
        out_dir: where figures, tables and ``section.json`` are written; None (a notebook run by
            hand) is ``scratch/<name>``, a relative path is relative to the repository root
            (:func:`workbench.utils.paths.notebook_output`).
        intro: Markdown paragraph under the heading (say here when a model is ours).

    Every item is also shown in the notebook cell that adds it (:mod:`workbench.report.display`).
    """

    name: str
    title: str
    out_dir: Path | str | None = None
    intro: str = ""
    items: list[dict[str, Any]] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.out_dir = notebook_output(self.name, self.out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if self.intro:
            display.markdown(self.intro)

    @property
    def _out(self) -> Path:
        """``out_dir``: a ``Path`` once ``__post_init__`` has run."""
        return cast(Path, self.out_dir)

    def figure(self, fig: Any, name: str, caption: str, setting: str) -> None:
        """Save ``fig`` as ``<name>.png``, record it with its caption and setting, show it.

        Returns nothing, so a cell ending in this call shows the figure, not a path."""
        path = save_figure(fig, self._out / f"{name}.png")
        self.items.append({"kind": "figure", "file": path.name, "caption": caption,
                           "setting": setting})
        display.image(path)

    def table(self, frame: pd.DataFrame, name: str, caption: str, setting: str = "",
              floatfmt: str = ".4g") -> None:
        """Save ``frame`` as ``<name>.csv``, record it (a Markdown table in the report), show it
        as a table."""
        path = self._out / f"{name}.csv"
        write_text(path, frame.to_csv(index=False, float_format="%.6g"))
        self.items.append({"kind": "table", "file": path.name, "caption": caption,
                           "setting": setting,
                           "markdown": _markdown(frame, floatfmt)})
        display.table(frame, caption, floatfmt)

    def note(self, text: str) -> None:
        """A Markdown paragraph between items (shown rendered)."""
        self.items.append({"kind": "note", "text": text})
        display.markdown(text)

    def claim(self, claim: Claim) -> None:
        """Add a row to the claims table (shown when the section is saved)."""
        self.claims.append(claim)

    def save(self) -> None:
        """Write ``section.json`` and the section's page ``README.md`` (both atomically); show
        this section's claim rows and where the section went."""
        path = self._out / SECTION_FILE
        write_json(path, {"name": self.name, "title": self.title, "intro": self.intro,
                          "items": self.items, "claims": [asdict(c) for c in self.claims]})
        write_page(self._out, json.loads(path.read_text()))  # the page is what the file says
        if self.claims:
            shown = ["paper", "claim", "paper_value", "measured", "state"]
            display.table(pd.DataFrame([asdict(c) for c in self.claims])[shown],
                          "Claims of this section (rows of the report's claims table)")
        kinds = pd.Series([i["kind"] for i in self.items], dtype=object).value_counts()
        display.markdown(f"*Section `{self.name}` written to `{repo_relative(self._out)}/` "
                         f"(page: `{PAGE_FILE}`): {kinds.get('figure', 0)} figures, "
                         f"{kinds.get('table', 0)} tables, {len(self.claims)} claim rows.*")


def claim_anchor(number: int) -> str:
    """The anchor of the ``number``-th claim (from 1) on its section's page, e.g. ``claim-3``:
    the slug Markdown renderers (GitHub, GitLab, VS Code) give its heading ``### Claim 3``."""
    return f"claim-{number}"


def page(section: dict[str, Any]) -> str:
    """The Markdown page of one section, from its ``section.json`` contents alone.

    Title, a line linking the report's index and the notebook, the intro, every claim row in
    full (paper value, ours, verdict, rule, setting, note, catalogue key) under a heading
    ``### Claim <n>`` (anchor :func:`claim_anchor`), then under ``## Results`` the figures
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
             f"[`notebooks/{name}.py`](../../notebooks/{name}.py) from the run outputs; do not "
             "edit.", ""]
    if section["intro"]:
        lines += [section["intro"], ""]
    claims = section["claims"]
    if claims:
        lines += ["## Claims", "",
                  "Paper values: [P] from the paper's full text, [A] from its abstract. The "
                  "verdict holds in the setting given; the rule says how it was decided "
                  "(`workbench/report/verdict.py`).", ""]
        for number, c in enumerate(claims, 1):
            lines += [f"### Claim {number}", "", f"**{c['paper']}:** {_one_line(c['claim'])}",
                      "", f"- **Paper:** {_one_line(c['paper_value'])}",
                      f"- **Ours:** {_one_line(c['measured'])}",
                      f"- **Verdict:** {c['state']}"]
            if c.get("rule"):
                lines.append(f"- **Rule:** {_one_line(c['rule'])}")
            lines.append(f"- **Setting:** {_one_line(c['setting'])}")
            if c.get("note"):
                lines.append(f"- **Note:** {_one_line(c['note'])}")
            if c.get("key"):
                lines.append(f"- **Headline claim:** `{c['key']}` "
                             "(`workbench/report/catalogue.py`)")
            lines.append("")
    if section["items"]:
        lines += ["## Results", ""]
    for item in section["items"]:
        if item["kind"] == "figure":
            lines += [f"**{item['caption']}**", "", f"![{item['caption']}]({item['file']})", "",
                      f"*Setting:* {item['setting']}", ""]
        elif item["kind"] == "table":
            lines += [f"**{item['caption']}** ([CSV]({item['file']}))", "", item["markdown"], ""]
            if item["setting"]:
                lines += [f"*Setting:* {item['setting']}", ""]
        else:
            lines += [item["text"], ""]
    return "\n".join(lines)


def write_page(out_dir: Path, section: dict[str, Any]) -> bool:
    """Write ``out_dir/README.md``, the :func:`page` of ``section``, unless it already holds
    exactly that text (an unchanged page keeps its file untouched).

    Returns:
        Whether the file was (re)written.
    """
    path = Path(out_dir) / PAGE_FILE
    text = page(section)
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    write_text(path, text)
    return True


def _one_line(text: str) -> str:
    """``text`` with its line breaks folded into spaces (one Markdown list item)."""
    return " ".join(str(text).split())


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
    """Files outside :data:`GENERATED` that differ from HEAD (staged or not), and new files git
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


def collect(reports: Path, sections: list[str]) -> tuple[list[dict[str, Any]],
                                                          list[dict[str, Any]]]:
    """Load the sections and their claim rows, plus a ``not built`` row per catalogue claim.

    Returns:
        ``(sections, claims)``: the loaded ``section.json`` contents, and every claim row
        (the sections' rows in order, then the catalogue's not-built claims).

    Raises:
        FileNotFoundError: a section's notebook stage has not run.
        ValueError: a section's claims predate verdict states.
        CatalogueError: a row's key is not in the catalogue, or a built catalogue claim of a
            gathered section has no row.
    """
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
    claims = [c for s in loaded for c in s["claims"]]
    known = {c.key for c in CATALOGUE}
    unknown = sorted({f"{c.get('key')!r} ({s['name']})" for s in loaded for c in s["claims"]
                      if c.get("key") and c["key"] not in known})
    if unknown:
        raise CatalogueError(f"claim keys not in workbench/report/catalogue.py: "
                             f"{', '.join(unknown)}")
    keys = {c.get("key") for c in claims}
    absent = [f"{c.key} ({c.paper}: {c.claim}; expected from notebooks/{c.section}.py)"
              for c in CATALOGUE if c.built and c.section in sections and c.key not in keys]
    if absent:
        raise CatalogueError("built headline claims with no claim row: " + "; ".join(absent)
                             + ". Each notebook must add a Claim(key=...) for every catalogue "
                             "claim it covers, as 'not comparable' with the reason when its "
                             "setting cannot measure it.")
    for c in CATALOGUE:
        if not c.built:
            claims.append(asdict(Claim(c.paper, c.claim, c.paper_value, "-", "-",
                                       verdict=not_built(c.missing), key=c.key)))
    return loaded, claims
