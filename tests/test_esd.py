"""ESD's cost model, dispatchers and the dispatch replay command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.cluster.config import CacheConfig, ClusterConfig
from workbench.cluster.edge_cluster import EdgeCluster
from workbench.config import load
from workbench.dispatch.base import run_dispatch
from workbench.dispatch.cost_model import CostModel
from workbench.dispatch.objective import additive_cost, additive_matrix, dedup_cost
from workbench.dispatch.registry import DispatcherSpec, SolverOptions, make_dispatcher
from workbench.utils.paths import REPO_ROOT
from workbench.utils.validation import ConfigError


def _cluster(workers=2, rows=20, cap=4, bound=1, bandwidths=(1.0, 0.5)) -> EdgeCluster:
    return EdgeCluster(ClusterConfig(workers=workers, bandwidth_gbps=list(bandwidths)),
                       CacheConfig(policy="lru", rows=cap, read_bound=bound, write_bound=bound),
                       rows, dim=4)


def test_cost_model_by_hand() -> None:
    cl = _cluster()
    tau = 16 / np.array([125e6, 62.5e6])       # 4 floats x 4 bytes over 1 and 0.5 Gb/s
    cl.read(0, np.array([1, 2]))                # worker 0 caches 1, 2 (clean)
    cl.write(0, np.array([2]), 1.0)             # key 2 dirty at worker 0 (1 update <= bound 1)
    cl.read(1, np.array([1]))
    cl.write(1, np.array([1, 1]), 1.0)          # worker 1 pushes key 1 twice: server ver 2
    cost = CostModel(cl).key_costs(np.array([1, 2, 3]))
    # worker 0: key 1 cached, server 2 ahead of version 0 > bound 1 -> stale: tau0
    #           key 2 cached, fresh: 0;   key 3 absent: tau0 (cache not full: no eviction)
    # worker 1: key 1 cached and fresh (it pushed): 0; key 2 absent: tau1, + worker 0 must sync
    #           its dirty key 2: + tau0;  key 3 absent: tau1
    np.testing.assert_allclose(cost, [[tau[0], 0.0, tau[0]],
                                      [0.0, tau[1] + tau[0], tau[1]]])


def test_batch_csr_and_additive_matrix() -> None:
    cl = _cluster()
    keys = np.array([[1, 2], [2, 2], [3, 1]])
    cost, indptr, indices = CostModel(cl).batch(keys)
    assert indptr.tolist() == [0, 2, 3, 5]       # sample 1 has one distinct key
    C = additive_matrix(cost, indptr, indices)
    brute = np.array([[cost[:, indices[indptr[i]:indptr[i + 1]]].sum(1)] for i in range(3)])
    np.testing.assert_allclose(C, brute[:, 0, :])
    # the dispatchers' fused path (key costs in a reused buffer): the same sums, bit for bit
    model = CostModel(cl)
    for batch in (keys, keys[::-1], np.array([[3, 3], [1, 2], [2, 1]]), keys):
        np.testing.assert_array_equal(model.sample_costs(batch),
                                      additive_matrix(*model.batch(batch)))


@given(seed=st.integers(0, 50), workers=st.integers(2, 3), per=st.integers(1, 3))
@settings(max_examples=20, deadline=None)  # 6 ILP solves each: 20 keep the suite under 15 min
def test_exact_beats_heuristic_and_hybrid_never_worse(seed, workers, per) -> None:
    rng = np.random.default_rng(seed)
    cl = _cluster(workers=workers, rows=30, cap=5, bandwidths=tuple(rng.uniform(0.1, 1,
                                                                               workers)))
    caps = np.full(workers, per, dtype=np.int64)
    keys = rng.integers(0, 30, size=(workers * per * 6, 3))
    run_dispatch(cl, keys[: workers * per * 3], make_dispatcher("random", cl, caps), 3)
    batch = keys[-workers * per:]
    cost, indptr, indices = CostModel(cl).batch(batch)
    C = additive_matrix(cost, indptr, indices)
    heur = make_dispatcher("esd_heuristic", cl, caps).decide(batch, 0).assignment
    dedup = SolverOptions(mode="dedup", time_limit_s=5)
    heur_dedup = make_dispatcher("esd_heuristic", cl, caps, SolverOptions(mode="dedup")).decide(
        batch, 0).assignment
    exact = make_dispatcher("esd_exact", cl, caps).decide(batch, 0).assignment
    exact_dedup = make_dispatcher("esd_exact", cl, caps, dedup).decide(batch, 0).assignment
    hybrid = make_dispatcher("hybriddis", cl, caps).decide(batch, 0)
    hybrid_dedup = make_dispatcher("hybriddis", cl, caps, dedup).decide(batch, 0)
    for x in (heur, heur_dedup, exact, exact_dedup, hybrid.assignment,
              hybrid_dedup.assignment):
        assert np.bincount(x, minlength=workers).tolist() == caps.tolist()
    # each mode's solvers optimise that mode's model
    assert additive_cost(C, exact) <= additive_cost(C, heur) + 1e-12
    assert additive_cost(C, hybrid.assignment) <= additive_cost(C, heur) + 1e-12
    assert dedup_cost(cost, indptr, indices, exact_dedup) <= \
        dedup_cost(cost, indptr, indices, heur_dedup) + 1e-12
    assert dedup_cost(cost, indptr, indices, hybrid_dedup.assignment) <= \
        dedup_cost(cost, indptr, indices, heur_dedup) + 1e-12


def test_hybriddis_switches_to_the_heuristic_over_budget() -> None:
    cl = _cluster(workers=2, rows=50, cap=8)
    caps = np.array([8, 8])
    keys = np.random.default_rng(0).integers(0, 50, size=(16 * 5, 3))
    hybrid = make_dispatcher("hybriddis", cl, caps, SolverOptions(budget_s=0.0, small_instance=0))
    methods = [r["method"] for r in run_dispatch(cl, keys, hybrid, 5)]
    assert methods[0].startswith("exact") and set(methods[1:]) == {"heuristic"}
    with pytest.raises(ConfigError, match="dispatcher 'nope': must be one of contiguous, "):
        make_dispatcher("nope", cl, caps)
    with pytest.raises(ValueError, match="makespan"):
        make_dispatcher("esd_exact", cl, caps, SolverOptions(mode="dedup", objective="makespan"))


@given(ratio=st.integers(1, 5), lookahead=st.integers(1, 6))
@settings(max_examples=20, deadline=None)
def test_hybriddis_saves_its_budget_for_the_exact_solver(ratio: int, lookahead: int) -> None:
    """With the exact solver ``ratio`` budgets long (fixed predictor), HybridDis deciding up to
    ``lookahead`` batches ahead runs it on every ``ratio``-th batch when the look-ahead holds
    one solve, and never otherwise; a look-ahead of 1 is the per-batch rule (issue 50)."""
    cl = _cluster(workers=2, rows=50, cap=8)
    caps = np.array([8, 8])
    keys = np.random.default_rng(1).integers(0, 50, size=(16 * 12, 3))
    per_variable = 1e-3
    budget = 16 * 2 * per_variable / ratio  # N x W = 32 variables: the solve is ratio budgets
    hybrid = make_dispatcher("hybriddis", cl, caps, SolverOptions(
        small_instance=0, seconds_per_variable=per_variable, lookahead=lookahead))
    hybrid.set_budget(budget)
    records = run_dispatch(cl, keys, hybrid, 12)
    exact = [r["method"].startswith("exact") for r in records]
    expected = [lookahead >= ratio and (t + 1) % ratio == 0 for t in range(12)]
    assert exact == expected
    assert all(r["charged_s"] == pytest.approx(0.0, abs=1e-12) for r in records)
    assert hybrid.decided == ({"heuristic": exact.count(False)} if not any(exact) else
                              {"heuristic": exact.count(False), records[ratio - 1]["method"]:
                               exact.count(True)} if ratio > 1 else
                              {records[0]["method"]: 12})
    with pytest.raises(ValueError, match="lookahead 0: must be at least 1"):
        SolverOptions(lookahead=0)


def test_makespan_objective_balances_the_slowest_worker() -> None:
    cl = _cluster(workers=2, rows=40, cap=6, bandwidths=(1.0, 0.1))
    caps = np.array([4, 4])
    keys = np.random.default_rng(1).integers(0, 40, size=(8, 3))
    cost, indptr, indices = CostModel(cl).batch(keys)
    C = additive_matrix(cost, indptr, indices)
    total = make_dispatcher("esd_exact", cl, caps).decide(keys, 0).assignment
    span = make_dispatcher("esd_exact", cl, caps, SolverOptions(objective="makespan")).decide(
        keys, 0)
    load = lambda x: max(C[x == j, j].sum() for j in range(2))  # noqa: E731
    assert load(span.assignment) <= load(total) + 1e-15


def test_dispatch_replay_command(tmp_path: Path) -> None:
    keys = np.random.default_rng(0).integers(0, 60, size=(50, 4))
    path = tmp_path / "keys.npy"
    np.save(path, keys)
    out = tmp_path / "out.json"
    proc = subprocess.run([sys.executable, "-m", "workbench.replay", "dispatch", "--trace",
                           str(path), "--dispatcher", "laia", "--workers", "3", "--per-worker",
                           "4", "--cache-rows", "10", "--batches", "6", "--out", str(out)],
                          capture_output=True, text=True, cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert len(doc["batches"]) == 6
    for t, batch in enumerate(doc["batches"]):
        samples = sorted(s for w in batch["workers"] for s in w["samples"])
        assert samples == sorted((np.arange(t * 12, (t + 1) * 12) % 50).tolist())
        for w in batch["workers"]:
            assert len(w["samples"]) == 4 and w["samples"] == sorted(w["samples"])
            assert {"sync_plan_size", "miss_pulls", "pulled_rows"} <= set(w)
    assert any(w["sync_plan_size"] > 0 for b in doc["batches"] for w in b["workers"])
    np.save(tmp_path / "bad.npy", np.zeros((3, 2, 2), dtype=np.int64))
    proc = subprocess.run([sys.executable, "-m", "workbench.replay", "dispatch", "--trace",
                           str(tmp_path / "bad.npy"), "--dispatcher", "random", "--workers",
                           "2", "--per-worker", "1", "--cache-rows", "1", "--batches", "1"],
                          capture_output=True, text=True, cwd=REPO_ROOT)
    assert proc.returncode == 2 and "expected 2 dimensions [sample, table]" in proc.stderr


def test_stage_outputs_on_ci_profile(ci_pipeline: Path) -> None:
    import pandas as pd

    cfg = load(params=ci_pipeline)
    out = cfg.paths.resolve("results") / "esd" / "synthetic"
    cost = pd.read_csv(out / "cost.csv")
    assert set(cost["dispatcher"]) == set(cfg.experiments.esd.dispatchers)
    assert set(cost["sweep"]) == {"base", "workers", "cache_ratio", "spread", "per_worker",
                                  "capacity", "budget", "predictor"}
    exp = cfg.experiments.esd
    # the budget and predictor sweeps run hybriddis alone, at every point
    budget = cost[cost["sweep"] == "budget"]
    assert set(budget["dispatcher"]) == {"hybriddis"}
    assert sorted(budget["budget_fraction"]) == sorted(exp.budget_sweep)
    predictor = cost[cost["sweep"] == "predictor"]
    assert set(predictor["dispatcher"]) == {"hybriddis"}
    assert sorted(predictor["predictor"]) == sorted(exp.predictor_sweep)
    solves = pd.read_csv(out / "exact_times.csv")  # every exact solve: V and its wall seconds
    assert (solves["variables"] == solves["samples"] * solves["workers"]).all()
    assert (solves["exact_s"] > 0).all() and {"esd_exact", "hybriddis"} <= set(solves["dispatcher"])
    assert set(cost.loc[cost["sweep"] == "capacity", "capacity"]) == set(exp.capacity_sweep)
    decision = pd.read_csv(out / "decision.csv")
    assert set(decision["sweep"]) == {"base", "budget", "predictor"}
    probe = pd.read_csv(out / "dedup_ilp.csv")
    assert probe["samples"].iloc[-1] == exp.workers * exp.per_worker
    assert (probe["ilp_cost"] <= probe["heuristic_cost"] * (1 + 1e-9)).all()
    summary = json.loads((out / "summary.json").read_text())
    assert "ours" in summary["formalisation"]
    assert {r["dispatcher"] for r in summary["train"]["runs"]} == set(
        cfg.experiments.esd.train_dispatchers)


def test_hybriddis_overrun_is_charged_to_the_clock() -> None:
    """The exact solver's predicted time beyond the budget (the last iteration's compute) is
    added to the emulated time, and only that."""
    from workbench.cluster.config import CacheConfig, ClusterConfig
    from workbench.cluster.time_model import ComputeCost
    from workbench.models.config import ModelConfig
    from workbench.training.components import ClusterSetup, ModelSpec, SystemSpec
    from workbench.training.trainer import Trainer

    rng = np.random.default_rng(0)
    from workbench.training.trainer import Split

    n = 64 * 4
    split = Split(rng.random((n, 3)).astype(np.float32), rng.integers(0, 200, (n, 4)),
                  (rng.random(n) < 0.3).astype(np.float32))
    model = ModelConfig(name="wdl", embedding_dim=4, deep_mlp=[8], batch_size=64)
    compute = ComputeCost(1e-3, 0.0, "test")  # 1 ms per iteration
    times = {}
    for spv in (1e-9, 1e-3):  # predicted exact time: ~0 s or 256 x 1 ms per batch
        tr = Trainer(ModelSpec(model, 3, 4, 200), SystemSpec("c", "cache", 10),
                     ClusterSetup(ClusterConfig(workers=4, bandwidth_gbps=[0.1, 1.0, 1.0, 1.0]),
                                  CacheConfig(policy="lru", rows=40), compute),
                     DispatcherSpec("hybriddis", SolverOptions(
                         small_instance=10**9, seconds_per_variable=spv, predictor="fixed")))
        for t in range(4):
            tr.step(split, t * 64)
        times[spv] = (tr.elapsed_s, tr.decision_s)
    assert times[1e-9][1] == 0.0
    charged = 4 * (64 * 4 * 1e-3 - 1e-3)  # 4 batches x (predicted - budget)
    assert times[1e-3][1] == pytest.approx(charged)
    assert times[1e-3][0] == pytest.approx(times[1e-9][0] + charged)


def test_worker_capacities_follow_speed_and_link() -> None:
    from workbench.cluster.config import ClusterConfig
    from workbench.experiments.esd import worker_capacities

    cfg = ClusterConfig(workers=4, bandwidth_gbps=[0.1, 0.5, 1.0, 1.0], speed=[1.0, 1.0, 0.5, 1.0])
    assert worker_capacities(cfg, 16, "equal").tolist() == [16] * 4
    caps = worker_capacities(cfg, 16, "proportional")
    assert caps.sum() == 64 and caps.min() >= 1
    # the 1 Gb/s, full-speed worker takes the most; the 100 Mb/s one the least
    assert caps[3] == caps.max() and caps[0] == caps.min() and caps[2] < caps[3]
    one = ClusterConfig(workers=3, bandwidth_gbps=[0.001, 1.0, 1.0])
    assert worker_capacities(one, 1, "proportional").min() >= 1  # everyone keeps a sample


@given(seed=st.integers(0, 200), workers=st.integers(1, 4))
@settings(max_examples=30, deadline=None)
def test_cost_model_equals_its_definition_per_worker(seed, workers) -> None:
    """The one-pass kernel over the key-major slot table gives the module docstring's A."""
    rng = np.random.default_rng(seed)
    cl = _cluster(workers=workers, rows=40, cap=6, bound=1,
                  bandwidths=tuple(rng.uniform(0.1, 1, workers)))
    for _ in range(8):
        w = int(rng.integers(workers))
        keys = rng.integers(0, 40, size=5)
        cl.read(w, keys)
        cl.write(w, keys, 0.5)
    uniq = np.unique(rng.integers(0, 40, size=25))
    model = CostModel(cl)
    states = [c.key_state(uniq) for c in cl.caches]
    expected = np.empty((workers, len(uniq)))
    for j, (present, stale, _) in enumerate(states):
        expected[j] = model.tau[j] * (~present * (1 + cl.caches[j].dirty_fraction()) + stale)
    sync = np.array([model.tau[j] * states[j][2] for j in range(workers)])
    expected += sync.sum(axis=0) - sync
    np.testing.assert_allclose(model.key_costs(uniq), expected, rtol=1e-12)


