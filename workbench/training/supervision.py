r"""Supervision of a distributed run's processes: heartbeats, the launcher's death, nameless
outputs, and the error that names the process at fault.

The launcher ([`workbench.training.distributed`][]) starts one process per rank -- on this
machine from a forkserver ([`workbench.training.rank_server`][]), or one ``torchrun`` per
node of a kernel-shaped edge network ([`workbench.cluster.edge_network`][]) -- and watches
them through a [`Liveness`][] table in a shared nameless file:

    process (each rank)                         launcher (Supervisor.wait)
    heartbeat thread: beat <- now every 0.1 s   poll every 0.1 s:
    waiting(): busy <- 0 inside a peer wait       a process exited != 0   -> who died / raised
    iteration <- the step it is at                no beat for timeout_s   -> stopped or frozen
    output file <- result | error + time          busy for timeout_s      -> hangs in its code
                                                  past deadline_s          -> the deadline

and stops them all (SIGKILL) on the first of these, with one line that names the process (role,
rank, node where there are nodes, pid) and what happened. A process dies with its launcher
(``PR_SET_PDEATHSIG``); its files never have a name ([`NamelessFile`][]): nothing of a run
outlives it.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import pickle
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing import connection, reduction
from pathlib import Path

import numpy as np

from workbench.utils.errors import UserError, WorkbenchError

__all__ = ["DirOutput", "DistributedProcessError", "DistributedRunError", "Liveness",
           "NamelessFile", "NodeProcess", "ProcessDiedError", "Supervisor", "die_with_parent",
           "write_error"]

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


class ProcessDiedError(DistributedProcessError):
    """A process of a distributed run died (a signal, an exit code) without raising."""



_STARTED, _BEAT, _BUSY, _ITERATION, _PID, _HOLD = range(6)
_COLUMNS = 6


class NamelessFile:
    """A file without a name, which another process inherits by descriptor (``multiprocessing``
    passes it to the forkserver or the spawned child) or opens by
    its launcher's ``/proc/<pid>/fd/<fd>`` (a process under ``torchrun``, in another network
    namespace): the launcher hands the samples over in one, each process its result (or its
    error) in another, and the [`Liveness`][] table lives in one.

    Made by `tempfile.TemporaryFile` (``O_TMPFILE`` on Linux: it never has a name;
    elsewhere unlinked at once), it lives exactly as long as a process holds it open: whatever
    kills the launcher or a process, no temporary file is left behind. One process writes it;
    readers map it (never the shared file offset), so several may read at once. The samples go
    this way rather than through the spawn pipe: a process stopped before reading its pipe would
    block the launcher's write there, before any supervision.
    """

    def __init__(self) -> None:
        self.file = tempfile.TemporaryFile(prefix="workbench-dist-")

    @classmethod
    def open(cls, path: str) -> NamelessFile:
        """Open the launcher's file by its ``/proc`` path ([`path`][])."""
        nameless = cls.__new__(cls)
        nameless.file = open(path, "r+b")  # noqa: SIM115 - closed by close()
        return nameless

    @property
    def path(self) -> str:
        """Where another process of this machine opens it: ``/proc/<pid>/fd/<fd>``."""
        return f"/proc/{os.getpid()}/fd/{self.file.fileno()}"

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


def _inherit_file(dup) -> NamelessFile:
    nameless = NamelessFile.__new__(NamelessFile)
    nameless.file = os.fdopen(dup.detach(), "r+b")
    return nameless


