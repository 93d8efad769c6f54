"""Report sections, deterministic figures and the claims table."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from workbench.report import verdict
from workbench.report.catalogue import CATALOGUE
from workbench.report.plotting import save_figure, set_theme
from workbench.report.sections import (
    CLAIM_COLUMNS,
    CatalogueError,
    Claim,
    Section,
    _generated,
    build,
    collect,
    dirty_sources,
)


def _figure() -> plt.Figure:
    set_theme()
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], [3, 1, 2])
    return fig


def test_figures_are_byte_deterministic(tmp_path: Path) -> None:
    a = save_figure(_figure(), tmp_path / "a.png").read_bytes()
    b = save_figure(_figure(), tmp_path / "b.png").read_bytes()
    assert a == b
    pdf1 = save_figure(_figure(), tmp_path / "a.pdf").read_bytes()
    pdf2 = save_figure(_figure(), tmp_path / "b.pdf").read_bytes()
    assert pdf1 == pdf2


def test_section_roundtrip_and_report(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    sec = Section("demo", "Demo section", reports / "demo", intro="Our formalisation.")
    sec.figure(_figure(), "curve", "A curve", setting="toy")
    sec.table(pd.DataFrame({"x": [1, 2], "y": [0.5, 0.25]}), "tab", "A table")
    sec.claim(Claim("HET", "less traffic", "8.2x [P]", "2.81x", "toy",
                    verdict.factor(2.81, 8.2), "small"))
    sec.claim(Claim("ESD", "n/a claim", "1.74x [A]", "-", "toy",
                    verdict=verdict.not_comparable("no TF here")))
    sec.save()
    params = tmp_path / "params.yaml"
    params.write_text("seed: 0\n")
    text = build(reports, ["demo"], params, tmp_path)
    assert "| HET" in text and "| direction only " in text and "| not comparable " in text
    assert "2.81x is 0.34x of the paper's 8.2x" in text
    assert "![A curve](demo/curve.png)" in text and "*Setting:* toy" in text
    assert "Our formalisation." in text and "seed: 0" in text
    saved = json.loads((reports / "demo" / "section.json").read_text())
    assert saved["claims"][0]["paper_value"] == "8.2x [P]"
    assert saved["claims"][0]["state"] == "direction only" and "verdict" not in saved["claims"][0]


def test_missing_section_names_the_stage(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="notebook stage for 'absent'"):
        build(tmp_path, ["absent"], tmp_path / "p.yaml", tmp_path)


def test_pipes_inside_cells_are_escaped(tmp_path: Path) -> None:
    sec = Section("demo", "Demo", tmp_path / "demo")
    sec.claim(Claim("HET", "gap", "close [P]", "max |a - b| = 0", "toy",
                    verdict.close(0.1, 0.1, tolerance=2)))
    sec.table(pd.DataFrame({"x": ["p|q"]}), "t", "T")
    sec.save()
    (tmp_path / "p.yaml").write_text("seed: 0\n")
    text = build(tmp_path, ["demo"], tmp_path / "p.yaml", tmp_path)
    assert "max \\|a - b\\| = 0" in text and "p\\|q" in text


def _demo(reports: Path, claims: list[Claim]) -> None:
    sec = Section("demo", "Demo", reports / "demo")
    for claim in claims:
        sec.claim(claim)
    sec.save()


def test_claim_needs_a_verdict_or_a_valid_state() -> None:
    with pytest.raises(ValueError, match="not one of"):
        Claim("HET", "c", "1x [P]", "1x", "toy")
    with pytest.raises(ValueError, match="not one of"):
        Claim("HET", "c", "1x [P]", "1x", "toy", state="holds")
    row = Claim("HET", "c", "2x [P]", "2x", "toy", state="reproduced", rule="by hand")
    assert (row.state, row.rule) == ("reproduced", "by hand")


def test_readme_opens_with_counts_then_rules_then_claims(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    _demo(reports, [Claim("HET", "a", "8.2x [P]", "2.81x", "toy", verdict.factor(2.81, 8.2)),
                    Claim("HET", "b", "8.2x [P]", "6x", "toy", verdict.factor(6.0, 8.2)),
                    Claim("HET", "c", "8.2x [P]", "0.9x", "toy", verdict.factor(0.9, 8.2))])
    (tmp_path / "p.yaml").write_text("seed: 0\n")
    text = build(reports, ["demo"], tmp_path / "p.yaml", tmp_path)
    counts, rules, claims = (text.index("## Verdicts"), text.index("Rules ("),
                             text.index("## Claims"))
    assert counts < rules < claims < text.index("## Demo")
    rows = [[cell.strip() for cell in line.strip("|").split("|")]
            for line in text[counts:rules].splitlines()[4:] if line.startswith("|")]
    not_built = sum(not c.built for c in CATALOGUE)
    assert rows == [["reproduced", "1"], ["direction only", "1"], ["tie", "0"],
                    ["contradicted", "1"], ["not comparable", "0"], ["not built", str(not_built)],
                    ["total", str(3 + not_built)]]
    for state in verdict.STATES:
        assert f"- **{state}**:" in text[rules:claims]
    header = text[claims:].split("\n")[4]
    assert [h.strip() for h in header.strip("|").split("|")] == CLAIM_COLUMNS
    assert "[`reports/notebooks/demo.ipynb`](notebooks/demo.ipynb)" in text


def test_not_built_papers_get_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from workbench.report import sections
    from workbench.report.catalogue import CatalogueClaim

    unbuilt = CatalogueClaim("future.claim", "Future", "a claim of a paper not built yet",
                             "9x [A]", False, missing="the future mechanism")
    monkeypatch.setattr(sections, "CATALOGUE", (*CATALOGUE, unbuilt))
    reports = tmp_path / "reports"
    _demo(reports, [])
    _, claims = collect(reports, ["demo"])
    rows = {c["key"]: c for c in claims}
    assert rows["future.claim"]["state"] == "not built"
    assert rows["future.claim"]["rule"] == "not built: the future mechanism"
    assert rows["future.claim"]["paper_value"] == "9x [A]"
    assert {c["paper"] for c in claims} == {"Future"}  # built claims come from notebooks only
    assert "hotline.speedup" not in rows and "flexshard.a2a_traffic" not in rows


def test_missing_catalogue_row_is_an_error(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    sec = Section("esd", "ESD", reports / "esd")
    sec.claim(Claim("ESD", "cost", "36.76% [A]", "30%", "toy", verdict.percent(0.3, 0.3676),
                    key="esd.cost"))
    sec.save()
    with pytest.raises(CatalogueError, match=r"esd\.speedup .*notebooks/esd\.py"):
        collect(reports, ["esd"])
    sec.claim(Claim("ESD", "speedup", "1.74x [A]", "-", "toy",
                    verdict.not_comparable("not measured: target not reached"),
                    key="esd.speedup"))
    sec.save()
    _, claims = collect(reports, ["esd"])
    assert [c["key"] for c in claims][:2] == ["esd.cost", "esd.speedup"]


def test_unknown_claim_key_is_an_error(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    _demo(reports, [Claim("HET", "a", "8.2x [P]", "2.81x", "toy", verdict.factor(2.81, 8.2),
                          key="het.typo")])
    with pytest.raises(CatalogueError, match="het.typo"):
        collect(reports, ["demo"])


def test_catalogue_is_consistent() -> None:
    keys = [c.key for c in CATALOGUE]
    assert len(keys) == len(set(keys))
    for c in CATALOGUE:
        assert c.key.split(".")[0] == c.paper.lower()
        assert ("[P" in c.paper_value) or ("[A]" in c.paper_value)
        assert (c.section is not None) == c.built
        assert bool(c.missing) != c.built


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo,
                   check=True, capture_output=True)


def test_dirty_sources_ignore_generated_outputs(tmp_path: Path) -> None:
    assert _generated("results/x.csv") and _generated("dvc.lock")
    assert not _generated("dvc.yaml") and not _generated("resultsx.py")
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    for rel in ("src.py", "results/a.csv", "reports/README.md", "dvc.lock", "params.yaml"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text("0\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "init")
    for rel in ("results/a.csv", "reports/README.md", "dvc.lock", "params.yaml"):
        (repo / rel).write_text("1\n")
    (repo / ".gitignore").write_text("ignored.py\n")
    _git(repo, "add", ".gitignore")
    _git(repo, "commit", "-q", "-m", "ignore")
    (repo / "ignored.py").write_text("1\n")
    (repo / "results" / "new.csv").write_text("1\n")
    assert dirty_sources(repo) == []
    (repo / "untracked.py").write_text("1\n")
    assert dirty_sources(repo) == ["untracked.py"]  # a new module changes what ran
    (repo / "untracked.py").unlink()
    (repo / "src.py").write_text("1\n")
    assert dirty_sources(repo) == ["src.py"]
    _demo(repo / "reports", [])
    text = build(repo / "reports", ["demo"], repo / "params.yaml", repo)
    assert text.startswith("# Reproduction report\n\n> **WARNING: built from a working tree")
    assert "> - `src.py`" in text
    _git(repo, "commit", "-q", "-am", "src")
    text = build(repo / "reports", ["demo"], repo / "params.yaml", repo)
    assert "WARNING" not in text
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                          text=True, check=True).stdout.strip()
    assert f"Built from commit `{head}`" in text


def test_unknown_git_state_is_flagged(tmp_path: Path) -> None:
    assert dirty_sources(tmp_path / "nowhere") is None


def test_sections_without_states_ask_for_a_rerun(tmp_path: Path) -> None:
    _demo(tmp_path, [])
    path = tmp_path / "demo" / "section.json"
    saved = json.loads(path.read_text())
    saved["claims"] = [{"paper": "HET", "claim": "c", "paper_value": "1", "measured": "1",
                        "setting": "s", "holds": True, "note": ""}]
    path.write_text(json.dumps(saved))
    with pytest.raises(ValueError, match="demo .*rerun their notebook stage"):
        collect(tmp_path, ["demo"])
