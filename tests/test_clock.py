"""The emulated clock: overlap, software cost, calibrated compute, time to target, clock units."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.training import MODEL, toy_data
from workbench.cluster.cache import C_INDEX, COUNTERS, CacheSpec, ParameterServer, WorkerCache
from workbench.cluster.calibration import Calibration, compute_key
from workbench.cluster.config import CacheConfig, ClusterConfig
from workbench.cluster.dense_sync import MIB, DenseSync, ring_seconds
from workbench.cluster.time_model import ComputeCost, Links, SoftwareCost, time_model
from workbench.experiments import calibrate
from workbench.experiments.config import ExperimentsConfig
from workbench.models.config import ModelConfig
from workbench.training import clock
from workbench.training.components import ClusterSetup, ModelSpec, SystemSpec
from workbench.training.metrics import time_to_target
from workbench.training.trainer import Trainer
from workbench.utils.validation import ConfigError

SOFTWARE = SoftwareCost(client_message_s=50e-6, client_row_s=0.1e-6, server_message_s=40e-6,
                        server_row_s=0.2e-6, source="test")


def _counters(workers: int = 4, unique: int = 500, pulled: int = 300,
              pushed: int = 200, iterations: int = 1) -> np.ndarray:
    counters = np.zeros((iterations, workers, len(COUNTERS)), dtype=np.int64)
    counters[..., C_INDEX["unique_read"]] = unique
    counters[..., C_INDEX["miss_pulls"]] = pulled
    counters[..., C_INDEX["bound_pushes"]] = pushed
    return counters


def _links(overlap: str = "none", bandwidth: float = 1.0, software: SoftwareCost = SOFTWARE,
           workers: int = 4, shards: int = 2) -> Links:
    cfg = ClusterConfig(workers=workers, bandwidth_gbps=[bandwidth], latency_ms=[0.1],
                        ps_shards=shards, ps_bandwidth_gbps=bandwidth, overlap=overlap)
    return Links.from_config(cfg, software)


def test_software_cost_per_message_and_row_by_hand() -> None:
    """Two messages (read, push) per worker, each paying latency + client cost; rows pay."""
    dim, workers = 16, 4
    t = time_model(_counters(workers), _links(shards=workers * 100), dim)
    nbytes = 16 * 500 + 64 * 300 + (64 + 16) * 200
    rows = 500 + 300 + 200
    link = 3 * 1e-4 + 2 * 50e-6 + nbytes / 125e6 + rows * 0.1e-6  # a read: a round trip
    server = workers * nbytes / (workers * 100 * 125e6) + (
        workers * 2 * 40e-6 + workers * rows * 0.2e-6) / (workers * 100)
    assert t["messages"][0, 0] == 2
    assert t["comm_s"][0, 0] == pytest.approx(max(link, server))
    # the servers' software cost is shared by all workers: with one shard it dominates
    one = time_model(_counters(workers), _links(shards=1, bandwidth=100.0), dim)
    server_one = workers * nbytes / 12.5e9 + workers * (2 * 40e-6 + rows * 0.2e-6)
    assert one["comm_s"][0, 0] == pytest.approx(server_one)


def test_prefetch_fuses_messages_and_hides_communication() -> None:
    dim = 16
    counters = _counters()
    none = time_model(counters, _links("none"), dim, compute_s=0.5)
    pre = time_model(counters, _links("prefetch"), dim, compute_s=0.5)
    assert none["messages"][0, 0] == 2 and pre["messages"][0, 0] == 1
    assert pre["comm_s"][0, 0] < none["comm_s"][0, 0]  # one latency and message cost fewer
    assert none["step_s"][0, 0] == pytest.approx(0.5 + none["comm_s"][0, 0])
    assert pre["step_s"][0, 0] == pytest.approx(0.5)  # compute-bound: comm fully hidden
    short = time_model(counters, _links("prefetch"), dim, compute_s=1e-6)
    assert short["step_s"][0, 0] == pytest.approx(short["comm_s"][0, 0])  # comm-bound


def test_bandwidth_changes_the_communication_share_not_just_its_scale() -> None:
    """Latency and software cost do not shrink with bandwidth: 10 Gb/s is not 1 Gb/s / 10."""
    counters = _counters(iterations=3)
    shares, comm = {}, {}
    for bw in (1.0, 10.0):
        t = time_model(counters, _links("prefetch", bw), 16, compute_s=3e-4)
        comm[bw] = float(t["comm_s"].sum())
        shares[bw] = 1 - 3 * 3e-4 / float(t["step_s"][:, 0].sum())
    assert shares[1.0] != pytest.approx(shares[10.0], abs=0.05)
    assert comm[10.0] > 1.5 * comm[1.0] / 10  # not a rescaled copy


def test_compute_cost() -> None:
    cost = ComputeCost(1e-3, 2e-5, "test")
    np.testing.assert_allclose(cost.seconds(100, np.array([1.0, 0.5])), [3e-3, 6e-3])
    assert cost.seconds(0) == 0.0
    assert ComputeCost.from_flops(2e9, 20.0).per_sample_s == pytest.approx(0.1)
    with pytest.raises(ValueError, match="per_sample_s"):
        ComputeCost(0.0, -1.0, "bad")
    with pytest.raises(ValueError, match="client_row_s"):
        SoftwareCost(client_row_s=math.nan)
    assert "ms/sample" in cost.describe() and "us/msg" in SOFTWARE.describe()


def _tiny_trainer(overlap: str, software: SoftwareCost | None,
                  dense_mode: str = "after_backward") -> Trainer:
    _, _, rows = toy_data(512)
    cluster = ClusterConfig(workers=4, overlap=overlap, bandwidth_gbps=[1.0],
                            dense_mode=dense_mode, bucket_mb=0.01,  # type: ignore[arg-type]
                            first_bucket_mb=0.005)
    return Trainer(ModelSpec(MODEL, 13, 26, rows), SystemSpec("Cache s=10", "cache", 10),
                   ClusterSetup(cluster, CacheConfig(policy="lru", ratio=0.05),
                                ComputeCost(1e-3, 1e-4, "test"), software), seed=3)


def test_prefetch_trains_identical_parameters_in_less_emulated_time() -> None:
    train, test, _ = toy_data(512)
    runs = {o: _tiny_trainer(o, SOFTWARE) for o in ("none", "prefetch")}
    metrics = {o: t.fit(train, test, eval_every=3) for o, t in runs.items()}
    for p, q in zip(runs["none"].model.parameters(), runs["prefetch"].model.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=0)
    np.testing.assert_array_equal(runs["none"].store.table(), runs["prefetch"].store.table())
    pd.testing.assert_series_equal(metrics["none"]["test_auc"], metrics["prefetch"]["test_auc"])
    assert runs["prefetch"].elapsed_s < runs["none"].elapsed_s
    assert runs["prefetch"].compute_s == runs["none"].compute_s


def test_time_to_target_interpolates_between_evaluations() -> None:
    metrics = pd.DataFrame({"test_auc": [0.6, 0.7, 0.8], "time_s": [10.0, 20.0, 30.0],
                            "iteration": [5, 10, 15]})
    assert time_to_target(metrics, 0.75) == pytest.approx(25.0)
    assert time_to_target(metrics, 0.7) == pytest.approx(20.0)
    assert time_to_target(metrics, 0.55) == pytest.approx(5.0)  # from (0 s, AUC 0.5)
    assert time_to_target(metrics, 0.75, "iteration") == pytest.approx(12.5)
    assert math.isnan(time_to_target(metrics, 0.9))
    # a slower system crossing at the same evaluation gets a later time
    slow = metrics.assign(time_s=metrics["time_s"] * 2)
    assert time_to_target(slow, 0.75) == pytest.approx(2 * time_to_target(metrics, 0.75))


@pytest.mark.parametrize("clock, expected", [("update", 3), ("iteration", 1)])
def test_clock_unit_counts_occurrences_or_iterations(clock: str, expected: int) -> None:
    server = ParameterServer(np.zeros((10, 2), np.float32))
    cache = WorkerCache(CacheSpec("lru", 4, read_bound=100, write_bound=100, clock=clock),
                        server)
    keys = np.array([3, 3, 3, 5])
    cache.read(keys)
    cache.write(keys, 0.5)
    assert cache.line(3)["updates"] == expected and cache.line(5)["updates"] == 1
    cache.flush()
    assert server.versions[3] == expected
    np.testing.assert_allclose(server.values[3], [1.5, 1.5])  # the values never change
    with pytest.raises(ValueError, match="clock"):
        CacheSpec("lru", 4, 1, 1, clock="hour")


def _shape(dim: int = 8) -> clock.ModelShape:
    return clock.ModelShape("wdl", dataclasses.replace(MODEL, embedding_dim=dim), 13, 26)


def test_calibrate_writes_a_file_the_clock_reads(tmp_path: Path) -> None:
    from workbench.experiments.config import CalibrationConfig

    exp = CalibrationConfig(batch_sizes=[4, 8], repeats=1, warmup=0, software_sizes=[1, 8])
    out = tmp_path / "calibration"
    written = calibrate.run(out, exp, shapes=[_shape(), _shape()], wire_dims=[8], seed=0)
    loaded = Calibration.load(out)
    assert loaded.to_dict() == json.loads((out / "calibration.json").read_text())
    assert list(loaded.compute) == [compute_key("wdl", 8, 13, 26)] == list(written.compute)
    cluster = ClusterConfig()
    compute, software = clock.clock_costs(cluster, out, _shape())
    assert compute.per_sample_s >= 0 and compute.per_batch_s >= 0
    assert "calibrated" in compute.source and software.client_message_s >= 0
    # explicit and off software, FLOP compute: no calibration needed
    other = dataclasses.replace(cluster, compute="flops", software="explicit",
                                client_message_us=7.0)
    compute, software = clock.clock_costs(other, tmp_path / "missing", _shape())
    assert "FLOP" in compute.source and software.client_message_s == pytest.approx(7e-6)
    # one run, one file: recalibrating replaces it whole (machine and settings included)
    calibrate.run(out, exp, shapes=[_shape(16)], wire_dims=[16], seed=0)
    assert set(Calibration.load(out).compute) == {_shape(16).key}
    off = dataclasses.replace(other, software="off")
    assert clock.clock_costs(off, tmp_path / "missing", _shape())[1] == SoftwareCost(
        source="off")


def test_an_own_calibration_keeps_what_another_profile_measured(tmp_path: Path) -> None:
    """Issue 68: calibrating one's own data under one profile, then under another (a model of
    another configuration, another width) used to replace the first run's file, so the first
    profile's next stage failed again. An own calibration keeps the earlier entries; the
    pipeline's (``keep_earlier`` off) is still replaced whole."""
    from workbench.experiments.config import CalibrationConfig

    exp = CalibrationConfig(batch_sizes=[4, 8], repeats=1, warmup=0, software_sizes=[1, 8])
    first = _shape()
    second = clock.ModelShape("wdl", dataclasses.replace(first.model, deep_mlp=[32]), 13, 26)
    wider = _shape(16)
    own = tmp_path / "calibrate" / "mine"
    calibrate.run(own, exp, shapes=[first], wire_dims=[8], seed=0, keep_earlier=True)
    calibrate.run(own, exp, shapes=[second, wider], wire_dims=[16], seed=0, keep_earlier=True)
    cal = Calibration.load(own)
    for shape in (first, second, wider):  # every configuration measured so far is read
        assert cal.compute_cost(shape.key, clock.fingerprint(shape.model)).per_sample_s >= 0
    assert set(cal.software) == {"D8", "D16"}
    assert [e["fingerprint"] for e in cal.kept[first.key]] == [clock.fingerprint(first.model)]
    # the first configuration again: it is current, the second kept; nothing is duplicated
    calibrate.run(own, exp, shapes=[first], wire_dims=[8], seed=0, keep_earlier=True)
    again = Calibration.load(own)
    assert again.compute[first.key]["fingerprint"] == clock.fingerprint(first.model)
    assert [e["fingerprint"] for e in again.kept[first.key]] == [clock.fingerprint(second.model)]
    pipeline = tmp_path / "calibration"
    calibrate.run(pipeline, exp, shapes=[first], wire_dims=[8], seed=0)
    calibrate.run(pipeline, exp, shapes=[second], wire_dims=[8], seed=0)
    assert "kept" not in json.loads((pipeline / "calibration.json").read_text())
    with pytest.raises(ConfigError, match="different model configuration"):
        Calibration.load(pipeline).compute_cost(first.key, clock.fingerprint(first.model))


