"""The distributed backend: the emulated cluster's training run on real processes.

``cluster.backend = distributed`` runs W + 1 processes (W + 2 with a dispatcher process), gloo
backend, on one of two networks (``DistributedJob.network``):

* ``token_bucket``: every process started on this machine on the loopback interface, each link
  shaped in its sender ([`workbench.cluster.shaped_link`][]); the ranks fork from a
  forkserver that imported their modules once per launcher, or are spawned where there is none
  ([`rank_server`][workbench.training.rank_server]);
* ``kernel``: one node per process on an [`EdgeNetwork`][workbench.cluster.edge_network.EdgeNetwork]
  (a network namespace each, veth links the kernel shapes with ``tc``), one ``torchrun`` per
  node joined by torchrun's static rendezvous on the server node (``--nnodes``,
  ``--node-rank``, ``--rdzv-endpoint 192.0.2.1:29500``), no sending is delayed by this code:

    launcher ── EdgeNetwork ── node ps (192.0.2.1):  torchrun ── rank 0
       │                       node w0 (192.0.2.2):  torchrun ── rank 1      gloo over the
       │                       ...                                           kernel-shaped veths
       └─ nameless files: the job and samples, the liveness table, one output per rank
          (each rank opens them as /proc/<launcher>/fd/<n>)

Roles:

    rank 0          parameter server    HET pulls / pushes with per-row versions
                                        (workbench.cluster.remote_ps), one shaped link per worker
    rank 1 .. W     edge worker w-1     RemoteCache (the emulator's cache kernels), the model,
                                        forward + backward on ITS samples, dense gradients
                                        averaged with a real all_reduce (gloo, workers' group)
    rank W + 1      dispatcher          (cost-aware dispatch only) decides each global batch on a
                                        replica of the caches' metadata and sends every worker
                                        its sample positions; runs ahead of the workers, so its
                                        decision time overlaps training for real

One BSP iteration of worker w:

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
([`workbench.training.trainer.initial_parameters`][], the same seeds), the per-sample loss is the
same (``sum / global batch`` per worker; the dense gradients summed = the batch mean), so the
counters match the emulated run exactly and the parameters within the float tolerance of the
reduction order ([`workbench.experiments.distributed_check`][] checks both).

Failure ([`workbench.training.supervision`][]): every collective and point-to-point call times
out after ``timeout_s``. The launcher supervises the processes through a shared table
([`Liveness`][]): each sends a heartbeat from a
thread of its own and marks the calls in which it waits on a peer. It stops the run (SIGKILL to
every process) and names the process at fault when one

* dies (a signal, an exit code): [`DistributedProcessError`][];
* sends no heartbeat for ``timeout_s`` (stopped by SIGSTOP or a debugger, frozen): the same;
* stays busy outside any wait on a peer for ``timeout_s`` (hung in its own code): the same;
* raises: [`DistributedRunError`][] with its traceback (a peer that raised because a stopped
  or hung process made it time out is not blamed: the silent one is);

and when the run passes ``deadline_s``. On the kernel network a failure that is not a death is
blamed on the link the kernel shows broken when there is one (down, slower than configured,
bytes queued): ``worker 0 (rank 1, node w0, 192.0.2.2): its link is down``; the launcher
injects the network faults of the tests ([`NETWORK_FAULTS`][]) itself, holding the faulty
rank at the fault's iteration until it is applied. A process that loses its launcher (killed,
even by SIGKILL) is killed by the kernel at once (``PR_SET_PDEATHSIG`` on its parent: the
launcher, or the forkserver, which exits when its launcher does; elsewhere its heartbeat
thread notices the new parent), and the processes hand their results back in files that never have a
name ([`NamelessFile`][workbench.training.supervision.NamelessFile]), so nothing of a run outlives
it: no process, no temporary file.

On machines of your own the same ranks run under ``torchrun`` per machine
(`torchrun_main`, every rank reading the job from a file; ``docs/distributed.md``).
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from workbench.cluster.edge_network import (
    EdgeNetwork,
    LinkSpec,
    NetworkSpec,
    NodeSpec,
)
from workbench.training.distributed_job import (
    NETWORK_FAULTS,
    NETWORKS,
    RENDEZVOUS_PORT,
    SERVER_RANK,
    DistributedJob,
    DistributedResult,
    Fault,
    free_port,
)
from workbench.training.rank_server import rank_context
from workbench.training.ranks import rank_main, role_of
from workbench.training.supervision import (
    DirOutput,
    DistributedProcessError,
    DistributedRunError,
    Liveness,
    NamelessFile,
    NodeProcess,
    ProcessDiedError,
    Supervisor,
)
from workbench.training.trainer import Split

__all__ = ["NETWORKS", "DistributedJob", "DistributedProcessError", "DistributedResult",
           "DistributedRunError", "Fault", "Liveness", "run_distributed", "save_job",
           "torchrun_main"]

def run_distributed(job: DistributedJob, train: Split, fault: Fault | None = None
                    ) -> DistributedResult:
    """Run ``job`` on ``train``, one process per rank, on the job's network; collect the result.

    ``token_bucket``: every rank a process of this machine, on its loopback, links shaped in the
    senders. ``kernel``: an [`EdgeNetwork`][workbench.cluster.edge_network.EdgeNetwork] of one node
    per rank, one ``torchrun`` per node (static rendezvous on the server node), torn down after.

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
    roles = [role_of(job, rank) for rank in range(job.world_size)]
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
    """Every rank a process of this machine ([`rank_context`][]), on the loopback; their
    outputs and the wall time."""
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo" if os.path.exists("/sys/class/net/lo")
                          else "lo0")
    init_method = f"tcp://127.0.0.1:{free_port()}"
    ctx, parent = rank_context()
    processes = [ctx.Process(target=rank_main, name=f"workbench-dist-rank{rank}", daemon=True,
                             args=(rank, job, samples, init_method, outputs[rank], fault,
                                   liveness, parent))
                 for rank in range(job.world_size)]
    supervisor = Supervisor(roles, processes, liveness, outputs, job.timeout_s, job.deadline_s)
    start = time.perf_counter()
    try:
        # the launcher's environment as it is now (the forkserver's is that of its start)
        samples.write({"train": train, "environ": dict(os.environ)})
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
    """The launcher's network fault ([`NETWORK_FAULTS`][]): the faulty rank (worker 0 for the
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
    rank_main(rank, job, train, "env://", DirOutput(str(Path(job_path).parent), rank), None)


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
    rank_main(rank, job, payload["train"], "env://", output, payload["fault"], liveness,
           parent_pid=os.getppid())


def save_job(job: DistributedJob, train: Split, path: str | Path) -> None:
    """Write ``(job, train)`` for `torchrun_main` (copy it to every machine)."""
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
