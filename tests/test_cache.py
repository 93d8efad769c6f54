"""The numba HET cache against the brute-force reference model, plus hand-worked rules.

The reference (``tests/reference_het.py``) is a separate, deliberately literal implementation of
Hetu's cache semantics (`workbench/cluster/cache.py`); every observable (outputs, counters, cached
keys, eviction order, line state, server rows and versions) must agree on random traces.
"""

from __future__ import annotations

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.reference_het import RefHET
from workbench.cluster.cache import COUNTERS, CacheSpec, ParameterServer, WorkerCache
from workbench.utils.bitset import bitset_arrays, drain_sorted, mark, rank_arrays, sorted_unique

POLICY = st.sampled_from(["lru", "lfu", "lfuopt", "none"])


def _pair(policy: str, capacity: int, workers: int, read_bound: int, write_bound: int,
          rows: int = 16, dim: int = 3, seed: int = 0):
    init = np.random.default_rng(seed).integers(-4, 5, size=(rows, dim)).astype(np.float32)
    ref = RefHET(init.astype(np.float64), workers, policy, capacity, read_bound, write_bound)
    ps = ParameterServer(init)
    spec = CacheSpec(policy, capacity, read_bound, write_bound)
    return ref, ps, [WorkerCache(spec, ps) for _ in range(workers)]


def _assert_same(ref: RefHET, ps: ParameterServer, caches: list[WorkerCache]) -> None:
    np.testing.assert_allclose(ps.values, ref.server_values, atol=1e-4)
    np.testing.assert_array_equal(ps.versions, ref.server_versions)
    for w, cache in enumerate(caches):
        assert cache.counter_dict() == ref.counters(w)
        assert list(cache.cached_keys()) == list(ref.cached_keys(w))
        assert cache.dirty_lines == sum(ref.line(w, k)["updates"] != 0
                                        for k in ref.cached_keys(w))
        assert cache.eviction_order() == list(ref.eviction_order(w))
        for key in ref.cached_keys(w):
            mine, theirs = cache.line(key), ref.line(w, key)
            assert (mine["version"], mine["updates"]) == (theirs["version"], theirs["updates"])
            np.testing.assert_allclose(mine["value"], theirs["value"], atol=1e-4)
            np.testing.assert_allclose(mine["grad"], theirs["grad"], atol=1e-4)


steps = st.lists(st.tuples(st.integers(0, 2), st.lists(st.integers(0, 15), max_size=10),
                           st.booleans()), min_size=1, max_size=25)


@given(policy=POLICY, capacity=st.integers(0, 6), workers=st.integers(1, 3),
       read_bound=st.integers(0, 3), write_bound=st.integers(0, 3), trace=steps)
@settings(max_examples=250, deadline=None)
def test_equivalent_to_reference(policy, capacity, workers, read_bound, write_bound,
                                 trace) -> None:
    ref, ps, caches = _pair(policy, capacity, workers, read_bound, write_bound)
    rng = np.random.default_rng(1)
    for w, keys, then_write in trace:
        w %= workers
        keys = np.array(keys, dtype=np.int64)
        np.testing.assert_allclose(caches[w].read(keys), ref.read(w, keys), atol=1e-4)
        if then_write:
            grads = rng.integers(-3, 4, size=(len(keys), 3)).astype(np.float32)
            caches[w].write(keys, grads)
            ref.write(w, keys, grads.astype(np.float64))
        _assert_same(ref, ps, caches)
    for w in range(workers):
        caches[w].flush()
        ref.flush(w)
    _assert_same(ref, ps, caches)


@given(policy=POLICY, capacity=st.integers(0, 5), read_bound=st.integers(0, 2),
       write_bound=st.integers(0, 4), trace=steps)
