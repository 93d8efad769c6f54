"""HET's per-worker embedding cache with per-embedding bounded staleness (numba kernels).

Follows the Hetu v1.0 reference semantics (Hetu's public cache code, transcribed):

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
  [`EdgeCluster`][workbench.cluster.edge_cluster.EdgeCluster], column w of one key-major ``[rows,
  W]`` table ([`cluster_slots`][]), so the ESD cost model reads every worker's slot of a key from
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
* ``counters``: see [`COUNTERS`][].

Between two writes a line can be evicted dirty at most once (a re-inserted line is clean), so
the queue never holds more than C entries.

LRU's recency queue (exact LRU, lazily deleted) and the policies' kernels:
[`workbench.cluster.cache_policy`][].

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

from dataclasses import dataclass
from typing import cast

import numba as nb
import numpy as np

from workbench.cluster.cache_policy import (  # the state layout and the policies
    _AHEAD,
    _BFREQ,
    _BNEXT,
    _BOUND_PUSHES,
    _BTAIL,
    _CAP,
    _DIRTY,
    _EVICT_PUSHES,
    _FIRST,
    _FLUSH_PUSHES,
    _FREE_TOP,
    _FULL_MISSES,
    _FULL_READS,
    _FULL_UNIQUE,
    _KEY,
    _KEYS_READ,
    _KEYS_WRITTEN,
    _LFUOPT,
    _LRU,
    _META_KEYS,
    _MISS_PULLS,
    _MISSES,
    _NEAR,
    _NEXT,
    _POLICY,
    _PREV,
    _QHEAD,
    _QLEN,
    _QPOS,
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
    C_INDEX,
    COUNTERS,
    LFUOPT_PERMANENT,
    LINE_COLUMNS,
    LINE_UPDATES,
    LINE_VERSION,
    META_ENTRIES,
    POLICIES,
    PULL_COUNTERS,
    PUSH_COUNTERS,
    _lru_append,
    _touch,
    fill_line,
    insert,
    insert_lru_batch,
    retouch_run,
)
from workbench.utils.bitset import bitset_arrays, rank_arrays, sorted_unique
from workbench.utils.prefetch import prefetch_row, prefetch_row_w

#: Server tables of at most this many rows stay in the core's L2 and L3 caches between steps
#: (4 MB of 8-float rows): the kernels prefetch only beyond it, where a prefetch hides a miss
#: instead of costing an instruction (measured on the reference traces, issue 48).
_CACHED_ROWS = 1 << 17

__all__ = ["CLOCKS", "COUNTERS", "C_INDEX", "LFUOPT_PERMANENT", "LINE_COLUMNS", "LINE_UPDATES",
           "LINE_VERSION", "POLICIES", "PULL_COUNTERS", "PUSH_COUNTERS", "CacheSpec",
           "ParameterServer", "WorkerCache", "cluster_slots"]


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
def _read(slot_of, links, lines, lru_q, vecs, buckets, free_b, queue_i, queue_g, meta, counters,
          srv_val, srv_ver, keys, uniq, inv, slots, known, read_bound, out, want_values):
    """One read (module docstring), fused: a pass over the sorted unique keys touches each
    cached line and checks its version (prefetching a few keys ahead), one over the occurrences
    copies the rows out, one inserts the misses. ``slots`` receives every key's slot after the
    inserts, for the next call of the same keys."""
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
def _write(slot_of, links, lines, lru_q, vecs, buckets, free_b, queue_i, queue_g, meta, counters,
           srv_val, srv_ver, keys, uniq, inv, slots, known, grads, const_grad, write_bound,
           per_occurrence, log_i, log_g):
    """One write (module docstring): touch, add every occurrence's row, count the clock ticks,
    then push in ascending key order, prefetching the server rows a few pushes ahead."""
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
    pushed = n + _drain_queue(queue_i, queue_g, meta, counters, srv_val, srv_ver, log_i, log_g)
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
        # [0, 0] is the call counter (the ESD cost model's unsorted dedup). The caches' sorted
        # dedup (sorted_unique) marks keys in a two-level bitmap, left all zero between calls,
        # and ranks its words.
        self.scratch = np.zeros((len(self.values) + 1, 2), dtype=np.int64)
        self.bitmap, self.bitmap_summary = bitset_arrays(len(self.values))
        self._rank = rank_arrays(len(self.values))

    def unique(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Sorted unique ``keys`` (``int64``, contiguous) and each occurrence's index in them."""
        return sorted_unique(keys, self.bitmap, self.bitmap_summary, self._rank)

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
    """The state W caches of one spec share, for [`WorkerCache`][]'s ``slot_of`` and
    ``lines`` (worker w gets ``slot_of[:, w]`` and ``lines[w]``).

    Returns:
        ``slot_of``: ``int32[rows, W]``, key-major (all workers' slots of a key on one line);
        ``lines``: ``int64[W, max(C, 1), 4]``.
    """
    cap = 0 if spec.policy == "none" else int(spec.capacity)
    return (np.full((rows, workers), -1, dtype=np.int32),
            np.full((workers, max(cap, 1), LINE_COLUMNS), -1, dtype=np.int64))


