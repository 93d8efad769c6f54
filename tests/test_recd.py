"""RecD stages (dedup, recd) on the ci profile, their equivalences and their errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from workbench.config import load
from workbench.data import partition as part
from workbench.data.pipeline import processed_dir
from workbench.experiments import dedup, recd
from workbench.utils.paths import REPO_ROOT
from workbench.utils.validation import ConfigError


def _dirs(params: Path, name: str) -> tuple[Path, Path, Path]:
    cfg = load(params=params)
    return (cfg.paths.resolve("data") / "partitions" / name,
            cfg.paths.resolve("results") / "dedup" / name,
            cfg.paths.resolve("results") / "recd" / name)


def test_dedup_stage_outputs(ci_pipeline: Path) -> None:
    cfg = load(params=ci_pipeline)
    exp = cfg.experiments.recd
    parts, out, _ = _dirs(ci_pipeline, "synthetic_sessions")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["available"] and summary["groups"] == [
        ["C1", "C2", "C5", "C6", "C8", "C14", "C17", "C20", "hist_C3"]]
    shuffled = part.read_partitions(parts / "shuffled")
    clustered = part.read_partitions(parts / "clustered")
    assert shuffled.num_rows == clustered.num_rows == summary["rows"]
    # the same rows in another order
    key = ["request", "C3", "C4", "label"]
    assert (shuffled.select(key).to_pandas().sort_values(key).reset_index(drop=True)
            .equals(clustered.select(key).to_pandas().sort_values(key).reset_index(drop=True)))
    storage = pd.read_csv(out / "storage.csv")
    totals = storage[storage.column_class == "total"].set_index(["layout", "window"])["bytes"]
    assert totals[("clustered", exp.window)] < totals[("shuffled", exp.window)]
    assert summary["partition_bytes"]["clustered"] == totals[("clustered", exp.window)]
    # the session layout: the group's features once per session, fewer bytes than the rows
    assert summary["session_columns"] == summary["groups"][0]
    assert totals[("sessions", exp.window)] < totals[("clustered", exp.window)]
    assert summary["partition_bytes"]["sessions"] == totals[("sessions", exp.window)]
    assert summary["session_storage_ratio"] == pytest.approx(
        totals[("shuffled", exp.window)] / totals[("sessions", exp.window)])
    dedup = pd.read_csv(out / "dedup.csv")
    user = dedup[(dedup.group != "all") & (dedup.window == exp.window)]
    factor = user.set_index(["layout", "batch_size"])["dedup_factor"]
    for b in exp.batch_sizes:
        if b < exp.window:  # a batch sees part of a window: clustering gathers its sessions
            assert factor[("clustered", b)] > factor[("shuffled", b)] >= 1
        elif b % exp.window == 0:  # whole windows per batch: the order inside does not matter
            assert factor[("clustered", b)] == pytest.approx(factor[("shuffled", b)])


def test_dedup_stage_is_deterministic(ci_pipeline: Path, tmp_path: Path) -> None:
    cfg = load(params=ci_pipeline)
    parts, out, _ = _dirs(ci_pipeline, "synthetic_sessions")
    dedup.run(processed_dir(cfg.paths.resolve("data"), "synthetic_sessions"), tmp_path / "parts",
              tmp_path / "out", cfg.experiments.recd, cfg.seed)
    for name in ("storage.csv", "dedup.csv", "summary.json"):
        assert (tmp_path / "out" / name).read_bytes() == (out / name).read_bytes()
    for f in sorted(parts.rglob("*.parquet")):
        assert (tmp_path / "parts" / f.relative_to(parts)).read_bytes() == f.read_bytes()


def test_recd_stage_outputs(ci_pipeline: Path) -> None:
    _, _, out = _dirs(ci_pipeline, "synthetic_sessions")
    timing = pd.read_csv(out / "timing.csv")
    assert set(timing.phase) == {"preprocess", "train"}
    pre = timing[timing.phase == "preprocess"]
    assert set(pre[pre.layout == "shuffled"].path) == {"kjt", "ikjt", "ikjt (content hash)"}
    assert set(pre[pre.layout == "clustered"].path) == {"kjt", "ikjt", "ikjt (content hash)",
                                                        recd.SESSION_PATH}
    assert (timing.seconds > 0).all()
    losses = pd.read_csv(out / "training.csv")
    wide = losses.pivot_table(index=["layout", "step"], columns="path", values="loss")
    np.testing.assert_allclose(wide["ikjt"], wide["kjt"], rtol=1e-4)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["settings"]["table_gradients"] == "sparse"
    work = summary["layouts"]["clustered"]["train_work"]
    assert work["ikjt"]["rows"] < work["kjt"]["rows"]
    values = summary["layouts"]["clustered"]["preprocess_values"]
    assert all(v["ikjt"] < v["kjt"] for v in values.values())


def test_preprocessing_paths_give_the_same_batch(ci_pipeline: Path) -> None:
    parts, _, _ = _dirs(ci_pipeline, "movielens_100k_sample")
    meta = json.loads((parts / part.PARTITIONS_META).read_text())
    if not meta["available"]:
        pytest.skip("MovieLens sample not available")
    exp = load(params=ci_pipeline).experiments.recd
    transforms = recd.auto_transforms(meta, exp)
    paths = recd.preprocessors(meta, transforms)
    batches = recd.read_batches(part.read_partitions(parts / "clustered"), meta, 256, 4,
                                parts / part.SESSION_LAYOUT)
    assert all(batch.session is not None for batch in batches)  # the window holds 256s
    for batch in batches:
        kjt = paths["kjt"](batch)
        assert paths["ikjt"](batch).expand() == kjt
        assert paths["ikjt (content hash)"](batch).expand() == kjt
        assert paths[recd.SESSION_PATH](batch).expand() == kjt  # read from the session layout
        hist = kjt["hist_item_id"].lengths()
        assert hist.max() <= exp.max_history


def test_recd_stages_record_unavailable_datasets(tmp_path: Path, ci_params: Path) -> None:
    processed = tmp_path / "processed"
    processed.mkdir()
    (processed / "status.json").write_text(json.dumps({"available": False,
                                                       "reason": "not placed"}))
    exp = load(params=ci_params).experiments.recd
    dedup.run(processed, tmp_path / "parts", tmp_path / "dedup", exp, 0)
    assert json.loads((tmp_path / "dedup" / "summary.json").read_text())["available"] is False
    recd.run(tmp_path / "parts", tmp_path / "recd", exp, 0)
    assert json.loads((tmp_path / "recd" / "summary.json").read_text())["available"] is False


def test_dedup_stage_on_a_dataset_without_sessions_fails_clearly(ci_pipeline: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "workbench.stages", "dedup", "--params", str(ci_pipeline),
         "--dataset", "synthetic"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert proc.returncode != 0
    assert "NoSessionsError: dataset synthetic has no session/user column" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (load(params=ci_pipeline).paths.resolve("results") / "dedup"
                / "synthetic").exists()


@pytest.mark.parametrize(("override", "message"), [
    ("experiments.recd.bottom_mlp=[64,0]", r"bottom_mlp\[1\] = 0: must be an integer >= 1"),
    ("experiments.recd.top_mlp=[-3]", r"top_mlp\[0\] = -3: must be an integer >= 1"),
    ("experiments.recd.seq_heads=3", "must divide embedding_dim"),
    ("experiments.recd.history=latest", "experiments.recd.history = 'latest'"),
    ("experiments.recd.window_sweep=[0]", r"window_sweep\[0\] = 0"),
    ("experiments.recd.datasets=[nope]", "experiments.recd.datasets names 'nope'"),
    ("+experiments.recd.transforms.C1=[{op: hash}]", r"transforms.C1\[0\].*needs num_buckets"),
])
def test_recd_config_errors(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load([override])


def test_configured_transforms_are_used() -> None:
    cfg = load(["+experiments.recd.transforms.C1=[{op: hash, num_buckets: 7}]"])
    meta = {"keys": ["C1"], "cardinalities": {"C1": 100}, "sequences": {}}
    transforms = recd.auto_transforms(meta, cfg.experiments.recd)
    from workbench.sparse.jagged_tensor import KeyedJaggedTensor

    out = transforms.apply_kjt(KeyedJaggedTensor.from_dict({"C1": [[1], [50], [99]]}))
    assert out.values().max() < 7


def test_mlp_widths_are_hidden_widths_as_in_the_model_configs() -> None:
    exp = load(["experiments.recd.bottom_mlp=[64]", "experiments.recd.top_mlp=[48]"]) \
        .experiments.recd
    meta = {"keys": ["u", "i"], "cardinalities": {"u": 5, "i": 5}, "sequences": {},
            "dense": ["d1", "d2", "d3"], "groups": [["u"]], "plain": ["i"]}
    model = recd.build_model(meta, exp, seed=0)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    widths = [(m.in_features, m.out_features) for m in linears]
    assert widths[:2] == [(3, 64), (64, exp.embedding_dim)]  # bottom: 3 -> 64 -> D
    assert widths[-2][1] == 48 and widths[-1] == (48, 1)     # top: ... -> 48 -> 1
