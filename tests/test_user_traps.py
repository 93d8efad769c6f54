"""The traps a new user met with their own data, their config and the replay commands.

Each test runs the command as the user typed it (or the call it makes) and checks the message:
one line naming the problem, a non-zero exit, no traceback, and nothing half-written.
"""

from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from helpers.traps import criteo_lines, failed_with, local, run, stage
from workbench.config import load
from workbench.data.formats import parse
from workbench.data.formats.movielens import MOVIELENS_FIRST_TIMESTAMP
from workbench.data.preprocess import encode
from workbench.data.schema import MalformedInputError
from workbench.utils.paths import CONF_DIR, REPO_ROOT
from workbench.utils.validation import ConfigError

# end to end (each runs the command line or a module as a user does): not in make test-fast
pytestmark = pytest.mark.slow

SHARED = REPO_ROOT.parent / "shared" / "data"
needs_samples = pytest.mark.skipif(not SHARED.exists(), reason="../shared/data is absent")


# ------------------------------------------------------------------------------ own data


@pytest.mark.parametrize(("name", "content", "fmt", "says"), [
    ("criteo.csv", "label," + ",".join(f"I{i}" for i in range(1, 14)) + "," + ",".join(
        f"C{i}" for i in range(1, 27)) + "\n" + "\n".join(
        line.replace("\t", ",") for line in criteo_lines(50)) + "\n", "criteo_tsv",
     "looks like a header line, then 40 comma-separated fields per line"),
    ("with_id.tsv", "\n".join(f"{i}\t{line}" for i, line in enumerate(criteo_lines(50))) + "\n",
     "criteo_tsv", "41 tab-separated fields per line (none of the known formats)"),
    ("clicks.csv", "\n".join(f"{u},{i},{r},8812509{u % 10}" for u, i, r in
                             zip(range(50), range(100, 150), [1, 3] * 25)) + "\n",
     "taobao_user_behavior", "4 comma-separated fields per line"),
    ("empty.txt", "", "criteo_tsv", "an empty file (0 bytes)"),
    ("header_only.csv", "id,click,hour,C1,banner_pos,site_id,site_domain,site_category,app_id,"
     "app_domain,app_category,device_id,device_ip,device_model,device_type,device_conn_type,"
     "C14,C15,C16,C17,C18,C19,C20,C21\n", "avazu_csv", "No data rows"),
])
def test_a_file_in_the_wrong_format_fails_naming_file_lines_and_look(
        tmp_path: Path, name: str, content: str, fmt: str, says: str) -> None:
    proc = stage(tmp_path, "prepare", *local(tmp_path, name, content, fmt))
    failed_with(proc, "MalformedInputError", name, f"with format '{fmt}'", says)
    assert not (tmp_path / "data" / "processed" / "local").exists()


def test_binary_garbage_is_reported_at_its_line_and_skipped_unless_strict(tmp_path: Path) -> None:
    good = criteo_lines(300)
    garbage = bytes(range(128, 256)) * 3  # invalid UTF-8, no tab, no newline
    body = ("\n".join(good[:100]) + "\n").encode() + garbage + b"\n" + \
        ("\n".join(good[100:]) + "\n").encode()
    path = tmp_path / "day.tsv"
    path.write_bytes(body)
    table = parse("criteo_tsv", [path], max_malformed_fraction=0.05)
    assert table.report.rows == 300 and table.report.malformed == 1
    assert table.report.examples == [f"{path}:101: expected 40 fields, got 1"]
    with pytest.raises(MalformedInputError, match=rf"^{path}:101: expected 40 fields"):
        parse("criteo_tsv", [path], strict=True)


