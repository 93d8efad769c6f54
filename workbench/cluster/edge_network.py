r"""A real edge network on one machine: network namespaces joined by kernel-shaped veth links.

Every node (the parameter server, each worker, the dispatcher) is a Linux network namespace with
its own stack and address; each joins a bridge in a "switch" namespace over a veth pair, and
the kernel shapes both directions of every link (``tc``: a token-bucket filter for the rate,
netem for delay and jitter where the kernel has it):

      node ps        192.0.2.1   eth0 ==tbf==+                     +==tbf== n0 --+
      node w0        192.0.2.2   eth0 ==tbf==+== veth pairs ==     +==tbf== n1 --+-- br0
      node w1        192.0.2.3   eth0 ==tbf==+                     +==tbf== n2 --+   (switch)
      ...                      (upload: egress of the node's eth0)  (download: egress of its
                                                                     switch port)

A worker's link has its ``cluster.bandwidth_gbps`` and ``latency_ms`` both ways; the server's
link has ``cluster.ps_bandwidth_gbps`` (the clock's server link, shared by every worker's
traffic); the dispatcher's is unshaped (its messages to a worker cross that worker's link, as
the sender-shaped backend charges them). The addresses are the documentation range
192.0.2.0/24 (RFC 5737), which is never routed, and no namespace has a route out: nothing can
leave the machine.

Lifetime: each namespace is created by a *holder* process (``unshare(CLONE_NEWNET)`` and
``sleep``) that the kernel kills when this process dies (``PR_SET_PDEATHSIG``), so the network
disappears with its last process whatever ends the run: [`EdgeNetwork.down`][] (exit, error,
signal) kills the holders, and even a SIGKILL of the launcher takes the holders with it. Nothing
is created in the machine's own namespace, and no namespace is named (``ip netns`` lists
nothing): enter one with ``nsenter --net=/proc/<holder pid>/ns/net`` (the
``workbench network`` command prints the lines).

Where the kernel lacks netem (``CONFIG_NET_SCH_NETEM``), delays cannot be added: the links then
have the veth's own latency (tens of microseconds; [`EdgeNetwork.probe`][] measures it) and
[`EdgeNetwork.latency_applied`][] is False; whoever compares a clock with this network must
evaluate the clock at the latency the links really have ([`EdgeNetwork.effective_latency_ms`][]).

Counters: [`EdgeNetwork.counters`][] reads a node's interface counters from the kernel
(``/proc/<holder>/net/dev``: bytes and packets, both directions), which include the Ethernet,
IP and TCP headers of every packet and the ACKs.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench.cluster.config import ClusterConfig
from workbench.utils.errors import UserError, WorkbenchError
from workbench.utils.signals import exit_on_signals
from workbench.utils.validation import ConfigError

__all__ = ["EdgeNetwork", "LinkSpec", "NetworkError", "NetworkSpec", "NetworkUnavailableError",
           "NodeSpec", "PACKET_HEADER_BYTES", "hold", "read_net_dev"]

log = logging.getLogger(__name__)

SUBNET = "192.0.2"  # RFC 5737 TEST-NET-1: documentation only, never routed
PREFIX = 24
MAX_NODES = 250
MTU = 1500
#: Bytes a packet carries beyond its TCP payload in the interface counters: Ethernet (14), IPv4
#: (20), TCP with the timestamp option (32).
PACKET_HEADER_BYTES = 14 + 20 + 32
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
_HOLDER = ("sleep", "infinity")
_WARNED: list[bool] = []  # the missing netem is said once per process


class NetworkUnavailableError(UserError, RuntimeError):
    """Network namespaces or traffic shaping are not available here (one line: why, and how to
    run anyway)."""


class NetworkError(WorkbenchError, RuntimeError):
    """A command that builds or changes the network failed (the command and its message)."""


@dataclass(frozen=True)
class LinkSpec:
    """One node's link to the switch, the same both ways.

    Attributes:
        bandwidth_gbps: rate in Gb/s (None: unshaped, the veth's own speed).
        latency_ms: one-way delay added per direction (netem; see the module docstring).
        jitter_ms: delay variation (netem's jitter).
    """

    bandwidth_gbps: float | None = None
    latency_ms: float = 0.0
    jitter_ms: float = 0.0

    def __post_init__(self) -> None:
        if self.bandwidth_gbps is not None and not 0 < self.bandwidth_gbps < float("inf"):
            raise ValueError(f"bandwidth_gbps = {self.bandwidth_gbps}: must be a finite "
                             "number > 0 (None: unshaped)")
        for key in ("latency_ms", "jitter_ms"):
            value = getattr(self, key)
            if not 0 <= value < float("inf"):
                raise ValueError(f"{key} = {value}: must be a finite number >= 0")

    def delayed(self, netem: bool) -> bool:
        """Whether the link has a netem delay at its root (with the token bucket below it)."""
        return netem and (self.latency_ms > 0 or self.jitter_ms > 0)

    def tbf_parent(self, netem: bool) -> list[str]:
        """Where the token bucket hangs: below netem (``parent 1: handle 2:``) or at the root."""
        return ["parent", "1:", "handle", "2:"] if self.delayed(netem) else ["root"]

    def qdiscs(self, device: str, netem: bool) -> list[list[str]]:
        """The ``tc`` command lines that shape ``device``'s egress as this link: netem (delay,
        jitter) at the root with the token bucket below it, or the token bucket alone."""
        lines = []
        if self.delayed(netem):
            delay = ["delay", f"{self.latency_ms:g}ms"]
            if self.jitter_ms > 0:
                delay += [f"{self.jitter_ms:g}ms"]
            lines.append(["tc", "qdisc", "add", "dev", device, "root", "handle", "1:",
                          "netem", *delay, "limit", "100000"])
        if self.bandwidth_gbps is not None:
            lines.append(["tc", "qdisc", "add", "dev", device, *self.tbf_parent(netem),
                          *_tbf(self.bandwidth_gbps)])
        return lines


def _tbf(bandwidth_gbps: float) -> list[str]:
    """A token-bucket filter at ``bandwidth_gbps``: the bucket holds 100 us at the rate (at
    least two full frames, so that a frame always fits), the queue one second (at least 2 MB:
    TCP backs off before the queue drops)."""
    rate_Bps = bandwidth_gbps * 1e9 / 8
    burst = max(2 * (MTU + 14), int(rate_Bps * 100e-6))
    limit = max(2 << 20, int(rate_Bps))
    return ["tbf", "rate", f"{int(round(bandwidth_gbps * 1e9))}bit", "burst", str(burst),
            "limit", str(limit)]


@dataclass(frozen=True)
class NodeSpec:
    """A node: its name (a namespace, the interface's peer ``n<i>`` on the switch), its role in
    words, and its link."""

    name: str
    role: str
    link: LinkSpec


@dataclass(frozen=True)
class NetworkSpec:
    """The nodes of a network, in address order (node ``i`` has ``192.0.2.<i + 1>``)."""

    nodes: tuple[NodeSpec, ...]

    def __post_init__(self) -> None:
        if not 1 <= len(self.nodes) <= MAX_NODES:
            raise ValueError(f"a network has 1 to {MAX_NODES} nodes, got {len(self.nodes)}")
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            raise ValueError(f"node names repeat: {names}")

    @classmethod
    def from_cluster(cls, cfg: ClusterConfig, dispatcher: bool = False,
                     jitter_ms: float = 0.0) -> NetworkSpec:
        """The parameter server (``ps``), the workers (``w0`` ..) and optionally a dispatcher
        (``dispatch``), with the links the emulated clock charges (module docstring)."""
        if cfg.workers + 2 > MAX_NODES:
            raise ConfigError(f"cluster.workers = {cfg.workers}: an edge network holds at most "
                              f"{MAX_NODES - 2} workers (one address each in {SUBNET}.0/24)")
        nodes = [NodeSpec("ps", "parameter server", LinkSpec(cfg.ps_bandwidth_gbps))]
        for w, (b, lat) in enumerate(zip(cfg.per_worker("bandwidth_gbps"),
                                         cfg.per_worker("latency_ms"))):
            nodes.append(NodeSpec(f"w{w}", f"worker {w}", LinkSpec(b, lat, jitter_ms)))
        if dispatcher:
            nodes.append(NodeSpec("dispatch", "dispatcher", LinkSpec()))
        return cls(tuple(nodes))

    def index(self, name: str) -> int:
        """Position of node ``name``."""
        for i, node in enumerate(self.nodes):
            if node.name == name:
                return i
        raise KeyError(f"no node {name!r} (nodes: {[n.name for n in self.nodes]})")


# ------------------------------------------------------------------------------------------
# Processes in a namespace
# ------------------------------------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)


def _child_setup(netns_fd: int | None, new_netns: bool, parent_pid: int) -> None:
    """In a child before exec: die with the parent, then enter (or create) a namespace."""
    _libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(1)
    if new_netns and _libc.unshare(CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        os.write(2, f"unshare(CLONE_NEWNET): {os.strerror(err)}\n".encode())
        os._exit(126)
    if netns_fd is not None and _libc.setns(netns_fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        os.write(2, f"setns: {os.strerror(err)}\n".encode())
        os._exit(126)


def _net_inode(pid: int | str) -> int:
    return os.stat(f"/proc/{pid}/ns/net").st_ino


@dataclass
class _Node:
    spec: NodeSpec
    address: str
    holder: subprocess.Popen
    fd: int  # /proc/<holder>/ns/net, open


@dataclass
class EdgeNetwork:
    """The network of ``spec``, built by [`up`][] (or ``with``) and torn down by [`down`][].

    Args:
        spec: the nodes and their links.

    Example:

        spec = NetworkSpec.from_cluster(cluster_cfg)
        with EdgeNetwork(spec) as net:
            proc = net.popen("w0", [sys.executable, "-c", "..."])   # runs inside node w0
            print(net.address("ps"), net.counters("w0"))
    """

    spec: NetworkSpec
    nodes: dict[str, _Node] = field(default_factory=dict, init=False)
    latency_applied: bool = field(default=False, init=False)
    _switch: _Node | None = field(default=None, init=False)

    # -- building ------------------------------------------------------------------------------
    def __enter__(self) -> EdgeNetwork:
        self.up()
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    @staticmethod
    def available() -> str | None:
        """None where a network can be built here, else the reason in one line (with the fix)."""
        missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
        if not sys.platform.startswith("linux"):
            return (f"network namespaces are Linux only (this is {sys.platform}): use the "
                    "token-bucket links (experiments.distributed_check.networks=[token_bucket])")
        if missing:
            return (f"{' and '.join(missing)} not found: install iproute2 (apt install "
                    "iproute2), or use the token-bucket links "
                    "(experiments.distributed_check.networks=[token_bucket])")
        probe = subprocess.run([sys.executable, "-c", "import ctypes,sys;"
                                "l=ctypes.CDLL(None,use_errno=True);"
                                f"r=l.unshare({CLONE_NEWNET});"
                                "sys.exit(0 if r==0 else ctypes.get_errno())"],
                               capture_output=True)
        if probe.returncode != 0:
            return (f"network namespaces are not permitted here (unshare(CLONE_NEWNET): "
                    f"{os.strerror(probe.returncode)}): run as root or with CAP_NET_ADMIN "
                    "(docker run --cap-add NET_ADMIN), or use the token-bucket links "
                    "(experiments.distributed_check.networks=[token_bucket])")
        return None

    def up(self) -> None:
        """Build the namespaces, the links and their shaping; on any failure tear down what
        was built and raise."""
        reason = self.available()
        if reason is not None:
            raise NetworkUnavailableError(reason)
        try:
            self._switch = self._holder(NodeSpec("switch", "switch", LinkSpec()), "")
            self.run("switch", ["ip", "link", "set", "lo", "up"])
            self.run("switch", ["ip", "link", "add", "br0", "type", "bridge"])
            self.run("switch", ["ip", "link", "set", "br0", "up"])
            self.latency_applied = self._has_netem()
            for i, spec in enumerate(self.spec.nodes):
                self._add_node(i, spec)
            if not self.latency_applied and not _WARNED and any(
                    n.link.latency_ms or n.link.jitter_ms for n in self.spec.nodes):
                _WARNED.append(True)
                log.warning("this kernel has no netem (CONFIG_NET_SCH_NETEM): the links are "
                            "shaped in rate only; their latency is the veth's own")
        except BaseException:
            self.down()
            raise

    def _holder(self, spec: NodeSpec, address: str) -> _Node:
        parent = os.getpid()
        holder = subprocess.Popen(_HOLDER, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  preexec_fn=lambda: _child_setup(None, True, parent))
        if holder.poll() is not None:  # exec failed: the namespace could not be made
            message = holder.stderr.read().decode().strip() if holder.stderr else ""
            raise NetworkUnavailableError(f"could not create node {spec.name}'s namespace: "
                                          f"{message or holder.returncode}")
        node = _Node(spec, address, holder, os.open(f"/proc/{holder.pid}/ns/net", os.O_RDONLY))
        if spec.name == "switch":
            self._switch = node
        else:
            self.nodes[spec.name] = node
        return node

    def _has_netem(self) -> bool:
        # a veth pair (the links need veth anyway; a dummy interface may not be built in)
        self.run("switch", ["ip", "link", "add", "probe0", "type", "veth", "peer", "name",
                            "probe1"])
        done = self.run("switch", ["tc", "qdisc", "add", "dev", "probe0", "root", "netem",
                                   "delay", "1ms"], check=False)
        self.run("switch", ["ip", "link", "del", "probe0"], check=False)
        return done.returncode == 0

    def _add_node(self, i: int, spec: NodeSpec) -> None:
        address = f"{SUBNET}.{i + 1}"
        node = self._holder(spec, address)
        port = f"n{i}"
        self.run("switch", ["ip", "link", "add", port, "type", "veth", "peer", "name", "eth0",
                            "netns", str(node.holder.pid)])
        self.run("switch", ["ip", "link", "set", port, "master", "br0", "up"])
        self.run(spec.name, ["ip", "link", "set", "lo", "up"])
        self.run(spec.name, ["ip", "addr", "add", f"{address}/{PREFIX}", "dev", "eth0"])
        self.run(spec.name, ["ip", "link", "set", "eth0", "up"])
        for line in spec.link.qdiscs("eth0", self.latency_applied):
            self.run(spec.name, line)
        for line in spec.link.qdiscs(port, self.latency_applied):
            self.run("switch", line)

    def down(self) -> None:
        """Tear everything down: kill every process in the nodes' namespaces and the holders
        (the namespaces and their links go with their last process). Idempotent."""
        nodes = list(self.nodes.values()) + ([self._switch] if self._switch else [])
        for node in nodes:
            with contextlib.suppress(OSError):
                self._kill_inside(node)
        for node in nodes:
            with contextlib.suppress(OSError):
                node.holder.kill()
            node.holder.wait()
            if node.holder.stderr:
                node.holder.stderr.close()
            with contextlib.suppress(OSError):
                os.close(node.fd)
        self.nodes.clear()
        self._switch = None

    # -- using ---------------------------------------------------------------------------------
    def _node(self, name: str) -> _Node:
        if name == "switch" and self._switch is not None:
            return self._switch
        try:
            return self.nodes[name]
        except KeyError:
            raise KeyError(f"no node {name!r} (nodes: {list(self.nodes)})") from None

    def address(self, name: str) -> str:
        """Node ``name``'s address."""
        return self._node(name).address

    def holder_pid(self, name: str) -> int:
        """The pid of the process holding node ``name``'s namespace (``nsenter --net=/proc/<pid>
        /ns/net`` enters it)."""
        return self._node(name).holder.pid

    def popen(self, name: str, argv: Sequence[str], **kwargs) -> subprocess.Popen:
        """Start ``argv`` inside node ``name``'s namespace; it dies with this process."""
        node = self._node(name)
        parent = os.getpid()
        return subprocess.Popen(list(argv), pass_fds=(node.fd,),
                                preexec_fn=lambda: _child_setup(node.fd, False, parent),
                                **kwargs)

    def run(self, name: str, argv: Sequence[str], check: bool = True
            ) -> subprocess.CompletedProcess:
        """Run ``argv`` inside node ``name``'s namespace to completion; raise
        [`NetworkError`][] with its message if it fails and ``check``."""
        proc = self.popen(name, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL)
        out, err = proc.communicate()
        done = subprocess.CompletedProcess(argv, proc.returncode, out.decode(), err.decode())
        if check and done.returncode != 0:
            raise NetworkError(f"node {name}: `{' '.join(argv)}` failed: "
                               f"{done.stderr.strip() or done.returncode}")
        return done

    def counters(self, name: str) -> dict[str, int]:
        """Node ``name``'s ``eth0`` counters from the kernel: ``rx_bytes``, ``rx_packets``,
        ``tx_bytes``, ``tx_packets`` (headers included)."""
        return read_net_dev(f"/proc/{self.holder_pid(name)}/net/dev")

    def link_state(self, name: str) -> dict:
        """Node ``name``'s link as the kernel has it: ``up`` (the interface and its carrier),
        the egress rate in Gb/s on the node's side and the switch's (None: unshaped), the bytes
        queued and the packets dropped on both."""
        i = self.spec.index(name)
        link = json.loads(self.run(name, ["ip", "-j", "link", "show", "eth0"]).stdout)[0]
        flags = link.get("flags", [])
        state: dict[str, Any] = {"up": "UP" in flags and "LOWER_UP" in flags,
                                 "backlog_bytes": 0, "drops": 0}
        for side, node, device in (("up", name, "eth0"), ("down", "switch", f"n{i}")):
            qdiscs = json.loads(self.run(node, ["tc", "-s", "-j", "qdisc", "show", "dev",
                                                device]).stdout)
            rate = None
            for q in qdiscs:
                if q.get("kind") == "tbf":
                    rate = 8 * q["options"]["rate"] / 1e9
                state["backlog_bytes"] += int(q.get("backlog", 0))
                state["drops"] += int(q.get("drops", 0))
            state[f"{side}_gbps"] = rate
        return state

    def diagnose(self) -> list[tuple[str, str]]:
        """The links that are not as configured: ``(node, what)`` for each one down, slower
        than its spec, or holding queued bytes (a congested link)."""
        problems = []
        for node in self.spec.nodes:
            try:
                state = self.link_state(node.name)
            except (NetworkError, KeyError, ValueError) as err:
                problems.append((node.name, f"its link cannot be read: {err}"))
                continue
            if not state["up"]:
                problems.append((node.name, "its link is down"))
                continue
            want = node.link.bandwidth_gbps
            have = [g for g in (state["up_gbps"], state["down_gbps"]) if g is not None]
            if want is not None and have and min(have) < 0.99 * want:
                problems.append((node.name, f"its link runs at {1e3 * min(have):.3g} Mb/s, "
                                            f"configured {1e3 * want:.3g} Mb/s"))
            elif state["backlog_bytes"] > 0 and want is not None:
                problems.append((node.name, f"{state['backlog_bytes']} bytes queued on its "
                                            "link"))
        return problems

    # -- faults --------------------------------------------------------------------------------
    def set_link(self, name: str, up: bool) -> None:
        """Take node ``name``'s link down (its ``eth0``: both ends lose the carrier) or up."""
        self.run(name, ["ip", "link", "set", "eth0", "up" if up else "down"])

    def set_rate(self, name: str, bandwidth_gbps: float) -> None:
        """Change node ``name``'s link rate (both directions) to ``bandwidth_gbps``."""
        i = self.spec.index(name)
        parent = self.spec.nodes[i].link.tbf_parent(self.latency_applied)
        for node, device in ((name, "eth0"), ("switch", f"n{i}")):
            verb = "change" if self._has_tbf(node, device) else "add"
            self.run(node, ["tc", "qdisc", verb, "dev", device, *parent,
                            *_tbf(bandwidth_gbps)])

    def _has_tbf(self, name: str, device: str) -> bool:
        qdiscs = json.loads(self.run(name, ["tc", "-j", "qdisc", "show", "dev",
                                            device]).stdout)
        return any(q.get("kind") == "tbf" for q in qdiscs)

    def _pids_inside(self, node: _Node) -> list[int]:
        inode = os.fstat(node.fd).st_ino
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == node.holder.pid:
                continue
            with contextlib.suppress(OSError):
                if _net_inode(entry) == inode:
                    pids.append(int(entry))
        return pids

    def kill_node(self, name: str) -> list[int]:
        """SIGKILL every process inside node ``name`` (a node that dies); the pids killed."""
        return self._kill_inside(self._node(name))

    def _kill_inside(self, node: _Node) -> list[int]:
        pids = self._pids_inside(node)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return pids

    # -- measuring -----------------------------------------------------------------------------
    def probe(self, name: str, server: str = "ps", pings: int = 20, nbytes: int = 1 << 20
              ) -> dict[str, float]:
        """Round trip (median of ``pings`` 1-byte TCP exchanges) and upload throughput
        (``nbytes``) from node ``name`` to node ``server``, measured."""
        port = 5201
        listener = self.popen(server, [sys.executable, "-c", _PROBE_SERVER, str(port)],
                              stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        try:
            assert listener.stdout is not None
            listener.stdout.readline()  # "ready"
            out = self.run(name, [sys.executable, "-c", _PROBE_CLIENT, self.address(server),
                                  str(port), str(pings), str(nbytes)]).stdout
        finally:
            listener.kill()
            listener.wait()
            if listener.stdout:
                listener.stdout.close()
        rtt_s, seconds = (float(v) for v in out.split())
        return {"rtt_ms": 1e3 * rtt_s, "throughput_gbps": 8 * nbytes / seconds / 1e9}

    def effective_latency_ms(self, name: str) -> float:
        """The one-way latency node ``name``'s link really has: its configured latency where
        netem applied it, else half the round trip a probe measures."""
        if self.latency_applied:
            return self._node(name).spec.link.latency_ms
        return self.probe(name, pings=50, nbytes=1)["rtt_ms"] / 2

    def describe(self) -> list[dict]:
        """One row per node: name, role, address, configured link, holder pid."""
        return [{"node": n.spec.name, "role": n.spec.role, "address": n.address,
                 "bandwidth_gbps": n.spec.link.bandwidth_gbps,
                 "latency_ms": n.spec.link.latency_ms, "latency_applied": self.latency_applied,
                 "holder_pid": n.holder.pid} for n in self.nodes.values()]


def read_net_dev(path: str, device: str = "eth0") -> dict[str, int]:
    """``device``'s byte and packet counters from a ``/proc/net/dev`` file (own namespace:
    ``/proc/net/dev``; another process's: ``/proc/<pid>/net/dev``)."""
    with open(path) as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name.strip() == device:
                v = [int(x) for x in rest.split()]
                return {"rx_bytes": v[0], "rx_packets": v[1], "tx_bytes": v[8],
                        "tx_packets": v[9]}
    raise KeyError(f"{path}: no interface {device}")


_PROBE_SERVER = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(1); print("ready", flush=True)
c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while True:
    b = c.recv(1 << 16)
    if not b: break
    if b == b"p": c.sendall(b"p")
    elif b.endswith(b"!"): c.sendall(b"k")
"""

_PROBE_CLIENT = """
import socket, sys, time, statistics
c = socket.create_connection((sys.argv[1], int(sys.argv[2])))
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
rtts = []
for _ in range(int(sys.argv[3])):
    t = time.perf_counter(); c.sendall(b"p"); c.recv(1); rtts.append(time.perf_counter() - t)
n = int(sys.argv[4]); data = b"x" * (n - 1) + b"!"
t = time.perf_counter(); c.sendall(data); c.recv(1); took = time.perf_counter() - t
print(statistics.median(rtts), took)
"""


def hold(spec: NetworkSpec, seconds: float | None = None, probe: bool = True,
         title: str = "edge network", out=print) -> None:
    """Build ``spec``'s network, print its nodes (address, link, measured round trip and upload
    rate, the line that enters each) and hold it until Ctrl-C, SIGTERM or ``seconds``; tear it
    down either way (the ``workbench network`` command)."""
    with exit_on_signals(), EdgeNetwork(spec) as net:
        latency = ("applied (netem)" if net.latency_applied else
                   "NOT applied (this kernel has no netem): the veths' own")
        out(f"{title}: {len(spec.nodes)} nodes, latency {latency}")
        for row in net.describe():
            rate = (f"{1e3 * row['bandwidth_gbps']:g} Mb/s" if row["bandwidth_gbps"]
                    else "unshaped")
            line = (f"  {row['node']:<9} {row['role']:<17} {row['address']:<12} {rate:>12}"
                    f"  {row['latency_ms']:g} ms")
            if probe and row["node"] != "ps":
                p = net.probe(row["node"], nbytes=_probe_bytes(row["bandwidth_gbps"]))
                line += (f"   measured: rtt {p['rtt_ms']:.3f} ms, "
                         f"{1e3 * p['throughput_gbps']:.3g} Mb/s up")
            out(line + f"   nsenter --net=/proc/{row['holder_pid']}/ns/net")
        out("holding the network; Ctrl-C tears it down" if seconds is None
            else f"holding the network for {seconds:g} s")
        deadline = None if seconds is None else time.monotonic() + seconds
        with contextlib.suppress(KeyboardInterrupt):
            while deadline is None or time.monotonic() < deadline:
                time.sleep(0.2)
    out("network torn down")


def _probe_bytes(bandwidth_gbps: float | None) -> int:
    """A probe transfer of about 0.2 s at the link's rate (1 to 64 MB)."""
    if bandwidth_gbps is None:
        return 64 << 20
    return int(min(64 << 20, max(1 << 20, 0.2 * bandwidth_gbps * 1e9 / 8)))
