"""TorchRec's own sharding plan of FlexShard's table (workbench/sharding/torchrec_plan.py): the
planner's choice within RW's memory is RW's blocks, its choice with a device's HBM is another
plan, and every shard layout converts to the Plan that holds the same rows on the same ranks."""

from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest

from workbench.sharding import torchrec_plan as trp
from workbench.sharding.plans import TIER_GLOBAL, TIER_SHARDED, row_wise, table_row_wise
from workbench.sharding.topology import Topology
from workbench.sharding.traffic import memory, replay_traffic
from workbench.utils import torchrec as wtr

ROWS, DIM = 100_003, 16  # not a multiple of P: the last block is short


def _topo(nodes: int = 4, per_node: int = 4) -> Topology:
    return Topology(nodes, per_node, 300e9, np.full(nodes * per_node, 25e9), 5e-6, 1e-5)


@pytest.fixture(scope="module")
def torchrec_installed() -> None:
    try:
        wtr.check_install()
    except wtr.TorchRecUnavailable as err:
        pytest.skip(str(err))


def test_within_rws_memory_the_planner_chooses_rws_blocks(torchrec_installed: None) -> None:
    topo = _topo()
    own = row_wise(ROWS, topo)
    src = np.repeat(np.arange(topo.devices), 64)
    ids = np.random.default_rng(0).integers(0, ROWS, src.size)
    rw_memory = float(memory(own, replay_traffic(own, src, ids, 4 * DIM, topo), 4 * DIM,
                             topo)["total"].max())
    planned = trp.plan_table(ROWS, DIM, topo, batch=64, pooling=1.0, hbm_bytes=rw_memory)
    assert planned.sharding_type == "row_wise"
    assert len(planned.shards) == topo.devices
    assert [s.rank for s in planned.shards] == list(range(topo.devices))
    plan = trp.to_plan(planned, ROWS, DIM, "torchrec")
    assert np.array_equal(plan.owner, own.owner) and np.array_equal(plan.tier, own.tier)
    record = planned.record()
    assert record["shards"][1] == {"row": -(-ROWS // topo.devices), "rows": -(-ROWS // 16),
                                   "col": 0, "cols": DIM, "rank": 1}
    roomy = trp.plan_table(ROWS, DIM, topo, batch=64, pooling=1.0, hbm_bytes=80 * 2**30)
    assert roomy.sharding_type in trp.SHARDING_TYPES and roomy.hbm_bytes == 80 * 2**30
    trp.to_plan(roomy, ROWS, DIM, "torchrec_hbm")  # whatever it chose converts
    with pytest.raises(ValueError, match="found no plan"):
        trp.plan_table(ROWS, DIM, topo, batch=64, pooling=1.0, hbm_bytes=1000)


def test_every_shard_layout_converts_to_the_same_placement() -> None:
    topo = _topo(2, 4)
    n = 10
    dp = trp.to_plan(trp.TorchRecPlan("data_parallel", "dense", (), 1), n, DIM, "t")
    assert (dp.tier == TIER_GLOBAL).all()
    blocks = tuple(trp.Shard(r * 3, min(3, n - r * 3), 0, DIM, r) for r in range(4))
    twrw = trp.to_plan(trp.TorchRecPlan("table_row_wise", "fused", blocks, 1), n, DIM, "t")
    assert np.array_equal(twrw.owner, table_row_wise(n, topo, 0).owner)
    assert (twrw.tier == TIER_SHARDED).all()
    whole = trp.to_plan(trp.TorchRecPlan("table_wise", "fused", (trp.Shard(0, n, 0, DIM, 5),),
                                         1), n, DIM, "t")
    assert (whole.owner == 5).all() and whole.column_devices is None
    cols = tuple(trp.Shard(0, n, c * 4, 4, 2 + c) for c in range(4))
    cw = trp.to_plan(trp.TorchRecPlan("column_wise", "fused", cols, 1), n, DIM, "t")
    assert cw.column_devices is not None and cw.column_devices.tolist() == [2, 3, 4, 5]
    grid = (trp.Shard(0, 5, 0, 8, 0), trp.Shard(5, 5, 8, 8, 1))
    with pytest.raises(ValueError, match="splits rows and columns at once"):
        trp.to_plan(trp.TorchRecPlan("grid_shard", "fused", grid, 1), n, DIM, "t")
    with pytest.raises(ValueError, match="cover 6 of 10 rows"):
        trp.to_plan(trp.TorchRecPlan("row_wise", "fused", blocks[:2], 1), n, DIM, "t")


def test_without_torchrec_the_planner_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torchrec", None)
    importlib.invalidate_caches()
    with pytest.raises(wtr.TorchRecUnavailable, match="FlexShard's TorchRec plans need "
                       r"TorchRec .*: make torchrec"):
        trp.plan_table(ROWS, DIM, _topo(), batch=64, pooling=1.0, hbm_bytes=1e9)
