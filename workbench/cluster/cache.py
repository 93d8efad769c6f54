"""HET's per-worker embedding cache with per-embedding bounded staleness (numba kernels).

Follows the Hetu v1.0 reference semantics (Hetu's public cache code, transcribed)::

    worker w                                        parameter server
    +-------------------------------------+         +---------------------------+
    | cache line: value, grad (unpushed), |  pull   | row k: value, ver         |
    |   version (server ver at last pull),| <------ |   ver = gradient          |
    |   updates (contributions unpushed)  |         |   contributions applied   |
    | policy: LRU | LFU | LFUOpt | none   | ------> |   value += grad           |
    | evict queue: dirty evicted lines    |  push   |   ver   += updates        |
    +-------------------------------------+         +---------------------------+

Read of keys K (duplicates allowed), read bound s_r:
    U = sorted unique(K); look every u up in the policy (a hit touches LRU/LFU state);
    pull u iff it is a miss, or a hit with  server.ver[u] - line.version > s_r
        (a pulled hit: version = server.ver, value = server.value + grad: read-my-updates);
    output a row for every occurrence (before any insertion);
    insert the misses in key order (may evict; a victim with updates != 0 is dirty: queued).
Write of keys K with one gradient row per occurrence, write bound s_w:
    look U up again (LFU frequencies rise twice per step); per occurrence of a cached key:
        value += g, grad += g, updates += 1;  an uncached key's rows are summed for a direct push;
    push every cached line of U with updates > s_w, the queued dirty evictees, and the uncached
        keys; the server does value += grad, ver += updates; a pushed line gets
        version += updates, grad = 0, updates = 0.
Clock unit (``CacheSpec.clock``): ``update`` (above: a tick per gradient row, Hetu's code) or
``iteration`` (a tick per write call that updates the row, whatever its occurrences: the HET
paper's per-embedding clock, section 3.1, in which s = 100 means 100 of this worker's iterations).
Policies: LRU (recency queue, below); LFU (frequency buckets, recency order inside a bucket,
evict the oldest line of the lowest bucket); LFUOpt (HET's light LFU: a line reaching 10 uses
becomes permanent; when every line is permanent a new key is not cached); none (capacity 0: pull
and push every key every step).

Layout (struct of arrays, so the kernels compile with numba and nothing loops per key in Python):

* ``slot_of[rows]`` (int32): the cache slot holding a key, or -1; in an
  :class:`~workbench.cluster.edge_cluster.EdgeCluster`, column w of one key-major ``[rows, W]``
  table (:func:`cluster_slots`), so the ESD cost model reads every worker's slot of a key from
  one memory line;
* ``links[C, 4]`` (int32): prev, next, bucket, freq of each slot (the LFU and LFUOpt list
  links, 16 bytes a line, apart from the rest so a list walk stays in the core's L2 cache; one
  unused row for LRU and none);
* ``lines[C, 4]`` (int64): key, version, updates and LRU queue position of each slot (32 bytes:
  two lines to a 64-byte cache line, so the touch and the version check share one);
* ``lru_q[Q]`` (int32, Q = 2C + 1; LRU only): the recency queue, below;
* ``vecs[C, 2, D]``: value and grad of each slot (float32, as on the wire; side by side, so a
  write's two row updates share a cache line at D = 8);
* ``buckets[NB, 5]``: freq, head, tail, prev, next of each bucket (an LRU list of lines);
  LFUOpt uses buckets 1..9 (use counts), LFU a sorted list of buckets allocated
  from a free pool;
* ``queue_i[C, 2]``, ``queue_g[C, D]``: the dirty-eviction queue (key, updates; grad);
* ``meta[10]``: policy, capacity, size, first LFU bucket, free-bucket top, queue length,
  permanent lines, dirty lines (kept up to date so the ESD cost model reads it in O(1)), LRU
  queue head and tail;
* ``counters``: see :data:`COUNTERS`.

Between two writes a line can be evicted dirty at most once (a re-inserted line is clean), so
the queue never holds more than C entries.

LRU's recency queue (exact LRU, lazily deleted). A touch or an insert of slot s appends s at the
tail and records the position; an entry whose slot has been touched since is stale::

    lru_q:  [ head ... stale  s3  stale  s7  s1 ... tail )      lines[s, 3] = s's live position
              ^ oldest live entry = the LRU line (the victim)

    touch(s):  lru_q[tail] = s;  lines[s, 3] = tail;  tail += 1
    victim:    while lines[lru_q[head], 3] != head: head += 1      (skip stale entries)
    full tail: compact the live entries (at most C) to the front, in order

Every live line has exactly one live entry, in the order of its last touch, so the oldest live
entry is exactly the doubly linked list's tail: the same victims, hence the same counters. A touch
writes one word of a line the kernel reads anyway and one sequential queue word (a list's touch
rewrites both neighbours, two random lines), and the victims are found by a sequential scan that
can be prefetched (a list's tail walk is a chain of dependent random loads). Each entry is
appended once and skipped once: O(1) amortised per touch; the compaction every >= C + 1 appends
reads at most 2C + 1 entries.

Speed (``benchmarks/cache_replay.py``): the sorted unique keys of a call come from the server's
two-level bitmap (:mod:`workbench.utils.bitset`, no sort), and a write of the keys just read
reuses the read's; touches prefetch the lines of the slots a few keys ahead, and their list
neighbours (:mod:`workbench.utils.prefetch`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numba as nb
import numpy as np

from workbench.cluster.linked_list import HEAD, NEXT, PREV, TAIL, push_front, unlink
from workbench.utils.bitset import bitset_arrays, drain_sorted, mark
from workbench.utils.prefetch import prefetch

POLICIES = {"none": 0, "lru": 1, "lfu": 2, "lfuopt": 3}
LFUOPT_PERMANENT = 10  # HET's kUseCntMax: uses after which an LFUOpt line is never evicted

COUNTERS = ("reads", "keys_read", "unique_read", "misses", "miss_pulls", "stale_pulls",
            "writes", "keys_written", "unique_written", "bound_pushes", "evict_pushes",
            "uncached_pushes", "flush_pushes", "evictions", "meta_keys",
            "full_reads", "full_unique", "full_misses")
C_INDEX = {name: i for i, name in enumerate(COUNTERS)}
(_READS, _KEYS_READ, _UNIQUE_READ, _MISSES, _MISS_PULLS, _STALE_PULLS, _WRITES, _KEYS_WRITTEN,
 _UNIQUE_WRITTEN, _BOUND_PUSHES, _EVICT_PUSHES, _UNCACHED_PUSHES, _FLUSH_PUSHES, _EVICTIONS,
 _META_KEYS, _FULL_READS, _FULL_UNIQUE, _FULL_MISSES) = range(len(COUNTERS))
PULL_COUNTERS = ("miss_pulls", "stale_pulls")
PUSH_COUNTERS = ("bound_pushes", "evict_pushes", "uncached_pushes", "flush_pushes")

# links[] columns (int32): a line is a node of its bucket's list (workbench.cluster.linked_list)
_PREV, _NEXT = PREV, NEXT
_BUCKET, _FREQ = 2, 3
# lines[] columns (int64)
_KEY, _VER, _UPD, _QPOS = 0, 1, 2, 3
LINE_COLUMNS = 4
#: lines[] columns read by other modules: the cached row's version, its unpushed updates
LINE_VERSION, LINE_UPDATES = _VER, _UPD
# buckets[] columns: a bucket is a list of lines, and a node of the chain of LFU buckets
_BHEAD, _BTAIL = HEAD, TAIL
_BFREQ, _BPREV, _BNEXT = range(2, 5)
# meta[] entries
_POLICY, _CAP, _SIZE, _FIRST, _FREE_TOP, _QLEN, _PERM, _DIRTY, _QHEAD, _QTAIL = range(10)
_NONE, _LRU, _LFU, _LFUOPT = 0, 1, 2, 3
# prefetch distances (in touches) of a line and of its list neighbours
_AHEAD, _NEAR = 8, 4


# ------------------------------------------------------------------------------------------
# Linked-list primitives (lines in bucket lists: workbench.cluster.linked_list; the LFU bucket
# chain)
# ------------------------------------------------------------------------------------------

@nb.njit(cache=True, _nrt=False)
def _unlink(links, buckets, s):
    unlink(links, buckets, links[s, _BUCKET], s)


@nb.njit(cache=True, _nrt=False)
def _push_front(links, buckets, s, b):
    push_front(links, buckets, b, s)
    links[s, _BUCKET] = b


@nb.njit(cache=True, _nrt=False)
def _new_bucket(buckets, free_b, meta, freq, after):
    """Allocate an LFU bucket of ``freq`` right after bucket ``after`` (-1: at the front)."""
    meta[_FREE_TOP] -= 1
    b = free_b[meta[_FREE_TOP]]
    buckets[b, _BFREQ] = freq
    buckets[b, _BHEAD] = -1
    buckets[b, _BTAIL] = -1
    nxt = meta[_FIRST] if after < 0 else buckets[after, _BNEXT]
    buckets[b, _BPREV] = after
    buckets[b, _BNEXT] = nxt
    if after >= 0:
        buckets[after, _BNEXT] = b
    else:
        meta[_FIRST] = b
    if nxt >= 0:
        buckets[nxt, _BPREV] = b
    return b


@nb.njit(cache=True, _nrt=False)
def _drop_bucket_if_empty(buckets, free_b, meta, b):
    if buckets[b, _BHEAD] >= 0:
        return
    p, n = buckets[b, _BPREV], buckets[b, _BNEXT]
    if p >= 0:
        buckets[p, _BNEXT] = n
    else:
        meta[_FIRST] = n
    if n >= 0:
        buckets[n, _BPREV] = p
    free_b[meta[_FREE_TOP]] = b
    meta[_FREE_TOP] += 1


@nb.njit(cache=True, _nrt=False)
def _lru_append(lines, lru_q, meta, s):
    """Make slot ``s`` the most recently used line: append it to the recency queue."""
    t = meta[_QTAIL]
    if t == lru_q.shape[0]:  # full: keep the live entries (<= C < Q), in order
        w = 0
        for i in range(meta[_QHEAD], t):
            x = lru_q[i]
            if lines[x, _QPOS] == i:
                lru_q[w] = x
                lines[x, _QPOS] = w
                w += 1
        meta[_QHEAD] = 0
        t = w
    lru_q[t] = s
    lines[s, _QPOS] = t
    meta[_QTAIL] = t + 1


@nb.njit(cache=True, _nrt=False)
def _lru_victim(lines, lru_q, meta):
    """The least recently used line (the oldest live queue entry; the cache is full), its
    entry consumed."""
    h = meta[_QHEAD]
    ahead = meta[_QTAIL] - _AHEAD
    while lines[lru_q[h], _QPOS] != h:
        if h < ahead:
            prefetch(lines, lru_q[h + _AHEAD] * LINE_COLUMNS)
        h += 1
    meta[_QHEAD] = h + 1
    return lru_q[h]


# ------------------------------------------------------------------------------------------
# Policy operations
# ------------------------------------------------------------------------------------------

@nb.njit(cache=True, _nrt=False)
def _touch(links, buckets, free_b, meta, s):
    """Count a use of slot ``s`` in LFU or LFUOpt (LRU: :func:`_lru_append`)."""
    policy = meta[_POLICY]
    if policy == _LFU:
        b = links[s, _BUCKET]
        f = links[s, _FREQ] + 1
        nxt = buckets[b, _BNEXT]
        if nxt >= 0 and buckets[nxt, _BFREQ] == f:
            nb_ = nxt
        else:
            nb_ = _new_bucket(buckets, free_b, meta, f, b)
        _unlink(links, buckets, s)
        _push_front(links, buckets, s, nb_)
        links[s, _FREQ] = f
        _drop_bucket_if_empty(buckets, free_b, meta, b)
    elif policy == _LFUOPT:
        f = links[s, _FREQ]
        if f >= LFUOPT_PERMANENT:
            return
        _unlink(links, buckets, s)
        f += 1
        links[s, _FREQ] = f
        if f >= LFUOPT_PERMANENT:
            links[s, _BUCKET] = -1
            meta[_PERM] += 1
        else:
            _push_front(links, buckets, s, f)


@nb.njit(cache=True)
def _lookup_and_touch(slot_of, uniq, links, lines, lru_q, buckets, free_b, meta):
    """The slot of every key of ``uniq`` (-1: not cached); touch the cached ones in key order,
    prefetching the lines (LRU) or the links and their list neighbours a few touches ahead."""
    m = uniq.shape[0]
    slots = np.empty(m, np.int64)
    for j in range(m):
        slots[j] = slot_of[uniq[j]]
    if meta[_POLICY] == _LRU:
        for j in range(m):
            if j + _AHEAD < m and slots[j + _AHEAD] >= 0:
                prefetch(lines, slots[j + _AHEAD] * LINE_COLUMNS)
            if slots[j] >= 0:
                _lru_append(lines, lru_q, meta, slots[j])
        return slots
    width = links.shape[1]
    for j in range(m):
        if j + _AHEAD < m and slots[j + _AHEAD] >= 0:
            prefetch(links, slots[j + _AHEAD] * width)
        if j + _NEAR < m and slots[j + _NEAR] >= 0:
            t = slots[j + _NEAR]
            prefetch(links, links[t, _PREV] * width)
            prefetch(links, links[t, _NEXT] * width)
        if slots[j] >= 0:
            _touch(links, buckets, free_b, meta, slots[j])
    return slots


@nb.njit(cache=True, _nrt=False)
def _victim(links, buckets, meta):
    """The next victim of LFU or LFUOpt (-1: every line is permanent)."""
    if meta[_POLICY] == _LFU:
        return buckets[meta[_FIRST], _BTAIL]
    for b in range(1, LFUOPT_PERMANENT):
        if buckets[b, _BTAIL] >= 0:
            return buckets[b, _BTAIL]
    return -1


@nb.njit(cache=True, _nrt=False)
def _insert(slot_of, links, lines, lru_q, vecs, buckets, free_b, queue_i, queue_g, meta, counters,
            key):
    """Give ``key`` a slot (evicting when full); return it, or -1 when it cannot be cached."""
    cap = meta[_CAP]
    if cap == 0:
        return -1
    policy = meta[_POLICY]
    if meta[_SIZE] < cap:
        s = meta[_SIZE]
        meta[_SIZE] += 1
    else:
        s = _lru_victim(lines, lru_q, meta) if policy == _LRU else _victim(links, buckets, meta)
        if s < 0:
            return -1
        counters[_EVICTIONS] += 1
        if lines[s, _UPD] != 0:
            meta[_DIRTY] -= 1
            q = meta[_QLEN]
            queue_i[q, 0] = lines[s, _KEY]
            queue_i[q, 1] = lines[s, _UPD]
            for d in range(vecs.shape[2]):
                queue_g[q, d] = vecs[s, 1, d]
            meta[_QLEN] = q + 1
        if policy != _LRU:
            b = links[s, _BUCKET]
            _unlink(links, buckets, s)
            if policy == _LFU:
                _drop_bucket_if_empty(buckets, free_b, meta, b)
        slot_of[lines[s, _KEY]] = -1
    lines[s, _KEY] = key
    slot_of[key] = s
    if policy == _LRU:
        _lru_append(lines, lru_q, meta, s)
        return s
    links[s, _FREQ] = 1
    if policy == _LFUOPT:
        _push_front(links, buckets, s, 1)
    else:
        first = meta[_FIRST]
        if first >= 0 and buckets[first, _BFREQ] == 1:
            b1 = first
        else:
            b1 = _new_bucket(buckets, free_b, meta, 1, -1)
        _push_front(links, buckets, s, b1)
    return s


# ------------------------------------------------------------------------------------------
# Read and write kernels
# ------------------------------------------------------------------------------------------

@nb.njit(cache=True)
def _unique(keys, bitmap, summary, scratch):
    """Sorted unique keys and, per occurrence, the index of its key in the unique array.

    The keys pass through the server's two-level bitmap (:mod:`workbench.utils.bitset`: sorted
    without a sort, O(n + m + rows / 4096) for n keys with m distinct); ``scratch[k + 1, 1]``
    then receives key k's position.
    """
    n = keys.shape[0]
    for i in range(n):
        mark(bitmap, summary, keys[i])
    uniq = np.empty(n, np.int64)
    uniq = uniq[:drain_sorted(bitmap, summary, uniq)]
    for j in range(uniq.shape[0]):
        scratch[uniq[j] + 1, 1] = j
    inv = np.empty(n, np.int64)
    for i in range(n):
        inv[i] = scratch[keys[i] + 1, 1]
    return uniq, inv


@nb.njit(cache=True)
def _read(slot_of, links, lines, lru_q, vecs, buckets, free_b, queue_i, queue_g, meta, counters,
          srv_val, srv_ver, keys, uniq, inv, read_bound, out, want_values):
    m = uniq.shape[0]
    slots = _lookup_and_touch(slot_of, uniq, links, lines, lru_q, buckets, free_b, meta)
    misses = 0
    stale = 0
    for j in range(m):
        u = uniq[j]
        s = slots[j]
        if s >= 0:
            if srv_ver[u] - lines[s, _VER] > read_bound:
                stale += 1
                lines[s, _VER] = srv_ver[u]
                for d in range(srv_val.shape[1]):
                    vecs[s, 0, d] = srv_val[u, d] + vecs[s, 1, d]
        else:
            misses += 1
    if want_values:
        dim = out.shape[1]
        for i in range(keys.shape[0]):
            s = slots[inv[i]]
            if s >= 0:
                for d in range(dim):
                    out[i, d] = vecs[s, 0, d]
            else:
                u = uniq[inv[i]]
                for d in range(dim):
                    out[i, d] = srv_val[u, d]
    for j in range(m):
        if slots[j] < 0:
            u = uniq[j]
            s = _insert(slot_of, links, lines, lru_q, vecs, buckets, free_b, queue_i, queue_g,
                        meta, counters, u)
            if s >= 0:
                lines[s, _VER] = srv_ver[u]
                lines[s, _UPD] = 0
                for d in range(srv_val.shape[1]):
                    vecs[s, 0, d] = srv_val[u, d]
                    vecs[s, 1, d] = 0.0
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


@nb.njit(cache=True, _nrt=False)
def _push_row(srv_val, srv_ver, key, src, row, updates, log_i, log_g):
    """Server side of a push: ``value[key] += src[row]``, ``ver[key] += updates``.

    With a push log (``log_i`` non-empty: row 0 holds the entry count, row n + 1 the key and
    updates of entry n, ``log_g[n]`` its gradient row) the push is also recorded, so a worker
    whose server is remote can send exactly these rows (:mod:`workbench.cluster.remote_ps`).
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
def _write(slot_of, links, lines, lru_q, vecs, buckets, free_b, queue_i, queue_g, meta, counters,
           srv_val, srv_ver, keys, uniq, inv, grads, const_grad, write_bound, per_occurrence,
           log_i, log_g):
    m = uniq.shape[0]
    dim = vecs.shape[2]
    slots = _lookup_and_touch(slot_of, uniq, links, lines, lru_q, buckets, free_b, meta)
    direct = np.zeros((m, dim), np.float32)
    occurrences = np.zeros(m, np.int64)
    per_row = grads.shape[0] > 0
    for i in range(keys.shape[0]):
        j = inv[i]
        s = slots[j]
        occurrences[j] += 1
        if s >= 0:
            for d in range(dim):
                g = grads[i, d] if per_row else const_grad
                vecs[s, 0, d] += g
                vecs[s, 1, d] += g
        else:
            for d in range(dim):
                direct[j, d] += grads[i, d] if per_row else const_grad
    # clock ticks: one per gradient row (Hetu's code), or one per write call, i.e. per
    # iteration in which this worker updates the row (the paper's c_c, section 3.1)
    direct_n = occurrences if per_occurrence else np.ones(m, np.int64)
    for j in range(m):
        s = slots[j]
        if s >= 0:
            if lines[s, _UPD] == 0:
                meta[_DIRTY] += 1
            lines[s, _UPD] += direct_n[j]
    pushed = 0
    grad_rows = vecs[:, 1, :]
    for j in range(m):
        s = slots[j]
        if s >= 0:
            upd = lines[s, _UPD]
            if upd > write_bound:
                _push_row(srv_val, srv_ver, uniq[j], grad_rows, s, upd, log_i, log_g)
                lines[s, _VER] += upd
                lines[s, _UPD] = 0
                meta[_DIRTY] -= 1
                for d in range(dim):
                    vecs[s, 1, d] = 0.0
                counters[_BOUND_PUSHES] += 1
                pushed += 1
        else:
            _push_row(srv_val, srv_ver, uniq[j], direct, j, direct_n[j], log_i, log_g)
            counters[_UNCACHED_PUSHES] += 1
            pushed += 1
    pushed += _drain_queue(queue_i, queue_g, meta, counters, srv_val, srv_ver, log_i, log_g)
    counters[_WRITES] += 1
    counters[_KEYS_WRITTEN] += keys.shape[0]
    counters[_UNIQUE_WRITTEN] += m
    counters[_META_KEYS] += pushed