@settings(max_examples=150, deadline=None)
def test_protocol_properties(policy, capacity, read_bound, write_bound, trace) -> None:
    """No read is staler than the bound; flushing leaves the PS with every update; counters add
    up."""
    workers = 3
    _, ps, caches = _pair(policy, capacity, workers, read_bound, write_bound)
    init = ps.values.copy()
    total = np.zeros_like(init, dtype=np.float64)
    occurrences = np.zeros(len(init), dtype=np.int64)
    rng = np.random.default_rng(2)
    for w, keys, _ in trace:
        w %= workers
        keys = np.array(keys, dtype=np.int64)
        caches[w].read(keys)
        for k in np.unique(keys):
            line = caches[w].line(int(k))
            if line is not None:
                assert ps.versions[k] - line["version"] <= read_bound
        grads = rng.integers(-3, 4, size=(len(keys), init.shape[1])).astype(np.float32)
        caches[w].write(keys, grads)
        np.add.at(total, keys, grads)
        np.add.at(occurrences, keys, 1)
        for cache in caches:
            assert cache.size <= cache.capacity
    for cache in caches:
        c = cache.counter_dict()
        assert c["miss_pulls"] == c["misses"] <= c["unique_read"] <= c["keys_read"]
        assert c["stale_pulls"] <= c["unique_read"] - c["misses"]
        assert c["full_misses"] <= c["full_unique"] <= c["unique_read"]
        assert c["unique_written"] <= c["keys_written"]
        pushed = c["bound_pushes"] + c["evict_pushes"] + c["uncached_pushes"]
        assert c["meta_keys"] == c["unique_read"] + pushed  # keys+versions up, one per push
        cache.flush()
    np.testing.assert_allclose(ps.values, init + total, atol=1e-3)
    np.testing.assert_array_equal(ps.versions, occurrences)


# --------------------------------------------------------------------------------------------
# Hand-worked rules
# --------------------------------------------------------------------------------------------

def _one(policy: str, capacity: int, read_bound: int = 100, write_bound: int = 100,
         rows: int = 10, workers: int = 1):
    ps = ParameterServer(np.arange(rows * 2, dtype=np.float32).reshape(rows, 2))
    spec = CacheSpec(policy, capacity, read_bound, write_bound)
    return ps, [WorkerCache(spec, ps) for _ in range(workers)]


def test_lru_evicts_least_recent_and_inserts_misses_in_key_order() -> None:
    ps, (c,) = _one("lru", 3)
    c.read(np.array([5, 1, 5, 2]))          # misses inserted 1, 2, 5 -> recency 5 > 2 > 1
    assert c.eviction_order() == [1, 2, 5]
    c.read(np.array([7, 8, 1]))             # hit 1 first, then insert 7 (evicts 2), 8 (evicts 5)
    assert list(c.cached_keys()) == [1, 7, 8]
    assert c.counter_dict()["evictions"] == 2


def test_lfu_counts_read_and_write_touches() -> None:
    ps, (c,) = _one("lfu", 2)
    c.read(np.array([1]))
    c.write(np.array([1]), 0.0)             # key 1: freq 1 (insert) + 1 (write touch) = 2
    c.read(np.array([2]))                   # key 2: freq 1
    c.read(np.array([3]))                   # full: evicts the lowest frequency, key 2
    assert list(c.cached_keys()) == [1, 3]


def test_lfuopt_permanent_lines_and_full_of_permanent() -> None:
    ps, (c,) = _one("lfuopt", 1)
    for _ in range(5):                      # insert (1) + 4 reads + 5 writes = 10 uses
        c.read(np.array([4]))
        c.write(np.array([4]), 0.0)
    assert c.eviction_order() == []         # key 4 is permanent
    c.read(np.array([6]))                   # not cached: the only line is permanent
    assert list(c.cached_keys()) == [4] and c.counter_dict()["evictions"] == 0
    c.write(np.array([6, 6]), 1.0)          # uncached write: pushed directly
    assert c.counter_dict()["uncached_pushes"] == 1 and ps.versions[6] == 2


def test_stale_pull_exactly_beyond_the_read_bound() -> None:
    ps, (a, b) = _one("lru", 4, read_bound=1, write_bound=0, workers=2)
    a.read(np.array([3]))
    b.write(np.array([3]), 1.0)             # b: uncached -> direct push, server ver 1
    a.read(np.array([3]))                   # 1 - 0 = 1, not > 1: served stale
    assert a.counter_dict()["stale_pulls"] == 0
    b.write(np.array([3]), 1.0)             # server ver 2
    out = a.read(np.array([3]))             # 2 - 0 > 1: pulled
    assert a.counter_dict()["stale_pulls"] == 1 and a.line(3)["version"] == 2
    np.testing.assert_allclose(out[0], ps.values[3])


