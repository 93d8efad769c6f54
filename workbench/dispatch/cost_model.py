"""ESD's cost model: expected transmission cost of every (worker, key) from the real cache states.

**Our formalisation**: the ESD paper's method section is not available, so the
cost model below is ours; every figure built on it says so.

Per global batch of N samples and W workers, with ``tau_j = D x 4 / B_j`` the seconds worker j
spends moving one row over its link, and the real state of every worker's HET cache:

    A[j, k] = tau_j x ( [k absent at j]                      miss pull
                      + [k cached at j, stale beyond s_read]  update pull
                      + [k absent at j] x P_j(dirty evict) )  expected push of a dirty victim
            + sum_{j' != j} tau_j' x [k dirty at j']          sync push another worker makes

    additive:      C[i, j] = sum_{k in K_i} A[j, k]           transportation problem (exact, LP)
    deduplicated:  sum_j sum_{k used on j} A[j, k]            ILP: a key is paid once per worker

``P_j(dirty evict)`` = dirty lines / capacity when j's cache is full (else 0). Worker j takes
``cap_j`` samples (equal shares by default). Rows every worker holds outside its cache (a hot
tier replicated on every worker, ``local``) cost nothing anywhere: ``A[:, k] = 0``.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from workbench.cluster.cache import LINE_UPDATES, LINE_VERSION
from workbench.cluster.edge_cluster import EdgeCluster
from workbench.utils.prefetch import prefetch, prefetch_row

_AHEAD = 8  # keys between a prefetch of a key's cost line and its use (the sums)
_FAR = 16  # keys between a prefetch of a key's dedup scratch row and its use
#: The key costs' distances: a key's slots ``_KEY_FAR`` keys ahead, the lines of the workers
#: holding it ``_KEY_AHEAD`` keys ahead. Measured (benchmarks/dispatch_throughput.py's reference
#: workload, 32 workers, interleaved runs, same plans): 6 / 3 decides a batch in 12.9 ms, 16 / 8
#: in 14.4 ms; 4 / 2 to 8 / 4 are within 0.3 ms of 6 / 3. A key's ~8 requests (2 slot lines,
#: its version, ~5 holders' lines) times a longer distance overflow the core's miss buffers.
_KEY_FAR = 6
_KEY_AHEAD = 3


class CostModel:
    """Per-(worker, key) expected transmission costs from the cluster's real cache states.

    Args:
        cluster: the emulated cluster whose caches and links are read.
        wire_dim: embedding width used for row bytes (the cluster may move narrower rows).
        local: ``bool[rows]``, rows replicated on every worker outside the caches (never
            moved, so free on every worker); None: none.
    """

    def __init__(self, cluster: EdgeCluster, wire_dim: int | None = None,
                 local: np.ndarray | None = None) -> None:
        self.cluster = cluster
        self.local = local
        dim = cluster.wire_dim if wire_dim is None else wire_dim
        self.tau = dim * 4 / cluster.links.bandwidth_Bps  # seconds per row, per worker
        self._scratch = np.empty(0)  # sample_costs' key costs, reused

    def key_costs(self, uniq: np.ndarray) -> np.ndarray:
        """``A[W, U]`` for the unique keys ``uniq`` (one compiled pass over the keys, reading
        every worker's slot of a key from the cluster's key-major slot table)."""
        cost = np.empty((len(uniq), self.cluster.workers))  # key-major: a key's W costs together
        self._fill(uniq, cost)
        return cost.T  # [W, U], Fortran-ordered: the solvers read a key's W costs in a row

    def _fill(self, uniq: np.ndarray, cost: np.ndarray) -> None:
        """Key-major ``cost[U, W]`` of the unique keys ``uniq``."""
        cluster = self.cluster
        p_dirty = np.array([cache.dirty_fraction() for cache in cluster.caches])
        _key_costs(cluster.slot_of, cluster.lines, cluster.server.versions, uniq,
                   cluster.spec.read_bound, self.tau, p_dirty, cost)
        if self.local is not None:
            cost[self.local[uniq]] = 0.0

    def _sets(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The batch's distinct keys and each sample's distinct key indices as CSR."""
        n, f = keys.shape
        uniq, inv = _unique_unsorted(np.ascontiguousarray(keys, dtype=np.int64).ravel(),
                                     self.cluster.server.scratch)
        return (uniq, *_sample_sets(inv.reshape(n, f)))

    def batch(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(A[W, U], indptr, indices)``: key costs and the samples' unique keys as CSR."""
        uniq, indptr, indices = self._sets(keys)
        return self.key_costs(uniq), indptr, indices

    def sample_costs(self, keys: np.ndarray) -> np.ndarray:
        """``C[N, W] = sum_{k in K_i} A[j, k]``: the additive model's costs, equal to
        ``additive_matrix(*batch(keys))`` (the same sums in the same order). ``A`` lives in a
        buffer kept between batches: a fresh ``U x W`` array per batch costs its page faults
        (a millisecond at 32 workers), as much as the additive sums themselves."""
        uniq, indptr, indices = self._sets(keys)
        need = len(uniq) * self.cluster.workers
        if self._scratch.size < need:
            self._scratch = np.empty(max(need, 2 * self._scratch.size))
        cost = self._scratch[:need].reshape(len(uniq), self.cluster.workers)
        self._fill(uniq, cost)
        out = np.zeros((keys.shape[0], self.cluster.workers))
        _sample_sums(cost, indptr, indices, out)
        return out


@nb.njit(cache=True)
def _key_costs(slot_of, lines, versions, uniq, read_bound, tau, p_dirty, out):
    """``out[u, j]`` = A[j, uniq[u]]: tau_j x (miss x (1 + p_dirty_j) + stale), plus the pushes
    every other worker holding the key dirty makes (``slot_of[rows, W]``, ``lines[W, C, 4]``).

    Memory: a key's W slots lie on one or two lines of ``slot_of``, loaded ``_KEY_FAR`` keys
    ahead; ``_KEY_AHEAD`` keys ahead, the line of every worker holding that key is requested,
    so the version and dirty counts arrive while earlier keys are costed. A key no worker holds
    costs every worker its miss: one vector copy.
    """
    workers = tau.shape[0]
    n = uniq.shape[0]
    capacity, columns = lines.shape[1], lines.shape[2]
    stale = np.empty(workers)
    pushes = np.empty(workers)  # tau_j where the key is dirty at j, else 0
    miss = tau * (1.0 + p_dirty)
    for u in range(n):
        if u + _KEY_FAR < n:  # the keys are random rows: start loading their slots early
            far = uniq[u + _KEY_FAR]
            prefetch(slot_of, far * workers)
            prefetch(slot_of, far * workers + workers - 1)
            prefetch(versions, far)
        if u + _KEY_AHEAD < n:  # and the lines of the workers that hold a nearer key
            near = uniq[u + _KEY_AHEAD]
            for j in range(workers):
                s = slot_of[near, j]
                if s >= 0:
                    prefetch(lines, (j * capacity + s) * columns)
        k = uniq[u]
        held = np.int32(-1)
        for j in range(workers):
            held = max(held, slot_of[k, j])
        if held < 0:  # cold everywhere: a miss on every worker, no push anywhere
            for j in range(workers):
                out[u, j] = miss[j]
            continue
        version = versions[k]
        sync = 0.0
        for j in range(workers):
            s = slot_of[k, j]
            if s < 0:
                stale[j] = miss[j]
                pushes[j] = 0.0
            else:
                stale[j] = tau[j] if version - lines[j, s, LINE_VERSION] > read_bound else 0.0
                pushes[j] = tau[j] if lines[j, s, LINE_UPDATES] > 0 else 0.0
            sync += pushes[j]
        for j in range(workers):  # others' pushes of keys dirty there
            out[u, j] = stale[j] + (sync - pushes[j])


@nb.njit(cache=True)
def _sample_sums(cost, indptr, indices, out):
    """``out[i, j] += cost[k, j]`` over sample i's distinct keys k in CSR order: the additive
    kernel's sums ([`additive_matrix`][workbench.dispatch.objective.additive_matrix]) on the
    key-major
    costs, each key's W costs (``W x 8`` bytes, whole lines) requested ``_AHEAD`` keys early."""
    workers = cost.shape[1]
    nnz = indices.shape[0]
    for i in range(indptr.shape[0] - 1):
        for p in range(indptr[i], indptr[i + 1]):
            if p + _AHEAD < nnz:
                ahead = indices[p + _AHEAD]
                for line in range(0, workers, 8):
                    prefetch(cost, ahead * workers + line)
            k = indices[p]
            for j in range(workers):
                out[i, j] += cost[k, j]


@nb.njit(cache=True)
def _unique_unsorted(keys, scratch):
    """Distinct keys in first-appearance order and each occurrence's index among them.

    Uses the server's dedup scratch (``ParameterServer.scratch``: a stamp and an index per
    row): O(n), no sort; the cost model does not need the keys ordered.
    """
    scratch[0, 0] += 1
    tick = scratch[0, 0]
    uniq = np.empty(keys.shape[0], np.int64)
    inv = np.empty(keys.shape[0], np.int64)
    m = 0
    for i in range(keys.shape[0]):
        if i + _FAR < keys.shape[0]:  # random rows of a large table: load them early
            prefetch_row(scratch, keys[i + _FAR] + 1)
        k = keys[i] + 1
        if scratch[k, 0] != tick:
            scratch[k, 0] = tick
            scratch[k, 1] = m
            uniq[m] = k - 1
            m += 1
        inv[i] = scratch[k, 1]
    return uniq[:m], inv


@nb.njit(cache=True)
def _sample_sets(inv):
    """CSR of each sample's distinct unique-key indices (insertion-sorted within a sample)."""
    n, f = inv.shape
    indptr = np.zeros(n + 1, np.int64)
    indices = np.empty(n * f, np.int64)
    row = np.empty(f, np.int64)
    nnz = 0
    for i in range(n):
        for c in range(f):
            v = inv[i, c]
            p = c
            while p > 0 and row[p - 1] > v:
                row[p] = row[p - 1]
                p -= 1
            row[p] = v
        for c in range(f):
            if c == 0 or row[c] != row[c - 1]:
                indices[nnz] = row[c]
                nnz += 1
        indptr[i + 1] = nnz
    return indptr, indices[:nnz]