def test_a_movielens_line_cut_short_is_malformed_not_a_1970_rating(tmp_path: Path) -> None:
    folder = tmp_path / "ml"
    folder.mkdir()
    (folder / "u.data").write_text("196\t242\t3\t881250949\n186\t302\t3\t891717742\n"
                                   "22\t377\t1\t8788")  # the last line lost its tail
    (folder / "u.user").write_text("196|24|M|technician|85711\n186|53|F|other|94043\n"
                                   "22|30|M|writer|12345\n")
    (folder / "u.item").write_text("".join(f"{i}|Film {i} (1995)|01-Jan-1995||http://x|"
                                           + "|".join("0" * 19) + "\n" for i in (242, 302, 377)))
    table = parse("movielens_100k", folder)
    assert table.report.rows == 2 and table.report.malformed == 1
    assert "timestamp 8788 is before 1995" in table.report.examples[0]
    assert MOVIELENS_FIRST_TIMESTAMP == 788918400


def test_movielens_files_under_other_names_are_read_in_role_order(tmp_path: Path) -> None:
    folder = tmp_path / "ml"
    folder.mkdir()
    (folder / "ratings.tsv").write_text("196\t242\t4\t881250949\n")
    (folder / "people.txt").write_text("196|24|M|technician|85711\n")
    (folder / "films.txt").write_text("242|Film (1995)|01-Jan-1995||http://x|"
                                      + "|".join("0" * 19) + "\n")
    table = parse("movielens_100k", [folder / n for n in ("ratings.tsv", "people.txt",
                                                          "films.txt")])
    assert table.report.rows == 1 and table.frame["gender"].tolist() == ["M"]


def test_timestamped_sources_are_split_by_time(tmp_path: Path) -> None:
    """Rows sorted by user then time: the test split is the latest ratings, not the last users."""
    folder = tmp_path / "ml"
    folder.mkdir()
    rng = np.random.default_rng(0)
    rows = sorted((u, int(t)) for u in range(1, 21) for t in rng.integers(8.8e8, 8.9e8, 10))
    (folder / "u.data").write_text("".join(f"{u}\t{i}\t4\t{t}\n" for i, (u, t) in enumerate(rows)))
    (folder / "u.user").write_text("".join(f"{u}|30|M|other|1\n" for u in range(1, 21)))
    (folder / "u.item").write_text("".join(f"{i}|F (1995)|01-Jan-1995||x|" + "|".join("0" * 19)
                                           + "\n" for i in range(len(rows))))
    encoded = encode(parse("movielens_100k", folder), test_fraction=0.1)
    assert encoded.split == "by timestamp"
    assert encoded.train["timestamp"].max() <= encoded.test["timestamp"].min()
    assert encoded.test["session"].nunique() > 2  # many users, not the last two


def test_dataset_options_of_the_readme_work_for_every_dataset() -> None:
    for option in sorted((CONF_DIR / "dataset").glob("*.yaml")):
        extra = ["dataset.path=/tmp"] if option.stem == "local" else []
        cfg = load([f"dataset={option.stem}", "dataset.strict=true", "dataset.max_rows=5",
                    "dataset.files=[a.txt]", *extra])
        assert cfg.dataset.strict and cfg.dataset.max_rows == 5 and cfg.dataset.files == ["a.txt"]


