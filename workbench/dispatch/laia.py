"""Herald's LAIA sample dispatcher with simulated per-worker LRU snapshots (numba kernels).

Source: HKUST-SING/herald (NSDI'24 "Embedding Scheduling"), ``laia/src/laia_scheduler.cc``
(``LaiaScheduler::get_dist`` and ``launch``) and ``laia/include/mini_lru_cache.h``
(``MiniLRUCache``); the per-worker counters follow ``laia/src/topk_scheduler.cc``. This is
Herald's public code (the C++ scheduler), transcribed.

State: one LRU "snapshot" per worker w that simulates w's real embedding cache (capacity = w's
cache rows; capacities may differ), each entry carrying a valid/outdated flag.

Per global batch of ``N = sum(b_w)`` samples (sample i has F keys, one per table):

1. **Score.** ``score[i, z]`` = number of sample i's keys that are *valid* in z's snapshot,
   computed once at the start of the batch. Counted per key *occurrence*, as Herald's loop over
   tables does: a key appearing twice in one sample and valid in z counts 2.
2. **Greedy balanced assignment.** Samples in order; workers scanned from offset
   ``batch_id mod W`` (wrapping); sample i goes to the highest-scoring worker that still has
   room (worker w takes exactly ``b_w`` samples). The comparison is a strict ``>`` against an
   initial -1, so ties go to the first worker in scan order.
3. **Communication plan.** ``cplan[w]`` = keys valid in w's snapshot (as at step 1) and used by
   a sample assigned to *another* worker: w must push its updates of them this iteration.
4. **Advance the snapshots.** For each worker w: mark every key of ``cplan[w]`` outdated; then
   touch every *unique* key of w's samples in ascending key order (``MiniLRUCache::get``): a
   hit (valid or outdated) moves to most-recent and becomes valid; a miss is inserted at
   most-recent, evicting the least-recent entry when the snapshot is over capacity.
5. **Counters** per worker, as ``get`` classifies each touch of step 4 (Herald's return codes):
   ``hits`` (-1, valid hit), ``update_pull`` (-2, outdated hit: re-pull), ``miss_pull``
   (0 or 1, a miss), ``miss_push`` (1, a miss whose eviction removed a *valid* entry, whose
   updates must be written back); ``update_push = len(cplan[w])``; ``unique_keys`` = touches.

One batch, W = 2, b = 2, F = 2, batch_id = 1 (scan order 1, 0), capacities 4 and 2:

    snapshots, most recent first    sample  keys   score[z0, z1]  -> worker
    (* valid, o outdated)           s0      3, 9   [1, 1] tie     -> 1 (first in scan order)
      w0: 7*  3*  5o                s1      7, 5   [1, 0]         -> 0
      w1: 9*  4o                    s2      9, 9   [0, 2]         -> 1 (w1 now full)
                                    s3      9, 4   [0, 1]         -> 0 (the only room left)
    cplan[0] = valid in w0, used by s0/s2 = {3}                    update_push[0] = 1
    cplan[1] = valid in w1, used by s1/s3 = {9}                    update_push[1] = 1
    w0: outdate 3; touch 4 miss | 5 outdated hit | 7 hit | 9 miss, evicts 3 (outdated: clean)
        -> 9* 7* 5* 4*   miss_pull 2, update_pull 1, hits 1, miss_push 0
    w1: outdate 9; touch 3 miss, evicts 4 (outdated: clean) | 9 outdated hit
        -> 9* 3*         miss_pull 1, update_pull 1, hits 0, miss_push 0

Layout (struct of arrays, so the whole batch runs in one numba call with no per-key Python):

* ``loc[rows, W]`` (int32): key k's entry in w's snapshot, encoded ``0`` = absent, else
  ``(slot + 1) << 1 | valid``. Key-major, so all W workers' entries of one key share a cache
  line (scoring reads W of them per key occurrence), and the valid flag lives with the slot.
  Memory: ``4 * rows * W`` bytes (32 MB for 1M rows and 8 workers).
* Slots of all workers in one flat pool; worker w owns ``[base_w, base_w + min(cap_w, rows))``:
  ``links[S, 4]`` (int32): key, prev, next (recency list, global slot ids), padding; 16 aligned
  bytes per slot, so a touch costs one cache line per slot it visits.
* ``meta[W, 5]``: base, capacity, size, head (most recent) and tail (least recent) per worker.
* ``users[rows, ceil(W / 64)]`` (uint64): during a batch, the bitmask of the workers whose
  samples use key k (all zero between batches).
* ``bitmap[rows / 64]``, ``summary[rows / 4096]`` (uint64): the batch's keys de-duplicated and
  listed in ascending order without a sort ([`workbench.utils.bitset`][]).
* ``raw``: the batch's key list and the communication plans' scratch, reused across batches.
* Memory in all: ``4 * rows * W + 8 * rows * ceil(W / 64) + rows / 8 + 16 * sum(min(cap_w,
  rows))`` bytes, i.e. 32 + 8 + 0.1 + 13 MB for 1M rows, 8 workers and caches of 100k rows.

Steps 3 to 5 run per distinct key, not per occurrence: after the assignment one pass over the
occurrences fills ``users`` and the bitmap; the drained keys (ascending) then make two passes,
one building every plan (already sorted) and outdating, one touching each key on each of its
users. The snapshots are independent, so the second pass gives every worker its own ascending
sequence of touches, as Herald's per-worker loop does, and reads a key's ``loc`` row once for
all its users. The kernel prefetches the ``loc`` and ``users`` rows of keys a few places ahead
([`workbench.utils.prefetch`][]): they are random rows of tables too large for the caches.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numba as nb
import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

from workbench.cluster.linked_list import HEAD, NEXT, PREV, TAIL, push_front, unlink
from workbench.dispatch.base import Decision, Dispatcher
from workbench.utils.bitset import bitset_arrays, drain_sorted, mark
from workbench.utils.prefetch import prefetch

COLUMNS = ("miss_pull", "update_pull", "miss_push", "update_push", "hits", "unique_keys")
C_INDEX = {name: i for i, name in enumerate(COLUMNS)}
_MISS_PULL, _UPDATE_PULL, _MISS_PUSH, _UPDATE_PUSH, _HITS, _UNIQUE = range(len(COLUMNS))

# links[] columns (the fourth is padding: one slot is 16 aligned bytes, never two cache lines)
_PREV, _NEXT, _KEY = PREV, NEXT, 2
# meta[] columns: worker w's snapshot is list w of workbench.cluster.linked_list
_HEAD, _TAIL = HEAD, TAIL
_BASE, _CAP, _SIZE = range(2, 5)

# Herald's MiniLRUCache::get return codes
_GET_HIT, _GET_OUTDATED, _GET_MISS, _GET_MISS_DIRTY = -1, -2, 0, 1

_AHEAD = 16  # key occurrences between a prefetch and its use
_MAX_SLOTS = 2**30 - 2  # (slot + 1) << 1 | 1 must fit in int32


# ------------------------------------------------------------------------------------------
# Snapshot primitives (allocation-free, so compiled without NRT)
# ------------------------------------------------------------------------------------------

@nb.njit(cache=True, _nrt=False)
def _get(loc, links, meta, w, k):
    """``MiniLRUCache::get(k)`` on w's snapshot; returns Herald's code (-1, -2, 0, 1)."""
    v = loc[k, w]
    if v != 0:
        s = (v >> 1) - 1
        code = _GET_HIT if (v & 1) else _GET_OUTDATED
        if meta[w, _HEAD] != s:
            unlink(links, meta, w, s)
            push_front(links, meta, w, s)
        loc[k, w] = v | 1
        return code
    cap = meta[w, _CAP]
    if cap == 0:
        # Herald inserts first, then pops the back while over capacity: with capacity 0 the
        # new (valid) entry evicts itself, which get() reports as a dirty eviction.
        return _GET_MISS_DIRTY
    code = _GET_MISS
    if meta[w, _SIZE] < cap:
        s = meta[w, _BASE] + meta[w, _SIZE]
        meta[w, _SIZE] += 1
    else:
        s = meta[w, _TAIL]
        victim = links[s, _KEY]
        if loc[victim, w] & 1:
            code = _GET_MISS_DIRTY
        loc[victim, w] = 0
        unlink(links, meta, w, s)
    links[s, _KEY] = k
    push_front(links, meta, w, s)
    loc[k, w] = ((s + 1) << 1) | 1
    return code


# ------------------------------------------------------------------------------------------
# The per-batch kernel
# ------------------------------------------------------------------------------------------

@nb.njit(cache=True, _nrt=False, inline="always")
def _sole_user(users, k):
    """The one worker in key k's user bitmask, or -1 when it holds two or more."""
    one = np.uint64(1)
    single = -1
    for word in range(users.shape[1]):
        x = users[k, word]
        if x != 0:
            if single >= 0 or x & (x - one) != 0:
                return -1
            single = word * 64 + trailing_zeros(x)
    return single


