"""The emulated cluster's clock: links, and bytes and seconds of iterations from their counters.

DESIGN.md §3. A transfer over worker j's link costs ``L_j + bytes / B_j``. Per
iteration, worker j makes one read transfer (its unique keys with their versions go up, 8 + 8
bytes each; the pulled rows come down, ``D x 4`` bytes each) and, when it pushes anything, one
write transfer (``D x 4`` bytes plus 8 + 8 bytes of key and update count per pushed row). The
parameter servers' own links (``ps_shards x ps_bandwidth``) are shared by every worker, so no
worker's PS traffic finishes before the servers have moved the whole iteration's PS bytes::

    link_j      = (L_j + (16 u_j + D4 pulled_j) / B_j) + [pushed_j > 0] (L_j + (D4 + 16) pushed_j / B_j)
    comm_j      = max(link_j, sum_k PS bytes_k / PS bandwidth)
    BSP step    = max_j (compute_j + comm_j) + allreduce,  allreduce = 2 (W-1)/W x dense_bytes / min_j B_j
    ASP         = each worker advances its own clock by compute_j + comm_j (+ its dense push/pull)

Counters per worker per iteration (the differences of :data:`workbench.cluster.cache.COUNTERS` across the
iteration) give miss pulls, stale pulls, pushes at the write bound, dirty-eviction pushes, direct
pushes of uncached keys, metadata bytes, embedding bytes and seconds; every figure is computed
from these records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from workbench.cluster.cache import COUNTERS
from workbench.cluster.config import ClusterConfig

BYTES_PER_FLOAT = 4
KEY_META_BYTES = 16  # 8-byte key + 8-byte version (read) or update count (push)


@dataclass(frozen=True)
class Links:
    """Per-worker link and compute parameters in SI units."""

    bandwidth_Bps: np.ndarray
    latency_s: np.ndarray
    speed: np.ndarray
    ps_Bps: float = math.inf

    @classmethod
    def from_config(cls, cfg: ClusterConfig) -> "Links":
        """Expand the config's per-worker lists (Gb/s, ms) to arrays (bytes/s, s); ``ps_Bps``
        is the servers' aggregate bandwidth (shards x per-shard bandwidth)."""
        return cls(bandwidth_Bps=np.array(cfg.per_worker("bandwidth_gbps")) * 1e9 / 8,
                   latency_s=np.array(cfg.per_worker("latency_ms")) * 1e-3,
                   speed=np.array(cfg.per_worker("speed"), dtype=np.float64),
                   ps_Bps=cfg.ps_shards * cfg.ps_bandwidth_gbps * 1e9 / 8)

    def server_seconds(self, total_bytes: np.ndarray) -> np.ndarray:
        """Time the parameter servers need to move ``total_bytes`` (their shared links)."""
        return np.asarray(total_bytes, dtype=np.float64) / self.ps_Bps

    def transfer_seconds(self, nbytes: np.ndarray, active: np.ndarray | None = None) -> np.ndarray:
        """``L_j + bytes_j / B_j`` per worker (0 where ``active`` is False)."""
        seconds = self.latency_s + np.asarray(nbytes, dtype=np.float64) / self.bandwidth_Bps
        return seconds if active is None else np.where(active, seconds, 0.0)

    def allreduce_seconds(self, dense_bytes: float) -> float:
        """Ring AllReduce of ``dense_bytes`` over all workers (bounded by the slowest link)."""
        workers = len(self.bandwidth_Bps)
        if workers == 1 or dense_bytes == 0:
            return 0.0
        return 2 * (workers - 1) / workers * dense_bytes / float(self.bandwidth_Bps.min())


