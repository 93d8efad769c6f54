"""Training through the emulated cluster: equivalence with plain training, learning, systems."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.training import MODEL, toy_data
from workbench.cluster.config import CacheConfig, ClusterConfig
from workbench.config import load
from workbench.experiments.het_train import scaled_bound, systems
from workbench.models.config import ModelConfig
from workbench.training.components import ClusterSetup, ModelSpec, SystemSpec
from workbench.training.metrics import auc_score, time_to_target
from workbench.training.trainer import Trainer


def _trainer(system: SystemSpec, rows: int, workers: int = 1, model: ModelConfig = MODEL,
             cache: CacheConfig | None = None) -> Trainer:
    return Trainer(ModelSpec(model, 13, 26, rows), system,
                   ClusterSetup(ClusterConfig(workers=workers),
                                cache or CacheConfig(policy="lru", ratio=0.05)), seed=3)


@pytest.mark.parametrize("policy", ["lru", "lfu", "none"])
def test_one_worker_with_s0_equals_plain_training(policy: str) -> None:
    train, _, rows = toy_data(1024)
    plain = _trainer(SystemSpec("plain", "plain"), rows)
    cached = _trainer(SystemSpec("s0", "cache", 0), rows,
                      cache=CacheConfig(policy=policy, ratio=0.05))
    for start in range(0, len(train) - 64 + 1, 64):
        plain.step(train, start)
        cached.step(train, start)
    for p, q in zip(plain.model.parameters(), cached.model.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(plain.store.table(), cached.store.table(), rtol=1e-5, atol=1e-6)


def test_models_learn_through_the_cluster_and_metrics_are_deterministic() -> None:
    train, test, rows = toy_data(6144)
    runs = []
    for _ in range(2):
        tr = _trainer(SystemSpec("Cache s=10", "cache", 10), rows, workers=4)
        runs.append(tr.fit(train, test, epochs=2, eval_every=20))
    pd.testing.assert_frame_equal(runs[0], runs[1])
    metrics = runs[0]
    assert metrics["test_auc"].iloc[-1] > 0.62
    assert metrics["time_s"].is_monotonic_increasing and (metrics["comm_s"] > 0).all()
    assert metrics["bytes"].iloc[-1] > 0


def test_systems_differ_in_time_not_in_bsp_accuracy() -> None:
    train, test, rows = toy_data(2048)
    out = {}
    for spec in (SystemSpec("h", "hybrid"), SystemSpec("a", "allreduce"),
                 SystemSpec("p", "ps"), SystemSpec("c", "cache", 100)):
        tr = _trainer(spec, rows, workers=4)
        out[spec.kind] = tr.fit(train, test, epochs=1, eval_every=100).iloc[-1]
    # Hybrid and AllReduce read fresh rows and apply the same updates: same model, other clock.
    assert out["hybrid"]["test_auc"] == pytest.approx(out["allreduce"]["test_auc"], abs=1e-6)
    assert out["hybrid"]["time_s"] != out["allreduce"]["time_s"]
    # ASP uses stale dense gradients: a different model.
    assert out["ps"]["test_auc"] != pytest.approx(out["hybrid"]["test_auc"], abs=1e-6)


def test_bad_batch_and_kind() -> None:
    _, _, rows = toy_data(256)
    with pytest.raises(ValueError, match="not divisible"):
        _trainer(SystemSpec("c", "cache", 1), rows, workers=3)
    with pytest.raises(ValueError, match="system kind"):
        SystemSpec("x", "gossip")


@given(st.lists(st.tuples(st.floats(-5, 5), st.booleans()), min_size=2, max_size=30))
@settings(max_examples=80, deadline=None)
def test_auc_matches_pair_counting(pairs) -> None:
    scores = np.array([p[0] for p in pairs])
    labels = np.array([p[1] for p in pairs], dtype=np.float32)
    pos, neg = scores[labels > 0], scores[labels == 0]
    if len(pos) == 0 or len(neg) == 0:
        assert np.isnan(auc_score(labels, scores))
        return
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    assert auc_score(labels, scores) == pytest.approx(wins / (len(pos) * len(neg)))


def test_time_to_target_and_bound_scaling() -> None:
    metrics = pd.DataFrame({"test_auc": [0.6, 0.7, 0.8], "time_s": [1.0, 2.0, 3.0]})
    assert time_to_target(metrics, 0.7) == 2.0 and np.isnan(time_to_target(metrics, 0.9))
    assert scaled_bound(100, 200, 44_766) == 1 and scaled_bound(0, 200, 44_766) == 0
    assert scaled_bound(-1, 200, 44_766) >= 10**9
    labels = [s.label for s in systems(load().experiments.het_train)]
    assert labels[0].startswith("Single") and "Cache s=100" in labels


def test_stage_outputs_on_ci_profile(ci_pipeline: Path) -> None:
    cfg = load(params=ci_pipeline)
    out = cfg.paths.resolve("results") / "het_train" / "synthetic"
    summary = json.loads((out / "summary.json").read_text())
    metrics = pd.read_csv(out / "metrics.csv")
    assert {r["system"] for r in summary["runs"]} >= {"Hybrid, no cache", "Cache s=100"}
    assert (metrics.groupby("system")["time_s"].max() > 0).all()
    timing = cfg.paths.resolve("results") / "het_time" / "synthetic"
    fig7 = pd.read_csv(timing / "fig7.csv")
    assert set(fig7["bandwidth_gbps"]) == {1.0, 10.0}
    one = fig7[fig7["bandwidth_gbps"] == 1.0].groupby("system")["epoch_s"].mean()
    ten = fig7[fig7["bandwidth_gbps"] == 10.0].groupby("system")["epoch_s"].mean()
    assert (ten < one).all()
    # 10 Gb/s is not 1 Gb/s rescaled: the communication shares differ, and the systems'
    # communication ratios to Cache s=100 change (latency and software cost do not scale)
    fig7["share"] = fig7["comm_s"] / fig7["epoch_s"]
    shares = fig7.pivot_table(index=["model", "system"], columns="bandwidth_gbps",
                              values="share")
    assert (shares[1.0] - shares[10.0]).abs().max() > 0.05
    comm = fig7.pivot_table(index=["model", "system"], columns="bandwidth_gbps",
                            values="comm_total_s")
    assert not np.allclose(comm[1.0] / comm[10.0], 10.0, rtol=0.05)
    # every timed stage records the calibrated clock it ran on
    clock = summary["clock"]
    assert clock["compute"] == "calibrated" and clock["per_sample_s"] >= 0
    assert clock["per_sample_s"] + clock["per_batch_s"] > 0
    time_summary = json.loads((timing / "summary.json").read_text())
    assert all(c["software"] == "calibrated" for c in time_summary["clock"].values())
    # Table 2 in both units; bounds of 0 and infinity are one run each
    units = {r["unit"] for r in summary["runs"] if r["group"] == "staleness"}
    assert units == {"paper", "scaled"}
    # time to target is interpolated: iterations to target need not be an evaluation point
    hit = [r for r in summary["runs"] if np.isfinite(r["iterations_to_target"] or np.nan)]
    assert all(r["iterations_to_target"] <= summary["iterations"] for r in hit)


def test_a_system_kind_says_how_it_synchronises() -> None:
    """The kind is a typed component: its routes, clock and cache follow from it, never from
    comparing its name (the time model reads the routes)."""
    from workbench.cluster.routes import DenseRoute, SparseRoute
    from workbench.training.components import SystemKind

    routes = {k: (k.routes.dense, k.routes.sparse) for k in SystemKind}
    assert routes[SystemKind.PS] == (DenseRoute.PS, SparseRoute.PS)
    assert routes[SystemKind.ALLREDUCE] == (DenseRoute.ALLREDUCE, SparseRoute.ALLGATHER)
    assert routes[SystemKind.HYBRID] == routes[SystemKind.CACHE] == (DenseRoute.ALLREDUCE,
                                                                       SparseRoute.PS)
    assert [k for k in SystemKind if k.asynchronous] == [SystemKind.PS]
    assert [k for k in SystemKind if k.single] == [SystemKind.PLAIN]
    assert SystemSpec("c", "cache", 10).kind is SystemKind.CACHE  # a name is converted
    assert SystemSpec("c", "cache", 10).cache_config(CacheConfig()).read_bound == 10
    assert SystemSpec("h", SystemKind.HYBRID).cache_config(CacheConfig()).policy == "none"
