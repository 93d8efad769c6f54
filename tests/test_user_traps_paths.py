"""Planted files and links under the data and results roots (issue 46's worst breaks).

Nothing the project writes or deletes may lie outside its data and results roots, whatever a
file or link planted beside its outputs says: a commit journal naming other folders, a link at
``data/processed`` or ``results/<stage>`` (one level above the dataset's folder), a link at the
``.<name>.old`` sibling, or a local dataset taking a pipeline dataset's name.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.config import load
from workbench.data.pipeline import downloads_dir, processed_dir, raw_dir
from workbench.utils.io import JournalError, atomic_dir, atomic_dirs, finish_commit
from workbench.utils.paths import inside
from workbench.utils.validation import ConfigError

# end to end (each runs the command line or a module as a user does): not in make test-fast
pytestmark = pytest.mark.slow


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "home" / "precious"
    victim.mkdir(parents=True)
    (victim / "thesis.tex").write_text("years of work")
    return victim


def _intact(victim: Path) -> bool:
    return (victim / "thesis.tex").read_text() == "years of work"


@pytest.mark.parametrize("journal", [
    '{{"token": "t", "pairs": [["{tmp}", "{victim}"]]}}',          # first folder not its own
    '{{"token": "t", "pairs": [["{parts}/.x.1.tmp", "{parts}/x"], ["{tmp}", "{victim}"]]}}',
    # a second pair on a folder the caller does not commit, its temporary holding the token
    '{{"token": "guess", "pairs": [["{parts}/.x.1.tmp", "{parts}/x"], ["{tmp}", "{victim}"]]}}',
    '{{"token": "t", "pairs": [["{victim}", "{parts}/x"]]}}',      # moves a folder in
    '[["{tmp}", "{victim}"]]',                                     # no token
    "not json",
])
def test_a_planted_commit_journal_moves_and_deletes_nothing(tmp_path: Path, journal: str) -> None:
    victim = _victim(tmp_path)
    parts = tmp_path / "data" / "partitions"
    parts.mkdir(parents=True)
    decoy = tmp_path / "home" / ".precious.abc.tmp"  # even one named like a temporary,
    decoy.mkdir()
    (decoy / ".workbench-commit").write_text("guess")  # holding a guessed token
    (parts / ".x.commit.json").write_text(
        journal.format(tmp=decoy, victim=victim, parts=parts))
    with pytest.raises(JournalError) as info:
        finish_commit(parts / "x")
    assert "\n" not in str(info.value) and "delete " in str(info.value)
    assert _intact(victim) and decoy.is_dir()


def test_a_journal_that_is_a_link_is_refused(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    parts = tmp_path / "data" / "partitions"
    parts.mkdir(parents=True)
    (parts / ".x.commit.json").symlink_to(victim / "thesis.tex")
    with pytest.raises(JournalError, match="is a link"):
        finish_commit(parts / "x")
    assert _intact(victim)


def test_a_real_interrupted_commit_still_rolls_forward(tmp_path: Path) -> None:
    first, second = tmp_path / "data" / "partitions" / "x", tmp_path / "results" / "dedup" / "x"
    with atomic_dirs(first, second) as (a, b):
        (a / "p").write_text("1")
        (b / "r").write_text("2")
    assert (first / "p").read_text() == "1" and (second / "r").read_text() == "2"
    assert not any(p.name == ".workbench-commit" for p in (*first.iterdir(), *second.iterdir()))
    # a run killed between the two renames: the journal and the second temporary remain
    tmp = second.parent / ".x.killed.tmp"
    tmp.mkdir()
    (tmp / "r").write_text("3")
    (tmp / ".workbench-commit").write_text("t0k3n")
    (first.parent / ".x.commit.json").write_text(json.dumps({"token": "t0k3n", "pairs": [
        [str(first.parent / ".x.gone.tmp"), str(first)], [str(tmp), str(second)]]}))
    assert finish_commit(first, second) and sorted(p.name for p in second.iterdir()) == ["r"]
    assert (second / "r").read_text() == "3" and not (first.parent / ".x.commit.json").exists()


@pytest.mark.parametrize("level", ["processed", "raw", "downloads"])
def test_a_link_above_the_dataset_folder_is_refused(tmp_path: Path, level: str) -> None:
    victim = _victim(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    (data / level).symlink_to(victim.parent, target_is_directory=True)
    build = {"processed": processed_dir, "raw": raw_dir, "downloads": downloads_dir}[level]
    with pytest.raises(ConfigError, match="must stay inside"):
        build(data, "precious")
    assert _intact(victim)


def test_a_link_at_results_stage_is_refused(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    results = tmp_path / "results"
    results.mkdir()
    (results / "het_cache").symlink_to(victim.parent, target_is_directory=True)
    with pytest.raises(ConfigError, match="dataset.name = 'precious': must stay inside"):
        inside(results / "het_cache", "precious", key="dataset.name", guard=results)
    assert _intact(victim)


def test_a_planted_old_link_is_removed_as_a_link(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    dest = tmp_path / "data" / "processed" / "x"
    dest.mkdir(parents=True)
    (dest / "old.parquet").write_text("old")
    (dest.parent / ".x.old").symlink_to(victim, target_is_directory=True)
    with atomic_dir(dest) as tmp:
        (tmp / "new.parquet").write_text("new")
    assert sorted(p.name for p in dest.iterdir()) == ["new.parquet"]
    assert _intact(victim) and not (dest.parent / ".x.old").exists()


def test_a_link_at_the_destination_is_replaced_not_followed(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    dest = tmp_path / "results" / "x"
    dest.parent.mkdir(parents=True)
    dest.symlink_to(victim, target_is_directory=True)
    with atomic_dir(dest) as tmp:
        (tmp / "summary.json").write_text("{}")
    assert not dest.is_symlink() and (dest / "summary.json").exists() and _intact(victim)


def test_a_local_dataset_cannot_take_a_pipeline_datasets_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="dataset.name = 'criteo_sample' is a dataset of the "
                                          "pipeline .* dataset.name=my_criteo_sample"):
        load(["dataset=local", "dataset.name=criteo_sample", f"dataset.path={tmp_path}"])
    load(["dataset=criteo_sample"])  # the pipeline's own dataset, as configured: fine
    load(["dataset=local", "dataset.name=my_criteo_sample", f"dataset.path={tmp_path}"])


@pytest.mark.parametrize("out_dir", [".", "", "  ", "..", "/"])
def test_a_notebook_out_dir_at_or_above_the_project_root_is_refused(out_dir: str) -> None:
    from workbench.utils.paths import notebook_output

    with pytest.raises(ConfigError, match="out_dir = .*e.g. out_dir=scratch/esd"):
        notebook_output("esd", out_dir)


@pytest.mark.parametrize("out_dir,says", [
    ("reports/het", "inside notebook het's section"), ("reports", "the project's reports/"),
    ("reports/het/sub", "notebook het's section"), ("docs/figs", "the project's docs/"),
    ("results/esd", "the project's results/"), ("link to reports/het", "notebook het's section")])
def test_a_notebook_out_dir_over_another_section_or_committed_files_is_refused(
        out_dir: str, says: str) -> None:
    """``out_dir=reports/het`` for the esd notebook would replace het's committed page and
    section.json (so would a link to it); only reports/esd is the esd notebook's own."""
    from workbench.utils.paths import REPO_ROOT, SCRATCH_DIR, notebook_output

    link = None
    if out_dir.startswith("link"):
        SCRATCH_DIR.mkdir(parents=True, exist_ok=True)
        link = SCRATCH_DIR / f"to_het_{os.getpid()}"
        link.symlink_to(REPO_ROOT / "reports" / "het")
        out_dir = str(link)
    try:
        with pytest.raises(ConfigError, match=f"{says}.*e.g. out_dir=scratch/esd"):
            notebook_output("esd", out_dir)
    finally:
        if link is not None:
            link.unlink()
    assert notebook_output("esd", "reports/esd") == REPO_ROOT / "reports" / "esd"
    assert notebook_output("esd", "scratch/mine") == REPO_ROOT / "scratch" / "mine"


