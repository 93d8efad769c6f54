"""The claims' measures (workbench/claims): every register entry's function resolves, reads what
the register says it reads, gives the committed claims table from the committed results, and
does its arithmetic right on small hand-made outputs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from helpers.claim_directions import direction_losses
from workbench import claims
from workbench.claims import check
from workbench.claims import register as reg
from workbench.claims.check import claim_stages
from workbench.config import load
from workbench.utils.paths import REPO_ROOT

REGISTER = reg.load()


@pytest.fixture(scope="module")
def committed_cfg():
    return load(params=REPO_ROOT / "params.yaml")


def _fixture(tmp_path: Path, *stages: str):
    """A results folder holding copies of the committed outputs of ``stages``, and its cfg."""
    for stage in stages:
        shutil.copytree(REPO_ROOT / "results" / stage, tmp_path / stage)
    return load([f"paths.results={tmp_path}"], params=REPO_ROOT / "params.yaml")


def test_every_measured_entry_names_a_measure_that_resolves() -> None:
    for entry in REGISTER.entries:
        if entry.kind == "not_comparable":
            assert not entry.measure, entry.key
            continue
        assert entry.measure, f"{entry.key}: no measure named"
        assert callable(claims.resolve(entry.measure)), entry.key


def test_resolve_names_what_is_wrong() -> None:
    with pytest.raises(claims.MeasureError, match="module one of het, esd"):
        claims.resolve("nope.fig2_share")
    with pytest.raises(claims.MeasureError, match="has no function 'fig99'"):
        claims.resolve("het.fig99")


def test_measures_read_only_what_the_register_says(committed_cfg) -> None:
    """The register's measured_by (stage, file, also) is held to the files each measure reads."""
    for entry in REGISTER.entries:
        if not entry.measure:
            continue
        res = claims.Results(committed_cfg)
        claims.measure(entry, res)
        read_stages = {p.parts[0] for p in res.read}
        declared = set(entry.stages)
        assert read_stages <= declared, f"{entry.key} reads {read_stages - declared} too"
        assert entry.measured_by["stage"] in read_stages, entry.key
        assert entry.measured_by["file"] in {p.name for p in res.read}, entry.key


def test_claim_stages_are_pipeline_stages() -> None:
    dvc_stages = set(yaml_stages())
    assert set(claim_stages()) <= dvc_stages


def yaml_stages() -> list[str]:
    import yaml
    return list(yaml.safe_load((REPO_ROOT / "dvc.yaml").read_text())["stages"])


def test_committed_claims_table_is_what_the_measures_give(tmp_path: Path, committed_cfg) -> None:
    """reports/claims.csv (written through the notebooks' sections) equals the claims measured
    straight from the committed results, no notebook run: the one arithmetic behind both. The
    results are read from a copy, as ``workbench check --results`` reads anyone's: it
    reproduces every committed value and state, and flags the one value edited in the copy."""
    copy = tmp_path / "results"
    shutil.copytree(REPO_ROOT / "results", copy)
    summary = copy / "hotline" / "synthetic" / "summary.json"
    edited = json.loads(summary.read_text())
    server = load(params=REPO_ROOT / "params.yaml").experiments.hotline.hardware[-1]
    edited["speedup_modelled"][server]["hotline"] *= 1.5  # hotline.speedup, and nothing else
    summary.write_text(json.dumps(edited))
    committed = pd.read_csv(REPO_ROOT / "reports" / "claims.csv").set_index("key")
    measured = check.measure_folder(copy, REPO_ROOT / "params.yaml")
    judged = check.compare(committed, measured).set_index("key")
    assert judged["problem"].isna().all() and not judged["changed"].any()
    assert set(judged.index[judged["same_value"] == False]) == {"hotline.speedup"}  # noqa: E712
    assert judged["same_value"].sum() == committed["mean"].notna().sum() - 1
    assert "DIFFERS" in check.render(judged.reset_index())
    # the edited claim from the committed results: every row must equal the committed table
    from workbench.claims.record import measured_row

    entry = REGISTER["hotline.speedup"]
    row = measured_row(entry, claims.measure(entry, committed_cfg))
    measured = measured.drop(columns="problem")
    measured.loc[entry.key] = pd.Series(row).reindex(measured.columns)
    assert list(measured.index) == list(committed.index)
    for column in ("state", "measured", "setting", "note", "holds", "rule", "seeds"):
        a, b = committed[column].fillna(""), measured[column].fillna("").astype(
            committed[column].dtype if committed[column].dtype != object else object)
        assert (a.astype(str) == b.astype(str)).all(), column
    for column in ("mean", "ci_low", "ci_high"):
        np.testing.assert_allclose(measured[column].astype(float), committed[column],
                                   rtol=1e-12, equal_nan=True)