def test_read_my_updates_and_write_bound() -> None:
    ps, (a, b) = _one("lru", 4, read_bound=0, write_bound=2, workers=2)
    base = ps.values[3].copy()
    a.read(np.array([3]))
    a.write(np.array([3, 3]), 1.0)          # 2 updates, not > 2: kept locally
    assert a.line(3)["updates"] == 2 and ps.versions[3] == 0
    b.read(np.array([3]))
    b.write(np.array([3]), 10.0)            # b pushes? updates 1 <= 2: no
    b.write(np.array([3, 3]), 10.0)         # 3 > 2: pushed, server ver 3
    assert ps.versions[3] == 3
    out = a.read(np.array([3]))             # stale (3 - 0 > 0): server value + a's own grad
    np.testing.assert_allclose(out[0], base + 30.0 + 2.0)
    a.write(np.array([3]), 1.0)             # a: 3 updates > 2 -> push
    line = a.line(3)
    assert ps.versions[3] == 6 and (line["updates"], line["version"]) == (0, 6)


def test_dirty_eviction_is_pushed_at_the_next_write() -> None:
    ps, (c,) = _one("lru", 1)
    c.read(np.array([1]))
    c.write(np.array([1]), 1.0)             # dirty, below the bound
    c.read(np.array([2]))                   # evicts 1 (dirty): queued
    assert ps.versions[1] == 0
    c.write(np.array([2]), 1.0)
    assert ps.versions[1] == 1 and c.counter_dict()["evict_pushes"] == 1


def test_none_policy_pulls_and_pushes_everything() -> None:
    ps, (c,) = _one("none", 5)
    c.read(np.array([1, 2, 2]))
    c.write(np.array([1, 2, 2]), 1.0)
    counters = c.counter_dict()
    assert counters["miss_pulls"] == 2 and counters["uncached_pushes"] == 2
    assert counters["full_reads"] == 1 and list(c.cached_keys()) == []


def test_bad_inputs() -> None:
    ps, (c,) = _one("lru", 2)
    with pytest.raises(ValueError, match="grads has shape"):
        c.write(np.array([1, 2]), np.zeros((3, 2)))
    with pytest.raises(ValueError, match="cache policy"):
        CacheSpec("fifo", 1, 0, 0)
    assert set(COUNTERS) == set(c.counter_dict())


# --- speed mechanisms: bitmap dedup, shared key-major state, the reused dedup --------------

@numba.njit
def _bitset_dedup(keys, bitmap, summary, out):
    for k in keys:
        mark(bitmap, summary, k)
    return drain_sorted(bitmap, summary, out)


@given(keys=st.lists(st.integers(0, 9_999), max_size=300), rows=st.integers(10_000, 20_000))
@settings(max_examples=80, deadline=None)
def test_bitset_lists_distinct_keys_sorted_and_empties(keys, rows) -> None:
    bitmap, summary = bitset_arrays(rows)
    arr = np.array(keys, dtype=np.int64)
    out = np.empty(len(arr), dtype=np.int64)
    m = _bitset_dedup(arr, bitmap, summary, out)
    assert out[:m].tolist() == sorted(set(keys))
    assert not bitmap.any() and not summary.any()  # ready for the next call


@given(keys=st.lists(st.integers(0, 9_999), max_size=300), rows=st.integers(10_000, 20_000))
@settings(max_examples=60, deadline=None)
def test_sorted_unique_ranks_every_occurrence_and_empties(keys, rows) -> None:
    """The dedup by rank (bitmap + per-word counts + popcount) equals numpy's, on keys at the
    table's ends as well, and leaves the bitmap empty for the next call."""
    bitmap, summary = bitset_arrays(rows)
    rank = rank_arrays(rows)
    arr = np.array(keys + [0, rows - 1], dtype=np.int64)
    for _ in range(2):
        uniq, inv = sorted_unique(arr, bitmap, summary, rank)
        ref_uniq, ref_inv = np.unique(arr, return_inverse=True)
        np.testing.assert_array_equal(uniq, ref_uniq)
        np.testing.assert_array_equal(inv, ref_inv)
        assert not bitmap.any() and not summary.any()


