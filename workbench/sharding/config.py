"""Config schema of the sharding layer: the device topology (``workbench/conf/topology/``,
``topology``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from workbench.utils.validation import ConfigError, in_range


@dataclass(frozen=True)
class TopologyConfig:
    """A two-level cluster: ``nodes`` x ``devices_per_node`` accelerators
    (`workbench/sharding/topology.py`).

    Bandwidths are per device and per direction, in GB/s (1e9 bytes/s).

    Attributes:
        name: profile name.
        nodes: nodes.
        devices_per_node: accelerators per node (G).
        intra_gbps: a device's intra-node bandwidth (NVLink class).
        inter_gbps: a device's inter-node bandwidth (its NIC: InfiniBand / RoCE class).
        intra_latency_us: latency of one intra-node all-to-all round.
        inter_latency_us: latency of one inter-node all-to-all round.
        node_speed: inter-node bandwidth multiplier per node: one value (every node) or exactly
            ``nodes`` values; a slow node's devices send and receive at ``speed x inter_gbps``.
        slow_nodes: how many nodes (the last ones) run at ``slow_factor`` (applied on top of
            ``node_speed``; 0: none).
        slow_factor: the speed of the slow nodes' NICs, in (0, 1].
        source: where the numbers come from.
    """

    name: str = "two_level"
    nodes: int = field(default=4, metadata=in_range(1, 4096))
    devices_per_node: int = field(default=8, metadata=in_range(1, 1024))
    intra_gbps: float = field(default=300.0, metadata=in_range(0.0, None, lo_open=True))
    inter_gbps: float = field(default=25.0, metadata=in_range(0.0, None, lo_open=True))
    intra_latency_us: float = field(default=5.0, metadata=in_range(0.0, None))
    inter_latency_us: float = field(default=10.0, metadata=in_range(0.0, None))
    node_speed: list[float] = field(default_factory=lambda: [1.0])
    slow_nodes: int = field(default=0, metadata=in_range(0, None))
    slow_factor: float = field(default=1.0, metadata=in_range(0.0, 1.0, lo_open=True))
    source: str = ""

    def __post_init__(self) -> None:
        if len(self.node_speed) not in (1, self.nodes):
            raise ConfigError(f"node_speed has {len(self.node_speed)} values: give 1 (every "
                              f"node) or exactly nodes = {self.nodes}")
        for i, v in enumerate(self.node_speed):
            if not math.isfinite(v) or v <= 0:
                raise ConfigError(f"node_speed[{i}] = {v}: must be a finite number > 0")
        if self.slow_nodes > self.nodes:
            raise ConfigError(f"slow_nodes = {self.slow_nodes}: must be <= nodes = {self.nodes}")