# ---------------------------------------------------------------- the arithmetic, by hand

def test_fig2_share_is_communication_over_the_epoch(tmp_path: Path) -> None:
    cfg = _fixture(tmp_path, "het_epoch")
    ds = cfg.experiments.het_epoch.dataset
    fig2 = pd.read_csv(tmp_path / "het_epoch" / ds / "fig2.csv")
    fig2.loc[fig2["model"] == "wdl", ["comm_s", "compute_s", "comm_share"]] = [3.0, 1.0, 0.75]
    fig2.to_csv(tmp_path / "het_epoch" / ds / "fig2.csv", index=False)
    m = claims.measure(REGISTER["het.fig2_share.wdl"], cfg)
    assert m.payload["values"] == [0.75] and m.text == "75.0%"
    by_speed = {p["value"]: p["values"][0] for p in m.conditions["compute speed"]}
    assert by_speed[2.0] == pytest.approx(3 / 3.5) and by_speed[0.5] == pytest.approx(3 / 5)
    # a model the stage did not run is a measurement with a reason, not a crash
    fig2[fig2["model"] != "dcn"].to_csv(tmp_path / "het_epoch" / ds / "fig2.csv", index=False)
    gone = claims.measure(REGISTER["het.fig2_share.dcn"], cfg)
    assert gone.payload["values"] is None and "DCN was not run" in gone.payload["missing"]


def test_fig7_comm_is_embedding_communication_in_the_committed_placement(
        tmp_path: Path) -> None:
    """Fig. 7's value is Hybrid / Cache s=100 embedding communication in the register's
    placement; the total per placement is context, the rows moved are said beside it."""
    cfg = _fixture(tmp_path, "het_epoch", "het_scale")
    ds = cfg.experiments.het_epoch.dataset
    path = tmp_path / "het_epoch" / ds / "fig7.csv"
    fig7 = pd.read_csv(path)
    placement = REGISTER["het.fig7b_comm.deepfm"].ours["dense_sync"]
    at = (fig7["model"] == "deepfm") & np.isclose(fig7["bandwidth_gbps"], 10.0)
    mine = at & (fig7["dense_placement"] == placement)
    fig7.loc[mine & (fig7["system"] == "Hybrid, no cache"), "comm_embedding_s"] = 12.0
    fig7.loc[mine & (fig7["system"] == "Cache s=100"), "comm_embedding_s"] = 4.0
    fig7.to_csv(path, index=False)
    m = claims.measure(REGISTER["het.fig7b_comm.deepfm"], cfg)
    assert m.payload["values"] == [3.0] and m.text.startswith("3.00x (66.7% less)")
    assert "table scale" not in m.conditions  # WDL's only
    committed = [p for p in m.conditions["per-row software cost"] if p.get("committed")]
    assert len(committed) == 1 and committed[0]["values"] == [3.0]
    assert placement in m.note and "pushed" in m.note and "dirty rows" in m.note
    wdl = claims.measure(REGISTER["het.fig7b_comm.wdl"], cfg).conditions["table scale"]
    assert [p["value"] for p in wdl if p.get("committed")] == [100.0]
    fig7[~np.isclose(fig7["bandwidth_gbps"], 10.0)].to_csv(path, index=False)
    gone = claims.measure(REGISTER["het.fig7b_comm.deepfm"], cfg)
    assert "no 10 Gb/s point for deepfm" in gone.payload["missing"]


