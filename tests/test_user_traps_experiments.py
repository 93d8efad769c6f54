"""The traps a user met in the RecD and FlexShard experiments: degenerate results reported as
findings, and a bare error where a one-line answer was due.

Each test runs the stage as the user did, on their own session log (YOOCHOOSE's clicks layout,
``dataset.format=session_clicks``) or Criteo file, and checks what it now says: the number it
reports, the warning or the refusal with its reason, or the one-line error, and that nothing is
half-written.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers.traps import criteo_lines, failed_with, local, stage
from workbench import api
from workbench.experiments import flexshard
from workbench.sharding.lookups import SequenceLookups
from workbench.sparse import reader
from workbench.sparse.dedup import to_ikjt
from workbench.sparse.jagged_tensor import KeyedJaggedTensor

# end to end (each runs the command line or a module as a user does): not in make test-fast
pytestmark = pytest.mark.slow

#: A small session log: sessions of ~8 clicks, items Zipf-distributed over a large catalogue
#: (the long tail a history table has: most of a new iteration's rows were never profiled).
SESSIONS, ITEMS, ZIPF, MEAN_CLICKS = 8000, 300_000, 1.05, 8.0
#: Fast settings of the stages on it.
RECD = ("experiments.recd.window_sweep=[4096]", "experiments.recd.batch_sizes=[32,512]")
RECD_TRAIN = ("experiments.recd.repeats=1", "experiments.recd.train_batches=2",
              "experiments.recd.preprocess_batch_sizes=[512]",
              "experiments.recd.preprocess_rows=1024")
FLEX = ("experiments.flexshard.per_device_batch=16", "experiments.flexshard.device_sweep=[8]",
        "experiments.flexshard.skew_sweep=[1.0]", "experiments.flexshard.link_ratio_sweep=[12]",
        "topology.nodes=4")  # 32 devices: a session log this short holds out no more


def session_clicks(seed: int = 0) -> tuple[str, str]:
    """YOOCHOOSE-like ``clicks`` and ``buys`` files (``session,timestamp,item,category``), the
    clicks of a session 30 s apart."""
    rng = np.random.default_rng(seed)
    lengths = rng.geometric(1 / MEAN_CLICKS, SESSIONS)
    session = np.repeat(np.arange(1, SESSIONS + 1), lengths)
    step = np.arange(session.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    start = np.repeat(rng.integers(0, 20 * 86400, SESSIONS), lengths)
    seconds = np.datetime64("2014-04-01T00:00:00") + (start + 30 * step).astype("timedelta64[s]")
    stamps = np.datetime_as_string(seconds, unit="s")
    items = 214_500_000 + rng.zipf(ZIPF, session.size) % ITEMS
    clicks = [f"{s},{t}.000Z,{i},0" for s, t, i in zip(session, stamps, items, strict=True)]
    buys = [line.rsplit(",", 1)[0] + ",100,1" for line in clicks[::37]]
    return "\n".join(clicks) + "\n", "\n".join(buys) + "\n"


@pytest.fixture(scope="module")
def session_log(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tuple[str, ...]]:
    """The user's session log, prepared once (histories of the session's last 10 clicks)."""
    tmp = tmp_path_factory.mktemp("sessions")
    folder = tmp / "own"
    folder.mkdir()
    clicks, buys = session_clicks()
    (folder / "clicks.dat").write_text(clicks)
    (folder / "buys.dat").write_text(buys)
    args = ("dataset=local", f"dataset.path={folder}", "dataset.format=session_clicks",
            "dataset.files=[clicks.dat,buys.dat]", "dataset.history_length=10")
    proc = stage(tmp, "prepare", *args)
    assert proc.returncode == 0, proc.stderr
    return tmp, args


def test_a_key_only_session_log_runs_every_stage_its_warning_names(tmp_path: Path) -> None:
    """Issue 68: a session log without its purchases file is labelled all 0. The prepare
    warning named "dispatch" among what it serves, and the esd stage then ended in
    SingleClassError; now the warning and the trainer's error name the same stages, and each
    of them runs on it."""
    import re

    from workbench.data.schema import LABEL_FREE_STAGES

    folder = tmp_path / "own"
    folder.mkdir()
    (folder / "clicks.dat").write_text(session_clicks()[0])
    args = ("profile=ci", "dataset=local", f"dataset.path={folder}",
            "dataset.format=session_clicks", "dataset.files=[clicks.dat]",
            "dataset.history_length=10")
    proc = stage(tmp_path, "prepare", *args)
    assert proc.returncode == 0, proc.stderr
    named = re.search(r"only serves the stages that need no labels \(([^)]*)\)", proc.stderr)
    assert named and named.group(1).split(", ") == list(LABEL_FREE_STAGES), proc.stderr
    for name in LABEL_FREE_STAGES:
        proc = stage(tmp_path, name, *args)
        assert proc.returncode == 0, f"{name}: {proc.stderr[-1500:]}"
    last = failed_with(stage(tmp_path, "het-train", *args, "cluster.compute=flops",
                             "cluster.software=off"),
                       "SingleClassError: ", f"need no labels ({named.group(1)})")
    assert "esd" not in last.split("need no labels")[1]


def _group(tmp: Path, results: str = "results") -> pd.Series:
    frame = pd.read_csv(tmp / results / "dedup" / "local" / "dedup.csv")
    return frame[(frame.group == "hist_item_id") & (frame.layout == "clustered")
                 & (frame.batch_size == 512)].iloc[0]


# ------------------------------------------------------------------ 1. RecD: empty histories


def test_empty_histories_of_a_session_log_are_not_a_dedup_factor(
        session_log: tuple[Path, tuple[str, ...]]) -> None:
    """A session log's history is the session's earlier clicks: under the history snapshot
    every row's is empty. Those empty lists used to count as duplicates of each other (dedup
    factor = the batch size, 512 here); now the factor counts non-empty rows only, the empty
    ones are reported apart, and the stage warns with the numbers."""
    tmp, args = session_log
    proc = stage(tmp, "dedup", *args, *RECD)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp / "results" / "dedup" / "local" / "summary.json").read_text())
    rows = summary["rows"]
    assert summary["empty_group_rows"] == {"hist_item_id": rows}
    assert (f"dedup group hist_item_id is empty in {rows} of {rows} rows (100%): an empty value "
            "saves nothing when deduplicated, so the dedup factor counts the 0 non-empty rows "
            "only") in proc.stderr
    assert "no user history for RecD to deduplicate" in proc.stderr
    row = _group(tmp)
    assert (row.rows, row.empty_rows, row.unique_rows, row["values"]) == (rows, rows, 0, 0)
    assert math.isnan(row.dedup_factor) and math.isnan(row.values_factor)

    proc = stage(tmp, "recd", *args, *RECD_TRAIN)  # the throughput stage says it too
    assert proc.returncode == 0, proc.stderr
    assert (f"dedup group hist_item_id is empty in {rows} of {rows} rows (100%): the IKJT path "
            "deduplicates nothing there") in proc.stderr


def test_recd_with_no_preprocess_size_that_fits_says_which_does_and_it_works(
        session_log: tuple[Path, tuple[str, ...]]) -> None:
    """Every preprocess batch size larger than the rows: the stage used to skip them all at
    INFO and the notebook ended in KeyError 'ikjt'; now one line with a size that fits, which
    works when followed."""
    import re

    tmp, args = session_log
    assert stage(tmp, "dedup", *args, *RECD).returncode == 0
    base = [a for a in RECD_TRAIN if "preprocess_batch_sizes" not in a]
    last = failed_with(stage(tmp, "recd", *args, *base,
                             "experiments.recd.preprocess_batch_sizes=[100000]",
                             results="nofit"),
                       "DatasetTooSmall: ", "one batch of the smallest of experiments.recd."
                       "preprocess_batch_sizes = [100000]")
    fix = re.search(r"set (experiments\.recd\.preprocess_batch_sizes=\[\d+\])", last)
    assert fix, last
    assert not (tmp / "nofit" / "recd" / "local").exists()
    shutil.copytree(tmp / "results" / "dedup", tmp / "nofit" / "dedup")  # recd reads dedup's
    proc = stage(tmp, "recd", *args, *base, fix.group(1), results="nofit")
    assert proc.returncode == 0, proc.stderr


def test_per_sample_histories_count_only_their_non_empty_rows(
        session_log: tuple[Path, tuple[str, ...]]) -> None:
    """With per-sample histories only each session's first click has an empty one: those rows
    are left out of the factor (not merged into one 'unique' empty row), no warning; and the
    recd stage, whose reader needs request-level groups, says so in one line."""
    tmp, args = session_log
    per_sample = (*args, *RECD, "experiments.recd.history=per_sample")
    proc = stage(tmp, "dedup", *per_sample, results="per_sample")
    assert proc.returncode == 0, proc.stderr
    assert "WARNING" not in proc.stderr
    summary = json.loads((tmp / "per_sample" / "dedup" / "local" / "summary.json").read_text())
    row = _group(tmp, "per_sample")
    assert row.empty_rows == summary["sessions"] == summary["empty_group_rows"]["hist_item_id"]
    assert row.dedup_factor == pytest.approx((row.rows - row.empty_rows) / row.unique_rows,
                                             rel=1e-5)  # written with 6 digits
    assert 1 <= row.dedup_factor < 1.05  # a per-sample history hardly ever repeats

    failed_with(stage(tmp, "recd", *per_sample, *RECD_TRAIN, results="per_sample"),
                "ConfigError: experiments.recd.dedup_groups: ['hist_item_id'] differ between "
                "the samples of one request", "experiments.recd.history=snapshot")
    assert not (tmp / "per_sample" / "recd" / "local").exists()


def test_the_dedup_factor_leaves_empty_rows_out() -> None:
    """The reader's table and the API's per-batch factor agree: 3 empty histories, 2 of one
    history and 1 other: 3 non-empty rows, 2 unique (1.5x), not 6 rows, 3 unique (2x)."""
    kjt = KeyedJaggedTensor.from_dict({"hist": [[], [], [], [7, 8], [7, 8], [9]]})
    frame = reader.dedup_table(kjt, [["hist"]], {("clustered", 6): np.arange(6)}, [6])
    row = frame[frame.group == "hist"].iloc[0]
    assert (row.rows, row.empty_rows, row.unique_rows) == (6, 3, 2)
    assert row.dedup_factor == 1.5 and row.values_factor == pytest.approx(5 / 3)
    ikjt = to_ikjt(kjt, [["hist"]])
    assert ikjt.num_empty("hist") == 3 and ikjt.dedup_factor("hist", skip_empty=True) == 1.5
    table = pd.DataFrame({"hist": [[], [], [], [7, 8], [7, 8], [9]]})
    batch = api.ikjt(table, ["hist"], [["hist"]], batch_size=6, batches=1).iloc[0]
    assert (batch.empty_rows, batch.dedup_factor) == (3, 1.5)
    empty = api.ikjt(table.iloc[:3], ["hist"], [["hist"]], batch_size=3, batches=1).iloc[0]
    assert math.isnan(empty.dedup_factor)  # nothing to deduplicate: no factor


# ------------------------------------------------------------------ 2. RecD: no sessions


def test_recd_on_data_without_sessions_names_the_data_that_has_them(tmp_path: Path) -> None:
    args = local(tmp_path, "day.tsv", "\n".join(criteo_lines(300)) + "\n", "criteo_tsv")
    assert stage(tmp_path, "prepare", *args).returncode == 0
    for command in ("recd", "dedup"):
        failed_with(stage(tmp_path, command, *args),
                    "NoSessionsError: dataset local has no session/user column",
                    "dataset=synthetic_sessions", "dataset.format = movielens_100k",
                    "session_clicks", "experiments.recd.datasets")
    assert not (tmp_path / "data" / "partitions" / "local").exists()
    assert not (tmp_path / "results" / "recd" / "local").exists()
    assert not (tmp_path / "results" / "dedup" / "local").exists()


def test_recd_before_dedup_says_which_stage_to_run(
        session_log: tuple[Path, tuple[str, ...]], tmp_path: Path) -> None:
    tmp, args = session_log
    shutil.copytree(tmp / "data" / "processed", tmp_path / "data" / "processed")
    last = failed_with(stage(tmp_path, "recd", *args), "MissingInputError: ",
                       "partitions.json not found: run the dedup stage for local first")
    assert str(tmp_path / "data" / "partitions" / "local") in last
    assert not (tmp_path / "results" / "recd" / "local").exists()


# ------------------------------------------------------------------ 3. FlexShard


def _flexshard(tmp: Path, args: tuple[str, ...], *extra: str,
               results: str) -> tuple[dict, pd.DataFrame, str]:
    proc = stage(tmp, "flexshard", *args, *FLEX, *extra, results=results)
    assert proc.returncode == 0, proc.stderr
    out = tmp / results / "flexshard" / "local"
    return (json.loads((out / "summary.json").read_text()),
            pd.read_csv(out / "plans.csv").set_index("plan"), proc.stderr)


def test_plans_limited_to_row_wise_memory_stay_within_it_when_replayed(
        session_log: tuple[Path, tuple[str, ...]]) -> None:
    """Histories repeat a user's items in consecutive samples, so hardly a row is looked up
    exactly once and the per-lookup Good-Turing estimate put ~1% of the lookups on rows the
    profile missed, where ~75% of the replayed lookups went: the planner filled RW's memory
    with replicas and the replay then took 1.05x (FlexShard) and 1.08x (hot_dp) RW's memory.
    The missing mass is now estimated per iteration and matches the replay."""
    tmp, args = session_log
    summary, plans, stderr = _flexshard(tmp, args, results="flex")
    assert summary["replay_in_profile"] == 0  # a held-out replay
    for plan in ("flexshard", "hot_dp"):
        assert plans.loc[plan, "replay_memory"] <= plans.loc["rw", "replay_memory"], plan
        assert plans.loc[plan, "expected_memory"] <= plans.loc["rw", "expected_memory"]
    assert summary["memory_vs_rw"] <= 1
    assert "planned within RW's memory" not in stderr

    data = SequenceLookups.read(tmp / "data" / "processed" / "local", None)
    devices = summary["topology"]["devices"]
    profiled = np.concatenate([data.iteration(t, devices, 16)[1] for t in range(4)])
    replayed = np.concatenate([data.iteration(t, devices, 16)[1] for t in range(4, 8)])
    counts = np.bincount(profiled, minlength=data.rows)
    missed = float((counts[replayed] == 0).mean())  # the replay's lookups on unprofiled rows
    assert summary["unseen_mass_estimate"] == pytest.approx(missed, abs=0.05)
    assert (counts == 1).sum() / counts.sum() < missed / 10  # the per-lookup estimate's miss


@pytest.mark.parametrize(("setting", "reason"), [
    ("topology.nodes=1", "no inter-node traffic in either plan"),
    ("experiments.flexshard.per_device_batch=256",
     "FlexShard replicates the whole table on every node (t1 + t2 = N = "),
    ("experiments.flexshard.memory_limit=none",
     "FlexShard replicates the whole table on every device (t1 = N = "),
])
def test_no_percentage_of_traffic_that_cannot_exist(
        session_log: tuple[Path, tuple[str, ...]], setting: str, reason: str) -> None:
    """'100% less inter-node traffic' was reported for a single node (no baseline) and for a
    table replicated on every node or device (no traffic by construction): the ratio is now
    refused, with the reason, in the summary and the log."""
    tmp, args = session_log
    summary, plans, stderr = _flexshard(tmp, args, setting,
                                        results=setting.split(".")[-1].replace("=", "_"))
    assert summary["inter_traffic_reduction"] is None
    assert summary["inter_traffic_reduction_note"].startswith(reason)
    assert f"no inter-node traffic ratio: {reason}" in stderr
    assert "% less inter-node traffic" not in stderr
    if "every device" in reason:
        assert summary["traffic_reduction"] is None and summary["latency_speedup"] is None
        assert summary["latency_speedup_note"] == summary["inter_traffic_reduction_note"]
    if "every node" in reason:  # 256 per device: more samples than the split holds
        assert summary["whole_table_node_replicated"] and summary["replay_in_profile"] > 0
        assert ("of the replayed samples are the profile's (not a held-out replay)"
                in stderr)


def test_a_ratio_against_an_absent_baseline_is_refused() -> None:
    plans = pd.DataFrame({"plan": ["rw", "flexshard"], "t1": [0, 2], "t2": [0, 3],
                          "replay_inter_bytes": [0.0, 2.0**20], "replay_bytes": [1.0, 2.0**20],
                          "replay_seconds": [1.0, 2.0], "replay_memory": [1.0, 1.0]})
    ratios = flexshard.versus_rw(plans.set_index("plan"), 10)
    assert ratios["inter_traffic_reduction"] is None
    assert ratios["inter_traffic_reduction_note"] == (
        "RW has no inter-node traffic to reduce (FlexShard: 1 MiB per iteration)")
    assert ratios["latency_speedup"] == 0.5 and ratios["latency_speedup_note"] is None


def test_a_replay_over_row_wise_memory_is_said_with_the_numbers(
        caplog: pytest.LogCaptureFixture) -> None:
    plans = pd.DataFrame({"plan": ["rw", "flexshard"], "expected_memory": [4.0, 4.0],
                          "replay_memory": [4.0, 4.4]}).set_index("plan") * 2**20
    with caplog.at_level(logging.WARNING, logger="workbench.experiments.flexshard"):
        flexshard.warn_over_memory("local", plans, "rw")
        flexshard.warn_over_memory("local", plans, "none")  # no limit: nothing to say
    (record,) = caplog.records
    assert record.getMessage() == (
        "local: flexshard was planned within RW's memory (expected 4.00 MiB against RW's "
        "4.00 MiB) but its busiest replayed iteration takes 4.40 MiB, 1.100x RW's 4.00 MiB: "
        "the replay's all-to-all buffers exceed the profile's expectation")


def test_a_reversed_direction_is_said(caplog: pytest.LogCaptureFixture) -> None:
    """The ci profile's HybridDis ran slower than random end to end without a word (issue 46):
    the stage now logs it, naming whose direction it reverses."""

    from workbench.experiments.context import say_if_reversed

    log = logging.getLogger("workbench.experiments.esd")
    with caplog.at_level(logging.WARNING):
        assert not say_if_reversed(log, "HybridDis against random", 9.0, 10.0, "the ESD paper's")
        assert not say_if_reversed(log, "HybridDis against random", float("nan"), 1.0, "x")
        assert not caplog.records
        assert say_if_reversed(log, "HybridDis against random", 11.4, 10.0,
                               "the ESD paper's (claim esd.speedup)")
    (record,) = caplog.records
    assert record.getMessage().startswith(
        "HybridDis against random: 1.14x SLOWER end to end here (11.4 s against 10 s emulated), "
        "the opposite of the ESD paper's (claim esd.speedup) direction")


def test_a_sweep_that_fits_nowhere_names_the_largest_point_that_does() -> None:
    """"give smaller values" named none."""
    from workbench.experiments.sizing import DatasetTooSmall, fitting

    with pytest.raises(DatasetTooSmall) as info:
        fitting("experiments.esd.worker_sweep", [16, 32], lambda w: w * 64 <= 700, {})
    assert str(info.value).endswith("the largest that fits is 10: set "
                                    "experiments.esd.worker_sweep=[10] or smaller values")
    with pytest.raises(DatasetTooSmall, match=r"not even experiments.esd.worker_sweep = \[1\] "
                                              r".*: use a larger dataset"):
        fitting("experiments.esd.worker_sweep", [16, 32], lambda w: w * 64 <= 10, {})


@pytest.mark.parametrize(("samples", "fix"), [
    (7000, "set experiments.distributed_check.steps=27"),
    (540, "set experiments.distributed_check.steps=3 and "
          "experiments.distributed_check.batch_size=180"),
    (5, "use a larger dataset (at least 3 x 4 = 12 train samples"),
])
def test_distributed_check_on_small_data_gives_settings_that_fit(samples: int, fix: str) -> None:
    """"lower experiments.distributed_check.steps" led to steps >= 2, then to warmup < steps."""
    import dataclasses

    from workbench.config import load
    from workbench.experiments.distributed_check import _fewer_steps

    exp = load().experiments.distributed_check
    exp = dataclasses.replace(exp, workers=2, esd_workers=4, batch_size=256, steps=30, warmup=2)
    assert _fewer_steps(exp, samples).startswith(fix)
    if fix.startswith("set"):  # followed: the settings validate and fit the samples
        steps = int(fix.split("steps=")[1].split()[0])
        batch = int(fix.split("batch_size=")[1]) if "batch_size" in fix else 256
        dataclasses.replace(exp, steps=steps, batch_size=batch).__post_init__()
        assert steps * batch <= samples


def test_recd_refuses_partitions_of_an_older_preprocessing(tmp_path: Path) -> None:
    """Prepared again (here without the history) after dedup: recd read the old partitions and
    reported on data that no longer exists."""
    from workbench.config import load
    from workbench.data.schema import DatasetMeta
    from workbench.experiments.recd import read_partitions_meta
    from workbench.utils.errors import MissingInputError

    meta = DatasetMeta(name="yc", source="local", rows={"train": 12031, "test": 1337},
                       dense=[], categorical=["item_id", "category"],
                       cardinalities={"item_id": 900, "category": 5}, user_side=[],
                       sequences={}, has_session=True, has_timestamp=True)
    processed, partitions = tmp_path / "processed" / "yc", tmp_path / "partitions" / "yc"
    processed.mkdir(parents=True)
    partitions.mkdir(parents=True)
    (processed / "meta.json").write_text(meta.to_json())
    written = {"available": True, "cardinalities": meta.cardinalities, "rows": 12031,
               "sequences": {"hist_item_id": "item_id"}}
    (partitions / "partitions.json").write_text(json.dumps(written))
    exp = load().experiments.recd
    with pytest.raises(MissingInputError, match=r"partitioned from another preprocessing of yc "
                       r".*: rerun the dedup stage for yc"):
        read_partitions_meta(partitions, exp)
    written["sequences"] = {}
    (partitions / "partitions.json").write_text(json.dumps(written))
    assert read_partitions_meta(partitions, exp)["rows"] == 12031


def test_the_key_replays_refuse_a_dataset_without_a_generator(tmp_path: Path) -> None:
    """het_scale and het_epoch draw keys from a generator: a file dataset is refused with the
    key to change, before anything is drawn or written."""
    for command, key in (("het-scale", "experiments.het_scale.dataset"),
                         ("het-epoch", "experiments.het_epoch.dataset")):
        failed_with(stage(tmp_path, command, "dataset=criteo_sample"),
                    f"ConfigError: {key} = criteo_sample", "synthetic dataset's generator")
    assert not (tmp_path / "data" / "keys").exists()
    assert not (tmp_path / "results" / "het_epoch").exists()
