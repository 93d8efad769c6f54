"""The generated report: figures beside the paper's numbers, a claims table, provenance.

Notebooks describe what they produce through a :class:`Section`; the ``report`` stage gathers
every section into ``reports/README.md``::

    notebooks/<nb>.py --papermill--> reports/<nb>/section.json   (figures, tables, claims)
                                     reports/<nb>/*.png, *.csv
    reports/*/section.json --report--> reports/README.md  (claims table, sections, provenance)
                                       reports/claims.csv

A claim row is: paper, claim, paper value (with [P] full text / [A] abstract), measured value,
the exact setting it was measured in, and whether the paper's direction holds. Where the
workbench's model of a mechanism is ours (the paper's method section is unavailable), the
section says so next to the result.
"""

from __future__ import annotations

import json
import platform
import subprocess
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.report.plotting import save_figure
from workbench.utils.io import write_json, write_text

SECTION_FILE = "section.json"
CLAIM_COLUMNS = ["paper", "claim", "paper_value", "measured", "setting", "holds", "note"]
PROVENANCE_PACKAGES = ["torch", "numpy", "pandas", "pyarrow", "scipy", "numba", "hydra-core",
                       "dvc", "papermill", "jupytext", "matplotlib", "seaborn"]


@dataclass
class Claim:
    """One row of the claims table.

    Attributes:
        paper: short paper name (HET, ESD, RecD, Hotline, FlexShard).
        claim: the claim in words.
        paper_value: the paper's number with its source tag, e.g. ``"90% [P]"``.
        measured: what this run measured, formatted.
        setting: the exact setting of the measurement (dataset, sizes, knobs).
        holds: whether the paper's direction holds in this run (None: not applicable).
        note: caveats (sample size, our formalisation, ...).
    """

    paper: str
    claim: str
    paper_value: str
    measured: str
    setting: str
    holds: bool | None
    note: str = ""


@dataclass
class Section:
    """What one notebook contributes to the report. Build it, add items, then :meth:`save`.

    Args:
        name: the notebook's name (its output folder under ``reports/``).
        title: section heading.
        out_dir: where figures, tables and ``section.json`` are written.
        intro: Markdown paragraph under the heading (say here when a model is ours).
    """

    name: str
    title: str
    out_dir: Path
    intro: str = ""
    items: list[dict[str, Any]] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.out_dir = Path(self.out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)

    def figure(self, fig: Any, name: str, caption: str, setting: str) -> Path:
        """Save ``fig`` as ``<name>.png`` and record it with its caption and setting."""
        path = save_figure(fig, self.out_dir / f"{name}.png")
        self.items.append({"kind": "figure", "file": path.name, "caption": caption,
                           "setting": setting})
        return path

    def table(self, frame: pd.DataFrame, name: str, caption: str, setting: str = "",
              floatfmt: str = ".4g") -> Path:
        """Save ``frame`` as ``<name>.csv`` and record it (shown as a Markdown table)."""
        path = self.out_dir / f"{name}.csv"
        write_text(path, frame.to_csv(index=False, float_format="%.6g"))
        self.items.append({"kind": "table", "file": path.name, "caption": caption,
                           "setting": setting,
                           "markdown": _markdown(frame, floatfmt)})
        return path

    def note(self, text: str) -> None:
        """A Markdown paragraph between items."""
        self.items.append({"kind": "note", "text": text})

    def claim(self, claim: Claim) -> None:
        """Add a row to the claims table."""
        self.claims.append(claim)

    def save(self) -> Path:
        """Write ``section.json`` (atomically)."""
        path = self.out_dir / SECTION_FILE
        write_json(path, {"name": self.name, "title": self.title, "intro": self.intro,
                          "items": self.items, "claims": [asdict(c) for c in self.claims]})
        return path


def _markdown(frame: pd.DataFrame, floatfmt: str = ".4g") -> str:
    """``frame`` as a Markdown table, with ``|`` inside cells escaped."""
    escaped = frame.copy()
    for col in escaped.columns:
        if escaped[col].dtype == object or pd.api.types.is_string_dtype(escaped[col]):
            escaped[col] = escaped[col].astype(str).str.replace("|", "\\|", regex=False)
    return escaped.to_markdown(index=False, floatfmt=floatfmt)


def _holds_text(holds: bool | None) -> str:
    return {True: "yes", False: "no", None: "n/a"}[holds]


def _git(*args: str, cwd: Path) -> str:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def provenance(repo: Path, params: Path) -> dict[str, Any]:
    """Git commit, dirty flag, Python and package versions, and the resolved config text."""
    versions = {}
    for pkg in PROVENANCE_PACKAGES:
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = "not installed"
    status = _git("status", "--porcelain", "--untracked-files=no", cwd=repo)
    return {"commit": _git("rev-parse", "HEAD", cwd=repo),
            "dirty": bool(status) if status != "unknown" else None,
            "python": platform.python_version(), "packages": versions,
            "config": params.read_text() if params.exists() else "(params file not found)"}


def build(reports: Path, sections: list[str], params: Path, repo: Path) -> str:
    """Assemble ``reports/README.md`` text from the sections' ``section.json`` files."""
    loaded = []
    for name in sections:
        path = reports / name / SECTION_FILE
        if not path.exists():
            raise FileNotFoundError(f"{path} not found: the notebook stage for {name!r} has not "
                                    "run (dvc repro runs it)")
        loaded.append(json.loads(path.read_text()))
    claims = [c for s in loaded for c in s["claims"]]
    lines = ["# Reproduction report", "",
             "Generated by the `report` stage of `dvc repro` from the run outputs; do not edit. "
             "Each figure and table is produced by the notebook named in its section, from the "
             "metrics files of the experiment stages.", "",
             "## Claims", "",
             "Paper values: [P] from the paper's full text, [A] from its abstract. *Holds* says "
             "whether the paper's direction holds in this run, in the setting given.", ""]
    if claims:
        table = pd.DataFrame(claims, columns=CLAIM_COLUMNS)
        table["holds"] = table["holds"].map(_holds_text)
        lines.append(_markdown(table))
    else:
        lines.append("(no claims yet)")
    lines.append("")
    for sec in loaded:
        lines += [f"## {sec['title']}", "", f"Notebook: `notebooks/{sec['name']}.py` "
                  f"(executed copy: `reports/notebooks/{sec['name']}.ipynb`).", ""]
        if sec["intro"]:
            lines += [sec["intro"], ""]
        for item in sec["items"]:
            if item["kind"] == "figure":
                lines += [f"**{item['caption']}**", "",
                          f"![{item['caption']}]({sec['name']}/{item['file']})", "",
                          f"*Setting:* {item['setting']}", ""]
            elif item["kind"] == "table":
                lines += [f"**{item['caption']}** ([CSV]({sec['name']}/{item['file']}))", "",
                          item["markdown"], ""]
                if item["setting"]:
                    lines += [f"*Setting:* {item['setting']}", ""]
            else:
                lines += [item["text"], ""]
    prov = provenance(repo, params)
    lines += ["## Provenance", "",
              f"- git commit: `{prov['commit']}`" + (" (working tree had uncommitted changes)"
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
    text = build(reports, list(cfg.pipeline.notebooks), Path(params), REPO_ROOT)
    claims = [c for name in cfg.pipeline.notebooks
              for c in json.loads((reports / name / SECTION_FILE).read_text())["claims"]]
    write_text(reports / "claims.csv",
               pd.DataFrame(claims, columns=CLAIM_COLUMNS).to_csv(index=False))
    write_text(reports / "README.md", text)


if __name__ == "__main__":
    main()