@pytest.mark.parametrize(("override", "message"), [
    ("dataset.max_rows=0", "dataset.max_rows = 0: must be an integer >= 1"),
    ("dataset.format=xlsx", "dataset.format = 'xlsx': must be one of 'parquet', 'criteo_tsv'"),
    ("dataset.test_fraction=nan", "dataset.test_fraction = nan: must be a finite number"),
    ("cache.ratio=nan", "cache.ratio = nan: must be a finite number > 0.0 and <= 1.0"),
    ("cluster.bandwidth_gbps=[nan]", "cluster.bandwidth_gbps[0] = nan: must be a finite number"),
    ("model.lr_dense=nan", "model.lr_dense = nan: must be a finite number > 0.0"),
    ("experiments.het_train.cache_bounds=[-1]",
     "experiments.het_train.cache_bounds[0] = -1: must be an integer >= 0"),
    ("model.batch_size=1001", "model.batch_size = 1001: must be a multiple of cluster.workers = 8"),
    ("experiments.het_cache.cache_ratios=[]",
     "experiments.het_cache.cache_ratios = []: must not be empty"),
    ("experiments.esd.dispatchers=[]", "experiments.esd.dispatchers = []: must not be empty"),
    ("pipeline.notebooks=[nope]", "pipeline.notebooks names 'nope', which is not a notebook"),
])
def test_bad_config_values_stop_before_any_work(override: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load([override])
    assert message in str(err.value)


def test_an_unknown_format_stops_before_the_download(tmp_path: Path) -> None:
    proc = stage(tmp_path, "prepare", "dataset=local", f"dataset.path={tmp_path}",
                 "dataset.format=xlsx")
    failed_with(proc, "ConfigError: dataset.format = 'xlsx'")
    assert not (tmp_path / "data").exists()


# -------------------------------------------------------------------------- every stage, own data


@pytest.fixture(scope="module")
def own_taobao(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tuple[str, ...]]:
    """300 rows of the Taobao sample as a user's own file, prepared once."""
    if not SHARED.exists():
        pytest.skip("../shared/data is absent")
    tmp = tmp_path_factory.mktemp("own")
    head = (SHARED / "taobao_user_behavior" / "UserBehavior_head.csv").read_text().splitlines()
    args = local(tmp, "clicks.csv", "\n".join(head[:300]) + "\n", "taobao_user_behavior")
    proc = stage(tmp, "prepare", *args)
    assert proc.returncode == 0, proc.stderr
    return tmp, args


@needs_samples
@pytest.mark.parametrize(("command", "knob", "fix"), [
    ("het-cache", "experiments.het_cache.batch_size = 128", "experiments.het_cache.batch_size=33"),
    ("het-train", "models.wdl.batch_size = 1024", "models.wdl.batch_size=264"),
    ("het-time", "experiments.het_cache.batch_size = 128", "experiments.het_cache.batch_size=33"),
    ("esd", "experiments.esd.per_worker = 256", "experiments.esd.per_worker=33"),
])
def test_every_stage_takes_dataset_and_a_small_one_names_the_knob(
        own_taobao: tuple[Path, tuple[str, ...]], command: str, knob: str, fix: str) -> None:
    """The stage runs on the user's data (the message names it), stops before any work."""
    tmp, args = own_taobao
    failed_with(stage(tmp, command, *args), "DatasetTooSmall: local has 270 train samples",
                knob, f"set {fix}")
    assert not (tmp / "results" / command.replace("-", "_") / "local").exists()


@needs_samples
def test_following_the_advice_runs_and_says_which_sweep_points_were_skipped(
        own_taobao: tuple[Path, tuple[str, ...]]) -> None:
    tmp, args = own_taobao
    proc = stage(tmp, "het-cache", *args, "experiments.het_cache.batch_size=33",
                 results="advised")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp / "advised" / "het_cache" / "local" / "summary.json").read_text())
    assert summary["dataset"] == "local"
    assert summary["skipped"] == {"experiments.het_cache.worker_sweep": [16, 32]}
    assert "worker_sweep: [16, 32] skipped" in proc.stderr


