"""Embedding popularity (workbench.data.popularity): profiles, the hot set, popular inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import keys_and_hot
from workbench.data.popularity import (
    FLOAT_BYTES,
    OnlineProfile,
    hot_keys,
    hot_mask,
    popular_mask,
    profile_counts,
    scaled_budget_bytes,
)

# FAE's full Criteo Kaggle table: 33,762,577 rows x D = 16 (float32)
FULL_ROWS, FULL_DIM = 33_762_577, 16

counts_st = st.lists(st.integers(0, 6), min_size=0, max_size=40).map(
    lambda c: np.array(c, dtype=np.int64))


def _brute_hot(counts: np.ndarray, budget: int, dim: int) -> list[int]:
    """The N = budget // (4 D) most-counted keys with count > 0, ties to the smaller key."""
    capacity = budget // (4 * dim)
    ranked = sorted((k for k in range(len(counts)) if counts[k] > 0),
                    key=lambda k: (-counts[k], k))
    return sorted(ranked[:capacity])


# -- the hot set -----------------------------------------------------------------------------------
@given(counts_st, st.integers(0, 50 * 4 * 4), st.integers(1, 4))
@settings(max_examples=300, deadline=None)
def test_hot_set_fits_budget_and_equals_brute_force_top_n(counts, budget, dim) -> None:
    hot = hot_keys(counts, budget, dim)
    assert hot.dtype == np.int64
    assert len(hot) * FLOAT_BYTES * dim <= budget
    assert (counts[hot] > 0).all()                      # a key never counted is never hot
    assert np.array_equal(hot, np.unique(hot))          # ascending, no duplicates
    assert hot.tolist() == _brute_hot(counts, budget, dim)


def test_hot_set_ties_prefer_smaller_key_and_budget_edges() -> None:
    counts = np.array([3, 5, 3, 0, 5, 3, 1], dtype=np.int64)
    row = 4 * 2  # D = 2
    assert hot_keys(counts, 0, 2).tolist() == []
    assert hot_keys(counts, row - 1, 2).tolist() == []          # less than one row
    assert hot_keys(counts, 2 * row, 2).tolist() == [1, 4]
    assert hot_keys(counts, 3 * row, 2).tolist() == [0, 1, 4]   # 0 beats 2 and 5 on the tie
    assert hot_keys(counts, 4 * row + row - 1, 2).tolist() == [0, 1, 2, 4]
    # a budget beyond the counted keys: every counted key, never the zero-count key 3
    assert hot_keys(counts, 100 * row, 2).tolist() == [0, 1, 2, 4, 5, 6]
    with pytest.raises(ValueError):
        hot_keys(counts, -1, 2)
    with pytest.raises(ValueError):
        hot_keys(counts, 100, 0)


@given(st.integers(1, 30).flatmap(
    lambda rows: st.tuples(st.just(rows), st.lists(st.integers(0, rows - 1), max_size=30))))
@settings(max_examples=100, deadline=None)
def test_hot_mask_marks_exactly_the_hot_keys(case) -> None:
    rows, hot = case
    mask = hot_mask(np.array(hot, dtype=np.int64), rows)
    assert mask.dtype == bool and mask.shape == (rows,)
    assert [bool(mask[k]) for k in range(rows)] == [k in set(hot) for k in range(rows)]


# -- popular inputs --------------------------------------------------------------------------------
@given(keys_and_hot(min_samples=0))
@settings(max_examples=300, deadline=None)
def test_popular_mask_matches_per_sample_check(case) -> None:
    keys, is_hot = case
    got = popular_mask(keys, is_hot)
    expected = [all(bool(is_hot[k]) for k in row) for row in keys.tolist()]
    assert got.dtype == bool and got.tolist() == expected


def test_popular_mask_rejects_flat_keys() -> None:
    with pytest.raises(ValueError):
        popular_mask(np.arange(4), np.ones(4, dtype=bool))


# -- the profile -----------------------------------------------------------------------------------
@given(st.integers(1, 60), st.integers(1, 5), st.floats(1e-3, 1.0), st.integers(0, 2**31))
@settings(max_examples=100, deadline=None)
def test_profile_draws_round_rate_n_samples_and_is_seeded(n, f, rate, seed) -> None:
    rows = 17
    keys = np.random.default_rng(seed).integers(0, rows, size=(n, f))
    counts = profile_counts(keys, rows, rate, np.random.default_rng(seed))
    assert counts.dtype == np.int64 and counts.shape == (rows,)
    assert counts.sum() == max(1, round(rate * n)) * f
    # only keys that occur in the inputs are counted
    assert set(np.flatnonzero(counts)) <= set(keys.ravel().tolist())
    again = profile_counts(keys, rows, rate, np.random.default_rng(seed))
    assert np.array_equal(counts, again)