class Liveness:
    """What the launcher sees of each process: one row of doubles per rank in a shared
    [`NamelessFile`][], mapped by the launcher and by every process.

    Columns, in ``time.monotonic()`` seconds (one clock for every process of the machine), 0 for
    "not yet":

    * ``started``: when the process began its body;
    * ``beat``: its latest heartbeat, written every [`HEARTBEAT_S`][] by a thread of its own:
      a process stopped (SIGSTOP, a debugger) or frozen stops beating;
    * ``busy``: when its main thread last came back from a call that waits on a peer (0 while
      inside one): a process busy for long outside any such call hangs in its own code;

    and three more: the iteration the process has begun ([`at`][]), its pid, and the
    iteration at whose start the launcher wants it to pause ([`hold`][]: the launcher injects
    a network fault there, then releases it).

    Args:
        world: processes of the run.
        file: the shared file (None: a new one, sized for ``world``).
    """

    def __init__(self, world: int, file: NamelessFile | None = None) -> None:
        self.world = world
        if file is None:
            file = NamelessFile()
            file.file.truncate(8 * _COLUMNS * world)
        self.file = file
        self._map = mmap.mmap(file.file.fileno(), 8 * _COLUMNS * world)
        self.table = np.frombuffer(self._map, np.float64).reshape(world, _COLUMNS)
        self._rank = -1
        self._depth = 0

    def __reduce__(self):
        return Liveness, (self.world, self.file)

    def close(self) -> None:
        """Unmap the table and close this process's handle of its file."""
        del self.table
        with contextlib.suppress(BufferError):  # a view of the table still held elsewhere
            self._map.close()
        self.file.close()

    # -- in the process -------------------------------------------------------------------------
    def start(self, rank: int, parent_pid: int | None) -> None:
        """Begin beating as ``rank`` (a daemon thread); with ``parent_pid``, kill this process
        as soon as its parent is no longer ``parent_pid`` (the launcher died)."""
        self._rank = rank
        now = time.monotonic()
        for column in (_BEAT, _BUSY, _STARTED):  # started last: a reader that sees it started
            self._set(column, now)                # sees its beat too
        self._set(_PID, os.getpid())
        threading.Thread(target=self._beat, args=(parent_pid,), daemon=True,
                         name="heartbeat").start()

    def _set(self, column: int, value: float) -> None:
        self.table[self._rank, column] = value

    def _beat(self, parent_pid: int | None) -> None:
        while True:
            if parent_pid is not None and os.getppid() != parent_pid:
                os.kill(os.getpid(), signal.SIGKILL)
            self._set(_BEAT, time.monotonic())
            time.sleep(HEARTBEAT_S)

    def at(self, iteration: int) -> None:
        """Record that this process has begun ``iteration``; if the launcher holds it there,
        wait (as on a peer) until the launcher releases it."""
        self._set(_ITERATION, iteration + 1)
        if self.table[self._rank, _HOLD] == iteration + 1:
            with self.waiting():
                while self.table[self._rank, _HOLD] == iteration + 1:
                    time.sleep(0.005)

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
    def iteration(self, rank: int) -> int:
        """The iteration ``rank`` has begun (-1 before the first)."""
        return int(self.table[rank, _ITERATION]) - 1

    def hold(self, rank: int, iteration: int) -> None:
        """Have ``rank`` pause at the start of ``iteration`` until [`release`][]."""
        self.table[rank, _HOLD] = iteration + 1

    def release(self, rank: int) -> None:
        """Let ``rank`` go on."""
        self.table[rank, _HOLD] = 0

    def pid(self, rank: int) -> int | None:
        """The pid ``rank`` reported (None before it started)."""
        pid = int(self.table[rank, _PID])
        return pid or None

    def lost(self, ranks: list[int], now: float, seconds: float
             ) -> tuple[int, str, float] | None:
        """The process of ``ranks`` without a sign of progress for more than ``seconds``:
        ``(rank, how, for how long)``, or None.

        No progress: no heartbeat (a process that never started counts from the first process's
        start), or busy outside any wait on a peer. ``how`` is ``silent`` when the heartbeat has
        been missing for [`BLAME_FRACTION`][] of that time or more (stopped or frozen, maybe
        while busy), else ``busy`` (hung in its own code). Silent ones come first (one busy may
        be held by a stopped peer, in a send), then the one lost longest.
        """
        table = self.table
        started = table[:, _STARTED]
        if not (started > 0).any() or not ranks:
            return None
        sel = np.asarray(ranks)
        row = table[sel]
        # a started process without a beat yet counts from its start (never from the clock's
        # zero: a row read while the process writes it must not read as hours of silence)
        beat = np.where(row[:, _BEAT] > 0, row[:, _BEAT], row[:, _STARTED])
        silent = now - np.where(row[:, _STARTED] > 0, beat, started[started > 0].min())
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


