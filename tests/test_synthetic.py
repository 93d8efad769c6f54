"""The embedded synthetic generator: schema, calibration, learnability, sessions, determinism."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.data.config import SequenceConfig, SessionConfig, SyntheticConfig
from workbench.data.synthetic import (
    CATEGORICAL_NAMES,
    CRITEO_KAGGLE_CARDINALITIES,
    DENSE_NAMES,
    _ranges,
    calibrate_exponent,
    generate,
    scaled_cardinalities,
    top_share,
)
from workbench.experiments.dataset_stats import top_share as measured_top_share

SMALL = SyntheticConfig(rows=30_000, cardinality_scale=0.001)


def _auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Rank-based AUC (Mann-Whitney U), ties averaged."""
    ranks = pd.Series(scores).rank().to_numpy()
    pos = labels > 0.5
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def test_schema_and_cardinalities() -> None:
    table, cards = generate(SMALL, seed=0)
    assert table.dense == DENSE_NAMES and table.categorical == CATEGORICAL_NAMES
    assert len(table.frame) == SMALL.rows
    assert cards == scaled_cardinalities(0.001)
    assert cards["C3"] == int(np.ceil(CRITEO_KAGGLE_CARDINALITIES[2] * 0.001)) + 1
    for name in CATEGORICAL_NAMES:
        ids = table.frame[name].to_numpy()
        assert ids.min() >= 1 and ids.max() < cards[name]
    dense = table.frame[DENSE_NAMES].to_numpy()
    assert 0.15 < np.isnan(dense).mean() < 0.25  # dense_missing_rate 0.2
    assert set(np.unique(table.frame["label"])) == {0.0, 1.0}


def test_same_seed_same_bytes_other_seed_differs() -> None:
    a, _ = generate(SMALL, seed=3)
    b, _ = generate(SMALL, seed=3)
    c, _ = generate(SMALL, seed=4)
    pd.testing.assert_frame_equal(a.frame, b.frame)
    assert not a.frame["C3"].equals(c.frame["C3"])


@given(n=st.integers(2, 5000), target=st.floats(0.05, 0.95))
@settings(max_examples=60, deadline=None)
def test_calibrated_exponent_hits_the_target_share(n: int, target: float) -> None:
    alpha = calibrate_exponent(n, target)
    share = top_share(alpha, n)
    if alpha == 0.0:
        assert share >= target - 1e-9  # even uniform exceeds it (tiny table)
    elif alpha < 8.0:
        assert share == pytest.approx(target, abs=1e-6)


@given(n=st.integers(65_537, 400_000), alpha=st.floats(0.0, 8.0),
       fraction=st.sampled_from([0.001, 0.01, 0.2]))
@settings(max_examples=25, deadline=None)
def test_long_tables_share_equals_the_full_sum(n: int, alpha: float, fraction: float) -> None:
    """Past 65,536 rows the normaliser's tail is summed in closed form: the share equals the
    sum over every row to a few units in the last place."""
    k = max(1, int(np.ceil(fraction * n)))
    weights = np.arange(1, n + 1, dtype=np.float64) ** -alpha
    assert top_share(alpha, n, fraction) == pytest.approx(weights[:k].sum() / weights.sum(),
                                                          rel=1e-13)


def test_criteo_cardinality_exponents_are_the_full_sums_bit_for_bit() -> None:
    """The bisection over the closed-form tail lands on the same exponent as over every row's
    term (the generated ids, and so the datasets' bytes, do not move): Criteo's 2.2M-row C4."""
    from workbench.data import synthetic

    n = CRITEO_KAGGLE_CARDINALITIES[3]
    assert n > 2_000_000

    def full_sum(alpha: float, rows: int, fraction: float = 0.01) -> float:
        return float(synthetic._power_law(rows, alpha)[: max(1, int(np.ceil(fraction * rows)))]
                     .sum())

    lo, hi = 0.0, 8.0
    for _ in range(50):  # calibrate_exponent's bisection, on the full sums
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if full_sum(mid, n) < 0.6 else (lo, mid)
    assert calibrate_exponent(n, 0.6) == 0.5 * (lo + hi)


