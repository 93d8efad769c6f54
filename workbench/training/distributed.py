"""The distributed backend: the emulated cluster's training run on real processes.

``cluster.backend = distributed`` starts W + 1 processes (W + 2 with a dispatcher process) with
torch's own launcher (``torch.multiprocessing`` spawn) on the loopback interface, gloo backend::

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
    all_reduce <- sender-shaped ring share 2(W-1)/W x dense bytes at B_w, 2(W-1) latencies,
                  then dist.all_reduce of the dense gradients (+ the loss) (allreduce_s)
    push       <- PUSH, wait for the round's ACK (every worker pushed) (push_s: includes the
                  wait for the slowest worker's push)

The model, the table and the dispatch are the emulated trainer's
(:func:`workbench.training.trainer.initial_parameters`, the same seeds), the per-sample loss is the
same (``sum / global batch`` per worker, summed by the all_reduce = the batch mean), so the
counters match the emulated run exactly and the parameters within the float tolerance of the
reduction order (:mod:`workbench.experiments.distributed_check` checks both).

Failure: every collective and point-to-point call times out after ``timeout_s``. The launcher
supervises the processes through shared memory (:class:`Liveness`): each sends a heartbeat from a
thread of its own and marks the calls in which it waits on a peer. It stops the run (SIGKILL to
every process) and names the process at fault when one

* dies (a signal, an exit code): :class:`DistributedProcessError`;
* sends no heartbeat for ``timeout_s`` (stopped by SIGSTOP or a debugger, frozen): the same;
* stays busy outside any wait on a peer for ``timeout_s`` (hung in its own code): the same;
* raises: :class:`DistributedRunError` with its traceback (a peer that raised because a stopped
  or hung process made it time out is not blamed: the silent one is);

and when the run passes ``deadline_s``. A process that loses its launcher (killed, even by
SIGKILL) is killed by the kernel at once (``PR_SET_PDEATHSIG``; elsewhere its heartbeat thread
notices the new parent), and the processes hand their results back in files that never have a
name (:class:`_NamelessFile`), so nothing of a run outlives it: no process, no temporary file.

Across machines the same entry point runs under ``torchrun --nnodes N --nproc-per-node K``
(:func:`torchrun_main`), every rank reading the job from a file.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import mmap
import os
import pickle
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from multiprocessing import connection, reduction
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from workbench.cluster.cache import COUNTERS, CacheSpec
from workbench.cluster.config import CacheConfig, ClusterConfig
from workbench.cluster.edge_cluster import EdgeCluster, cache_spec
from workbench.cluster.remote_ps import RemoteCache, serve_parameter_server
from workbench.cluster.shaped_link import ShapedLink
from workbench.cluster.time_model import BYTES_PER_FLOAT
from workbench.cluster.wire import Endpoint
from workbench.dispatch.base import BASELINES, BaselineDispatcher, baseline
from workbench.dispatch.registry import DispatcherSpec, SolverOptions
from workbench.models.config import ModelConfig
from workbench.models.ctr import dense_parameter_count
from workbench.training.trainer import Split, SystemSpec, dense_optimizer, initial_parameters
from workbench.utils.errors import UserError, WorkbenchError

__all__ = ["DistributedJob", "DistributedProcessError", "DistributedResult",
           "DistributedRunError", "Fault", "Liveness", "run_distributed", "torchrun_main"]

SERVER_RANK = 0
DISPATCH_OP = 7
BASELINE_DISPATCHERS = BASELINES
SUPPORTED_KINDS = ("cache", "hybrid")


HEARTBEAT_S = 0.1  # a process's heartbeat period: far below any timeout_s (>= 1 s)
POLL_S = 0.1  # the launcher's check period
# a process that raised is a victim when another has shown no progress for this fraction of
# timeout_s: its peers' calls time out after timeout_s counted from when THEY began waiting, at
# most one BSP iteration before the culprit froze, while a healthy process beats every
# HEARTBEAT_S and is busy for one compute phase at a time. The same fraction of its time without
# progress spent without a heartbeat makes a process "silent" rather than "busy".
BLAME_FRACTION = 0.5
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class DistributedRunError(WorkbenchError, RuntimeError):
    """A distributed run failed: a process raised (its traceback is in the message)."""


class DistributedProcessError(DistributedRunError, UserError):
    """A process of a distributed run died, stopped or hung, or the run passed its deadline.

    Shown as one line: the process (role, rank, pid) and what happened to it.
    """


@dataclass(frozen=True)
class Fault:
    """A failure injected into one process (tests of the failure handling).

    Attributes:
        rank: the process (0 = server, 1..W = workers).
        iteration: the iteration at whose start it fails.
        kind: ``raise`` (an exception), ``kill`` (SIGKILL to itself), ``hang`` (sleeps
            forever: the others time out) or ``stop`` (SIGSTOP to itself: it stops beating).
    """

    rank: int
    iteration: int
    kind: str = "raise"


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
        shaped: shape the links (False: loopback speed everywhere, for the benchmark).
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

    def __post_init__(self) -> None:
        if self.system.kind not in SUPPORTED_KINDS:
            raise ValueError(f"system {self.system.kind!r}: the distributed backend runs "
                             f"{SUPPORTED_KINDS} (BSP over a parameter server)")
        if self.cluster_cfg.sync != "bsp":
            raise ValueError("cluster.sync must be 'bsp' under the distributed backend")
        if self.model_cfg.batch_size % self.workers and self.capacities is None:
            raise ValueError(f"model.batch_size = {self.model_cfg.batch_size} is not divisible "
                             f"by cluster.workers = {self.workers}")
        if self.steps < 1:
            raise ValueError(f"steps = {self.steps}: must be >= 1")

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
        history: one row per (iteration, worker): counter deltas, phase seconds, bytes.
        server: the server's traffic and busy time.
        wall_s: the launcher's wall time from start to the last process's exit.
        startup_s: seconds until every process had joined the process group.
    """

    table: np.ndarray
    versions: np.ndarray
    dense_state: dict[str, torch.Tensor]
    history: pd.DataFrame
    server: dict
    wall_s: float
    startup_s: float


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


