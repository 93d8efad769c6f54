"""The report's index: ``reports/README.md``, one screen that links to one page per section.

Writes, from the sections' ``reports/<nb>/section.json`` ([`write`][]):

    reports/README.md     the index (build): how it was produced (the command, the params
                          file linked, never embedded), verdict counts per paper, a claims table
                          of short cells (each row links to its claim on its section's page),
                          the list of section pages, provenance
    reports/claims.csv    every field of every claim row (the machine-readable full record),
                          one row per entry of the claims register
    reports/claims_metrics.json  the verdict counts and each claim's mean, interval and seeds
                          (DVC metrics: ``dvc metrics show``, ``dvc metrics diff HEAD~1``)
    reports/claims_curves/<key>--<parameter>.csv  each numeric sweep of an assumed parameter:
                          value, measured, state (DVC plots: ``dvc plots show``)
    reports/verdict_maps/<paper>.png  per paper, the state at every point of every assumed
                          parameter's sweep (workbench.report.verdict_map)
    reports/<nb>/README.md  each section's page, only where missing or outdated: the same bytes
                          its notebook writes (workbench.report.page.write_page)

Long text (settings, rules, notes, figures, tables) lives on the section pages; the index's
claims table clips its cells ([`CELL_WIDTHS`][]) so that no line of it exceeds
[`ROW_WIDTH`][] characters. The output is deterministic: the same sections, params file and
git state give the same bytes, and it holds no absolute path or host name.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.claims import register as reg
from workbench.claims.counting import counted, measurement_keys, shared_with, variants
from workbench.claims.record import CLAIM_COLUMNS, JUDGED, CatalogueError, collect
from workbench.claims.verdict import DEFINITIONS, STATES, SUMMARIES
from workbench.config import WorkbenchConfig
from workbench.report.lineage import load_lock, outdated
from workbench.report.page import PAGE_FILE, claim_anchor, write_page
from workbench.report.provenance import provenance
from workbench.report.sections import load_sections
from workbench.utils.io import write_text

ROW_WIDTH = 300  # the most characters of one line of the index's claims table
CELL_WIDTHS = {"paper": 12, "claim": 74, "paper_value": 32, "measured": 36, "holds": 40}
METRICS_FILE = "claims_metrics.json"
CURVES_DIR = "claims_curves"
MAPS_DIR = "verdict_maps"
COSTS_PAGE = "costs.md"  # the claim -> command -> cost table (workbench.report.costs)
REPORT_COMMAND = "python -m workbench.stages report --params"


def curve_name(parameter: str) -> str:
    """An assumed parameter's name as one file name: every run of characters other than
    letters, digits, ``.``, ``_`` and ``-`` becomes ``_`` (``NVLink/NIC ratio`` ->
    ``NVLink_NIC_ratio``: a ``/`` would make a folder)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", parameter)


ELLIPSIS = "\u2026"


def clip(text: str, width: int) -> str:
    """``text`` on one line, cut to at most ``width`` characters with a trailing ellipsis.

    The cut falls on a word boundary when one is near, and never inside a code span (an odd
    backtick is dropped with what follows it).

    Raises:
        ValueError: ``width`` is below 2.
    """
    if width < 2:
        raise ValueError(f"clip width must be at least 2, got {width}")
    text = " ".join(str(text).split())
    if len(text) <= width:
        return text
    cut = text[:width - 1]
    space = cut.rfind(" ")
    if space >= (2 * width) // 3:
        cut = cut[:space]
    if cut.count("`") % 2:
        cut = cut[:cut.rfind("`")]
    return cut.rstrip(" ,;:-(/") + ELLIPSIS