def test_lru_fast_paths_equal_the_reference_on_a_longer_trace() -> None:
    """Batched inserts (misses <= capacity, victims all known up front), the write's in-place
    re-touch of the read's queue run and queue compactions in the middle of a read, against
    the brute-force reference; steps of up to 70 keys over 120 rows and 24 lines also take the
    one-at-a-time paths (more misses than lines, a read evicting its own hits)."""
    ref, ps, caches = _pair("lru", 24, 1, 2, 3, rows=120)
    rng = np.random.default_rng(7)
    for step in range(150):
        keys = rng.zipf(1.1, int(rng.integers(1, 70))) % 120
        np.testing.assert_allclose(caches[0].read(keys), ref.read(0, keys), atol=1e-4)
        if step % 5 != 4:  # most reads are followed by the write of their keys
            grads = rng.integers(-3, 4, size=(len(keys), 3)).astype(np.float32)
            caches[0].write(keys, grads)
            ref.write(0, keys, grads.astype(np.float64))
        _assert_same(ref, ps, caches)


def test_server_unique_matches_numpy() -> None:
    ps = ParameterServer(np.zeros((70_000, 1)))
    keys = np.random.default_rng(0).integers(0, 70_000, size=5_000)
    for _ in range(2):  # the second call finds the bitmap emptied by the first
        uniq, inv = ps.unique(keys)
        ref_uniq, ref_inv = np.unique(keys, return_inverse=True)
        np.testing.assert_array_equal(uniq, ref_uniq)
        np.testing.assert_array_equal(inv, ref_inv)


@given(policy=POLICY, trace=steps)
@settings(max_examples=60, deadline=None)
def test_cluster_caches_on_shared_state_equal_private_caches(policy, trace) -> None:
    """An EdgeCluster's caches (key-major slot table, stacked lines) behave as private ones."""
    from workbench.cluster.config import CacheConfig, ClusterConfig
    from workbench.cluster.edge_cluster import EdgeCluster

    init = np.random.default_rng(0).normal(size=(16, 3)).astype(np.float32)
    cluster = EdgeCluster(ClusterConfig(workers=3), CacheConfig(policy=policy, rows=4,
                                                                 read_bound=1, write_bound=1),
                          16, 3, init_values=init)
    ps = ParameterServer(init)
    private = [WorkerCache(cluster.spec, ps) for _ in range(3)]
    for w, keys, then_write in trace:
        keys = np.array(keys, dtype=np.int64)
        np.testing.assert_array_equal(cluster.read(w, keys), private[w].read(keys))
        if then_write:
            cluster.write(w, keys, -0.5)
            private[w].write(keys, -0.5)
    np.testing.assert_array_equal(cluster.server.values, ps.values)
    for w in range(3):
        assert cluster.caches[w].counter_dict() == private[w].counter_dict()
        assert cluster.caches[w].eviction_order() == private[w].eviction_order()
        np.testing.assert_array_equal(cluster.slot_of[:, w], private[w].slot_of)


def test_write_reuses_the_reads_dedup_only_for_the_same_keys() -> None:
    """A write of the keys just read skips its dedup; a caller that refills its key buffer in
    place between read and write must not get the old keys' dedup."""
    def run(reuse_buffer: bool) -> tuple[np.ndarray, dict]:
        ps = ParameterServer(np.zeros((10, 2)))
        cache = WorkerCache(CacheSpec("lru", 4, 0, 0), ps)
        buf = np.array([1, 2, 2, 3], dtype=np.int64)
        cache.read(buf)
        new = np.array([7, 7, 8, 9], dtype=np.int64)
        if reuse_buffer:
            buf[:] = new
            cache.write(buf, 1.0)
        else:
            cache.write(new, 1.0)
        return ps.values.copy(), cache.counter_dict()

    in_place, fresh = run(True), run(False)
    np.testing.assert_array_equal(in_place[0], fresh[0])
    assert in_place[1] == fresh[1]
    assert in_place[0][7].tolist() == [2.0, 2.0]  # both occurrences of key 7 pushed