# ------------------------------------------------------------------------------------------
# Supervision: heartbeats, the launcher's death, nameless outputs
# ------------------------------------------------------------------------------------------

_STARTED, _BEAT, _BUSY = range(3)


class Liveness:
    """What the launcher sees of each process, in shared memory (one row of doubles per rank).

    Columns, in ``time.monotonic()`` seconds (one clock for every process of the machine), 0 for
    "not yet":

    * ``started``: when the process began its body;
    * ``beat``: its latest heartbeat, written every :data:`HEARTBEAT_S` by a thread of its own:
      a process stopped (SIGSTOP, a debugger) or frozen stops beating;
    * ``busy``: when its main thread last came back from a call that waits on a peer (0 while
      inside one): a process busy for long outside any such call hangs in its own code.

    Args:
        world: processes of the run.
        ctx: the multiprocessing context whose shared memory holds the table.
    """

    def __init__(self, world: int, ctx=None) -> None:
        self.world = world
        self._table = (ctx or mp.get_context("spawn")).RawArray("d", 3 * world)
        self._rank = -1
        self._depth = 0

    # -- in the process -------------------------------------------------------------------------
    def start(self, rank: int, parent_pid: int | None) -> None:
        """Begin beating as ``rank`` (a daemon thread); with ``parent_pid``, kill this process
        as soon as its parent is no longer ``parent_pid`` (the launcher died)."""
        self._rank = rank
        now = time.monotonic()
        for column in (_STARTED, _BEAT, _BUSY):
            self._set(column, now)
        threading.Thread(target=self._beat, args=(parent_pid,), daemon=True,
                         name="heartbeat").start()

    def _set(self, column: int, value: float) -> None:
        self._table[3 * self._rank + column] = value

    def _beat(self, parent_pid: int | None) -> None:
        while True:
            if parent_pid is not None and os.getppid() != parent_pid:
                os.kill(os.getpid(), signal.SIGKILL)
            self._set(_BEAT, time.monotonic())
            time.sleep(HEARTBEAT_S)

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        """Mark the enclosed calls as a wait on a peer (nested waits count once)."""
        self._depth += 1
        if self._depth == 1:
            self._set(_BUSY, 0.0)
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                self._set(_BUSY, time.monotonic())

    # -- in the launcher ------------------------------------------------------------------------
    def lost(self, ranks: list[int], now: float, seconds: float
             ) -> tuple[int, str, float] | None:
        """The process of ``ranks`` without a sign of progress for more than ``seconds``:
        ``(rank, how, for how long)``, or None.

        No progress: no heartbeat (a process that never started counts from the first process's
        start), or busy outside any wait on a peer. ``how`` is ``silent`` when the heartbeat has
        been missing for :data:`BLAME_FRACTION` of that time or more (stopped or frozen, maybe
        while busy), else ``busy`` (hung in its own code). Silent ones come first (one busy may
        be held by a stopped peer, in a send), then the one lost longest.
        """
        table = np.frombuffer(self._table, np.float64).reshape(self.world, 3)
        started = table[:, _STARTED]
        if not (started > 0).any() or not ranks:
            return None
        sel = np.asarray(ranks)
        row = table[sel]
        silent = now - np.where(row[:, _STARTED] > 0, row[:, _BEAT], started[started > 0].min())
        busy = np.where(row[:, _BUSY] > 0, now - row[:, _BUSY], 0.0)
        age = np.maximum(silent, busy)
        is_silent = silent >= BLAME_FRACTION * age
        lost = np.flatnonzero(age > seconds)
        if not len(lost):
            return None
        i = lost[np.lexsort((age[lost], is_silent[lost]))[-1]]
        if is_silent[i]:
            return int(sel[i]), "silent", float(silent[i])
        return int(sel[i]), "busy", float(busy[i])


