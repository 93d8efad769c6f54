"""What each rank of a distributed run executes ([`workbench.training.distributed`][] launches
them): rank 0 the parameter server, ranks 1..W the edge workers (their caches, the model, the
dense all_reduce), rank W + 1 the dispatcher ([`rank_main`][] is every rank's entry)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from workbench.cluster.cache import COUNTERS
from workbench.cluster.edge_cluster import EdgeCluster
from workbench.cluster.edge_network import (
    read_net_dev,
)
from workbench.cluster.remote_ps import RemoteCache, serve_parameter_server
from workbench.cluster.shaped_link import ShapedLink
from workbench.cluster.time_model import BYTES_PER_FLOAT
from workbench.cluster.wire import Endpoint
from workbench.dispatch.base import BaselineDispatcher, baseline
from workbench.models.ctr import dense_parameter_count
from workbench.models.recipe import Recipe
from workbench.training.dense_reducer import DenseReducer
from workbench.training.distributed_job import (
    DISPATCH_OP,
    NETWORK_FAULTS,
    SERVER_RANK,
    DistributedJob,
    Fault,
    loopback_store,
    worker_links,
)
from workbench.training.supervision import (
    DirOutput,
    Liveness,
    NamelessFile,
    die_with_parent,
    write_error,
)
from workbench.training.trainer import Split, dense_optimizer, initial_parameters


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


def role_of(job: DistributedJob, rank: int) -> str:
    if rank == SERVER_RANK:
        return "parameter server"
    if rank <= job.workers:
        return f"worker {rank - 1}"
    return "dispatcher"


def _ring_link(job: DistributedJob, endpoint: Endpoint, bandwidth: float, latency: float
               ) -> tuple[ShapedLink | None, float | None]:
    """The dense ring's sender-side link on the token-bucket network (None: unshaped, or the
    kernel shapes it) and, for a link shared with the pushes, the ring's latency on it.

    ``concurrent`` on a shared link waits in the worker's own link to the server (the pushes'
    bucket) with the ring's ``2 (W - 1)`` latencies; a separate peer path, or any other mode,
    in a link of its own.
    """
    if not (job.shaped and job.network == "token_bucket"):
        return None, None
    sync, steps = job.cluster_cfg.dense_sync(), 2 * (job.workers - 1)
    if sync.on_peer_links:
        return ShapedLink(sync.peer_bandwidth_gbps * 1e9 / 8,
                          steps * sync.peer_latency_ms * 1e-3), None
    if sync.mode == "concurrent":
        return endpoint.links[SERVER_RANK], steps * latency
    return ShapedLink(bandwidth, steps * latency), None


def rank_main(rank: int, job: DistributedJob, train: Split | NamelessFile, init_method: str,
           output: NamelessFile | DirOutput, fault: Fault | None,
           liveness: Liveness | None = None, parent_pid: int | None = None) -> None:
    """Body of every process: join the group, run the role, write the result to ``output``.

    ``train`` is the split, or the launcher's file holding it (``{"train": split}``, and the
    launcher's ``environ`` at the launch: a rank forked from a forkserver started earlier
    takes it on before joining the group).

    Under the launcher (``liveness`` given) the process dies with its parent (the launcher, the
    forkserver it forked from, or its node's torchrun agent), beats, and on an error writes it
    and exits at once.
    """
    if parent_pid is not None:
        die_with_parent(parent_pid)
    if liveness is not None:
        liveness.start(rank, parent_pid)
    waiting = liveness.waiting if liveness is not None else contextlib.nullcontext
    torch.set_num_threads(1)
    start = time.perf_counter()
    try:
        handed: dict[str, Any] = (train.read() if isinstance(train, NamelessFile)
                                  else {"train": train})
        os.environ.update(handed.get("environ", {}))  # before gloo reads its settings
        split = handed["train"]
        with waiting():
            timeout = timedelta(seconds=job.timeout_s)
            store = loopback_store(init_method, rank, job.world_size, timeout)
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
    cache = RemoteCache(job.cache_spec(), job.table_rows, cfg.row_width, endpoint)
    model, _ = initial_parameters(cfg, job.n_dense, job.n_sparse, job.table_rows, job.seed)
    optimizer = dense_optimizer(cfg, model)
    dense_bytes = BYTES_PER_FLOAT * dense_parameter_count(model)
    ring_bytes = int(2 * (workers - 1) / workers * dense_bytes)  # each way (ring)
    ring, ring_latency = _ring_link(job, endpoint, bandwidth, latency)
    reducer = DenseReducer(  # the all_reduce's sender side shaped on the token-bucket network
        model, group, job.cluster_cfg.dense_mode, ring, job.cluster_cfg.bucket_mb,
        job.cluster_cfg.first_bucket_mb, waiting, ring_latency)
    speed = float(job.cluster_cfg.per_worker("speed")[w])
    # the emulated trainer's dispatch stream, drawn by every worker (no dispatcher process)
    own = None if job.has_dispatcher else baseline(job.dispatcher)(
        workers, job.capacity_array(), job.seed)
    f, dim = job.n_sparse, cfg.row_width
    hetu = cfg.recipe == Recipe.HETU
    row_step = cfg.row_step(workers, through_ps=True)  # the rows go through the server
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
                                                          labels=labels,
                                                          batch=len(pos) if hetu else batch),
                                        1.0 / speed - 1.0)
        if not reducer.deferred:
            optimizer.step()
        compute_s = reducer.timing.compute_s
        allreduce_s = time.perf_counter() - t1 - compute_s
        t3 = time.perf_counter()
        assert emb_t.grad is not None  # emb_t requires grad: backward() set it
        updates = row_step * emb_t.grad.numpy()
        cache.write(keys, updates.reshape(-1, dim))
        push_s = time.perf_counter() - t3
        if reducer.deferred:  # concurrent: the sum ran beside the push; wait for what is left
            t4 = time.perf_counter()
            reducer.finish()
            optimizer.step()
            allreduce_s = time.perf_counter() - t4
        dense = reducer.timing
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
    """A worker's share of the batch loss: ``sum / batch``. The workbench recipe divides by the
    global batch (summed over workers = the batch mean, as in the emulated trainer); Hetu's by
    the worker's own samples (summed over workers = Hetu's NCCL sum of each worker's
    ``reduce_mean``)."""
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
