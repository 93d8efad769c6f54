"""The parallel ``dvc repro`` runner: which stages it hands over, and in what order and company.

A fake DVC (a script that records when each stage starts and ends, and fails where told) stands
in for ``dvc repro --single-item``; ``tests/test_dvc_pipeline.py`` runs the real one on the ci
pipeline and checks that a plain ``dvc repro`` afterwards reruns nothing.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from workbench.repro import Scheduler, Stage, main, to_run
from workbench.utils.errors import UserError

#   a   b      (a, b independent; c needs both; d needs c; x exclusive, needs a; f frozen)
#    \ / \
#     c   x
#     |
#     d
PIPELINE = [Stage("a", frozenset()), Stage("b", frozenset()),
            Stage("c", frozenset({"a", "b"})), Stage("x", frozenset({"b"}), exclusive=True),
            Stage("d", frozenset({"c"})), Stage("f", frozenset(), frozen=True)]

FAKE_DVC = """
import json, sys, time
log, name = sys.argv[1], sys.argv[-1]
with open(log, "a") as f:
    f.write(json.dumps({"stage": name, "event": "start", "t": time.monotonic(),
                        "force": "--force" in sys.argv}) + "\\n")
time.sleep(0.4)
with open(log, "a") as f:
    f.write(json.dumps({"stage": name, "event": "end", "t": time.monotonic()}) + "\\n")
print(f"Running stage '{name}':")
if name in sys.argv[2].split(","):
    print(f"DownloadError: {name}: could not fetch it from http://127.0.0.1:9/{name}")
    print("ERROR: failed to reproduce: exited with 3")
    sys.exit(3)
"""


def _run(tmp_path: Path, stages: list[Stage], jobs: int, fail: str = "",
         force: bool = False) -> tuple[int, list[dict], Scheduler]:
    script = tmp_path / "fake_dvc.py"
    script.write_text(FAKE_DVC)
    log = tmp_path / "events.jsonl"
    scheduler = Scheduler(stages, jobs, force=force, root=tmp_path,
                          command=(sys.executable, str(script), str(log), fail or "-"))
    code = scheduler.run()
    events = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return code, events, scheduler


def _intervals(events: list[dict]) -> dict[str, tuple[float, float]]:
    start = {e["stage"]: e["t"] for e in events if e["event"] == "start"}
    return {e["stage"]: (start[e["stage"]], e["t"]) for e in events if e["event"] == "end"}


def test_to_run_picks_changed_stages_and_what_depends_on_them() -> None:
    names = lambda stages: [s.name for s in stages]  # noqa: E731
    assert names(to_run(PIPELINE, force=True, changed=None)) == ["a", "b", "c", "x", "d"]
    assert names(to_run(PIPELINE, force=False, changed={"a"})) == ["a", "c", "d"]
    assert names(to_run(PIPELINE, force=False, changed={"f"})) == []  # frozen: never run
    assert names(to_run(PIPELINE, force=False, changed=set())) == []
    # a target brings what it depends on, and nothing downstream of it
    assert names(to_run(PIPELINE, force=True, changed=None, targets=["c"])) == ["a", "b", "c"]
    assert names(to_run(PIPELINE, force=False, changed={"b"}, targets=["x"])) == ["b", "x"]
    with pytest.raises(UserError, match="nope: not a stage of dvc.yaml"):
        to_run(PIPELINE, force=True, changed=None, targets=["nope"])
    # a foreach group's name stands for its items, as for dvc repro
    grouped = [Stage("g@p", frozenset()), Stage("g@q", frozenset()),
               Stage("gx", frozenset()), Stage("h", frozenset({"g@q"}))]
    assert names(to_run(grouped, force=True, changed=None, targets=["g"])) == ["g@p", "g@q"]
    assert names(to_run(grouped, force=True, changed=None, targets=["h"])) == ["g@q", "h"]
    with pytest.raises(UserError, match="g@: not a stage"):
        to_run(grouped, force=True, changed=None, targets=["g@"])


def test_stages_run_after_their_inputs_two_at_a_time_and_an_exclusive_one_alone(
        tmp_path: Path) -> None:
    stages = to_run(PIPELINE, force=True, changed=None)
    code, events, scheduler = _run(tmp_path, stages, jobs=2, force=True)
    assert code == 0 and sorted(scheduler.done) == ["a", "b", "c", "d", "x"]
    span = _intervals(events)
    assert all(e["force"] for e in events if e["event"] == "start")
    for stage in stages:  # every input finished before the stage started
        assert all(span[up][1] <= span[stage.name][0] for up in stage.upstream)
    overlap = lambda p, q: p[0] < q[1] and q[0] < p[1]  # noqa: E731
    assert overlap(span["a"], span["b"])  # independent: side by side
    assert not any(overlap(span["x"], span[o]) for o in "abcd")  # exclusive: alone
    times = sorted(t for p in span.values() for t in p)
    for t in times:  # never more than `jobs` at once
        assert sum(p[0] <= t < p[1] for p in span.values()) <= 2


def test_one_job_is_a_serial_run_in_pipeline_order(tmp_path: Path) -> None:
    code, events, _ = _run(tmp_path, to_run(PIPELINE, force=True, changed=None), jobs=1)
    started = [e["stage"] for e in events if e["event"] == "start"]
    assert code == 0 and started == ["a", "b", "c", "d", "x"]  # exclusive last: nothing waits


def test_a_failed_stage_stops_only_what_depends_on_it(tmp_path: Path, capsys) -> None:
    code, events, scheduler = _run(tmp_path, to_run(PIPELINE, force=True, changed=None),
                                   jobs=2, fail="a")
    span = _intervals(events)
    assert code == 1 and scheduler.failed == ["a"]
    assert set(span) == {"a", "b", "x"}  # c and d need a: never began; x needs b only
    assert scheduler.skipped == ["c", "d"] and sorted(scheduler.done) == ["b", "x"]
    out = capsys.readouterr().out
    assert "repro: a FAILED (exit 3)" in out
    summary = out[out.index("repro: 1 of 5"):]
    assert "1 of 5 stages FAILED, 2 done, 2 not run" in summary
    # the stage's own error line, not DVC's, with the URL whole
    assert "a: DownloadError: a: could not fetch it from http://127.0.0.1:9/a" in summary
    assert "not run: c, d" in summary


def test_two_failures_skip_the_union_of_their_downstream(tmp_path: Path, capsys) -> None:
    code, events, scheduler = _run(tmp_path, to_run(PIPELINE, force=True, changed=None),
                                   jobs=1, fail="a,b")
    assert code == 1 and sorted(scheduler.failed) == ["a", "b"]
    assert sorted(scheduler.skipped) == ["c", "d", "x"] and scheduler.done == []
    assert {e["stage"] for e in events} == {"a", "b"}


def test_bad_arguments_and_a_missing_pipeline_are_one_line(tmp_path: Path, monkeypatch,
                                                           capsys) -> None:
    with pytest.raises(UserError, match="--jobs 0: must be >= 1"):
        Scheduler([], 0)
    monkeypatch.chdir(tmp_path)
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("UserError: no dvc.yaml in ") and err.count("\n") == 1


SLOW_DVC = """
import os, signal, sys, time
root, name = sys.argv[1], sys.argv[-1]
def cut(*_):  # DVC interrupted while it rewrites dvc.lock in place
    open(os.path.join(root, "dvc.lock"), "w").close()
    sys.exit(130)
