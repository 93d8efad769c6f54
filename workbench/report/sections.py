"""Report sections: what each notebook writes, and the page and claims it carries.

Notebooks describe what they produce through a [`Section`][]; [`Section.save`][] writes the
section's record and its page ([`workbench.report.page`][]), and the ``report`` stage gathers
every section into the index, ``reports/README.md`` ([`workbench.report.index`][]):

    notebooks/<nb>.py --papermill--> reports/<nb>/section.json   (figures, tables, notes, claims)
                                     reports/<nb>/README.md      (the section's page: write_page)
                                     reports/<nb>/*.png, *.csv
    reports/*/section.json --report--> reports/README.md   (the index: verdict counts, a short
                                       reports/claims.csv   claims table, links to the pages)

A claim row is the claims package's record ([`workbench.claims.record`][]): a notebook calls
[`Section.record`][] with a measure's [`Measurement`][workbench.claims.Measurement] (or
[`Section.measure`][] with the payload), and the register judges it.

Each figure and table names the files it is drawn from (``reads=``, required: ``()`` for one
drawn from the register or the notebook's own numbers). A
[`ReadLog`][workbench.report.lineage.ReadLog] holds every name to what the notebook really
opened (a path it never opened is an error), and [`Section.save`][] maps each file to the
stage output holding it with that output's ``dvc.lock`` hash ([`workbench.report.lineage`][]);
the page shows them under each item and, under ``## Provenance``, the commit, the digest of the
notebook's configuration ([`workbench.report.provenance.config_digest`][]) and every stage
output read:

    item  --reads--> results/<stage>/<ds>/<file>  --locate--> (stage, output, dvc.lock md5,
                                                               whether the output still has it)
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

import pandas as pd

from workbench.claims import Measurement
from workbench.claims import register as reg
from workbench.claims.record import Claim, measured_claim, recorded_claim
from workbench.report import display, lineage, plotting
from workbench.report.page import PAGE_FILE, write_page
from workbench.report.plotting import save_figure
from workbench.report.provenance import config_digest, dirty_sources, head_commit
from workbench.utils.errors import MissingInputError, UserError
from workbench.utils.io import write_json, write_text
from workbench.utils.paths import REPO_ROOT, notebook_output, repo_relative

log = logging.getLogger(__name__)

SECTION_FILE = "section.json"


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
                               measurement=measurement, conditions=conditions or {})
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
        return {"commit": head_commit(REPO_ROOT),
                "dirty": len(dirty) if dirty is not None else None,
                "config_sha256": digest, "config_sections": keys,
                "outputs": list(outputs.values()),
                "also_read": [p for p in (repo_relative(f) for f in sorted(self._log.files))
                              if p not in named]}

    def _link_claims(self) -> None:
        """Give every figure and table the numbers of the claims it shows: the items the
        register's ``shown_in`` names for each claim (their file names without extension)."""
        register = reg.load()
        drawn = [i for i in self.items if "reads" in i]
        for item in drawn:
            item["claims"] = []
        for n, c in enumerate(self.claims, 1):
            if c.key in register.keys():
                names = set(register[c.key].shown_in)
                for item in drawn:
                    if Path(item["file"]).stem in names:
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


def load_sections(reports: Path, names: Sequence[str]) -> list[dict[str, Any]]:
    """The ``section.json`` contents of each named section under ``reports``.

    Raises:
        MissingInputError: a section's notebook stage has not run.
        ValueError: a section's claims predate verdict states.
    """
    loaded = []
    for name in names:
        path = reports / name / SECTION_FILE
        if not path.exists():
            raise MissingInputError(f"{path} not found: the notebook stage for {name!r} has not "
                                    "run (dvc repro runs it)")
        loaded.append(json.loads(path.read_text()))
    stale = [s["name"] for s in loaded if any("state" not in c for c in s["claims"])]
    if stale:
        raise ValueError(f"the claims of {', '.join(stale)} carry no verdict state (written "
                         "before verdicts existed): rerun their notebook stage")
    return loaded
