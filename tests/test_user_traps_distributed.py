"""The traps of the distributed_check stage (real processes) as a user met them.

A worker process stopped (SIGSTOP), the stage itself killed, negative link settings: each test
runs the stage command, checks the one-line message, the exit status, that no process of the run
survives and that nothing is left behind (no temporary file, no partial result).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.traps import failed_with, stage
from workbench.config import load
from workbench.utils.paths import REPO_ROOT
from workbench.utils.validation import ConfigError

# end to end (real processes: a server, workers and their links): not in make test-fast
pytestmark = pytest.mark.slow

DC = "experiments.distributed_check"


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The CI-size synthetic dataset and its calibration, made once (the stage reads both)."""
    tmp = tmp_path_factory.mktemp("dc")
    for command in (("prepare", "dataset=synthetic"), ("calibrate",)):
        proc = stage(tmp, *command, "profile=ci")
        assert proc.returncode == 0, proc.stderr
    return tmp


def _start(tmp: Path, *overrides: str) -> tuple[subprocess.Popen, Path, Path]:
    """The stage started in the background, its TMPDIR private: (process, stderr file, TMPDIR)."""
    scratch = tmp / "scratch"
    scratch.mkdir(exist_ok=True)
    err = tmp / "stderr.txt"
    proc = subprocess.Popen(
        [sys.executable, "-m", "workbench.stages", "distributed-check", "profile=ci",
         *overrides, f"paths.data={tmp / 'data'}", f"paths.results={tmp / 'results'}",
         "profile.progress=false"],
        cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=err.open("w"),
        env={**os.environ, "TMPDIR": str(scratch)})
    return proc, err, scratch


def _leftovers(scratch: Path, deadline_s: float = 30.0) -> list[Path]:
    """What the run left in its TMPDIR: every file, and every folder but torch's compile cache
    (``torchinductor_<user>``, made empty by ``import torch`` and meant to stay); polled until
    none is left or ``deadline_s`` passed (the forkserver of a killed stage removes its socket
    file as it exits, which may be after its ranks died)."""
    end = time.monotonic() + deadline_s
    while True:
        left = [p for p in scratch.rglob("*")
                if p.is_file() or not (p.is_dir() and p.name.startswith("torchinductor_"))]
        if not left or time.monotonic() > end:
            return left
        time.sleep(0.1)


def _state(pid: int) -> str | None:
    """The process's state letter (R, S, T, Z, ...), or None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2]


def _ranks(parent: int, count: int, deadline_s: float = 120.0) -> list[int]:
    """The pids of the run's ``count`` processes, in rank order (they start one after the
    other): children of ``parent``'s forkserver (``distributed.rank_context``), or of
    ``parent`` itself where the ranks are spawned."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        table = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            table[int(entry.name)] = (int(fields[1]), int(fields[19]), cmdline)
        servers = {pid for pid, (ppid, _, cmd) in table.items()
                   if ppid == parent and b"forkserver" in cmd}
        found = [(start, pid) for pid, (ppid, start, cmd) in table.items()
                 if (ppid == parent and b"spawn_main" in cmd) or ppid in servers]
        if len(found) >= count:
            return [pid for _, pid in sorted(found)][:count]
        time.sleep(0.1)
    raise AssertionError(f"the stage (pid {parent}) never started {count} processes")