def test_a_picked_dataset_reads_its_own_calibration_else_the_pipelines(tmp_path: Path) -> None:
    from workbench.cluster.calibration import calibration_dir, own_dir, pipeline_dir

    assert calibration_dir(tmp_path) == pipeline_dir(tmp_path) == tmp_path / "calibration"
    assert calibration_dir(tmp_path, "own") == pipeline_dir(tmp_path)  # none of its own yet
    own = own_dir(tmp_path, "own")
    own.mkdir(parents=True)
    (own / "calibration.json").write_text("{}")
    assert calibration_dir(tmp_path, "own") == own == tmp_path / "calibrate" / "own"
    assert calibration_dir(tmp_path) == pipeline_dir(tmp_path)  # a pipeline run never reads it
    with pytest.raises(ConfigError, match="dataset.name"):
        own_dir(tmp_path, "../calibration")


def test_calibration_errors_name_the_stage(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="calibrate"):
        clock.clock_costs(ClusterConfig(), tmp_path, _shape())
    entry = {"fingerprint": clock.fingerprint(_shape().model), "per_batch_s": 1e-3,
             "per_sample_s": 1e-5}
    cal = Calibration(tmp_path, compute={_shape().key: entry},
                      software={"D8": dict(client_message_s=1e-5, client_row_s=0.0,
                                           server_message_s=1e-5, server_row_s=0.0)})
    assert cal.compute_cost(_shape().key, entry["fingerprint"]).per_batch_s == 1e-3
    changed = dataclasses.replace(_shape().model, deep_mlp=[32])
    with pytest.raises(ConfigError, match="different model configuration"):
        cal.compute_cost(_shape().key, clock.fingerprint(changed))
    # learning rates and the batch do not change a step's compute
    same = dataclasses.replace(_shape().model, lr_dense=0.5, batch_size=7)
    assert clock.fingerprint(same) == entry["fingerprint"]
    with pytest.raises(ConfigError, match="no compute timing"):
        cal.compute_cost("dcn/D8/dense13/sparse26", entry["fingerprint"])
    with pytest.raises(ConfigError, match="no software cost for D = 16"):
        cal.software_cost(16)
    (tmp_path / "calibration.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not a calibration file"):
        Calibration.load(tmp_path)