@needs_samples
@pytest.mark.slow
def test_calibrating_own_data_writes_its_own_file_and_leaves_the_pipelines(
        own_taobao: tuple[Path, tuple[str, ...]]) -> None:
    """``calibrate dataset=local`` measures into results/calibrate/local/; the committed
    pipeline calibration (copied in) keeps every byte, and a timed stage on ``local`` reads the
    dataset's own file."""
    import shutil

    tmp, args = own_taobao
    results = tmp / "calibrated"
    shutil.copytree(REPO_ROOT / "results" / "calibration", results / "calibration")
    before = (results / "calibration" / "calibration.json").read_bytes()
    # a quick measurement of fewer shapes (one width of het_time's sweep): where the file goes
    # and what reads it is tested here, not the timings
    quick = ("experiments.calibrate.batch_sizes=[4,8]", "experiments.calibrate.repeats=1",
             "experiments.calibrate.warmup=0", "experiments.calibrate.software_sizes=[1,8]",
             "experiments.het_time.dim_sweep=[32]", "experiments.esd.embedding_dim=32")
    proc = stage(tmp, "calibrate", *args, *quick, results="calibrated")
    assert proc.returncode == 0, proc.stderr
    assert (results / "calibration" / "calibration.json").read_bytes() == before
    own = json.loads((results / "calibrate" / "local" / "calibration.json").read_text())
    assert own["settings"]["repeats"] == 1 and own["compute"]
    meta = json.loads((tmp / "data" / "processed" / "local" / "meta.json").read_text())
    shape = f"/dense{len(meta['dense'])}/sparse{len(meta['categorical'])}"
    assert own["compute"] and all(key.endswith(shape) for key in own["compute"])
    # without the pipeline's file, a timed stage on local runs on local's own calibration,
    # and its summary names the data it ran on
    shutil.rmtree(results / "calibration")
    proc = stage(tmp, "esd", *args, "experiments.esd.per_worker=33", "experiments.esd.batches=2",
                 "experiments.esd.embedding_dim=32",  # the width calibrated above
                 "experiments.esd.train_spreads=[10.0]", "experiments.esd.train_latencies_ms=[1.0]",
                 "experiments.esd.train_replicates=1", "experiments.esd.worker_sweep=[2]",
                 "experiments.esd.cache_sweep=[0.05]", "experiments.esd.spread_sweep=[10.0]",
                 "experiments.esd.batch_sweep=[32]", "experiments.esd.budget_sweep=[1.0]",
                 results="calibrated")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((results / "esd" / "local" / "summary.json").read_text())
    assert summary["dataset"] == "local"


# ------------------------------------------------------------------------------ replay commands


@pytest.fixture
def traces(tmp_path: Path) -> Path:
    np.save(tmp_path / "keys.npy", np.random.default_rng(0).integers(0, 1000, (500, 4)))
    np.save(tmp_path / "huge_key.npy", np.array([[[1, 5, 10**12]]] * 4))
    np.savez(tmp_path / "archive.npz", keys=np.arange(10))
    (tmp_path / "archive.npz").rename(tmp_path / "archive.npy")
    (tmp_path / "empty.npy").write_bytes(b"")
    return tmp_path


@pytest.mark.parametrize(("args", "says"), [
    ("cache --trace {t}/empty.npy", "an empty file (0 bytes)"),
    ("cache --trace {t}/archive.npy", "an .npz archive (arrays ['keys'])"),
    ("cache --trace {t}/huge_key.npy --out {t}", "a directory; give a file path"),
    ("dispatch --trace {t}/keys.npy --dispatcher random --workers 2 --per-worker 4 "
     "--cache-rows 10 --batches 2 --bandwidth-gbps nan", "bandwidth_gbps[0] = nan"),
    ("dispatch --trace {t}/keys.npy --dispatcher laia --workers 100000 --per-worker 4 "
     "--cache-rows 10 --batches 2", "at most --workers 125 with --per-worker 4"),
])
def test_replay_answers_bad_input_with_one_line(traces: Path, args: str, says: str) -> None:
    proc = run("workbench.replay", *args.format(t=traces).split())
    assert proc.returncode == 2
    failed_with(proc, "TraceError", says)


def test_replay_memory_follows_the_trace_not_the_largest_key(traces: Path) -> None:
    proc = run("workbench.replay", "cache", "--trace", str(traces / "huge_key.npy"),
               "--out", str(traces / "out.json"))
    assert proc.returncode == 0, proc.stderr
    config = json.loads((traces / "out.json").read_text())["config"]
    assert config["rows"] == 10**12 + 1 and config["distinct_keys"] == 3


# ------------------------------------------------------------------------------ interruption


