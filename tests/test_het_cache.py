"""Traces, dispatch and the HET cache experiment on small inputs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.config import load
from workbench.data.keys import sample_keys, table_offsets, table_rows
from workbench.data.schema import DatasetMeta
from workbench.dispatch.base import BASELINES, baseline, build_trace, iter_trace
from workbench.experiments.config import HetCacheConfig
from workbench.experiments.het_cache import run_all, run_once
from workbench.utils.validation import ConfigError


@given(workers=st.integers(1, 6), per_worker=st.integers(1, 5), seed=st.integers(0, 5),
       name=st.sampled_from(["contiguous", "random"]))
def test_dispatch_gives_every_worker_exactly_b(workers, per_worker, seed, name) -> None:
    owner = baseline(name).draw(workers, per_worker, np.random.default_rng(seed))
    assert np.bincount(owner, minlength=workers).tolist() == [per_worker] * workers
    with pytest.raises(ConfigError, match=r"dispatcher 'laia\?': must be one of contiguous, "):
        baseline("laia?")
    with pytest.raises(ConfigError, match=r"dispatcher 'laia\?'"):
        build_trace(np.zeros((8, 2), np.int64), workers=1, per_worker=1, dispatcher="laia?")


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


def _reference_trace(keys, workers, per_worker, dispatcher, seed, epochs) -> np.ndarray:
    """The trace built the direct way: every step of every epoch, one global batch each."""
    batch = workers * per_worker
    steps = len(keys) // batch
    rng = np.random.default_rng(seed)
    draw = baseline(dispatcher).draw
    out = []
    for _ in range(epochs):
        for step in range(steps):
            owner = draw(workers, per_worker, rng)
            chunk = keys[step * batch: (step + 1) * batch]
            out.append([chunk[owner == w].ravel() for w in range(workers)])
    return np.array(out, dtype=np.int64)


@given(workers=st.integers(1, 4), per_worker=st.integers(1, 4), features=st.integers(1, 3),
       extra=st.integers(0, 30), epochs=st.integers(1, 3), window=st.integers(1, 6),
       seed=st.integers(0, 3), name=st.sampled_from(BASELINES), int32=st.booleans())
@settings(max_examples=60, deadline=None)
def test_trace_windows_concatenate_to_the_trace(workers, per_worker, features, extra, epochs,
                                                window, seed, name, int32) -> None:
    n = workers * per_worker + extra
    keys = np.random.default_rng(seed).integers(0, 1000, (n, features))
    keys = keys.astype(np.int32 if int32 else np.int64)
    windows = list(iter_trace(keys, workers, per_worker, name, seed, epochs, window_steps=window))
    trace = build_trace(keys, workers, per_worker, name, seed, epochs)
    assert all(w.dtype == np.int64 and 1 <= len(w) <= window for w in windows)
    assert all(len(w) == window for w in windows[:-1])
    np.testing.assert_array_equal(np.concatenate(windows), trace)
    np.testing.assert_array_equal(trace, _reference_trace(keys, workers, per_worker, name, seed,
                                                          epochs))


def test_iter_trace_checks_eagerly() -> None:
    keys = np.zeros((5, 2), np.int64)
    with pytest.raises(ValueError, match="no global batch"):
        iter_trace(keys, workers=4, per_worker=2)
    with pytest.raises(ValueError, match="window_steps"):
        iter_trace(keys, workers=1, per_worker=1, window_steps=0)


def test_replay_by_windows_equals_whole_trace() -> None:
    keys = _skewed_keys(n=1200).astype(np.int32)
    whole = build_trace(keys, workers=4, per_worker=16, dispatcher="random", seed=2, epochs=2)
    for policy, ratio, bound in (("lfuopt", 0.1, 100), ("lru", 0.05, 0), ("none", 1.0, 0)):
        expected = run_once(whole, 1200, policy, ratio, bound, bound, "bsp")
        got = run_once(iter_trace(keys, 4, 16, "random", seed=2, epochs=2, window_steps=3),
                       1200, policy, ratio, bound, bound, "bsp")
        assert got == expected


def test_run_all_cuts_max_samples_of_given_keys() -> None:
    keys = _skewed_keys()
    cfg = dataclasses.replace(HetCacheConfig(), workers=2, batch_size=16, min_steps=4,
                              worker_sweep=[2], bound_sweep=[0], cache_ratios=[0.1],
                              policies=["lru"], max_samples=500)
    frames, summary = run_all(keys, 1200, cfg, seed=0)
    cut, cut_summary = run_all(keys[:500], 1200, dataclasses.replace(cfg, max_samples=None),
                               seed=0)
    assert summary["samples"] == 500 and summary == cut_summary
    for name, frame in frames.items():
        pd.testing.assert_frame_equal(frame, cut[name])


def test_read_keys_over_row_groups_equal_sample_keys(tmp_path) -> None:
    from workbench.data.keys import read_keys
    from workbench.data.preprocess import read_split, write_split

    rng = np.random.default_rng(0)
    n = 3000
    cards = {"a": 5, "b": 70, "c": 3}
    frame = pd.DataFrame({"label": np.zeros(n, np.float32),
                          **{f: rng.integers(0, c, n).astype(np.int32) for f, c in cards.items()}})
    write_split(frame, tmp_path / "train.parquet", row_group_rows=1024)
    meta = DatasetMeta(name="t", source="local", rows={"train": n, "test": 0}, dense=[],
                       categorical=list(cards), cardinalities=cards)
    expected = sample_keys(read_split(tmp_path, "train", columns=meta.categorical), meta)
    for max_rows in (None, 1500, 1024, 7, 10**6):  # 1500 cuts inside the second group
        got = read_keys(tmp_path, meta, max_rows=max_rows)
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got.astype(np.int64), expected[:max_rows])