def test_required_covers_every_timed_model() -> None:
    models = {"wdl": MODEL, "dcn": dataclasses.replace(MODEL, name="dcn")}
    exps = ExperimentsConfig()
    exps = dataclasses.replace(
        exps, het_train=dataclasses.replace(exps.het_train, model="wdl"),
        het_time=dataclasses.replace(exps.het_time, models=["wdl", "dcn"], fig2_dim=32,
                                     dim_sweep=[8, 64]),
        esd=dataclasses.replace(exps.esd, train_model="wdl"))
    shapes, dims = calibrate.required(models, exps, {"a": (13, 26), "b": (5, 3)},
                                      {"het_train": "a", "het_time": "a", "esd": "b"})
    keys = sorted(s.key for s in shapes)
    assert keys == sorted(["wdl/D8/dense13/sparse26", "wdl/D8/dense5/sparse3",
                           "wdl/D32/dense13/sparse26", "dcn/D8/dense13/sparse26",
                           "dcn/D32/dense13/sparse26", "wdl/D64/dense13/sparse26"])
    assert dims == [8, 32, 64]
    assert isinstance(models["wdl"], ModelConfig)


# ------------------------------------------------------------------------------------------
# Dense synchronisation modes (workbench.cluster.dense_sync)
# ------------------------------------------------------------------------------------------

