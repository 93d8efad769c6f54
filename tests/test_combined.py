"""The combined experiment: the trainer's dedup, replicated rows and popular overlap; the
ablation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from helpers.training import MODEL, toy_data
from workbench.cluster.cache import COUNTERS
from workbench.cluster.config import CacheConfig, ClusterConfig
from workbench.cluster.time_model import Links, time_model
from workbench.config import load
from workbench.experiments.combined import runs
from workbench.experiments.config import MECHANISMS, CombinedConfig
from workbench.training.components import ClusterSetup, Mechanisms, ModelSpec, SystemSpec
from workbench.training.trainer import Trainer
from workbench.utils.validation import ConfigError


def _trainer(rows: int, system: SystemSpec, workers: int, cache: CacheConfig,
             **switches) -> Trainer:
    return Trainer(ModelSpec(MODEL, 13, 26, rows), system,
                   ClusterSetup(ClusterConfig(workers=workers), cache),
                   switches=Mechanisms(**switches), seed=3)


def _steps(trainer: Trainer, train, n: int = 8) -> None:
    for start in range(0, n * MODEL.batch_size, MODEL.batch_size):
        trainer.step(train, start)


def _params(trainer: Trainer) -> list[torch.Tensor]:
    return [p.detach().clone() for p in trainer.model.parameters()]


def _table(trainer: Trainer) -> np.ndarray:
    table = trainer.store.table().copy()
    if trainer.replicated is not None:
        table[trainer.replicated] = trainer.replica.numpy()[trainer.replicated]
    return table


@pytest.mark.parametrize("kind", ["hybrid", "cache"])
def test_dedup_gives_the_same_parameters_and_fewer_lookups(kind: str) -> None:
    """Summing a key's update rows before one write equals writing them one by one (s = 0:
    every read sees every update, so the update clock's unit changes nothing)."""
    train, _, rows = toy_data(1024)
    system = SystemSpec(kind, kind, 0)
    cache = CacheConfig(policy="lru", ratio=0.05)
    a = _trainer(rows, system, 4, cache)
    b = _trainer(rows, system, 4, cache, dedup=True)
    _steps(a, train)
    _steps(b, train)
    for p, q in zip(_params(a), _params(b)):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(_table(a), _table(b), rtol=1e-4, atol=1e-5)
    assert b.lookup_rows < a.lookup_rows == 8 * MODEL.batch_size * 26
    # the protocol reads distinct keys either way: the same rows cross the wire
    pulled = COUNTERS.index("miss_pulls")
    assert (a.cluster.counters()[:, pulled] == b.cluster.counters()[:, pulled]).all()


def test_every_row_replicated_equals_plain_training_and_moves_no_row() -> None:
    train, _, rows = toy_data(1024)
    plain = _trainer(rows, SystemSpec("plain", "plain"), 1, CacheConfig())
    everywhere = np.ones(rows, dtype=bool)
    rep = _trainer(rows, SystemSpec("hybrid", "hybrid"), 4, CacheConfig(policy="none"),
                   replicated=everywhere)
    _steps(plain, train)
    _steps(rep, train)
    for p, q in zip(_params(plain), _params(rep)):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(plain.store.table(), _table(rep), rtol=1e-4, atol=1e-5)
    history = rep.cluster.history()
    assert history["pulled_rows"].sum() == 0 and history["pushed_rows"].sum() == 0
    assert rep.replicated_synced > 0  # the touched rows joined the AllReduce


