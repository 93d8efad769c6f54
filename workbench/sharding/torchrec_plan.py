r"""TorchRec's own sharding plan of FlexShard's table, as a [`Plan`][workbench.sharding.plans.Plan].

The baseline a TorchRec user gets: ``torchrec.distributed.planner.EmbeddingShardingPlanner``
(torchrec 1.8.0, ``make torchrec``) plans one ``EmbeddingBagCollection`` table of N rows x D on
a topology of P = nodes x G devices, and the plan is converted shard by shard:

    planner input      Topology(world_size=P, local_world_size=G, compute_device="cuda",
                                hbm_cap=H, intra_host_bw, inter_host_bw)  (bytes per ms)
                       batch_size = per-device batch, pooling factor = mean sequence length
                       sharding types it may choose: those a Plan expresses (SHARDING_TYPES)
    plan -> Plan       row shard [o, o + s) on rank r          owner[o:o + s] = r (tier 2)
                       (row_wise, table_row_wise, table_wise: one shard of all N rows)
                       column shards of all N rows on ranks R  column_devices = R
                       data_parallel                           every row tier 0 (replicated)

Two memories are planned (``FlexShardConfig``): RW's memory per device, the limit FlexShard
itself plans within (the planner may then put rows in host memory behind a UVM cache: where a
row's home device is, which is all the traffic model reads, does not change), and the device's
HBM. The planner sees one inter-node bandwidth (its Topology has no slow node), the base one.
Its choice comes from its own performance model, which is not the workbench's; the replay then
measures its placement on the workbench's network model like every other plan's.
"""

from __future__ import annotations

import importlib
import logging
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from workbench.sharding.plans import TIER_GLOBAL, TIER_SHARDED, Plan
from workbench.sharding.topology import Topology
from workbench.utils.torchrec import INSTALL, TorchRecUnavailable

__all__ = ["SHARDING_TYPES", "Shard", "TorchRecPlan", "plan_table", "to_plan"]

#: The sharding types the planner may choose: every type a one-table Plan can express
#: (grid_shard, rows and columns split at once, is left out).
SHARDING_TYPES = ("data_parallel", "table_wise", "column_wise", "table_column_wise", "row_wise",
                  "table_row_wise")
_TABLE = "sequence"


@dataclass(frozen=True)
class Shard:
    """One shard of the planned table: rows ``[row, row + rows)``, columns
    ``[col, col + cols)``, on ``rank``."""

    row: int
    rows: int
    col: int
    cols: int
    rank: int


@dataclass(frozen=True)
class TorchRecPlan:
    """What the planner chose for the table.

    Attributes:
        sharding_type: e.g. ``row_wise``.
        compute_kernel: e.g. ``fused`` (HBM) or ``fused_uvm_caching`` (host memory + cache).
        shards: the shards, in the planner's order (empty for ``data_parallel``).
        hbm_bytes: the per-device memory the planner was given.
    """

    sharding_type: str
    compute_kernel: str
    shards: tuple[Shard, ...]
    hbm_bytes: int

    def record(self) -> dict[str, Any]:
        """The plan as ``torchrec_plan.json`` keeps it."""
        return {"sharding_type": self.sharding_type, "compute_kernel": self.compute_kernel,
                "hbm_bytes": self.hbm_bytes, "shards": [s.__dict__ for s in self.shards]}


def _torchrec() -> dict[str, Any]:
    try:
        tr = importlib.import_module("torchrec")
        planner = importlib.import_module("torchrec.distributed.planner")
        types = importlib.import_module("torchrec.distributed.planner.types")
        reserve = importlib.import_module("torchrec.distributed.planner.storage_reservations")
        sharder = importlib.import_module("torchrec.distributed.embeddingbag")
    except (ImportError, OSError, RuntimeError) as err:
        raise TorchRecUnavailable(f"FlexShard's TorchRec plans need TorchRec "
                                  f"({str(err).splitlines()[0][:160]}): {INSTALL}") from None
    return {"tr": tr, "planner": planner, "types": types, "reserve": reserve, "sharder": sharder}


