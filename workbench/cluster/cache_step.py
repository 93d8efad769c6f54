"""The numba kernels of one cache step: a worker's read, its write, the flush (HET's cache).

The semantics are [`workbench.cluster.cache`][]'s (one key at a time, Hetu's counters); the state
layout and the policies' kernels are [`workbench.cluster.cache_policy`][]'s;
[`WorkerCache`][workbench.cluster.cache.WorkerCache] calls these with its arrays.

Speed (``benchmarks/cache_replay.py``, issue 48: a replay at the memory's pace). A step's
read and write each make one pass over its sorted unique keys and one over its occurrences, each
pass prefetching the random lines it will touch a few keys ahead (``prefetch_row``):

* dedup: the keys are marked in the server's two-level bitmap and drained in order; each
  occurrence's index is its key's rank, counted from the marked words
  ([`sorted_unique`][workbench.utils.bitset.sorted_unique]: no sort and no ``rows``-long index);
* read: the slots are gathered, then one pass touches each cached line and checks its version,
  one copies the rows out, and the misses are inserted in one batch: with at most C misses the
  victims are the free slots and then the oldest live queue entries, all known before the first
  insert, so their lines, old keys' slots and rows are prefetched instead of chased one by one;
* write: the slots the read left are reused (a slot whose line now holds another key is looked
  up again), and when the read's queue run (its touches and inserts) is intact the write's
  touches rewrite that run in key order in place instead of appending it again: the same live
  order, so the same victims, half the queue traffic;
* the pushes of a write are listed first and then made in key order, prefetching the server
  rows and versions a few pushes ahead; queue compactions prefetch as they scan.

The brute-force reference, Hetu's counters and the private-cache tests hold every counter, row
and eviction order to the one-key-at-a-time semantics above.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from workbench.cluster.cache_policy import (  # the state layout and the policies
    _AHEAD,
    _BOUND_PUSHES,
    _CAP,
    _DIRTY,
    _EVICT_PUSHES,
    _FLUSH_PUSHES,
    _FULL_MISSES,
    _FULL_READS,
    _FULL_UNIQUE,
    _KEY,
    _KEYS_READ,
    _KEYS_WRITTEN,
    _LRU,
    _META_KEYS,
    _MISS_PULLS,
    _MISSES,
    _NEAR,
    _NEXT,
    _POLICY,
    _PREV,
    _QLEN,
    _QTAIL,
    _READS,
    _RUN_END,
    _RUN_START,
    _SCAN,
    _SIZE,
    _STALE_PULLS,
    _UNCACHED_PUSHES,
    _UNIQUE_READ,
    _UNIQUE_WRITTEN,
    _UPD,
    _VER,
    _WRITES,
    _lru_append,
    _touch,
    fill_line,
    insert,
    insert_lru_batch,
    retouch_run,
)
from workbench.utils.prefetch import prefetch_row, prefetch_row_w

__all__ = ["drain_queue", "flush_all", "read_step", "write_step"]

#: Server tables of at most this many rows stay in the core's L2 and L3 caches between steps
#: (4 MB of 8-float rows): the kernels prefetch only beyond it, where a prefetch hides a miss
#: instead of costing an instruction (measured on the reference traces, issue 48).
_CACHED_ROWS = 1 << 17


@nb.njit(cache=True, _nrt=False)
def _gather_slots(slot_of, uniq, lines, srv_ver, slots, known, far):
    """``slots[j]``: the slot of ``uniq[j]`` (-1: not cached), prefetching the server versions
    (``far``: a table too large to stay in the core's caches, where prefetches pay).

    With ``known`` the slots are those the previous call of the same keys left (its inserts
    included); a slot whose line now holds another key (evicted since) is looked up again.
    """
    m = uniq.shape[0]
    for j in range(m):
        if far and j + _AHEAD < m:
            prefetch_row(srv_ver, uniq[j + _AHEAD])
            if not known:
                prefetch_row(slot_of, uniq[j + _AHEAD])
        if known:
            s = slots[j]
            if s >= 0 and lines[s, _KEY] != uniq[j]:
                slots[j] = slot_of[uniq[j]]
        else:
            slots[j] = slot_of[uniq[j]]


@nb.njit(cache=True, _nrt=False)
def _touch_lists(links, buckets, free_b, meta, slots):
    """Count a use of every cached slot of ``slots`` in LFU or LFUOpt, in key order, prefetching
    the links of a line a few touches ahead and its list neighbours nearer."""
    m = slots.shape[0]
    for j in range(m):
        if j + _AHEAD < m and slots[j + _AHEAD] >= 0:
            prefetch_row(links, slots[j + _AHEAD])
        if j + _NEAR < m and slots[j + _NEAR] >= 0:
            t = slots[j + _NEAR]
            prefetch_row(links, links[t, _PREV])
            prefetch_row(links, links[t, _NEXT])
        if slots[j] >= 0:
            _touch(links, buckets, free_b, meta, slots[j])


@nb.njit(cache=True)
def read_step(slot_of, links, lines, lru_q, vecs, buckets, free_b, queue_i, queue_g, meta,
              counters, srv_val, srv_ver, keys, uniq, inv, slots, known, read_bound, out,
              want_values):
    """One read ([`workbench.cluster.cache`][]), fused: a pass over the sorted unique keys
    touches each cached line and checks its version (prefetching a few keys ahead), one over the
    occurrences copies the rows out, one inserts the misses. ``slots`` receives every key's slot
    after the inserts, for the next call of the same keys."""
    m = uniq.shape[0]
    lru = meta[_POLICY] == _LRU
    far = srv_val.shape[0] > _CACHED_ROWS
    _gather_slots(slot_of, uniq, lines, srv_ver, slots, known, far)
    meta[_RUN_START] = meta[_QTAIL]  # a compaction during this read cancels the run
    meta[_RUN_END] = -1
    misses = 0
    stale = 0
    if not lru:
        _touch_lists(links, buckets, free_b, meta, slots)
    for j in range(m):
        if far and j + _AHEAD < m:
            t = slots[j + _AHEAD]
            if t >= 0:
                prefetch_row(lines, t)
                prefetch_row(vecs, t)
            else:
                prefetch_row(srv_val, uniq[j + _AHEAD])
        s = slots[j]
        if s >= 0:
            if lru:
                _lru_append(lines, lru_q, meta, s)
            u = uniq[j]
            if srv_ver[u] - lines[s, _VER] > read_bound:
                stale += 1
                lines[s, _VER] = srv_ver[u]
                for d in range(srv_val.shape[1]):
                    vecs[s, 0, d] = srv_val[u, d] + vecs[s, 1, d]
        else:
            misses += 1
    if want_values:
        dim = out.shape[1]
        n_keys = keys.shape[0]
        for i in range(n_keys):
            if far and i + _SCAN < n_keys:
                ahead = inv[i + _SCAN]
                if slots[ahead] >= 0:
                    prefetch_row(vecs, slots[ahead])
                else:
                    prefetch_row(srv_val, uniq[ahead])
            s = slots[inv[i]]
            if s >= 0:
                for d in range(dim):
                    out[i, d] = vecs[s, 0, d]
            else:
                u = uniq[inv[i]]
                for d in range(dim):
                    out[i, d] = srv_val[u, d]
    if misses > 0:
        missed = np.empty(misses, np.int64)
        n = 0
        for j in range(m):
            if slots[j] < 0:
                missed[n] = j
                n += 1
        if not (lru and insert_lru_batch(slot_of, lines, lru_q, vecs, queue_i, queue_g, meta,
                                          counters, srv_val, srv_ver, uniq, slots, missed)):
            for j in missed:
                u = uniq[j]
                s = insert(slot_of, links, lines, lru_q, vecs, buckets, free_b, queue_i,
                            queue_g, meta, counters, u)
                slots[j] = s
                if s >= 0:
                    fill_line(lines, vecs, srv_val, srv_ver, s, u)
    if meta[_RUN_START] >= 0:
        meta[_RUN_END] = meta[_QTAIL]
    counters[_READS] += 1
    counters[_KEYS_READ] += keys.shape[0]
    counters[_UNIQUE_READ] += m
    counters[_MISSES] += misses
    counters[_MISS_PULLS] += misses
    counters[_STALE_PULLS] += stale
    counters[_META_KEYS] += m
    if meta[_SIZE] == meta[_CAP]:
        counters[_FULL_READS] += 1
        counters[_FULL_UNIQUE] += m
        counters[_FULL_MISSES] += misses




@nb.njit(cache=True, _nrt=False, inline="always")
def _push_row(srv_val, srv_ver, key, src, row, updates, log_i, log_g):
    """Server side of a push: ``value[key] += src[row]``, ``ver[key] += updates``.

    With a push log (``log_i`` non-empty: row 0 holds the entry count, row n + 1 the key and
    updates of entry n, ``log_g[n]`` its gradient row) the push is also recorded, so a worker
    whose server is remote can send exactly these rows ([`workbench.cluster.remote_ps`][]).
    """
    for d in range(srv_val.shape[1]):
        srv_val[key, d] += src[row, d]
    srv_ver[key] += updates
    if log_i.shape[0] > 0:
        n = log_i[0, 0]
        log_i[n + 1, 0] = key
        log_i[n + 1, 1] = updates
        for d in range(srv_val.shape[1]):
            log_g[n, d] = src[row, d]
        log_i[0, 0] = n + 1



@nb.njit(cache=True)
def write_step(slot_of, links, lines, lru_q, vecs, buckets, free_b, queue_i, queue_g, meta,
               counters, srv_val, srv_ver, keys, uniq, inv, slots, known, grads, const_grad,
               write_bound, per_occurrence, log_i, log_g):
    """One write ([`workbench.cluster.cache`][]): touch, add every occurrence's row, count the
    clock ticks, then push in ascending key order, prefetching the server rows a few pushes
    ahead."""
    m = uniq.shape[0]
    dim = vecs.shape[2]
    lru = meta[_POLICY] == _LRU
    far = srv_val.shape[0] > _CACHED_ROWS
    _gather_slots(slot_of, uniq, lines, srv_ver, slots, known, far)
    if not lru:
        _touch_lists(links, buckets, free_b, meta, slots)
    elif not (known and retouch_run(lines, lru_q, meta, slots)):
        for j in range(m):
            if j + _AHEAD < m and slots[j + _AHEAD] >= 0:
                prefetch_row(lines, slots[j + _AHEAD])
            if slots[j] >= 0:
                _lru_append(lines, lru_q, meta, slots[j])
    meta[_RUN_END] = -1
    direct = np.zeros((m, dim), np.float32)
    occurrences = np.zeros(m, np.int64)
    if grads.shape[0] == 0:  # one constant update for every element
        grads = np.full((keys.shape[0], dim), const_grad, np.float32)
    n_keys = keys.shape[0]
    for i in range(n_keys):
        if far and i + _SCAN < n_keys and slots[inv[i + _SCAN]] >= 0:
            prefetch_row_w(vecs, slots[inv[i + _SCAN]])
        j = inv[i]
        s = slots[j]
        occurrences[j] += 1
        if s >= 0:
            for d in range(dim):
                vecs[s, 0, d] += grads[i, d]
                vecs[s, 1, d] += grads[i, d]
        else:
            for d in range(dim):
                direct[j, d] += grads[i, d]
    # clock ticks: one per gradient row (Hetu's code), or one per write call, i.e. per
    # iteration in which this worker updates the row (the paper's c_c, section 3.1)
    direct_n = occurrences if per_occurrence else np.ones(m, np.int64)
    order = np.empty(m, np.int64)  # the keys to push, ascending: past the bound, or uncached
    n = 0
    for j in range(m):
        if far and j + _SCAN < m and slots[j + _SCAN] >= 0:
            prefetch_row_w(lines, slots[j + _SCAN])
        s = slots[j]
        if s >= 0:
            if lines[s, _UPD] == 0:
                meta[_DIRTY] += 1
            lines[s, _UPD] += direct_n[j]
            if lines[s, _UPD] > write_bound:
                order[n] = j
                n += 1
        else:
            order[n] = j
            n += 1
    grad_rows = vecs[:, 1, :]
    for p in range(n):
        if far and p + _SCAN < n:
            ahead = order[p + _SCAN]
            prefetch_row_w(srv_val, uniq[ahead])
            prefetch_row_w(srv_ver, uniq[ahead])
            if slots[ahead] >= 0:
                prefetch_row_w(vecs, slots[ahead])
                prefetch_row_w(lines, slots[ahead])
        j = order[p]
        s = slots[j]
        if s >= 0:
            upd = lines[s, _UPD]
            _push_row(srv_val, srv_ver, uniq[j], grad_rows, s, upd, log_i, log_g)
            lines[s, _VER] += upd
            lines[s, _UPD] = 0
            meta[_DIRTY] -= 1
            for d in range(dim):
                vecs[s, 1, d] = 0.0
            counters[_BOUND_PUSHES] += 1
        else:
            _push_row(srv_val, srv_ver, uniq[j], direct, j, direct_n[j], log_i, log_g)
            counters[_UNCACHED_PUSHES] += 1
    pushed = n + drain_queue(queue_i, queue_g, meta, counters, srv_val, srv_ver, log_i, log_g)
    counters[_WRITES] += 1
    counters[_KEYS_WRITTEN] += keys.shape[0]
    counters[_UNIQUE_WRITTEN] += m
    counters[_META_KEYS] += pushed


@nb.njit(cache=True)
def drain_queue(queue_i, queue_g, meta, counters, srv_val, srv_ver, log_i, log_g):
    """Push every queued dirty evictee (key, updates, grad) to the server; empty the queue."""
    q = meta[_QLEN]
    for i in range(q):
        _push_row(srv_val, srv_ver, queue_i[i, 0], queue_g, i, queue_i[i, 1], log_i, log_g)
    counters[_EVICT_PUSHES] += q
    meta[_QLEN] = 0
    return q


@nb.njit(cache=True)
def flush_all(lines, vecs, queue_i, queue_g, meta, counters, srv_val, srv_ver, log_i, log_g):
    """Push every cached line with unpushed updates, then the queue (the end of a run)."""
    grad_rows = vecs[:, 1, :]
    for s in range(meta[_SIZE]):
        upd = lines[s, _UPD]
        if upd > 0:
            _push_row(srv_val, srv_ver, lines[s, _KEY], grad_rows, s, upd, log_i, log_g)
            lines[s, _VER] += upd
            lines[s, _UPD] = 0
            meta[_DIRTY] -= 1
            for d in range(vecs.shape[2]):
                vecs[s, 1, d] = 0.0
            counters[_FLUSH_PUSHES] += 1
    drain_queue(queue_i, queue_g, meta, counters, srv_val, srv_ver, log_i, log_g)