def test_replicated_rows_cut_pulls_and_add_allreduce_bytes() -> None:
    train, _, rows = toy_data(1024)
    hot = np.zeros(rows, dtype=bool)
    counts = np.bincount(train.keys.ravel(), minlength=rows)
    hot[np.argsort(-counts)[: rows // 50]] = True
    args = (rows, SystemSpec("hybrid", "hybrid"), 4, CacheConfig(policy="none"))
    off, on = _trainer(*args), _trainer(*args, replicated=hot)
    _steps(off, train)
    _steps(on, train)
    h_off, h_on = off.cluster.history(), on.cluster.history()
    assert h_on["pulled_rows"].sum() < h_off["pulled_rows"].sum()
    extra = h_on["dense_bytes"].sum() - h_off["dense_bytes"].sum()
    assert extra == pytest.approx(2 * 3 / 4 * 4 * MODEL.embedding_dim * on.replicated_synced
                                  * 4)  # per worker, 4 workers


def test_popular_overlap_hides_compute_without_prefetch_only() -> None:
    links = Links.from_config(ClusterConfig(workers=2, overlap="none"))
    counters = np.zeros((1, 2, len(COUNTERS)), np.int64)
    counters[..., COUNTERS.index("unique_read")] = 1000
    counters[..., COUNTERS.index("miss_pulls")] = 1000
    plain = time_model(counters, links, 16, compute_s=0.5)
    hidden = time_model(counters, links, 16, compute_s=0.5, hidden_s=0.2)
    comm = plain["comm_s"][0, 0]
    assert plain["iter_s"][0, 0] == pytest.approx(0.5 + comm)
    assert hidden["iter_s"][0, 0] == pytest.approx(max(0.2, comm) + 0.3)
    prefetch = Links.from_config(ClusterConfig(workers=2, overlap="prefetch"))
    assert time_model(counters, prefetch, 16, compute_s=0.5, hidden_s=0.2)["iter_s"][0, 0] \
        == pytest.approx(max(0.5, time_model(counters, prefetch, 16, 0.5)["comm_s"][0, 0]))


def test_bad_mechanism_settings() -> None:
    train, _, rows = toy_data(256)
    with pytest.raises(ValueError, match="needs replicated"):
        _trainer(rows, SystemSpec("hybrid", "hybrid"), 4, CacheConfig(policy="none"),
                 overlap_popular=True)
    with pytest.raises(ValueError, match="replicated rows need"):
        _trainer(rows, SystemSpec("plain", "plain"), 1, CacheConfig(),
                 replicated=np.ones(rows, bool))
    with pytest.raises(ConfigError, match=r"mechanisms\[0\]"):
        CombinedConfig(mechanisms=["magic"])
    with pytest.raises(ConfigError, match=r"pairs\[0\]"):
        CombinedConfig(pairs=[["esd", "esd"]])


def test_ablation_runs() -> None:
    plan = runs(list(MECHANISMS), [["esd", "recd"]])
    names = [name for name, _, _ in plan]
    assert names[0] == "none" and "all" in names and "esd + recd" in names
    assert len(names) == len(set(names)) == 1 + 5 + 1 + 1 + 5 + 1
    on = dict((name, mech) for name, mech, _ in plan)
    assert on["all - het"] == frozenset(MECHANISMS) - {"het"}
    assert [laia for name, _, laia in plan if name == "all (laia)"] == [True]


def test_stage_outputs_on_ci_profile(ci_pipeline: Path) -> None:
    cfg = load(params=ci_pipeline)
    exp = cfg.experiments.combined
    out = cfg.paths.resolve("results") / "combined" / exp.dataset
    table = pd.read_csv(out / "ablation.csv")
    assert list(table["run"]) == [name for name, _, _ in runs(exp.mechanisms, exp.pairs)]
    assert (table["bytes"] > 0).all() and table["final_auc"].between(0, 1).all()
    t = table.set_index("run")
    # RecD reads fewer rows, moves the same PS bytes; HET's cache moves fewer
    assert t.loc["recd only", "lookup_rows"] < t.loc["none", "lookup_rows"]
    assert t.loc["recd only", "ps_bytes"] == t.loc["none", "ps_bytes"]
    assert t.loc["het only", "ps_bytes"] < t.loc["none", "ps_bytes"]
    assert t.loc["hotline only", "replicated_sync_bytes"] > 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["target_auc"] is not None and summary["replicated_rows"]["hotline"] > 0
    # deterministic: the same config writes the same bytes
    from workbench.stages import run

    before = (out / "ablation.csv").read_bytes()
    run(["combined", "--params", str(ci_pipeline)])
    assert (out / "ablation.csv").read_bytes() == before
