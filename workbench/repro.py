r"""``dvc repro`` with independent stages in parallel (what ``make repro`` and ``make check`` run).

DVC runs the stages of a pipeline one after another; on a machine with several cores most of
them wait for nothing but their turn (the experiments are single-threaded by design: one torch
thread, numba kernels). This runner reads DVC's own graph of the pipeline and hands each stage to
``dvc repro --single-item`` as soon as the stages it depends on are done, up to ``--jobs`` at a
time (the machine's cores by default):

    dvc.yaml --(dvc's index: stages, their deps and outs)--> DAG
    ready = stages whose upstream stages are all done
    while stages remain:
        start ready stages while a slot is free   dvc --wait-for-lock repro --single-item STAGE
          (an exclusive stage waits for an empty  (DVC decides whether it is stale, runs it,
           machine and runs alone)                 hashes its outputs, writes its dvc.lock entry)
        a stage ends -> its dependants may be ready; a stage fails -> nothing downstream of
                        it starts (their committed outputs stay as they are), every other
                        stage still runs; at the end, exit 1 with a summary: each failed
                        stage with its error line, and what did not run because of it

**Outputs survive a stage that does not finish**: DVC deletes a stage's outputs before its
command runs. The runner first keeps a hard-linked copy of each beside it
(``.<name>.kept-by-repro``, no data copied); a stage that fails or is interrupted gets them back
(whatever it left in their place is removed), a stage that finishes drops the copy.

DVC itself does everything that makes a run a ``dvc repro``: it checks each stage against
``dvc.lock``, runs its command, and records it, under its repository lock (``--wait-for-lock``:
two stages finishing together queue for the lock rather than fail). A second run reruns
nothing; the lock is the one a serial ``dvc repro`` writes (DVC updates its entries in place).

Which stages are handed over: with ``--force`` every stage that is not frozen (``dvc repro -f``
skips frozen stages too); without it, those ``dvc status`` reports changed and everything
downstream of them (DVC skips those whose inputs turn out unchanged), so an up-to-date pipeline
costs one status check.

**Exclusive stages** measure wall-clock time (RecD's throughputs, Hotline's measured CPU run,
the real-process check's timeouts): they say so in ``dvc.yaml``'s ``meta: {exclusive: true}``
and run with nothing beside them. Every other stage's outputs are deterministic: the order and
company they run in changes nothing in them.

Output: each stage's own lines (its log lines carry its name), a line when a stage starts and
ends, and every minute the stages still running. Progress bars of the stages are off (two bars
on one terminal garble each other); the runner's lines take their place.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from workbench.utils.errors import UserError

HEARTBEAT_S = 60.0  # how often the stages still running are listed
#: A stage's error line: a user error's ``<Class>: <message>`` (``DownloadError: ...``) or the
#: last line of a traceback; DVC's own ``ERROR: failed to reproduce ...`` says less.
ERROR_LINE = re.compile(r"^[A-Z][a-z]\w*: \S")


#: Seconds a stopped stage gets to unwind after SIGINT, then after SIGTERM, before SIGKILL.
STOP_GRACE_S = (30.0, 10.0)


def stop_groups(processes: Sequence[subprocess.Popen], grace: Sequence[float] = STOP_GRACE_S
                ) -> None:
    """Stop each process group and wait for it: SIGINT (a stage unwinds as on Ctrl-C: its
    temporaries removed, its lock released), then SIGTERM to a group still running after
    ``grace[0]`` seconds (the stages turn it into the same unwinding:
    [`exit_on_signals`][workbench.utils.signals.exit_on_signals]), then SIGKILL after
    ``grace[1]`` more, so a stage that ignores SIGINT still cleans up before it is killed."""
    steps = [(signal.SIGINT, grace[0]), (signal.SIGTERM, grace[1]), (signal.SIGKILL, None)]
    for sig, wait_s in steps:
        alive = [p for p in processes if p.poll() is None]
        if not alive:
            return
        for p in alive:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, sig)
        end = None if wait_s is None else time.monotonic() + wait_s
        for p in alive:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=None if end is None else max(0.0, end - time.monotonic()))


@dataclass(frozen=True)
class Stage:
    """One stage of the pipeline as the runner sees it.

    Attributes:
        name: DVC's address (``esd``, ``download@synthetic``).
        upstream: the stages it depends on (their outputs are its inputs).
        exclusive: runs with no other stage beside it (``meta: {exclusive: true}``).
        frozen: DVC never runs it (``frozen: true``).
        outs: its outputs, relative to the project root.
    """

    name: str
    upstream: frozenset[str]
    exclusive: bool = False
    frozen: bool = False
    outs: tuple[str, ...] = ()

    @property
    def guarded(self) -> tuple[str, ...]:
        """What the runner keeps and puts back: its outputs and the cost record its run writes
        (where [`workbench.stages.cli.costs_root`][] puts it: ``data/costs/<name>.json`` for a
        stage writing under ``data/``, else ``results/costs/<name>.json``, the notebooks'
        included; committed with the results, though not a DVC output: a stage stopped after
        it wrote the record but before DVC took its output would otherwise leave the record
        of a run that did not count)."""
        from workbench.stages.costs import COSTS_DIR
        from workbench.stages.registry import STAGES

        spec = next((s for s in STAGES.values() if s.dvc_name == self.name.split("@")[0]), None)
        if spec is None or not (spec.in_dvc and spec.costed):
            return self.outs
        root = "data" if spec.writes_data else "results"
        return (*self.outs, f"{root}/{COSTS_DIR}/{self.name}.json")


def load_pipeline(root: Path) -> list[Stage]:
    """The stages of the DVC project at ``root`` in ``dvc.yaml``'s order, from DVC's index."""
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        graph = repo.index.graph
        stages = []
        for stage in repo.index.stages:
            meta = stage.meta if isinstance(stage.meta, dict) else {}
            stages.append(Stage(stage.addressing,
                                frozenset(s.addressing for s in graph.successors(stage)),
                                bool(meta.get("exclusive", False)), bool(stage.frozen),
                                tuple(os.path.relpath(o.fs_path, root) for o in stage.outs)))
    return stages


def changed_stages(root: Path) -> set[str]:
    """The stages ``dvc status`` reports changed (their inputs, outputs or command)."""
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        return set(repo.status())


def to_run(stages: Sequence[Stage], force: bool, changed: set[str] | None,
           targets: Sequence[str] = ()) -> list[Stage]:
    """The stages to hand to DVC, in pipeline order.

    Args:
        stages: the pipeline ([`load_pipeline`][]).
        force: every stage but the frozen ones (``dvc repro -f``).
        changed: without ``force``, the stages ``dvc status`` reports changed; they and
            everything downstream of them run.
        targets: only these stages and what they depend on (empty: the whole pipeline); a
            ``foreach`` group's name (``dedup``) stands for every item of it (``dedup@...``), as
            it does for ``dvc repro``.

    Raises:
        UserError: a target that is neither a stage nor a group of the pipeline.
    """
    by_name = {s.name: s for s in stages}
    items = {t: [n for n in by_name if n == t or n.startswith(f"{t}@")] for t in targets}
    unknown = [t for t, names in items.items() if not names]
    if unknown:
        raise UserError(f"{', '.join(unknown)}: not a stage of dvc.yaml (stages: "
                        f"{', '.join(by_name)})")
    wanted = set(by_name)
    if targets:
        wanted = set()
        todo = [n for names in items.values() for n in names]
        while todo:
            name = todo.pop()
            if name not in wanted:
                wanted.add(name)
                todo.extend(by_name[name].upstream)
    if force:
        pick = set(wanted)
    else:  # downstream of a changed stage: DVC decides whether its inputs changed
        pick = downstream([s for s in stages if s.name in wanted], set(changed or ()) & wanted)
    return [s for s in stages if s.name in pick and not s.frozen]


def downstream(stages: Sequence[Stage], seeds: set[str]) -> set[str]:
    """``seeds`` and every stage of ``stages`` that depends on one of them, at any distance."""
    found = set(seeds)
    grew = True
    while grew:
        more = {s.name for s in stages if s.upstream & found}
        grew = not more <= found
        found |= more
    return found


@dataclass
class _Running:
    stage: Stage
    process: subprocess.Popen
    started: float
    reader: threading.Thread
    error: list[str] = field(default_factory=list)  # its last error line


@dataclass
class Scheduler:
    """Runs the chosen stages through DVC, ``jobs`` at a time, in dependency order.

    Args:
        stages: the stages to run ([`to_run`][]); an upstream stage outside this list
            counts as done.
        jobs: stages at a time (>= 1).
        force: pass ``-f`` to DVC (rerun a stage whatever its state).
        command: the DVC command line before the stage's name (tests put a fake DVC here).
        root: the project directory.
    """

    stages: Sequence[Stage]
    jobs: int
    force: bool = False
    command: Sequence[str] = ()
    root: Path = Path(".")
    done: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    _print_lock: threading.Lock = field(default_factory=threading.Lock)
    _good_lock: bytes | None = None  # the last complete dvc.lock seen (restored if cut)

    def __post_init__(self) -> None:
        if self.jobs < 1:
            raise UserError(f"--jobs {self.jobs}: must be >= 1")
        if not self.command:
            self.command = (str(Path(sys.executable).with_name("dvc")), "--wait-for-lock",
                            "repro", "--single-item")

    def say(self, line: str) -> None:
        """Print one line whole (the stages' output threads print too)."""
        with self._print_lock:
            print(line, flush=True)

    def _argv(self, stage: Stage) -> list[str]:
        return [*self.command, *(["--force"] if self.force else []), stage.name]

    def _start(self, stage: Stage) -> _Running:
        keep_outputs(self.root, stage)
        env = {**os.environ, "TQDM_DISABLE": "1", RUNNER_ENV: "1",
               "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        process = subprocess.Popen(self._argv(stage), cwd=self.root, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   bufsize=1, start_new_session=True)

        error: list[str] = []

        def forward() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                line = line.rstrip("\n")
                self.say(line)
                if ERROR_LINE.match(line):
                    error[:] = [line]

        reader = threading.Thread(target=forward, daemon=True)
        reader.start()
        return _Running(stage, process, time.monotonic(), reader, error)

    def _skip_downstream(self, pending: list[Stage]) -> None:
        """Take out of ``pending`` every stage that needs a failed (or skipped) stage."""
        lost = downstream(pending, set(self.failed) | set(self.skipped))
        for stage in [s for s in pending if s.name in lost]:
            pending.remove(stage)
            self.skipped.append(stage.name)

    def _start_ready(self, pending: list[Stage], names: set[str], running: list[_Running],
                     total: int) -> None:
        """Start the stages whose upstream stages are done, while a slot is free. Exclusive
        stages come last: one starts only on an empty machine with no other stage ready."""
        self._skip_downstream(pending)
        if any(r.stage.exclusive for r in running):
            return
        waiting_on = names - set(self.done)  # stages of this run not yet done
        ready = [s for s in pending if not (s.upstream & waiting_on)]
        for stage in sorted(ready, key=lambda s: s.exclusive):  # stable: pipeline order
            if len(running) >= self.jobs or (stage.exclusive and running):
                return
            pending.remove(stage)
            running.append(self._start(stage))
            self.say(f"repro: started {stage.name}"
                     + (" (alone: it measures wall-clock time)" if stage.exclusive else "")
                     + f" [{len(self.done) + len(running)}/{total}]")
            if stage.exclusive:
                return

    def _keep_lock(self) -> None:
        """Remember ``dvc.lock`` when it is complete YAML (DVC rewrites it in place after each
        stage: an interruption during that write can leave it cut or empty)."""
        snapshot = _complete_lock(self.root / "dvc.lock")
        if snapshot is not None:
            self._good_lock = snapshot

    def _restore_lock(self) -> None:
        """Put the last complete ``dvc.lock`` back if the interruption cut the current one."""
        path = self.root / "dvc.lock"
        if self._good_lock is None or _complete_lock(path) is not None:
            return
        from workbench.utils.io import atomic_path

        with atomic_path(path) as tmp:
            tmp.write_bytes(self._good_lock)
        self.say("repro: dvc.lock was cut by the interruption; restored the last complete one "
                 "(the stages that finished since are rerun next time)")

    def run(self) -> int:
        """Run every stage; 0 when all succeeded, 1 when one failed (what depends on it does
        not start; every other stage runs), 130 on Ctrl-C or SIGTERM (the running stages are
        stopped, their process groups with them, and ``dvc.lock`` is left complete)."""
        self._keep_lock()
        pending = list(self.stages)
        names = {s.name for s in pending}
        running: list[_Running] = []
        start = last_beat = time.monotonic()
        total = len(pending)
        try:
            while pending or running:
                self._start_ready(pending, names, running, total)
                if not running:
                    if pending:  # cannot happen with a DAG from DVC
                        raise UserError(f"stages {', '.join(s.name for s in pending)} wait on "
                                        "each other")
                    break
                time.sleep(0.2)
                for r in list(running):
                    code = r.process.poll()
                    if code is None:
                        continue
                    r.reader.join()
                    running.remove(r)
                    took = _duration(time.monotonic() - r.started)
                    if code == 0:
                        drop_kept(self.root, r.stage)
                        self.done.append(r.stage.name)
                        self._keep_lock()
                        self.say(f"repro: done {r.stage.name} in {took} "
                                 f"[{len(self.done)}/{total}]")
                    else:
                        self._put_back(r.stage)
                        self.failed.append(r.stage.name)
                        if r.error:
                            self.errors[r.stage.name] = r.error[0]
                        self.say(f"repro: {r.stage.name} FAILED (exit {code}) after {took}; "
                                 "what depends on it will not run, the other stages go on")
                now = time.monotonic()
                if running and now - last_beat >= HEARTBEAT_S:
                    last_beat = now
                    self.say("repro: running " + ", ".join(
                        f"{r.stage.name} ({_duration(now - r.started)})" for r in running)
                        + f"; {len(self.done)}/{total} done, {_duration(now - start)} in all")
        except KeyboardInterrupt:
            stop_groups([r.process for r in running])
            for r in running:
                self._put_back(r.stage)
            self._restore_lock()
            self.say("repro: interrupted; stopped " + ", ".join(r.stage.name for r in running))
            return 130
        if self.failed:
            self.say(self.summary(total))
            return 1
        self.say(f"repro: {total} stages in {_duration(time.monotonic() - start)}"
                 f" ({self.jobs} at a time)")
        return 0


    def _put_back(self, stage: Stage) -> None:
        """A stage that failed or was stopped: its outputs as they were before it started."""
        restored = restore_kept(self.root, stage)
        if restored:
            self.say(f"repro: {stage.name} did not finish; its outputs from before the run are "
                     f"back ({', '.join(restored)})")

    def summary(self, total: int) -> str:
        """What failed and why (each stage's error line), and what did not run because of it."""
        lines = [f"repro: {len(self.failed)} of {total} stages FAILED, {len(self.done)} done, "
                 f"{len(self.skipped)} not run because they need what failed (their committed "
                 "outputs and dvc.lock entries are left as they were):"]
        for name in self.failed:
            why = self.errors.get(name, "(no error line: see its output above)")
            lines += textwrap.wrap(f"{name}: {why}", 100, initial_indent="  ",
                                   subsequent_indent="      ", break_long_words=False,
                                   break_on_hyphens=False)
        if self.skipped:
            lines += textwrap.wrap("not run: " + ", ".join(self.skipped), 100,
                                   initial_indent="  ", subsequent_indent="      ",
                                   break_on_hyphens=False)
        return "\n".join(lines)


#: A Ctrl-C before any stage started (while DVC reads the pipeline).
INTERRUPTED_EARLY = "repro: interrupted before any stage started; nothing was run or changed"
#: Set for the stages the runner starts: their interrupt message can say the runner puts
#: their previous outputs back.
RUNNER_ENV = "WORKBENCH_REPRO"


def _kept(root: Path, out: str) -> Path:
    path = root / out
    return path.with_name(f".{path.name}.kept-by-repro")


def keep_outputs(root: Path, stage: Stage) -> None:
    """Keep a hard-linked copy of each of ``stage``'s outputs (and its cost record:
    [`Stage.guarded`][workbench.repro.Stage.guarded]) beside it before DVC runs it.

    DVC deletes a stage's outputs before its command runs; a stage writes its new output whole
    and replaces the old one only at the end, so a failure or an interruption in between would
    otherwise leave the committed output deleted. The copy costs no data: every file is a hard
    link (a stage never writes into an old file; its new files are new inodes). Links inside an
    output are copied as links, never followed."""
    import shutil

    from workbench.utils.io import remove_path

    for out in stage.guarded:
        path, kept = root / out, _kept(root, out)
        if kept.exists() and not kept.is_symlink() and not (path.exists()
                                                              or path.is_symlink()):
            os.replace(kept, path)  # a runner killed mid-stage left the only copy: it is back
        remove_path(kept)
        if path.is_symlink() or not path.exists():
            continue
        if path.is_dir():
            shutil.copytree(path, kept, symlinks=True, copy_function=os.link)
        else:
            os.link(path, kept)


def drop_kept(root: Path, stage: Stage) -> None:
    """The stage finished: its kept copies go."""
    from workbench.utils.io import remove_path

    for out in stage.guarded:
        remove_path(_kept(root, out))


def restore_kept(root: Path, stage: Stage) -> list[str]:
    """The stage did not finish: each output it no longer has whole is its kept copy again
    (what was written in its place is removed). Returns the outputs put back."""
    from workbench.utils.io import remove_path

    back = []
    for out in stage.guarded:
        path, kept = root / out, _kept(root, out)
        if not (kept.exists() and not kept.is_symlink()):
            continue
        remove_path(path)
        os.replace(kept, path)
        back.append(out)
    return back


def _complete_lock(path: Path) -> bytes | None:
    """The bytes of ``path`` when it is a complete lock (a YAML mapping with ``stages``)."""
    import yaml

    try:
        data = path.read_bytes()
        loaded = yaml.safe_load(data)
    except (OSError, yaml.YAMLError):
        return None
    return data if isinstance(loaded, dict) and "stages" in loaded else None


def _sigterm(signum: int, frame: object) -> None:
    """SIGTERM ends the run as Ctrl-C does (its stages stopped, the lock left complete)."""
    raise KeyboardInterrupt


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m workbench.repro [-f] [--jobs N] [STAGE ... | --claim KEY | --claims]``."""
    parser = argparse.ArgumentParser(
        prog="python -m workbench.repro",
        description="dvc repro with independent stages in parallel (module docstring).")
    parser.add_argument("targets", nargs="*", help="stages to reproduce, with what they "
                        "depend on (default: the whole pipeline)")
    parser.add_argument("-f", "--force", action="store_true",
                        help="rerun every stage that is not frozen (dvc repro -f)")
    parser.add_argument("-j", "--jobs", type=int, default=len(os.sched_getaffinity(0))
                        if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1),
                        help="stages at a time (default: the cores this process may use)")
    chosen_claims = parser.add_mutually_exclusive_group()
    chosen_claims.add_argument("--claim", metavar="KEY",
                               help="make claim: force every stage the claim is measured from "
                                    "(and what they depend on), then judge it against the "
                                    "committed report")
    chosen_claims.add_argument("--claims", action="store_true",
                               help="make check: force every stage a claim is measured from")
    args = parser.parse_args(argv)
    root = Path.cwd()
    try:
        if not (root / "dvc.yaml").is_file():
            raise UserError(f"no dvc.yaml in {root.name}/: run this from the project's root")
        if args.claim is not None or args.claims:
            if args.targets:
                raise UserError("give stages or a claim, not both")
            from workbench.claims.check import claim_targets

            args.targets, args.force = claim_targets(args.claim), True
        stages = load_pipeline(root)
        changed = None if args.force else changed_stages(root)
        chosen = to_run(stages, args.force, changed, args.targets)
        if not chosen:
            print("repro: Data and pipelines are up to date.", flush=True)
            return 0
        print(f"repro: {len(chosen)} stages to hand to DVC, {args.jobs} at a time"
              + ("" if args.force else " (changed, and what depends on them)"), flush=True)
        signal.signal(signal.SIGTERM, _sigterm)
        code = Scheduler(chosen, args.jobs, force=args.force, root=root).run()
        if code or args.claim is None:
            return code
        from workbench.claims import check

        return check.main(["--results", str(root / "results"), "--claim", args.claim])
    except KeyboardInterrupt:  # before any stage started (DVC's graph loading): nothing ran
        print(INTERRUPTED_EARLY, file=sys.stderr)
        return 130
    except UserError as err:
        print(f"{type(err).__name__}: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # DVC wraps a Ctrl-C while it reads the pipeline
        from workbench.utils.signals import wraps_interrupt

        if not wraps_interrupt(err):
            raise
        print(INTERRUPTED_EARLY, file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