def test_ring_pays_the_slowest_step_two_w_minus_one_times() -> None:
    """Ring of 4 workers: 6 steps, each the slowest link's latency + message + bytes/(W B)."""
    bw = np.array([1e8, 1e8, 5e7, 1e8])
    lat = np.array([1e-3, 2e-3, 1e-3, 1e-3])
    nbytes = 4e6
    step = max(1e-3 + 1e-5 + 1e6 / 1e8, 2e-3 + 1e-5 + 1e6 / 1e8, 1e-3 + 1e-5 + 1e6 / 5e7)
    assert ring_seconds(nbytes, bw, lat, 1e-5) == pytest.approx(6 * step)
    assert ring_seconds(nbytes, bw[:1], lat[:1]) == 0.0  # one worker: nothing to reduce
    assert ring_seconds(0.0, bw, lat) == 0.0


def test_ddp_buckets_first_one_mib_then_bucket_cap() -> None:
    sync = DenseSync("overlapped", bucket_mb=2.0, first_bucket_mb=1.0)
    np.testing.assert_array_equal(sync.buckets(5.5 * MIB), [MIB, 2 * MIB, 2 * MIB, 0.5 * MIB])
    np.testing.assert_array_equal(sync.buckets(0.5 * MIB), [0.5 * MIB])
    np.testing.assert_array_equal(DenseSync("after_backward").buckets(5.5 * MIB), [5.5 * MIB])