class WorkerCache:
    """One edge worker's embedding cache bound to a [`ParameterServer`][].

    Args:
        spec: policy, capacity (rows; forced to 0 for ``none``) and bounds.
        server: the parameter server whose rows are cached.
        log_pushes: record the rows each write pushes ([`pushes`][]).
        slot_of: the slot of every key, ``int32[rows]`` filled with -1; a view of the cluster's
            key-major ``[rows, W]`` table ([`cluster_slots`][]) lets the ESD cost model read
            every worker's state of a key from one memory line. None: a private array.
        lines: key, version, updates and LRU queue position of every slot,
            ``int64[max(C, 1), 4]`` filled with -1
            (a view of [`cluster_slots`][]' stacked lines); None: a private array.

    Example:

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
        self.meta = np.zeros(META_ENTRIES, dtype=np.int64)
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
        # (keys, sorted unique keys, inverse, slots) of the last read or write: a write of the
        # same keys skips its dedup and its slot lookups
        self._last_dedup: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None

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

    def _dedup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                                bool]:
        """``keys`` as contiguous int64 with their sorted unique keys, inverse, a slot buffer and
        whether it holds their slots. A write of the keys just read (the protocol's usual
        read-then-write) reuses the read's dedup and the slots it left (`_done`)."""
        keys = np.ascontiguousarray(keys, dtype=np.int64)
        last = self._last_dedup
        if last is not None and last[0].shape == keys.shape and np.array_equal(last[0], keys):
            return (*last, True)
        uniq, inv = self.server.unique(keys)
        return keys, uniq, inv, np.empty(len(uniq), dtype=np.int64), False

    def _done(self, keys: np.ndarray, uniq: np.ndarray, inv: np.ndarray, slots: np.ndarray,
              known: bool) -> None:
        """Remember a finished call's dedup and slots for the next call of the same keys."""
        if not known:
            self._last_dedup = (keys.copy(), uniq, inv, slots)  # a copy: keys may be reused

    def read(self, keys: np.ndarray, want_values: bool = True) -> np.ndarray:
        """Read ``keys`` (duplicates allowed); return one float32 row per occurrence.

        With ``want_values=False`` only the protocol runs (counters, policy, pulls) and an
        empty array is returned.
        """
        dedup = self._dedup(keys)
        keys, uniq, inv, slots, known = dedup
        out = np.empty((len(keys) if want_values else 0, self.server.dim), dtype=np.float32)
        _read(*self._state(), keys, uniq, inv, slots, known, self.spec.read_bound, out,
              want_values)
        self._done(*dedup)
        return out

    def write(self, keys: np.ndarray, grads: np.ndarray | float) -> None:
        """Apply one update row per occurrence of ``keys`` (``grads``: ``[len(keys), dim]``,
        already ``-lr * gradient``), or the same scalar update to every element."""
        dedup = self._dedup(keys)
        keys, uniq, inv, slots, known = dedup
        self._reset_log(len(keys) + self.capacity)  # a write pushes <= unique keys + queue
        if np.isscalar(grads):
            _write(*self._state(), keys, uniq, inv, slots, known, self._no_grads,
                   np.float32(cast(float, grads)),
                   self.spec.write_bound, self.spec.clock == "update", self._log_i,
                   self._log_g)
        else:
            grads = np.ascontiguousarray(grads, dtype=np.float32)
            if grads.shape != (len(keys), self.server.dim):
                raise ValueError(f"grads has shape {grads.shape}; expected "
                                 f"({len(keys)}, {self.server.dim})")
            _write(*self._state(), keys, uniq, inv, slots, known, grads, np.float32(0.0),
                   self.spec.write_bound,
                   self.spec.clock == "update", self._log_i, self._log_g)
        self._done(*dedup)

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
        """The rows the last [`write`][] or [`flush`][] pushed, in push order (a cache built
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
