"""The claim -> command -> cost table: the stages' cost records and the table built from them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from workbench.claims import register as reg
from workbench.report import costs, lineage
from workbench.stages.cli import stage_id
from workbench.stages.costs import Meter, output_bytes
from workbench.stages.registry import STAGES
from workbench.utils.paths import REPO_ROOT

LOCK = yaml.safe_load((REPO_ROOT / "dvc.lock").read_text())


def test_a_run_records_its_cost_under_its_dvc_name(tmp_path: Path) -> None:
    assert stage_id(STAGES["dedup"], "taobao_sample", None) == "dedup@taobao_sample"
    assert stage_id(STAGES["notebook"], "synthetic", "esd") == "notebook@esd"
    assert stage_id(STAGES["het-train"], "synthetic", None) == "het_train"
    assert not STAGES["report"].costed  # it reads the records: its own would make it stale
    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    (out / "sub" / "a.bin").write_bytes(b"x" * 3000)
    meter = Meter("dedup@taobao_sample")
    sum(i * i for i in range(200_000))  # some CPU
    path = meter.record(tmp_path / "results", out)
    assert path == tmp_path / "results" / "costs" / "dedup@taobao_sample.json"
    rec = json.loads(path.read_text())
    assert rec["stage"] == "dedup@taobao_sample" and rec["seconds"] > 0
    assert rec["cpu_seconds"] > 0 and rec["peak_rss_mb"] > 10
    assert rec["output_mb"] == pytest.approx(3000 / 2**20, abs=1e-3)
    assert rec["machine"]["logical_cores"] >= 1
    assert output_bytes(out) == 3000 and output_bytes(tmp_path / "nope") == 0
    # a data stage's record stays beside its uncommitted output: a fresh clone reruns it
    from workbench.config import load
    from workbench.stages.cli import costs_root

    cfg = load([f"paths.data={tmp_path / 'd'}", f"paths.results={tmp_path / 'r'}"])
    assert costs_root(cfg, STAGES["dedup"]) == tmp_path / "d"  # data/partitions too
    assert costs_root(cfg, STAGES["preprocess"]) == tmp_path / "d"
    assert costs_root(cfg, STAGES["flexshard"]) == tmp_path / "r"
    # the registry's outputs are dvc.yaml's: the stages writing under data/ are the same
    in_dvc = {name for name, st in yaml.safe_load((REPO_ROOT / "dvc.yaml").read_text())[
        "stages"].items() if any(str(next(iter(o)) if isinstance(o, dict) else o)
                                 .startswith("data/") for o in st.get("outs", []))}
    assert in_dvc == {s.dvc_name for s in STAGES.values() if s.in_dvc and s.writes_data}


def test_every_claim_has_a_row_with_its_command_and_the_stages_behind_it() -> None:
    register = reg.load()
    graph = lineage.stage_graph(LOCK)
    # a claim's stages pull in what they read: dedup reads the preprocessed data
    assert "preprocess@taobao_sample" in lineage.behind(["dedup@taobao_sample"], graph)
    assert "download@taobao_sample" in lineage.behind(["dedup@taobao_sample"], graph)
    recorded = {s: {"seconds": 60.0, "cpu_seconds": 30.0, "cores": 0.5, "peak_rss_mb": 100.0,
                    "output_mb": 1.0, "machine": {"cpu": "x", "logical_cores": 2}}
                for s in graph if not s.startswith("download")}
    table = costs.cost_table(register, LOCK, recorded)
    assert list(table["key"]) == [e.key for e in register.entries]  # a row per register entry
    row = table.set_index("key").loc["recd.storage"]
    assert row["command"] == "make claim KEY=recd.storage" and row["stages"] == "dedup"
    every = lineage.behind([s for s in graph if s.startswith("dedup@")], graph)
    assert row["minutes"] == pytest.approx(sum(1 for s in every if s in recorded))
    assert "download@taobao_sample" in row["not_recorded"]  # named: the sum is partial
    assert table.set_index("key").loc["hotline.speedup", "accelerator"].startswith("helps")
    assert table.set_index("key").loc["hotline.v1_gpu_only", "command"] == "-"
    page = costs.markdown(table, recorded)
    assert all(f"`{e.key}`" in page for e in register.entries)
    assert "| `recd.storage` | `make claim KEY=recd.storage` |" in page


def test_the_committed_cost_page_has_every_claim() -> None:
    page = (REPO_ROOT / "reports" / "costs.md").read_text()
    assert all(f"`{e.key}`" in page for e in reg.load().entries)
    assert "(reports/costs.md)" not in page and "costs.md" in (
        REPO_ROOT / "reports" / "README.md").read_text()


def test_measure_reruns_into_a_copy_and_keeps_only_the_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from workbench.stages import cost_rerun as stage_costs
    from workbench.utils.errors import UserError

    (tmp_path / "results" / "hotline" / "synthetic").mkdir(parents=True)
    (tmp_path / "results" / "hotline" / "synthetic" / "summary.json").write_text("{}")
    lock = {"stages": {
        "hotline": {"cmd": "python -m workbench.stages hotline --params params.yaml",
                    "outs": [{"path": "results/hotline/synthetic"}]},
        "notebook@esd": {"cmd": "python -m workbench.stages notebook esd --params params.yaml",
                         "outs": [{"path": "reports/esd"}]}}}
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(lock))
    calls = []

    def run(argv: list[str], cwd: Path, check: bool) -> object:
        calls.append(argv)
        copy = Path(argv[-1].split("=", 1)[1])
        assert (copy / "hotline" / "synthetic" / "summary.json").is_file()  # the inputs
        (copy / "hotline" / "synthetic" / "summary.json").write_text('{"new": 1}')
        Meter("hotline").record(copy, copy / "hotline" / "synthetic")
        return type("Done", (), {"returncode": 0})()

    monkeypatch.setattr(stage_costs.subprocess, "run", run)
    [path] = stage_costs.measure(["hotline"], root=tmp_path)
    assert calls[0][-3:] == ["--params", "params.yaml",
                             f"paths.results={tmp_path / stage_costs.COPY}"]
    assert path == tmp_path / "results" / "costs" / "hotline.json"
    assert json.loads(path.read_text())["rerun_into_copy"] is True
    # the committed outputs are untouched, the copy is gone
    assert (tmp_path / "results" / "hotline" / "synthetic" / "summary.json").read_text() == "{}"
    assert not (tmp_path / stage_costs.COPY).exists()
    page = costs.markdown(costs.cost_table(reg.load(), LOCK, {}),
                          {"hotline": json.loads(path.read_text())})
    assert "rerunning the stage into a copy of `results/`" in page and "`hotline`." in page
    with pytest.raises(UserError, match="not only under results/"):
        stage_costs.measure(["notebook@esd"], root=tmp_path)
    with pytest.raises(UserError, match="'nope' is not a stage of dvc.lock"):
        stage_costs.measure(["nope"], root=tmp_path)


@pytest.mark.parametrize("argv,record", [
    ([], "het_train"),  # the pipeline's own run
    (["dataset=local", "dataset.name=mine", "dataset.path=/nonexistent"], "het_train@mine"),
    (["--dataset", "criteo_sample"], "het_train@criteo_sample"),
    (["experiments.het_train.dataset=criteo_sample"], "het_train@criteo_sample"),
    (["seed=3"], "het_train"),  # an override that keeps the dataset
])
def test_a_run_on_another_dataset_never_replaces_the_pipelines_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], record: str) -> None:
    """A single-dataset stage's record is keyed by its dvc.yaml id only for the pipeline's own
    dataset; an own-data run (here het-train on a local folder) records under
    <stage>@<dataset> (it used to overwrite results/costs/het_train.json, which feeds
    reports/costs.md)."""
    import dataclasses

    from workbench.stages import cli

    out = tmp_path / "out"
    out.mkdir()
    fake = dataclasses.replace(STAGES["het-train"], run=lambda run: out)
    monkeypatch.setitem(cli.STAGES, "het-train", fake)
    cli.run(["het-train", *argv, f"paths.results={tmp_path / 'results'}"])
    assert [p.name for p in (tmp_path / "results" / "costs").iterdir()] == [f"{record}.json"]
