"""Every notebook executes on the ci profile and produces its report section."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from workbench.config import load
from workbench.report import verdict
from workbench.report.sections import CLAIM_COLUMNS, SECTION_FILE
from workbench.stages import run
from workbench.utils.paths import NOTEBOOK_DIR

NOTEBOOKS = sorted(p.stem for p in NOTEBOOK_DIR.glob("*.py"))


def test_every_notebook_is_in_the_pipeline() -> None:
    assert NOTEBOOKS == sorted(load().pipeline.notebooks)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_on_ci_profile(name: str, ci_pipeline: Path) -> None:
    run(["notebook", name, "--params", str(ci_pipeline)])
    cfg = load(params=ci_pipeline)
    out = cfg.paths.resolve("reports") / name
    section = json.loads((out / SECTION_FILE).read_text())
    figures = [i for i in section["items"] if i["kind"] == "figure"]
    assert figures, "a notebook must produce at least one figure"
    for item in section["items"]:
        if item["kind"] in ("figure", "table"):
            assert (out / item["file"]).stat().st_size > 0
            assert item["caption"]
    assert (cfg.paths.resolve("reports") / "notebooks" / f"{name}.ipynb").exists()


def test_datasets_notebook_reports_the_het_skew_claim(ci_pipeline: Path) -> None:
    run(["notebook", "datasets", "--params", str(ci_pipeline)])
    cfg = load(params=ci_pipeline)
    section = json.loads((cfg.paths.resolve("reports") / "datasets" / SECTION_FILE).read_text())
    claims = {c["setting"].split(":")[0]: c for c in section["claims"]}
    assert "synthetic" in claims
    stats = json.loads((cfg.paths.resolve("results") / "dataset_stats" / "synthetic"
                        / "stats.json").read_text())
    assert claims["synthetic"]["measured"] == f"{stats['claim_share']:.1%}"
    skew = cfg.experiments.dataset_stats
    expected = verdict.percent(stats["claim_share"], skew.skew_claim_share,
                               baseline=skew.skew_claim_fraction)
    assert (claims["synthetic"]["state"], claims["synthetic"]["rule"]) == (expected.state,
                                                                           expected.rule)
    assert claims["synthetic"]["key"] == "het.fig3_skew"


def test_report_gathers_sections(ci_pipeline: Path) -> None:
    for name in NOTEBOOKS:
        run(["notebook", name, "--params", str(ci_pipeline)])
    run(["report", "--params", str(ci_pipeline)])
    reports = load(params=ci_pipeline).paths.resolve("reports")
    text = (reports / "README.md").read_text()
    assert "## Verdicts" in text and "## Claims" in text and "| HET" in text
    assert "## Provenance" in text and "![HET Fig. 3" in text
    claims = pd.read_csv(reports / "claims.csv")
    assert list(claims.columns) == CLAIM_COLUMNS
    assert set(claims["state"]) <= set(verdict.STATES)
    assert (claims["state"] != "not built").all()  # every paper's mechanism is built
    hotline = claims[claims["paper"] == "Hotline"]
    assert len(hotline) >= 4
    assert len(claims[claims["paper"] == "FlexShard"]) == 2  # traffic and latency
