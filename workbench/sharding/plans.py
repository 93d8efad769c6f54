r"""Sharding plans of one embedding table: where each row lives and where a lookup goes.

Our formalisation of FlexShard's tiers (the tiers as the paper's abstract states them) and of the
plans it is compared with (TorchRec's planner options, HugeCTR's hybrid embedding). A plan gives
every row ``r`` of an N-row table a tier and an owner:

    tier 0  replicated on every device                 lookup from d: served by d itself
    tier 1  replicated per node, row-sharded inside    lookup from d: device node(d) G + owner[r]
    tier 2  row-sharded over devices                   lookup from d: device owner[r]
    column  CW: every row split into k column slices on ``column_devices`` (k of them);
            a lookup from d is served by each of them, row_bytes / k each

    plan        tiers                                         owner of tier 2 (or 1)
    tw          all rows tier 2                               one device (table-wise)
    rw          all rows tier 2 (the baseline)                contiguous blocks of ceil(N/P) ids
    cw          column                                        k devices
    twrw        all rows tier 2, on one node                  contiguous blocks over its G devices
    hot_dp      hottest t1 rows tier 0, the rest tier 2       interleaved by rank (below)
    flexshard   hottest t1 rows tier 0, next t2 tier 1,        interleaved by rank, weighted by
                the rest tier 2                                the devices' inter-node bandwidth
    torchrec    what TorchRec's planner chose, converted shard by shard
    torchrec_hbm  (workbench.sharding.torchrec_plan; two memories)

FlexShard's rows are taken in descending access probability (ties to the smaller id); tier 1's
owners cycle over the G local devices by rank, and tier 2's follow a weighted interleave of the
devices ([`weighted_sequence`][]: device d takes ~N w_d / sum w of the ranks, spread evenly), so
a slow node's devices hold and serve fewer sharded rows (topology-aware). The sequence is a
function of the absolute rank, not of the cut points, so that the planner can evaluate every cut
from prefix sums ([`workbench.sharding.planner`][]).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.sharding.topology import Topology

__all__ = ["TIER_GLOBAL", "TIER_NODE", "TIER_SHARDED", "PLANS", "Plan", "weighted_sequence",
           "rank_order", "rank_sequences", "table_wise", "row_wise", "column_wise",
           "table_row_wise", "tiered"]

TIER_GLOBAL, TIER_NODE, TIER_SHARDED = 0, 1, 2
PLANS = ("tw", "rw", "cw", "twrw", "hot_dp", "flexshard", "torchrec", "torchrec_hbm")


@dataclass
class Plan:
    """Placement of an N-row table on a topology.

    Attributes:
        name: the plan's name (one of [`PLANS`][]).
        tier: ``int8[N]`` tier of each row (ignored for a column plan).
        owner: ``int64[N]`` tier 1: local index in its node; tier 2: device; tier 0: -1.
        column_devices: a column plan's k devices (None otherwise).
        t1: rows replicated everywhere (tiered plans).
        t2: rows replicated per node (tiered plans).
    """

    name: str
    tier: np.ndarray
    owner: np.ndarray
    column_devices: np.ndarray | None = None
    t1: int = 0
    t2: int = 0

    @property
    def rows(self) -> int:
        """N."""
        return int(self.tier.size)

    def rows_per_device(self, topo: Topology) -> np.ndarray:
        """``float[P]`` rows each device stores (a column slice counts 1/k of a row)."""
        p, g = topo.devices, topo.devices_per_node
        if self.column_devices is not None:
            out = np.zeros(p)
            np.add.at(out, self.column_devices, self.rows / len(self.column_devices))
            return out
        local = np.bincount(self.owner[self.tier == TIER_NODE], minlength=g)[:g]
        sharded = np.bincount(self.owner[self.tier == TIER_SHARDED], minlength=p)[:p]
        replicated = int((self.tier == TIER_GLOBAL).sum())
        return (replicated + np.tile(local, topo.nodes) + sharded).astype(float)

    def serving(self, src: np.ndarray, rows: np.ndarray, topo: Topology) -> np.ndarray:
        """The device that serves each lookup of ``rows`` made by device ``src`` (not for a
        column plan)."""
        if self.column_devices is not None:
            raise ValueError("a column plan is served by every column device: use the traffic "
                             "functions")
        tier, owner = self.tier[rows], self.owner[rows]
        node_dest = (src // topo.devices_per_node) * topo.devices_per_node + owner
        return np.where(tier == TIER_GLOBAL, src, np.where(tier == TIER_NODE, node_dest, owner))


def weighted_sequence(weights: np.ndarray, n: int) -> np.ndarray:
    """``int64[n]``: a device per position, device d taking ~``n w_d / sum w`` positions spread
    evenly (stride scheduling: position ``(j + 1/2) / c_d`` for its j-th of ``c_d`` slots, merged
    in order; ties to the smaller device)."""
    w = np.asarray(weights, dtype=float)
    if w.ndim != 1 or w.size == 0 or (w <= 0).any():
        raise ValueError("weights must be a non-empty vector of positive numbers")
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if (w == w[0]).all() and n % w.size == 0:  # equal shares: the same merge, round robin
        return (np.arange(n) % w.size).astype(np.int64)
    share = n * w / w.sum()
    counts = np.floor(share).astype(np.int64)
    rest = n - counts.sum()  # largest remainders first, ties to the smaller device
    counts[np.argsort(-(share - counts), kind="stable")[:rest]] += 1
    device = np.repeat(np.arange(w.size), counts)
    position = (np.concatenate([(np.arange(c) + 0.5) / c for c in counts if c]) if n
                else np.zeros(0))
    return device[np.lexsort((device, position))].astype(np.int64)


def rank_order(probability: np.ndarray) -> np.ndarray:
    """Row ids by descending access probability (ties to the smaller id)."""
    return np.argsort(-np.asarray(probability, dtype=float), kind="stable").astype(np.int64)


def _blocks(n: int, parts: int) -> np.ndarray:
    """TorchRec's row-wise split: contiguous blocks of ``ceil(n / parts)`` ids."""
    return (np.arange(n) // max(1, -(-n // parts))).astype(np.int64)


def table_wise(n: int, device: int = 0) -> Plan:
    """The whole table on one device."""
    return Plan("tw", np.full(n, TIER_SHARDED, np.int8), np.full(n, device, np.int64))


def row_wise(n: int, topo: Topology) -> Plan:
    """RW, the baseline: contiguous blocks of ids over every device."""
    return Plan("rw", np.full(n, TIER_SHARDED, np.int8), _blocks(n, topo.devices))


def column_wise(n: int, shards: int, first_device: int = 0, topo: Topology | None = None) -> Plan:
    """CW: k column slices, on devices ``first_device .. first_device + k - 1`` (mod P)."""
    p = topo.devices if topo is not None else shards
    devices = (first_device + np.arange(shards)) % p
    return Plan("cw", np.full(n, TIER_SHARDED, np.int8), np.full(n, -1, np.int64),
                column_devices=devices.astype(np.int64))


def table_row_wise(n: int, topo: Topology, node: int = 0) -> Plan:
    """TWRW: the table on one node, contiguous id blocks over its G devices."""
    owner = node * topo.devices_per_node + _blocks(n, topo.devices_per_node)
    return Plan("twrw", np.full(n, TIER_SHARDED, np.int8), owner)


def tiered(probability: np.ndarray, t1: int, t2: int, topo: Topology,
           name: str = "flexshard", weighted: bool = True,
           order: np.ndarray | None = None) -> Plan:
    """FlexShard's tiers (``hot_dp`` with ``t2 = 0`` and ``weighted=False``).

    Args:
        probability: ``float[N]`` access probability of each row (per occurrence).
        t1: the hottest rows, replicated on every device.
        t2: the next rows, replicated per node and row-sharded inside it.
        topo: the topology (its inter-node bandwidths weight tier 2's owners).
        name: the plan's name.
        weighted: tier 2's owners in proportion to the devices' inter-node bandwidth (else equal).
        order: [`rank_order`][] of ``probability``, when already known.
    """
    n = len(probability)
    if not (0 <= t1 and 0 <= t2 and t1 + t2 <= n):
        raise ValueError(f"t1 = {t1}, t2 = {t2}: need 0 <= t1, t2 and t1 + t2 <= N = {n}")
    order = rank_order(probability) if order is None else order
    rank_tier = np.full(n, TIER_SHARDED, np.int8)
    rank_tier[:t1], rank_tier[t1:t1 + t2] = TIER_GLOBAL, TIER_NODE
    seq_node, seq_sharded = rank_sequences(n, topo, weighted)
    rank_owner = np.where(rank_tier == TIER_NODE, seq_node,
                          np.where(rank_tier == TIER_SHARDED, seq_sharded, -1))
    tier, owner = np.empty(n, np.int8), np.empty(n, np.int64)
    tier[order], owner[order] = rank_tier, rank_owner
    return Plan(name, tier, owner, t1=t1, t2=t2)


def rank_sequences(n: int, topo: Topology, weighted: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The owner of the row at each rank if it is in tier 1 (local index: rank mod G) and if it
    is in tier 2 ([`weighted_sequence`][] over the devices' inter-node bandwidth, or equal)."""
    seq_node = (np.arange(n) % topo.devices_per_node).astype(np.int64)
    weights = topo.inter_bps if weighted else np.ones(topo.devices)
    return seq_node, weighted_sequence(weights, n)
