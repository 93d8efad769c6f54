"""A distributed run's description: the job, the faults it can inject, its result, and the
links its workers send over ([`workbench.training.distributed`][] launches it, every rank of
[`workbench.training.ranks`][] reads it)."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from datetime import timedelta

import numpy as np
import pandas as pd
import torch
import torch.distributed as dist

from workbench.cluster.cache import CacheSpec
from workbench.cluster.config import CacheConfig, ClusterConfig
from workbench.cluster.edge_cluster import cache_spec
from workbench.dispatch.base import BASELINES
from workbench.dispatch.registry import DispatcherSpec, SolverOptions
from workbench.models.config import ModelConfig
from workbench.training.components import SystemKind, SystemSpec
from workbench.training.dense_reducer import REAL_MODES

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
            beating); on the kernel network ([`NETWORK_FAULTS`][]), by the launcher:
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
            or a cost-aware name of [`workbench.dispatch.registry`][] (dispatcher process).
        force_dispatcher_process: decide even a baseline in the dispatcher process (so that
            baselines and cost-aware dispatchers are timed on the same message path).
        dispatcher_options: the ESD solvers' settings (cost-aware only).
        decision_budget_s: HybridDis' budget per decision (cost-aware only).
        shaped: shape the links (False: unshaped everywhere, for the benchmark).
        network: where the links are shaped ([`NETWORKS`][]).
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
        if self.network == "kernel" and self.cluster_cfg.dense_sync().on_peer_links:
            raise ValueError("cluster.dense_link = separate: the kernel network gives each "
                             "worker one interface, which its ring and its pushes share; run "
                             "the separate peer path on network = token_bucket, or set "
                             "cluster.dense_link=shared")

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
        """The workers' cache (the emulated trainer's: [`SystemSpec.cache_config`][])."""
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


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


LOOPBACK = "tcp://127.0.0.1:"


def loopback_store(init_method: str, rank: int, world_size: int,
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
