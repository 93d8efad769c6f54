"""The distributed backend: shaped links, message framing, the push log, the remote cache
protocol (in threads), and real processes against the emulated cluster (counters, parameters,
failures)."""

from __future__ import annotations

import dataclasses
import os
import queue
import re
import threading
from collections import defaultdict

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.distributed import checked_against_emulator, toy_job, toy_split
from workbench.cluster.cache import COUNTERS, CacheSpec, ParameterServer, WorkerCache
from workbench.cluster.config import ClusterConfig
from workbench.cluster.remote_ps import RemoteCache, serve_parameter_server
from workbench.cluster.shaped_link import ShapedLink
from workbench.cluster.wire import HEADER_BYTES, Message, _frame, _unframe
from workbench.experiments.config import DistributedCheckConfig
from workbench.models.config import ModelConfig
from workbench.training.components import SystemSpec
from workbench.training.distributed import (
    DistributedProcessError,
    DistributedRunError,
    Fault,
    Liveness,
    run_distributed,
)
from workbench.utils.validation import ConfigError

# end to end (real processes: a server, workers and their links): not in make test-fast
pytestmark = pytest.mark.slow

# ------------------------------------------------------------------------------------------
# Shaped link
# ------------------------------------------------------------------------------------------

class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_shaped_link_is_latency_plus_bytes_over_bandwidth_without_burst():
    clock = FakeClock()
    link = ShapedLink(1000.0, latency_s=0.01, clock=clock, sleep=clock.sleep)
    assert link.wait(500) == pytest.approx(0.01 + 0.5)
    assert clock.now == pytest.approx(0.51)
    # back to back: the bucket is empty again after its own wait, the next pays its bytes
    assert link.wait(1000) == pytest.approx(0.01 + 1.0)
    assert link.bytes_sent == 1500 and link.messages == 2


def test_shaped_link_sustains_its_bandwidth_and_refills_burst():
    clock = FakeClock()
    link = ShapedLink(100.0, burst_bytes=50.0, clock=clock, sleep=clock.sleep)
    assert link.wait(50) == 0.0          # a full bucket lets the burst go at once
    assert link.wait(100) == pytest.approx(1.0)
    clock.now += 10.0                     # idle: refills only up to the burst
    assert link.wait(60) == pytest.approx(0.1)
    start = clock.now
    for _ in range(20):
        link.wait(100)
    assert (clock.now - start) / 20 == pytest.approx(1.0, rel=0.05)


def test_shaped_link_delay_reserves_without_sleeping_and_unshaped_is_free():
    clock = FakeClock()
    link = ShapedLink(1000.0, latency_s=0.002, clock=clock, sleep=clock.sleep)
    assert link.delay(1000) == pytest.approx(1.002)
    assert clock.now == 0.0
    free = ShapedLink(float("inf"))
    assert not free.shaped and free.wait(10**9) == 0.0
    assert ShapedLink(float("inf"), latency_s=0.5, sleep=lambda s: None).delay(10) == 0.5
    with pytest.raises(ValueError, match="bandwidth_Bps"):
        ShapedLink(0.0)


def test_a_message_with_its_own_latency_queues_in_the_shared_bucket():
    """A ring sharing a worker's bucket (concurrent, shared link) pays the bucket's debt and
    its own 2 (W - 1) latencies; the push behind it waits for the ring's bytes."""
    clock = FakeClock()
    link = ShapedLink(1000.0, latency_s=0.01, clock=clock, sleep=clock.sleep)
    assert link.delay(500, latency_s=0.06) == pytest.approx(0.5 + 0.06)
    assert link.delay(1000) == pytest.approx(1.5 + 0.01)  # behind the ring's 500 bytes
    assert link.bytes_sent == 1500 and link.messages == 2
    free = ShapedLink(float("inf"), sleep=clock.sleep, clock=clock)
    assert free.wait(10, latency_s=0.2) == pytest.approx(0.2) and clock.now == pytest.approx(0.2)


# ------------------------------------------------------------------------------------------
# Framing
# ------------------------------------------------------------------------------------------

