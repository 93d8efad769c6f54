"""HET's cache protocol between real processes: a parameter-server process and the workers'
caches, over [`workbench.cluster.wire`][].

The worker runs the very kernels of [`workbench.cluster.cache`][] against a local *mirror* of
the server, refreshed before every read from the real server's answer; the push log of the
kernels says exactly which rows a write pushed:

    worker w (RemoteCache)                                   server (serve_parameter_server)
    read(K):  U = unique(K); v_u = line version (miss: -inf)
              PULL  U, v_U            16 B/key  ----------->  pull_u = ver[u] - v_u > s_r
              mirror[u] <- rows       <-----------  PULL_REPLY mask (1 bit/key),
                                                              ver[pulled] (8 B), rows (4D B)
              cache kernel: read K (decisions = the server's, from the mirror)
    write(K, G): cache kernel: write; push log = rows it pushed
              PUSH  keys, updates, grad rows  --------->  buffered until every worker of the
                                                          round has pushed, then applied in rank
              wait  <----------------------------- ACK    order (value += grad, ver += updates);
                                                          then every worker is acknowledged
    flush():  one more PUSH round;  DONE when finished

Bulk-synchronous: a worker's next read can only start after the ACK, which the server sends once
all pushes of the round are applied -- the emulator's "every push of step t lands before any read
of step t + 1". Applying a round in rank order makes the server's table the same, bit for bit, as
the emulated one given the same pushes. Pulled and pushed rows are the emulator's by construction
(the same kernels decide); the bytes differ from the clock's accounting
([`workbench.cluster.time_model`][]: 16 B per key read, 4D B per row, 16 B per pushed row's key
and count) only by what the real protocol must also carry: the reply's mask and the 8-byte
version of each pulled row, and a header per message.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from workbench.cluster.cache import LINE_VERSION, CacheSpec, ParameterServer, WorkerCache
from workbench.cluster.wire import Endpoint

__all__ = ["Op", "RemoteCache", "ServerResult", "serve_parameter_server"]

MISS_VERSION = -(2 ** 62)  # a key the worker does not cache: always pulled


class Op:
    """Message opcodes of the protocol."""

    PULL, PULL_REPLY, PUSH, PUSH_ACK, DONE = 1, 2, 3, 4, 5


@dataclass
class ServerResult:
    """What the server process returns: the final table, versions and its traffic."""

    values: np.ndarray
    versions: np.ndarray
    traffic: dict[str, int]
    pulls_served: int = 0
    push_rounds: int = 0
    busy_s: float = 0.0
    push_arrivals: list[tuple[int, int, float]] = field(default_factory=list)


def serve_parameter_server(endpoint: Endpoint, values: np.ndarray, workers: list[int],
                           read_bound: int, on_round=None) -> ServerResult:
    """Serve pulls and pushes until every worker in ``workers`` (ranks) has sent DONE.

    Args:
        endpoint: the server's message endpoint (threaded, with one shaped link per worker).
        values: the initial table ``[rows, D]``.
        workers: the worker ranks.
        read_bound: the read staleness bound s_r (a pull iff ``ver - version > s_r``).
        on_round: called with the round number before each push round is applied (a hook for
            fault injection and progress), or None.

    Returns:
        The final table and versions, and the traffic the server saw.
    """
    server = ParameterServer(values)
    active = set(workers)
    pending: dict[int, list[np.ndarray]] = {}
    result = ServerResult(server.values, server.versions, {})
    while active:
        message = endpoint.recv()
        start, start_mono = time.perf_counter(), time.monotonic()
        if message.op == Op.PULL:
            keys, versions = message.arrays
            mask = server.versions[keys] - versions > read_bound
            pulled = keys[mask]
            endpoint.send(message.src, Op.PULL_REPLY, message.iteration, [
                (np.packbits(mask), "meta"), (server.versions[pulled], "meta"),
                (server.values[pulled], "rows")])
            result.pulls_served += 1
        elif message.op == Op.PUSH:
            # when the push had fully arrived (time.monotonic: one clock for every process of
            # the machine, whatever its network namespace): the worker's send start to here is
            # the push's time on the wire, even where the sender's socket buffered it
            result.push_arrivals.append((message.src, result.push_rounds, start_mono))
            if message.src in pending:
                raise RuntimeError(f"rank {message.src} pushed twice in one round")
            pending[message.src] = message.arrays
            if set(pending) >= active:
                if on_round is not None:
                    on_round(result.push_rounds)
                for rank in sorted(pending):  # rank order: the emulator's order
                    keys, updates, grads = pending[rank]
                    np.add.at(server.values, keys, grads)
                    np.add.at(server.versions, keys, updates)
                for rank in sorted(pending):
                    endpoint.send(rank, Op.PUSH_ACK, message.iteration)
                pending.clear()
                result.push_rounds += 1
        elif message.op == Op.DONE:
            active.discard(message.src)
        else:
            raise RuntimeError(f"unknown opcode {message.op} from rank {message.src}")
        result.busy_s += time.perf_counter() - start
    endpoint.close()
    result.traffic = endpoint.traffic()
    return result


@dataclass
class PhaseTimes:
    """Wall seconds a worker spent in each protocol phase (cumulative): a pull exchange, a push
    until it has left (``push_send_s``: handed to the socket) and until the round's ACK
    (``push_s``: includes the wait for the other workers' pushes); and when the latest push
    began (``time.monotonic``, to set against the server's arrival time)."""

    pull_s: float = 0.0
    push_send_s: float = 0.0
    push_s: float = 0.0
    push_started: float = 0.0


class RemoteCache:
    """A worker's HET cache whose parameter server is another process.

    Args:
        spec: policy, capacity and bounds (the same as the emulated run's).
        rows: rows of the table.
        dim: row width D.
        endpoint: this worker's endpoint (its link towards the server shaped).
        server_rank: the server's rank.

    The mirror is a full ``[rows, D]`` table per worker process (the kernels index rows by
    key), so the distributed backend is for validation-sized tables.
    """

    def __init__(self, spec: CacheSpec, rows: int, dim: int, endpoint: Endpoint,
                 server_rank: int = 0) -> None:
        self.mirror = ParameterServer(np.zeros((rows, dim), np.float32))
        self.cache = WorkerCache(spec, self.mirror, log_pushes=True)
        self.endpoint = endpoint
        self.server_rank = server_rank
        self.times = PhaseTimes()
        self.iteration = 0

    @property
    def counters(self) -> np.ndarray:
        """The cache's cumulative counters ([`workbench.cluster.cache.COUNTERS`][])."""
        return self.cache.counters

    def read(self, keys: np.ndarray) -> np.ndarray:
        """Read ``keys`` through the cache, pulling what the server says is missing or stale."""
        start = time.perf_counter()
        keys = np.ascontiguousarray(keys, dtype=np.int64)
        uniq = np.unique(keys)
        slot = self.cache.slot_of[uniq]
        present = slot >= 0
        line_version = np.where(present, self.cache.lines[np.maximum(slot, 0), LINE_VERSION],
                                MISS_VERSION)
        self.endpoint.send(self.server_rank, Op.PULL, self.iteration,
                           [(uniq, "meta"), (line_version, "meta")])
        reply = self.endpoint.recv(self.server_rank)
        packed, versions, values = reply.arrays
        mask = np.unpackbits(packed, count=len(uniq)).astype(bool)
        pulled = uniq[mask]
        self.mirror.versions[pulled] = versions
        self.mirror.values[pulled] = values
        kept = present & ~mask  # cached and fresh enough: the kernel must not pull it
        self.mirror.versions[uniq[kept]] = line_version[kept]
        self.times.pull_s += time.perf_counter() - start
        return self.cache.read(keys)

    def write(self, keys: np.ndarray, grads: np.ndarray) -> None:
        """Apply update rows through the cache, push what it pushes, wait for the round."""
        self.cache.write(keys, grads)
        self._push_round()

    def flush(self) -> None:
        """Push every dirty line (one more round)."""
        self.cache.flush()
        self._push_round()

    def _push_round(self) -> None:
        start = time.perf_counter()
        self.times.push_started = time.monotonic()
        keys, updates, grads = self.cache.pushes()
        self.endpoint.send(self.server_rank, Op.PUSH, self.iteration,
                           [(keys, "meta"), (updates, "meta"), (grads, "rows")])
        self.times.push_send_s += time.perf_counter() - start
        ack = self.endpoint.recv(self.server_rank)
        if ack.op != Op.PUSH_ACK:
            raise RuntimeError(f"expected PUSH_ACK from the server, got opcode {ack.op}")
        self.times.push_s += time.perf_counter() - start
        self.iteration += 1

    def done(self) -> None:
        """Tell the server this worker has finished."""
        self.endpoint.send(self.server_rank, Op.DONE, self.iteration)
        self.endpoint.flush()