def plan_table(rows: int, dim: int, topo: Topology, batch: int, pooling: float,
               hbm_bytes: float) -> TorchRecPlan:
    """TorchRec's planner on one ``rows x dim`` table at ``topo`` with ``hbm_bytes`` per device.

    Args:
        rows: N.
        dim: D.
        topo: the topology (P, G, and the intra- and base inter-node bandwidths).
        batch: samples per device per iteration.
        pooling: mean lookups per sample (the planner's pooling factor).
        hbm_bytes: the accelerator memory per device; host memory is the planner's default.

    Raises:
        TorchRecUnavailable: TorchRec is not installed (the message gives the command).
        ValueError: the planner finds no plan (its one-line reason).
    """
    import torch

    m = _torchrec()
    ebc = m["tr"].EmbeddingBagCollection(tables=[m["tr"].EmbeddingBagConfig(
        name=_TABLE, embedding_dim=dim, num_embeddings=rows, feature_names=[_TABLE])],
        device=torch.device("meta"))
    per_ms = 1e-3  # TorchRec's bandwidths are bytes per millisecond
    with warnings.catch_warnings():  # its advice on building a Topology through a factory
        warnings.simplefilter("ignore")
        planner_log = logging.getLogger("torchrec.distributed.planner")
        level, planner_log.level = planner_log.level, logging.ERROR
        try:
            topology = m["planner"].Topology(
                world_size=topo.devices, local_world_size=topo.devices_per_node,
                compute_device="cuda", hbm_cap=int(hbm_bytes),
                intra_host_bw=float(topo.intra_bps) * per_ms,
                inter_host_bw=float(np.max(topo.inter_bps)) * per_ms)
            planner = m["planner"].EmbeddingShardingPlanner(
                topology=topology, batch_size=batch, debug=False,
                storage_reservation=m["reserve"].FixedPercentageStorageReservation(0.0),
                constraints={_TABLE: m["types"].ParameterConstraints(
                    sharding_types=list(SHARDING_TYPES), pooling_factors=[float(pooling)])})
            plan = planner.plan(ebc, [m["sharder"].EmbeddingBagCollectionSharder()])
        except Exception as err:  # the planner's own error: no plan fits
            raise ValueError(f"TorchRec's planner found no plan for a {rows:,} x {dim} table "
                             f"on {topo.devices} devices with {hbm_bytes / 2**20:.1f} MiB each: "
                             f"{str(err).splitlines()[0][:200]}") from None
        finally:
            planner_log.level = level
    option = next(iter(plan.plan.values()))[_TABLE]
    spec = option.sharding_spec
    shards = tuple(Shard(int(s.shard_offsets[0]), int(s.shard_sizes[0]), int(s.shard_offsets[1]),
                         int(s.shard_sizes[1]), int(s.placement.rank()))
                   for s in (spec.shards if spec is not None else ()))
    return TorchRecPlan(str(option.sharding_type), str(option.compute_kernel), shards,
                        int(hbm_bytes))


def to_plan(planned: TorchRecPlan, rows: int, dim: int, name: str) -> Plan:
    """``planned`` as a workbench [`Plan`][] named ``name`` (see the module docstring).

    Raises:
        ValueError: a shard splits rows and columns at once, or the shards miss rows.
    """
    if planned.sharding_type == "data_parallel":
        return Plan(name, np.full(rows, TIER_GLOBAL, np.int8), np.full(rows, -1, np.int64))
    whole_rows = [s for s in planned.shards if s.row == 0 and s.rows == rows]
    if len(planned.shards) > 1 and len(whole_rows) == len(planned.shards) and all(
            s.cols < dim for s in planned.shards):  # column slices of every row
        return Plan(name, np.full(rows, TIER_SHARDED, np.int8), np.full(rows, -1, np.int64),
                    column_devices=np.array([s.rank for s in planned.shards], np.int64))
    if any(s.col != 0 or s.cols != dim for s in planned.shards):
        raise ValueError(f"{planned.sharding_type}: a shard splits rows and columns at once "
                         "(a Plan holds whole rows or column slices of every row)")
    owner = np.full(rows, -1, np.int64)
    for s in planned.shards:
        owner[s.row:s.row + s.rows] = s.rank
    if (owner < 0).any():
        raise ValueError(f"{planned.sharding_type}: the shards cover "
                         f"{int((owner >= 0).sum()):,} of {rows:,} rows")
    return Plan(name, np.full(rows, TIER_SHARDED, np.int8), owner)
