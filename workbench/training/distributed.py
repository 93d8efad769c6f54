"""The distributed backend: the emulated cluster's training run on real processes.

``cluster.backend = distributed`` runs W + 1 processes (W + 2 with a dispatcher process), gloo
backend, on one of two networks (``DistributedJob.network``):

* ``token_bucket``: every process spawned on this machine (``torch.multiprocessing``) on the
  loopback interface; each link shaped in its sender (:mod:`workbench.cluster.shaped_link`);
* ``kernel``: one node per process on an :class:`~workbench.cluster.edge_network.EdgeNetwork`
  (a network namespace each, veth links the kernel shapes with ``tc``), one ``torchrun`` per
  node joined by torchrun's static rendezvous on the server node (``--nnodes``,
  ``--node-rank``, ``--rdzv-endpoint 192.0.2.1:29500``), no sending is delayed by this code::

    launcher ── EdgeNetwork ── node ps (192.0.2.1):  torchrun ── rank 0
       │                       node w0 (192.0.2.2):  torchrun ── rank 1      gloo over the
       │                       ...                                           kernel-shaped veths
       └─ nameless files: the job and samples, the liveness table, one output per rank
          (each rank opens them as /proc/<launcher>/fd/<n>)

Roles::

    rank 0          parameter server    HET pulls / pushes with per-row versions
                                        (workbench.cluster.remote_ps), one shaped link per worker
    rank 1 .. W     edge worker w-1     RemoteCache (the emulator's cache kernels), the model,
                                        forward + backward on ITS samples, dense gradients
                                        averaged with a real all_reduce (gloo, workers' group)
    rank W + 1      dispatcher          (cost-aware dispatch only) decides each global batch on a
                                        replica of the caches' metadata and sends every worker
                                        its sample positions; runs ahead of the workers, so its
                                        decision time overlaps training for real

One BSP iteration of worker w::

    positions  <- own seeded baseline draw (contiguous | random), or the dispatcher's message
    pull       <- PULL / PULL_REPLY over w's shaped link              (pull_s)
    compute    <- forward + backward of w's samples; a worker of speed s_w < 1 sleeps
                  (1/s_w - 1) x its measured compute                  (compute_s)
    all_reduce <- the dense gradients summed (workbench.training.dense_reducer, in the
                  cluster's dense_mode: after backward, one flat dist.all_reduce; overlapped,
                  DDP's buckets during backward; on the token bucket the sender-shaped ring
                  share 2(W-1)/W x bytes at B_w and 2(W-1) latencies first) (allreduce_s: the
                  part past backward, + the optimizer step; allreduce_total_s: the buckets'
                  collectives)
    push       <- PUSH, wait for the round's ACK (every worker pushed) (push_s: includes the
                  wait for the slowest worker's push)

The model, the table and the dispatch are the emulated trainer's
(:func:`workbench.training.trainer.initial_parameters`, the same seeds), the per-sample loss is the
same (``sum / global batch`` per worker; the dense gradients summed = the batch mean), so the
counters match the emulated run exactly and the parameters within the float tolerance of the
reduction order (:mod:`workbench.experiments.distributed_check` checks both).

Failure (:mod:`workbench.training.supervision`): every collective and point-to-point call times
out after ``timeout_s``. The launcher supervises the processes through a shared table
(:class:`Liveness`): each sends a heartbeat from a
thread of its own and marks the calls in which it waits on a peer. It stops the run (SIGKILL to
every process) and names the process at fault when one

* dies (a signal, an exit code): :class:`DistributedProcessError`;
* sends no heartbeat for ``timeout_s`` (stopped by SIGSTOP or a debugger, frozen): the same;
* stays busy outside any wait on a peer for ``timeout_s`` (hung in its own code): the same;
* raises: :class:`DistributedRunError` with its traceback (a peer that raised because a stopped
  or hung process made it time out is not blamed: the silent one is);

and when the run passes ``deadline_s``. On the kernel network a failure that is not a death is
blamed on the link the kernel shows broken when there is one (down, slower than configured,
bytes queued): ``worker 0 (rank 1, node w0, 192.0.2.2): its link is down``; the launcher
injects the network faults of the tests (:data:`NETWORK_FAULTS`) itself, holding the faulty
rank at the fault's iteration until it is applied. A process that loses its launcher (killed,
even by SIGKILL) is killed by the kernel at once (``PR_SET_PDEATHSIG``; elsewhere its heartbeat
thread notices the new parent), and the processes hand their results back in files that never have a
name (:class:`~workbench.training.supervision.NamelessFile`), so nothing of a run outlives it:
no process, no temporary file.

On machines of your own the same ranks run under ``torchrun`` per machine
(:func:`torchrun_main`, every rank reading the job from a file; ``docs/distributed.md``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from workbench.cluster.cache import COUNTERS, CacheSpec
from workbench.cluster.config import CacheConfig, ClusterConfig
from workbench.cluster.edge_cluster import EdgeCluster, cache_spec
from workbench.cluster.edge_network import (
    EdgeNetwork,
    LinkSpec,
    NetworkSpec,
    NodeSpec,
    read_net_dev,
)
from workbench.cluster.remote_ps import RemoteCache, serve_parameter_server
from workbench.cluster.shaped_link import ShapedLink
from workbench.cluster.time_model import BYTES_PER_FLOAT
from workbench.cluster.wire import Endpoint
from workbench.dispatch.base import BASELINES, BaselineDispatcher, baseline
from workbench.dispatch.registry import DispatcherSpec, SolverOptions
from workbench.models.config import ModelConfig
from workbench.models.ctr import dense_parameter_count
from workbench.training.dense_reducer import REAL_MODES, DenseReducer
from workbench.training.supervision import (
    DirOutput,
    DistributedProcessError,
    DistributedRunError,
    Liveness,
    NamelessFile,
    NodeProcess,
    ProcessDiedError,
    Supervisor,
    die_with_parent,
    write_error,
)
from workbench.training.trainer import (
    Split,
    SystemKind,
    SystemSpec,
    dense_optimizer,
    initial_parameters,
)

__all__ = ["NETWORKS", "DistributedJob", "DistributedProcessError", "DistributedResult",
           "DistributedRunError", "Fault", "Liveness", "run_distributed", "save_job",
           "torchrun_main"]

SERVER_RANK = 0
DISPATCH_OP = 7
BASELINE_DISPATCHERS = BASELINES
SUPPORTED_KINDS = (SystemKind.CACHE, SystemKind.HYBRID)
#: Where the links are shaped: ``token_bucket`` (in each sender, every rank on this machine's
#: loopback) or ``kernel`` (one network namespace per rank, links shaped by ``tc``:
#: :mod:`workbench.cluster.edge_network`, ranks launched by ``torchrun`` per node).
NETWORKS = ("token_bucket", "kernel")
#: Faults the launcher injects into the kernel network (the others are the process's own).
NETWORK_FAULTS = ("link_down", "degrade", "kill_node")
RENDEZVOUS_PORT = 29500  # on the server node's address: a fresh namespace has every port free


@dataclass(frozen=True)
class Fault:
    """A failure injected into one process or its node (tests of the failure handling).

    Attributes:
        rank: the process (0 = server, 1..W = workers).
        iteration: the iteration at whose start it fails (a node fault: once worker 0, or
            ``rank`` if it is a worker, has begun it).
        kind: in the process: ``raise`` (an exception), ``kill`` (SIGKILL to itself), ``hang``
            (sleeps forever: the others time out) or ``stop`` (SIGSTOP to itself: it stops
            beating); on the kernel network (:data:`NETWORK_FAULTS`), by the launcher:
            ``link_down`` (the rank's node loses its link), ``degrade`` (its link drops to
            ``bandwidth_gbps``) or ``kill_node`` (every process of its node is SIGKILLed).
        bandwidth_gbps: the degraded link's rate.
    """

    rank: int
    iteration: int
    kind: str = "raise"
    bandwidth_gbps: float = 1e-5


@dataclass(frozen=True)
class DistributedJob:
    """Everything a distributed run needs (pickled to every process).

    Attributes:
        model_cfg: the model and optimiser (``batch_size`` = the global batch).
        n_dense: dense features.
        n_sparse: categorical features F.
        table_rows: rows of the concatenated table.
        system: ``cache`` (HET cache, bound s) or ``hybrid`` (PS without cache).
        cluster_cfg: workers, links and speeds.
        cache_cfg: cache policy and capacity (bounds come from ``system``).
        steps: iterations to run.
        seed: the run's seed (the emulated trainer's meaning).
        dispatcher: ``contiguous`` / ``random`` (drawn by every worker from the seeded stream)
            or a cost-aware name of :mod:`workbench.dispatch.registry` (dispatcher process).
        force_dispatcher_process: decide even a baseline in the dispatcher process (so that
            baselines and cost-aware dispatchers are timed on the same message path).
        dispatcher_options: the ESD solvers' settings (cost-aware only).
        decision_budget_s: HybridDis' budget per decision (cost-aware only).
        shaped: shape the links (False: unshaped everywhere, for the benchmark).
        network: where the links are shaped (:data:`NETWORKS`).
        timeout_s: timeout of every torch.distributed call.
        deadline_s: the whole run's wall-clock limit.
        capacities: samples per worker per global batch (None: equal shares).
    """

    model_cfg: ModelConfig
    n_dense: int
    n_sparse: int
    table_rows: int
    system: SystemSpec
    cluster_cfg: ClusterConfig
    cache_cfg: CacheConfig
    steps: int
    seed: int = 0
    dispatcher: str = "contiguous"
    dispatcher_options: SolverOptions = field(default_factory=SolverOptions)
    decision_budget_s: float = 0.05
    shaped: bool = True
    timeout_s: float = 60.0
    deadline_s: float = 600.0
    capacities: tuple[int, ...] | None = None
    force_dispatcher_process: bool = False
    network: str = "token_bucket"

    def __post_init__(self) -> None:
        if self.network not in NETWORKS:
            raise ValueError(f"network = {self.network!r}: must be one of {NETWORKS}")
        if self.system.kind not in SUPPORTED_KINDS:
            raise ValueError(f"system {self.system.kind.value!r}: the distributed backend runs "
                             f"{tuple(k.value for k in SUPPORTED_KINDS)} (BSP over a parameter "
                             "server)")
        if self.cluster_cfg.sync != "bsp":
            raise ValueError("cluster.sync must be 'bsp' under the distributed backend")
        if self.model_cfg.batch_size % self.workers and self.capacities is None:
            raise ValueError(f"model.batch_size = {self.model_cfg.batch_size} is not divisible "
                             f"by cluster.workers = {self.workers}")
        if self.steps < 1:
            raise ValueError(f"steps = {self.steps}: must be >= 1")
        if self.cluster_cfg.dense_mode not in REAL_MODES:
            raise ValueError(f"cluster.dense_mode = {self.cluster_cfg.dense_mode!r}: the "
                             f"distributed backend runs {REAL_MODES} (its server holds "
                             "embedding rows only: dense on the parameter server is modelled, "
                             "not run)")

    @property
    def workers(self) -> int:
        """Worker count W."""
        return self.cluster_cfg.workers

    @property
    def has_dispatcher(self) -> bool:
        """Whether a dispatcher process decides the batches."""
        return self.force_dispatcher_process or self.dispatcher not in BASELINE_DISPATCHERS

    @property
    def world_size(self) -> int:
        """Processes: server + workers (+ dispatcher)."""
        return 1 + self.workers + int(self.has_dispatcher)

    @property
    def dispatcher_spec(self) -> DispatcherSpec:
        """The dispatcher's name and settings (checks the name)."""
        return DispatcherSpec(self.dispatcher, self.dispatcher_options)

    def cache_spec(self) -> CacheSpec:
        """The workers' cache (the emulated trainer's: :meth:`SystemSpec.cache_config`)."""
        return cache_spec(self.system.cache_config(self.cache_cfg), self.table_rows)

    def capacity_array(self) -> np.ndarray:
        """Samples of each worker per global batch."""
        if self.capacities is not None:
            return np.asarray(self.capacities, dtype=np.int64)
        return np.full(self.workers, self.model_cfg.batch_size // self.workers, np.int64)


@dataclass
class DistributedResult:
    """A finished distributed run.

    Attributes:
        table: the server's final table (after the workers' flush).
        versions: the server's final row versions.
        dense_state: worker 0's final dense parameters (every worker holds the same).
        history: one row per (iteration, worker): counter deltas, phase seconds (``pull_s``,
            ``compute_s``, ``allreduce_s``, ``push_s`` until the ACK, ``push_wire_s`` from the
            send until the server had the whole push), bytes, kernel counters.
        server: the server's traffic and busy time.
        wall_s: the launcher's wall time from start to the last process's exit.
        startup_s: seconds until every process had joined the process group.
        network: which network ran (``network``: token_bucket | kernel; on the kernel
            network whether latency was applied and its nodes).
    """

    table: np.ndarray
    versions: np.ndarray
    dense_state: dict[str, torch.Tensor]
    history: pd.DataFrame
    server: dict
    wall_s: float
    startup_s: float
    network: dict = field(default_factory=dict)


# ------------------------------------------------------------------------------------------
# Links
# ------------------------------------------------------------------------------------------

def worker_links(cfg: ClusterConfig, shaped: bool) -> list[tuple[float, float]]:
    """Per worker ``(bytes per second, one-way latency s)`` of its link (unshaped: inf, 0)."""
    if not shaped:
        return [(float("inf"), 0.0)] * cfg.workers
    return [(b * 1e9 / 8, lat * 1e-3) for b, lat in zip(cfg.per_worker("bandwidth_gbps"),
                                                        cfg.per_worker("latency_ms"))]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


LOOPBACK = "tcp://127.0.0.1:"


def _loopback_store(init_method: str, rank: int, world_size: int,
                    timeout: timedelta) -> dist.TCPStore | None:
    """The rendezvous store of a run on this machine, listening on 127.0.0.1 only.

    ``init_method=tcp://...`` makes rank 0's ``TCPStore`` listen on every interface (``*:port``)
    whatever host it names; here rank 0 binds the port on the loopback itself and hands the
    listening socket to the store (``master_listen_fd``), so nothing of a local run is reachable
    from the machine's other addresses. ``None`` for any other ``init_method`` (a multi-node run
    the user addressed).
    """
    if not init_method.startswith(LOOPBACK):
        return None
    port = int(init_method[len(LOOPBACK):])
    listen_fd = None
    if rank == 0:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(128)
        listen_fd = sock.detach()
    return dist.TCPStore("127.0.0.1", port, world_size, is_master=rank == 0, timeout=timeout,
                         master_listen_fd=listen_fd)


# ------------------------------------------------------------------------------------------
# Processes
# ------------------------------------------------------------------------------------------

def _maybe_fail(fault: Fault | None, rank: int, iteration: int) -> None:
    if (fault is None or fault.rank != rank or fault.iteration != iteration
            or fault.kind in NETWORK_FAULTS):
        return
    if fault.kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if fault.kind == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
        return
    if fault.kind == "hang":
        while True:
            time.sleep(3600)
    raise RuntimeError(f"injected fault at rank {rank}, iteration {iteration}")


def _role(job: DistributedJob, rank: int) -> str:
    if rank == SERVER_RANK:
        return "parameter server"
    if rank <= job.workers:
        return f"worker {rank - 1}"
    return "dispatcher"


def _entry(rank: int, job: DistributedJob, train: Split | NamelessFile, init_method: str,
           output: NamelessFile | DirOutput, fault: Fault | None,
           liveness: Liveness | None = None, parent_pid: int | None = None) -> None:
    """Body of every process: join the group, run the role, write the result to ``output``.

    ``train`` is the split, or the launcher's file holding it (``{"train": split}``).

    Under the launcher (``liveness`` given) the process dies with its parent (the launcher, or
    its node's torchrun agent), beats, and on an error writes it and exits at once.
    """
    if parent_pid is not None:
        die_with_parent(parent_pid)
    if liveness is not None:
        liveness.start(rank, parent_pid)
    waiting = liveness.waiting if liveness is not None else contextlib.nullcontext
    torch.set_num_threads(1)
    start = time.perf_counter()
    try:
        split = train.read()["train"] if isinstance(train, NamelessFile) else train
        with waiting():
            timeout = timedelta(seconds=job.timeout_s)
            store = _loopback_store(init_method, rank, job.world_size, timeout)
            rendezvous: dict[str, Any] = ({"store": store} if store is not None
                                          else {"init_method": init_method})
            dist.init_process_group("gloo", rank=rank, world_size=job.world_size,
                                    timeout=timeout, **rendezvous)
            workers_group = dist.new_group(list(range(1, job.workers + 1)))
            dist.barrier()
        startup_s = time.perf_counter() - start
        links = worker_links(job.cluster_cfg, job.shaped and job.network == "token_bucket")
        out = _run_role(rank, job, split, links, workers_group, fault,
                        _Hooks(waiting, liveness.at if liveness is not None else None))
        out["startup_s"] = startup_s
        output.write({"out": out})
    except BaseException:
        write_error(output, exiting=liveness is not None)
        raise
    dist.destroy_process_group()


@dataclass(frozen=True)
class _Hooks:
    """What a role reports to its launcher: waits on a peer, the iteration it begins."""

    waiting: Callable[[], contextlib.AbstractContextManager]
    at: Callable[[int], None] | None = None


def _run_role(rank: int, job: DistributedJob, train: Split, links, workers_group,
              fault: Fault | None, hooks: _Hooks) -> dict:
    """Run rank ``rank``'s role; its outputs."""
    if rank == SERVER_RANK:
        return _server(job, links, fault, hooks.waiting)
    if rank <= job.workers:
        return _worker(rank, job, train, links, workers_group, fault, hooks)
    return _dispatcher(job, train, links, hooks.waiting)


def _server(job: DistributedJob, links, fault: Fault | None, waiting) -> dict:
    endpoint = Endpoint({w + 1: ShapedLink(b, lat) for w, (b, lat) in enumerate(links)},
                        shared=(ShapedLink(job.cluster_cfg.ps_bandwidth_gbps * 1e9 / 8)
                                if job.shaped and job.network == "token_bucket" else None),
                        threaded=True, waiting=waiting)
    _, table = initial_parameters(job.model_cfg, job.n_dense, job.n_sparse, job.table_rows,
                                  job.seed)
    result = serve_parameter_server(endpoint, table, list(range(1, job.workers + 1)),
                                    job.cache_spec().read_bound,
                                    on_round=lambda r: _maybe_fail(fault, SERVER_RANK, r))
    return {"values": result.values, "versions": result.versions, "traffic": result.traffic,
            "pulls_served": result.pulls_served, "push_rounds": result.push_rounds,
            "busy_s": result.busy_s, "push_arrivals": result.push_arrivals}


def _positions(job: DistributedJob, own: BaselineDispatcher | None, endpoint: Endpoint,
               worker: int) -> np.ndarray:
    """This worker's sample positions of the next batch: the dispatcher process's message, or
    the worker's own draw of the baseline (``own``, the emulated trainer's seeded stream)."""
    if own is None:
        message = endpoint.recv(job.world_size - 1)
        if message.op != DISPATCH_OP:
            raise RuntimeError(f"expected a dispatch message, got opcode {message.op}")
        return message.arrays[0]
    return np.flatnonzero(own.owners() == worker)


def _worker(rank: int, job: DistributedJob, train: Split, links, group,
            fault: Fault | None, hooks: _Hooks) -> dict:
    w = rank - 1
    waiting = hooks.waiting
    cfg = job.model_cfg
    batch = cfg.batch_size
    bandwidth, latency = links[w]
    workers = job.workers
    endpoint = Endpoint({SERVER_RANK: ShapedLink(bandwidth, latency)}, waiting=waiting)
    cache = RemoteCache(job.cache_spec(), job.table_rows, cfg.embedding_dim, endpoint)
    model, _ = initial_parameters(cfg, job.n_dense, job.n_sparse, job.table_rows, job.seed)
    optimizer = dense_optimizer(cfg, model)
    dense_bytes = BYTES_PER_FLOAT * dense_parameter_count(model)
    ring_bytes = int(2 * (workers - 1) / workers * dense_bytes)  # each way (ring)
    shaped_ring = job.shaped and job.network == "token_bucket"
    reducer = DenseReducer(  # the all_reduce's sender side shaped on the token-bucket network
        model, group, job.cluster_cfg.dense_mode,
        ShapedLink(bandwidth, 2 * (workers - 1) * latency) if shaped_ring else None,
        job.cluster_cfg.bucket_mb, job.cluster_cfg.first_bucket_mb, waiting)
    speed = float(job.cluster_cfg.per_worker("speed")[w])
    # the emulated trainer's dispatch stream, drawn by every worker (no dispatcher process)
    own = None if job.has_dispatcher else baseline(job.dispatcher)(
        workers, job.capacity_array(), job.seed)
    f, dim = job.n_sparse, cfg.embedding_dim
    rows, last = [], cache.counters.copy()
    traffic_last = endpoint.traffic()
    kernel = _KernelCounters(job.network == "kernel")
    kernel_last = kernel.read()
    for step in range(job.steps):
        if hooks.at is not None:
            hooks.at(step)
        _maybe_fail(fault, rank, step)
        t0 = time.perf_counter()
        pos = _positions(job, own, endpoint, w)
        idx = step * batch + pos
        keys = train.keys[idx].ravel()
        t_dispatch = time.perf_counter()
        before = dataclasses.replace(cache.times)
        emb = cache.read(keys).reshape(len(pos), f, dim)
        t1 = time.perf_counter()
        emb_t = torch.from_numpy(emb).requires_grad_(True)
        optimizer.zero_grad(set_to_none=True)

        dense_x, labels = torch.from_numpy(train.dense[idx]), torch.from_numpy(train.labels[idx])
        loss = reducer.forward_backward(functools.partial(_loss, dense=dense_x, emb=emb_t,
                                                          labels=labels, batch=batch),
                                        1.0 / speed - 1.0)
        optimizer.step()
        dense = reducer.timing
        compute_s = dense.compute_s
        allreduce_s = time.perf_counter() - t1 - compute_s
        t3 = time.perf_counter()
        assert emb_t.grad is not None  # emb_t requires grad: backward() set it
        updates = (-cfg.lr_sparse * batch) * emb_t.grad.numpy()
        cache.write(keys, updates.reshape(-1, dim))
        push_s = time.perf_counter() - t3
        push_send_s = cache.times.push_send_s - before.push_send_s
        pull_s = cache.times.pull_s - before.pull_s
        now = cache.counters.copy()
        traffic = endpoint.traffic()
        kernel_now = kernel.read()
        rows.append({"iteration": step, "worker": w,
                     **{c: int(v) for c, v in zip(COUNTERS, now - last)},
                     "dispatch_wait_s": t_dispatch - t0, "pull_s": pull_s,
                     "compute_s": compute_s, "allreduce_s": allreduce_s, "push_s": push_s,
                     "push_send_s": push_send_s, "push_started": cache.times.push_started,
                     "allreduce_total_s": dense.total_s, "buckets": dense.buckets,
                     "wall_s": time.perf_counter() - t0, "loss": loss,
                     "samples": len(pos), "allreduce_bytes": ring_bytes,
                     **{k: traffic[k] - traffic_last[k] for k in traffic},
                     **{f"kernel_{k}": v - kernel_last.get(k, 0) for k, v in kernel_now.items()}})
        last, traffic_last, kernel_last = now, traffic, kernel_now
    reducer.close()
    cache.flush()
    cache.done()
    out = {"history": rows, "traffic": endpoint.traffic(),
           "flush_counters": (cache.counters - last).tolist()}
    if w == 0:
        out["dense_state"] = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return out


def _loss(module: torch.nn.Module, dense: torch.Tensor, emb: torch.Tensor, labels: torch.Tensor,
          batch: int) -> torch.Tensor:
    """A worker's share of the batch loss: ``sum / global batch`` (summed over workers = the
    batch mean, as in the emulated trainer)."""
    return torch.nn.functional.binary_cross_entropy_with_logits(
        module(dense, emb), labels, reduction="sum") / batch


class _KernelCounters:
    """The byte and packet counters of the interface gloo uses (``GLOO_SOCKET_IFNAME``; the
    kernel network's nodes have ``eth0``) in this process's network namespace, or nothing (the
    token-bucket network, an interface the kernel does not list)."""

    def __init__(self, enabled: bool) -> None:
        self.device = os.environ.get("GLOO_SOCKET_IFNAME", "eth0")
        self.enabled = enabled

    def read(self) -> dict[str, int]:
        """Bytes and packets each way (headers included), or ``{}``."""
        if not self.enabled:
            return {}
        try:
            return read_net_dev("/proc/net/dev", self.device)
        except (KeyError, OSError):
            self.enabled = False
            return {}


def _dispatcher(job: DistributedJob, train: Split, links, waiting) -> dict:
    endpoint = Endpoint({w + 1: ShapedLink(b, lat) for w, (b, lat) in enumerate(links)},
                        threaded=True, waiting=waiting)
    shadow = EdgeCluster(job.cluster_cfg, job.system.cache_config(job.cache_cfg),
                         job.table_rows, job.model_cfg.embedding_dim)
    capacities = job.capacity_array()
    decider = job.dispatcher_spec.build(shadow, capacities, seed=job.seed)
    batch = job.model_cfg.batch_size
    decision_s = []
    for step in range(job.steps):
        keys = train.keys[step * batch:(step + 1) * batch]
        start = time.perf_counter()
        decider.set_budget(job.decision_budget_s)
        owner = decider.decide(keys, step).assignment
        decision_s.append(time.perf_counter() - start)
        positions = [np.flatnonzero(owner == w) for w in range(job.workers)]
        for w, pos in enumerate(positions):
            endpoint.send(w + 1, DISPATCH_OP, step, [(pos.astype(np.int64), "meta")])
        # the replica of the caches' metadata: the protocol without values (versions only)
        for w, pos in enumerate(positions):
            shadow.read(w, keys[pos].ravel(), want_values=False)
        for w, pos in enumerate(positions):
            shadow.write(w, keys[pos].ravel(), 0.0)
    endpoint.close()
    return {"decision_s": decision_s, "traffic": endpoint.traffic()}


# ------------------------------------------------------------------------------------------
# Launcher
# ------------------------------------------------------------------------------------------

def run_distributed(job: DistributedJob, train: Split, fault: Fault | None = None
                    ) -> DistributedResult:
    """Run ``job`` on ``train``, one process per rank, on the job's network; collect the result.

    ``token_bucket``: every rank spawned on this machine's loopback, links shaped in the
    senders. ``kernel``: an :class:`~workbench.cluster.edge_network.EdgeNetwork` of one node per
    rank, one ``torchrun`` per node (static rendezvous on the server node), torn down after.

    Raises:
        DistributedProcessError: a process died, stopped or hung, a link went down or stalled
            (kernel network), or the run passed ``job.deadline_s`` (one line naming the process
            and its node); every process has been stopped.
        DistributedRunError: a process raised (its traceback in the message); every process
            has been stopped.
        NetworkUnavailableError: the kernel network cannot be built here (one line: why, and
            the fix).
    """
    needed = job.steps * job.model_cfg.batch_size
    if len(train) < needed:
        raise ValueError(f"{len(train)} train samples hold fewer than {job.steps} batches of "
                         f"{job.model_cfg.batch_size}")
    if fault is not None and fault.kind in NETWORK_FAULTS and job.network != "kernel":
        raise ValueError(f"fault {fault.kind!r} needs the kernel network (network = kernel)")
    liveness = Liveness(job.world_size)
    samples = NamelessFile()
    outputs = [NamelessFile() for _ in range(job.world_size)]
    roles = [_role(job, rank) for rank in range(job.world_size)]
    try:
        if job.network == "kernel":
            outs, wall_s, network = _launch_on_network(job, train, fault, liveness, samples,
                                                       outputs, roles)
        else:
            outs, wall_s = _launch_here(job, train, fault, liveness, samples, outputs, roles)
            network = {"network": "token_bucket"}
    finally:
        for nameless in (samples, *outputs):
            nameless.close()
        liveness.close()
    server = outs[SERVER_RANK]
    history = pd.DataFrame([r for out in outs[1: job.workers + 1] for r in out["history"]])
    history = history.sort_values(["iteration", "worker"], kind="stable").reset_index(drop=True)
    history["loss"] = history.groupby("iteration")["loss"].transform("sum")  # the batch's
    arrived = {(rank - 1, round_): t for rank, round_, t in server["push_arrivals"]}
    history["push_wire_s"] = [arrived[(w, i)] - t for w, i, t in zip(
        history["worker"], history["iteration"], history.pop("push_started"))]
    return DistributedResult(
        table=server["values"], versions=server["versions"],
        dense_state=outs[1]["dense_state"], history=history,
        server={"traffic": server["traffic"], "pulls_served": server["pulls_served"],
                "push_rounds": server["push_rounds"], "busy_s": server["busy_s"],
                "flush_counters": [o["flush_counters"] for o in outs[1: job.workers + 1]],
                "decision_s": outs[-1].get("decision_s", []) if job.has_dispatcher else []},
        wall_s=wall_s, startup_s=max(o["startup_s"] for o in outs), network=network)


def _launch_here(job: DistributedJob, train: Split, fault: Fault | None, liveness: Liveness,
                 samples: NamelessFile, outputs: list[NamelessFile], roles: list[str]
                 ) -> tuple[list[dict], float]:
    """Every rank a spawned process of this machine, on the loopback; their outputs and the
    wall time."""
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo" if os.path.exists("/sys/class/net/lo")
                          else "lo0")
    init_method = f"tcp://127.0.0.1:{_free_port()}"
    ctx = mp.get_context("spawn")
    processes = [ctx.Process(target=_entry, name=f"workbench-dist-rank{rank}", daemon=True,
                             args=(rank, job, samples, init_method, outputs[rank], fault,
                                   liveness, os.getpid()))
                 for rank in range(job.world_size)]
    supervisor = Supervisor(roles, processes, liveness, outputs, job.timeout_s, job.deadline_s)
    start = time.perf_counter()
    try:
        samples.write({"train": train})
        for process in processes:
            process.start()
        supervisor.wait()
        return [o.read()["out"] for o in outputs], time.perf_counter() - start
    finally:
        supervisor.stop()