arrays_strategy = st.lists(st.one_of(
    st.lists(st.integers(-2**62, 2**62), max_size=20).map(lambda v: np.array(v, np.int64)),
    st.integers(0, 6).flatmap(lambda n: st.lists(
        st.floats(-1e6, 1e6, width=32), min_size=3 * n, max_size=3 * n)).map(
        lambda v: np.array(v, np.float32).reshape(-1, 3)),
    st.binary(max_size=9).map(lambda b: np.frombuffer(b, np.uint8).copy())), max_size=4)


@given(arrays_strategy, st.integers(0, 9), st.integers(0, 10**6))
@settings(max_examples=60, deadline=None)
def test_frame_round_trip(arrays, op, iteration):
    categories = ["rows", "meta", "dense", "meta"][: len(arrays)]
    header, body, counted = _frame(op, iteration, list(zip(arrays, categories)))
    payload = body.numpy() if body is not None else np.zeros(0, np.uint8)
    message, received = _unframe(3, header.numpy(), payload)
    assert (message.src, message.op, message.iteration) == (3, op, iteration)
    assert len(message.arrays) == len(arrays)
    for sent, got in zip(arrays, message.arrays):
        assert got.dtype == sent.dtype and np.array_equal(got, sent)
    assert dict(received) == dict(counted)
    assert message.nbytes == HEADER_BYTES + sum(a.nbytes for a in arrays)


def test_frame_rejects_what_it_cannot_send():
    with pytest.raises(ValueError, match="cannot be sent"):
        _frame(1, 0, [(np.zeros(3, np.float64), "rows")])
    with pytest.raises(ValueError, match="at most"):
        _frame(1, 0, [(np.zeros(1, np.int64), "meta")] * 5)


# ------------------------------------------------------------------------------------------
# Push log
# ------------------------------------------------------------------------------------------

ops_strategy = st.lists(st.tuples(st.booleans(), st.lists(st.integers(0, 29), min_size=1,
                                                         max_size=12)), min_size=1, max_size=25)


@given(ops_strategy, st.sampled_from(["lru", "lfu", "lfuopt", "none"]), st.integers(0, 3),
       st.integers(1, 8))
@settings(max_examples=60, deadline=None)
def test_push_log_replays_the_server_exactly(ops, policy, bound, capacity):
    """Applying the logged pushes, in order, to the server's old state gives its new state."""
    server = ParameterServer(np.random.default_rng(0).normal(size=(30, 4)))
    cache = WorkerCache(CacheSpec(policy, capacity, bound, bound), server, log_pushes=True)
    rng = np.random.default_rng(1)
    for is_flush, keys in ops:
        keys = np.array(keys, np.int64)
        cache.read(keys)
        values, versions = server.values.copy(), server.versions.copy()
        if is_flush:
            cache.flush()
        else:
            cache.write(keys, rng.normal(size=(len(keys), 4)).astype(np.float32))
        pk, pu, pg = cache.pushes()
        for k, u, g in zip(pk, pu, pg):
            values[k] += g
            versions[k] += u
        assert np.array_equal(values, server.values)
        assert np.array_equal(versions, server.versions)
        assert (pu > 0).all()


def test_pushes_needs_a_logging_cache():
    cache = WorkerCache(CacheSpec("lru", 2, 0, 0), ParameterServer(np.zeros((4, 2))))
    with pytest.raises(RuntimeError, match="log_pushes"):
        cache.pushes()


# ------------------------------------------------------------------------------------------
# The protocol in threads (no torch.distributed): RemoteCache == WorkerCache
# ------------------------------------------------------------------------------------------

class QueueEndpoint:
    """The Endpoint interface over in-process queues (one inbox per rank)."""

    def __init__(self, rank: int, inboxes: dict[int, queue.Queue]) -> None:
        self.rank = rank
        self.inboxes = inboxes
        self.stash: dict[int, list[Message]] = defaultdict(list)
        self.sent = 0

    def send(self, dst, op, iteration, arrays=()):
        arrays = [np.array(a, copy=True) for a, _ in arrays]
        self.sent += 1
        self.inboxes[dst].put(Message(self.rank, op, iteration, arrays))

    def recv(self, src=None):
        if src is not None and self.stash[src]:
            return self.stash[src].pop(0)
        while True:
            message = self.inboxes[self.rank].get(timeout=10)
            if src is None or message.src == src:
                return message
            self.stash[message.src].append(message)

    def flush(self):
        pass

    def close(self):
        pass

    def traffic(self):
        return {"messages_sent": self.sent}