def test_table1_is_the_ratio_per_seed_of_the_long_runs(tmp_path: Path) -> None:
    cfg = _fixture(tmp_path, "het_long")
    path = tmp_path / "het_long" / cfg.experiments.het_long.dataset / "summary.json"
    summary = json.loads(path.read_text())
    for run in summary["runs"]:
        if run["system"] in ("Hybrid, no cache", "Cache s=100"):
            run["time_to_target_s"] = (10.0 + run["replicate"]) * (
                4.0 if run["system"] == "Hybrid, no cache" else 1.0)
    path.write_text(json.dumps(summary))
    m = claims.measure(REGISTER["het.table1_time_to_target"], cfg)
    assert np.allclose(m.payload["values"], 4.0) and m.payload["missing"] is None
    assert m.text.startswith("4.00x (identical over n = ")
    assert "4.46-5.14x" in m.note  # the paper's range, from the register's paper_table
    assert "10,019 iterations" in m.setting


def test_esd_cost_is_the_reduction_against_laia(tmp_path: Path) -> None:
    cfg = _fixture(tmp_path, "esd")
    path = tmp_path / "esd" / cfg.experiments.esd.dataset / "cost.csv"
    cost = pd.read_csv(path)
    base = cost["sweep"] == "base"
    cost.loc[base & (cost["dispatcher"] == "laia"), "transfer_s_per_batch"] = 2.0
    cost.loc[base & (cost["dispatcher"] == "hybriddis"), "transfer_s_per_batch"] = 1.5
    cost.to_csv(path, index=False)
    m = claims.measure(REGISTER["esd.cost"], cfg)
    assert m.payload["values"] == [0.25] and m.text == "25.0% vs laia"
    cost[~(cost["dispatcher"] == "laia")].to_csv(path, index=False)
    assert claims.measure(REGISTER["esd.cost"], cfg).payload["values"] == [None]


def test_recd_storage_is_shuffled_over_the_session_layouts_bytes(tmp_path: Path) -> None:
    """Register v6: the storage row is measured on the session layout RecD's data generation
    writes; the clustered rows alone are context in its setting; results without the session
    layout give no value and say how to get one."""
    cfg = _fixture(tmp_path, "dedup")
    exp = cfg.experiments.recd
    path = tmp_path / "dedup" / "taobao_sample" / "storage.csv"
    storage = pd.read_csv(path)
    total = (storage["column_class"] == "total") & (storage["window"] == exp.window)
    storage.loc[total & (storage["layout"] == "shuffled"), "bytes"] = 900
    storage.loc[total & (storage["layout"] == "clustered"), "bytes"] = 450
    storage.loc[total & (storage["layout"] == "sessions"), "bytes"] = 300
    storage.to_csv(path, index=False)
    m = claims.measure(REGISTER["recd.storage"], cfg)
    assert m.payload["values"] == [3.0] and m.text == "3.00x"
    assert "clustered rows alone 2.00x" in m.setting
    storage[storage["layout"] != "sessions"].to_csv(path, index=False)
    m = claims.measure(REGISTER["recd.storage"], cfg)
    assert m.payload["values"] is None and "rerun the dedup stage" in m.payload["missing"]