def _die_with_parent(parent_pid: int) -> None:
    """Have the kernel SIGKILL this process the moment its launcher dies (Linux
    ``PR_SET_PDEATHSIG``, which also replaces torch's SIGINT there: a signal a process stuck in
    a gloo call would only act on after its timeout); elsewhere the heartbeat thread checks the
    parent (:meth:`Liveness.start`)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent_pid:  # the launcher died before the prctl took effect
        os.kill(os.getpid(), signal.SIGKILL)


class _NamelessFile:
    """A file without a name, which a spawned process inherits by descriptor: the launcher hands
    the training samples over in one, each process its result (or its error) in another.

    Made by :func:`tempfile.TemporaryFile` (``O_TMPFILE`` on Linux: it never has a name;
    elsewhere unlinked at once), it lives exactly as long as a process holds it open: whatever
    kills the launcher or a process, no temporary file is left behind. One process writes it;
    readers map it (never the shared file offset), so several may read at once. The samples go
    this way rather than through the spawn pipe: a process stopped before reading its pipe would
    block the launcher's write there, before any supervision.
    """

    def __init__(self) -> None:
        self.file = tempfile.TemporaryFile(prefix="workbench-dist-")

    def __reduce__(self):
        # only while spawning: the descriptor travels with the new process (multiprocessing's
        # own way for its shared memory)
        return _inherit_file, (reduction.DupFd(self.file.fileno()),)

    def write(self, payload: dict) -> None:
        """Replace the content with ``payload`` (pickled)."""
        self.file.seek(0)
        self.file.truncate()
        pickle.dump(payload, self.file, protocol=pickle.HIGHEST_PROTOCOL)
        self.file.flush()

    def read(self) -> dict:
        """The payload written (an empty dict if none was, or only part of one)."""
        size = os.fstat(self.file.fileno()).st_size
        if size == 0:
            return {}
        with mmap.mmap(self.file.fileno(), size, access=mmap.ACCESS_READ) as view:
            try:
                return pickle.loads(view)
            except (EOFError, pickle.UnpicklingError):  # cut short by a kill
                return {}

    def close(self) -> None:
        """Close this process's handle (the file is gone once no process holds it)."""
        self.file.close()


def _inherit_file(dup) -> _NamelessFile:
    nameless = _NamelessFile.__new__(_NamelessFile)
    nameless.file = os.fdopen(dup.detach(), "r+b")
    return nameless


class _DirOutput:
    """Outputs of a rank under ``torchrun`` (several machines): ``rank<r>.pkl`` (the result,
    written atomically) or ``rank<r>.err`` (the time and the traceback) in a directory."""

    def __init__(self, folder: str, rank: int) -> None:
        self.folder = Path(folder)
        self.rank = rank

    def write(self, payload: dict) -> None:
        """Write the result, or the error."""
        if "error" in payload:
            (self.folder / f"rank{self.rank}.err").write_text(
                f"{payload['at']:.6f}\n{payload['error']}")
            return
        path = self.folder / f"rank{self.rank}.pkl"
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            pickle.dump(payload["out"], f)
        os.replace(tmp, path)