def clip_claim(text: str, width: int) -> str:
    """A claim clipped to ``width`` keeping what tells similar rows apart: its trailing
    parenthetical (model, figure: ``(DFM; Fig. 7a)``), cut to its first two parts, stays
    whole and the words before it are clipped ([`clip`][])."""
    text = " ".join(str(text).split())
    if len(text) <= width or not text.endswith(")") or "(" not in text:
        return clip(text, width)
    start = text.rfind("(")
    parts = [p.strip() for p in text[start + 1:-1].split(";")]
    tail = "(" + "; ".join(parts[:2]) + ")"
    if len(tail) > width // 3 or start == 0:
        return clip(text, width)
    return clip(text[:start].rstrip(), width - len(tail) - 1) + " " + tail


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def cell(text: str, width: int) -> str:
    """``text`` clipped ([`clip`][]) and escaped for a Markdown table, at most ``width``
    characters after escaping."""
    limit = width
    out = _escape(clip(text, limit))
    while len(out) > width:
        limit -= 1
        out = _escape(clip(text, limit))
    return out


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _papers(claims: list[dict[str, Any]]) -> list[str]:
    """The papers in the order they first appear."""
    return list(dict.fromkeys(c["paper"] for c in claims))


def verdict_lines(claims: list[dict[str, Any]], register: reg.Register) -> list[str]:
    """The verdict counts: one row per state (total and per paper, with its meaning), then the
    full rules, folded."""
    papers = _papers(claims)
    rows = counted(claims)  # one per measurement and state
    counts = pd.crosstab(pd.Series([c["state"] for c in rows], dtype=object),
                         pd.Series([c["paper"] for c in rows], dtype=object))
    lines = [_row(["verdict", "measurements", *papers, "meaning"]),
             _row([":--", "--:", *["--:"] * len(papers), ":--"])]
    for state in STATES:
        per = [int(counts.at[state, p]) if state in counts.index else 0 for p in papers]
        lines.append(_row([state, str(sum(per)), *map(str, per), SUMMARIES[state]]))
    lines.append(_row(["**total**", f"**{len(rows)}**",
                       *[str(sum(c["paper"] == p for c in rows)) for p in papers], ""]))
    formal = sum(c.get("basis") == reg.BASES["formalisation"] for c in claims)
    return ["## Verdicts", "",
            f"The {len(claims)} claims of the claims {register.label()} "
            "([`workbench/conf/claims.yaml`](../workbench/conf/claims.yaml)), written before "
            f"the run and judged from it, are {len(rows)} measurements: claims read from one "
            "measurement (the same stage, file and column, the same numbers) count once "
            f"(`workbench/claims/counting.py`). {formal} of the {len(claims)} claims are of "
            "papers known from their abstract only, whose mechanism is our formalisation.", "",
            *lines, "",
            "<details><summary>The verdict rules in full "
            "(<code>workbench/claims/verdict.py</code>)</summary>", "",
            *[f"- **{state}**: {text}." for state, text in DEFINITIONS], "", "</details>", ""]


def claim_lines(claims: list[dict[str, Any]]) -> list[str]:
    """The claims table: short cells, each row linking its claim on its section's page (a row
    the register writes itself has no page)."""
    header = ["paper", "claim", "paper value", "ours", "verdict", "holds", "details"]
    lines = [_row(header), _row([":--"] * len(header))]
    unmeasured: list[dict[str, Any]] = []
    groups = shared_with(claims)
    for c in counted(claims):
        group = groups[c["key"]]
        if len(group) > 1:  # one measurement judged for several claims: one row, all named
            c = {**c, "claim": f"{variants([g['key'] for g in group])}: {c['claim']}",
                 "paper_value": " / ".join(str(g["paper_value"]) for g in group)}
        name, number = c.get("section"), c.get("number")
        if name and number:
            link = f"[{name} #{number}]({name}/{PAGE_FILE}#{claim_anchor(number)})"
        else:  # no section measures it: the register's reason, below the table
            link = f"[why](#{why_anchor(c['key'])})"
            unmeasured.append(c)
        if name and c.get("shown"):
            kind = "fig" if c["shown"].startswith("fig-") else "table"
            link += f" · [{kind}]({name}/{PAGE_FILE}#{c['shown']})"
        lines.append(_row([cell(c["paper"], CELL_WIDTHS["paper"]),
                           _escape(clip_claim(c["claim"], CELL_WIDTHS["claim"]))]
                          + [cell(c[k], CELL_WIDTHS[k]) for k in ("paper_value", "measured")]
                          + [c["verdict"], cell(c.get("holds") or "-", CELL_WIDTHS["holds"]),
                             link]))
    return ["## Claims", "",
            "One row per measurement: claims read from one measurement share a row, named "
            "by their keys' last parts, their paper values side by side. "
            "Paper values: [P] from the paper's full text, [A] from its abstract. *Ours* is the "
            "mean over the seeds with its 95% interval where the claim ran several; *holds* is "
            "the state across each assumed parameter's plausible range. Cells are clipped; "
            "*details* opens the claim on its section's page, and the figure (or table) "
            "showing it, or (*why*) the reason no section measures it. "
            "[`claims.csv`](claims.csv) has every field; the verdict maps per "
            "paper are under [Conditions](#conditions).", "",
            *(lines if claims else ["(no claims yet)"]), "", *why_lines(unmeasured)]


