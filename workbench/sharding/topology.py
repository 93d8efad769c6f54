r"""A two-level accelerator topology and the time of one all-to-all on it.

Our formalisation (FlexShard's topology and network model were not obtained):

        node 0                    node 1                      node n-1 (slow: speed s)
   +-----------------+      +-----------------+         +-----------------+
   | d0 d1 ... d_G-1 |      | dG  ...  d_2G-1 |   ...   |      ...        |
   +--NVLink (intra)-+      +-----------------+         +-----------------+
        |  NIC per device (inter), s x inter_gbps on a slow node
        +------------------- inter-node network ----------------------+

An all-to-all moves ``M[e, d]`` bytes from device e to device d (``M`` P x P, zero diagonal).
Every device sends and receives at once (full duplex) over two independent paths, NVLink to its
own node and its NIC to the others, so with ``node(d)`` its node:

    intra_d = [traffic] L_intra + max(sum_{e in node(d)} M[d, e], sum_{e in node(d)} M[e, d])
                                  / intra_bw
    inter_d = [traffic] L_inter + max(sum_{e not in node(d)} M[d, e], sum_{...} M[e, d])
                                  / (speed_node(d) x inter_bw)
    t_d     = max(intra_d, inter_d)           a2a = max_d t_d   (the slowest device)

The backward pass sends the gradients of the same rows back (``M`` transposed), which gives each
device the same send and receive volumes swapped, hence the same time: one iteration's
embedding communication is ``2 x a2a``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from workbench.sharding.config import TopologyConfig

__all__ = ["Topology"]


@dataclass(frozen=True)
class Topology:
    """Devices ``0..P-1``, node ``d // G``; rates in bytes/s and seconds.

    Attributes:
        nodes: nodes.
        devices_per_node: G.
        intra_bps: intra-node bandwidth of a device (bytes/s).
        inter_bps: inter-node bandwidth of each device (bytes/s, ``float[P]``: slow nodes lower).
        intra_latency_s: latency of an intra-node round.
        inter_latency_s: latency of an inter-node round.
    """

    nodes: int
    devices_per_node: int
    intra_bps: float
    inter_bps: np.ndarray
    intra_latency_s: float
    inter_latency_s: float

    @classmethod
    def from_config(cls, cfg: TopologyConfig, nodes: int | None = None,
                    slow_factor: float | None = None) -> Topology:
        """The topology of ``cfg``, optionally with another node count or slow-node factor
        (the sweeps); the slow nodes are the last ``cfg.slow_nodes``."""
        if nodes is not None or slow_factor is not None:
            n = cfg.nodes if nodes is None else nodes
            node_speed = cfg.node_speed if len(cfg.node_speed) == 1 else (
                cfg.node_speed if n == cfg.nodes else cfg.node_speed[:1])
            cfg = replace(cfg, nodes=n, node_speed=list(node_speed),
                          slow_nodes=min(cfg.slow_nodes, n),
                          slow_factor=cfg.slow_factor if slow_factor is None else slow_factor)
        speed = np.broadcast_to(np.asarray(cfg.node_speed, dtype=float), (cfg.nodes,)).copy()
        if cfg.slow_nodes:
            speed[cfg.nodes - cfg.slow_nodes:] *= cfg.slow_factor
        inter = np.repeat(speed * cfg.inter_gbps * 1e9, cfg.devices_per_node)
        return cls(cfg.nodes, cfg.devices_per_node, cfg.intra_gbps * 1e9, inter,
                   cfg.intra_latency_us * 1e-6, cfg.inter_latency_us * 1e-6)

    @property
    def devices(self) -> int:
        """P = nodes x G."""
        return self.nodes * self.devices_per_node

    def node_of(self, devices: np.ndarray | int) -> np.ndarray | int:
        """The node of each device."""
        return np.asarray(devices) // self.devices_per_node

    def same_node(self) -> np.ndarray:
        """``bool[P, P]``: e and d on the same node."""
        node = np.arange(self.devices) // self.devices_per_node
        return node[:, None] == node[None, :]

    def split(self, traffic: np.ndarray) -> dict[str, np.ndarray]:
        """Per device: intra and inter bytes sent and received by an all-to-all ``traffic``
        (``M[e, d]`` bytes from e to d; the diagonal is ignored)."""
        m = np.array(traffic, dtype=float)
        np.fill_diagonal(m, 0.0)
        same = self.same_node()
        intra, inter = np.where(same, m, 0.0), np.where(same, 0.0, m)
        return {"intra_send": intra.sum(axis=1), "intra_recv": intra.sum(axis=0),
                "inter_send": inter.sum(axis=1), "inter_recv": inter.sum(axis=0)}

    def device_seconds(self, parts: dict[str, np.ndarray]) -> np.ndarray:
        """``t_d`` of every device from its intra / inter send and receive bytes."""
        intra = np.maximum(parts["intra_send"], parts["intra_recv"])
        inter = np.maximum(parts["inter_send"], parts["inter_recv"])
        t_intra = np.where(intra > 0, self.intra_latency_s + intra / self.intra_bps, 0.0)
        t_inter = np.where(inter > 0, self.inter_latency_s + inter / self.inter_bps, 0.0)
        return np.maximum(t_intra, t_inter)

    def a2a_seconds(self, traffic: np.ndarray) -> float:
        """The all-to-all time: the slowest device's ``t_d``."""
        return float(self.device_seconds(self.split(traffic)).max(initial=0.0))