def test_overlapped_schedule_by_hand() -> None:
    """Two workers (one ring step each way: 2 steps), buckets of 1 and 3 MiB, backward 10 ms.

    Bucket 0 is ready 7.5 ms before the end of backward and takes 2 x (1 ms + 1 MiB / 2 /
    1e9 B/s); bucket 1 is ready at the end and starts when both it and bucket 0 are done."""
    bw, lat = np.full(2, 1e9), np.full(2, 1e-3)
    sync = DenseSync("overlapped", bucket_mb=3.0, first_bucket_mb=1.0)
    ring0 = 2 * (1e-3 + MIB / 2 / 1e9)
    ring1 = 2 * (1e-3 + 3 * MIB / 2 / 1e9)
    total, exposed = sync.seconds(4 * MIB, bw, lat, 0.0, np.array([10e-3]))
    f0 = -10e-3 + 10e-3 * 0.25 + ring0
    f1 = max(0.0, f0) + ring1
    assert total[0] == pytest.approx(ring0 + ring1)
    assert exposed[0] == pytest.approx(f1)
    # a long backward hides bucket 0 entirely; no backward hides nothing
    _, long = sync.seconds(4 * MIB, bw, lat, 0.0, np.array([1.0]))
    assert long[0] == pytest.approx(ring1)
    _, none = sync.seconds(4 * MIB, bw, lat, 0.0, np.array([0.0]))
    assert none[0] == pytest.approx(ring0 + ring1)


@settings(max_examples=60, deadline=None)
@given(dense_mb=st.floats(0.01, 200.0), bucket_mb=st.floats(0.05, 50.0),
       first_mb=st.floats(0.05, 5.0), backward_ms=st.floats(0.0, 500.0),
       latency_ms=st.floats(0.0, 20.0), workers=st.integers(2, 16))
