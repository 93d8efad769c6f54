"""Where the ranks of a distributed run on this machine start: a forkserver that has imported
them once.

A spawned rank imports torch, numba's cached kernels and the workbench again: 2-3 s of CPU a
rank, most of a short run on two cores (and of the tests' and the ``distributed_check``
stage's time). [`rank_context`][] starts the ranks instead from a ``multiprocessing``
forkserver (one per launcher process, started on first use) that imported
[`RANK_MODULES`][]; a rank forks from it in milliseconds. Only the forkserver imports before
forking, never the launcher, whose threads (torch's pool, pytest's) a fork could deadlock.

A forkserver imported the code as it was when it started: when a workbench source changes
after that ([`sources_stamp`][]), the next launch starts a new one.

Lifetime: the forkserver exits when its launcher does (end of file on the pipe the launcher
holds), and the ranks set ``PR_SET_PDEATHSIG`` on their parent, the forkserver: a launcher
killed even by SIGKILL takes its ranks with it. Python 3.11 binds the forkserver's socket to a
file (``pymp-*/listener-*`` in the temporary folder; 3.12 and later use the abstract namespace
on Linux); the launcher removes it at a normal exit, and the forkserver, which imports this
module, when it exits after its launcher died: no run leaves a file behind.
"""

from __future__ import annotations

import atexit
import contextlib
import os
from multiprocessing import forkserver
from multiprocessing.context import ForkServerContext, SpawnContext

import torch.multiprocessing as mp

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # workbench/

#: What the forkserver imports before it forks a rank: this module (its exit hook) and
#: everything a rank's body needs.
RANK_MODULES = ("workbench.training.rank_server", "workbench.training.ranks")

_STAMP: tuple[int, int] | None = None  # sources_stamp() when this process's forkserver started


def rank_context() -> tuple[ForkServerContext | SpawnContext, int]:
    """The ``multiprocessing`` context the ranks of this machine start in, and the pid that is
    their parent: the forkserver's (module docstring), or where there is none (Windows) or its
    pid is not known, spawn's and this process's.

    Returns:
        The context and the pid each rank checks its parent against.
    """
    global _STAMP
    if "forkserver" in mp.get_all_start_methods():
        server = getattr(forkserver, "_forkserver", None)
        if server is not None:
            ctx = mp.get_context("forkserver")
            ctx.set_forkserver_preload(list(RANK_MODULES))
            stamp = sources_stamp()
            if stamp != _STAMP and getattr(server, "_forkserver_pid", None) is not None \
                    and hasattr(server, "_stop"):
                server._stop()  # its modules predate an edit: a fresh one imports the edit
            _STAMP = stamp
            server.ensure_running()
            pid = getattr(server, "_forkserver_pid", None)
            if isinstance(pid, int):
                return ctx, pid
    return mp.get_context("spawn"), os.getpid()


def sources_stamp() -> tuple[int, int]:
    """The workbench's Python sources as the forkserver would import them: their count and
    latest modification time (ns). A process that edits the code between two runs (a notebook
    with autoreload) gets a new forkserver, so its ranks never run the code before the edit."""
    count, latest = 0, 0
    for folder, _, files in os.walk(_PACKAGE):
        for name in files:
            if name.endswith(".py"):
                count += 1
                latest = max(latest, os.stat(os.path.join(folder, name)).st_mtime_ns)
    return count, latest


_PARENT = os.getppid()  # in the forkserver, which imports this module at its start: the launcher


def _remove_socket_file() -> None:
    """In a forkserver whose launcher died (which knows its address but, unlike its launcher,
    no forkserver pid, and has a new parent), remove its socket file and the folder, if that is
    left empty. A living launcher removes them itself (when it stops the forkserver, and at its
    exit: ``multiprocessing.util``)."""
    server = getattr(forkserver, "_forkserver", None)
    address = getattr(server, "_forkserver_address", None)
    orphan = getattr(server, "_forkserver_pid", 0) is None and os.getppid() != _PARENT
    if orphan and isinstance(address, str) and address and not address.startswith("\0"):
        with contextlib.suppress(OSError):
            os.unlink(address)
        with contextlib.suppress(OSError):
            os.rmdir(os.path.dirname(address))


atexit.register(_remove_socket_file)
