"""Brute-force reference model of HET's per-worker embedding cache protocol.

Deliberately simple, pure Python (dicts and lists, numpy only for the vectors).
It is the oracle for equivalence tests against the fast implementation, so it
favours literal adherence to the spec over speed.  Use it only on tiny
instances.

Spec summary (Hetu v1.0 reference semantics)
--------------------------------------------
Server: one row per key with ``value[dim]`` and ``ver`` (number of gradient
contributions applied).  Every worker has a cache of ``capacity`` lines (key,
value, grad, version, updates) and an ``evict_queue`` of dirty evicted lines.

Policies (the victim is always the line with the smallest *rank*):

* ``lru``    rank = tick of last touch-or-insert.
* ``lfu``    rank = (frequency, tick of last touch-or-insert); insert sets
             frequency 1, a touch adds 1.
* ``lfuopt`` rank = (count, tick of last touch-or-insert) over NON-permanent
             lines; insert sets count 1, a touch of a non-permanent line adds
             1 and at count 10 the line becomes permanent (never evicted;
             further touches do nothing).  Full cache of permanent lines ->
             the new key is not cached.
* ``none``   no cache (same as capacity 0).

``tick`` is a per-worker counter incremented on every touch and every insert,
so "time of last touch-or-insert" is a total order within a worker.

Resolved ambiguities (documented here and in the report):

* ``flush`` does not change ``meta_keys`` (it is a test-only operation); it
  counts cache-line pushes in ``flush_pushes`` and queue pushes in
  ``evict_pushes``.
* For a permanent ``lfuopt`` line a touch changes nothing at all (neither the
  count nor the tick); this is unobservable since permanent lines are never
  ranked.
* A miss returns the plain server value; pending evict-queue gradients of the
  worker are NOT re-applied (only a pulled *hit* re-applies ``line.grad``).
* The write-side touch happens for every unique key that is cached at the
  start of the write; keys not cached are not inserted by a write.
* ``policy="none"`` ignores ``capacity`` (effective capacity 0).
"""

from __future__ import annotations

import numpy as np

COUNTERS = ("reads", "keys_read", "unique_read", "misses", "miss_pulls", "stale_pulls",
            "writes", "keys_written", "unique_written", "bound_pushes", "evict_pushes",
            "uncached_pushes", "flush_pushes", "evictions", "meta_keys",
            "full_reads", "full_unique", "full_misses")

POLICIES = ("lru", "lfu", "lfuopt", "none")
LFUOPT_PERMANENT = 10


class _Line:
    """One cache line plus its policy bookkeeping."""

    def __init__(self, key, value, version, tick):
        self.key = key
        self.value = value            # float64 [dim], own copy
        self.grad = np.zeros_like(value)
        self.version = version
        self.updates = 0
        self.freq = 1                 # lfu frequency / lfuopt use count
        self.tick = tick              # time of last touch-or-insert
        self.permanent = False        # lfuopt only


class _Worker:
    def __init__(self):
        self.lines = {}               # key -> _Line
        self.evict_queue = []         # list of (key, grad copy, updates)
        self.tick = 0
        self.counters = {name: 0 for name in COUNTERS}