def test_recd_train_pairs_the_rounds(tmp_path: Path) -> None:
    cfg = _fixture(tmp_path, "dedup", "recd")
    path = tmp_path / "recd" / "taobao_sample" / "timing_rounds.csv"
    rounds = pd.read_csv(path)
    mine = (rounds["phase"] == "train") & (rounds["layout"] == "clustered")
    rounds.loc[mine & (rounds["path"] == "kjt"), "samples_per_s"] = 100.0
    rounds.loc[mine & (rounds["path"] == "ikjt"), "samples_per_s"] = (
        100.0 * (2.0 + 0.1 * rounds.loc[mine & (rounds["path"] == "ikjt"), "round"]))
    rounds.to_csv(path, index=False)
    m = claims.measure(REGISTER["recd.train"], cfg)
    n = int(rounds.loc[mine, "round"].nunique())
    assert m.payload["values"] == pytest.approx([2.0 + 0.1 * r for r in range(n)])


def test_hotline_claims_are_modelled_on_their_servers(tmp_path: Path) -> None:
    cfg = _fixture(tmp_path, "hotline")
    exp = cfg.experiments.hotline
    path = tmp_path / "hotline" / exp.dataset / "summary.json"
    summary = json.loads(path.read_text())
    summary["speedup_modelled"][exp.hardware[0]]["hotline"] = 1.25
    summary["speedup_modelled"][exp.hardware[-1]]["hotline"] = 1.75
    path.write_text(json.dumps(summary))
    assert claims.measure(REGISTER["hotline.v1_hybrid"], cfg).text == "1.25x modelled"
    v2 = claims.measure(REGISTER["hotline.speedup"], cfg)
    assert v2.text == "1.75x modelled" and v2.note.startswith("modelled, not measured")
    assert "benchmarks/hotline_cuda.py" in v2.note


def test_a_flexshard_replay_of_profiled_samples_gives_no_value(tmp_path: Path) -> None:
    """A claims replay that reuses samples the planner profiled is no measurement (issue 50:
    the 32-device rows replayed 63% profiled samples); the committed one is held out."""
    cfg = _fixture(tmp_path, "flexshard", "flexshard_stream")
    name = cfg.experiments.flexshard.claims_dataset
    path = tmp_path / "flexshard_stream" / name / "summary.json"
    summary = json.loads(path.read_text())
    assert summary["replay_in_profile"] == 0.0
    summary["replay_in_profile"] = 0.63
    path.write_text(json.dumps(summary))
    for key in ("flexshard.a2a_traffic", "flexshard.comm_latency"):
        m = claims.measure(REGISTER[key], cfg)
        assert m.payload["values"] is None and m.text == "-", key
        assert "reused samples the planner profiled (63%" in m.payload["missing"], key
        assert "experiments.flexshard.profile_sweep" in m.payload["missing"], key


def test_a_flexshard_sweep_point_of_profiled_samples_is_left_out(tmp_path: Path) -> None:
    """A device count whose replay reused profiled samples is no point of the devices
    condition; every other count, the link ratios and the profile lengths are."""
    cfg = _fixture(tmp_path, "flexshard", "flexshard_stream")
    exp = cfg.experiments.flexshard
    path = tmp_path / "flexshard_stream" / exp.claims_dataset / "device_sweep.csv"
    sweep = pd.read_csv(path)
    counts = sorted(set(sweep["devices"]))
    sweep["replay_in_profile"] = sweep["replay_in_profile"].astype(float)
    sweep.loc[sweep["devices"] == counts[-1], "replay_in_profile"] = 0.5
    sweep.to_csv(path, index=False)
    m = claims.measure(REGISTER["flexshard.comm_latency"], cfg)
    assert [p["value"] for p in m.conditions["devices"]] == counts[:-1]
    assert [p["value"] for p in m.conditions["NVLink/NIC ratio"]] == sorted(exp.link_ratio_sweep)
    assert len(m.conditions["profile length"]) == len(exp.profile_sweep)