def why_anchor(key: str) -> str:
    """The anchor of a claim's reason in the index (``why-het-fig9c_dim-tf_ps``)."""
    return "why-" + key.replace(".", "-")


def why_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Each row no section measures, with the register's reason (its rule), anchored for the
    table's *why* link."""
    if not rows:
        return []
    return ["### Rows no section measures", "",
            *[f'- <a id="{why_anchor(c["key"])}"></a>**{c["key"]}**: '
              f'{_escape(str(c.get("rule") or c["verdict"]))}' for c in rows], ""]


def condition_lines(maps: list[Path], reports: Path) -> list[str]:
    """Links to the verdict maps (one per paper)."""
    if not maps:
        return []
    return ["## Conditions", "",
            "The state of every claim at every point of its assumed parameters' sweeps "
            "(committed value outlined): " + ", ".join(
                f"[{m.stem}]({m.relative_to(reports).as_posix()})" for m in maps) + ".", ""]


def section_lines(loaded: list[dict[str, Any]]) -> list[str]:
    """One line per section: its page, what it holds, its notebook and executed copy."""
    lines = ["## Sections", ""]
    for sec in loaded:
        name = sec["name"]
        kinds = [i["kind"] for i in sec["items"]]
        states = pd.Series([c["state"] for c in sec["claims"]], dtype=object).value_counts()
        verdicts = ", ".join(f"{int(states[s])} {s}" for s in STATES if s in states.index)
        lines.append(f"- [{sec['title']}]({name}/{PAGE_FILE}): {len(sec['claims'])} claims"
                     + (f" ({verdicts})" if verdicts else "")
                     + f", {kinds.count('figure')} figures, {kinds.count('table')} tables; "
                     f"notebook [`notebooks/{name}.py`](../notebooks/{name}.py), executed copy "
                     f"[`reports/notebooks/{name}.ipynb`](notebooks/{name}.ipynb)")
    return [*lines, ""]


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def _params_refs(reports: Path, params: Path, repo: Path) -> tuple[str, str]:
    """How the index names the params file: in the command (relative to the repository root)
    and as a link (relative to ``reports``); a file outside the repository is named, not
    linked, so that no absolute path gets in."""
    if _inside(params, repo) and _inside(reports, repo):
        shown = params.resolve().relative_to(repo.resolve()).as_posix()
        link = Path(os.path.relpath(params.resolve(), reports.resolve())).as_posix()
        return shown, f"[`{shown}`]({link})"
    return params.name, f"`{params.name}`"


def _warning(prov: dict[str, Any]) -> list[str]:
    if prov["dirty"] is None:
        return ["> **WARNING: the git state could not be read; this report's sources are "
                "unknown.**", ""]
    if not prov["dirty"]:
        return []
    return ["> **WARNING: built from a working tree with uncommitted source changes.** The "
            f"numbers may not match commit `{prov['commit']}`: {len(prov['dirty_files'])} "
            "modified sources, listed under [Provenance](#provenance).", ""]