class RefHET:
    def __init__(self, init_values, workers, policy, capacity, read_bound, write_bound):
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}")
        init_values = np.asarray(init_values, dtype=np.float64)
        if init_values.ndim != 2:
            raise ValueError("init_values must be [rows, dim]")
        self.rows, self.dim = init_values.shape
        self.policy = policy
        self.capacity = 0 if policy == "none" else int(capacity)
        if self.capacity < 0:
            raise ValueError("capacity must be >= 0")
        self.read_bound = int(read_bound)
        self.write_bound = int(write_bound)
        self._values = init_values.copy()
        self._versions = np.zeros(self.rows, dtype=np.int64)
        self.workers = [_Worker() for _ in range(int(workers))]

    # ------------------------------------------------------------------ server
    @property
    def server_values(self):
        return self._values

    @property
    def server_versions(self):
        return self._versions

    def _server_push(self, key, grad, updates):
        self._values[key] += grad
        self._versions[key] += updates

    # ------------------------------------------------------------------ policy
    def _next_tick(self, wk):
        wk.tick += 1
        return wk.tick

    def _touch(self, wk, line):
        if self.policy == "lru":
            line.tick = self._next_tick(wk)
        elif self.policy == "lfu":
            line.freq += 1
            line.tick = self._next_tick(wk)
        elif self.policy == "lfuopt":
            if line.permanent:
                return
            line.freq += 1
            line.tick = self._next_tick(wk)
            if line.freq >= LFUOPT_PERMANENT:
                line.permanent = True
        # "none": nothing is ever cached, so never called

    def _rank(self, line):
        if self.policy == "lru":
            return (line.tick,)
        return (line.freq, line.tick)

    def _candidates(self, wk):
        """Evictable lines, next victim first."""
        lines = [ln for ln in wk.lines.values() if not ln.permanent]
        return sorted(lines, key=self._rank)

    def _insert(self, wk, key):
        """Insert ``key`` (a miss) into the cache; returns True iff cached."""
        if self.capacity == 0:
            return False
        if len(wk.lines) >= self.capacity:
            candidates = self._candidates(wk)
            if not candidates:          # lfuopt: every line permanent
                return False
            victim = candidates[0]
            del wk.lines[victim.key]
            wk.counters["evictions"] += 1
            if victim.updates != 0:
                wk.evict_queue.append((victim.key, victim.grad.copy(), victim.updates))
        wk.lines[key] = _Line(key, self._values[key].copy(), int(self._versions[key]),
                              self._next_tick(wk))
        return True

    # ------------------------------------------------------------------- read
    def read(self, w, keys):
        wk = self.workers[w]
        c = wk.counters
        keys = np.asarray(keys, dtype=np.int64).reshape(-1)
        uniq = sorted(set(int(k) for k in keys))

        # step 2: touch hits, collect misses (ascending order)
        misses = []
        for u in uniq:
            if u in wk.lines:
                self._touch(wk, wk.lines[u])
            else:
                misses.append(u)

        # step 3: pulls
        current = {}
        for u in uniq:
            if u in wk.lines:
                line = wk.lines[u]
                if int(self._versions[u]) - line.version > self.read_bound:
                    c["stale_pulls"] += 1
                    line.version = int(self._versions[u])
                    line.value = self._values[u] + line.grad
                current[u] = line.value.copy()
            else:
                c["miss_pulls"] += 1
                current[u] = self._values[u].copy()

        # step 4: output before inserting
        out = np.zeros((len(keys), self.dim), dtype=np.float64)
        for i, k in enumerate(keys):
            out[i] = current[int(k)]

        # step 5: insert misses in ascending key order
        for u in misses:
            self._insert(wk, u)

        # step 6: counters
        c["reads"] += 1
        c["keys_read"] += len(keys)
        c["unique_read"] += len(uniq)
        c["misses"] += len(misses)
        c["meta_keys"] += len(uniq)
        if len(wk.lines) == self.capacity:
            c["full_reads"] += 1
            c["full_unique"] += len(uniq)
            c["full_misses"] += len(misses)
        return out

    # ------------------------------------------------------------------ write
    def write(self, w, keys, grads):
        wk = self.workers[w]
        c = wk.counters
        keys = np.asarray(keys, dtype=np.int64).reshape(-1)
        grads = np.asarray(grads, dtype=np.float64).reshape(len(keys), self.dim)
        uniq = sorted(set(int(k) for k in keys))

        # step 1: touch cached keys
        for u in uniq:
            if u in wk.lines:
                self._touch(wk, wk.lines[u])

        # step 2: per-occurrence accumulation
        direct = {}                       # key -> [grad sum, count]
        for i, k in enumerate(keys):
            k = int(k)
            if k in wk.lines:
                line = wk.lines[k]
                line.value = line.value + grads[i]
                line.grad = line.grad + grads[i]
                line.updates += 1
            else:
                if k not in direct:
                    direct[k] = [np.zeros(self.dim, dtype=np.float64), 0]
                direct[k][0] = direct[k][0] + grads[i]
                direct[k][1] += 1

        pushed = 0
        # step 3a: bound pushes
        for u in uniq:
            if u in wk.lines:
                line = wk.lines[u]
                if line.updates > self.write_bound:
                    self._server_push(u, line.grad, line.updates)
                    line.version += line.updates
                    line.grad = np.zeros(self.dim, dtype=np.float64)
                    line.updates = 0
                    c["bound_pushes"] += 1
                    pushed += 1
        # step 3b: evict queue
        for key, grad, updates in wk.evict_queue:
            self._server_push(key, grad, updates)
            c["evict_pushes"] += 1
            pushed += 1
        wk.evict_queue = []
        # step 3c: uncached keys
        for k in sorted(direct):
            grad, count = direct[k]
            self._server_push(k, grad, count)
            c["uncached_pushes"] += 1
            pushed += 1

        # step 4: counters
        c["writes"] += 1
        c["keys_written"] += len(keys)
        c["unique_written"] += len(uniq)
        c["meta_keys"] += pushed

    # ------------------------------------------------------------------ flush
    def flush(self, w):
        wk = self.workers[w]
        c = wk.counters
        for key in sorted(wk.lines):
            line = wk.lines[key]
            if line.updates > 0:
                self._server_push(key, line.grad, line.updates)
                line.version += line.updates
                line.grad = np.zeros(self.dim, dtype=np.float64)
                line.updates = 0
                c["flush_pushes"] += 1
        for key, grad, updates in wk.evict_queue:
            self._server_push(key, grad, updates)
            c["evict_pushes"] += 1
        wk.evict_queue = []

    # ---------------------------------------------------------- introspection
    def counters(self, w):
        return dict(self.workers[w].counters)

    def cached_keys(self, w):
        return sorted(self.workers[w].lines)

    def line(self, w, key):
        line = self.workers[w].lines.get(int(key))
        if line is None:
            return None
        return {"value": line.value.copy(), "grad": line.grad.copy(),
                "version": line.version, "updates": line.updates}

    def eviction_order(self, w):
        return [ln.key for ln in self._candidates(self.workers[w])]

    def evict_queue(self, w):
        """Pending dirty evictions of worker ``w``: list of (key, grad, updates)."""
        return [(k, g.copy(), u) for k, g, u in self.workers[w].evict_queue]
