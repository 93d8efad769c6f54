"""Sweeps: the distributed_check stage's outputs on the ci profile, and Hydra multirun over a
stage with the joblib launcher (each point in its own directory)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from workbench.config import load
from workbench.utils.paths import REPO_ROOT
from workbench.utils.validation import ConfigError


def test_distributed_check_stage_outputs(ci_pipeline: Path) -> None:
    from workbench.cluster.edge_network import EdgeNetwork

    cfg = load(params=ci_pipeline)
    exp = cfg.experiments.distributed_check
    out = cfg.paths.resolve("results") / "distributed_check" / cfg.experiments.het_train.dataset
    summary = json.loads((out / "summary.json").read_text())
    networks = [n for n in exp.networks if n != "kernel" or EdgeNetwork.available() is None]
    assert summary["networks"] == networks
    assert ("kernel" in summary["networks_skipped"]) == ("kernel" not in networks)
    checks = json.loads((out / "check.json").read_text())["bounds"]
    modes = exp.dense_modes
    assert [(c["network"], c["dense_mode"], c["bound"]) for c in checks] == [
        (n, m, b) for n in networks for m in modes for b in exp.bounds]
    for check in checks:
        assert check["counters_identical"] and check["embedding_bytes_identical"]
        assert check["meta_bytes_explained"] and check["versions_identical"]
        assert check["pulled_rows_emulated"] > 0
    assert summary["parameters_within_tolerance"]
    phases = pd.read_csv(out / "phases.csv")
    assert len(phases) and (phases["wall_measured"] > 0).all()
    assert sorted(set(phases["network"])) == sorted(networks)
    esd = pd.read_csv(out / "esd.csv")
    assert [tuple(r) for r in esd[["network", "dense_mode", "dispatcher"]].to_numpy()] == [
        (n, m, d) for n in networks for m in modes for d in exp.esd_dispatchers]
    assert esd["counters_identical"].all()
    # every mode and run has its phase ratios on the calibrated clock and on the refit one
    ratios = pd.DataFrame(summary["phase_ratios"])
    assert set(ratios["clock"]) == {"calibrated", "refit (in sample)", "refit (out of sample)"}
    assert set(ratios["dense_mode"]) == set(modes)
    overlapped = phases[phases["dense_mode"] == "overlapped"]
    if len(overlapped):  # DDP's buckets: several for the check's model
        assert (overlapped["buckets"] > 1).any()
    wire = pd.read_csv(out / "bytes.csv")
    if "kernel" in networks:  # every kernel run's bytes: the kernel's count >= the payload
        assert len(wire) == len(modes) * (exp.workers * len(exp.bounds)
                                          + exp.esd_workers * len(exp.esd_dispatchers))
        assert (wire["kernel_bytes"] > wire["backend_bytes"]).all()
    else:
        assert wire.empty


def test_het_scale_stage_outputs(ci_pipeline: Path) -> None:
    """The table-size study: every scale's replays, the cache moving fewer rows than Hybrid,
    the ratios in the summary, the measured resources apart."""
    cfg = load(params=ci_pipeline)
    exp = cfg.experiments.het_scale
    out = cfg.paths.resolve("results") / "het_scale" / exp.dataset
    table = pd.read_csv(out / "table_size.csv")
    assert sorted(set(table["scale"])) == sorted(exp.scales)
    assert (table["samples"] == exp.samples).all()
    rows = table.groupby("scale")["table_rows"].first()
    assert rows.is_monotonic_increasing and rows.iloc[0] < rows.iloc[-1]
    summary = json.loads((out / "summary.json").read_text())
    assert [r["scale"] for r in summary["ratios"]] == sorted(exp.scales)
    assert all(r["rows_moved"] > 1 for r in summary["ratios"])
    # a flush at the end pushes what Cache still holds dirty; Hybrid holds nothing
    hybrid, cache = (table[table["system"] == s] for s in ("Hybrid, no cache", "Cache s=100"))
    assert (hybrid["dirty_at_end"] == 0).all() and (cache["dirty_at_end"] > 0).all()
    assert (table["rows_moved_flushed"] == table["rows_moved"] + table["dirty_at_end"]).all()
    assert (cache["pushed_per_pulled"].to_numpy() < hybrid["pushed_per_pulled"].to_numpy()).all()
    assert [r["cache_pushed_per_pulled"] for r in summary["ratios"]] == pytest.approx(list(
        cache.sort_values("scale")["pushed_per_pulled"]), rel=1e-5)
    runs = json.loads((out / "resources.json").read_text())["runs"]
    assert len(runs) == 2 * len(exp.scales) and all(r["peak_rss_gb"] > 0 for r in runs)


def test_run_point_needs_a_sweepable_stage(tmp_path: Path) -> None:
    from workbench.config import compose
    from workbench.sweep import run_point

    cfg = compose(["profile=ci"])
    with pytest.raises(ConfigError, match=r"\+stage=<name>"):
        run_point(cfg, tmp_path)
    cfg = compose(["profile=ci", "+stage=report"])
    with pytest.raises(ConfigError, match="cannot be swept"):
        run_point(cfg, tmp_path)


def test_multirun_with_the_joblib_launcher(ci_pipeline: Path, tmp_path: Path) -> None:
    data = load(params=ci_pipeline).paths.resolve("data")
    sweep_dir = tmp_path / "sweep"
    cmd = [sys.executable, "-m", "workbench.sweep", "--multirun", "+stage=het-cache",
           "profile=ci", f"paths.data={data}", f"hydra.sweep.dir={sweep_dir}",
           "experiments.het_cache.batch_size=16,32", "hydra/launcher=joblib",
           "hydra.launcher.n_jobs=2"]
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TQDM_DISABLE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    for job in ("0", "1"):
        params = (sweep_dir / job / "params.yaml").read_text()
        assert f"batch_size: {16 if job == '0' else 32}" in params
        summary = sweep_dir / job / "results" / "het_cache" / "synthetic" / "summary.json"
        assert summary.exists(), list((sweep_dir / job).rglob("*"))
        # the timed stages' input: the project's calibration, copied beside the outputs
        assert (sweep_dir / job / "results" / "calibration" / "calibration.json").exists()