def network_spec(job: DistributedJob) -> NetworkSpec:
    """The job's nodes (rank order: server, workers, dispatcher) and their links (unshaped
    when ``job.shaped`` is off)."""
    spec = NetworkSpec.from_cluster(job.cluster_cfg, dispatcher=job.has_dispatcher)
    if job.shaped:
        return spec
    return NetworkSpec(tuple(NodeSpec(n.name, n.role, LinkSpec()) for n in spec.nodes))


def _launch_on_network(job: DistributedJob, train: Split, fault: Fault | None,
                       liveness: Liveness, samples: NamelessFile,
                       outputs: list[NamelessFile], roles: list[str]
                       ) -> tuple[list[dict], float, dict]:
    """One node per rank on a kernel-shaped network, one ``torchrun`` per node; the outputs,
    the wall time and what the network was (its links, whether latency was applied)."""
    spec = network_spec(job)
    with EdgeNetwork(spec) as net:
        # the latency the workers' links really have (the configured one where netem applies
        # it, else the veth's own, probed before the run on the idle network)
        latency = [net.effective_latency_ms(n.name) for n in spec.nodes[1: job.workers + 1]]
        samples.write({"train": train, "job": job, "liveness": liveness.file.path,
                       "outputs": [o.path for o in outputs], "fault": fault})
        endpoint = f"{net.address(spec.nodes[SERVER_RANK].name)}:{RENDEZVOUS_PORT}"
        env = {**os.environ, "GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1"}
        processes: list[NodeProcess] = []
        start = time.perf_counter()
        injector = _NetworkFault(net, spec, fault, job)
        injector.arm(liveness)
        supervisor = Supervisor(roles, processes, liveness, outputs, job.timeout_s,
                                job.deadline_s,
                                where=[f"node {n.name}, {net.address(n.name)}"
                                       for n in spec.nodes],
                                on_poll=injector)
        try:
            for rank, node in enumerate(spec.nodes):
                log = NamelessFile()
                argv = [sys.executable, "-m", "torch.distributed.run",
                        f"--nnodes={job.world_size}", f"--node-rank={rank}",
                        "--nproc-per-node=1", "--rdzv-backend=static",
                        f"--rdzv-endpoint={endpoint}", "--max-restarts=0",
                        "--monitor-interval=0.1", "-m", "workbench.training.distributed",
                        "--handoff", samples.path]
                processes.append(NodeProcess(net.popen(
                    node.name, argv, env=env, stdin=subprocess.DEVNULL, stdout=log.file,
                    stderr=subprocess.STDOUT), log))
            try:
                supervisor.wait()
            except DistributedRunError as err:
                raise _network_failure(net, spec, err, job.timeout_s) from None
            wall_s = time.perf_counter() - start
            outs = [o.read()["out"] for o in outputs]
        finally:
            supervisor.stop()
        network = {"network": "kernel", "latency_applied": net.latency_applied,
                   "effective_latency_ms": latency, "nodes": net.describe()}
    return outs, wall_s, network