def test_overlapped_never_exceeds_after_backward(dense_mb: float, bucket_mb: float,
                                                 first_mb: float, backward_ms: float,
                                                 latency_ms: float, workers: int) -> None:
    """Exposed <= the same buckets all-reduced after backward; without per-step cost <= one
    flat AllReduce; one bucket = the flat AllReduce exactly."""
    bw = np.linspace(1e7, 1e9, workers)
    lat = np.full(workers, latency_ms * 1e-3)
    sync = DenseSync("overlapped", bucket_mb=bucket_mb, first_bucket_mb=first_mb)
    nbytes, b = dense_mb * MIB, np.array([backward_ms * 1e-3])
    total, exposed = sync.seconds(nbytes, bw, lat, 1e-5, b)
    assert 0.0 <= exposed[0] <= total[0] * (1 + 1e-12)
    flat = ring_seconds(nbytes, bw, np.zeros(workers))
    _, free = sync.seconds(nbytes, bw, np.zeros(workers), 0.0, b)
    assert free[0] <= flat * (1 + 1e-9)
    one = DenseSync("overlapped", bucket_mb=1e5, first_bucket_mb=1e5)
    _, single = one.seconds(nbytes, bw, lat, 1e-5, b)
    assert single[0] == pytest.approx(ring_seconds(nbytes, bw, lat, 1e-5))


def test_time_model_dense_modes() -> None:
    """after_backward adds the flat ring; overlapped hides part behind the gating worker's
    backward; ps moves the dense bytes into each worker's PS exchange."""
    dim, dense = 16, 3 * MIB
    counters = _counters()
    compute = np.array([[0.02, 0.01, 0.01, 0.01]])
    runs = {}
    for mode in ("after_backward", "overlapped", "ps"):
        cfg = ClusterConfig(workers=4, bandwidth_gbps=[1.0], latency_ms=[0.1], ps_shards=4,
                            overlap="none", dense_mode=mode, bucket_mb=1.0,
                            first_bucket_mb=1.0, backward_share=0.5)
        software = dataclasses.replace(SOFTWARE, collective_step_s=7e-6)
        runs[mode] = time_model(counters, Links.from_config(cfg, software), dim, compute,
                                dense)
    flat = ring_seconds(dense, np.full(4, 1.25e8), np.full(4, 1e-4), 7e-6)
    after, over, ps = runs["after_backward"], runs["overlapped"], runs["ps"]
    assert after["dense_s"][0, 0] == pytest.approx(flat)
    assert after["step_s"][0, 0] == pytest.approx(after["iter_s"].max() + flat)
    # overlapped: three 1 MiB buckets behind worker 0's 10 ms of backward
    ring = ring_seconds(MIB, np.full(4, 1.25e8), np.full(4, 1e-4), 7e-6)
    b = 0.5 * 0.02
    finish = -np.inf
    for share in (1 / 3, 2 / 3, 1.0):
        finish = max(-b + b * share, finish) + ring
    assert over["dense_total_s"][0, 0] == pytest.approx(3 * ring)
    assert over["dense_s"][0, 0] == pytest.approx(max(finish, 0.0))
    assert over["step_s"][0, 0] <= after["step_s"][0, 0] + 3 * ring - flat + 1e-12
    # ps: no collective; the dense bytes travel in the PS exchange (one message more each way)
    assert ps["dense_s"][0, 0] == 0.0 and ps["dense_total_s"][0, 0] == 0.0
    assert ps["messages"][0, 0] == after["messages"][0, 0] + 1  # the dense push
    assert ps["comm_s"][0, 0] > after["comm_s"][0, 0] + 2 * dense / 1.25e8 - 1e-9