# ------------------------------------------------------------------------------------------
# Processes
# ------------------------------------------------------------------------------------------

def _maybe_fail(fault: Fault | None, rank: int, iteration: int) -> None:
    if fault is None or fault.rank != rank or fault.iteration != iteration:
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


def _entry(rank: int, job: DistributedJob, train: Split | _NamelessFile, init_method: str,
           output: _NamelessFile | _DirOutput, fault: Fault | None,
           liveness: Liveness | None = None, parent_pid: int | None = None) -> None:
    """Body of every process: join the group, run the role, write the result to ``output``.

    ``train`` is the split, or the launcher's file holding it (``{"train": split}``).

    Under the launcher (``liveness`` given) the process dies with its launcher, beats, and on an
    error writes it and exits at once (the launcher stops the others; leaving the group could
    wait on them).
    """
    if parent_pid is not None:
        _die_with_parent(parent_pid)
    if liveness is not None:
        liveness.start(rank, parent_pid)
    waiting = liveness.waiting if liveness is not None else contextlib.nullcontext
    torch.set_num_threads(1)
    start = time.perf_counter()
    try:
        split = train.read()["train"] if isinstance(train, _NamelessFile) else train
        with waiting():
            dist.init_process_group("gloo", init_method=init_method, rank=rank,
                                    world_size=job.world_size,
                                    timeout=timedelta(seconds=job.timeout_s))
            workers_group = dist.new_group(list(range(1, job.workers + 1)))
            dist.barrier()
        startup_s = time.perf_counter() - start
        links = worker_links(job.cluster_cfg, job.shaped)
        out = _run_role(rank, job, split, links, workers_group, fault, waiting)
        out["startup_s"] = startup_s
        output.write({"out": out})
    except BaseException:
        # the first error in time is the cause; the others' ("connection closed") follow it
        output.write({"error": traceback.format_exc(), "at": time.time()})
        if liveness is not None:
            os._exit(1)
        raise
    dist.destroy_process_group()


def _run_role(rank: int, job: DistributedJob, train: Split, links, workers_group,
              fault: Fault | None, waiting) -> dict:
    """Run rank ``rank``'s role; its outputs."""
    if rank == SERVER_RANK:
        return _server(job, links, fault, waiting)
    if rank <= job.workers:
        return _worker(rank, job, train, links, workers_group, fault, waiting)
    return _dispatcher(job, train, links, waiting)