def test_flexshard_claims_follow_the_summary(tmp_path: Path) -> None:
    cfg = _fixture(tmp_path, "flexshard", "flexshard_stream")
    path = (tmp_path / "flexshard_stream" / cfg.experiments.flexshard.claims_dataset
            / "summary.json")
    summary = json.loads(path.read_text())
    summary["inter_traffic_reduction"], summary["latency_speedup"] = 0.5, None
    summary["latency_speedup_note"] = "no all-to-all left"
    path.write_text(json.dumps(summary))
    traffic = claims.measure(REGISTER["flexshard.a2a_traffic"], cfg)
    assert traffic.payload["values"] == [0.5] and traffic.text.startswith("50.0%")
    latency = claims.measure(REGISTER["flexshard.comm_latency"], cfg)
    assert latency.payload == {"values": None, "missing": "no all-to-all left"}


def test_a_missing_output_names_the_file(tmp_path: Path) -> None:
    cfg = _fixture(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"fig2.csv not found: the het_epoch stage has "
                       r"not run here \(dvc repro het_epoch"):
        claims.measure(REGISTER["het.fig2_share.wdl"], cfg)


def test_fig3_reads_the_datasets_the_stage_ran_on(tmp_path: Path) -> None:
    """A notebook shown on one dataset measures Fig. 3 from that dataset's statistics alone."""
    shutil.copytree(REPO_ROOT / "results" / "dataset_stats" / "criteo_sample",
                    tmp_path / "dataset_stats" / "criteo_sample")
    cfg = load([f"paths.results={tmp_path}"], params=REPO_ROOT / "params.yaml")
    m = claims.measure(REGISTER["het.fig3_skew"], cfg)
    assert [p["value"] for p in m.conditions["dataset"]] == ["criteo_sample"]
    assert m.payload["values"] and m.text.endswith("%")


def _section(root: Path, name: str, rows: list[tuple[str, str, str]]) -> Path:
    """A reports folder with one section whose claim rows are (key, claim, state)."""
    (root / name).mkdir(parents=True)
    claims_ = [{"key": k, "claim": c, "state": s, "rule": f"{s}: x"} for k, c, s in rows]
    (root / name / "section.json").write_text(json.dumps({"claims": claims_}))
    return root


def test_a_quick_run_may_tie_only_on_a_wall_clock_row(tmp_path: Path) -> None:
    timed = {e.key for e in REGISTER.entries if e.wall_clock}
    assert "recd.train" in timed and "recd.storage" not in timed
    shown = [("recd.train", "t", "direction only"), ("recd.storage", "s", "direction only")]
    ref = _section(tmp_path / "ref", "recd", shown)
    tied = _section(tmp_path / "tie", "recd", [(k, c, "tie") for k, c, _ in shown])
    # the timed row's tie is a busy machine's interval; the byte count's tie is a lost direction
    assert [loss.split(":")[0] for loss in direction_losses(ref, tied)] == [
        "('recd', 'recd.storage', 's', 0)"]
    reversed_ = _section(tmp_path / "rev", "recd", [(k, c, "contradicted") for k, c, _ in shown])
    assert len(direction_losses(ref, reversed_)) == 2


def test_every_committed_setting_is_a_point_of_its_sweep() -> None:
    """Each verdict-map row of the committed report outlines a cell: the committed setting is
    one of the swept points (a measured one, e.g. the calibrated per-row cost, included)."""
    from workbench.report import verdict_map

    rows = []
    for path in sorted((REPO_ROOT / "reports").glob("*/section.json")):
        rows += json.loads(path.read_text()).get("claims", [])
    for paper in reg.PAPERS:
        for label, cells in verdict_map.rows_of(rows, REGISTER, paper):
            assert any(committed for _, _, committed in cells), (paper, label)


