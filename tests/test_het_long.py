"""HET's long training runs (``het_long``): the evaluation schedule, the systems, the refusal of a
short split, the stage's outputs on the ci profile, and a run in the pool equal to the same run
alone."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from helpers.traps import failed_with, run
from workbench.cluster.config import UNBOUNDED
from workbench.config import load
from workbench.data.pipeline import processed_dir
from workbench.experiments import het_long
from workbench.experiments.config import HET_CLOCK, HetLongConfig
from workbench.experiments.context import RunContext
from workbench.training.components import EvalSchedule, SystemKind


@given(every=st.integers(1, 50), until=st.integers(0, 500), then=st.integers(1, 500),
       iteration=st.integers(1, 5000))
def test_the_schedule_is_dense_up_to_its_end_then_sparse(every: int, until: int, then: int,
                                                         iteration: int) -> None:
    step = every if iteration <= until else then
    assert EvalSchedule(every, until, then).due(iteration) == (iteration % step == 0)


def test_systems_are_hybrid_and_the_cache_at_every_bound_in_hets_clock() -> None:
    plan = het_long.systems(HetLongConfig(bounds=[0, 100, 10_000, -1]))
    assert [s.label for s, _ in plan] == ["Hybrid, no cache", "Cache s=0", "Cache s=100",
                                         "Cache s=10000", "Cache s=inf"]
    assert plan[0][0].kind == SystemKind.HYBRID and plan[0][1] is None
    cached = [s for s, _ in plan[1:]]
    assert [s.bound for s in cached] == [0, 100, 10_000, UNBOUNDED]
    assert {s.clock for s in cached} == {HET_CLOCK}


def test_a_split_shorter_than_the_minimum_is_refused_with_the_key(ci_pipeline: Path,
                                                                  tmp_path: Path) -> None:
    proc = run("workbench.stages", "het-long", "--params", str(ci_pipeline),
               "experiments.het_long.min_iterations=100000", f"paths.results={tmp_path}")
    failed_with(proc, "ConfigError: experiments.het_long.min_iterations = 100,000",
                "synthetic_long")
    assert not (tmp_path / "het_long").exists()


def test_het_long_stage_outputs(ci_pipeline: Path) -> None:
    """Every system at every seed, evaluated on the schedule and at the end; Table 1's systems
    and targets; the machine's resources apart from the deterministic outputs."""
    cfg = load(params=ci_pipeline)
    exp = cfg.experiments.het_long
    out = cfg.paths.resolve("results") / "het_long" / exp.dataset
    summary = json.loads((out / "summary.json").read_text())
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == exp.seeds * (1 + len(exp.bounds)) == len(summary["runs"])
    assert summary["cache_clock"] == HET_CLOCK and summary["iterations"] >= exp.min_iterations
    assert summary["table1"] == ["Hybrid, no cache", f"Cache s={exp.table1_bound}"]
    schedule = EvalSchedule(exp.eval_every, exp.eval_until, exp.eval_every_late)
    expected = [i for i in range(1, summary["iterations"] + 1)
                if schedule.due(i) or i == summary["iterations"]]
    metrics = pd.read_csv(out / "metrics.csv")
    for _, curve in metrics.groupby(["replicate", "system"]):
        assert curve["iteration"].tolist() == expected
    targets = pd.read_csv(out / "targets.csv")
    assert sorted(targets["target_auc"].unique()) == sorted(
        {cfg.datasets[exp.dataset].target_auc, *exp.target_sweep})
    assert set(summary["table1"]) <= set(targets.columns)
    resources = json.loads((out / "resources.json").read_text())
    assert len(resources["runs"]) == len(runs) and "train_s" not in runs.columns


def test_a_run_in_the_pool_equals_the_same_run_alone(ci_pipeline: Path) -> None:
    """The runs side by side in spawned processes give the evaluations of the same run trained
    here, alone (one torch thread each: bit-reproducible)."""
    cfg = load(params=ci_pipeline)
    exps = cfg.experiments
    exp = exps.het_long
    results = cfg.paths.resolve("results")
    ctx = RunContext(processed=processed_dir(cfg.paths.resolve("data"), exp.dataset),
                     out=results / "het_long" / exp.dataset, seed=cfg.seed,
                     calibration=results / "calibration")
    runs = het_long.plan(ctx, exp, train_exp=exps.het_train,
                         model=cfg.models[exps.het_train.model], cluster=cfg.cluster,
                         cache=cfg.cache, dispatcher=cfg.dispatch.name).runs
    one = next(r for r in runs if r.system.label == f"Cache s={exp.table1_bound}")
    alone = het_long.train_one(one)["metrics"]
    stored = pd.read_csv(ctx.out / "metrics.csv")
    stored = stored[(stored["system"] == one.system.label) & (stored["seed"] == one.seed)]
    for column in ("iteration", "test_auc", "time_s", "bytes"):
        np.testing.assert_allclose(stored[column].to_numpy(), alone[column].to_numpy(),
                                   rtol=1e-5)
