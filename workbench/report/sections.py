"""The generated report: figures beside the paper's numbers, a claims table, provenance.

Notebooks describe what they produce through a :class:`Section`; the ``report`` stage gathers
every section into ``reports/README.md``::

    notebooks/<nb>.py --papermill--> reports/<nb>/section.json   (figures, tables, claims)
                                     reports/<nb>/*.png, *.csv
    reports/*/section.json --report--> reports/README.md  (verdict counts, rules, claims table,
                                       reports/claims.csv  sections, provenance)

A claim row is: paper, claim, paper value (with [P] full text / [A] abstract), measured value,
the exact setting it was measured in, its verdict state and the rule that decided it
(:mod:`workbench.report.verdict`), and a note. Rows carry the key of the headline claim they
measure (:mod:`workbench.report.catalogue`); the report adds a ``not built`` row for every
claim of a paper not built, and fails when a built claim of a gathered section has no row.
Where the workbench's model of a mechanism is ours (the paper's method section is unavailable),
the section says so next to the result.

Provenance: the README names the commit it was built from and, when tracked sources differ
from that commit (anything outside the generated :data:`GENERATED` paths), opens with a warning
listing them.
"""

from __future__ import annotations

import json
import platform
import subprocess
from dataclasses import InitVar, asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.report import display
from workbench.report.catalogue import CATALOGUE
from workbench.report.plotting import save_figure
from workbench.report.verdict import DEFINITIONS, STATES, Verdict, not_built
from workbench.utils.io import write_json, write_text
from workbench.utils.paths import notebook_output, repo_relative

SECTION_FILE = "section.json"
CLAIM_COLUMNS = ["paper", "claim", "paper_value", "measured", "setting", "state", "rule", "note"]
GENERATED = ("results/", "reports/", "data/", "dvc.lock", "params.yaml")  # not "sources"
PROVENANCE_PACKAGES = ["torch", "numpy", "pandas", "pyarrow", "scipy", "numba", "hydra-core",
                       "dvc", "papermill", "jupytext", "matplotlib", "seaborn"]