def test_committed_het_rows_state_the_papers_setting() -> None:
    """Issue 49's registers in the committed claims table: every HET row names v2 (Tables 1
    and 2: v3, the long runs; Fig. 8: v7, the whole epoch) and our committed setting, with its
    clock unit; the replay rows are measured on the whole epoch at full size, in the unit,
    clock and dense placement the register states."""
    table = pd.read_csv(REPO_ROOT / "reports" / "claims.csv")
    het = table[table["paper"] == "HET"].set_index("key")
    assert len(het) == len([e for e in REGISTER.entries if e.paper == "HET"])
    measured = [k for k in het.index if REGISTER[k].kind != "not_comparable"]
    long_rows = ["het.table1_time_to_target", "het.table2_staleness"]
    fig8 = ["het.fig8_lfu_lru", "het.fig8_lfuopt"]
    assert set(het.loc[long_rows, "register"]) == {"v3"}
    assert set(het.loc[fig8, "register"]) == {"v7"}
    assert set(het.drop(index=long_rows + fig8)["register"]) == {"v2"}
    assert het.loc[measured, "ours"].str.contains("unit").all()
    assert het.loc[measured, "ours"].str.contains("clock").all()  # every one states its unit
    replayed = [k for k in het.index
                if k.startswith(("het.fig2_", "het.fig7", "het.fig8", "het.fig9a"))]
    assert len(replayed) == 12
    for key in replayed:
        setting, ours = het.loc[key, "setting"], het.loc[key, "ours"]
        assert "33,762,577 rows" in setting and "45,840,617 samples" in setting, key
        if key.startswith(("het.fig7", "het.fig9a")):
            assert "clock" in ours and "dense_sync concurrent/shared" in ours, key
        if key.startswith(("het.fig7", "het.fig8", "het.fig9a")):
            assert "HET's per-iteration clock" in ours, key
    assert het.loc["het.fig7a_comm.wdl", "ours"].count("embedding communication") == 1
    for key in long_rows:
        assert "per-iteration clock" in het.loc[key, "ours"], key
        assert "10,019 iterations" in het.loc[key, "setting"], key


def test_a_missing_frozen_stage_output_names_its_make_target(tmp_path: Path) -> None:
    """The long HET runs and the calibration are frozen stages: ``dvc repro`` never writes them,
    so the one line names the make target that does (the het_train notebook on the ci profile
    ended in a raw FileNotFoundError for results/het_long/synthetic)."""
    from workbench.claims.measurement import Results
    from workbench.config import load
    from workbench.utils.errors import MissingInputError

    res = Results(load(["profile=ci", f"paths.results={tmp_path}"]))
    with pytest.raises(MissingInputError, match=r"het_long stage has not run here \(make "
                                                r"het-long: .*results/het_long/synthetic_long\)"):
        res.json("het_long", "synthetic", "summary.json")
    with pytest.raises(MissingInputError, match=r"\(make calibrate\)"):
        res.json("calibration", "calibration.json")
    with pytest.raises(MissingInputError, match=r"\(dvc repro esd, or make repro\)"):
        res.csv("esd", "synthetic", "cost.csv")


def test_a_huge_file_in_a_results_folder_is_refused_unread(tmp_path: Path) -> None:
    """``check --results DIR`` on a folder from elsewhere: a 1 GiB CSV where a stage writes a
    few KB is refused in one line, never read whole (a sparse file: no disk used)."""
    from workbench.claims.measurement import Results
    from workbench.config import load
    from workbench.utils.errors import MissingInputError

    big = tmp_path / "esd" / "synthetic" / "cost.csv"
    big.parent.mkdir(parents=True)
    with open(big, "wb") as f:
        f.truncate(2**30)
    res = Results(load(["profile=ci", f"paths.results={tmp_path}"]))
    with pytest.raises(MissingInputError, match=r"cost.csv: 1,024 MiB, larger than any file a "
                                                r"stage writes there"):
        res.csv("esd", "synthetic", "cost.csv")


