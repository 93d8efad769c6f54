"""Lineage: the pipeline's graph against DVC's own, DVC's hashes, the read log, and a figure's
provenance on its section page."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from workbench.report import lineage
from workbench.report.page import PAGE_FILE, page
from workbench.report.provenance import config_digest
from workbench.report.sections import SECTION_FILE, Section, load_sections
from workbench.utils.errors import UserError
from workbench.utils.paths import REPO_ROOT

LOCK = lineage.load_lock(REPO_ROOT)


def test_the_graph_is_dvcs_own_and_the_docs_show_it() -> None:
    from dvc.repo import Repo

    with Repo(str(REPO_ROOT)) as repo:
        theirs = {(a.addressing, b.addressing) for a, b in repo.index.graph.edges()}
    ours = {(stage, up) for stage, ups in lineage.stage_graph(LOCK).items() for up in ups}
    assert ours == theirs
    chart = lineage.mermaid(lineage.stage_graph(LOCK))
    assert f"```mermaid\n{chart}\n```" in (REPO_ROOT / "docs" / "pipeline.md").read_text()
    assert '["preprocess x7"]' in chart and '["notebook@esd"]' in chart


def test_dvc_md5_is_the_hash_dvc_lock_records() -> None:
    checked = 0
    for stage in ("hotline", "combined", "dataset_stats@criteo_sample"):
        for out in LOCK["stages"][stage]["outs"]:
            assert lineage.dvc_md5(REPO_ROOT / out["path"]) == out["md5"], out["path"]
            checked += 1
    assert checked == 3
    found = lineage.locate("results/hotline/synthetic/metrics.csv", LOCK)
    assert found is not None and (found.stage, found.path) == ("hotline",
                                                               "results/hotline/synthetic")
    assert lineage.locate("results/hotline", LOCK) is None  # a folder holding outputs: none
    with pytest.raises(FileNotFoundError, match="no such file"):
        lineage.dvc_md5(REPO_ROOT / "results" / "no such output")


def test_the_read_log_sees_reads_under_its_roots_only(tmp_path: Path) -> None:
    inside, outside = tmp_path / "results", tmp_path / "elsewhere"
    inside.mkdir()
    outside.mkdir()
    for folder in (inside, outside):
        (folder / "a.csv").write_text("x\n1\n")
    log = lineage.ReadLog((inside,)).start()
    try:
        assert lineage.ReadLog.shared([inside]) is log
        assert lineage.ReadLog.fresh([inside]) is not log and log not in lineage._LOGS
        log.start()
        pd.read_csv(inside / "a.csv")
        pd.read_csv(outside / "a.csv")
        (inside / "written.txt").write_text("w")  # a write is not a read
        assert log.files == {(inside / "a.csv").resolve()}
        assert log.under(inside) == [(inside / "a.csv").resolve()] and not log.under(outside)
    finally:
        log.stop()
    (inside / "a.csv").read_text()
    assert len(log.files) == 1  # a stopped log records nothing more


def _plot() -> plt.Figure:
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    return fig


def test_a_figure_names_what_it_read_with_its_dvc_lock_hash(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from workbench.config import load

    cfg = load()
    # as notebook_config does before a notebook reads anything (the Section joins this log)
    log = lineage.ReadLog.fresh((cfg.paths.resolve("results"), cfg.paths.resolve("data")))
    section = Section("hotline", "Demo", tmp_path / "hotline", config=cfg)
    assert section._log is log
    metrics = REPO_ROOT / "results" / "hotline" / "synthetic" / "metrics.csv"
    pd.read_csv(metrics)
    section.figure(_plot(), "curve", "A curve", "toy", reads=[metrics])
    section.table(pd.DataFrame({"x": [1]}), "tab", "A table", reads=())
    with pytest.raises(UserError, match="reads= names results/hotline/synthetic/steps.csv, "
                                        "which this notebook has not opened"):
        section.figure(_plot(), "other", "Other", "toy",
                       reads=[metrics.with_name("steps.csv")])
    with pytest.raises(UserError, match="takes a list of paths"):
        section.table(pd.DataFrame({"x": [1]}), "t", "T", reads=str(metrics))  # type: ignore
    section.save()
    saved = json.loads((tmp_path / "hotline" / SECTION_FILE).read_text())
    assert saved["items"][0]["reads"] == ["results/hotline/synthetic/metrics.csv"]
    found = saved["lineage"]
    md5 = LOCK["stages"]["hotline"]["outs"][0]["md5"]
    assert found["outputs"] == [{"path": "results/hotline/synthetic", "stage": "hotline",
                                 "md5": md5, "current": True}]
    assert found["config_sha256"] == config_digest(cfg, "hotline")[0]
    assert found["config_sections"] == ["experiments.hotline"]
    text = (tmp_path / "hotline" / PAGE_FILE).read_text()
    assert text == page(saved)
    assert (f"*Drawn from:* `metrics.csv` of `results/hotline/synthetic` (stage `hotline`, "
            f"dvc.lock `{md5[:10]}`)") in text
    assert "*Drawn from:* no results file" in text
    assert f"| `results/hotline/synthetic` | `hotline` | `{md5[:10]}` | as recorded |" in text
    assert f"Drawn at commit `{found['commit']}`" in text
    # outputs that no longer match dvc.lock (a results folder the pipeline did not record) say so
    stale = {"stages": {"hotline": {"outs": [{"path": "results/hotline/synthetic",
                                              "md5": "0" * 32 + ".dir"}]}}}
    monkeypatch.setattr(lineage, "load_lock", lambda root: stale)
    assert section.lineage()["outputs"][0]["current"] is False
    assert "differs from dvc.lock" in page({**saved, "lineage": section.lineage()})


def test_the_config_digest_follows_the_notebooks_own_sections() -> None:
    from workbench.config import load

    base = load()
    same = load(["experiments.esd.batches=3"])  # a section the hotline notebook does not read
    moved = load(["experiments.hotline.profile_rate=0.5"])
    assert config_digest(base, "hotline") == config_digest(same, "hotline")
    assert config_digest(base, "hotline")[0] != config_digest(moved, "hotline")[0]
    assert config_digest(base, "not a notebook")[1] == []  # the whole configuration


def test_a_claim_links_the_figure_and_table_that_show_it(tmp_path: Path) -> None:
    from workbench.claims import register as reg
    from workbench.claims.record import collect, register_claim
    from workbench.config import load
    from workbench.report.index import claim_lines

    cfg = load()
    lineage.ReadLog.fresh((cfg.paths.resolve("results"), cfg.paths.resolve("data")))
    section = Section("hotline", "Demo", tmp_path / "hotline", config=cfg)
    res = REPO_ROOT / "results" / "hotline" / "synthetic"
    pd.read_csv(res / "metrics.csv")
    pd.read_csv(res / "conditions.csv")  # hotline.speedup is measured from it
    section.figure(_plot(), "curve", "AUC", "toy", reads=[res / "metrics.csv"])
    section.figure(_plot(), "sensitivity_host_rate", "Modelled speedups", "toy",
                   reads=[res / "conditions.csv"])  # named by the register's shown_in
    section.table(pd.DataFrame({"x": [1]}), "host_rate_conditions", "Conditions",
                  reads=[res / "conditions.csv"])
    section.table(pd.DataFrame({"x": [1]}), "also_conditions", "Not named",
                  reads=[res / "conditions.csv"])  # reads the claim's file, not named: no link
    for key in ("hotline.speedup", "hotline.v1_hybrid"):  # every claim of the section
        section.claim(register_claim(reg.load()[key]))
    section.save()
    saved = json.loads((tmp_path / "hotline" / SECTION_FILE).read_text())
    assert [i.get("claims") for i in saved["items"]] == [[], [1, 2], [1, 2], []]
    text = page(saved)
    assert ("- **Shown in:** [figure *Modelled speedups*](#fig-sensitivity_host_rate), "
            "[table *Conditions*](#tab-host_rate_conditions)") in text
    assert ('<a id="fig-sensitivity_host_rate"></a>\n\n*Shows [claim 1](#claim-1), '
            '[claim 2](#claim-2).*' in text)
    assert '<a id="fig-curve"></a>\n\n**AUC**' in text  # anchored, shows no claim
    claims = collect(load_sections(tmp_path, ["hotline"]))
    row = next(c for c in claims if c["key"] == "hotline.speedup")
    assert row["shown"] == "fig-sensitivity_host_rate"
    assert ("[hotline #1](hotline/README.md#claim-1) · "
            "[fig](hotline/README.md#fig-sensitivity_host_rate)") in "\n".join(
                claim_lines(claims))
