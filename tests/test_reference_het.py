"""Hand-worked traces and properties for the HET reference model (tests/reference_het.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.reference_het import COUNTERS, RefHET

INF = 10**9


def make(policy="lru", capacity=3, workers=1, read_bound=INF, write_bound=INF, rows=10, dim=1):
    # init value of key k is 100*k (+ j for column j) so values identify their key
    init = np.array([[100.0 * k + j for j in range(dim)] for k in range(rows)])
    return RefHET(init, workers, policy, capacity, read_bound, write_bound)


def g(*vals):
    return np.array(vals, dtype=np.float64).reshape(-1, 1)


def test_interface_counters_and_shapes():
    h = make(dim=2)
    out = h.read(0, np.array([3, 1, 3]))
    assert out.shape == (3, 2)
    np.testing.assert_array_equal(out, [[300, 301], [100, 101], [300, 301]])
    assert set(h.counters(0)) == set(COUNTERS)
    assert h.cached_keys(0) == [1, 3]
    ln = h.line(0, 3)
    assert set(ln) == {"value", "grad", "version", "updates"}
    assert h.line(0, 5) is None
    assert h.server_values.shape == (10, 2) and h.server_versions.shape == (10,)
    # empty batch
    assert h.read(0, np.array([], dtype=np.int64)).shape == (0, 2)


def test_lru_eviction_order():
    h = make("lru", capacity=3)
    h.read(0, np.array([3, 1, 2]))        # misses inserted ascending: 1, 2, 3
    assert h.eviction_order(0) == [1, 2, 3]
    h.read(0, np.array([1]))              # touch 1 -> most recent
    assert h.eviction_order(0) == [2, 3, 1]
    h.read(0, np.array([4]))              # evicts 2
    assert h.cached_keys(0) == [1, 3, 4]
    assert h.eviction_order(0) == [3, 1, 4]
    assert h.counters(0)["evictions"] == 1
    # more misses than capacity: order [3,1,4]; insert 5 evicts 3, 6 evicts 1,
    # 7 evicts 4, 8 evicts 5 (a key inserted earlier in the same step)
    h.read(0, np.array([8, 7, 6, 5]))
    assert h.cached_keys(0) == [6, 7, 8]
    assert h.eviction_order(0) == [6, 7, 8]
    assert h.counters(0)["evictions"] == 5
    assert h.counters(0)["evict_pushes"] == 0   # nothing was dirty


def test_lfu_frequency_beats_recency():
    h = make("lfu", capacity=2)
    for _ in range(3):
        h.read(0, np.array([1]))          # 1: freq 3
    h.read(0, np.array([2]))              # 2: freq 1 (more recent)
    assert h.eviction_order(0) == [2, 1]
    h.read(0, np.array([3]))              # LFU evicts 2 (LRU would evict 1)
    assert h.cached_keys(0) == [1, 3]


def test_lfu_double_touch_per_step():
    h = make("lfu", capacity=2)
    h.read(0, np.array([2]))              # 2: (freq 1, t1)
    h.read(0, np.array([2]))              # 2: (2, t2)
    h.read(0, np.array([1]))              # 1: (1, t3)
    assert h.eviction_order(0) == [1, 2]
    h.write(0, np.array([1]), g(1.0))     # write touch: 1: (2, t4)
    # both frequency 2; 2 entered frequency 2 earlier -> next victim
    assert h.eviction_order(0) == [2, 1]
    h.read(0, np.array([1]))              # 1: (3, t5)
    h.write(0, np.array([1]), g(1.0))     # 1: (4, t6)
    h.read(0, np.array([2]))              # 2: (3, t7)
    assert h.eviction_order(0) == [2, 1]  # freq 3 < freq 4 although 2 is more recent
    h.read(0, np.array([5]))
    assert h.cached_keys(0) == [1, 5]


def test_lfuopt_permanence_and_all_permanent_not_cached():
    h = make("lfuopt", capacity=2)
    h.read(0, np.array([1]))              # count 1
    for _ in range(8):
        h.read(0, np.array([1]))          # count 9 after 8 touches
    assert h.eviction_order(0) == [1]
    h.read(0, np.array([1]))              # count 10 -> permanent
    assert h.eviction_order(0) == []
    h.read(0, np.array([2]))              # room left: cached
    assert h.eviction_order(0) == [2]
    h.read(0, np.array([3]))              # evicts 2, the only non-permanent line
    assert h.cached_keys(0) == [1, 3]
    assert h.counters(0)["evictions"] == 1
    for _ in range(9):
        h.read(0, np.array([3]))          # 3 -> permanent
    assert h.eviction_order(0) == []
    c0 = h.counters(0)
    out = h.read(0, np.array([4, 4]))     # miss, pulled, insert fails
    np.testing.assert_array_equal(out, [[400], [400]])
    assert h.cached_keys(0) == [1, 3]
    c1 = h.counters(0)
    assert c1["evictions"] == c0["evictions"]
    assert c1["misses"] - c0["misses"] == 1 and c1["miss_pulls"] - c0["miss_pulls"] == 1
    assert c1["full_reads"] - c0["full_reads"] == 1   # cache holds capacity lines
    h.write(0, np.array([4]), g(5.0))     # uncached -> pushed directly
    assert h.counters(0)["uncached_pushes"] == 1
    assert h.server_values[4, 0] == 405 and h.server_versions[4] == 1


def test_lfuopt_read_and_write_touch_twice():
    h = make("lfuopt", capacity=2)
    h.read(0, np.array([1]))                  # insert: count 1
    h.write(0, np.array([1]), g(0.0))         # count 2
    for _ in range(3):                        # +2 per step -> 8
        h.read(0, np.array([1]))
        h.write(0, np.array([1]), g(0.0))
    assert h.eviction_order(0) == [1]
    h.read(0, np.array([1]))                  # 9
    assert h.eviction_order(0) == [1]
    h.write(0, np.array([1]), g(0.0))         # 10 -> permanent
    assert h.eviction_order(0) == []


@pytest.mark.parametrize("s_read", [0, 1])
def test_stale_pull_exactly_when_gap_exceeds_bound(s_read):
    h = make("lru", capacity=3, workers=2, read_bound=s_read, write_bound=0)
    h.read(0, np.array([1]))                  # w0 caches 1 at version 0, value 100
    h.read(1, np.array([1]))
    h.write(1, np.array([1]), g(1.0))         # updates 1 > 0 -> pushed: ver 1, value 101
    assert h.server_versions[1] == 1 and h.server_values[1, 0] == 101
    out = h.read(0, np.array([1]))            # gap 1 - 0 = 1
    if s_read == 0:                           # 1 > 0: pull
        assert h.counters(0)["stale_pulls"] == 1
        assert out[0, 0] == 101 and h.line(0, 1)["version"] == 1
    else:                                     # 1 > 1 false: stale value served
        assert h.counters(0)["stale_pulls"] == 0
        assert out[0, 0] == 100 and h.line(0, 1)["version"] == 0
    h.read(1, np.array([1]))
    h.write(1, np.array([1]), g(1.0))         # server ver 2, value 102
    out = h.read(0, np.array([1]))            # gap 2-1=1 (s=0) or 2-0=2 (s=1): both pull
    assert out[0, 0] == 102
    assert h.line(0, 1)["version"] == 2
    assert h.counters(0)["stale_pulls"] == (2 if s_read == 0 else 1)
    assert h.counters(0)["miss_pulls"] == 1


def test_read_my_updates():
    h = make("lru", capacity=3, workers=2, read_bound=0, write_bound=INF)
    h.read(0, np.array([1]))                  # w0: value 100, version 0
    h.write(0, np.array([1]), g(3.0))         # w0 line: value 103, grad 3, updates 1 (not pushed)
    assert h.server_values[1, 0] == 100
    h.write(1, np.array([1]), g(10.0))        # w1 does not cache 1: direct push -> 110, ver 1
    assert h.server_values[1, 0] == 110 and h.server_versions[1] == 1
    out = h.read(0, np.array([1]))            # gap 1 > 0: pull 110 + own grad 3 = 113
    assert out[0, 0] == 113
    ln = h.line(0, 1)
    assert ln["version"] == 1 and ln["grad"][0] == 3 and ln["updates"] == 1
    h.flush(0)
    assert h.server_values[1, 0] == 113 and h.server_versions[1] == 2
    assert h.counters(0)["flush_pushes"] == 1


def test_per_occurrence_updates_and_bound_push():
    h = make("lru", capacity=3, write_bound=2)
    h.read(0, np.array([1, 1]))
    h.write(0, np.array([1, 1]), g(1.0, 2.0))   # updates 2, 2 > 2 false: kept
    ln = h.line(0, 1)
    assert ln["updates"] == 2 and ln["grad"][0] == 3 and ln["value"][0] == 103
    assert h.counters(0)["bound_pushes"] == 0 and h.server_versions[1] == 0
    h.write(0, np.array([1]), g(4.0))           # updates 3 > 2: push grad 7, 3 updates
    assert h.server_values[1, 0] == 107 and h.server_versions[1] == 3
    ln = h.line(0, 1)
    assert ln["updates"] == 0 and ln["grad"][0] == 0 and ln["version"] == 3
    assert ln["value"][0] == 107
    c = h.counters(0)
    assert c["bound_pushes"] == 1
    assert c["meta_keys"] == 1 + 0 + 1          # read: 1 unique; writes: 0 rows, then 1 row
    assert c["keys_written"] == 3 and c["unique_written"] == 2 and c["writes"] == 2


def test_dirty_eviction_queued_then_pushed_at_next_write():
    h = make("lru", capacity=1)
    h.read(0, np.array([1]))
    h.write(0, np.array([1]), g(5.0))           # dirty: grad 5, updates 1
    h.read(0, np.array([2]))                    # evicts 1 -> queued, server untouched
    assert h.evict_queue(0)[0][0] == 1 and h.evict_queue(0)[0][2] == 1
    assert h.server_values[1, 0] == 100 and h.server_versions[1] == 0
    assert h.counters(0)["evictions"] == 1
    h.write(0, np.array([2]), g(1.0))           # 2 cached, updates 1 <= INF; queue pushed
    assert h.server_values[1, 0] == 105 and h.server_versions[1] == 1
    assert h.server_versions[2] == 0
    c = h.counters(0)
    assert c["evict_pushes"] == 1 and c["bound_pushes"] == 0 and c["uncached_pushes"] == 0
    assert c["meta_keys"] == 1 + 0 + 1 + 1
    assert h.evict_queue(0) == []
    # a clean eviction is counted but not queued
    h.flush(0)                                  # pushes 2 (flush_pushes)
    h.read(0, np.array([3]))
    assert h.counters(0)["evictions"] == 2 and h.evict_queue(0) == []


def test_uncached_write_pushed_directly():
    h = make("lru", capacity=1)
    h.write(0, np.array([3, 5, 3]), g(1.0, 2.0, 4.0))
    assert h.server_values[3, 0] == 305 and h.server_versions[3] == 2
    assert h.server_values[5, 0] == 502 and h.server_versions[5] == 1
    c = h.counters(0)
    assert c["uncached_pushes"] == 2 and c["meta_keys"] == 2
    assert c["keys_written"] == 3 and c["unique_written"] == 2
    assert h.cached_keys(0) == []               # writes never insert


def test_full_cache_miss_accounting():
    h = make("lru", capacity=2)
    h.read(0, np.array([1]))                    # 1 line: not full
    c = h.counters(0)
    assert c["full_reads"] == 0 and c["misses"] == 1
    h.read(0, np.array([3, 2]))                 # insert 2 (full), 3 evicts 1 -> full
    c = h.counters(0)
    assert (c["full_reads"], c["full_unique"], c["full_misses"]) == (1, 2, 2)
    h.read(0, np.array([2, 4, 4]))              # hit 2, miss 4 evicts 3
    c = h.counters(0)
    assert (c["full_reads"], c["full_unique"], c["full_misses"]) == (2, 4, 3)
    assert (c["reads"], c["keys_read"], c["unique_read"], c["misses"]) == (3, 6, 5, 4)
    assert c["miss_pulls"] == 4 and c["evictions"] == 2 and c["meta_keys"] == 5


@pytest.mark.parametrize("policy,capacity", [("none", 5), ("lru", 0), ("lfu", 0), ("lfuopt", 0)])
def test_none_policy_pulls_and_pushes_everything(policy, capacity):
    h = make(policy, capacity=capacity)
    out = h.read(0, np.array([1, 1, 2]))
    np.testing.assert_array_equal(out[:, 0], [100, 100, 200])
    assert h.cached_keys(0) == []
    h.write(0, np.array([1, 1, 2]), g(1.0, 2.0, 3.0))
    assert list(h.server_versions[:3]) == [0, 2, 1]
    out = h.read(0, np.array([2, 1]))
    np.testing.assert_array_equal(out[:, 0], [203, 103])
    c = h.counters(0)
    assert c["misses"] == 4 and c["miss_pulls"] == 4 and c["stale_pulls"] == 0
    assert c["uncached_pushes"] == 2 and c["evictions"] == 0
    assert (c["full_reads"], c["full_unique"], c["full_misses"]) == (2, 4, 4)
    assert c["meta_keys"] == 2 + 2 + 2


# --------------------------------------------------------------------- property

ROWS, DIM = 16, 2


@st.composite
def traces(draw):
    workers = draw(st.integers(1, 3))
    policy = draw(st.sampled_from(["lru", "lfu", "lfuopt", "none"]))
    capacity = draw(st.integers(0, 6))
    read_bound = draw(st.integers(0, 3))
    write_bound = draw(st.integers(0, 3))
    steps = draw(st.lists(
        st.tuples(st.sampled_from(["read", "write", "step"]),
                  st.integers(0, workers - 1),
                  st.lists(st.integers(0, ROWS - 1), min_size=0, max_size=8)),
        min_size=1, max_size=30))
    seed = draw(st.integers(0, 2**32 - 1))
    return workers, policy, capacity, read_bound, write_bound, steps, seed


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces())
def test_property_conservation_and_staleness(trace):
    workers, policy, capacity, read_bound, write_bound, steps, seed = trace
    rng = np.random.default_rng(seed)
    init = rng.normal(size=(ROWS, DIM))
    h = RefHET(init, workers, policy, capacity, read_bound, write_bound)
    grad_sum = np.zeros((ROWS, DIM))
    occ = np.zeros(ROWS, dtype=np.int64)
    for op, w, keys in steps:
        keys = np.array(keys, dtype=np.int64)
        if op in ("read", "step"):
            out = h.read(w, keys)
            assert out.shape == (len(keys), DIM)
            for i, k in enumerate(keys):
                ln = h.line(w, k)
                # duplicate occurrences read the same value
                np.testing.assert_array_equal(out[i], out[list(keys).index(k)])
                if ln is not None:
                    assert h.server_versions[k] - ln["version"] <= read_bound
            assert len(h.cached_keys(w)) <= (0 if policy == "none" else capacity)
        if op in ("write", "step"):
            grads = rng.normal(size=(len(keys), DIM))
            h.write(w, keys, grads)
            np.add.at(grad_sum, keys, grads)
            np.add.at(occ, keys, 1)
    for w in range(workers):
        h.flush(w)
        for k in h.cached_keys(w):
            ln = h.line(w, k)
            assert ln["updates"] == 0 and not ln["grad"].any()
    np.testing.assert_allclose(h.server_values, init + grad_sum, atol=1e-9, rtol=0)
    np.testing.assert_array_equal(h.server_versions, occ)
    for w in range(workers):
        c = h.counters(w)
        assert c["misses"] == c["miss_pulls"]
        assert c["full_reads"] <= c["reads"] and c["full_misses"] <= c["misses"]