signal.signal(signal.SIGINT, cut)
open(os.path.join(root, f"{name}.pid"), "w").write(str(os.getpid()))
time.sleep(120)
"""


def _runner(root: Path, stages: str, fake: str):  # type: ignore[no-untyped-def]
    """The runner in its own process, SIGTERM handled as ``python -m workbench.repro`` does,
    over ``Scheduler(<stages>, command=(python, root / <fake>...))``."""
    import subprocess

    return subprocess.Popen([sys.executable, "-c", (
        "import signal, sys; from pathlib import Path; "
        "from workbench.repro import Scheduler, Stage, _sigterm; "
        "signal.signal(signal.SIGTERM, _sigterm); "
        f"root = Path({str(root)!r}); "
        f"sys.exit(Scheduler({stages}, root=root, "
        f"command=(sys.executable, str(root / {fake})).run())")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_sigterm_stops_the_stages_and_leaves_the_lock_complete(tmp_path: Path) -> None:
    import os
    import signal
    import time

    lock = "schema: '2.0'\nstages:\n  a:\n    cmd: x\n"
    (tmp_path / "dvc.lock").write_text(lock)
    (tmp_path / "slow_dvc.py").write_text(SLOW_DVC)
    runner = _runner(tmp_path, "[Stage('a', frozenset()), Stage('b', frozenset())], 2",
                     "'slow_dvc.py'), str(root)")
    pids = [tmp_path / "a.pid", tmp_path / "b.pid"]
    deadline = time.monotonic() + 60
    while not all(p.exists() and p.read_text() for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    runner.send_signal(signal.SIGTERM)
    out, _ = runner.communicate(timeout=60)
    assert runner.returncode == 130, out
    for p in pids:  # every stage's process is gone
        with pytest.raises(ProcessLookupError):
            os.kill(int(p.read_text()), 0)
    assert (tmp_path / "dvc.lock").read_text() == lock  # cut by the stage, restored
    assert "dvc.lock was cut by the interruption; restored" in out


OUT_DVC = """
import os, shutil, signal, sys, time
root, mode, name = sys.argv[1], sys.argv[2], sys.argv[-1]
out = os.path.join(root, "results", name)
shutil.rmtree(out)                      # what DVC does before the command runs
os.makedirs(out)
open(os.path.join(out, "half.csv"), "w").write("cut")
if mode == "fail":
    sys.exit(2)