def test_a_readme_no_notebook_wrote_is_never_overwritten(tmp_path: Path) -> None:
    from workbench.report.page import write_page
    from workbench.utils.errors import UserError

    section = {"name": "esd", "title": "ESD", "intro": "", "items": [], "claims": []}
    mine = tmp_path / "README.md"
    mine.write_text("# My project\n")
    with pytest.raises(UserError, match="not a page a notebook wrote"):
        write_page(tmp_path, section)
    assert mine.read_text() == "# My project\n"
    mine.unlink()
    mine.symlink_to(tmp_path / "elsewhere.md")  # a link: refused, its target never created
    with pytest.raises(UserError, match="not a page a notebook wrote"):
        write_page(tmp_path, section)
    assert not (tmp_path / "elsewhere.md").exists()
    mine.unlink()
    assert write_page(tmp_path, section) and not write_page(tmp_path, section)
    section["intro"] = "changed"
    assert write_page(tmp_path, section)  # its own page is rewritten


@pytest.mark.parametrize("kind", ["link", "device"])
def test_replay_out_never_replaces_a_link_or_a_device(tmp_path: Path, kind: str) -> None:
    from workbench.replay import TraceError, _check_out

    victim = _victim(tmp_path)
    out = tmp_path / "result.json"
    if kind == "link":
        out.symlink_to(victim / "thesis.tex")
    else:
        out = Path("/dev/null")
    with pytest.raises(TraceError, match="a link or a special file"):
        _check_out(out, tmp_path / "trace.npy")
    assert _intact(victim) and (kind != "link" or out.is_symlink())


