"""The trace-replay command and the cluster's time model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers.reference_het import RefHET
from workbench.cluster.config import CacheConfig, ClusterConfig
from workbench.cluster.edge_cluster import EdgeCluster, cache_capacity, replay, summarize
from workbench.cluster.routes import Routes
from workbench.cluster.time_model import Links
from workbench.replay import main as replay_main
from workbench.utils.paths import REPO_ROOT


def _trace(tmp_path: Path, steps: int = 12, workers: int = 3, keys: int = 7,
           rows: int = 20) -> Path:
    trace = np.random.default_rng(0).zipf(1.5, size=(steps, workers, keys)) % rows
    path = tmp_path / "trace.npy"
    np.save(path, trace.astype(np.int32))
    return path


@pytest.mark.parametrize("policy", ["lru", "lfu", "lfuopt", "none"])
def test_replay_command_matches_the_reference(tmp_path: Path, policy: str) -> None:
    path = _trace(tmp_path)
    out = tmp_path / "out.json"
    replay_main(["cache", "--trace", str(path), "--policy", policy, "--cache-rows", "4",
                 "--read-bound", "1", "--write-bound", "2", "--rows", "20", "--dim", "2",
                 "--out", str(out)])
    result = json.loads(out.read_text())
    trace = np.load(path)
    ref = RefHET(np.zeros((20, 2)), trace.shape[1], policy, 4, 1, 2)
    for step in trace:
        for w, keys in enumerate(step):
            ref.read(w, keys)
            ref.write(w, keys, np.full((len(keys), 2), -0.01))
    assert len(result["workers"]) == 3
    for w, got in enumerate(result["workers"]):
        expected = ref.counters(w)
        assert {k: got[k] for k in expected} == expected
        pulled = expected["miss_pulls"] + expected["stale_pulls"]
        assert got["pull_rows_per_key"] == pytest.approx(pulled / expected["keys_read"])
        if expected["full_unique"]:
            assert got["miss_rate"] == pytest.approx(expected["full_misses"]
                                                     / expected["full_unique"])
    assert result["config"]["policy"] == policy and result["config"]["cache_rows"] == (
        0 if policy == "none" else 4)


def test_replay_command_line_and_errors(tmp_path: Path) -> None:
    path = _trace(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "workbench.replay", "cache", "--trace",
                           str(path), "--bound", "0"], capture_output=True, text=True,
                          cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["config"]["read_bound"] == doc["config"]["write_bound"] == 0
    cases = {
        "missing.npy": "no such file",
        "flat.npy": "expected 3 dimensions",
        "float.npy": "expected integer keys",
        "neg.npy": "key -1 at [step 0, worker 1, position 1]",
    }
    np.save(tmp_path / "flat.npy", np.arange(5))
    np.save(tmp_path / "float.npy", np.zeros((1, 1, 2)))
    np.save(tmp_path / "neg.npy", np.array([[[0, 1], [2, -1]]]))
    for name, message in cases.items():
        proc = subprocess.run([sys.executable, "-m", "workbench.replay", "cache", "--trace",
                               str(tmp_path / name)], capture_output=True, text=True,
                              cwd=REPO_ROOT)
        assert proc.returncode == 2 and message in proc.stderr, (name, proc.stderr)


def test_summary_definitions() -> None:
    counters = np.zeros((1, 18), dtype=np.int64)
    (row,) = summarize(counters)
    assert np.isnan(row["miss_rate"]) and np.isnan(row["pull_rows_per_key"])


def test_time_model_and_records() -> None:
    cfg = ClusterConfig(workers=2, bandwidth_gbps=[1.0, 0.1], latency_ms=[1.0, 2.0],
                        overlap="none")
    cl = EdgeCluster(cfg, CacheConfig(policy="none"), table_rows=10, dim=4)
    cl.read(0, np.array([1, 2, 2]))
    cl.write(0, np.array([1, 2, 2]), 0.5)
    rec = cl.end_iteration(compute_s=np.array([0.01, 0.02]), dense_bytes=1000)
    # worker 0: read = 2 x 1 ms (request and reply) + (2 keys x 16 B + 2 rows x 16 B) / 125e6
    #           B/s; push = 1 ms + 2 x 32 B / ...
    read_s = 2e-3 + (2 * 16 + 2 * 16) / 125e6
    push_s = 1e-3 + 2 * (16 + 16) / 125e6
    assert rec["comm_s"][0] == pytest.approx(read_s + push_s)
    assert rec["comm_s"][1] == 0.0  # worker 1 did nothing
    # the ring: 2 (W - 1) = 2 steps of the slowest link's latency + bytes / (W B)
    allreduce = 2 * max(1e-3 + 500 / 125e6, 2e-3 + 500 / 12.5e6)
    assert rec["step_s"][0] == pytest.approx(max(0.01 + read_s + push_s, 0.02) + allreduce)
    assert rec["pulled_rows"].tolist() == [2, 0] and rec["pushed_rows"].tolist() == [2, 0]
    hist = cl.history()
    assert list(hist["worker"]) == [0, 1] and hist["miss_pulls"].tolist() == [2, 0]
    links = Links.from_config(cfg)
    assert links.allreduce_seconds(0) == 0.0
    assert cache_capacity(CacheConfig(policy="lru", ratio=0.1), 95) == 10
    assert cache_capacity(CacheConfig(policy="lru", rows=7), 95) == 7


def test_bsp_order_hides_same_step_pushes() -> None:
    """With bsp order no worker sees another's step-t push within step t."""
    cfg = ClusterConfig(workers=2)
    trace = np.array([[[5], [5]], [[5], [5]]])
    seq = EdgeCluster(cfg, CacheConfig(policy="lru", rows=4, read_bound=0, write_bound=0),
                      table_rows=8, dim=2)
    bsp = EdgeCluster(cfg, CacheConfig(policy="lru", rows=4, read_bound=0, write_bound=0),
                      table_rows=8, dim=2)
    replay(seq, trace, order="sequential")
    replay(bsp, trace, order="bsp")
    # sequential, step 1: worker 1 reads after worker 0's push -> stale pull in step 1
    assert seq.history().query("iteration == 1")["stale_pulls"].sum() == 2
    assert bsp.history().query("iteration == 1")["stale_pulls"].sum() == 2
    with pytest.raises(ValueError, match="order"):
        replay(seq, trace, order="random")


