"""Encoding, splitting and access statistics against brute force on small tables."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.data.preprocess import encode, split_point
from workbench.data.schema import DatasetMeta, ParseReport, RawTable
from workbench.experiments.config import DatasetStatsConfig
from workbench.experiments.dataset_stats import access_counts, rank_curve, top_share
from workbench.utils.io import atomic_dir, atomic_path, write_json

tokens = st.one_of(st.none(), st.sampled_from(["a", "b", "c", "d", "e", "f"]))


def _raw(cat: list, dense: list, hist: list | None = None) -> RawTable:
    frame = pd.DataFrame({"label": np.zeros(len(cat), np.float32), "I1": dense, "C1": cat})
    seq = {}
    if hist is not None:
        frame["hist"] = pd.Series(hist, dtype=object)
        seq = {"hist": "C1"}
    return RawTable(frame=frame, dense=["I1"], categorical=["C1"], sequences=seq,
                    report=ParseReport(rows=len(cat)))


@given(cat=st.lists(tokens, min_size=2, max_size=40), min_count=st.integers(1, 3),
       test_fraction=st.floats(0.05, 0.9))
@settings(max_examples=80, deadline=None)
def test_encoding_matches_brute_force(cat: list, min_count: int, test_fraction: float) -> None:
    dense = [float(i - 3) for i in range(len(cat))]
    enc = encode(_raw(cat, dense), test_fraction=test_fraction, min_count=min_count)
    cut = split_point(len(cat), test_fraction)
    assert len(enc.train) == cut and len(enc.test) == len(cat) - cut
    train_tokens = [t for t in cat[:cut] if t is not None]
    kept = sorted(t for t in set(train_tokens) if train_tokens.count(t) >= min_count)
    expected = [kept.index(t) + 1 if t in kept else 0 for t in cat]
    got = list(enc.train["C1"]) + list(enc.test["C1"])
    assert got == expected
    assert enc.cardinalities["C1"] == len(kept) + 1
    got_dense = np.r_[enc.train["I1"], enc.test["I1"]]
    np.testing.assert_allclose(got_dense, np.log1p(np.clip(dense, 0, None)), rtol=1e-6)


def test_sequences_share_the_item_vocabulary() -> None:
    enc = encode(_raw(["b", "a", "b", "c"], [1, 2, 3, 4], hist=[[], ["b"], ["b", "a"], ["z"]]),
                 test_fraction=0.25)
    # vocabulary fitted on the 3 train rows: a -> 1, b -> 2; c and z unseen -> 0
    assert list(enc.train["hist"].tolist()[2]) == [2, 1]
    assert list(enc.test["hist"].tolist()[0]) == [0]
    assert enc.test["C1"].tolist() == [0]


@given(st.lists(st.integers(0, 50), min_size=1, max_size=200), st.floats(0.001, 1.0))
def test_top_share_matches_sorting(counts: list[int], fraction: float) -> None:
    arr = np.array(counts)
    k = max(1, math.ceil(fraction * len(arr)))
    expected = sorted(counts, reverse=True)[:k]
    if arr.sum() == 0:
        assert math.isnan(top_share(arr, fraction))
    else:
        assert top_share(arr, fraction) == pytest.approx(sum(expected) / arr.sum())


def test_access_counts_and_rank_curve() -> None:
    frame = pd.DataFrame({"label": [0.0] * 4, "C1": [1, 1, 2, 0], "C2": [3, 3, 3, 1],
                          "hist": pd.Series([[1], [], [2, 2], []], dtype=object)})
    meta = DatasetMeta(name="t", source="local", rows={"train": 4, "test": 0}, dense=[],
                       categorical=["C1", "C2"], cardinalities={"C1": 3, "C2": 4},
                       sequences={"hist": "C1"})
    counts = access_counts(frame, meta)
    np.testing.assert_array_equal(counts.per_feature["C1"], [3, 3])  # id 0 excluded
    np.testing.assert_array_equal(counts.per_feature["C2"], [1, 0, 3])
    curve = rank_curve(counts.pooled(), points=10)
    assert curve["lookups"].tolist() == [3, 3, 3, 1]
    assert curve["cumulative_share"].iloc[-1] == pytest.approx(1.0)
    assert DatasetStatsConfig().skew_claim_share == 0.9


def test_atomic_writers_leave_nothing_on_failure(tmp_path) -> None:
    dest = tmp_path / "out.json"
    write_json(dest, {"a": 1})
    with pytest.raises(RuntimeError), atomic_path(dest) as tmp:
        tmp.write_text("half")
        raise RuntimeError("boom")
    assert dest.read_text().strip().startswith("{") and sorted(tmp_path.iterdir()) == [dest]
    target = tmp_path / "dir"
    with atomic_dir(target) as d:
        (d / "x").write_text("1")
    with pytest.raises(RuntimeError), atomic_dir(target) as d:
        (d / "y").write_text("2")
        raise RuntimeError("boom")
    assert [p.name for p in target.iterdir()] == ["x"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir", "out.json"]
    write_json(tmp_path / "nan.json", {"v": float("nan")})
    assert '"v": null' in (tmp_path / "nan.json").read_text()


@pytest.mark.parametrize("row_group_rows", [1024, 3000, 1 << 20])
def test_streaming_stats_over_row_groups_equal_one_frame(tmp_path, row_group_rows: int) -> None:
    from workbench.data.pipeline import STATUS
    from workbench.data.preprocess import iter_split, read_split, write_split
    from workbench.data.schema import META_FILE
    from workbench.experiments.dataset_stats import (
        SplitStats,
        dataset_statistics,
        run,
        split_statistics,
    )

    rng = np.random.default_rng(3)
    n = 5000
    frame = pd.DataFrame({
        "label": (rng.random(n) < 0.3).astype(np.float32),
        "I1": rng.random(n).astype(np.float32),
        "C1": np.minimum(rng.zipf(1.4, n), 60).astype(np.int32) - 1,
        "C2": rng.integers(0, 7, n).astype(np.int32),
        "session": np.sort(rng.integers(0, 700, n)).astype(np.int64),  # spans group boundaries
        "hist": pd.Series([list(rng.integers(0, 60, k)) for k in rng.integers(0, 4, n)],
                          dtype=object)})
    meta = DatasetMeta(name="t", source="local", rows={"train": n, "test": 0}, dense=["I1"],
                       categorical=["C1", "C2"], cardinalities={"C1": 60, "C2": 7},
                       sequences={"hist": "C1"}, has_session=True)
    (tmp_path / META_FILE).write_text(meta.to_json())
    write_json(tmp_path / STATUS, {"available": True, "reason": ""})
    write_split(frame, tmp_path / "train.parquet", row_group_rows=row_group_rows)
    cfg = DatasetStatsConfig()

    streamed = SplitStats(meta)
    groups = 0
    for table in iter_split(tmp_path, "train"):
        streamed.add(table)
        groups += 1
    assert groups == -(-n // row_group_rows)
    whole = read_split(tmp_path, "train")  # what the stage read before streaming
    summary, features, curve = split_statistics(streamed, meta, cfg)
    ref_summary, ref_features, ref_curve = dataset_statistics(whole, meta, cfg)
    assert summary == ref_summary
    assert summary["positive_rate"] == float(whole["label"].mean())
    assert summary["sessions"] == whole["session"].nunique()
    pd.testing.assert_frame_equal(features, ref_features)
    pd.testing.assert_frame_equal(curve, ref_curve)
    items = np.concatenate([np.asarray(h, np.int64) for h in frame["hist"]])
    expected_c1 = np.bincount(np.r_[frame["C1"], items], minlength=60)[1:]
    np.testing.assert_array_equal(streamed.access_counts().per_feature["C1"], expected_c1)

    run(tmp_path, tmp_path / "out", cfg)
    written = pd.read_csv(tmp_path / "out" / "features.csv")
    assert written["lookups"].tolist() == ref_features["lookups"].tolist()
    assert json.loads((tmp_path / "out" / "stats.json").read_text())["sessions"] == \
        ref_summary["sessions"]
