"""Herald's LAIA dispatcher (``workbench.dispatch.laia``): hand-worked cases and a brute-force
reference.

The reference below is a deliberately literal transcription of Herald's scheduler (and of
Herald's ``MiniLRUCache`` / ``LaiaScheduler::get_dist``) built on ``OrderedDict``; the numba
dispatcher must agree with it on every observable of random small traces.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.dispatch.laia import COLUMNS, LaiaDispatcher

# ------------------------------------------------------------------------------------------
# Brute-force reference
# ------------------------------------------------------------------------------------------


class RefLaia:
    """Literal LAIA: one OrderedDict per worker, key -> valid flag, last item most recent."""

    def __init__(self, workers: int, caps: list[int]) -> None:
        self.workers = workers
        self.caps = list(caps)
        self.snaps = [OrderedDict() for _ in range(workers)]

    def valid(self, w: int, key: int) -> bool:
        return self.snaps[w].get(key, False)

    def get(self, w: int, key: int) -> int:
        """MiniLRUCache::get: -1 valid hit, -2 outdated hit, 0 miss, 1 miss evicting a valid."""
        snap = self.snaps[w]
        if key in snap:
            res = -1 if snap[key] else -2
            snap.move_to_end(key)
            snap[key] = True
            return res
        # MiniLRUCache::insert: push to the front, then pop the back when over capacity
        snap[key] = True
        if len(snap) > self.caps[w]:
            _, flag = snap.popitem(last=False)
            return 1 if flag else 0
        return 0

    def dispatch(self, keys: list[list[int]], quota: list[int], batch_id: int):
        n, w_n = len(keys), self.workers
        scores = [[sum(1 for k in keys[i] if self.valid(z, k)) for z in range(w_n)]
                  for i in range(n)]
        load = [0] * w_n
        assignment = []
        for i in range(n):
            max_score, max_worker = -1, -1
            for j in range(w_n):
                z = (j + batch_id) % w_n
                if load[z] < quota[z] and max_score < scores[i][z]:
                    max_score, max_worker = scores[i][z], z
            assignment.append(max_worker)
            load[max_worker] += 1
        cplan = [sorted({k for i in range(n) if assignment[i] != w for k in keys[i]
                         if self.valid(w, k)}) for w in range(w_n)]
        counters = []
        for w in range(w_n):
            for k in cplan[w]:
                if k in self.snaps[w]:
                    self.snaps[w][k] = False
            mine = sorted({k for i in range(n) if assignment[i] == w for k in keys[i]})
            c = dict.fromkeys(COLUMNS, 0)
            for k in mine:
                res = self.get(w, k)
                if res == -1:
                    c["hits"] += 1
                elif res == -2:
                    c["update_pull"] += 1
                else:
                    c["miss_pull"] += 1
                    if res == 1:
                        c["miss_push"] += 1
            c["update_push"] = len(cplan[w])
            c["unique_keys"] = len(mine)
            counters.append([c[name] for name in COLUMNS])
        return assignment, scores, cplan, counters

    def snapshot(self, w: int) -> list[tuple[int, bool]]:
        """(key, valid), most recent first."""
        return list(reversed(list(self.snaps[w].items())))


def _snapshot(d: LaiaDispatcher, w: int) -> list[tuple[int, bool]]:
    return [(k, d.is_valid(w, k)) for k in d.snapshot_keys(w)]


def _col(name: str) -> int:
    return COLUMNS.index(name)


# ------------------------------------------------------------------------------------------
# Hand-worked cases
# ------------------------------------------------------------------------------------------


def test_worked_example_from_the_module_docstring() -> None:
    # W = 2, b = 2, capacities 4 and 2, batch_id = 1, so the scan order is 1, 0.
    d = LaiaDispatcher(2, 20, [4, 2])
    d.set_snapshot(0, [7, 3, 5], [True, True, False])  # 7* 3* 5o (most recent first)
    d.set_snapshot(1, [9, 4], [True, False])  # 9* 4o
    keys = np.array([[3, 9], [7, 5], [9, 9], [9, 4]])
    r = d.dispatch(keys, per_worker=2, batch_id=1)
    # Scores, per key occurrence, valid entries only:
    #   s0 (3, 9): w0 has 3 valid -> 1; w1 has 9 valid -> 1
    #   s1 (7, 5): w0: 7 valid, 5 outdated (not counted) -> 1; w1: -> 0
    #   s2 (9, 9): w0: 0; w1: 9 valid, counted twice -> 2
    #   s3 (9, 4): w0: 0; w1: 9 valid, 4 outdated -> 1
    np.testing.assert_array_equal(r.scores, [[1, 1], [1, 0], [0, 2], [0, 1]])
    # s0: tie 1-1, scan starts at w1 and the strict '>' keeps the first -> w1
    # s1: w0 (score 1 > 0); s2: w1 (2 > 0), w1 is now full; s3 prefers w1 but only w0 has room
    np.testing.assert_array_equal(r.assignment, [1, 0, 1, 0])
    # cplan[0]: keys of s0, s2 (3, 9, 9) valid in w0 -> {3}
    # cplan[1]: keys of s1, s3 (7, 5, 9, 4) valid in w1 -> {9}
    assert [list(p) for p in r.cplan] == [[3], [9]]
    # w0: outdate 3 -> 7* 3o 5o; touch 4, 5, 7, 9 (ascending):
    #   4 miss, size 3 < 4 -> 4* 7* 3o 5o
    #   5 outdated hit -> 5* 4* 7* 3o;  7 valid hit -> 7* 5* 4* 3o
    #   9 miss, full, evicts 3 (outdated: no miss_push) -> 9* 7* 5* 4*
    assert _snapshot(d, 0) == [(9, True), (7, True), (5, True), (4, True)]
    # w1: outdate 9 -> 9o 4o; touch 3, 9: 3 miss, evicts 4 (outdated) -> 3* 9o; 9 outdated hit
    assert _snapshot(d, 1) == [(9, True), (3, True)]
    #                  miss_pull update_pull miss_push update_push hits unique
    np.testing.assert_array_equal(r.counters, [[2, 1, 0, 1, 1, 4],
                                               [1, 1, 0, 1, 0, 2]])
    assert d.is_valid(0, 3) is None and d.is_valid(1, 4) is None


def test_tie_breaking_follows_the_scan_offset() -> None:
    # Empty snapshots: every score is 0, so each sample goes to the first worker with room
    # in scan order (strict '>' against -1 takes the first 0, never a later equal one).
    keys = np.array([[0], [1], [2], [3], [4], [5]])
    d = LaiaDispatcher(3, 100, 0)  # capacity 0: snapshots stay empty, scores stay 0
    # batch_id 0: scan 0, 1, 2 -> s0, s1 to w0 (b = 2), s2, s3 to w1, s4, s5 to w2
    np.testing.assert_array_equal(d.dispatch(keys, 2, 0).assignment, [0, 0, 1, 1, 2, 2])
    # batch_id 4: offset 4 mod 3 = 1, scan 1, 2, 0
    np.testing.assert_array_equal(d.dispatch(keys, 2, 4).assignment, [1, 1, 2, 2, 0, 0])
    # batch_id 2: scan 2, 0, 1
    np.testing.assert_array_equal(d.dispatch(keys, 2, 2).assignment, [2, 2, 0, 0, 1, 1])


def test_strict_greater_keeps_first_of_equal_scores_not_the_last() -> None:
    d = LaiaDispatcher(3, 10, 2)
    d.set_snapshot(0, [1])
    d.set_snapshot(2, [1])
    # Key 1 is valid in w0 and w2: scores [1, 0, 1]. Scan from offset 1: w1 (0 > -1),
    # w2 (1 > 0), w0 (1 > 1 false) -> w2. From offset 0: w0 first, w2 ties -> w0.
    assert d.dispatch(np.array([[1], [8], [9]]), 1, 1).assignment[0] == 2
    d2 = LaiaDispatcher(3, 10, 2)
    d2.set_snapshot(0, [1])
    d2.set_snapshot(2, [1])
    assert d2.dispatch(np.array([[1], [8], [9]]), 1, 0).assignment[0] == 0


def test_capacity_exactly_b_per_worker() -> None:
    # Every sample scores 1 on w0 only; w0 takes the first b = 2, the rest overflow in scan
    # order: with batch_id 0 the scan is 0, 1, 2 -> w1 gets s2, s3, w2 gets s4, s5.
    d = LaiaDispatcher(3, 10, 4)
    d.set_snapshot(0, [5])
    r = d.dispatch(np.full((6, 1), 5), 2, 0)
    np.testing.assert_array_equal(r.assignment, [0, 0, 1, 1, 2, 2])
    np.testing.assert_array_equal(r.scores[:, 0], 1)
    assert np.bincount(r.assignment, minlength=3).tolist() == [2, 2, 2]
    # Unequal per-worker quotas
    d = LaiaDispatcher(3, 10, 4)
    d.set_snapshot(2, [5])
    r = d.dispatch(np.full((6, 1), 5), [1, 2, 3], 0)
    # w2 takes its 3 first (score 1), then w0 (1 sample), then w1 (2 samples)
    np.testing.assert_array_equal(r.assignment, [2, 2, 2, 0, 1, 1])


def test_cplan_only_valid_keys_used_by_other_workers() -> None:
    d = LaiaDispatcher(2, 20, 5)
    d.set_snapshot(0, [1, 2, 3, 4], [True, True, False, True])
    d.set_snapshot(1, [6])
    # Scores: s0 (1, 2) -> [2, 0] -> w0; s1 (3, 1) -> [1, 0] (3 outdated) -> w0, now full;
    # s2 (4, 3) -> [1, 0] but w0 is full -> w1; s3 (6, 5) -> [0, 1] -> w1.
    r = d.dispatch(np.array([[1, 2], [3, 1], [4, 3], [6, 5]]), 2, 0)
    np.testing.assert_array_equal(r.assignment, [0, 0, 1, 1])
    # cplan[0]: w1's keys {3, 4, 5, 6} valid in w0: 4 only (3 is outdated, 5 and 6 absent)
    # cplan[1]: w0's keys {1, 2, 3} valid in w1 (which holds 6): none
    assert [list(p) for p in r.cplan] == [[4], []]
    assert r.counters[0, _col("update_push")] == 1 and r.counters[1, _col("update_push")] == 0
    # w0 outdated 4 and does not touch it: it stays outdated
    assert d.is_valid(0, 4) is False
    # w0 touched 1, 2 (valid hits) and 3 (outdated hit): all valid now
    assert d.is_valid(0, 1) and d.is_valid(0, 2) and d.is_valid(0, 3)
    assert r.counter_dict(0) == {"miss_pull": 0, "update_pull": 1, "miss_push": 0,
                                 "update_push": 1, "hits": 2, "unique_keys": 3}
    # w1 touches 3, 4, 5 (misses) and 6 (valid hit)
    assert r.counter_dict(1) == {"miss_pull": 3, "update_pull": 0, "miss_push": 0,
                                 "update_push": 0, "hits": 1, "unique_keys": 4}


def test_outdate_then_touch_in_ascending_key_order() -> None:
    d = LaiaDispatcher(2, 20, [3, 8])
    d.set_snapshot(0, [4])
    d.set_snapshot(1, [])
    # s0 (4, 1) -> w0 (score 1); s1 (4, 7) -> w1 (w0 is full). Key 4 is valid in w0 and used
    # by w1: cplan[0] = {4}; w0 first outdates 4, then its own touch of 4 is an outdated hit.
    r = d.dispatch(np.array([[4, 1], [4, 7]]), 1, 0)
    np.testing.assert_array_equal(r.assignment, [0, 1])
    assert [list(p) for p in r.cplan] == [[4], []]
    # w0 touches 1 (miss), 4 (outdated hit): ascending, so 4 ends most recent
    assert _snapshot(d, 0) == [(4, True), (1, True)]
    assert r.counter_dict(0) == {"miss_pull": 1, "update_pull": 1, "miss_push": 0,
                                 "update_push": 1, "hits": 0, "unique_keys": 2}
    # w1 touches 4, 7 (both misses) in that order: 7 most recent
    assert _snapshot(d, 1) == [(7, True), (4, True)]


def test_lru_eviction_order_and_miss_push_only_for_valid_victims() -> None:
    d = LaiaDispatcher(1, 20, 3)
    # Keys of one sample are touched once each, ascending: 9, 5, 2 -> 2, 5, 9 -> 9* 5* 2*
    r = d.dispatch(np.array([[9, 5, 2]]), 1, 0)
    assert d.snapshot_keys(0) == [9, 5, 2]
    assert r.counter_dict(0)["miss_pull"] == 3 and r.counter_dict(0)["miss_push"] == 0
    # Next batch: 1 (miss, evicts LRU 2), 5 (hit), 11 (miss, evicts LRU 9); both victims valid
    r = d.dispatch(np.array([[11, 5, 1]]), 1, 1)
    assert d.snapshot_keys(0) == [11, 5, 1]
    assert r.counter_dict(0) == {"miss_pull": 2, "update_pull": 0, "miss_push": 2,
                                 "update_push": 0, "hits": 1, "unique_keys": 3}
    # An outdated victim is evicted clean: 11o 5* 1o; touch 3 (evicts LRU 1, outdated: clean)
    # -> 3* 11o 5*; touch 12 (evicts LRU 5, valid: miss_push) -> 12* 3* 11o
    d.set_snapshot(0, [11, 5, 1], [False, True, False])
    r = d.dispatch(np.array([[3, 12]]), 1, 0)
    assert d.snapshot_keys(0) == [12, 3, 11]
    assert d.is_valid(0, 11) is False and d.is_valid(0, 1) is None
    assert r.counter_dict(0)["miss_pull"] == 2 and r.counter_dict(0)["miss_push"] == 1


def test_duplicate_keys_within_a_sample() -> None:
    d = LaiaDispatcher(2, 10, 4)
    d.set_snapshot(1, [3])
    # score counts occurrences: (3, 3, 3) on w1 -> 3; touches count unique keys only
    r = d.dispatch(np.array([[3, 3, 3], [3, 0, 0]]), 1, 0)
    np.testing.assert_array_equal(r.scores, [[0, 3], [0, 1]])
    np.testing.assert_array_equal(r.assignment, [1, 0])
    assert r.counters[1, _col("unique_keys")] == 1 and r.counters[0, _col("unique_keys")] == 2
    # 3 valid in w1 and used by w0 -> cplan[1] = {3}, once despite 1 occurrence in s1
    assert [list(p) for p in r.cplan] == [[], [3]]


def test_capacity_zero_counts_every_miss_as_a_miss_push() -> None:
    # Herald's insert pushes the key, then pops the back while over capacity: with capacity 0
    # the new valid entry evicts itself, which get() reports as 1 (miss_push).
    d = LaiaDispatcher(2, 10, [0, 2])
    r = d.dispatch(np.array([[1, 2], [3, 3]]), 1, 0)
    assert d.snapshot_keys(0) == [] and d.size(0) == 0
    assert r.counter_dict(0) == {"miss_pull": 2, "update_pull": 0, "miss_push": 2,
                                 "update_push": 0, "hits": 0, "unique_keys": 2}
    assert r.counter_dict(1)["miss_push"] == 0


def test_input_validation() -> None:
    d = LaiaDispatcher(2, 10, 2)
    with pytest.raises(ValueError):
        d.dispatch(np.zeros((3, 1), np.int64), 2, 0)  # 3 samples, 4 expected
    with pytest.raises(ValueError):
        d.dispatch(np.array([[10], [0]]), 1, 0)  # key out of range
    with pytest.raises(ValueError):
        d.dispatch(np.zeros(2, np.int64), 1, 0)  # not 2-D
    with pytest.raises(ValueError):
        LaiaDispatcher(2, 10, [1, -1])


# ------------------------------------------------------------------------------------------
# Properties against the reference
# ------------------------------------------------------------------------------------------


@st.composite
def traces(draw):
    workers = draw(st.integers(1, 4))
    f = draw(st.integers(1, 3))
    caps = draw(st.lists(st.integers(0, 4), min_size=workers, max_size=workers))
    if draw(st.booleans()):
        quota = [draw(st.integers(1, 3))] * workers
    else:
        quota = draw(st.lists(st.integers(0, 3), min_size=workers, max_size=workers))
        if sum(quota) == 0:
            quota[0] = 1
    n = sum(quota)
    batches = draw(st.lists(
        st.lists(st.lists(st.integers(0, 11), min_size=f, max_size=f), min_size=n, max_size=n),
        min_size=1, max_size=6))
    first_id = draw(st.integers(0, 7))
    return workers, caps, quota, batches, first_id


@given(traces())
@settings(max_examples=300, deadline=None)
def test_equivalent_to_reference(trace) -> None:
    workers, caps, quota, batches, first_id = trace
    ref = RefLaia(workers, caps)
    d = LaiaDispatcher(workers, 12, caps)
    for j, keys in enumerate(batches):
        batch_id = first_id + j
        assignment, scores, cplan, counters = ref.dispatch(keys, quota, batch_id)
        r = d.dispatch(np.array(keys, dtype=np.int64), quota, batch_id)
        assert r.assignment.tolist() == assignment
        assert r.scores.tolist() == scores
        assert [p.tolist() for p in r.cplan] == cplan
        assert r.counters.tolist() == counters
        for w in range(workers):
            assert _snapshot(d, w) == ref.snapshot(w)
            assert d.size(w) == len(ref.snaps[w])
        # every worker gets exactly its quota
        assert np.bincount(r.assignment, minlength=workers).tolist() == quota


@pytest.mark.parametrize("workers", [63, 64, 65, 130])
def test_more_workers_than_one_bitmask_word(workers) -> None:
    """The batch's users of a key are a bitmask of ceil(W / 64) words: a worker index at a
    word's edge, or in a second or third word, dispatches as the reference does."""
    rng = np.random.default_rng(workers)
    caps = rng.integers(0, 6, workers).tolist()
    ref = RefLaia(workers, caps)
    d = LaiaDispatcher(workers, 40, caps)
    for batch_id in range(4):
        keys = rng.zipf(1.4, size=(2 * workers, 3)) % 40
        assignment, scores, cplan, counters = ref.dispatch(keys.tolist(), [2] * workers,
                                                           batch_id)
        r = d.dispatch(keys, 2, batch_id)
        assert r.assignment.tolist() == assignment
        assert r.scores.tolist() == scores
        assert [p.tolist() for p in r.cplan] == cplan
        assert r.counters.tolist() == counters
        assert all(_snapshot(d, w) == ref.snapshot(w) for w in range(workers))
    assert not d.users.any()  # the bitmask is empty again between batches


@given(workers=st.integers(1, 6), b=st.integers(1, 5), f=st.integers(1, 4),
       cap=st.integers(0, 20), seed=st.integers(0, 2**16), batches=st.integers(1, 5))
@settings(max_examples=100, deadline=None)
def test_every_worker_gets_exactly_b(workers, b, f, cap, seed, batches) -> None:
    rng = np.random.default_rng(seed)
    d = LaiaDispatcher(workers, 30, cap)
    for j in range(batches):
        keys = rng.zipf(1.5, size=(workers * b, f)) % 30
        r = d.dispatch(keys, b, j)
        assert np.bincount(r.assignment, minlength=workers).tolist() == [b] * workers
        assert all(np.all(np.diff(p) > 0) for p in r.cplan)  # sorted, unique
        assert all(d.size(w) <= cap for w in range(workers))