def test_measured_per_table_skew_matches_the_calibration() -> None:
    cfg = dataclasses.replace(SMALL, rows=200_000, cardinality_scale=0.01)
    table, cards = generate(cfg, seed=1)
    # C3 has ~101k rows at this scale: its top 1% should take ~60% of its lookups.
    counts = np.bincount(table.frame["C3"].to_numpy(), minlength=cards["C3"])[1:]
    assert measured_top_share(counts, 0.01) == pytest.approx(0.6, abs=0.05)


def test_labels_are_learnable_and_hit_the_ctr() -> None:
    cfg = dataclasses.replace(SMALL, rows=60_000)
    table, _ = generate(cfg, seed=0)
    frame = table.frame
    assert frame["label"].mean() == pytest.approx(cfg.ctr, abs=0.02)
    train, test = frame.iloc[:50_000], frame.iloc[50_000:]
    # A naive learner: per-feature smoothed target encoding fitted on train, logits summed.
    prior = train["label"].mean()
    score = np.zeros(len(test))
    for name in CATEGORICAL_NAMES:
        stats = train.groupby(name)["label"].agg(["sum", "count"])
        rate = (stats["sum"] + 20 * prior) / (stats["count"] + 20)
        p = test[name].map(rate).fillna(prior).to_numpy()
        score += np.log(p / (1 - p)) - np.log(prior / (1 - prior))
    assert _auc(score, test["label"].to_numpy()) > 0.65


def test_sessions_share_user_features_and_sequences_hold_history() -> None:
    cfg = dataclasses.replace(
        SMALL, sessions=SessionConfig(enabled=True, mean_length=6.0, user_features=["C1", "C2"]),
        sequence=SequenceConfig(enabled=True, length=5, item_feature="C3"))
    table, _ = generate(cfg, seed=0)
    frame = table.frame
    assert table.has_session and table.user_side == ["C1", "C2"]
    per_session = frame.groupby("session")[["C1", "C2"]].nunique()
    assert (per_session == 1).all().all()
    lengths = frame.groupby("session").size()
    assert lengths.mean() == pytest.approx(6.0, rel=0.15)
    hist = frame["hist_C3"].tolist()
    assert max(len(h) for h in hist) <= 5
    # Within a session, the history of sample k+1 ends with the item of sample k.
    sess, items = frame["session"].to_numpy(), frame["C3"].to_numpy()
    for i in np.flatnonzero(sess[1:] == sess[:-1])[:500]:
        assert hist[i + 1][-1] == items[i]


def test_unknown_user_feature_is_rejected() -> None:
    cfg = dataclasses.replace(SMALL, sessions=SessionConfig(enabled=True, user_features=["X9"]))
    with pytest.raises(ValueError, match="user_features names unknown features"):
        generate(cfg, seed=0)


@given(st.lists(st.integers(0, 6), max_size=20))
def test_ranges_equals_concatenated_aranges(lengths: list[int]) -> None:
    expected = np.concatenate([np.arange(n) for n in lengths]) if lengths else np.zeros(0)
    np.testing.assert_array_equal(_ranges(np.array(lengths, dtype=np.int64)), expected)


def test_keys_only_generator_draws_the_ids_chunk_draws() -> None:
    """The replays at full cardinality draw keys without the label model: the same ids as the
    full generator, as keys of the concatenated table (id 0, missing, never drawn)."""
    from workbench.data.synthetic import CATEGORICAL_NAMES, SyntheticGenerator

    cfg = SyntheticConfig(rows=1000, cardinality_scale=0.001)
    full = SyntheticGenerator(cfg, 3)
    keys_only = SyntheticGenerator(cfg, 3, keys_only=True)
    offsets = np.cumsum([0] + [full.cards[n] - 1 for n in CATEGORICAL_NAMES[:-1]])
    for rows in (300, 200):  # the streams continue across calls
        frame = full.chunk(rows)
        keys = keys_only.keys(rows)
        np.testing.assert_array_equal(keys, frame[CATEGORICAL_NAMES].to_numpy() + offsets - 1)
    assert keys.min() >= 0 and keys.max() < keys_only.table_rows == full.table_rows
    with pytest.raises(ValueError, match="keys_only"):
        keys_only.chunk(10)