def test_concurrent_step_by_hand() -> None:
    """HET's Fig. 5: the ring starts when the gating worker's backward ends and runs beside the
    write (none) or the prefetched exchange (prefetch); on a shared link both queue."""
    compute = np.array([[0.018, 0.014]])
    comm, write = np.array([[0.012, 0.006]]), np.array([[0.005, 0.004]])
    ring = 0.010
    shared, separate = DenseSync("concurrent"), DenseSync("concurrent", link="separate")
    # 8 MB over 1 GB/s links, 2 workers: 2 (W - 1) / W x 8e6 / 1e9 = 8 ms on each own link;
    # none on a separate path
    wire, nowire = (sync.own_link_wire(8e6, np.full(2, 1e9)) for sync in (shared, separate))
    np.testing.assert_allclose(wire, [0.008, 0.008])
    assert (nowire == 0).all()
    iteration = compute + comm  # none: read, compute, write
    # the write starts at 0.025 and 0.016: the ring at E = 0.025, done at 0.035; on a shared
    # link worker 0's write and its 8 ms of ring bytes end no earlier than 0.030 + 0.008
    assert separate.concurrent_step(iteration, comm, write, compute, False, ring, nowire)[0, 0] \
        == pytest.approx(0.035)
    assert shared.concurrent_step(iteration, comm, write, compute, False, ring, wire)[0, 0] \
        == pytest.approx(0.038)
    # prefetch, worker 0 communication-bound (25 ms against 18 ms of compute): the next forward
    # waits for max(rows 0.025, ring 0.018 + 0.010); shared adds the ring's bytes to the rows'
    comm = np.array([[0.025, 0.006]])
    iteration = np.maximum(compute, comm)
    assert separate.concurrent_step(iteration, comm, write, compute, True, ring, nowire)[0, 0] \
        == pytest.approx(0.028)
    assert shared.concurrent_step(iteration, comm, write, compute, True, ring, wire)[0, 0] \
        == pytest.approx(0.033)  # after_backward: 0.025 + 0.010


def test_time_model_concurrent_splits_the_read_from_the_write() -> None:
    """The write after backward is the exchange less the read's round trip (2 latencies, a
    message, 16 B a key and a row each pulled, the rows' client cost)."""
    dim, dense, counters = 16, 3 * MIB, _counters()
    compute = np.array([[0.02, 0.01, 0.01, 0.01]])
    runs = {}
    for mode in ("after_backward", "concurrent"):
        cfg = ClusterConfig(workers=4, bandwidth_gbps=[1.0], latency_ms=[0.1], ps_shards=4,
                            overlap="none", dense_mode=mode)
        runs[mode] = time_model(counters, Links.from_config(cfg, SOFTWARE), dim, compute, dense)
    after, conc = runs["after_backward"], runs["concurrent"]
    read = 2e-4 + 50e-6 + (16 * 500 + 4 * dim * 300) / 1.25e8 + 0.1e-6 * 800
    write = conc["comm_s"][0] - read
    ring = ring_seconds(dense, np.full(4, 1.25e8), np.full(4, 1e-4))
    wire = 2 * 3 / 4 * dense / 1.25e8
    step = max((conc["iter_s"][0] + wire).max(), (conc["iter_s"][0] - write).max() + ring)
    assert conc["step_s"][0, 0] == pytest.approx(step)
    assert conc["dense_s"][0, 0] == pytest.approx(step - conc["iter_s"][0].max())
    assert conc["dense_total_s"][0, 0] == pytest.approx(ring) == after["dense_total_s"][0, 0]
    assert conc["step_s"][0, 0] < after["step_s"][0, 0]
    # a separate peer path: the ring at its own bandwidth and latency
    cfg = ClusterConfig(workers=4, bandwidth_gbps=[1.0], latency_ms=[0.1], ps_shards=4,
                        overlap="none", dense_mode="concurrent", dense_link="separate",
                        peer_bandwidth_gbps=8.0, peer_latency_ms=0.01)
    sep = time_model(counters, Links.from_config(cfg, SOFTWARE), dim, compute, dense)
    assert sep["dense_total_s"][0, 0] == pytest.approx(
        ring_seconds(dense, np.full(4, 1e9), np.full(4, 1e-5)))