def test_every_measured_claim_names_the_figures_its_notebook_draws() -> None:
    """Issue 70: the register names the figures and tables that show each measured claim
    (``shown_in``), and each name is an item its section's notebook draws (the committed
    ``reports/<section>/section.json``); the section page links exactly those."""
    missing, unknown = [], []
    for e in REGISTER.entries:
        if e.kind == "not_comparable":
            continue
        if not e.shown_in:
            missing.append(e.key)
            continue
        section = json.loads((REPO_ROOT / "reports" / e.section / "section.json").read_text())
        drawn = {Path(i["file"]).stem for i in section["items"] if "file" in i}
        unknown += [f"{e.key}: {n} (not drawn by notebooks/{e.section}.py)"
                    for n in e.shown_in if n not in drawn]
        number = 1 + [c["key"] for c in section["claims"]].index(e.key)
        linked = {Path(i["file"]).stem for i in section["items"] if number in i.get("claims", [])}
        assert linked == set(e.shown_in), (e.key, linked)
    assert not missing, f"measured claims without shown_in: {missing}"
    assert not unknown, "; ".join(unknown)
    text = reg.REGISTER_FILE.read_text().replace("shown_in: [fig2_comm_share]",
                                                 "shown_in: fig2_comm_share", 1)
    with pytest.raises(reg.RegisterError, match="shown_in 'fig2_comm_share' must be a list"):
        reg.parse(text)


_TOY = """
  - key: recd.toy_storage
    paper: RecD
    claim: a toy claim added as docs/claims.md says (clustered partitions are smaller)
    paper_value: "2x [A]"
    basis: formalisation
    paper_setting: none (a toy)
    ours: {dataset: taobao_sample, unit: "bytes, shuffled / session layout"}
    measured_by: {stage: dedup, file: storage.csv, column: bytes}
    measure: recd.toy_storage
    section: toy
    shown_in: [toy_storage]
    seeds: 1
    rule: {kind: factor, paper: 2.0}
"""


def test_a_toy_claim_is_added_in_three_places(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 70: a claim is added in three places (docs/claims.md, "Adding a claim"): a
    register entry, a measure in ``workbench/claims/<paper>.py``, a figure drawn under the name
    ``shown_in`` gives; the row reaches the claims table, judged, and its page links the
    figure."""
    import matplotlib.pyplot as plt

    from workbench.claims import recd
    from workbench.claims.measurement import Measurement, Results
    from workbench.claims.record import collect
    from workbench.report import lineage
    from workbench.report.index import claim_lines
    from workbench.report.page import page
    from workbench.report.sections import Section, load_sections

    toy = reg.parse(reg.REGISTER_FILE.read_text() + _TOY)  # 1. the register entry
    monkeypatch.setattr(reg, "load", lambda *a, **k: toy)

    def toy_storage(res: Results, entry: Any) -> Measurement:  # 2. the measure
        ratio = recd.storage_ratios(res).set_index("dataset")["session_ratio"]
        value = float(ratio[entry.ours["dataset"]].iloc[0])
        return Measurement(entry.key, f"{value:.2f}x", "toy", {"values": [value]})

    monkeypatch.setattr(recd, "toy_storage", toy_storage, raising=False)
    cfg = load()
    lineage.ReadLog.fresh((cfg.paths.resolve("results"), cfg.paths.resolve("data")))
    section = Section("toy", "Toy", tmp_path / "toy", config=cfg)
    res = Results(cfg)
    measured = claims.measure(toy["recd.toy_storage"], res)
    fig, ax = plt.subplots()  # 3. the figure, and the record
    ax.bar([0], [measured.payload["values"][0]])
    section.figure(fig, "toy_storage", "Toy storage saving", "toy",
                   reads=[cfg.paths.resolve("results") / "dedup"])
    section.record(measured)
    section.save()
    loaded = load_sections(tmp_path, ["toy"])
    (row,) = collect(loaded, toy)
    judged = reg.judge(toy["recd.toy_storage"], dict(measured.payload)).state
    assert row["key"] == "recd.toy_storage" and row["state"] == judged
    assert row["shown"] == "fig-toy_storage"
    assert "[toy #1](toy/README.md#claim-1) · [fig](toy/README.md#fig-toy_storage)" in \
        "\n".join(claim_lines([row]))
    assert "[figure *Toy storage saving*](#fig-toy_storage)" in page(loaded[0])
