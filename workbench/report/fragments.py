"""Numbers in the README and the docs, generated from the claims table, never copied.

A page marks each generated part with an HTML comment pair (invisible where it renders):

    <!-- claims:counts -->            every claim's state, counted
    <!-- claims:papers -->            per paper: its page, venue, mechanism and states
    <!-- claims:summary HET -->       one paper's states, one line
    <!-- claims:table HET -->         one paper's claims: paper value, ours, verdict, holds
    <!-- claims:costs -->             the claim -> command -> cost table of reports/costs.md
    <!-- claims:figures HET -->       the report's figures showing a paper's claims (images)
    ...generated text...
    <!-- /claims -->

``python -m workbench.report.fragments`` rewrites every marked part of [`PAGES`][] from
``reports/claims.csv`` (and ``reports/costs.md``, which the report stage writes); ``--check``
exits 1 naming each part that disagrees with them (the tests run it, so a claim count or value
quoted by hand cannot drift from the report). Text outside the markers is the author's; it
quotes no count or claim value.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pandas as pd

from workbench.claims.counting import counted, shared_with, variants
from workbench.claims.verdict import STATES
from workbench.utils.io import write_text
from workbench.utils.paths import REPO_ROOT

#: The pages with generated parts, relative to the repository root.
PAGES = ("README.md", "docs/index.md", "docs/claims.md", "docs/notebooks.md",
         "docs/papers/het.md", "docs/papers/esd.md", "docs/papers/recd.md",
         "docs/papers/hotline.md", "docs/papers/flexshard.md")
#: Per paper: its page (relative to docs/), venue and mechanism in a few words.
PAPERS = {
    "HET": ("papers/het.md", "VLDB 2022", "per-worker embedding caches with bounded staleness"),
    "ESD": ("papers/esd.md", "CRAD 2025", "expected-cost sample dispatch, HybridDis"),
    "RecD": ("papers/recd.md", "MLSys 2023",
             "session-clustered data, InverseKeyedJaggedTensors"),
    "Hotline": ("papers/hotline.md", "ISCA 2024", "popular / non-popular micro-batch pipeline"),
    "FlexShard": ("papers/flexshard.md", "arXiv 2023",
                  "per-row tiered sharding, hot-row replication"),
}
MARK = re.compile(r"(?P<open><!-- claims:(?P<name>[A-Za-z]+)(?: (?P<arg>[A-Za-z]+))? -->\n)"
                  r"(?P<body>.*?)(?P<close><!-- /claims -->)", re.S)


def _plural(n: int, state: str) -> str:
    return f"{n} ties" if state == "tie" and n != 1 else f"{n} {state}"


def measured(claims: pd.DataFrame) -> pd.DataFrame:
    """One row per measurement and state: claims read from one measurement count once
    ([`workbench.claims.counting`][]; a table without the ``measurement_id`` column counts
    every row)."""
    return pd.DataFrame(counted(_records(claims)), columns=claims.columns)


def _records(claims: pd.DataFrame) -> list[dict]:
    """The rows as dicts, each with its ``measurement_id`` (its own key when the table has
    none)."""
    rows = claims.to_dict("records")
    return [{**r, "measurement_id": r.get("measurement_id")
             if isinstance(r.get("measurement_id"), str) else r["key"]} for r in rows]


def states(claims: pd.DataFrame, zeros: bool = True) -> str:
    """``"6 reproduced, 8 direction only, 1 tie, 0 contradicted, 3 not comparable"``: the
    measurements in every state a claim can be in ([`measured`][]; ``not built`` only when one
    is; none at 0 without ``zeros``)."""
    counts = measured(claims)["state"].value_counts()
    return ", ".join(_plural(int(counts.get(s, 0)), s) for s in STATES
                     if counts.get(s, 0) or (zeros and s != "not built"))


def counts(claims: pd.DataFrame) -> str:
    """The whole register in one sentence."""
    formal = int((claims["basis"] == "our formalisation [A]").sum())
    return (f"All {len(claims)} claims of the register, {_measurements(claims)}: "
            f"{states(claims)} ({formal} of the claims of papers known from their abstract only, "
            "whose mechanism is our formalisation).\n")


def _measurements(claims: pd.DataFrame) -> str:
    n = len(measured(claims))
    return (f"{n} measurements (claims read from one measurement count once)"
            if n != len(claims) else f"{n} measurements")


def papers(claims: pd.DataFrame, root: str) -> str:
    """The five papers' table, each with its claims' states (links relative to ``root``)."""
    lines = ["| paper | mechanism | claims: states of their measurements |",
             "| --- | --- | --- |"]
    for paper, (page, venue, mechanism) in PAPERS.items():
        mine = claims[claims["paper"] == paper]
        n = len(measured(mine))
        of = f" ({n} measurements)" if n != len(mine) else ""
        lines.append(f"| [{paper}]({root}{page}) ({venue}) | {mechanism} | {len(mine)}{of}: "
                     f"{states(mine, zeros=False)} |")
    return "\n".join(lines) + "\n"


def summary(claims: pd.DataFrame, paper: str) -> str:
    """One paper's states in one line (its table says what each row measured)."""
    mine = claims[claims["paper"] == paper]
    return (f"**How close:** {len(mine)} claims of the register, {_measurements(mine)}: "
            f"{states(mine, zeros=False)} ([the claims below](#claims-and-how-close), from "
            "`reports/claims.csv`).\n")


