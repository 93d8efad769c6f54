"""Cluster configurations built from an experiment's settings: heterogeneous edge links, and a
cluster resized to another worker count, bandwidth, server count or dense mode.

ESD's edge cluster (and the combined run's, which reuses it) has ``W`` links whose bandwidths are
log-spaced from ``max / spread`` to ``max``; the timed stages put the clock settings of the
configured cluster (compute, software cost, overlap, dense synchronisation) on such links
([`clock_cluster`][]). The HET time model's sweeps resize the configured cluster
([`resized_cluster`][]: per-worker lists repeat cyclically).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

import numpy as np

from workbench.cluster.config import ClusterConfig


def resized_cluster(cfg: ClusterConfig, workers: int | None = None,
                    bandwidth: float | None = None, ps_shards: int | None = None,
                    dense_mode: str | None = None) -> ClusterConfig:
    """``cfg`` resized to ``workers`` (per-worker lists repeat cyclically) and, if given, with
    every link (workers' and servers') at ``bandwidth`` Gb/s, ``ps_shards`` servers and dense
    synchronisation ``dense_mode``."""
    workers = cfg.workers if workers is None else workers
    values: dict[str, Any] = {}
    for key in ("bandwidth_gbps", "latency_ms", "speed"):
        per = cfg.per_worker(key)
        values[key] = per[:1] if len(set(per)) == 1 else [per[i % len(per)]
                                                          for i in range(workers)]
    if bandwidth is not None:
        values["bandwidth_gbps"] = [bandwidth]
        values["ps_bandwidth_gbps"] = bandwidth
    if ps_shards is not None:
        values["ps_shards"] = ps_shards
    if dense_mode is not None:
        values["dense_mode"] = dense_mode
    return dataclasses.replace(cfg, workers=workers, **values)


class EdgeLinks(Protocol):
    """The edge links' settings of a config (``EsdConfig``, ``CombinedConfig``)."""

    @property
    def workers(self) -> int: ...
    @property
    def bandwidth_spread(self) -> float: ...
    @property
    def max_bandwidth_gbps(self) -> float: ...
    @property
    def latency_ms(self) -> float: ...


def edge_cluster_config(exp: EdgeLinks, workers: int, spread: float) -> ClusterConfig:
    """Heterogeneous edge links: bandwidths log-spaced from max / spread to max."""
    bandwidths = np.geomspace(exp.max_bandwidth_gbps / spread, exp.max_bandwidth_gbps, workers)
    return ClusterConfig(name=f"edge x{spread:g}", workers=workers,
                         bandwidth_gbps=[float(b) for b in bandwidths],
                         latency_ms=[exp.latency_ms], speed=[1.0],
                         ps_bandwidth_gbps=exp.max_bandwidth_gbps * workers)


def clock_cluster(exp: EdgeLinks, cluster: ClusterConfig,
                  spread: float | None = None) -> ClusterConfig:
    """The base edge links ([`edge_cluster_config`][]; at ``spread`` if given) with the
    clock settings of ``cluster`` (compute, software cost, overlap, dense synchronisation)."""
    spread = exp.bandwidth_spread if spread is None else spread
    return edge_cluster_config(exp, exp.workers, spread).with_clock_of(cluster)