def test_parameter_server_link_is_shared() -> None:
    """Eight workers pulling through one 1 Gb/s server wait for the server's whole load."""
    from workbench.cluster.cache import C_INDEX, COUNTERS
    from workbench.cluster.time_model import time_model

    counters = np.zeros((1, 8, len(COUNTERS)), dtype=np.int64)
    counters[..., C_INDEX["unique_read"]] = 1000
    counters[..., C_INDEX["miss_pulls"]] = 1000
    links = Links.from_config(ClusterConfig(workers=8, bandwidth_gbps=[10.0], latency_ms=[0.0],
                                            ps_bandwidth_gbps=1.0))
    t = time_model(counters, links, dim=16)
    per_worker = 1000 * (16 + 64)
    assert t["comm_s"][0, 0] == pytest.approx(8 * per_worker / 125e6)  # server-bound
    sharded = Links.from_config(ClusterConfig(workers=8, bandwidth_gbps=[1.0], latency_ms=[0.0],
                                              ps_shards=8, ps_bandwidth_gbps=1.0))
    assert time_model(counters, sharded, dim=16)["comm_s"][0, 0] == pytest.approx(
        per_worker / 125e6)  # link-bound
    with pytest.raises(ValueError, match="allgather with allreduce"):
        time_model(counters, links, 16, routes=Routes("ps", "allgather"))
    with pytest.raises(ValueError, match=r"dense route 'gossip': must be one of \['allreduce'"):
        Routes("gossip")