@pytest.mark.parametrize("spelling", ["same", "dotted", "hard link"])
def test_replay_out_is_never_the_trace_it_reads(tmp_path: Path, spelling: str) -> None:
    """``replay cache --trace t.npy --out t.npy`` would replace the trace with the result."""
    import numpy as np

    trace = tmp_path / "trace.npy"
    np.save(trace, np.zeros((2, 1, 3), np.int64))
    before = trace.read_bytes()
    out = {"same": trace, "dotted": tmp_path / "." / "sub" / ".." / "trace.npy",
           "hard link": tmp_path / "other.npy"}[spelling]
    (tmp_path / "sub").mkdir()
    if spelling == "hard link":
        os.link(trace, out)
    done = subprocess.run([sys.executable, "-m", "workbench.replay", "cache", "--trace",
                           str(trace), "--cache-rows", "2", "--out", str(out)],
                          capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert "that is the --trace it reads" in done.stderr and len(done.stderr.splitlines()) == 1
    assert trace.read_bytes() == before


def test_a_training_stage_on_labels_of_one_class_stops_instead_of_reporting_nan(
        tmp_path: Path) -> None:
    """A session log without its buys file is labelled all 0: het-train, hotline and combined
    (every caller of ``load_split``) stop in one line instead of exiting 0 with AUC nan."""
    import subprocess
    import sys

    from workbench.data.pipeline import SingleClassError
    from workbench.data.schema import DatasetMeta
    from workbench.training.trainer import load_split
    from workbench.utils.paths import REPO_ROOT

    own = tmp_path / "own"
    own.mkdir()
    (own / "clicks.dat").write_text("".join(
        f"{s},2014-04-07T10:{s % 60:02d}:0{i}.000Z,{100 + (s * 7 + i) % 13},0\n"
        for s in range(1, 120) for i in range(3)))
    proc = subprocess.run(
        [sys.executable, "-m", "workbench.stages", "prepare", "dataset=local",
         "dataset.name=clicks", f"dataset.path={own}", "dataset.format=session_clicks",
         f"paths.data={tmp_path / 'data'}", "profile.progress=false"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    processed = tmp_path / "data" / "processed" / "clicks"
    with pytest.raises(SingleClassError, match="every train label of the .* rows read is 0, "
                                               "one class: AUC.* purchases or buys file"):
        load_split(processed, DatasetMeta.read(processed), "train", None)


def test_a_second_run_on_the_same_output_is_told_another_run_is_writing(tmp_path: Path) -> None:
    import multiprocessing

    from workbench.utils.io import ConcurrentRunError

    dest = tmp_path / "results" / "het_cache" / "x"
    ready, release = multiprocessing.Event(), multiprocessing.Event()
    holder = multiprocessing.get_context("fork").Process(
        target=_hold, args=(dest, ready, release), daemon=True)
    holder.start()
    try:
        assert ready.wait(30)
        with pytest.raises(ConcurrentRunError, match="another run is writing .* now"):
            with atomic_dir(dest) as tmp:
                (tmp / "mine").write_text("second")
        with pytest.raises(ConcurrentRunError):
            with atomic_dirs(tmp_path / "other", dest):
                pass
    finally:
        release.set()
        holder.join(30)
    assert (dest / "first").read_text() == "first"  # the first run's output, whole
    with atomic_dir(dest) as tmp:  # the lock is gone with the run
        (tmp / "again").write_text("third")
    assert sorted(p.name for p in dest.parent.iterdir()) == ["x"]  # no lock, no temporaries


def _hold(dest: Path, ready, release) -> None:  # type: ignore[no-untyped-def]
    with atomic_dir(dest) as tmp:
        (tmp / "first").write_text("first")
        ready.set()
        release.wait(30)


@pytest.mark.parametrize("override,says", [
    ("paths.data=", "paths.data = '': give a folder"),
    ("paths.results=' '", "paths.results = ' ': give a folder"),
    ("paths.reports=.", "paths.reports = '.' is the project's root"),
    ("paths.data=/", "paths.data = '/' is the project's root or above it"),
    ("paths.mirrors=['']", "paths.mirrors[0] = '': give a folder"),
])
def test_blank_or_root_paths_are_refused(override: str, says: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(says)):
        load([override])


def test_an_empty_params_file_says_so(tmp_path: Path) -> None:
    empty = tmp_path / "params.yaml"
    empty.write_text("\n")
    with pytest.raises(ConfigError, match="is empty: regenerate it with `make params`"):
        load(params=empty)


def test_a_token_without_equals_is_not_silently_ignored() -> None:
    from workbench.stages.cli import run
    from workbench.utils.errors import UserError

    with pytest.raises(UserError, match="'cache.ratio': an override is key=value"):
        run(["het-cache", "cache.ratio"])


@pytest.mark.parametrize("update,shown", [("nan", "nan"), ("inf", "inf"), ("1e308", "1e+308")])
def test_replay_update_must_be_a_finite_step(tmp_path: Path, capsys, update: str,
                                             shown: str) -> None:
    import numpy as np

    from workbench.replay import main

    trace = tmp_path / "trace.npy"
    np.save(trace, np.zeros((2, 2, 3), dtype=np.int64))
    with pytest.raises(SystemExit) as info:
        main(["cache", "--trace", str(trace), "--update", update])
    err = capsys.readouterr().err.strip()
    assert info.value.code == 2 and err.count("\n") == 0
    assert f"--update = {shown}: must be a" in err and "<= 1000.0" in err


def _laughs() -> str:
    lol = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    for i in "bcdefghi":
        lol += f"{i}: &{i} [" + ",".join(["*" + chr(ord(i) - 1)] * 9) + "]\n"
    return lol


@pytest.mark.parametrize("content,says", [
    (_laughs(), ":1: anchors and aliases (&name / *name) are not read"),  # "billion laughs"
    ("a:\n\tb: 1\n", ":2: found character '\\t' that cannot start any token"),
    ("a: 1\na: 2\n", ":2: found duplicate key a"),
    ('a: !!python/object/apply:os.system ["true"]\n', ":1: could not determine a constructor"),
    ("- 1\n- 2\n", "the top level must be a mapping (key: value), not a list"),
    ("~\n", "not null; is it a params file?"),  # was blamed on pipeline.datasets
    ("1.5: x\n", "the key 1.5 under the top level is a float, not a name"),  # a traceback
    ("a: {2: 3}\n", "the key 2 under a is a int, not a name"),
    ("seed: " + "9" * 5001 + "\n", "Exceeds the limit (4300 digits)"),
    ("seed: !!set {a, b}\n", "Value 'set' is not a supported primitive type"),
    ("seed: 1\n", "has no pipeline and no datasets section: it is not a whole params file"),
    ("root:x:0:0:root:/root:/bin/bash\nbin:x:2:2:bin:/bin:/usr/sbin/nologin\n",
     "not a single text value"),  # /etc/passwd: never echoed
    ("a: " + "[" * 5000 + "]" * 5000 + "\n", ":1: nested deeper than 64 levels"),
    ("a: 1\n".encode("utf-16"), "UTF-16 text; save it as UTF-8"),
    (b"\x00\x01\x02binary", "binary bytes, not YAML text"),
    (b"a: \xe9t\xe9\n", "not UTF-8 text (byte 3"),
])
def test_a_malformed_params_file_is_one_line(tmp_path: Path, content: str | bytes,
                                              says: str) -> None:
    path = tmp_path / "params.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(ConfigError) as info:
        load(params=path)
    message = str(info.value)
    assert says in message and "\n" not in message and "make params" in message
    assert "root:x" not in message and len(message) - len(str(path)) < 350


def test_an_unknown_key_is_shown_short() -> None:
    """A long unknown key (a file that is no params file, a pasted line) is cut in the error."""
    with pytest.raises(ConfigError) as info:  # Hydra took it for a file name: OSError
        load([f"{'x' * 2000}=1"])
    assert "(2,000 characters)" in str(info.value) and len(str(info.value)) < 300
    with pytest.raises(ConfigError) as info:
        load([f"experiments.{'y' * 150}=1"])
    assert "experiments.yyy" in str(info.value) and "(150 characters)" in str(info.value)


def test_a_bad_override_with_a_params_file_is_one_line() -> None:
    from workbench.utils.paths import PARAMS_FILE

    if not PARAMS_FILE.is_file():
        pytest.skip("no params.yaml (make params)")
    with pytest.raises(ConfigError, match=r"an override of \['cache.ratio=\['\] is not a valid"):
        load(["cache.ratio=["], params=PARAMS_FILE)


def test_a_300_character_dataset_name_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"\(300 characters\): must be at most 100 characters"):
        load(["dataset=local", "dataset.name=" + "a" * 300, f"dataset.path={tmp_path}"])


def test_a_file_listed_twice_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"files\[1\] = './a.csv': listed twice .* test rows "
                                          "would leak into train"):
        load(["dataset=local", f"dataset.path={tmp_path}", "dataset.files=[a.csv,./a.csv]"])


@pytest.mark.parametrize("flag", ["--read-bound", "--write-bound", "--rows", "--cache-rows"])
def test_replay_refuses_counts_beyond_64_bits(tmp_path: Path, capsys, flag: str) -> None:
    import numpy as np

    from workbench.replay import main

    trace = tmp_path / "trace.npy"
    np.save(trace, np.zeros((2, 2, 3), dtype=np.int64))
    with pytest.raises(SystemExit) as info:
        main(["cache", "--trace", str(trace), flag, str(2**70)])
    err = capsys.readouterr().err.strip()
    assert info.value.code == 2 and "Traceback" not in err and err.count("\n") == 0
    assert f"{flag} = {2**70}: must be" in err


def _replay_error(capsys, trace: Path) -> str:
    from workbench.replay import main

    with pytest.raises(SystemExit) as info:
        main(["cache", "--trace", str(trace), "--cache-rows", "10", "--out",
              str(trace.with_suffix(".json"))])
    err = capsys.readouterr().err.strip()
    assert info.value.code == 2 and "Traceback" not in err and err.count("\n") == 0
    return err


def test_replay_refuses_a_timedelta_trace(tmp_path: Path, capsys) -> None:
    """numpy counts timedelta64 among the integers: it reached ``np.iinfo`` and a traceback."""
    import numpy as np

    trace = tmp_path / "td.npy"
    np.save(trace, np.arange(24, dtype="timedelta64[s]").reshape(2, 3, 4))
    assert _replay_error(capsys, trace) == \
        f"TraceError: {trace}: dtype timedelta64[s]; expected integer keys"


def test_replay_checks_memory_before_reading_a_huge_trace(tmp_path: Path, capsys) -> None:
    """A sparse trace twice this machine's memory, with an honest header: refused before
    ``np.load`` allocates it (it raised numpy's ``_ArrayMemoryError``)."""
    import numpy as np

    from workbench.utils.io import physical_memory

    have = physical_memory()
    if have is None:
        pytest.skip("this system does not say its memory")
    shape = (2, 8, 2 * have // (2 * 8 * 8) + 1)
    trace = tmp_path / "huge.npy"
    with trace.open("wb") as fh:
        np.lib.format.write_array_header_1_0(
            fh, {"descr": "<i8", "fortran_order": False, "shape": shape})
        fh.truncate(fh.tell() + 8 * shape[0] * shape[1] * shape[2])  # sparse: no disk used
    err = _replay_error(capsys, trace)
    assert err.startswith(f"TraceError: {trace}: its {2 * 8 * shape[2]:,} keys (shape {shape}) "
                          "would take")
    assert err.endswith("of memory: replay a part of it (e.g. save np.load(path, "
                        "mmap_mode='r')[:steps] alone)")


def _contend(dest: Path, tries: int, out) -> None:  # type: ignore[no-untyped-def]
    from workbench.utils.io import ConcurrentRunError, writing

    inside, overlaps, entered = dest.with_name("inside"), 0, 0
    for _ in range(tries):  # a count, not a clock: the same work on a busy machine
        try:
            with writing(dest):
                entered += 1
                try:  # exclusive: nobody else is inside
                    fd = os.open(inside, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    overlaps += 1
                    continue
                os.close(fd)
                os.unlink(inside)
        except ConcurrentRunError:
            pass
    out.put((entered, overlaps))


def test_the_writer_lock_admits_one_run_at_a_time_under_contention(tmp_path: Path) -> None:
    """Four processes taking and leaving one output's writer lock as fast as they can are never
    inside together (the holder unlinks the lock as it leaves; a run that opened the file just
    before must not count the unlinked file's lock as the lock)."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    dest = tmp_path / "results" / "x"
    dest.parent.mkdir(parents=True)
    procs = [ctx.Process(target=_contend, args=(dest, 5000, out)) for _ in range(4)]
    for p in procs:
        p.start()
    counts = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
    assert sum(e for e, _ in counts) > 100  # they did take turns
    assert sum(o for _, o in counts) == 0
    assert sorted(p.name for p in dest.parent.iterdir()) == []  # no lock file left behind


@pytest.mark.parametrize("name", ["synthetic", "synthetic_long", "synthetic_sessions_full"])
def test_an_own_dataset_may_not_take_a_configured_datasets_name(tmp_path: Path,
                                                                name: str) -> None:
    """Every dataset the configuration mounts owns its data/ and results/ (synthetic_long, the
    long HET runs', is in no pipeline.datasets list): an own dataset of that name is refused
    with a name that works; the dataset itself still loads."""
    from workbench.utils.validation import ConfigError

    with pytest.raises(ConfigError, match=rf"dataset.name = '{name}' is a dataset of the "
                                          rf"pipeline .*dataset.name=my_{name}$"):
        load(["dataset=local", f"dataset.name={name}", f"dataset.path={tmp_path}"])
    assert load(["dataset=local", f"dataset.name=my_{name}", f"dataset.path={tmp_path}"])
    assert load([f"dataset={name}"]).dataset.name == name


@pytest.mark.parametrize("kind", ["link", "folder"])
def test_a_writer_lock_that_is_a_link_or_a_folder_is_one_line(tmp_path: Path, kind: str) -> None:
    from workbench.utils.io import ConcurrentRunError

    dest = tmp_path / "results" / "x"
    dest.parent.mkdir(parents=True)
    lock = dest.with_name(".x.writing.lock")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    if kind == "link":
        lock.symlink_to(victim)
    else:
        lock.mkdir()
    with pytest.raises(ConcurrentRunError, match=f"is a {kind}, which no run makes.*remove it"):
        with atomic_dir(dest) as tmp:
            (tmp / "out").write_text("new")
    assert victim.read_text() == "keep" and not dest.exists()


def test_replay_out_with_a_long_name_is_refused_before_any_work(tmp_path: Path) -> None:
    """``--out`` of a 300-character name failed with ENAMETOOLONG at the write, after the whole
    replay, as a traceback."""
    import numpy as np

    trace = tmp_path / "trace.npy"
    np.save(trace, np.zeros((2, 1, 3), np.int64))
    done = subprocess.run([sys.executable, "-m", "workbench.replay", "cache", "--trace",
                           str(trace), "--cache-rows", "2", "--out",
                           str(tmp_path / ("r" * 300 + ".json"))], capture_output=True, text=True)
    assert done.returncode == 2 and "a file name may have at most 255" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_replay_out_on_a_full_disk_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture) -> None:
    import errno

    import numpy as np

    from workbench import replay
    from workbench.utils import io

    trace = tmp_path / "trace.npy"
    np.save(trace, np.zeros((2, 1, 3), np.int64))

    def full(path: Path, doc: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(io, "write_json", full)
    with pytest.raises(SystemExit) as stop:
        replay.main(["cache", "--trace", str(trace), "--cache-rows", "2", "--out",
                     str(tmp_path / "r.json")])
    err = capsys.readouterr().err.strip().splitlines()[-1]  # after the replay's own warnings
    assert stop.value.code == 2 and err.startswith("TraceError: --out ")
    assert "could not write the result (the disk is full); free space" in err
    assert not (tmp_path / "r.json").exists()


def test_a_link_swapped_while_a_stage_writes_moves_nothing_at_its_new_target(tmp_path) -> None:
    """Issue 68: with a results folder reached through a link inside the root, renaming a new
    link to someone else's folder over it while the stage runs made the stage replace that
    folder. The final renames act on the folder as it was at the start (by descriptor): the
    victim's folder is untouched and the stage's output lands where the link pointed then."""
    from workbench.utils.io import atomic_dir

    root = tmp_path / "results"
    real, victim = root / "real", tmp_path / "victim"
    for folder in (real / "out", victim / "out"):
        folder.mkdir(parents=True)
        (folder / "owner.txt").write_text(folder.parent.name)
    (root / "stats").symlink_to("real")
    with atomic_dir(root / "stats" / "out") as tmp:
        (tmp / "owner.txt").write_text("the stage")
        swap = root / ".stats.swap"
        swap.symlink_to(victim)
        os.replace(swap, root / "stats")  # the attacker's swap, mid-run
    assert (victim / "out" / "owner.txt").read_text() == "victim"
    assert sorted(p.name for p in victim.iterdir()) == ["out"]
    assert (real / "out" / "owner.txt").read_text() == "the stage"
    assert sorted(p.name for p in real.iterdir()) == ["out"]
