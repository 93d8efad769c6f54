"""Every notebook executes on the ci profile and produces its report section."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from helpers.claim_directions import direction_losses
from workbench.claims import register as reg
from workbench.claims import verdict
from workbench.claims.record import CLAIM_COLUMNS
from workbench.config import load
from workbench.report.sections import SECTION_FILE
from workbench.utils.paths import NOTEBOOK_DIR, REPO_ROOT

NOTEBOOKS = sorted(p.stem for p in NOTEBOOK_DIR.glob("*.py"))


def _outputs(executed: Path) -> list[dict]:
    return [o for c in json.loads(executed.read_text())["cells"] for o in c.get("outputs", [])]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_on_ci_profile(name: str, ci_pipeline: Path) -> None:
    """The notebook as the ci pipeline's ``notebook@<name>`` stage executed it (papermill,
    through DVC; ``tests/conftest.py``)."""
    cfg = load(params=ci_pipeline)
    out = cfg.paths.resolve("reports") / name
    section = json.loads((out / SECTION_FILE).read_text())
    figures = [i for i in section["items"] if i["kind"] == "figure"]
    assert figures, "a notebook must produce at least one figure"
    for item in section["items"]:
        if item["kind"] in ("figure", "table"):
            assert (out / item["file"]).stat().st_size > 0
            assert item["caption"]
    executed = cfg.paths.resolve("reports") / "notebooks" / f"{name}.ipynb"
    outputs = _outputs(executed)
    # every figure of the report inline, the very bytes written, plus the explorer's plot
    shown = {base64.b64decode(o["data"]["image/png"]) for o in outputs
             if "image/png" in o.get("data", {})}
    for item in figures:
        assert (out / item["file"]).read_bytes() in shown, f"{item['file']} is not shown inline"
    assert len([o for o in outputs if "image/png" in o.get("data", {})]) >= len(figures) + 1
    tables = [i for i in section["items"] if i["kind"] == "table"]
    html = [o for o in outputs if "<table" in "".join(o.get("data", {}).get("text/html", ""))]
    assert len(html) >= len(tables), "every table rendered as a table"
    assert not [o for o in outputs if o["output_type"] == "error"]


def test_notebook_runs_from_the_notebooks_folder_as_jupyterlab_starts_it(
        ci_pipeline: Path, tmp_path: Path) -> None:
    """The kernel's working directory is notebooks/ (JupyterLab's, `cd notebooks && papermill`);
    relative paths still resolve against the repository root."""
    from workbench.report.notebook import execute

    out = tmp_path / "esd"
    executed = execute("esd", tmp_path / "esd.ipynb", {"params_file": str(ci_pipeline),
                                                       "out_dir": str(out)}, cwd=NOTEBOOK_DIR)
    assert (out / SECTION_FILE).exists()
    assert any("image/png" in o.get("data", {}) for o in _outputs(executed))


def test_out_dir_defaults_to_scratch_never_reports() -> None:
    from workbench.utils.paths import REPO_ROOT, SCRATCH_DIR, notebook_output

    assert notebook_output("esd", None) == SCRATCH_DIR / "esd"
    assert notebook_output("esd", "reports/esd") == REPO_ROOT / "reports" / "esd"
    assert notebook_output("esd", "/tmp/o") == Path("/tmp/o")
    assert subprocess.run(["git", "check-ignore", "-q", str(SCRATCH_DIR / "esd" / "x.png")],
                          cwd=REPO_ROOT).returncode == 0, "scratch/ must be ignored by git"
    for path in NOTEBOOK_DIR.glob("*.py"):
        assert "\nout_dir = None" in path.read_text(), f"{path.name}: out_dir must default to None"


# -- a notebook's dataset parameter -----------------------------------------------------------
@pytest.fixture
def own_dataset(ci_pipeline: Path, tmp_path: Path) -> Path:
    """A params file whose data root holds 'mine': a dataset no config names (a copy of the ci
    pipeline's synthetic data, as `prepare dataset=local dataset.name=mine` leaves it) and the
    het-cache results on it."""
    from conftest import write_params

    ci = load(params=ci_pipeline)
    params = write_params(tmp_path)
    mine = load(params=params)
    shutil.copytree(ci.paths.resolve("data") / "processed" / "synthetic",
                    mine.paths.resolve("data") / "processed" / "mine")
    for stage in ("het_cache", "dataset_stats", "het_train", "het_time"):
        shutil.copytree(ci.paths.resolve("results") / stage / "synthetic",
                        mine.paths.resolve("results") / stage / "mine")
    return params


def test_dataset_parameter_shows_your_own_dataset(own_dataset: Path, tmp_path: Path) -> None:
    from workbench.report.notebook import execute, notebook_config

    cfg = notebook_config("het", own_dataset, "mine")
    assert cfg.experiments.het_cache.datasets == ["mine"] and "mine" in cfg.datasets
    executed = execute("het", tmp_path / "het.ipynb", {
        "params_file": str(own_dataset), "out_dir": str(tmp_path / "het"), "dataset": "mine"})
    section = json.loads((tmp_path / "het" / SECTION_FILE).read_text())
    assert "mine" in json.dumps(section["items"])
    printed = "".join("".join(o.get("text", "")) for o in _outputs(executed))
    assert "skipped" not in printed  # the explorer ran live on it


def test_dataset_parameter_errors_name_the_command(own_dataset: Path) -> None:
    from workbench.report.notebook import NotebookError, notebook_config

    with pytest.raises(NotebookError, match="the esd stage has not run on 'mine'; run "
                       "`python -m workbench.stages esd profile=ci dataset=local "
                       "dataset.name=mine"):
        notebook_config("esd", own_dataset, "mine")
    with pytest.raises(NotebookError, match="'absent' is not preprocessed.*prepare it with "
                       "`python -m workbench.stages prepare dataset=local dataset.name=absent"):
        notebook_config("het", own_dataset, "absent")
    for bad in ("../results", "/etc", "a/b", ".."):
        with pytest.raises(NotebookError, match="not a dataset name"):
            notebook_config("het", own_dataset, bad)
    with pytest.raises(NotebookError, match="params file .*nosuch.yaml not found"):
        notebook_config("het", "nosuch.yaml")
    err = NotebookError("one line")
    assert err._render_traceback_() == ["NotebookError: one line"]  # no traceback in a notebook


def test_the_datasets_notebook_shows_your_own_dataset(own_dataset: Path) -> None:
    """It failed on any own dataset: its dataset alone in pipeline.datasets broke every stage
    key that must name a pipeline dataset (``experiments.het_cache.datasets names 'synthetic'``)."""
    from workbench.report.notebook import notebook_config

    cfg = notebook_config("datasets", own_dataset, "mine")
    assert cfg.pipeline.datasets[-1] == "mine" and "synthetic" in cfg.pipeline.datasets


def test_results_of_another_profile_are_named(own_dataset: Path, tmp_path: Path) -> None:
    """het_train's results computed under the ci profile, read with the default profile's
    params: a ``KeyError: 'wdl/D128'`` deep in the notebook before; one line naming both now."""
    from conftest import write_params
    from workbench.report.notebook import NotebookError, notebook_config

    assert notebook_config("het_train", own_dataset, "mine").experiments.het_train.dataset \
        == "mine"
    (tmp_path / "default").mkdir()
    default = write_params(tmp_path / "default", ["profile=default",
                                                  f"paths.data={tmp_path / 'data'}",
                                                  f"paths.results={tmp_path / 'results'}"])
    with pytest.raises(NotebookError) as info:
        notebook_config("het_train", default, "mine")
    message = str(info.value)
    assert "het_train/mine was computed with another configuration than" in message
    assert "the params file asks for wdl at D = 128; another profile?" in message
    assert "`python -m workbench.stages het-train profile=default dataset=local" in message


def test_datasets_notebook_reports_the_het_skew_claim(ci_pipeline: Path) -> None:
    cfg = load(params=ci_pipeline)  # the section as the pipeline's notebook@datasets wrote it
    section = json.loads((cfg.paths.resolve("reports") / "datasets" / SECTION_FILE).read_text())
    (claim,) = section["claims"]  # one row per register entry: the committed dataset's
    assert claim["key"] == "het.fig3_skew" and claim["setting"].startswith("criteo_sample:")
    stats = {n: json.loads((cfg.paths.resolve("results") / "dataset_stats" / n
                            / "stats.json").read_text()) for n in ("criteo_sample", "synthetic")}
    assert claim["measured"] == f"{stats['criteo_sample']['claim_share']:.1%}"
    expected = verdict.percent(stats["criteo_sample"]["claim_share"], 0.9, baseline=0.1)
    assert (claim["state"], claim["rule"]) == (expected.state, expected.rule)
    # the other dataset is a condition of the claim, not a second row
    points = {p["value"]: p["values"][0] for p in claim["conditions"]["dataset"]}
    assert points["synthetic"] == pytest.approx(stats["synthetic"]["claim_share"])
    assert "dataset criteo_sample, synthetic" in claim["holds"]


def test_report_gathers_sections(ci_pipeline: Path) -> None:
    # the report as the ci pipeline's `report` stage wrote it from every notebook's section
    reports = load(params=ci_pipeline).paths.resolve("reports")
    text = (reports / "README.md").read_text()
    assert "## Verdicts" in text and "## Claims" in text and "| HET" in text
    assert "## Provenance" in text and "(datasets/README.md" in text
    assert "![HET Fig. 3" in (reports / "datasets" / "README.md").read_text()
    claims = pd.read_csv(reports / "claims.csv")
    assert list(claims.columns) == CLAIM_COLUMNS
    assert set(claims["state"]) <= set(verdict.STATES)
    assert (claims["state"] != "not built").all()  # every paper's mechanism is built
    # one row per register entry, in the register's order
    assert list(claims["key"]) == reg.load().keys()
    assert len(claims[claims["paper"] == "FlexShard"]) == 2  # traffic and latency
    assert (reports / "claims_metrics.json").is_file()
    assert sorted(p.stem for p in (reports / "verdict_maps").glob("*.png")) == sorted(
        {e.paper for e in reg.load().entries})
    # the quick profile keeps every direction the committed (default-profile) report shows, or
    # says why a point is not comparable
    if (REPO_ROOT / "reports" / "README.md").exists():
        assert not direction_losses(REPO_ROOT / "reports", reports)
