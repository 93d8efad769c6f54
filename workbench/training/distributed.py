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

Failure: every collective and point-to-point call times out after ``timeout_s``; the launcher
polls the processes and, when one raises or dies (a signal, an exit code), stops the others and
raises :class:`DistributedRunError` naming the rank and its role; a run past its deadline is
stopped the same way. Nothing hangs.

Across machines the same entry point runs under ``torchrun --nnodes N --nproc-per-node K``
(:func:`torchrun_main`), every rank reading the job from a file.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import signal
import socket
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from datetime import timedelta
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
from workbench.utils.errors import WorkbenchError

__all__ = ["DistributedJob", "DistributedResult", "DistributedRunError", "Fault",
           "run_distributed", "torchrun_main"]

SERVER_RANK = 0
DISPATCH_OP = 7
BASELINE_DISPATCHERS = BASELINES
SUPPORTED_KINDS = ("cache", "hybrid")


class DistributedRunError(WorkbenchError, RuntimeError):
    """A distributed run failed: a process raised, died or the run passed its deadline."""


@dataclass(frozen=True)
class Fault:
    """A failure injected into one process (tests of the failure handling).

    Attributes:
        rank: the process (0 = server, 1..W = workers).
        iteration: the iteration at whose start it fails.
        kind: ``raise`` (an exception), ``kill`` (SIGKILL to itself) or ``hang`` (sleeps
            forever: the others time out).
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
# Processes
# ------------------------------------------------------------------------------------------

def _maybe_fail(fault: Fault | None, rank: int, iteration: int) -> None:
    if fault is None or fault.rank != rank or fault.iteration != iteration:
        return
    if fault.kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
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


def _entry(rank: int, job: DistributedJob, train: Split, init_method: str, out_dir: str,
           fault: Fault | None) -> None:
    """Body of every process (``torch.multiprocessing`` calls it with the rank first)."""
    torch.set_num_threads(1)
    start = time.perf_counter()
    dist.init_process_group("gloo", init_method=init_method, rank=rank,
                            world_size=job.world_size, timeout=timedelta(seconds=job.timeout_s))
    workers_group = dist.new_group(list(range(1, job.workers + 1)))
    dist.barrier()
    startup_s = time.perf_counter() - start
    links = worker_links(job.cluster_cfg, job.shaped)
    try:
        _run_role(rank, job, train, links, workers_group, fault, startup_s, out_dir)
    except BaseException:
        # the first error in time is the cause; the others' ("connection closed") follow it
        with open(Path(out_dir) / f"rank{rank}.err", "w") as f:
            f.write(f"{time.time():.6f}\n{traceback.format_exc()}")
        raise
    finally:
        dist.destroy_process_group()


def _run_role(rank: int, job: DistributedJob, train: Split, links, workers_group,
              fault: Fault | None, startup_s: float, out_dir: str) -> None:
    """Run rank ``rank``'s role and write its outputs atomically to ``out_dir``."""
    if rank == SERVER_RANK:
        out = _server(job, links, fault)
    elif rank <= job.workers:
        out = _worker(rank, job, train, links, workers_group, fault)
    else:
        out = _dispatcher(job, train, links)
    out["startup_s"] = startup_s
    path = Path(out_dir) / f"rank{rank}.pkl"
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        pickle.dump(out, f)
    os.replace(tmp, path)


def _server(job: DistributedJob, links, fault: Fault | None) -> dict:
    endpoint = Endpoint({w + 1: ShapedLink(b, lat) for w, (b, lat) in enumerate(links)},
                        shared=(ShapedLink(job.cluster_cfg.ps_bandwidth_gbps * 1e9 / 8)
                                if job.shaped else None),
                        threaded=True)
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
            fault: Fault | None) -> dict:
    w = rank - 1
    cfg = job.model_cfg
    batch = cfg.batch_size
    bandwidth, latency = links[w]
    workers = job.workers
    endpoint = Endpoint({SERVER_RANK: ShapedLink(bandwidth, latency)})
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


def _dispatcher(job: DistributedJob, train: Split, links) -> dict:
    endpoint = Endpoint({w + 1: ShapedLink(b, lat) for w, (b, lat) in enumerate(links)},
                        threaded=True)
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
        DistributedRunError: a process raised or died, or the run passed ``job.deadline_s``;
            every other process has been stopped.
    """
    needed = job.steps * job.model_cfg.batch_size
    if len(train) < needed:
        raise ValueError(f"{len(train)} train samples hold fewer than {job.steps} batches of "
                         f"{job.model_cfg.batch_size}")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo" if os.path.exists("/sys/class/net/lo")
                          else "lo0")
    init_method = f"tcp://127.0.0.1:{_free_port()}"
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="workbench-dist-") as out_dir:
        context = mp.start_processes(_entry, args=(job, train, init_method, out_dir, fault),
                                     nprocs=job.world_size, join=False, start_method="spawn")
        deadline = time.monotonic() + job.deadline_s
        try:
            while not context.join(timeout=0.25):
                if time.monotonic() > deadline:
                    _terminate(context)
                    raise DistributedRunError(
                        f"the distributed run passed its deadline of {job.deadline_s:.0f} s "
                        f"and was stopped ({job.world_size} processes)")
        except mp.ProcessRaisedException as error:
            _terminate(context)
            rank, detail = _first_error(out_dir, getattr(error, "error_index", -1), str(error))
            raise DistributedRunError(
                f"{_role(job, rank)} (rank {rank}) raised; the run was stopped:\n{detail}"
            ) from None
        except mp.ProcessExitedException as error:
            _terminate(context)
            rank = getattr(error, "error_index", -1)
            raise DistributedRunError(
                f"{_role(job, rank)} (rank {rank}) died ({error}); the run was stopped"
            ) from None
        wall_s = time.perf_counter() - start
        outs = []
        for rank in range(job.world_size):
            with open(Path(out_dir) / f"rank{rank}.pkl", "rb") as f:
                outs.append(pickle.load(f))
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


def _first_error(out_dir: str, rank: int, detail: str) -> tuple[int, str]:
    """The rank whose error came first (the cause), and its traceback."""
    first = (float("inf"), rank, detail)
    for path in Path(out_dir).glob("rank*.err"):
        stamp, _, text = path.read_text().partition("\n")
        first = min(first, (float(stamp), int(path.stem[4:]), text))
    return first[1], first[2]


def _terminate(context) -> None:
    for process in context.processes:
        if process.is_alive():
            process.terminate()
    for process in context.processes:
        process.join(timeout=5)
        if process.is_alive():
            process.kill()


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
    _entry(rank, job, train, "env://", str(Path(job_path).parent), None)
