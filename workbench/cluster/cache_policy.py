"""The HET cache's state layout and its replacement policies (numba kernels).

The protocol ([`workbench.cluster.cache`][]: reads, writes, pulls and pushes, the formal model)
keeps each worker's cache in the arrays laid out here, and changes which keys they hold only
through this module: a use of a cached line (LRU: `_lru_append`; LFU and LFUOpt:
`_touch`), an insertion that may evict
([`insert`][], and [`insert_lru_batch`][] for a read's misses at once) and the write's
re-touch of its read's LRU queue run ([`retouch_run`][]).

LRU's recency queue (exact LRU, lazily deleted). A touch or an insert of slot s appends s at the
tail and records the position; an entry whose slot has been touched since is stale:

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

LFU keeps frequency buckets (an LRU list of lines each, [`workbench.cluster.linked_list`][]) in
a sorted chain allocated from a free pool; LFUOpt uses the fixed buckets 1..9 and makes a line
permanent at its tenth use.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from workbench.cluster.linked_list import HEAD, NEXT, PREV, TAIL, push_front, unlink
from workbench.utils.prefetch import prefetch_row, prefetch_row_w

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
_RUN_START, _RUN_END = 10, 11  # the LRU queue entries the last read appended (a run)
META_ENTRIES = 12
_NONE, _LRU, _LFU, _LFUOPT = 0, 1, 2, 3
# prefetch distances (in touches) of a line and of its list neighbours
_AHEAD, _NEAR = 8, 4
_SCAN = 16  # queue entries between a prefetch and its use in a sequential queue scan


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
            if i + _SCAN < t:
                prefetch_row(lines, lru_q[i + _SCAN])
            x = lru_q[i]
            if lines[x, _QPOS] == i:
                lru_q[w] = x
                lines[x, _QPOS] = w
                w += 1
        meta[_QHEAD] = 0
        meta[_RUN_START] = -1
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
            prefetch_row(lines, lru_q[h + _AHEAD])
        h += 1
    meta[_QHEAD] = h + 1
    return lru_q[h]


# ------------------------------------------------------------------------------------------
# Policy operations
# ------------------------------------------------------------------------------------------

@nb.njit(cache=True, _nrt=False)
def _touch(links, buckets, free_b, meta, s):
    """Count a use of slot ``s`` in LFU or LFUOpt (LRU: `_lru_append`)."""
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
def insert(slot_of, links, lines, lru_q, vecs, buckets, free_b, queue_i, queue_g, meta, counters,
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


@nb.njit(cache=True, _nrt=False, inline="always")
def fill_line(lines, vecs, srv_val, srv_ver, s, u):
    """A freshly inserted line ``s`` of key ``u``: the server's row and version, no updates."""
    lines[s, _VER] = srv_ver[u]
    lines[s, _UPD] = 0
    for d in range(srv_val.shape[1]):
        vecs[s, 0, d] = srv_val[u, d]
        vecs[s, 1, d] = 0.0


@nb.njit(cache=True)
def insert_lru_batch(slot_of, lines, lru_q, vecs, queue_i, queue_g, meta, counters, srv_val,
                      srv_ver, uniq, slots, missed):
    """Insert the missed keys ``uniq[missed]`` (ascending) into an LRU cache at once.

    The victims of n inserts in a row are the free slots, then the oldest live queue entries in
    order, as long as no insert would evict a line inserted before it in the same call (n at
    most the capacity); then they are all known before the first insert, and the loop that
    replaces them prefetches a few victims' lines, rows and old keys' slots ahead instead of
    chasing one victim at a time. Returns False (nothing done) when n exceeds the capacity: the
    caller inserts one by one.
    """
    n = missed.shape[0]
    cap = meta[_CAP]
    if n > cap:
        return False
    size = meta[_SIZE]
    fresh = min(cap - size, n)
    victims = np.empty(n, np.int64)
    for q in range(fresh):
        victims[q] = size + q
    meta[_SIZE] = size + fresh
    h = meta[_QHEAD]
    tail = meta[_QTAIL]
    q = fresh
    while q < n:  # the oldest live entries, as _lru_victim finds them one at a time
        if h + _AHEAD < tail:
            prefetch_row(lines, lru_q[h + _AHEAD])
        x = lru_q[h]
        if lines[x, _QPOS] == h:
            victims[q] = x
            q += 1
        h += 1
    meta[_QHEAD] = h
    dim = vecs.shape[2]
    for q in range(n):
        if q + 2 * _SCAN < n:
            prefetch_row_w(lines, victims[q + 2 * _SCAN])
        if q + _SCAN < n:
            v = victims[q + _SCAN]
            prefetch_row_w(vecs, v)
            prefetch_row(srv_val, uniq[missed[q + _SCAN]])
            prefetch_row(srv_ver, uniq[missed[q + _SCAN]])
            if q + _SCAN >= fresh:
                prefetch_row_w(slot_of, lines[v, _KEY])
        s = victims[q]
        u = uniq[missed[q]]
        if q >= fresh:
            counters[_EVICTIONS] += 1
            if lines[s, _UPD] != 0:
                meta[_DIRTY] -= 1
                k = meta[_QLEN]
                queue_i[k, 0] = lines[s, _KEY]
                queue_i[k, 1] = lines[s, _UPD]
                for d in range(dim):
                    queue_g[k, d] = vecs[s, 1, d]
                meta[_QLEN] = k + 1
            slot_of[lines[s, _KEY]] = -1
        lines[s, _KEY] = u
        slot_of[u] = s
        _lru_append(lines, lru_q, meta, s)
        fill_line(lines, vecs, srv_val, srv_ver, s, u)
        slots[missed[q]] = s
    return True


@nb.njit(cache=True, _nrt=False)
def retouch_run(lines, lru_q, meta, slots):
    """Touch the cached keys of a write of the keys the last read touched, in place.

    The read appended one queue entry per cached key (its hits, then its inserts); when every
    entry of that run is still live (nothing appended since, no compaction, no line of the run
    evicted by the read's own inserts: the run holds exactly the keys now cached), appending
    them again in key order leaves the same live order as rewriting the run in key order, which
    is what this does: the same victims from then on, half the appends. Returns False (nothing
    done) when the run does not qualify.
    """
    start, end = meta[_RUN_START], meta[_RUN_END]
    if start < 0 or end != meta[_QTAIL]:
        return False
    cached = 0
    for j in range(slots.shape[0]):
        if slots[j] >= 0:
            cached += 1
    if cached != end - start:
        return False
    p = start
    for j in range(slots.shape[0]):
        s = slots[j]
        if s >= 0:
            lru_q[p] = s
            lines[s, _QPOS] = p
            p += 1
    return True