@given(st.lists(st.lists(st.lists(st.integers(0, 39), min_size=1, max_size=10),
                         min_size=2, max_size=2), min_size=1, max_size=12),
       st.sampled_from(["lru", "lfu", "lfuopt", "none"]), st.integers(0, 4),
       st.integers(1, 10))
@settings(max_examples=25, deadline=None)
def test_remote_cache_matches_the_emulated_caches(steps, policy, bound, capacity):
    """Two workers through the message protocol == two WorkerCaches on one server (BSP)."""
    init = np.random.default_rng(2).normal(size=(40, 3)).astype(np.float32)
    spec = CacheSpec(policy, capacity, bound, bound)
    local_server = ParameterServer(init)
    local = [WorkerCache(spec, local_server) for _ in range(2)]
    inboxes = {r: queue.Queue() for r in range(3)}
    result = {}
    server = threading.Thread(target=lambda: result.setdefault("r", serve_parameter_server(
        QueueEndpoint(0, inboxes), init, [1, 2], bound)))
    server.start()
    remote = [RemoteCache(spec, 40, 3, QueueEndpoint(w + 1, inboxes)) for w in range(2)]
    errors = []

    def worker(w: int, reads: list[np.ndarray], grads: list[np.ndarray], out: list) -> None:
        try:
            for keys, g in zip(reads, grads):
                out.append(remote[w].read(keys))
                remote[w].write(keys, g)
            remote[w].flush()
            remote[w].done()
        except Exception as error:  # pragma: no cover - surfaced below
            errors.append(error)

    rng = np.random.default_rng(3)
    reads = [[np.array(s[w], np.int64) for s in steps] for w in range(2)]
    grads = [[rng.normal(size=(len(k), 3)).astype(np.float32) for k in reads[w]]
             for w in range(2)]
    expected = [[], []]
    for t in range(len(steps)):  # the emulator's BSP order: all reads, then all writes
        for w in range(2):
            expected[w].append(local[w].read(reads[w][t]))
        for w in range(2):
            local[w].write(reads[w][t], grads[w][t])
    for c in local:
        c.flush()
    outs = [[], []]
    threads = [threading.Thread(target=worker, args=(w, reads[w], grads[w], outs[w]))
               for w in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    server.join(timeout=30)
    assert not errors
    for w in range(2):
        assert np.array_equal(remote[w].counters, local[w].counters)
        for got, want in zip(outs[w], expected[w]):
            assert np.array_equal(got, want)
    assert np.array_equal(result["r"].values, local_server.values)
    assert np.array_equal(result["r"].versions, local_server.versions)


# ------------------------------------------------------------------------------------------
# Real processes
# ------------------------------------------------------------------------------------------


class _Listeners(threading.Thread):
    """The addresses that this process's descendants listen on, polled while a run goes on."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.seen: set[str] = set()
        self.stop = threading.Event()

    def run(self) -> None:
        import psutil

        me = psutil.Process()
        while not self.stop.wait(0.01):
            for child in me.children(recursive=True):
                try:
                    self.seen |= {c.laddr.ip for c in child.net_connections(kind="inet")
                                  if c.status == psutil.CONN_LISTEN}
                except psutil.Error:
                    continue


def test_two_workers_and_a_server_match_the_emulated_cluster():
    job, train = toy_job(), toy_split()
    listeners = _Listeners()
    listeners.start()
    try:
        real = run_distributed(job, train)
    finally:
        listeners.stop.set()
        listeners.join()
    # the rendezvous store and gloo listen on the loopback only, never on the machine's address
    assert listeners.seen and listeners.seen <= {"127.0.0.1", "::1"}, listeners.seen
    _, check = checked_against_emulator(job, train, real)
    assert check["pulled_rows_emulated"] > 0 and check["pushed_rows_emulated"] > 0
    assert check["table_max_rel_diff"] < 1e-5 and check["dense_max_rel_diff"] < 1e-5
    phases = real.history
    assert len(phases) == job.steps * job.workers
    assert (phases[["pull_s", "compute_s", "allreduce_s", "push_s"]] > 0).all().all()
    # the loss all_reduced with the gradients is the global batch's mean loss
    assert np.isfinite(phases["loss"]).all()


def test_the_hetu_recipe_trains_the_emulated_parameters():
    """Hetu's step (each worker's mean loss, the gradients summed, rows at lr / W with
    149095d's division) in real processes gives the emulated trainer's parameters."""
    job, train = toy_job(steps=3), toy_split()
    job = dataclasses.replace(job, model_cfg=dataclasses.replace(
        job.model_cfg, recipe="hetu", init_scale=0.1, divide_by_workers=True))
    real = run_distributed(job, train)
    _, check = checked_against_emulator(job, train, real)
    assert check["table_max_rel_diff"] < 1e-5 and check["dense_max_rel_diff"] < 1e-5


def test_ddp_overlapped_mode_trains_the_same_parameters_in_buckets():
    """cluster.dense_mode = overlapped: DDP's bucketed reducer (with the summing hook) gives
    the parameters of the emulated run, in several buckets whose collectives overlap
    backward (the exposed part is at most the buckets' total)."""
    job, train = toy_job(steps=4), toy_split()
    job = dataclasses.replace(job, cluster_cfg=dataclasses.replace(
        job.cluster_cfg, dense_mode="overlapped", bucket_mb=1e-4, first_bucket_mb=1e-4))
    real = run_distributed(job, train)
    _, check = checked_against_emulator(job, train, real)
    assert check["table_max_rel_diff"] < 1e-5 and check["dense_max_rel_diff"] < 1e-5
    phases = real.history
    # DDP rebuilds its buckets in the order backward produced the gradients after iteration 0
    assert (phases.loc[phases["iteration"] > 0, "buckets"] > 1).all()
    assert (phases["allreduce_total_s"] > 0).all()
    assert np.isfinite(phases["loss"]).all()


@pytest.mark.parametrize("link", ["shared", "separate"])
def test_concurrent_mode_sums_beside_the_push(link):
    """cluster.dense_mode = concurrent (HET's Fig. 5): the all_reduce runs on the collective
    thread while the worker pushes its rows, on the worker's own shaped link (shared) or a
    peer link of its own (separate): the emulated run's parameters, the collective's own time
    at least the part the worker still waited for after its push."""
    job, train = toy_job(steps=3), toy_split()
    job = dataclasses.replace(job, cluster_cfg=dataclasses.replace(
        job.cluster_cfg, dense_mode="concurrent", dense_link=link, peer_bandwidth_gbps=0.2,
        peer_latency_ms=2.0))
    real = run_distributed(job, train)
    _, check = checked_against_emulator(job, train, real)
    assert check["table_max_rel_diff"] < 1e-5 and check["dense_max_rel_diff"] < 1e-5
    phases = real.history
    assert (phases["allreduce_total_s"] > 0).all() and (phases["buckets"] == 1).all()
    # the ring's 2 (W - 1) = 2 latencies are paid inside the collective, on whichever link
    floor = 2 * (2e-3 if link == "separate" else 0.5e-3)
    assert (phases["allreduce_total_s"] >= floor).all()


def test_ranks_fork_from_a_forkserver_that_imported_torch(monkeypatch):
    """The ranks' parent is a forkserver that imported torch before any rank asked for it (a
    rank then starts without importing it), restarted when the sources change; without a
    forkserver, spawn from this process."""
    import multiprocessing
    import time
    from pathlib import Path

    from workbench.training import rank_server

    ctx, parent = rank_server.rank_context()
    assert ctx.get_start_method() == "forkserver" and parent != os.getpid()
    maps = Path(f"/proc/{parent}/maps")
    end = time.monotonic() + 120
    while "libtorch" not in maps.read_text() and time.monotonic() < end:
        time.sleep(0.2)
    assert "libtorch" in maps.read_text(), "the forkserver never imported torch"
    child = ctx.Process(target=time.sleep, args=(60,))
    child.start()
    try:
        assert Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[1] == \
            str(parent)
    finally:
        child.kill()
        child.join()
    # an edit of the sources since it started: the next launch gets a new forkserver
    assert rank_server.rank_context()[1] == parent
    monkeypatch.setattr(rank_server, "sources_stamp", lambda: (0, 0))
    _, fresh = rank_server.rank_context()
    assert fresh != parent and not Path(f"/proc/{parent}").exists()
    assert rank_server.rank_context()[1] == fresh
    monkeypatch.setattr(rank_server.mp, "get_all_start_methods", lambda: ["spawn"])
    ctx, parent = rank_server.rank_context()
    assert isinstance(ctx, multiprocessing.context.SpawnContext) and parent == os.getpid()


def test_dense_modes_the_backend_cannot_run_are_refused():
    with pytest.raises(ValueError, match="dense_mode = 'ps'"):
        dataclasses.replace(toy_job(), cluster_cfg=dataclasses.replace(toy_job().cluster_cfg,
                                                                    dense_mode="ps"))
    with pytest.raises(ValueError, match="dense_link = separate: the kernel network"):
        dataclasses.replace(toy_job(), network="kernel", cluster_cfg=dataclasses.replace(
            toy_job().cluster_cfg, dense_mode="concurrent", dense_link="separate"))
    with pytest.raises(ValueError, match="first bucket apart only at its defaults"):
        from workbench.training.dense_reducer import DenseReducer
        DenseReducer(torch.nn.Linear(2, 2), None, "overlapped", None, bucket_mb=4.0,
                     first_bucket_mb=2.0)


def test_a_dispatcher_process_decides_like_the_emulated_dispatcher():
    from workbench.cluster.time_model import ComputeCost, SoftwareCost
    from workbench.dispatch.registry import SolverOptions
    from workbench.training.emulator_check import run_emulated

    job, train = toy_job(steps=4, bound=2, dispatcher_options=SolverOptions()), toy_split()
    # the dispatcher compiles LAIA's numba kernels in its first iteration: on a loaded 2-core
    # machine with a cold cache that took over the toy job's 20 s (a fresh clone's CI run)
    job = dataclasses.replace(job, dispatcher="laia", timeout_s=120.0, deadline_s=300.0)
    real = run_distributed(job, train)
    # the emulated trainer builds the job's dispatcher (LAIA) on its own cluster
    emulated = run_emulated(job, train, ComputeCost(0.0, 1e-6, "test"),
                            SoftwareCost(0, 0, 0, 0, "test"))
    assert np.array_equal(emulated.history[list(COUNTERS)].to_numpy(),
                          real.history[list(COUNTERS)].to_numpy())
    assert len(real.server["decision_s"]) == job.steps


@pytest.mark.parametrize("kind, rank, pattern", [
    ("kill", 2, r"^worker 1 \(rank 2, pid \d+\) died \(killed by SIGKILL\)"),
    ("raise", 1, r"^worker 0 \(rank 1, pid \d+\) raised"),
    ("raise", 0, r"^parameter server \(rank 0, pid \d+\) raised"),
])
def test_a_failing_worker_stops_the_run_with_a_clear_error(kind, rank, pattern):
    with pytest.raises(DistributedRunError, match=pattern) as err:
        run_distributed(toy_job(steps=6), toy_split(),
                        fault=Fault(rank=rank, iteration=2, kind=kind))
    # a death is the user's one line; an exception in a process is a bug and keeps its traceback
    assert isinstance(err.value, DistributedProcessError) == (kind == "kill")


@pytest.mark.parametrize("kind, says", [
    ("hang", "was busy in iteration 1 for"),  # sleeps in its own code: its heartbeat goes on
    ("stop", "sent nothing (no heartbeat) for"),  # SIGSTOP: the whole process stands still
])
def test_a_hung_or_stopped_worker_is_named_not_its_peers(kind, says):
    # timeout_s above a healthy rank's longest compute phase on a loaded 2-core CI machine
    job = dataclasses.replace(toy_job(steps=4), timeout_s=8.0, deadline_s=120.0)
    with pytest.raises(DistributedProcessError,
                       match=rf"^worker 0 \(rank 1, pid \d+\) {re.escape(says)}") as err:
        run_distributed(job, toy_split(), fault=Fault(rank=1, iteration=1, kind=kind))
    assert "\n" not in str(err.value) and "timeout_s = 8 s" in str(err.value)


@pytest.mark.parametrize("iteration, says", [
    (-1, "was busy before its first iteration for 9 s"),
    (0, "was busy in iteration 0 for 9 s"),
    (5, "was busy in iteration 5 for 9 s"),
])
def test_a_busy_process_is_not_called_hung_alone(iteration, says):
    """A short timeout_s once reported a dispatcher compiling its kernels as "hangs in its own
    code", with no way out: the message now says it may be working, and how to let it."""
    import types

    from workbench.training.supervision import Supervisor

    view = types.SimpleNamespace(liveness=types.SimpleNamespace(iteration=lambda rank: iteration),
                                 who=lambda rank: "dispatcher (rank 3, pid 7)", timeout_s=2.0,
                                 world=4)
    message = Supervisor._lost_message(view, 3, "busy", 9.0)
    assert message.startswith(f"dispatcher (rank 3, pid 7) {says}")
    assert "or its work between two waits takes longer than timeout_s" in message
    assert ("compiles numba kernels" in message) == (iteration <= 0)
    assert message.endswith("raise timeout_s (e.g. timeout_s=60)")


def _liveness(rows: list[tuple[float, float, float]]) -> Liveness:
    """A launcher's view with (started, beat, busy since) per rank, as the processes write it."""
    liveness = Liveness(len(rows))
    liveness.table[:, :3] = rows
    return liveness


@pytest.mark.parametrize("rows, found", [
    # all beat, the server waits, the workers computed 1 s: nobody is lost
    ([(50, 99.9, 0), (50, 99.9, 99), (50, 99.9, 99)], None),
    # worker 1 stopped while busy: no beat for 19 s, busy for 20 s -> silent, for 19 s
    ([(50, 99.9, 0), (50, 99.9, 0), (50, 81, 80)], (2, "silent", 19.0)),
    # worker 0 hangs in its own code: it beats, busy for 30 s
    ([(50, 99.9, 0), (50, 99.9, 70), (50, 99.9, 0)], (1, "busy", 30.0)),
    # the server stopped 25 s ago holds worker 0 in a send for 28 s: the silent one is named
    ([(50, 75, 0), (50, 99.9, 72), (50, 99.9, 0)], (0, "silent", 25.0)),
    # the dispatcher never started, 21 s after the first process did
    ([(79, 99.9, 0), (80, 99.9, 0), (85, 99.9, 0), (0, 0, 0)], (3, "silent", 21.0)),
    # the server's row read while it was being written (started, no beat yet): it counts from
    # its start (1 s ago), never from the clock's zero (a CI run once named it "silent for
    # 74125 s", the machine's uptime)
    ([(99, 0, 0), (50, 99.9, 99), (50, 99.9, 99)], None),
])
def test_liveness_names_the_process_without_progress(rows, found):
    lost = _liveness(rows).lost(list(range(len(rows))), now=100.0, seconds=10.0)
    if found is None:
        assert lost is None
    else:
        assert lost[:2] == found[:2] and lost[2] == pytest.approx(found[2])


def test_job_validation_names_the_problem():
    job = toy_job()
    with pytest.raises(ValueError, match="distributed backend runs"):
        dataclasses.replace(job, system=SystemSpec("p", "ps"))
    with pytest.raises(ValueError, match="not divisible"):
        dataclasses.replace(job, model_cfg=ModelConfig(batch_size=33))
    with pytest.raises(ValueError, match="fewer than"):
        run_distributed(toy_job(steps=100), toy_split(n=64))


def test_distributed_check_config_errors():
    with pytest.raises(ConfigError, match="must include 0"):
        DistributedCheckConfig(bounds=[5])
    with pytest.raises(ConfigError, match="multiple of workers"):
        DistributedCheckConfig(batch_size=250, esd_workers=4)
    with pytest.raises(ConfigError, match="bandwidth_gbps has 3 values"):
        DistributedCheckConfig(workers=2, bandwidth_gbps=[1.0, 1.0, 1.0])
    with pytest.raises(ConfigError, match="esd_dispatchers"):
        DistributedCheckConfig(esd_dispatchers=["magic"])
    torch.set_num_threads(1)


def test_emulated_only_stages_refuse_the_distributed_backend():
    ClusterConfig().require_emulated("het_train")
    with pytest.raises(ConfigError, match="cluster.backend = distributed: the het_train stage"):
        ClusterConfig(backend="distributed").require_emulated("het_train")