@settings(max_examples=60, deadline=None)
@given(dense_mb=st.floats(0.0, 50.0), bandwidth=st.floats(0.05, 10.0),
       latency_ms=st.floats(0.0, 5.0), overlap=st.sampled_from(["none", "prefetch"]),
       compute=st.lists(st.floats(0.0, 0.2), min_size=2, max_size=6),
       unique=st.integers(0, 5000), pushed=st.integers(0, 3000))
def test_concurrent_is_between_no_dense_and_after_backward(
        dense_mb: float, bandwidth: float, latency_ms: float, overlap: str,
        compute: list[float], unique: int, pushed: int) -> None:
    """No dense sync <= separate <= shared <= after_backward on the same links (the peer path
    as fast as the workers' own); nothing to reduce gives the step without dense sync."""
    workers = len(compute)
    counters = _counters(workers, unique, unique // 2, pushed)
    steps = {}
    for name, mode, link in (("after", "after_backward", "shared"), ("shared", "concurrent",
                             "shared"), ("separate", "concurrent", "separate")):
        cfg = ClusterConfig(workers=workers, bandwidth_gbps=[bandwidth], latency_ms=[latency_ms],
                            overlap=overlap, dense_mode=mode, dense_link=link,
                            peer_bandwidth_gbps=bandwidth, peer_latency_ms=latency_ms)
        links = Links.from_config(cfg, SOFTWARE)
        run = time_model(counters, links, 8, np.array([compute]), dense_mb * MIB)
        steps[name] = run["step_s"][0, 0]
        bare = run["iter_s"].max()
        if dense_mb == 0.0 or workers == 1:
            assert steps[name] == pytest.approx(bare)
    tol = 1 + 1e-12
    assert bare <= steps["separate"] * tol
    assert steps["separate"] <= steps["shared"] * tol
    assert steps["shared"] <= steps["after"] * tol


def test_dense_mode_config_is_validated() -> None:
    from workbench.config import load
    with pytest.raises(ConfigError, match="cluster.backward_share = 1.5"):
        load(["cluster.backward_share=1.5"])
    with pytest.raises(ConfigError, match="cluster.dense_mode"):
        load(["cluster.dense_mode=ring"])
    with pytest.raises(ConfigError, match="cluster.dense_link"):
        load(["cluster.dense_link=nvlink"])
    with pytest.raises(ConfigError, match="cluster.peer_bandwidth_gbps = 0"):
        load(["cluster.peer_bandwidth_gbps=0"])
    cfg = load(["cluster.dense_mode=overlapped", "cluster.bucket_mb=4"])
    assert cfg.cluster.dense_sync() == DenseSync("overlapped", 4.0, 1.0, 0.667)


@pytest.mark.parametrize("mode", ["after_backward", "overlapped", "ps"])
def test_reclock_reproduces_the_trained_runs_clock(mode: str) -> None:
    """Clocking a run's history again in its own mode gives its emulated time exactly; the
    training itself (AUC, parameters) does not depend on the mode."""
    from workbench.cluster.edge_cluster import reclock

    train, test, _ = toy_data(512)
    trainer = _tiny_trainer("prefetch", SOFTWARE, dense_mode=mode)
    metrics = trainer.fit(train, test, eval_every=3)
    assert trainer.cluster is not None
    clocked = reclock(trainer.cluster.history(), trainer.cluster.links, trainer.dim,
                      trainer.dense_bytes)
    elapsed = clocked["step_s"].cumsum().to_numpy()[metrics["iteration"].to_numpy() - 1]
    np.testing.assert_allclose(elapsed + metrics["decision_s"], metrics["time_s"], rtol=1e-12)
    if mode == "ps":
        assert (clocked["dense_total_s"] == 0).all()
    else:
        assert (clocked["dense_s"] <= clocked["dense_total_s"] + 1e-15).all()
        assert (clocked["dense_total_s"] > 0).all()