def test_a_truncated_dvc_lock_is_detected_with_the_recovery(tmp_path: Path) -> None:
    from workbench.utils import dvc_lock

    full = (REPO_ROOT / "dvc.lock").read_text()
    (tmp_path / "dvc.lock").write_text(full)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "dvc.lock"], cwd=tmp_path, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "lock"],
                   cwd=tmp_path, check=True)
    import yaml

    stages = {name: {"cmd": True, "deps": True, "params": "params" in entry, "outs": True}
              for name, entry in yaml.safe_load(full)["stages"].items()}
    assert dvc_lock.check(tmp_path, stages).ok
    cut = full[: len(full) * 2 // 5]
    (tmp_path / "dvc.lock").write_text(cut[: cut.rindex("\n")] + "\n")
    report = dvc_lock.check(tmp_path, stages)
    assert not report.ok and report.lost
    assert "git checkout dvc.lock" in report.message(tmp_path / "dvc.lock")
    new = {**stages, "download@my_data": {"cmd": True, "deps": True, "params": True,
                                          "outs": True}}
    (tmp_path / "dvc.lock").write_text(full)
    assert dvc_lock.check(tmp_path, new).ok  # a stage never run is new, not lost


def test_gzip_check_used_by_downloads_is_exercised_on_real_bytes() -> None:
    from workbench.data.verify import _GzipStream

    data = gzip.compress(b"x" * 10_000, mtime=0)
    whole, cut = _GzipStream(), _GzipStream()
    whole.update(data)
    cut.update(data[:-20])
    assert whole.problem() is None and "ends early" in cut.problem()


# --- issue 31: a name from the user is a name, never a path ----------------------------------

@pytest.mark.parametrize("name", ["../../victim", "a/b", "..", "/etc", ".hidden", ""])
def test_a_dataset_name_that_is_a_path_is_refused_and_nothing_moves(tmp_path: Path,
                                                                   name: str) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine")
    local = tmp_path / "files"
    local.mkdir()
    (local / "train.txt").write_text("1\t" + "\t".join(["1"] * 13 + ["a"] * 26) + "\n")
    proc = stage(tmp_path / "project", "prepare", "dataset=local", f"dataset.path={local}",
                 "dataset.format=criteo_tsv", f"dataset.name={name}")
    failed_with(proc, "ConfigError: dataset.name = ", "must be a plain name")
    assert (victim / "keep.txt").read_text() == "mine"
    assert not (tmp_path / "project").exists()  # nothing written anywhere


@pytest.mark.parametrize("files", ["[../../etc/hostname]", "[/etc/hostname]", "[a/../../b]"])
def test_local_files_outside_the_dataset_path_are_refused(tmp_path: Path, files: str) -> None:
    proc = stage(tmp_path, "prepare", "dataset=local", f"dataset.path={tmp_path}",
                 "dataset.format=criteo_tsv", f"dataset.files={files}")
    failed_with(proc, "ConfigError: dataset.files[0] = ", "inside path")


def test_the_path_guard_follows_links(tmp_path: Path) -> None:
    from workbench.data.pipeline import processed_dir
    from workbench.utils.paths import inside

    root = tmp_path / "data"
    (root / "processed").mkdir(parents=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (root / "processed" / "linked").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ConfigError, match="dataset.name = 'linked': must stay inside"):
        processed_dir(root, "linked")
    (root / "processed" / "inner").mkdir()
    (root / "processed" / "alias").symlink_to(root / "processed" / "inner")
    assert processed_dir(root, "alias") == root / "processed" / "alias"  # a link that stays in
    for parts in (("..", "x"), ("/etc",), ("a", "..", "..", "b")):
        with pytest.raises(ConfigError, match="must stay inside"):
            inside(root, *parts)
    assert inside(root, "a", "b") == root / "a" / "b"


def test_no_progress_bars_in_a_log(tmp_path: Path) -> None:
    """Progress bars only on a terminal: a pipe (a log file, ``dvc repro``'s output) gets log
    lines, even with ``profile.progress=true``."""
    for cmd in (["prepare", "--dataset", "synthetic", "profile=ci"],
                ["het-cache", "--dataset", "synthetic", "profile=ci"]):
        proc = run("workbench.stages", *cmd, f"paths.data={tmp_path / 'data'}",
                   f"paths.results={tmp_path / 'results'}", "profile.progress=true")
        assert proc.returncode == 0, proc.stderr
        assert "%|" not in proc.stderr and "it/s" not in proc.stderr, proc.stderr[-2000:]
        assert "INFO" in proc.stderr  # the log lines are there