@nb.njit(cache=True)
def _dispatch(loc, links, meta, bitmap, summary, users, raw, keys, quota, offset):
    n, f = keys.shape
    n_workers = quota.shape[0]
    n_words = users.shape[1]
    one = np.uint64(1)

    # 1. scores: valid entries per key occurrence (a sample's W counts summed in int32 lanes)
    scores = np.empty((n, n_workers), np.int64)
    acc = np.empty(n_workers, np.int32)
    flat = keys.ravel()
    for i in range(n):
        acc[:] = 0
        for t in range(f):
            ahead = i * f + t + _AHEAD
            if ahead < flat.size:  # keys are random rows of loc: load a few keys ahead
                prefetch(loc, flat[ahead] * n_workers)
            k = keys[i, t]
            for z in range(n_workers):
                acc[z] += loc[k, z] & 1
        for z in range(n_workers):
            scores[i, z] = acc[z]

    # 2. greedy assignment with the rotating scan offset and a strict '>'
    assignment = np.empty(n, np.int64)
    load = np.zeros(n_workers, np.int64)
    for i in range(n):
        best = -1
        best_w = -1
        for j in range(n_workers):
            z = (j + offset) % n_workers
            if load[z] < quota[z] and scores[i, z] > best:
                best = scores[i, z]
                best_w = z
        assignment[i] = best_w
        load[best_w] += 1

    # the batch's keys, each with the set of workers whose samples use it (users[k], a
    # bitmask), listed once in ascending order (the two-level bitmap)
    for i in range(n):
        u = assignment[i]
        word = u >> 6
        bit = one << np.uint64(u & 63)
        for t in range(f):
            ahead = i * f + t + _AHEAD
            if ahead < flat.size:
                prefetch(users, flat[ahead] * n_words)
            k = keys[i, t]
            if users[k, word] & bit == 0:
                users[k, word] |= bit
                mark(bitmap, summary, k)
    uniq = raw[:n * f]
    c = drain_sorted(bitmap, summary, uniq)

    # 3. cplan[w] + the outdating of step 4: k enters cplan[w] iff it is valid in w and a
    # worker other than w uses it, i.e. it has two users or more, or one that is not w.
    # Clearing w's valid bit outdates it; keys come in ascending order, so every plan is
    # sorted as it grows (in its own region of ``raw``, at most (n - quota[w]) x f keys).
    # Every plan is complete before any touch, as in Herald's per-worker order.
    region = np.zeros(n_workers + 1, np.int64)
    region[0] = n * f
    for z in range(n_workers):
        region[z + 1] = region[z] + (n - quota[z]) * f
    top = region[:n_workers].copy()
    for j in range(c):
        if j + _AHEAD < c:
            prefetch(loc, uniq[j + _AHEAD] * n_workers)
            prefetch(users, uniq[j + _AHEAD] * n_words)
        k = uniq[j]
        single = _sole_user(users, k)
        valid = 0  # a vectorised pass first: most keys have no valid entry to outdate
        for w in range(n_workers):
            valid += loc[k, w] & 1
        if valid == 0 or (single >= 0 and valid == (loc[k, single] & 1)):
            continue
        for w in range(n_workers):
            v = loc[k, w]
            if w != single and v & 1:
                loc[k, w] = v ^ 1
                raw[top[w]] = k
                top[w] += 1
    plan_ptr = np.zeros(n_workers + 1, np.int64)
    for w in range(n_workers):
        plan_ptr[w + 1] = plan_ptr[w] + top[w] - region[w]
    plan = np.empty(plan_ptr[n_workers], np.int64)
    for w in range(n_workers):
        plan[plan_ptr[w]:plan_ptr[w + 1]] = raw[region[w]:top[w]]

    # 4./5. every worker touches its unique keys in ascending order, counting get()'s codes.
    # Snapshots are independent, so one ascending pass over the batch's keys, touching each
    # key on its users, gives every worker's own ascending sequence (and reads a key's loc
    # row once for all of them).
    counters = np.zeros((n_workers, 6), np.int64)
    for w in range(n_workers):
        counters[w, _UPDATE_PUSH] = plan_ptr[w + 1] - plan_ptr[w]
    for j in range(c):
        if j + _AHEAD < c:
            prefetch(loc, uniq[j + _AHEAD] * n_workers)
            prefetch(users, uniq[j + _AHEAD] * n_words)
        k = uniq[j]
        for word in range(n_words):
            x = users[k, word]
            users[k, word] = 0
            while x != 0:
                w = word * 64 + trailing_zeros(x)
                x &= x - one
                counters[w, _UNIQUE] += 1
                code = _get(loc, links, meta, w, k)
                if code == _GET_HIT:
                    counters[w, _HITS] += 1
                elif code == _GET_OUTDATED:
                    counters[w, _UPDATE_PULL] += 1
                else:
                    counters[w, _MISS_PULL] += 1
                    if code == _GET_MISS_DIRTY:
                        counters[w, _MISS_PUSH] += 1
    return assignment, scores, plan, plan_ptr, counters