@nb.njit(cache=True)
def _drain_queue(queue_i, queue_g, meta, counters, srv_val, srv_ver, log_i, log_g):
    q = meta[_QLEN]
    for i in range(q):
        _push_row(srv_val, srv_ver, queue_i[i, 0], queue_g, i, queue_i[i, 1], log_i, log_g)
    counters[_EVICT_PUSHES] += q
    meta[_QLEN] = 0
    return q


@nb.njit(cache=True)
def _flush(lines, vecs, queue_i, queue_g, meta, counters, srv_val, srv_ver, log_i, log_g):
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
    _drain_queue(queue_i, queue_g, meta, counters, srv_val, srv_ver, log_i, log_g)


# ------------------------------------------------------------------------------------------
# Python-facing objects
# ------------------------------------------------------------------------------------------

#: What one tick of a row's clock (its ``updates`` / ``ver``) counts: ``update`` = one gradient
#: row (per occurrence of the key in the batch; Hetu v1.0's code), ``iteration`` = one write call
#: that updates the row (per iteration, as the HET paper's clock ``c_c`` in section 3.1).
CLOCKS = ("update", "iteration")


class ParameterServer:
    """The global embedding table: one value row and one version counter per key.

    Args:
        values: initial rows ``[rows, dim]`` (copied to float32).
    """

    def __init__(self, values: np.ndarray) -> None:
        self.values = np.ascontiguousarray(values, dtype=np.float32).copy()
        self.versions = np.zeros(len(self.values), dtype=np.int64)
        # Dedup scratch shared by the caches of this server (kernels run one at a time):
        # row k + 1 holds key k's last-seen stamp and its position in the unique array;
        # [0, 0] is the call counter. The caches' sorted dedup (_unique) marks keys in a
        # two-level bitmap, left all zero between calls.
        self.scratch = np.zeros((len(self.values) + 1, 2), dtype=np.int64)
        self.bitmap, self.bitmap_summary = bitset_arrays(len(self.values))

    def unique(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Sorted unique ``keys`` (``int64``, contiguous) and each occurrence's index in them."""
        return _unique(keys, self.bitmap, self.bitmap_summary, self.scratch)

    @property
    def rows(self) -> int:
        """Number of rows."""
        return self.values.shape[0]

    @property
    def dim(self) -> int:
        """Row width."""
        return self.values.shape[1]


@dataclass(frozen=True)
class CacheSpec:
    """One worker cache's policy, capacity and staleness bounds."""

    policy: str
    capacity: int
    read_bound: int
    write_bound: int
    clock: str = "update"

    def __post_init__(self) -> None:
        if self.clock not in CLOCKS:
            raise ValueError(f"cache clock {self.clock!r}: must be one of {CLOCKS}")
        if self.policy not in POLICIES:
            raise ValueError(f"cache policy {self.policy!r}: must be one of {sorted(POLICIES)}")
        if self.capacity < 0 or self.read_bound < 0 or self.write_bound < 0:
            raise ValueError("cache capacity and bounds must be >= 0")


def cluster_slots(spec: CacheSpec, rows: int, workers: int) -> tuple[np.ndarray, np.ndarray]:
    """The state W caches of one spec share, for :class:`WorkerCache`'s ``slot_of`` and
    ``lines`` (worker w gets ``slot_of[:, w]`` and ``lines[w]``).

    Returns:
        ``slot_of``: ``int32[rows, W]``, key-major (all workers' slots of a key on one line);
        ``lines``: ``int64[W, max(C, 1), 4]``.
    """
    cap = 0 if spec.policy == "none" else int(spec.capacity)
    return (np.full((rows, workers), -1, dtype=np.int32),
            np.full((workers, max(cap, 1), LINE_COLUMNS), -1, dtype=np.int64))


class WorkerCache:
    """One edge worker's embedding cache bound to a :class:`ParameterServer`.

    Args:
        spec: policy, capacity (rows; forced to 0 for ``none``) and bounds.
        server: the parameter server whose rows are cached.
        log_pushes: record the rows each write pushes (:meth:`pushes`).
        slot_of: the slot of every key, ``int32[rows]`` filled with -1; a view of the cluster's
            key-major ``[rows, W]`` table (:func:`cluster_slots`) lets the ESD cost model read
            every worker's state of a key from one memory line. None: a private array.
        lines: key, version, updates and LRU queue position of every slot,
            ``int64[max(C, 1), 4]`` filled with -1
            (a view of :func:`cluster_slots`' stacked lines); None: a private array.

    Example::

        ps = ParameterServer(np.zeros((100, 8)))
        cache = WorkerCache(CacheSpec("lru", capacity=10, read_bound=100, write_bound=100), ps)
        rows = cache.read(np.array([3, 7, 3]))          # [3, 8]
        cache.write(np.array([3, 7, 3]), -0.01 * rows)  # plain SGD update rows
    """

    def __init__(self, spec: CacheSpec, server: ParameterServer,
                 log_pushes: bool = False, slot_of: np.ndarray | None = None,
                 lines: np.ndarray | None = None) -> None:
        self.spec = spec
        self.log_pushes = log_pushes
        self.server = server
        cap = 0 if spec.policy == "none" else int(spec.capacity)
        dim = server.dim
        n_buckets = cap + LFUOPT_PERMANENT + 2
        if slot_of is None:
            slot_of = np.full(server.rows, -1, dtype=np.int32)  # 4 bytes per row per worker
        if lines is None:
            lines = np.full((max(cap, 1), LINE_COLUMNS), -1, dtype=np.int64)
        if slot_of.shape != (server.rows,) or slot_of.dtype != np.int32:
            raise ValueError(f"slot_of: int32[{server.rows}] expected, got "
                             f"{slot_of.dtype}{list(slot_of.shape)}")
        if lines.shape != (max(cap, 1), LINE_COLUMNS) or lines.dtype != np.int64:
            raise ValueError(f"lines: int64[{max(cap, 1)}, {LINE_COLUMNS}] expected, got "
                             f"{lines.dtype}{list(lines.shape)}")
        self.slot_of = slot_of
        self.lines = lines
        # the list links apart from the keys and versions: the lists' pointer chasing reads
        # 16-byte rows that stay in the core's L2 cache for 100k-line caches
        lists = spec.policy in ("lfu", "lfuopt")
        self.links = np.full((max(cap, 1) if lists else 1, 4), -1, dtype=np.int32)
        self.lru_q = np.zeros(2 * cap + 1 if spec.policy == "lru" else 1, dtype=np.int32)
        self.vecs = np.zeros((max(cap, 1), 2, dim), dtype=np.float32)
        self.buckets = np.full((n_buckets, 5), -1, dtype=np.int64)
        self.buckets[:, _BFREQ] = np.arange(n_buckets)  # LFUOpt buckets 1..9
        self.queue_i = np.zeros((max(cap, 1), 2), dtype=np.int64)
        self.queue_g = np.zeros((max(cap, 1), dim), dtype=np.float32)
        self.meta = np.zeros(10, dtype=np.int64)
        self.meta[_POLICY] = POLICIES[spec.policy]
        self.meta[_CAP] = cap
        self.meta[_FIRST] = -1
        # LFU allocates buckets from a free pool (the fixed LRU/LFUOpt buckets are never freed).
        self.free_b = np.arange(n_buckets, dtype=np.int64)[::-1].copy()
        self.meta[_FREE_TOP] = n_buckets
        self.counters = np.zeros(len(COUNTERS), dtype=np.int64)
        self._no_grads = np.zeros((0, dim), dtype=np.float32)
        # push log (log_pushes): row 0 of _log_i = entry count, then (key, updates) per push
        self._log_i = np.zeros((0, 2), dtype=np.int64)
        self._log_g = np.zeros((0, dim), dtype=np.float32)
        # (keys, sorted unique keys, inverse) of the last read or write: a write of the same
        # keys skips its dedup
        self._last_dedup: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    @property
    def size(self) -> int:
        """Lines currently cached."""
        return int(self.meta[_SIZE])

    @property
    def capacity(self) -> int:
        """Capacity in lines (0 for ``none``)."""
        return int(self.meta[_CAP])

    def _state(self) -> tuple:
        return (self.slot_of, self.links, self.lines, self.lru_q, self.vecs, self.buckets,
                self.free_b,
                self.queue_i, self.queue_g, self.meta, self.counters, self.server.values,
                self.server.versions)

    def _dedup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``keys`` as contiguous int64 with their sorted unique keys and inverse. A write of the
        keys just read (the protocol's usual read-then-write) reuses the read's dedup."""
        keys = np.ascontiguousarray(keys, dtype=np.int64)
        last = self._last_dedup
        if last is not None and last[0].shape == keys.shape and np.array_equal(last[0], keys):
            return last
        uniq, inv = self.server.unique(keys)
        self._last_dedup = (keys.copy(), uniq, inv)  # a copy: the caller may reuse its buffer
        return keys, uniq, inv

    def read(self, keys: np.ndarray, want_values: bool = True) -> np.ndarray:
        """Read ``keys`` (duplicates allowed); return one float32 row per occurrence.

        With ``want_values=False`` only the protocol runs (counters, policy, pulls) and an
        empty array is returned.
        """
        keys, uniq, inv = self._dedup(keys)
        out = np.empty((len(keys) if want_values else 0, self.server.dim), dtype=np.float32)
        _read(*self._state(), keys, uniq, inv, self.spec.read_bound, out, want_values)
        return out

    def write(self, keys: np.ndarray, grads: np.ndarray | float) -> None:
        """Apply one update row per occurrence of ``keys`` (``grads``: ``[len(keys), dim]``,
        already ``-lr * gradient``), or the same scalar update to every element."""
        keys, uniq, inv = self._dedup(keys)
        self._reset_log(len(keys) + self.capacity)  # a write pushes <= unique keys + queue
        if np.isscalar(grads):
            _write(*self._state(), keys, uniq, inv, self._no_grads, np.float32(cast(float, grads)),
                   self.spec.write_bound, self.spec.clock == "update", self._log_i,
                   self._log_g)
        else:
            grads = np.ascontiguousarray(grads, dtype=np.float32)
            if grads.shape != (len(keys), self.server.dim):
                raise ValueError(f"grads has shape {grads.shape}; expected "
                                 f"({len(keys)}, {self.server.dim})")
            _write(*self._state(), keys, uniq, inv, grads, np.float32(0.0),
                   self.spec.write_bound,
                   self.spec.clock == "update", self._log_i, self._log_g)

    def flush(self) -> None:
        """Push every dirty line and the eviction queue (end of training)."""
        self._reset_log(2 * self.capacity)  # dirty lines + queued evictees
        _flush(self.lines, self.vecs, self.queue_i, self.queue_g, self.meta, self.counters,
               self.server.values, self.server.versions, self._log_i, self._log_g)

    def _reset_log(self, entries: int) -> None:
        if not self.log_pushes:
            return
        if self._log_i.shape[0] < entries + 1:
            self._log_i = np.zeros((entries + 1, 2), dtype=np.int64)
            self._log_g = np.zeros((max(entries, 1), self.server.dim), dtype=np.float32)
        self._log_i[0, 0] = 0

    def pushes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rows the last :meth:`write` or :meth:`flush` pushed, in push order (a cache built
        with ``log_pushes``): keys ``int64[n]``, updates ``int64[n]``, gradient rows
        ``float32[n, D]`` (views, valid until the next write or flush)."""
        if not self.log_pushes:
            raise RuntimeError("pushes() needs a cache built with log_pushes=True")
        n = int(self._log_i[0, 0]) if len(self._log_i) else 0
        return self._log_i[1:n + 1, 0], self._log_i[1:n + 1, 1], self._log_g[:n]

    def key_state(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Vectorised state of ``keys``: present, stale beyond the read bound, dirty."""
        slot = self.slot_of[keys]
        present = slot >= 0
        safe = np.where(present, slot, 0)
        lag = self.server.versions[keys] - self.lines[safe, _VER]
        stale = present & (lag > self.spec.read_bound)
        dirty = present & (self.lines[safe, _UPD] > 0)
        return present, stale, dirty

    def dirty_fraction(self) -> float:
        """Share of the capacity holding dirty lines when the cache is full (else 0): the
        probability that inserting a miss evicts a line that must be pushed."""
        if self.capacity == 0 or self.size < self.capacity:
            return 0.0
        return float(self.meta[_DIRTY]) / self.capacity

    @property
    def dirty_lines(self) -> int:
        """Cached lines holding unpushed updates."""
        return int(self.meta[_DIRTY])

    def unpushed(self) -> tuple[np.ndarray, np.ndarray]:
        """Keys and gradient rows not yet on the server (dirty lines and the evict queue)."""
        size, q = self.size, int(self.meta[_QLEN])
        dirty = np.flatnonzero(self.lines[:size, _UPD] != 0)
        keys = np.concatenate([self.lines[dirty, _KEY], self.queue_i[:q, 0]])
        grads = np.concatenate([self.vecs[dirty, 1], self.queue_g[:q]])
        return keys, grads

    def counter_dict(self) -> dict[str, int]:
        """The counters by name."""
        return {name: int(v) for name, v in zip(COUNTERS, self.counters)}

    def cached_keys(self) -> np.ndarray:
        """Keys currently cached, ascending."""
        return np.sort(self.lines[: self.size, _KEY])

    def line(self, key: int) -> dict | None:
        """The cache line of ``key`` (value, grad, version, updates), or None."""
        s = self.slot_of[key]
        if s < 0:
            return None
        return {"value": self.vecs[s, 0].copy(), "grad": self.vecs[s, 1].copy(),
                "version": int(self.lines[s, _VER]), "updates": int(self.lines[s, _UPD])}

    def eviction_order(self) -> list[int]:
        """Cached, evictable keys, next victim first (for tests and inspection)."""
        order: list[int] = []
        policy = self.meta[_POLICY]
        if policy == _LRU:  # the live queue entries, oldest first
            pos = np.arange(self.meta[_QHEAD], self.meta[_QTAIL])
            live = pos[self.lines[self.lru_q[pos], _QPOS] == pos]
            return [int(k) for k in self.lines[self.lru_q[live], _KEY]]
        if policy == _LFUOPT:
            bucket_ids = list(range(1, LFUOPT_PERMANENT))
        else:
            bucket_ids, b = [], int(self.meta[_FIRST])
            while b >= 0:
                bucket_ids.append(b)
                b = int(self.buckets[b, _BNEXT])
        if self.capacity == 0:
            return order
        for b in bucket_ids:
            s = int(self.buckets[b, _BTAIL])
            while s >= 0:
                order.append(int(self.lines[s, _KEY]))
                s = int(self.links[s, _PREV])
        return order