@dataclass
class _NetworkFault:
    """The launcher's network fault (:data:`NETWORK_FAULTS`): the faulty rank (worker 0 for the
    server) is held at the start of the fault's iteration, the fault applied, the rank
    released."""

    net: EdgeNetwork
    spec: NetworkSpec
    fault: Fault | None
    job: DistributedJob
    done: bool = False

    @property
    def watched(self) -> int:
        """The rank whose iteration times the fault."""
        assert self.fault is not None
        return self.fault.rank if 1 <= self.fault.rank <= self.job.workers else 1

    def arm(self, liveness: Liveness) -> None:
        """Ask the watched rank to pause at the fault's iteration (before the run starts)."""
        if self.fault is not None and self.fault.kind in NETWORK_FAULTS:
            liveness.hold(self.watched, self.fault.iteration)

    def __call__(self, liveness: Liveness) -> None:
        fault = self.fault
        if self.done or fault is None or fault.kind not in NETWORK_FAULTS:
            return
        if liveness.iteration(self.watched) < fault.iteration:
            return
        node = self.spec.nodes[fault.rank].name
        if fault.kind == "link_down":
            self.net.set_link(node, up=False)
        elif fault.kind == "degrade":
            self.net.set_rate(node, fault.bandwidth_gbps)
        else:
            self.net.kill_node(node)
        self.done = True
        liveness.release(self.watched)


