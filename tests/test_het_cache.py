"""Traces, dispatch and the HET cache experiment on small inputs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from workbench.config import load
from workbench.data.keys import sample_keys, table_offsets, table_rows
from workbench.data.schema import DatasetMeta
from workbench.dispatch.base import assign, build_trace
from workbench.experiments.config import HetCacheConfig
from workbench.experiments.het_cache import run_all, run_once


@given(workers=st.integers(1, 6), per_worker=st.integers(1, 5), seed=st.integers(0, 5),
       name=st.sampled_from(["contiguous", "random"]))
def test_dispatch_gives_every_worker_exactly_b(workers, per_worker, seed, name) -> None:
    owner = assign(name, workers, per_worker, np.random.default_rng(seed))
    assert np.bincount(owner, minlength=workers).tolist() == [per_worker] * workers
    with pytest.raises(ValueError, match="dispatcher"):
        assign("laia?", workers, per_worker, np.random.default_rng(0))


def test_trace_layout_matches_brute_force() -> None:
    meta = DatasetMeta(name="t", source="local", rows={"train": 5, "test": 0}, dense=[],
                       categorical=["a", "b"], cardinalities={"a": 3, "b": 4})
    frame = pd.DataFrame({"a": [0, 1, 2, 1, 0], "b": [3, 0, 1, 2, 2]})
    keys = sample_keys(frame, meta)
    assert table_offsets(meta).tolist() == [0, 3] and table_rows(meta) == 7
    assert keys.tolist() == [[0, 6], [1, 3], [2, 4], [1, 5], [0, 5]]
    trace = build_trace(keys, workers=2, per_worker=1, epochs=2)
    # 5 samples hold 2 global batches of 2; the fifth sample is dropped; 2 epochs
    assert trace.shape == (4, 2, 2)
    assert trace[0].tolist() == [[0, 6], [1, 3]] and trace[2].tolist() == trace[0].tolist()
    shuffled = build_trace(keys, workers=2, per_worker=2, dispatcher="random", seed=1)
    assert sorted(map(tuple, shuffled[0].reshape(4, 2).tolist())) == sorted(
        map(tuple, keys[:4].tolist()))
    with pytest.raises(ValueError, match="no global batch"):
        build_trace(keys, workers=4, per_worker=2)


def _skewed_keys(n: int = 3000, features: int = 3, rows_per: int = 400) -> np.ndarray:
    rng = np.random.default_rng(0)
    ids = np.minimum(rng.zipf(1.3, size=(n, features)) - 1, rows_per - 1)
    return ids + np.arange(features) * rows_per


def test_protocol_knobs_move_rows_in_the_expected_direction() -> None:
    keys = _skewed_keys()
    trace = build_trace(keys, workers=4, per_worker=16)
    rows = 1200
    none = run_once(trace, rows, "none", 1.0, 0, 0, "bsp")
    s0 = run_once(trace, rows, "lfu", 0.1, 0, 0, "bsp")
    s100 = run_once(trace, rows, "lfu", 0.1, 100, 100, "bsp")
    assert none.rows_moved > s0.rows_moved > s100.rows_moved
    assert none.miss_rate == 1.0
    small = run_once(trace, rows, "lru", 0.03, 100, 100, "bsp")
    large = run_once(trace, rows, "lru", 0.15, 100, 100, "bsp")
    assert small.miss_rate > large.miss_rate


def test_run_all_tables_and_ps_equals_hybrid() -> None:
    cfg = dataclasses.replace(HetCacheConfig(), workers=4, batch_size=16, min_steps=10,
                              worker_sweep=[1, 2, 4], bound_sweep=[0, 10**9])
    frames, summary = run_all(_skewed_keys(), 1200, cfg, seed=0)
    assert set(frames) == {"miss_rate", "systems", "bounds", "workers"}
    assert len(frames["miss_rate"]) == len(cfg.cache_ratios) * len(cfg.policies)
    systems = frames["systems"].set_index("system")["rows_moved_per_epoch"]
    assert systems["PS (ASP), no cache"] == systems["Hybrid, no cache"]
    assert systems["Cache s=100"] < systems["Hybrid, no cache"]
    assert summary["steps"] * 4 * 16 <= 3000 and summary["table_rows"] == 1200


def test_stage_outputs_on_ci_profile(ci_pipeline: Path) -> None:
    cfg = load(params=ci_pipeline)
    out = cfg.paths.resolve("results") / "het_cache" / "synthetic"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["available"] and summary["workers"] == cfg.experiments.het_cache.workers
    for name in ("miss_rate", "systems", "bounds", "workers"):
        assert len(pd.read_csv(out / f"{name}.csv")) > 0


def test_config_rejects_bad_experiment_values() -> None:
    from workbench.utils.validation import ConfigError

    with pytest.raises(ConfigError, match=r"het_cache.cache_ratios\[0\] = 1.5"):
        load(["experiments.het_cache.cache_ratios=[1.5]"])
    with pytest.raises(ConfigError, match="claim_bound = 7"):
        load(["experiments.het_cache.claim_bound=7"])
    with pytest.raises(ConfigError, match="het_cache.datasets names 'avazu'"):
        load(["experiments.het_cache.datasets=[avazu]"])