def _joined(pids: list[int], deadline_s: float = 120.0) -> None:
    """Poll until every process of ``pids`` holds two sockets or more: it has joined the process
    group (the store and its peers), i.e. it trains."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        sockets = []
        for pid in pids:
            try:
                links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
            except OSError:  # a descriptor closed while listed
                links = []
            sockets.append(sum(link.startswith("socket:") for link in links))
        if min(sockets) >= 2:
            return
        time.sleep(0.1)
    raise AssertionError(f"the processes {pids} never joined their process group")


def _gone(pids: list[int], deadline_s: float = 30.0) -> list[int]:
    """Poll until no process of ``pids`` runs (zombies count as gone); the survivors."""
    end = time.monotonic() + deadline_s
    while True:
        alive = [pid for pid in pids if _state(pid) not in (None, "Z")]
        if not alive or time.monotonic() > end:
            return alive
        time.sleep(0.1)


needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(),
                                reason="finds the run's processes through /proc")


@needs_proc
def test_a_stopped_worker_stops_the_run_naming_it(prepared: Path) -> None:
    """SIGSTOP one worker: the run stops after timeout_s (not after minutes), the line names that
    worker by rank and pid, not the parameter server whose call timed out waiting for it."""
    proc, err, scratch = _start(prepared, f"{DC}.timeout_s=5")
    ranks = _ranks(proc.pid, 3)  # the first run: the server and two workers
    _joined(ranks)
    os.kill(ranks[2], signal.SIGSTOP)
    try:
        proc.wait(timeout=300)
    finally:
        proc.kill()
        if _state(ranks[2]) is not None:
            os.kill(ranks[2], signal.SIGCONT)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, "", err.read_text())
    failed_with(done, "DistributedProcessError: experiments.distributed_check, validation run "
                      "s = 0 on the token_bucket network (after_backward): worker 1 (rank 2, "
                      f"pid {ranks[2]}) sent nothing",
                "stopped (SIGSTOP", "timeout_s = 5 s", "nothing was written")
    assert done.returncode == 2
    assert _gone(ranks) == []
    assert not (prepared / "results" / "distributed_check").exists()
    assert _leftovers(scratch) == []


@needs_proc
@pytest.mark.parametrize(("sig", "when"), [(signal.SIGKILL, "training"),
                                           (signal.SIGTERM, "training"),
                                           (signal.SIGKILL, "starting")],
                         ids=["SIGKILL-training", "SIGTERM-training", "SIGKILL-starting"])
def test_killing_the_stage_takes_its_processes_and_files_with_it(
        prepared: Path, sig: signal.Signals, when: str) -> None:
    """Kill the stage while its processes train (or still start): they die at once, not after
    their timeout_s (long here), and no temporary file survives (the server's result alone is
    ~175 MB at full size)."""
    proc, _, scratch = _start(prepared, f"{DC}.timeout_s=300", f"{DC}.deadline_s=600")
    ranks = _ranks(proc.pid, 3)
    if when == "training":
        _joined(ranks)
    os.kill(proc.pid, sig)
    proc.wait(timeout=60)
    # SIGTERM unwinds the stage (utils.signals) and exits 143 with one line; SIGKILL cannot
    assert proc.returncode == (128 + sig if sig == signal.SIGTERM else -sig)
    assert _gone(ranks) == [], "processes of the run outlived the stage"
    assert _leftovers(scratch) == []
    assert not (prepared / "results" / "distributed_check").exists()


def test_a_negative_latency_stops_the_stage_before_any_work(tmp_path: Path) -> None:
    proc = stage(tmp_path, "distributed-check", f"{DC}.latency_ms=[-2.0,0.5]")
    failed_with(proc, f"ConfigError: {DC}.latency_ms[0] = -2.0: must be a number >= 0.0")
    assert proc.returncode == 2
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize(("override", "message"), [
    (f"{DC}.bandwidth_gbps=[-0.1]", f"{DC}.bandwidth_gbps[0] = -0.1: must be a number > 0.0"),
    (f"{DC}.bandwidth_gbps=[0]", f"{DC}.bandwidth_gbps[0] = 0.0: must be a number > 0.0"),
    (f"{DC}.esd_bandwidth_gbps=[-1]",
     f"{DC}.esd_bandwidth_gbps[0] = -1.0: must be a number > 0.0"),
    (f"{DC}.esd_latency_ms=[-5]", f"{DC}.esd_latency_ms[0] = -5.0: must be a number >= 0.0"),
    (f"{DC}.speed=[-1]", f"{DC}.speed[0] = -1.0: must be a number > 0.0 and <= 1.0"),
    (f"{DC}.speed=[2]", f"{DC}.speed[0] = 2.0: must be a number > 0.0 and <= 1.0"),
    (f"{DC}.latency_ms=[]", f"{DC}.latency_ms = []: must not be empty"),
    (f"{DC}.timeout_s=-5", f"{DC}.timeout_s = -5.0: must be a number >= 1.0"),
    (f"{DC}.deadline_s=-1", f"{DC}.deadline_s = -1.0: must be a number >= 1.0"),
    (f"{DC}.deadline_s=30", f"{DC}.deadline_s = 30: must be >= timeout_s = 60"),
    (f"{DC}.workers=0", f"{DC}.workers = 0: must be an integer >= 1"),
    (f"{DC}.steps=-3", f"{DC}.steps = -3: must be an integer >= 2"),
])
def test_out_of_range_distributed_settings_name_key_and_range(override: str,
                                                              message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load([override])
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