def test_profile_draws_with_replacement() -> None:
    # one distinct key per sample: a draw of n samples WITH replacement sees ~ (1 - 1/e) n of
    # them (n without replacement, which would mean every count is 1)
    n = 4000
    keys = np.arange(n, dtype=np.int64)[:, None]
    counts = profile_counts(keys, n, 1.0, np.random.default_rng(0))
    assert counts.sum() == n
    assert abs((counts > 0).mean() - (1 - np.exp(-1))) < 0.03
    assert counts.max() >= 2
    # another seed draws other samples
    other = profile_counts(keys, n, 1.0, np.random.default_rng(1))
    assert not np.array_equal(counts, other)


def test_profile_rejects_bad_rate_and_keys() -> None:
    keys = np.array([[0, 1], [2, 3]], dtype=np.int64)
    rng = np.random.default_rng(0)
    for rate in (0.0, -0.1, 1.5, float("nan")):
        with pytest.raises(ValueError):
            profile_counts(keys, 4, rate, rng)
    with pytest.raises(ValueError):
        profile_counts(keys, 3, 0.5, rng)                  # key 3 outside a 3-row table
    with pytest.raises(ValueError):
        profile_counts(np.array([[0, -1]]), 4, 0.5, rng)   # negative key
    with pytest.raises(ValueError):
        profile_counts(np.zeros((0, 2), dtype=np.int64), 4, 0.5, rng)
    with pytest.raises(ValueError):
        profile_counts(np.arange(4), 4, 0.5, rng)           # not [n, F]


# -- budgets ---------------------------------------------------------------------------------------
def test_fae_budget_fraction_of_the_full_table() -> None:
    table_bytes = FULL_ROWS * FULL_DIM * FLOAT_BYTES            # 2,160,804,928 B = 2.16 GB
    full = scaled_budget_bytes(256, FULL_ROWS, FULL_DIM, FULL_ROWS, FULL_DIM)
    # FAE's run_fae_profiler.sh passes --hot-emb-gpu-mem=268435456, i.e. 256 MiB, and the code
    # (and conf: "budgets in MiB") reads the budget in MiB: scaled to the full table itself it
    # gives back those bytes (to float truncation).
    assert abs(full - 256 * 2**20) <= 1
    # 256 MiB is 12.4% of the table (6.2 / 24.8% for 128 / 512 MiB), as the docs say
    assert full / table_bytes == pytest.approx(0.12423, abs=5e-5)
    for mb, fraction in ((128, 0.06211), (512, 0.24846)):
        got = scaled_budget_bytes(mb, FULL_ROWS, FULL_DIM, FULL_ROWS, FULL_DIM)
        assert got / table_bytes == pytest.approx(fraction, abs=5e-5)
    assert scaled_budget_bytes(0, FULL_ROWS, FULL_DIM, 1000, 8) == 0


@given(st.floats(0, 4096), st.integers(1, 10**6), st.integers(1, 64))
@settings(max_examples=200, deadline=None)
def test_scaling_preserves_the_fraction(mb, rows, dim) -> None:
    fraction = mb * 2**20 / (FULL_ROWS * FULL_DIM * FLOAT_BYTES)
    table_bytes = rows * dim * FLOAT_BYTES
    got = scaled_budget_bytes(mb, FULL_ROWS, FULL_DIM, rows, dim)
    assert isinstance(got, int) and got >= 0
    # the same fraction of these tables, truncated to whole bytes
    assert fraction * table_bytes - 1 - 1e-9 * table_bytes <= got <= fraction * table_bytes + 1e-6


def test_scaled_budget_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        scaled_budget_bytes(-1, FULL_ROWS, FULL_DIM, 10, 4)
    with pytest.raises(ValueError):
        scaled_budget_bytes(256, 0, FULL_DIM, 10, 4)
    with pytest.raises(ValueError):
        scaled_budget_bytes(256, FULL_ROWS, 0, 10, 4)


# -- online profile --------------------------------------------------------------------------------
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(1, 4), st.integers(0, 2**31)),
                max_size=6),
       st.integers(0, 200), st.integers(1, 4))
@settings(max_examples=100, deadline=None)
def test_online_profile_counts_equal_bincount_of_observed_keys(batches, budget, dim) -> None:
    rows = 13
    profile = OnlineProfile(rows)
    seen = []
    for b, f, seed in batches:
        keys = np.random.default_rng(seed).integers(0, rows, size=(b, f))
        profile.observe(keys)
        seen.append(keys.ravel())
    expected = np.bincount(np.concatenate(seen) if seen else np.zeros(0, dtype=np.int64),
                           minlength=rows)
    assert np.array_equal(profile.counts, expected)
    assert profile.batches == len(batches)
    assert np.array_equal(profile.hot(budget, dim), hot_keys(expected, budget, dim))