# ------------------------------------------------------------------------------------------
# Python-facing objects
# ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LaiaResult:
    """The dispatch of one global batch.

    Attributes:
        assignment: ``int64[N]``, the worker of each sample; worker w appears exactly ``b_w``
            times.
        cplan: per worker, the sorted unique ``int64`` keys it must push this iteration.
        counters: ``int64[W, 6]`` with columns [`COLUMNS`][].
        scores: ``int64[N, W]``, the score matrix of step 1.
    """

    assignment: np.ndarray
    cplan: list[np.ndarray]
    counters: np.ndarray
    scores: np.ndarray

    def samples(self, w: int) -> np.ndarray:
        """Indices (within the batch) of worker w's samples, ascending."""
        return np.flatnonzero(self.assignment == w)

    def counter_dict(self, w: int) -> dict[str, int]:
        """Worker w's counters by name."""
        return {name: int(v) for name, v in zip(COLUMNS, self.counters[w])}


class LaiaDispatcher:
    """Herald's LAIA dispatcher: per-worker LRU snapshots, greedy locality-aware assignment.

    Args:
        workers: number of workers W (>= 1).
        rows: size of the global key space; keys are ints in ``0..rows-1``.
        cache_rows: each worker's cache capacity in rows (one int for all, or W ints, >= 0).

    Memory: ``4 * rows * W + 8 * rows * ceil(W / 64) + rows / 8`` bytes plus ``16`` bytes per
    cache slot (module docstring).

    Example:

        laia = LaiaDispatcher(workers=2, rows=100, cache_rows=10)
        res = laia.dispatch(np.array([[1, 2], [3, 4], [1, 5], [6, 7]]), per_worker=2,
                            batch_id=0)
        res.assignment, res.cplan, res.counters
    """

    def __init__(self, workers: int, rows: int, cache_rows: int | list[int]) -> None:
        if workers < 1 or not 1 <= rows < 2**31:
            raise ValueError("workers must be >= 1 and rows in 1..2**31 - 1")
        caps = np.broadcast_to(np.asarray(cache_rows, dtype=np.int64), (workers,)).copy()
        if caps.ndim != 1 or np.any(caps < 0):
            raise ValueError("cache_rows must be >= 0 (one int or one per worker)")
        self.workers = int(workers)
        self.rows = int(rows)
        self.capacities = caps
        slots = np.minimum(caps, rows)  # a snapshot never holds more than `rows` keys
        total = int(slots.sum())
        if total > _MAX_SLOTS:
            raise ValueError(f"{total} cache slots in all: at most {_MAX_SLOTS}")
        self.loc = np.zeros((self.rows, self.workers), dtype=np.int32)
        self.links = np.full((max(total, 1), 4), -1, dtype=np.int32)
        self.meta = np.full((self.workers, 5), -1, dtype=np.int64)
        self.meta[:, _BASE] = np.concatenate([[0], np.cumsum(slots)[:-1]])
        self.meta[:, _CAP] = caps
        self.meta[:, _SIZE] = 0
        # a worker's keys, de-duplicated and sorted through a two-level bitmap
        self.bitmap, self.summary = bitset_arrays(self.rows)
        # the workers that use each key of the batch (a bitmask; all zero between batches)
        self.users = np.zeros((self.rows, (self.workers + 63) // 64), dtype=np.uint64)
        # the plans' scratch, grown to the largest batch's bound and reused
        self._raw = np.empty(0, dtype=np.int64)

    def dispatch(self, keys: np.ndarray, per_worker: int | list[int],
                 batch_id: int) -> LaiaResult:
        """Assign one global batch and advance the snapshots.

        Args:
            keys: ``[N, F]`` integer keys in ``0..rows-1``, one per table per sample.
            per_worker: samples per worker, one int b (then ``N = W * b``) or W ints ``b_w``
                (then ``N = sum(b_w)``).
            batch_id: the batch's index; the scan starts at worker ``batch_id mod W``.

        Returns:
            The [`LaiaResult`][] of the batch.
        """
        keys = np.ascontiguousarray(keys, dtype=np.int64)
        if keys.ndim != 2:
            raise ValueError(f"keys must be [N, F]; got shape {keys.shape}")
        quota = np.broadcast_to(np.asarray(per_worker, dtype=np.int64), (self.workers,)).copy()
        if np.any(quota < 0):
            raise ValueError("per_worker must be >= 0")
        if int(quota.sum()) != keys.shape[0]:
            raise ValueError(f"{keys.shape[0]} samples but per_worker sums to {quota.sum()}")
        if keys.size and (keys.min() < 0 or keys.max() >= self.rows):
            raise ValueError(f"keys must lie in 0..{self.rows - 1}")
        offset = int(batch_id) % self.workers
        bound = int(((keys.shape[0] - quota) * keys.shape[1]).sum()) + keys.size
        if self._raw.size < bound:
            self._raw = np.empty(bound, dtype=np.int64)
        assignment, scores, plan, ptr, counters = _dispatch(
            self.loc, self.links, self.meta, self.bitmap, self.summary, self.users, self._raw,
            keys, quota, offset)
        cplan = [plan[ptr[w]:ptr[w + 1]] for w in range(self.workers)]
        return LaiaResult(assignment, cplan, counters, scores)

    def snapshot_keys(self, w: int) -> list[int]:
        """Keys in w's snapshot in recency order, most recent first."""
        out: list[int] = []
        s = int(self.meta[w, _HEAD])
        while s >= 0:
            out.append(int(self.links[s, _KEY]))
            s = int(self.links[s, _NEXT])
        return out

    def is_valid(self, w: int, key: int) -> bool | None:
        """Whether ``key`` is valid in w's snapshot; None if it is absent."""
        v = int(self.loc[key, w])
        return None if v == 0 else bool(v & 1)

    def size(self, w: int) -> int:
        """Entries in w's snapshot."""
        return int(self.meta[w, _SIZE])

    def set_snapshot(self, w: int, keys: list[int], valid: list[bool] | None = None) -> None:
        """Replace w's snapshot by ``keys`` (most recent first) with the given valid flags.

        For tests and warm starts; ``len(keys)`` must not exceed w's capacity.
        """
        keys = [int(k) for k in keys]
        valid = [True] * len(keys) if valid is None else [bool(v) for v in valid]
        if len(set(keys)) != len(keys) or len(valid) != len(keys):
            raise ValueError("keys must be distinct, with one valid flag each")
        if len(keys) > self.capacities[w] or any(not 0 <= k < self.rows for k in keys):
            raise ValueError("too many keys for the capacity, or a key out of range")
        for k in self.snapshot_keys(w):
            self.loc[k, w] = 0
        self.meta[w, _SIZE] = 0
        self.meta[w, _HEAD] = -1
        self.meta[w, _TAIL] = -1
        for k in reversed(keys):
            _get(self.loc, self.links, self.meta, w, k)
        for k, v in zip(keys, valid):
            if not v:
                self.loc[k, w] ^= 1


class LaiaBaseline(Dispatcher):
    """``laia``: Herald's LAIA (its own LRU snapshots; the caches it models are the workers').

    Args:
        workers: W.
        capacities: samples per worker.
        rows: rows of the embedding table.
        cache_rows: each worker's cache capacity (its snapshot's).
    """

    name = "laia"

    def __init__(self, workers: int, capacities: np.ndarray, rows: int,
                 cache_rows: int) -> None:
        super().__init__(workers, capacities)
        self.laia = LaiaDispatcher(workers, rows, cache_rows)

    def decide(self, keys: np.ndarray, batch_id: int) -> Decision:
        start = time.perf_counter()
        res = self.laia.dispatch(keys, [int(c) for c in self.capacities], batch_id)
        return Decision(np.asarray(res.assignment, dtype=np.int64), "laia",
                        time.perf_counter() - start,
                        sync_plan_sizes=np.array([len(p) for p in res.cplan], dtype=np.int64))
