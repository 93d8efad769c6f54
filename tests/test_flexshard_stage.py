"""The ``flexshard`` stage end to end on the ci profile: outputs, their consistency, the plans
compared with RW, determinism, and the clear failure on a dataset without a sequence feature."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from workbench.config import load
from workbench.sharding.lookups import NoSequenceError
from workbench.stages import main, run
from workbench.utils.paths import REPO_ROOT

OUTPUTS = ("plans.csv", "fraction_curve.csv", "device_sweep.csv", "skew_sweep.csv",
           "link_sweep.csv", "link_traffic.csv", "summary.json")


def _out(params: Path, name: str) -> Path:
    return load(params=params).paths.resolve("results") / "flexshard" / name


def _available(cfg, params: Path) -> list[str]:
    """The configured datasets whose stage ran on data (the real samples may be absent); the
    generated ones must always be available."""
    names = []
    for name in cfg.experiments.flexshard.datasets:
        summary = json.loads((_out(params, name) / "summary.json").read_text())
        if summary["available"]:
            names.append(name)
        else:
            assert not name.startswith("synthetic"), f"{name}: {summary}"
            assert summary["reason"]
    assert cfg.experiments.flexshard.claims_dataset in names
    return names


def test_stage_outputs(ci_pipeline: Path) -> None:
    cfg = load(params=ci_pipeline)
    exp = cfg.experiments.flexshard
    for name in _available(cfg, ci_pipeline):
        out = _out(ci_pipeline, name)
        for file in OUTPUTS:
            assert (out / file).is_file(), f"{name}: {file} missing"
        plans = pd.read_csv(out / "plans.csv")
        summary = json.loads((out / "summary.json").read_text())
        unplanned = {p for p, t in summary["torchrec"].items() if "no_plan" in t}
        assert sorted(plans["plan"]) == sorted(set(exp.plans) - unplanned)
        by = plans.set_index("plan")
        assert by.loc["rw", "replay_inter_bytes"] > 0
        assert by.loc["flexshard", "expected_seconds"] <= by.loc["rw", "expected_seconds"]
        if exp.memory_limit == "rw":
            for plan in ("flexshard", "hot_dp"):
                if plan in by.index:
                    assert by.loc[plan, "expected_memory"] <= by.loc["rw", "expected_memory"] * (
                        1 + 1e-5)
        if "hot_dp" in by.index:
            assert by.loc["hot_dp", "t2"] == 0
        assert summary["dataset"] == name and summary["available"]
        assert (summary["flexshard"]["t1"], summary["flexshard"]["t2"]) == (
            by.loc["flexshard", "t1"], by.loc["flexshard", "t2"])
        assert summary["per_device_batch"] == exp.per_device_batch
        assert summary["row_bytes"] == 4 * exp.embedding_dim
        assert summary["topology"]["devices"] == cfg.topology.nodes * cfg.topology.devices_per_node
        assert (by["devices"] == summary["topology"]["devices"]).all()
        assert 0 <= summary["rows_seen_in_profile"] <= summary["table_rows"]
        # the link matrix is the mean replay: its total is the mean bytes per iteration
        links = pd.read_csv(out / "link_traffic.csv")
        devices = summary["topology"]["devices"]
        for plan in ("rw", "flexshard"):
            m = links[links["plan"] == plan]
            assert len(m) == devices * devices
            assert (m.loc[m["src"] == m["dst"], "bytes"] == 0).all()
            assert m["bytes"].sum() == pytest.approx(by.loc[plan, "replay_bytes"], rel=1e-4)
        # the sweeps: every configured point, every plan at each
        sweep = pd.read_csv(out / "device_sweep.csv")
        assert sorted(set(sweep["devices"])) == sorted(set(exp.device_sweep))
        for _, group in sweep.groupby("devices"):  # TorchRec's planner may find no plan
            assert set(exp.plans) - {"torchrec", "torchrec_hbm"} <= set(group["plan"])
            g = group.set_index("plan")
            assert g.loc["flexshard", "expected_seconds"] <= g.loc["rw", "expected_seconds"]
        skew = pd.read_csv(out / "skew_sweep.csv")
        assert sorted(set(skew["slow_factor"])) == sorted(set(exp.skew_sweep))
        assert (skew["slow_nodes"] >= 1).all()
        for _, group in skew.groupby("slow_factor"):
            assert set(exp.plans) - {"torchrec", "torchrec_hbm"} <= set(group["plan"])
        links = pd.read_csv(out / "link_sweep.csv")
        assert sorted(set(links["link_ratio"])) == sorted(set(exp.link_ratio_sweep))
        assert (links["intra_gbps"] == links["link_ratio"] * cfg.topology.inter_gbps).all()
        for frame in (sweep, skew, links):  # the profile's reach at every point
            assert frame["replay_unseen_share"].between(0, 1).all()
        assert 0 <= summary["replay_unseen_share"] <= 1
        curve = pd.read_csv(out / "fraction_curve.csv")
        assert set(curve["plan"]) <= {"hot_dp", "flexshard"}
        assert set(curve["replicated_fraction"]) <= set(exp.replicated_fractions)
        # TorchRec's planner's own plans, shard by shard, and FlexShard against them
        planned = json.loads((out / "torchrec_plan.json").read_text())
        assert set(planned) == {"torchrec", "torchrec_hbm"} & set(exp.plans)
        for plan, record in planned.items():
            if "no_plan" in record:
                assert "found no plan" in record["no_plan"] and plan not in set(plans["plan"])
                continue
            rows = sum(s["rows"] for s in record["shards"] if s["col"] == 0)
            assert record["sharding_type"] == "data_parallel" or rows == summary["table_rows"]
            assert summary["torchrec"][plan]["sharding_type"] == record["sharding_type"]
        if planned.get("torchrec", {}).get("sharding_type") == "row_wise":  # RW's blocks
            assert summary["torchrec"]["torchrec"]["same_rows_as_rw"]
            assert by.loc["torchrec", "replay_inter_bytes"] == by.loc["rw", "replay_inter_bytes"]


def test_stage_is_deterministic(ci_pipeline: Path) -> None:
    cfg = load(params=ci_pipeline)
    for name in cfg.experiments.flexshard.datasets:
        out = _out(ci_pipeline, name)
        before = {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.is_file()}
        assert before
        run(["flexshard", "--params", str(ci_pipeline), "--dataset", name])
        after = {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.is_file()}
        assert before.keys() == after.keys()
        for file in before:
            assert before[file] == after[file], f"{name}/{file} differs on a rerun"


def test_dataset_without_a_sequence_feature(ci_pipeline: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    cfg = load(params=ci_pipeline)
    assert "synthetic" in cfg.pipeline.datasets  # preprocessed by the pipeline, no sequences
    argv = ["flexshard", "--params", str(ci_pipeline), "--dataset", "synthetic"]
    with pytest.raises(NoSequenceError, match="synthetic"):
        run(argv)
    out = _out(ci_pipeline, "synthetic")
    assert not out.exists()  # nothing half-written
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    message = capsys.readouterr().err.strip()
    assert "\n" not in message and message.startswith("NoSequenceError: synthetic")


def test_the_committed_sweep_point_at_the_base_is_the_claims_plan_and_held_out() -> None:
    """Issue 50: the device sweep plans each count on a profile of its own iterations with the
    base's candidate cuts, so its point at the base topology is the claims' plan (the same cut
    points and replayed bytes), as is the link sweep's at the committed NVLink / NIC ratio, and
    every point's replay is held out from its profile."""
    cfg = load(params=REPO_ROOT / "params.yaml")
    exp = cfg.experiments.flexshard
    out = REPO_ROOT / "results" / "flexshard" / exp.claims_dataset
    plans = pd.read_csv(out / "plans.csv").set_index("plan")
    sweep = pd.read_csv(out / "device_sweep.csv")
    assert (sweep["replay_in_profile"] == 0).all()
    at_base = sweep[sweep["devices"] == plans["devices"].iloc[0]].set_index("plan")
    committed = cfg.topology.intra_gbps / cfg.topology.inter_gbps
    links = pd.read_csv(out / "link_sweep.csv")
    at_ratio = links[links["link_ratio"] == committed].set_index("plan")
    for point in (at_base, at_ratio):  # one plan behind the rows and their sweep points
        for column in ("t1", "t2", "replay_inter_bytes", "replay_seconds"):
            pd.testing.assert_series_equal(point.loc[plans.index, column], plans[column],
                                           check_names=False)