def table(claims: pd.DataFrame, paper: str) -> str:
    """One paper's claims as a table, one row per measurement (claims read from one
    measurement share a row, named by their keys' last parts): paper value, ours, verdict,
    where it holds."""
    lines = ["| claim | paper | ours | verdict | holds |", "| --- | --- | --- | --- | --- |"]
    rows = _records(claims[claims["paper"] == paper])
    groups = shared_with(rows)
    for r in counted(rows):
        group = groups[r["key"]]
        claim, value = r["claim"], r["paper_value"]
        if len(group) > 1:
            claim = f"{variants([g['key'] for g in group])}: {claim}"
            value = " / ".join(str(g["paper_value"]) for g in group)
        lines.append(f"| {_cell(claim)} | {_cell(value)} | {_cell(r['measured'])} | "
                     f"{_cell(r['verdict'])} | {_cell(r['holds'])} |")
    return "\n".join(lines) + "\n"


def _cell(value: object) -> str:
    text = "" if value is None or (isinstance(value, float) and value != value) else str(value)
    return " ".join(text.split()).replace("|", "\\|")


def costs(root: Path = REPO_ROOT) -> str:
    """The cost table of ``reports/costs.md`` (the machine line and the table, as the report
    wrote them), or a line saying the report has not written it."""
    path = root / "reports" / "costs.md"
    if not path.is_file():
        return "The report stage has not written `reports/costs.md` yet.\n"
    lines = path.read_text().splitlines()
    blocks = [[ln for ln in lines if ln.startswith("Measured on:")],
              [ln for ln in lines if ln.startswith("|")],
              [ln for ln in lines if ln.startswith("Measured by")]]
    return "\n\n".join("\n".join(b) for b in blocks if b) + "\n"


def figures(paper: str, root: Path = REPO_ROOT) -> str:
    """The report's figures that show one of ``paper``'s claims, as images (the site holds
    them under ``figures/<section>/``: ``docs/gen_figures.py``), each with its caption and the
    claims it shows; in report order."""
    import json

    from workbench.claims.record import item_anchor
    from workbench.report.notebook_registry import names

    lines = []
    for name in names():
        path = root / "reports" / name / "section.json"
        if not path.is_file():
            continue
        section = json.loads(path.read_text())
        for item in section["items"]:
            shown = [section["claims"][n - 1] for n in item.get("claims", [])
                     if n <= len(section["claims"])]
            if item["kind"] != "figure" or not any(c["paper"] == paper for c in shown):
                continue
            keys = ", ".join(f"`{c['key']}`" for c in shown if c["paper"] == paper)
            alt = _cell(item["caption"]).split(" - ")[0].split(":")[0][:80]
            lines += [f"![{alt}](../figures/{name}/{item['file']})", "",
                      f"*{_cell(item['caption'])}* ([in the report](../report/{name}/index.md"
                      f"#{item_anchor(item)}), `reports/{name}/`; shows {keys})", ""]
    return "\n".join(lines) if lines else "No figure of the report shows these claims yet.\n"


def render(name: str, arg: str | None, claims: pd.DataFrame, page: str) -> str:
    """The text of one marked part of ``page`` (a path relative to the repository root).

    Raises:
        ValueError: an unknown part, or a paper not in [`PAPERS`][].
    """
    if arg is not None and arg not in PAPERS:
        raise ValueError(f"{page}: claims:{name} {arg}: not a paper ({', '.join(PAPERS)})")
    if name == "counts":
        return counts(claims)
    if name == "papers":
        return papers(claims, "docs/" if not page.startswith("docs/") else "")
    if name == "summary" and arg:
        return summary(claims, arg)
    if name == "table" and arg:
        return table(claims, arg)
    if name == "costs":
        return costs()
    if name == "figures" and arg:
        return figures(arg)
    raise ValueError(f"{page}: unknown generated part claims:{name} (counts, papers, "
                     "summary <paper>, table <paper>, costs, figures <paper>)")


def update(text: str, claims: pd.DataFrame, page: str) -> str:
    """``text`` with every marked part regenerated."""
    return MARK.sub(lambda m: m["open"] + render(m["name"], m["arg"], claims, page)
                    + m["close"], text)


def stale(root: Path = REPO_ROOT, claims: pd.DataFrame | None = None) -> list[str]:
    """Every marked part of [`PAGES`][] that differs from the claims table, as
    ``"<page>: claims:<name>"``; a page without one is named too."""
    claims = pd.read_csv(root / "reports" / "claims.csv") if claims is None else claims
    out = []
    for page in PAGES:
        text = (root / page).read_text()
        marks = list(MARK.finditer(text))
        if not marks:
            out.append(f"{page}: no generated part")
        for m in marks:
            if m["body"] != render(m["name"], m["arg"], claims, page):
                out.append(f"{page}: claims:{m['name']}" + (f" {m['arg']}" if m["arg"] else ""))
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m workbench.report.fragments [--check]``; see the module."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if a generated part differs from reports/claims.csv")
    args = parser.parse_args(argv)
    if args.check:
        bad = stale()
        for line in bad:
            print(f"out of date: {line} (python -m workbench.report.fragments rewrites it)",
                  file=sys.stderr)
        return 1 if bad else 0
    claims = pd.read_csv(REPO_ROOT / "reports" / "claims.csv")
    for page in PAGES:
        path = REPO_ROOT / page
        text = path.read_text()
        new = update(text, claims, page)
        if new != text:
            write_text(path, new)
            print(f"rewrote the generated parts of {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
