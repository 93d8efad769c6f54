"""HET's full-epoch replays (``het_epoch``): the key file, the streamed replay, the scheduler, the
stage's outputs on the ci profile, and one staleness clock for Table 1, Table 2 and Fig. 7."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from workbench.cluster.config import UNBOUNDED, CacheConfig
from workbench.config import load
from workbench.data.config import SyntheticConfig
from workbench.data.synthetic_keys import draw_keys, write_keys
from workbench.experiments import het_epoch, het_train
from workbench.experiments.config import HET_CLOCK, HetEpochConfig
from workbench.training.clock import replay_epoch

SMALL = SyntheticConfig(cardinality_scale=0.001, rows=1000)


def test_the_key_file_holds_the_drawn_keys_whatever_the_chunk(tmp_path: Path) -> None:
    keys, rows = draw_keys(SMALL, 0.001, 5000, 3, chunk_rows=5000)
    for chunk in (7, 1000, 4999):
        written = write_keys(tmp_path / f"k{chunk}.npy", SMALL, 0.001, 5000, 3, chunk)
        stored = np.load(tmp_path / f"k{chunk}.npy", mmap_mode="r")
        assert written == rows and stored.dtype == np.int32
        np.testing.assert_array_equal(stored, keys)


def test_a_memory_mapped_epoch_replays_as_the_same_keys_in_memory(tmp_path: Path) -> None:
    """The trace is cut a window at a time from the file; the counters (and what the flush
    adds) are those of the keys in memory, at any row width."""
    rows = write_keys(tmp_path / "k.npy", SMALL, 0.001, 6000, 1, 1000)
    mapped = np.load(tmp_path / "k.npy", mmap_mode="r")
    cache = CacheConfig(policy="lru", ratio=0.1, read_bound=5, write_bound=5, clock=HET_CLOCK)
    a, fa = replay_epoch(mapped, rows, 4, 64, cache, "contiguous", 0, dim=1)
    b, fb = replay_epoch(np.asarray(mapped, np.int64), rows, 4, 64, cache, "contiguous", 0)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(fa, fb)
    assert a.shape[0] == 6000 // (4 * 64)


def test_placements_and_configurations() -> None:
    exp = HetEpochConfig(workers=[1, 4], dense_modes=["after_backward", "concurrent"],
                         dense_links=["shared", "separate"], fig8_policies=["lru", "lfuopt"],
                         fig8_ratios=[0.05, 0.1])
    assert [p.label for p in het_epoch.placements(exp)] == [
        "after_backward", "concurrent/shared", "concurrent/separate"]
    configs = het_epoch.replays(exp, 8, CacheConfig(policy="lru", ratio=0.1))
    # Fig. 8's LRU 10% is Cache s=100's replay at 8 workers: not replayed twice
    assert [(c.system, c.workers) for c in configs] == [
        ("Hybrid, no cache", 1), ("Hybrid, no cache", 8), ("Cache s=100", 1),
        ("Cache s=100", 4), ("Cache s=100", 8), ("LRU 5%", 8), ("LFUOpt 5%", 8),
        ("LFUOpt 10%", 8)]
    cached = [c.cache for c in configs if c.cache.policy != "none"]
    assert all(c.read_bound == c.write_bound == 100 and c.clock == HET_CLOCK for c in cached)
    assert [(c.cache.policy, c.cache.ratio) for c in configs[-3:]] == [
        ("lru", 0.05), ("lfuopt", 0.05), ("lfuopt", 0.1)]


def test_the_memory_estimate_follows_the_measured_clusters() -> None:
    """Measured at Criteo Kaggle's 33.76M rows, LRU 10%: 3.9 GB at 8 workers, 14.3 at 32."""
    rows = 33_762_577
    lines = int(np.ceil(0.1 * rows))
    assert het_epoch.cluster_gb(rows, 8, lines) == pytest.approx(3.9, rel=0.05)
    assert het_epoch.cluster_gb(rows, 32, lines) == pytest.approx(14.3, rel=0.05)


def test_a_configuration_over_the_budget_is_refused_with_the_key(tmp_path: Path) -> None:
    configs = het_epoch.replays(HetEpochConfig(workers=[2]), 2, CacheConfig(policy="lru"))
    with pytest.raises(RuntimeError, match=r"experiments\.het_epoch\.memory_gb"):
        het_epoch.run_replays(tmp_path / "none.npy", 10**8, configs, 16, "contiguous", 0,
                              jobs=2, budget_gb=0.5, progress=False)