if mode == "slow":
    signal.signal(signal.SIGINT, lambda *_: sys.exit(130))
    open(os.path.join(root, "started"), "w").write(str(os.getpid()))
    time.sleep(120)
open(os.path.join(out, "half.csv"), "w").write("new, whole")
"""


def _committed(tmp_path: Path, name: str) -> Path:
    out = tmp_path / "results" / name
    (out / "sub").mkdir(parents=True)
    (out / "summary.json").write_text('{"committed": true}')
    (out / "sub" / "curve.csv").write_text("1,2\n")
    (out / "link").symlink_to("summary.json")
    return out


def _tree(path: Path) -> dict[str, str]:
    return {str(p.relative_to(path)): (f"-> {os.readlink(p)}" if p.is_symlink()
                                       else p.read_text() if p.is_file() else "/")
            for p in sorted(path.rglob("*"))}


@pytest.mark.parametrize("mode", ["fail", "ok"])
def test_a_stage_that_does_not_finish_gets_its_outputs_back(tmp_path: Path, mode: str,
                                                             capsys) -> None:
    """DVC deletes a stage's outputs before its command: the runner keeps hard-linked copies
    and puts them back when the stage fails; a stage that finishes keeps its new output."""
    out = _committed(tmp_path, "a")
    before = _tree(out)
    (tmp_path / "out_dvc.py").write_text(OUT_DVC)
    code = Scheduler([Stage("a", frozenset(), outs=("results/a",))], 1, root=tmp_path,
                     command=(sys.executable, str(tmp_path / "out_dvc.py"), str(tmp_path),
                              mode)).run()
    if mode == "fail":
        assert code == 1 and _tree(out) == before
        assert "its outputs from before the run are back (results/a)" in capsys.readouterr().out
    else:
        assert code == 0 and _tree(out) == {"half.csv": "new, whole"}
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["a"]  # no copy left


COST_DVC = """
import os, shutil, sys
root, name = sys.argv[1], sys.argv[-1]
shutil.rmtree(os.path.join(root, "results", name))       # DVC, before the command
os.makedirs(os.path.join(root, "results", name))
record = os.path.join(root, "results", "costs", name + ".json")
with open(record + ".tmp", "w") as f:                     # the stage's own cost record,
    f.write("this run")                                   # written atomically (a new inode)