def _network_failure(net: EdgeNetwork, spec: NetworkSpec, err: DistributedRunError,
                     timeout_s: float) -> DistributedRunError:
    """A failure on the kernel network, blamed on the links the kernel shows broken (down,
    slower than configured, holding queued bytes) when a process did not die by itself."""
    if isinstance(err, ProcessDiedError):
        return err
    problems = net.diagnose()
    if not problems:
        return err
    named = []
    for node, problem in problems:
        rank = spec.index(node)
        named.append(f"{spec.nodes[rank].role} (rank {rank}, node {node}, "
                     f"{net.address(node)}): {problem}")
    return DistributedProcessError(
        f"{'; '.join(named)}; the processes waiting across it made no progress for "
        f"timeout_s = {timeout_s:g} s; the run was stopped and the network torn down")


def torchrun_main(job_path: str) -> None:
    """Entry point of one rank under ``torchrun`` (multi-machine): the job and the train split
    are read from ``job_path`` (a pickle of ``(job, train)``), rank and world size from
    torchrun's environment, outputs go next to the job file."""
    with open(job_path, "rb") as f:
        job, train = pickle.load(f)
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    if world != job.world_size:
        raise SystemExit(f"torchrun started {world} processes; the job needs {job.world_size} "
                         f"(1 server + {job.workers} workers"
                         f"{' + 1 dispatcher' if job.has_dispatcher else ''})")
    _entry(rank, job, train, "env://", DirOutput(str(Path(job_path).parent), rank), None)