def provenance_lines(prov: dict[str, Any]) -> list[str]:
    """The commit, the modified sources (folded), Python and package versions."""
    lines = ["## Provenance", "", f"- git commit: `{prov['commit']}`",
             f"- Python {prov['python']}; " + ", ".join(f"{k} {v}"
                                                      for k, v in prov["packages"].items())]
    if prov["dirty"]:
        lines += ["", f"<details><summary>{len(prov['dirty_files'])} modified sources (the "
                  "working tree differed from the commit)</summary>", "",
                  *[f"- `{p}`" for p in prov["dirty_files"]], "", "</details>"]
    return [*lines, ""]


def build(reports: Path, sections: list[str], params: Path, repo: Path,
          collected: tuple[list[dict[str, Any]], list[dict[str, Any]]] | None = None,
          maps: list[Path] | None = None) -> str:
    """The text of ``reports/README.md`` from the sections' ``section.json`` files.

    Args:
        reports: the reports folder (the index's links are relative to it).
        sections: the sections' names, in report order.
        params: the params file the pipeline ran with (linked, never embedded).
        repo: the repository root (git state, relative names).
        collected: the loaded sections and [`collect`][workbench.claims.record.collect]'s rows,
            if already loaded.
        maps: the verdict maps to link.

    Raises:
        FileNotFoundError: a section's notebook stage has not run.
        CatalogueError: see [`workbench.claims.record.collect`][].
    """
    register = reg.load()
    if collected is None:
        loaded = load_sections(reports, sections)
        collected = loaded, collect(loaded, register)
    loaded, claims = collected
    for c, key in zip(claims, measurement_keys(claims, register)):
        c.setdefault("measurement_id", key)
    prov = provenance(repo, params)
    shown, linked = _params_refs(reports, params, repo)
    digest = (f" (sha256 `{prov['params_sha256'][:12]}`)" if prov["params_sha256"]
              else " (not found)")
    return "\n".join([
        "# Reproduction report", "", *_warning(prov),
        f"Built from commit `{prov['commit']}` by `{REPORT_COMMAND} {shown}` (the `report` "
        f"stage of `dvc repro`) with the configuration {linked}{digest}; do not edit. Each "
        "section has its own page with its figures, tables and claims in full.", "",
        *verdict_lines(claims, register), *claim_lines(claims), *cost_lines(reports),
        *condition_lines(maps or [], reports), *section_lines(loaded),
        *provenance_lines(prov)])


def cost_lines(reports: Path) -> list[str]:
    """A link to the claim -> command -> cost page, when it was written."""
    if not (reports / COSTS_PAGE).is_file():
        return []
    return [f"**Claim -> command -> cost:** [{COSTS_PAGE}]({COSTS_PAGE}), for each claim the "
            "command that regenerates exactly it (`make claim KEY=<key>`) and its recorded "
            "minutes, cores, memory and disk on this machine.", ""]


def metrics(claims: list[dict[str, Any]], register: reg.Register) -> dict[str, Any]:
    """The DVC metrics of the claims: the register's version, the count of measurements per
    state ([`workbench.claims.counting.counted`][]), and per claim its mean, 95% interval,
    seeds and state (numbers where DVC can diff them)."""
    states = pd.Series([c["state"] for c in counted(claims)], dtype=object).value_counts()
    return {"register_version": register.version,
            "counts": {s.replace(" ", "_"): int(states.get(s, 0)) for s in STATES},
            "claims": {c["key"]: {"mean": c.get("mean"), "ci_low": c.get("ci_low"),
                                  "ci_high": c.get("ci_high"), "seeds": c.get("seeds", 0),
                                  "reproduced": int(c["state"] == STATES[0]),
                                  "state": c["state"]} for c in claims}}


