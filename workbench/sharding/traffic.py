r"""The all-to-all traffic of a sharding plan, expected and replayed, and its memory.

Our formalisation (the topology: `workbench/sharding/topology.py`). Data parallel: device d trains
its own ``b`` samples; each occurrence of a row in a sample's sequence is one lookup (sequence
embeddings are not pooled, so every occurrence is sent). The device that serves a lookup
([`Plan.serving`][]) sends the row, ``row_bytes = 4 D``, to the device that made it; the backward
pass sends the gradient back:

    replayed:  M[e, d] = row_bytes x #{lookups made by d and served by e != d}       (forward)
    expected:  M[e, d] = row_bytes x lambda x sum_{r served to d by e} p_r,   e != d
               lambda = lookups per device per iteration, p_r = row r's share of the lookups
    column plan: every lookup is served by each of its k column devices, row_bytes / k each

    memory_d = weights_d + buffers_d
    weights_d = rows stored on d x row_bytes           (Plan.rows_per_device)
    buffers_d = sum_e M[d, e] + sum_e M[e, d]          the send and receive buffers of the
                                                       all-to-all (reused by the backward pass)

Every function is vectorised (``np.bincount`` over ``dest x P + src``): a replay of 10^7 lookups
takes well under a second.
"""

from __future__ import annotations

import numpy as np

from workbench.sharding.plans import TIER_NODE, TIER_SHARDED, Plan
from workbench.sharding.topology import Topology

__all__ = ["expected_traffic", "replay_traffic", "memory", "traffic_summary"]


def expected_traffic(plan: Plan, probability: np.ndarray, lookups_per_device: float,
                     row_bytes: int, topo: Topology) -> np.ndarray:
    """``float[P, P]`` expected forward bytes of one iteration (``M[e, d]``, zero diagonal).

    Args:
        plan: the placement.
        probability: ``float[N]`` each row's share of the lookups (normalised here).
        lookups_per_device: lambda, lookups each device makes per iteration.
        row_bytes: bytes of one row (4 D).
        topo: the topology.
    """
    p = np.asarray(probability, dtype=float)
    p = p / p.sum() if p.sum() > 0 else p
    n_dev, g = topo.devices, topo.devices_per_node
    scale = lookups_per_device * row_bytes
    m: np.ndarray
    if plan.column_devices is not None:
        m = np.zeros((n_dev, n_dev))
        np.add.at(m, plan.column_devices, scale / len(plan.column_devices))
    else:
        sharded = np.bincount(plan.owner[plan.tier == TIER_SHARDED],
                              weights=p[plan.tier == TIER_SHARDED], minlength=n_dev)[:n_dev]
        local = np.bincount(plan.owner[plan.tier == TIER_NODE],
                            weights=p[plan.tier == TIER_NODE], minlength=g)[:g]
        served = sharded[:, None] + np.where(topo.same_node(),
                                             np.tile(local, topo.nodes)[:, None], 0.0)
        m = scale * np.broadcast_to(served, (n_dev, n_dev)).copy()
    np.fill_diagonal(m, 0.0)
    return m


def replay_traffic(plan: Plan, src: np.ndarray, rows: np.ndarray, row_bytes: int,
                   topo: Topology) -> np.ndarray:
    """``float[P, P]`` forward bytes of the lookups ``rows`` made by devices ``src`` (one
    iteration; zero diagonal: a lookup served locally moves nothing)."""
    n_dev = topo.devices
    src = np.asarray(src, dtype=np.int64)
    if plan.column_devices is not None:
        k = len(plan.column_devices)
        pairs = (plan.column_devices[:, None] * n_dev + src[None, :]).ravel()
        m = np.bincount(pairs, minlength=n_dev * n_dev).reshape(n_dev, n_dev) * (row_bytes / k)
    else:
        dest = plan.serving(src, np.asarray(rows, dtype=np.int64), topo)
        m = np.bincount(dest * n_dev + src, minlength=n_dev * n_dev).reshape(
            n_dev, n_dev).astype(float) * row_bytes
    np.fill_diagonal(m, 0.0)
    return m


def memory(plan: Plan, traffic: np.ndarray, row_bytes: int,
           topo: Topology) -> dict[str, np.ndarray]:
    """Per device: ``weights``, ``buffers`` (all-to-all send + receive) and ``total`` bytes."""
    weights = plan.rows_per_device(topo) * row_bytes
    m = np.array(traffic, dtype=float)
    np.fill_diagonal(m, 0.0)
    buffers = m.sum(axis=1) + m.sum(axis=0)
    return {"weights": weights, "buffers": buffers, "total": weights + buffers}


def traffic_summary(traffic: np.ndarray, topo: Topology) -> dict[str, float]:
    """Total and inter-node (global) bytes of one all-to-all and its time (forward +
    backward: ``2 x`` [`Topology.a2a_seconds`][])."""
    parts = topo.split(traffic)
    return {"bytes": float(parts["intra_send"].sum() + parts["inter_send"].sum()),
            "inter_bytes": float(parts["inter_send"].sum()),
            "seconds": 2.0 * float(topo.device_seconds(parts).max(initial=0.0))}