def _handoff_main(path: str) -> None:
    """One rank on the kernel network, started by its node's ``torchrun``: the job, the
    samples, the liveness table and the outputs come from the launcher's nameless files
    (``/proc/<launcher>/fd/<n>``); the process dies with its agent."""
    handoff = NamelessFile.open(path)
    payload = handoff.read()
    handoff.close()
    job: DistributedJob = payload["job"]
    rank = int(os.environ["RANK"])
    liveness = Liveness(job.world_size, NamelessFile.open(payload["liveness"]))
    output = NamelessFile.open(payload["outputs"][rank])
    _entry(rank, job, payload["train"], "env://", output, payload["fault"], liveness,
           parent_pid=os.getppid())


def save_job(job: DistributedJob, train: Split, path: str | Path) -> None:
    """Write ``(job, train)`` for :func:`torchrun_main` (copy it to every machine)."""
    with open(path, "wb") as f:
        pickle.dump((job, train), f, protocol=pickle.HIGHEST_PROTOCOL)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="one rank of a distributed run under torchrun")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--handoff", help="the launcher's nameless file: /proc/<pid>/fd/<n> "
                                         "(the kernel network on this machine)")
    where.add_argument("--job", help="a job file written by save_job (machines of your own): "
                                     "results go next to it")
    args = parser.parse_args()
    if args.handoff:
        _handoff_main(args.handoff)
    else:
        torchrun_main(args.job)