def curves(claims: list[dict[str, Any]], register: reg.Register) -> dict[str, pd.DataFrame]:
    """Every numeric sweep of an assumed parameter as ``value, measured, state`` (the point
    estimate in the rule's unit), named ``<key>--<parameter>`` ([`curve_name`][])."""
    out = {}
    for c in claims:
        entry = register[c["key"]]
        for a in entry.assumed:
            points = (c.get("conditions") or {}).get(a.name)
            if not a.numeric or not points:
                continue
            rows = [{"value": float(p["value"]), "measured": p[JUDGED]["mean"],
                     "state": p[JUDGED]["state"]}
                    for p in sorted(points, key=lambda q: float(q["value"]))]
            out[f"{c['key']}--{curve_name(a.name)}"] = pd.DataFrame(rows)
    return out


def write(reports: Path, sections: list[str], params: Path, repo: Path,
          cfg: WorkbenchConfig | None = None) -> list[Path]:
    """Write the index, ``claims.csv``, the DVC metrics and curves, the verdict maps and
    every missing or outdated section page.

    Each claim row is its notebook's measure ([`workbench.claims.record.collect`][]); a section
    that read a stage output whose ``dvc.lock`` hash has changed since is refused (its notebook
    must run again). ``cfg`` places the results and data folders the costs page reads.

    Returns:
        The section pages (re)written (empty when every notebook already wrote its own).

    Raises:
        FileNotFoundError: a section's notebook stage has not run.
        CatalogueError: a section older than the results it read, or see
            [`workbench.claims.record.collect`][].
    """
    from workbench.report import verdict_map
    from workbench.utils.io import atomic_dir, write_json

    register = reg.load()
    loaded = load_sections(reports, sections)
    lock = load_lock(repo)
    stale = [f"reports/{sec['name']} read {', '.join(changed)}: rerun its notebook (dvc repro "
             f"notebook@{sec['name']})" for sec in loaded
             if (changed := outdated(sec.get("lineage"), lock))]
    if stale:
        raise CatalogueError("sections older than the results they show: " + "; ".join(stale))
    claims = collect(loaded, register)
    for c, key in zip(claims, measurement_keys(claims, register)):
        c["measurement_id"] = key
    pages = [reports / sec["name"] / PAGE_FILE for sec in loaded
             if write_page(reports / sec["name"], sec)]
    write_text(reports / "claims.csv",
               pd.DataFrame(claims, columns=CLAIM_COLUMNS).to_csv(index=False))
    write_json(reports / METRICS_FILE, metrics(claims, register))
    with atomic_dir(reports / CURVES_DIR) as tmp:
        for name, frame in curves(claims, register).items():
            write_text(tmp / f"{name}.csv", frame.to_csv(index=False, float_format="%.6g"))
    with atomic_dir(reports / MAPS_DIR) as tmp:
        maps = [reports / MAPS_DIR / m.name for m in verdict_map.draw_all(claims, register, tmp)]
    from workbench.report import costs

    costs.write(register, repo, cfg.paths.resolve("results") if cfg is not None
                else repo / "results", reports / COSTS_PAGE,
                cfg.paths.resolve("data") if cfg is not None else repo / "data")
    write_text(reports / "README.md", build(reports, sections, params, repo,
                                            (loaded, claims), maps))
    return pages


def main(argv: list[str] | None = None) -> None:
    """``python -m workbench.report.index``: write ``reports/README.md``, ``reports/claims.csv`` and
    any missing section page."""
    from workbench.config import stage_arguments
    from workbench.utils.paths import REPO_ROOT

    cfg, args = stage_arguments(main.__doc__ or "", argv)
    params = Path(args.params or (REPO_ROOT / "params.yaml"))
    write(cfg.paths.resolve("reports"), list(cfg.pipeline.notebooks), params, REPO_ROOT, cfg)


if __name__ == "__main__":
    main()