def _server(job: DistributedJob, links, fault: Fault | None, waiting) -> dict:
    endpoint = Endpoint({w + 1: ShapedLink(b, lat) for w, (b, lat) in enumerate(links)},
                        shared=(ShapedLink(job.cluster_cfg.ps_bandwidth_gbps * 1e9 / 8)
                                if job.shaped else None),
                        threaded=True, waiting=waiting)
    _, table = initial_parameters(job.model_cfg, job.n_dense, job.n_sparse, job.table_rows,
                                  job.seed)
    result = serve_parameter_server(endpoint, table, list(range(1, job.workers + 1)),
                                    job.cache_spec().read_bound,
                                    on_round=lambda r: _maybe_fail(fault, SERVER_RANK, r))
    return {"values": result.values, "versions": result.versions, "traffic": result.traffic,
            "pulls_served": result.pulls_served, "push_rounds": result.push_rounds,
            "busy_s": result.busy_s}


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
            fault: Fault | None, waiting) -> dict:
    w = rank - 1
    cfg = job.model_cfg
    batch = cfg.batch_size
    bandwidth, latency = links[w]
    workers = job.workers
    endpoint = Endpoint({SERVER_RANK: ShapedLink(bandwidth, latency)}, waiting=waiting)
    ring = ShapedLink(bandwidth, 2 * (workers - 1) * latency)  # the all_reduce's sender side
    cache = RemoteCache(job.cache_spec(), job.table_rows, cfg.embedding_dim, endpoint)
    model, _ = initial_parameters(cfg, job.n_dense, job.n_sparse, job.table_rows, job.seed)
    optimizer = dense_optimizer(cfg, model)
    params = list(model.parameters())
    dense_bytes = BYTES_PER_FLOAT * dense_parameter_count(model)
    ring_bytes = int(2 * (workers - 1) / workers * dense_bytes) if workers > 1 else 0
    speed = float(job.cluster_cfg.per_worker("speed")[w])
    # the emulated trainer's dispatch stream, drawn by every worker (no dispatcher process)
    own = None if job.has_dispatcher else baseline(job.dispatcher)(
        workers, job.capacity_array(), job.seed)
    f, dim = job.n_sparse, cfg.embedding_dim
    rows, last = [], cache.counters.copy()
    traffic_last = endpoint.traffic()
    for step in range(job.steps):
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
        logits = model(torch.from_numpy(train.dense[idx]), emb_t)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            logits, torch.from_numpy(train.labels[idx]), reduction="sum") / batch
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        compute_s = time.perf_counter() - t1
        if speed < 1.0:
            time.sleep(compute_s * (1.0 / speed - 1.0))
        compute_s = time.perf_counter() - t1
        t2 = time.perf_counter()
        flat = torch.cat([p.grad.reshape(-1) if p.grad is not None else torch.zeros(p.numel())
                          for p in params] + [loss.detach().reshape(1)])
        with waiting():  # the ring's link time, then the peers
            if job.shaped and ring_bytes:
                ring.wait(ring_bytes)
            dist.all_reduce(flat, group=group)
        offset = 0
        for p in params:
            p.grad = flat[offset: offset + p.numel()].view_as(p).clone()
            offset += p.numel()
        optimizer.step()
        allreduce_s = time.perf_counter() - t2
        t3 = time.perf_counter()
        assert emb_t.grad is not None  # emb_t requires grad: backward() set it
        updates = (-cfg.lr_sparse * batch) * emb_t.grad.numpy()
        cache.write(keys, updates.reshape(-1, dim))
        push_s = time.perf_counter() - t3
        push_send_s = cache.times.push_send_s - before.push_send_s
        pull_s = cache.times.pull_s - before.pull_s
        now = cache.counters.copy()
        traffic = endpoint.traffic()
        rows.append({"iteration": step, "worker": w,
                     **{c: int(v) for c, v in zip(COUNTERS, now - last)},
                     "dispatch_wait_s": t_dispatch - t0, "pull_s": pull_s,
                     "compute_s": compute_s, "allreduce_s": allreduce_s, "push_s": push_s,
                     "push_send_s": push_send_s,
                     "wall_s": time.perf_counter() - t0, "loss": float(flat[-1]),
                     "samples": len(pos),
                     **{k: traffic[k] - traffic_last[k] for k in traffic}})
        last, traffic_last = now, traffic
    cache.flush()
    cache.done()
    out = {"history": rows, "traffic": endpoint.traffic(),
           "flush_counters": (cache.counters - last).tolist()}
    if w == 0:
        out["dense_state"] = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return out


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
    """Run ``job`` on ``train`` with one process per rank on this machine; collect the result.

    Raises:
        DistributedProcessError: a process died, stopped or hung, or the run passed
            ``job.deadline_s`` (one line naming the process); every process has been stopped.
        DistributedRunError: a process raised (its traceback in the message); every process
            has been stopped.
    """
    needed = job.steps * job.model_cfg.batch_size
    if len(train) < needed:
        raise ValueError(f"{len(train)} train samples hold fewer than {job.steps} batches of "
                         f"{job.model_cfg.batch_size}")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo" if os.path.exists("/sys/class/net/lo")
                          else "lo0")
    init_method = f"tcp://127.0.0.1:{_free_port()}"
    ctx = mp.get_context("spawn")
    liveness = Liveness(job.world_size, ctx)
    samples = _NamelessFile()
    outputs = [_NamelessFile() for _ in range(job.world_size)]
    processes = [ctx.Process(target=_entry, name=f"workbench-dist-rank{rank}", daemon=True,
                             args=(rank, job, samples, init_method, outputs[rank], fault,
                                   liveness, os.getpid()))
                 for rank in range(job.world_size)]
    start = time.perf_counter()
    try:
        samples.write({"train": train})
        for process in processes:
            process.start()
        _supervise(job, processes, liveness, outputs)
        wall_s = time.perf_counter() - start
        outs = [output.read()["out"] for output in outputs]
    finally:
        _stop(processes)
        for nameless in (samples, *outputs):
            nameless.close()
    server = outs[SERVER_RANK]
    history = pd.DataFrame([r for out in outs[1: job.workers + 1] for r in out["history"]])
    history = history.sort_values(["iteration", "worker"], kind="stable").reset_index(drop=True)
    return DistributedResult(
        table=server["values"], versions=server["versions"],
        dense_state=outs[1]["dense_state"], history=history,
        server={"traffic": server["traffic"], "pulls_served": server["pulls_served"],
                "push_rounds": server["push_rounds"], "busy_s": server["busy_s"],
                "flush_counters": [o["flush_counters"] for o in outs[1: job.workers + 1]],
                "decision_s": outs[-1].get("decision_s", []) if job.has_dispatcher else []},
        wall_s=wall_s, startup_s=max(o["startup_s"] for o in outs))