class CatalogueError(ValueError):
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

    def figure(self, fig: Any, name: str, caption: str, setting: str) -> None:
        """Save ``fig`` as ``<name>.png``, record it with its caption and setting, show it.

        Returns nothing, so a cell ending in this call shows the figure, not a path."""
        path = save_figure(fig, self.out_dir / f"{name}.png")
        self.items.append({"kind": "figure", "file": path.name, "caption": caption,
                           "setting": setting})
        display.image(path)

    def table(self, frame: pd.DataFrame, name: str, caption: str, setting: str = "",
              floatfmt: str = ".4g") -> None:
        """Save ``frame`` as ``<name>.csv``, record it (a Markdown table in the report), show it
        as a table."""
        path = self.out_dir / f"{name}.csv"
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
        """Write ``section.json`` (atomically); show this section's claim rows and where the
        section went."""
        path = self.out_dir / SECTION_FILE
        write_json(path, {"name": self.name, "title": self.title, "intro": self.intro,
                          "items": self.items, "claims": [asdict(c) for c in self.claims]})
        if self.claims:
            shown = ["paper", "claim", "paper_value", "measured", "state"]
            display.table(pd.DataFrame([asdict(c) for c in self.claims])[shown],
                          "Claims of this section (rows of the report's claims table)")
        kinds = pd.Series([i["kind"] for i in self.items], dtype=object).value_counts()
        display.markdown(f"*Section `{self.name}` written to `{repo_relative(self.out_dir)}/`: "
                         f"{kinds.get('figure', 0)} figures, {kinds.get('table', 0)} tables, "
                         f"{len(self.claims)} claim rows.*")


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
    """Git commit, modified sources, Python and package versions, and the resolved config."""
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
            "config": params.read_text() if params.exists() else "(params file not found)"}


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
            raise FileNotFoundError(f"{path} not found: the notebook stage for {name!r} has not "
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


def _verdict_lines(claims: list[dict[str, Any]]) -> list[str]:
    """The per-state count table and the rule definitions."""
    counts = pd.Series([c["state"] for c in claims], dtype=object).value_counts()
    table = pd.DataFrame({"state": [*STATES, "total"],
                          "claim rows": [int(counts.get(s, 0)) for s in STATES] + [len(claims)]})
    lines = ["## Verdicts", "", table.to_markdown(index=False), "",
             "Rules (`workbench/report/verdict.py`; each row's *rule* column gives its numbers):",
             ""]
    lines += [f"- **{state}**: {text}." for state, text in DEFINITIONS]
    return lines + [""]


def _warning(prov: dict[str, Any]) -> list[str]:
    if prov["dirty"] is None:
        return ["> **WARNING: the git state could not be read; this report's sources are "
                "unknown.**", ""]
    if not prov["dirty"]:
        return []
    return ["> **WARNING: built from a working tree with uncommitted source changes.** The "
            f"numbers may not match commit `{prov['commit']}`. Modified sources:", ">",
            *[f"> - `{p}`" for p in prov["dirty_files"]], ""]


def build(reports: Path, sections: list[str], params: Path, repo: Path) -> str:
    """Assemble ``reports/README.md`` text from the sections' ``section.json`` files.

    Raises:
        FileNotFoundError: a section's notebook stage has not run.
        CatalogueError: see :func:`collect`.
    """
    loaded, claims = collect(reports, sections)
    prov = provenance(repo, params)
    lines = ["# Reproduction report", "", *_warning(prov),
             f"Built from commit `{prov['commit']}` by the `report` stage of `dvc repro`, from "
             "the run outputs; do not edit. Each figure and table is produced by the notebook "
             "named in its section, from the metrics files of the experiment stages.", "",
             *_verdict_lines(claims),
             "## Claims", "",
             "Paper values: [P] from the paper's full text, [A] from its abstract. *State* is "
             "the verdict in the setting given; *rule* says how it was decided.", ""]
    if claims:
        lines.append(_markdown(pd.DataFrame(claims, columns=CLAIM_COLUMNS)))
    else:
        lines.append("(no claims yet)")
    lines.append("")
    for sec in loaded:
        name = sec["name"]
        lines += [f"## {sec['title']}", "",
                  f"Notebook: [`notebooks/{name}.py`](../notebooks/{name}.py) (executed copy: "
                  f"[`reports/notebooks/{name}.ipynb`](notebooks/{name}.ipynb)).", ""]
        if sec["intro"]:
            lines += [sec["intro"], ""]
        for item in sec["items"]:
            if item["kind"] == "figure":
                lines += [f"**{item['caption']}**", "",
                          f"![{item['caption']}]({name}/{item['file']})", "",
                          f"*Setting:* {item['setting']}", ""]
            elif item["kind"] == "table":
                lines += [f"**{item['caption']}** ([CSV]({name}/{item['file']}))", "",
                          item["markdown"], ""]
                if item["setting"]:
                    lines += [f"*Setting:* {item['setting']}", ""]
            else:
                lines += [item["text"], ""]
    lines += ["## Provenance", "",
              f"- git commit: `{prov['commit']}`" + (
                  " (working tree had uncommitted source changes: "
                  + ", ".join(f"`{p}`" for p in prov["dirty_files"]) + ")"
                  if prov["dirty"] else ""),
              f"- Python {prov['python']}; " + ", ".join(f"{k} {v}"
                                                      for k, v in prov["packages"].items()),
              "", "<details><summary>Resolved configuration (params.yaml)</summary>", "",
              "```yaml", prov["config"].rstrip(), "```", "", "</details>", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """``python -m workbench.report``: write ``reports/README.md`` and ``reports/claims.csv``."""
    from workbench.config import stage_arguments
    from workbench.utils.paths import REPO_ROOT

    cfg, args = stage_arguments(main.__doc__ or "", argv)
    reports = cfg.paths.resolve("reports")
    params = args.params or (REPO_ROOT / "params.yaml")
    sections = list(cfg.pipeline.notebooks)
    text = build(reports, sections, Path(params), REPO_ROOT)
    _, claims = collect(reports, sections)
    write_text(reports / "claims.csv",
               pd.DataFrame(claims, columns=CLAIM_COLUMNS).to_csv(index=False))
    write_text(reports / "README.md", text)


if __name__ == "__main__":
    main()