def die_with_parent(parent_pid: int) -> None:
    """Have the kernel SIGKILL this process the moment its parent dies (Linux
    ``PR_SET_PDEATHSIG``, which also replaces torch's SIGINT there: a signal a process stuck in
    a gloo call would only act on after its timeout); elsewhere the heartbeat thread checks the
    parent ([`Liveness.start`][])."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before the prctl took effect
        os.kill(os.getpid(), signal.SIGKILL)


def write_error(output, exiting: bool) -> None:
    """Write the exception being handled, with the time, to ``output`` (the first error in
    time is the cause; the others' "connection closed" follow it); with ``exiting``, leave at
    once (the launcher stops the others; leaving the group could wait on them)."""
    output.write({"error": traceback.format_exc(), "at": time.time()})
    if exiting:
        os._exit(1)


class DirOutput:
    """Outputs of a rank under a ``torchrun`` the workbench did not launch (several machines):
    ``rank<r>.pkl`` (the result, written atomically) or ``rank<r>.err`` (the time and the
    traceback) in a directory."""

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


class NodeProcess:
    """A ``torchrun`` agent started in a node's namespace, seen as the launcher sees a spawned
    process (``pid``, ``exitcode``, ``sentinel``, ``kill``, ``join``).

    Args:
        popen: the agent.
        log: the file its output goes to (read for the exit code of its rank on a failure).
    """

    def __init__(self, popen: subprocess.Popen, log: NamelessFile) -> None:
        self.popen = popen
        self.log = log
        self.pid = popen.pid
        self.sentinel = os.pidfd_open(popen.pid)

    @property
    def exitcode(self) -> int | None:
        """None while running, else the agent's exit status (negative: killed by a signal)."""
        return self.popen.poll()

    def kill(self) -> None:
        """SIGKILL the agent (its rank dies with it: ``PR_SET_PDEATHSIG``)."""
        with contextlib.suppress(ProcessLookupError):
            self.popen.kill()

    def join(self) -> None:
        """Reap the agent and close its descriptors."""
        self.popen.wait()
        with contextlib.suppress(OSError):
            os.close(self.sentinel)
        self.log.close()

    def rank_exit(self) -> str | None:
        """What ``torchrun`` says ended its rank (``killed by SIGKILL``, ``exited with code
        1``), or None."""
        self.log.file.seek(0)
        text = self.log.file.read().decode(errors="replace")
        found = re.findall(r"exitcode\s*:\s*(-?\d+)", text)
        if not found:
            return None
        code = int(found[-1])
        return (f"killed by {signal.Signals(-code).name}" if code < 0
                else f"exited with code {code}")


@dataclass
class Supervisor:
    """The launcher's watch over one run's processes (module docstring).

    Attributes:
        roles: each rank's role in words (``parameter server``, ``worker 0``, ``dispatcher``).
        processes: one per rank (spawned processes, or [`NodeProcess`][] agents).
        liveness: the shared table.
        outputs: each rank's output file.
        timeout_s: the silence or busy time after which a process is lost.
        deadline_s: the whole run's limit.
        where: each rank's node in words (``node w0, 192.0.2.2``), or None on one machine.
        on_poll: called with the liveness table at every poll (fault injection), or None.
    """

    roles: Sequence[str]
    processes: list
    liveness: Liveness
    outputs: Sequence[NamelessFile]
    timeout_s: float
    deadline_s: float
    where: Sequence[str] | None = None
    on_poll: Callable[[Liveness], None] | None = field(default=None)

    @property
    def world(self) -> int:
        """Processes of the run."""
        return len(self.processes)

    def wait(self) -> None:
        """Wait until every process has exited with 0; raise naming the process at fault as
        soon as one dies or raises, stays silent or busy for ``timeout_s``, or the run passes
        its deadline."""
        deadline = time.monotonic() + self.deadline_s
        while True:
            running = [p.sentinel for p in self.processes if p.exitcode is None]
            if running:
                connection.wait(running, timeout=POLL_S)
            now = time.monotonic()
            alive = [rank for rank, p in enumerate(self.processes) if p.exitcode is None]
            failed = [rank for rank, p in enumerate(self.processes)
                      if p.exitcode not in (None, 0)]
            if failed:
                raise self.failure(failed, alive, now)
            if not alive:
                return
            lost = self.liveness.lost(alive, now, self.timeout_s)
            if lost is not None:
                raise DistributedProcessError(self._lost_message(*lost))
            if now > deadline:
                raise DistributedProcessError(
                    f"the distributed run passed its deadline of deadline_s = "
                    f"{self.deadline_s:g} s and was stopped ({self.world} processes): raise "
                    f"deadline_s (e.g. to {2 * self.deadline_s:g}; the distributed-check stage: "
                    "experiments.distributed_check.deadline_s)")
            if self.on_poll is not None:
                self.on_poll(self.liveness)

    def who(self, rank: int) -> str:
        """``worker 0 (rank 1[, node w0, 192.0.2.2], pid 123)``."""
        pid = self.liveness.pid(rank) or self.processes[rank].pid
        node = f", {self.where[rank]}" if self.where else ""
        return f"{self.roles[rank]} (rank {rank}{node}, pid {pid})"

    def _lost_message(self, rank: int, how: str, seconds: float) -> str:
        if how == "silent":
            return (f"{self.who(rank)} sent nothing (no heartbeat) for {seconds:.0f} s: it is "
                    f"stopped (SIGSTOP, a debugger) or frozen (timeout_s = {self.timeout_s:g} "
                    f"s); the run's {self.world} processes were stopped")
        # busy: hung, or working longer than timeout_s between two waits (which one, the
        # launcher cannot tell; the first iteration compiles the numba kernels)
        step = self.liveness.iteration(rank)
        where = "before its first iteration" if step < 0 else f"in iteration {step}"
        first = (", and its first iteration compiles numba kernels (seconds on a slow machine)"
                 if step <= 0 else "")
        return (f"{self.who(rank)} was busy {where} for {seconds:.0f} s without reaching a "
                f"message, all_reduce or barrier (timeout_s = {self.timeout_s:g} s): it hangs "
                f"in its own code, or its work between two waits takes longer than timeout_s"
                f"{first}; the run's {self.world} processes were stopped; if it was working, "
                f"raise timeout_s (e.g. timeout_s={max(60.0, 4 * self.timeout_s):g})")

    def failure(self, failed: list[int], alive: list[int], now: float) -> DistributedRunError:
        """The error naming the cause of a failure: a process that died; else one still running
        that has been silent or busy for [`BLAME_FRACTION`][] of ``timeout_s`` (the others
        timed out waiting for it); else the first process that raised."""
        errors = {rank: self.outputs[rank].read() for rank in failed}
        for rank in failed:
            code = self.processes[rank].exitcode
            if "error" not in errors[rank]:
                how = (self.processes[rank].rank_exit() if isinstance(self.processes[rank],
                                                                     NodeProcess) else None)
                how = how or (f"killed by {signal.Signals(-code).name}" if code < 0
                              else f"exited with code {code}")
                return ProcessDiedError(
                    f"{self.who(rank)} died ({how}); the run's {self.world} processes were "
                    "stopped")
        lost = self.liveness.lost(alive, now, BLAME_FRACTION * self.timeout_s)
        if lost is not None:
            return DistributedProcessError(self._lost_message(*lost)
                                           + "; the others timed out waiting for it")
        rank = min(failed, key=lambda r: errors[r]["at"])
        return DistributedRunError(f"{self.who(rank)} raised; the run was stopped:\n"
                                   f"{errors[rank]['error']}")

    def stop(self) -> None:
        """SIGKILL every process still running (a stopped one too) and reap them all."""
        for process in self.processes:
            if process.pid is not None and process.exitcode is None:
                process.kill()
        for process in self.processes:
            if process.pid is not None:
                process.join()