def _supervise(job: DistributedJob, processes: list, liveness: Liveness,
               outputs: list[_NamelessFile]) -> None:
    """Wait until every process has exited with 0; raise naming the process at fault as soon as
    one dies or raises, stays silent or busy for ``timeout_s``, or the run passes its deadline.
    """
    deadline = time.monotonic() + job.deadline_s
    while True:
        running = [p.sentinel for p in processes if p.exitcode is None]
        if running:
            connection.wait(running, timeout=POLL_S)
        now = time.monotonic()
        alive = [rank for rank, p in enumerate(processes) if p.exitcode is None]
        failed = [rank for rank, p in enumerate(processes) if p.exitcode not in (None, 0)]
        if failed:
            raise _failure(job, processes, liveness, outputs, failed, alive, now)
        if not alive:
            return
        lost = liveness.lost(alive, now, job.timeout_s)
        if lost is not None:
            raise DistributedProcessError(_lost_message(job, processes, *lost))
        if now > deadline:
            raise DistributedProcessError(
                f"the distributed run passed its deadline of deadline_s = {job.deadline_s:g} s "
                f"and was stopped ({job.world_size} processes): raise deadline_s or lower the "
                "steps")


def _who(job: DistributedJob, processes: list, rank: int) -> str:
    return f"{_role(job, rank)} (rank {rank}, pid {processes[rank].pid})"


def _lost_message(job: DistributedJob, processes: list, rank: int, how: str,
                  seconds: float) -> str:
    what = (f"sent nothing (no heartbeat) for {seconds:.0f} s: it is stopped (SIGSTOP, a "
            "debugger) or frozen" if how == "silent" else
            f"was busy for {seconds:.0f} s without reaching a message, all_reduce or barrier: "
            "it hangs in its own code")
    return (f"{_who(job, processes, rank)} {what} (timeout_s = {job.timeout_s:g} s); the run's "
            f"{job.world_size} processes were stopped")


def _failure(job: DistributedJob, processes: list, liveness: Liveness,
             outputs: list[_NamelessFile], failed: list[int], alive: list[int], now: float
             ) -> DistributedRunError:
    """The error naming the cause of a failure: a process that died; else one still running
    that has been silent or busy for :data:`BLAME_FRACTION` of ``timeout_s`` (the others timed
    out waiting for it); else the first process that raised."""
    errors = {rank: outputs[rank].read() for rank in failed}
    for rank in failed:
        code = processes[rank].exitcode
        if "error" not in errors[rank]:
            how = (f"killed by {signal.Signals(-code).name}" if code < 0
                   else f"exited with code {code}")
            return DistributedProcessError(
                f"{_who(job, processes, rank)} died ({how}); the run's {job.world_size} "
                "processes were stopped")
    lost = liveness.lost(alive, now, BLAME_FRACTION * job.timeout_s)
    if lost is not None:
        return DistributedProcessError(_lost_message(job, processes, *lost)
                                       + "; the others timed out waiting for it")
    rank = min(failed, key=lambda r: errors[r]["at"])
    return DistributedRunError(f"{_who(job, processes, rank)} raised; the run was stopped:\n"
                               f"{errors[rank]['error']}")


def _stop(processes: list) -> None:
    """SIGKILL every process still running (a stopped one too) and reap them all."""
    for process in processes:
        if process.pid is not None and process.exitcode is None:
            process.kill()
    for process in processes:
        if process.pid is not None:
            process.join()


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
    _entry(rank, job, train, "env://", _DirOutput(str(Path(job_path).parent), rank), None)