def time_model(counters: np.ndarray, links: Links, dim: int,
               compute_s: np.ndarray | float = 0.0, dense_bytes: float = 0.0,
               dense_sync: str = "allreduce", sparse_sync: str = "ps") -> dict[str, np.ndarray]:
    """Bytes and seconds of iterations from their counter deltas (the time model above).

    Args:
        counters: counter deltas ``[iterations, workers, len(COUNTERS)]``.
        links: the workers' links.
        dim: embedding width D (bytes scale with it; the counters do not depend on it).
        compute_s: compute seconds, broadcastable to ``[iterations, workers]``.
        dense_bytes: dense parameter bytes synchronised per iteration.
        dense_sync: ``allreduce`` or ``ps`` (see :meth:`EdgeCluster.end_iteration`).
        sparse_sync: ``ps`` or ``allgather``.

    Returns:
        Arrays ``[iterations, workers]``: ``pulled_rows``, ``pushed_rows``,
        ``embedding_bytes``, ``meta_bytes``, ``dense_bytes``, ``comm_s`` (PS traffic: the
        embedding rows, and the dense push/pull under ``dense_sync="ps"``), ``compute_s``,
        ``dense_s`` (the AllReduce) and ``step_s`` (the BSP iteration time: the slowest
        worker's compute + communication, plus the AllReduce).
    """
    col = {name: counters[..., i] for i, name in enumerate(COUNTERS)}
    shape = col["reads"].shape
    workers = shape[-1]
    row_bytes = dim * BYTES_PER_FLOAT
    pulled = col["miss_pulls"] + col["stale_pulls"]
    pushed = (col["bound_pushes"] + col["evict_pushes"] + col["uncached_pushes"]
              + col["flush_pushes"])
    unique = col["unique_read"]
    if dense_sync not in ("allreduce", "ps"):
        raise ValueError(f"dense_sync {dense_sync!r}: must be 'allreduce' or 'ps'")
    dense_ps = dense_sync == "ps"
    if sparse_sync == "ps":
        read_bytes = KEY_META_BYTES * unique + row_bytes * pulled
        push_bytes = (row_bytes + KEY_META_BYTES) * pushed
        link = (links.transfer_seconds(read_bytes, unique > 0)
                + links.transfer_seconds(push_bytes, pushed > 0))
        ps_bytes = (read_bytes + push_bytes).sum(-1, keepdims=True)
        if dense_ps:  # dense push + pull over the same links and servers
            link = link + links.transfer_seconds(np.full(workers, 2.0 * dense_bytes),
                                                 np.full(workers, dense_bytes > 0))
            ps_bytes = ps_bytes + workers * 2.0 * dense_bytes
        active = (unique > 0) | (pushed > 0) | (dense_ps and dense_bytes > 0)
        comm = np.where(active, np.maximum(link, links.server_seconds(ps_bytes)), 0.0)
        embedding = row_bytes * (pulled + pushed)
        meta = KEY_META_BYTES * (unique + pushed)
    elif sparse_sync == "allgather" and not dense_ps:
        # Every worker receives every other worker's updated rows (ring all-gather): rows
        # plus an 8-byte key each; W-1 hops, each paying the worst latency.
        keys = col["unique_written"].sum(-1, keepdims=True) * (workers - 1) / workers
        seconds = keys * (row_bytes + KEY_META_BYTES // 2) / float(links.bandwidth_Bps.min())
        seconds = seconds + (workers - 1) * float(links.latency_s.max())
        comm = np.broadcast_to(seconds, shape).astype(np.float64)
        embedding = np.broadcast_to(keys * row_bytes, shape)
        meta = np.broadcast_to(keys * (KEY_META_BYTES // 2), shape)
        pulled = np.zeros(shape, np.int64)
        pushed = np.zeros(shape, np.int64)
    else:
        raise ValueError(f"sparse_sync {sparse_sync!r} with dense_sync {dense_sync!r}: "
                         "supported are ps with ps or allreduce, and allgather with allreduce")
    compute = np.broadcast_to(np.asarray(compute_s, dtype=np.float64), shape)
    if dense_ps:  # already inside comm
        dense = np.zeros(shape)
        wire = np.full(shape, 2.0 * dense_bytes)
        step = (compute + comm).max(-1, keepdims=True)
    else:
        dense = np.full(shape, links.allreduce_seconds(dense_bytes))
        wire = np.full(shape, 2 * (workers - 1) / workers * dense_bytes)
        step = (compute + comm).max(-1, keepdims=True) + dense[..., :1]
    return {"pulled_rows": pulled, "pushed_rows": pushed,
            "embedding_bytes": np.asarray(embedding, dtype=np.float64),
            "meta_bytes": np.asarray(meta, dtype=np.float64), "dense_bytes": wire,
            "comm_s": np.asarray(comm, dtype=np.float64), "compute_s": compute.copy(),
            "dense_s": np.asarray(dense, dtype=np.float64),
            "step_s": np.broadcast_to(step, shape).copy()}
