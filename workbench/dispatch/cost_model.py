"""ESD's cost model: expected transmission cost of every (worker, key) from the real cache states.

**Our formalisation**: the ESD paper's method section is not available, so the
cost model below is ours; every figure built on it says so.

Per global batch of N samples and W workers, with ``tau_j = D x 4 / B_j`` the seconds worker j
spends moving one row over its link, and the real state of every worker's HET cache::

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
from workbench.utils.prefetch import prefetch

_AHEAD = 8  # keys between a prefetch and its use


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
        dim = cluster.dim if wire_dim is None else wire_dim
        self.tau = dim * 4 / cluster.links.bandwidth_Bps  # seconds per row, per worker

    def key_costs(self, uniq: np.ndarray) -> np.ndarray:
        """``A[W, U]`` for the unique keys ``uniq`` (one compiled pass over the keys, reading
        every worker's slot of a key from the cluster's key-major slot table)."""
        cluster = self.cluster
        p_dirty = np.array([cache.dirty_fraction() for cache in cluster.caches])
        cost = np.empty((len(uniq), cluster.workers))  # key-major: a key's W costs together
        _key_costs(cluster.slot_of, cluster.lines, cluster.server.versions, uniq,
                   cluster.spec.read_bound, self.tau, p_dirty, cost)
        if self.local is not None:
            cost[self.local[uniq]] = 0.0
        return cost.T  # [W, U], Fortran-ordered: the solvers read a key's W costs in a row

    def batch(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(A[W, U], indptr, indices)``: key costs and the samples' unique keys as CSR."""
        n, f = keys.shape
        uniq, inv = _unique_unsorted(np.ascontiguousarray(keys, dtype=np.int64).ravel(),
                                     self.cluster.server.scratch)
        indptr, indices = _sample_sets(inv.reshape(n, f))
        return self.key_costs(uniq), indptr, indices


@nb.njit(cache=True)
def _key_costs(slot_of, lines, versions, uniq, read_bound, tau, p_dirty, out):
    """``out[u, j]`` = A[j, uniq[u]]: tau_j x (miss x (1 + p_dirty_j) + stale), plus the pushes
    every other worker holding the key dirty makes (``slot_of[rows, W]``, ``lines[W, C, 3]``)."""
    workers = tau.shape[0]
    n = uniq.shape[0]
    dirty = np.zeros(workers, np.bool_)
    row = np.empty(workers)
    miss = tau * (1.0 + p_dirty)
    for u in range(n):
        if u + _AHEAD < n:  # the keys are random rows: start loading a few keys ahead
            ahead = uniq[u + _AHEAD]
            prefetch(slot_of, ahead * workers)
            prefetch(versions, ahead)
        k = uniq[u]
        sync = 0.0
        for j in range(workers):
            s = slot_of[k, j]
            if s < 0:
                row[j] = miss[j]
                dirty[j] = False
            else:
                row[j] = tau[j] if versions[k] - lines[j, s, LINE_VERSION] > read_bound else 0.0
                dirty[j] = lines[j, s, LINE_UPDATES] > 0
                if dirty[j]:
                    sync += tau[j]
        for j in range(workers):  # others' pushes of keys dirty there
            out[u, j] = row[j] + (sync - tau[j] if dirty[j] else sync)


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