os.replace(record + ".tmp", record)
sys.exit(2)  # then DVC did not take the output (a Ctrl-C right after the command ended)
"""


def test_a_stage_that_does_not_count_gets_its_cost_record_back(tmp_path: Path) -> None:
    """Found by CI (issue 68): a Ctrl-C that reached DVC just after the stage's command ended
    left the stage's new cost record (``results/costs/<stage>.json``, committed, not a DVC
    output) beside its restored output. The runner keeps and restores the record too."""
    out = _committed(tmp_path, "esd")
    before = _tree(out)
    record = tmp_path / "results" / "costs" / "esd.json"
    record.parent.mkdir()
    record.write_text("committed")
    (tmp_path / "cost_dvc.py").write_text(COST_DVC)
    # the record's place is the stage registry's (costs_root), not a guess from the outputs
    assert Stage("notebook@esd", frozenset(), outs=("reports/notebooks/esd.ipynb",)).guarded \
        == ("reports/notebooks/esd.ipynb", "results/costs/notebook@esd.json")
    assert Stage("preprocess@x", frozenset(), outs=("data/processed/x",)).guarded \
        == ("data/processed/x", "data/costs/preprocess@x.json")
    assert Stage("report", frozenset(), outs=("reports/README.md",)).guarded == \
        ("reports/README.md",)  # the report records no cost
    stage = Stage("esd", frozenset(), outs=("results/esd",))
    assert stage.guarded == ("results/esd", "results/costs/esd.json")
    code = Scheduler([stage], 1, root=tmp_path,
                     command=(sys.executable, str(tmp_path / "cost_dvc.py"), str(tmp_path))).run()
    assert code == 1 and _tree(out) == before and record.read_text() == "committed"
    assert sorted(p.name for p in record.parent.iterdir()) == ["esd.json"]  # no copy left


def test_an_interrupted_stage_gets_its_outputs_back(tmp_path: Path) -> None:
    import signal
    import time

    out = _committed(tmp_path, "a")
    before = _tree(out)
    (tmp_path / "out_dvc.py").write_text(OUT_DVC)
    runner = _runner(tmp_path, "[Stage('a', frozenset(), outs=('results/a',))], 1",
                     "'out_dvc.py'), str(root), 'slow'")
    deadline = time.monotonic() + 60
    while not (tmp_path / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _tree(out) == {"half.csv": "cut"}  # DVC deleted it, the stage began its own
    runner.send_signal(signal.SIGTERM)
    text, _ = runner.communicate(timeout=60)
    assert runner.returncode == 130, text
    assert _tree(out) == before and "outputs from before the run are back" in text
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["a"]


def test_a_copy_a_killed_runner_left_is_put_back_before_the_next_run(tmp_path: Path) -> None:
    """A runner killed outright (SIGKILL) after DVC deleted an output leaves only the kept copy:
    the next run puts it back before anything else, and keeps its own copy of it."""
    from workbench.repro import drop_kept, keep_outputs

    out = _committed(tmp_path, "a")
    before = _tree(out)
    stage = Stage("a", frozenset(), outs=("results/a",))
    keep_outputs(tmp_path, stage)
    import shutil

    shutil.rmtree(out)  # DVC's delete; then the runner dies
    keep_outputs(tmp_path, stage)  # the next run
    assert _tree(out) == before
    kept = tmp_path / "results" / ".a.kept-by-repro"
    assert _tree(kept) == before and (kept / "summary.json").stat().st_ino == (
        out / "summary.json").stat().st_ino  # a hard link, no data copied
    drop_kept(tmp_path, stage)
    assert not kept.exists() and _tree(out) == before


@pytest.mark.parametrize("wrapped", [False, True])
def test_a_ctrl_c_while_the_pipeline_loads_is_one_line(tmp_path: Path, monkeypatch, capsys,
                                                       wrapped: bool) -> None:
    """Ctrl-C while DVC reads the pipeline (seconds at the start of every make repro) ends in
    one line and exit 130, also when DVC wraps it in its own error."""
    import workbench.repro as repro

    def loading(root: Path) -> list[Stage]:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as ki:
            if wrapped:
                raise RuntimeError("while collecting stages") from ki
            raise

    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(repro, "load_pipeline", loading)
    assert repro.main([]) == 130
    err = capsys.readouterr().err.strip()
    assert err == "repro: interrupted before any stage started; nothing was run or changed"


def test_a_single_file_output_a_killed_runner_left_is_put_back_too(tmp_path: Path) -> None:
    from workbench.repro import keep_outputs

    out = tmp_path / "results" / "one.json"
    out.parent.mkdir()
    out.write_text('{"committed": true}')
    stage = Stage("one", frozenset(), outs=("results/one.json",))
    keep_outputs(tmp_path, stage)
    out.unlink()  # DVC's delete; then the runner dies
    keep_outputs(tmp_path, stage)  # the next run: the file is back, its copy kept again
    assert out.read_text() == '{"committed": true}'
    assert (tmp_path / "results" / ".one.json.kept-by-repro").stat().st_ino == out.stat().st_ino


_STAGE = """
import signal, sys, time
from pathlib import Path
signal.signal(signal.SIGINT, signal.SIG_IGN)      # a stage that ignores Ctrl-C
if sys.argv[2] == "unwinds":
    def unwind(signum, frame):
        Path(sys.argv[1]).write_text("cleaned up")  # what a stage's finally blocks do
        sys.exit(143)
    signal.signal(signal.SIGTERM, unwind)
else:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("kind", ["unwinds", "ignores everything"])
def test_a_stage_ignoring_ctrl_c_gets_sigterm_before_sigkill(tmp_path, kind) -> None:
    """Issue 68: the runner stops a stage with SIGINT, then SIGTERM (which a stage turns into
    the same unwinding as Ctrl-C), and only then SIGKILL: a stage ignoring SIGINT still removes
    its temporaries."""
    import subprocess

    from workbench.repro import stop_groups

    marker = tmp_path / "marker"
    proc = subprocess.Popen([sys.executable, "-c", _STAGE, str(marker), kind],
                            stdout=subprocess.PIPE, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    stop_groups([proc], grace=(0.3, 0.5))
    if kind == "unwinds":
        assert proc.returncode == 143 and marker.read_text() == "cleaned up"
    else:
        assert proc.returncode == -9 and not marker.exists()
