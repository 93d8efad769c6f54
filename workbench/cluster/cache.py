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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np

from workbench.cluster.cache_policy import (  # the state layout and the policies
    _BFREQ,
    _BNEXT,
    _BTAIL,
    _CAP,
    _DIRTY,
    _FIRST,
    _FREE_TOP,
    _KEY,
    _LFUOPT,
    _LRU,
    _POLICY,
    _PREV,
    _QHEAD,
    _QLEN,
    _QPOS,
    _QTAIL,
    _SIZE,
    _UPD,
    _VER,
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
)
from workbench.cluster.cache_step import flush_all, read_step, write_step
from workbench.utils.bitset import bitset_arrays, rank_arrays, sorted_unique

__all__ = ["CLOCKS", "COUNTERS", "C_INDEX", "LFUOPT_PERMANENT", "LINE_COLUMNS", "LINE_UPDATES",
           "LINE_VERSION", "POLICIES", "PULL_COUNTERS", "PUSH_COUNTERS", "CacheSpec",
           "ParameterServer", "WorkerCache", "cluster_slots"]


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
        read_step(*self._state(), keys, uniq, inv, slots, known, self.spec.read_bound, out,
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
            write_step(*self._state(), keys, uniq, inv, slots, known, self._no_grads,
                   np.float32(cast(float, grads)),
                   self.spec.write_bound, self.spec.clock == "update", self._log_i,
                   self._log_g)
        else:
            grads = np.ascontiguousarray(grads, dtype=np.float32)
            if grads.shape != (len(keys), self.server.dim):
                raise ValueError(f"grads has shape {grads.shape}; expected "
                                 f"({len(keys)}, {self.server.dim})")
            write_step(*self._state(), keys, uniq, inv, slots, known, grads, np.float32(0.0),
                   self.spec.write_bound,
                   self.spec.clock == "update", self._log_i, self._log_g)
        self._done(*dedup)

    def flush(self) -> None:
        """Push every dirty line and the eviction queue (end of training)."""
        self._reset_log(2 * self.capacity)  # dirty lines + queued evictees
        flush_all(self.lines, self.vecs, self.queue_i, self.queue_g, self.meta, self.counters,
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