@pytest.mark.parametrize("dim", [8, 512])
def test_the_makespan_is_clocked_at_the_configured_width(dim: int) -> None:
    """cost.csv's makespan_s_per_batch and worker_comm_s are at the model's D, as transfer_s is:
    every worker's communication carries at least its rows x D x 4 bytes over its own link (a
    replay cluster clocked at its 4-wide stored rows gave 5.9 ms where D = 512 over 100 Mb/s is
    about 190 ms)."""
    from workbench.cluster.time_model import ComputeCost
    from workbench.experiments.esd import EsdPoint, one_run

    exp = load(["profile=ci"]).experiments.esd
    exp = exp.__class__(**{**exp.__dict__, "batches": 4, "warmup_max": 4})
    point = EsdPoint.base(exp)
    n = point.workers * point.per_worker
    keys = np.random.default_rng(0).integers(0, 400, (n * 12, 6))
    row, kept = one_run(keys, 400, exp, "laia", point, wire_dim=dim, seed=0,
                        compute=ComputeCost(1e-3, 0.0, "test"))
    for rec in kept:  # transfer_s = rows x D x 4 / B_j: the link arithmetic, per worker
        rows = rec["pulled_rows"] + rec["pushed_rows"]
        assert np.all(rec["comm_s"] >= rec["transfer_s"] * (1 - 1e-9))
        assert np.any(rows > 0)
    assert row["makespan_s_per_batch"] >= np.mean([r["transfer_s"].max() for r in kept]) > 0
    per_worker = np.array(row["worker_comm_s"].split(), float)
    assert np.all(per_worker >= np.mean([r["transfer_s"] for r in kept], axis=0) * (1 - 1e-6))
    wrong = EdgeCluster(ClusterConfig(workers=2), CacheConfig(policy="lru", rows=4), 20, 4)
    with pytest.raises(ValueError, match="wire_dim 512 differs from the cluster's 4"):
        run_dispatch(wrong, keys[:8] % 20, make_dispatcher(
            "random", wrong, np.array([2, 2]), SolverOptions(), wire_dim=512, seed=0), 1,
            wire_dim=512)