def test_table1_table2_and_fig7_share_one_staleness_clock() -> None:
    """Table 1's caches, Table 2's bounds in HET's unit and Fig. 7's / Fig. 9a's Cache s=100
    all tick in HET's per-iteration clock, whatever the cache config's own unit."""
    cfg = load([])  # the composed defaults, as params.yaml holds them
    assert HET_CLOCK == "iteration"
    update_cache = dataclasses.replace(cfg.cache, clock="update")
    table1 = [s.cache_config(update_cache).clock for s in het_train.systems(
        cfg.experiments.het_train) if s.kind.cached]
    table2 = [spec.cache_config(update_cache).clock for spec, extra in
              het_train.staleness_systems(cfg.experiments.het_train, 351)
              if extra["unit"] == "paper" and 0 < spec.bound < UNBOUNDED]
    fig7 = [c.cache.clock for c in het_epoch.replays(cfg.experiments.het_epoch,
                                                     cfg.cluster.workers, update_cache)
            if c.cache.policy != "none"]
    assert table1 and table2 and fig7
    assert set(table1) == set(table2) == set(fig7) == {HET_CLOCK}


def test_het_epoch_stage_outputs(ci_pipeline: Path) -> None:
    """The epoch's replays: every configuration, the flush counted, each worker count's
    samples within one global batch of the epoch, embedding communication inside the total,
    Fig. 9a's speedup relative to its smallest count, the measured resources apart."""
    cfg = load(params=ci_pipeline)
    exp = cfg.experiments.het_epoch
    out = cfg.paths.resolve("results") / "het_epoch" / exp.dataset
    counts = pd.read_csv(out / "counts.csv")
    per_worker = cfg.experiments.het_cache.batch_size
    assert ((counts["samples"] <= exp.samples)
            & (counts["samples"] > exp.samples - counts["workers"] * per_worker)).all()
    hybrid, cache = (counts[counts["system"] == s] for s in ("Hybrid, no cache", "Cache s=100"))
    assert (hybrid["dirty_at_end"] == 0).all() and (cache["dirty_at_end"] > 0).all()
    assert sorted(cache["workers"]) == sorted({cfg.cluster.workers, *exp.workers})
    assert (counts["rows_moved_flushed"] == counts["rows_moved"] + counts["dirty_at_end"]).all()
    fig7 = pd.read_csv(out / "fig7.csv")
    assert set(fig7["dense_placement"]) == {p.label for p in het_epoch.placements(exp)}
    assert (fig7["comm_embedding_s"] <= fig7["comm_total_s"] * (1 + 1e-9)).all()
    assert len(fig7) == len(exp.models) * len(exp.bandwidths_gbps) * 2 * len(
        het_epoch.placements(exp))
    fig8 = pd.read_csv(out / "fig8.csv")  # every policy at every size, 8 workers
    assert sorted(zip(fig8["policy"], fig8["cache_ratio"])) == sorted(
        (p, r) for p in exp.fig8_policies for r in exp.fig8_ratios)
    assert (fig8["workers"] == cfg.cluster.workers).all()
    assert fig8["miss_rate"].between(0, 1).all()
    for policy, part in fig8.groupby("policy"):  # a larger cache misses less
        assert part.sort_values("cache_ratio")["miss_rate"].is_monotonic_decreasing, policy
    same = fig8[(fig8["policy"] == cfg.cache.policy) & (fig8["cache_ratio"] == cfg.cache.ratio)]
    at8 = cache[cache["workers"] == cfg.cluster.workers]
    assert len(same) == 1 and same["miss_rate"].tolist() == at8["miss_rate"].tolist()
    fig9 = pd.read_csv(out / "fig9_workers.csv")
    first = fig9[fig9["workers"] == min(exp.workers)]
    assert (first["speedup"] == 1).all()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["cache_clock"] == HET_CLOCK and summary["samples"] == exp.samples
    resources = json.loads((out / "resources.json").read_text())
    assert len(resources["replays"]) == len(counts)
    assert all(r["peak_rss_gb"] > 0 for r in resources["replays"])
