"""The data stages end to end on the ci profile: outputs, determinism, offline failure, reuse."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from conftest import shared_data_dir, write_params
from workbench.config import load
from workbench.data import pipeline, registry, source
from workbench.data.preprocess import read_split
from workbench.data.schema import DatasetMeta
from workbench.stages import run
from workbench.utils.paths import REPO_ROOT
from workbench.utils.validation import ConfigError


def _digest(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def test_synthetic_stages_write_the_schema(ci_pipeline: Path) -> None:
    cfg = load(params=ci_pipeline)
    ds = cfg.datasets["synthetic"]
    out = pipeline.processed_dir(cfg.paths.resolve("data"), ds.name)
    meta = DatasetMeta.read(out)
    assert meta.rows["train"] + meta.rows["test"] == ds.synthetic.rows
    assert len(meta.categorical) == 26 and len(meta.dense) == 13
    train = read_split(out, "train")
    for name in meta.categorical:
        assert train[name].between(0, meta.cardinalities[name] - 1).all()
    assert (train[meta.dense] >= 0).all().all()  # log1p of clipped counts
    stats = json.loads((cfg.paths.resolve("results") / "dataset_stats" / "synthetic"
                        / "stats.json").read_text())
    assert stats["available"] and 0.5 < stats["top_share"]["1pct"] <= 1.0


def test_same_config_gives_byte_identical_outputs(tmp_path: Path, ci_pipeline: Path) -> None:
    params = write_params(tmp_path)
    for stage in ("download", "preprocess", "dataset-stats"):
        run([stage, "--params", str(params), "--dataset", "synthetic"])
    first = load(params=ci_pipeline)
    second = load(params=params)
    for key, sub in (("data", "raw/synthetic"), ("data", "processed/synthetic"),
                     ("results", "dataset_stats/synthetic")):
        assert _digest(first.paths.resolve(key) / sub) == _digest(second.paths.resolve(key) / sub)


def test_real_samples_are_parsed_when_present(ci_pipeline: Path) -> None:
    if not shared_data_dir().is_dir():
        pytest.skip(f"real samples not present at {shared_data_dir()}")
    cfg = load(params=ci_pipeline)
    for name in ("criteo_sample", "avazu_sample", "movielens_100k_sample", "taobao_sample"):
        meta = DatasetMeta.read(pipeline.processed_dir(cfg.paths.resolve("data"), name))
        assert sum(meta.rows.values()) > 0
        assert meta.provenance["raw_files"][0]["sha256"]
    ml = DatasetMeta.read(pipeline.processed_dir(cfg.paths.resolve("data"),
                                                   "movielens_100k_sample"))
    assert ml.has_session and "user_id" in ml.user_side and ml.sequences


def test_a_sample_with_no_mirror_and_no_network_fails_its_stage(tmp_path: Path) -> None:
    """A real sample that cannot be had fails its download stage in one line (naming the file,
    the URL tried and how to provide it) and writes nothing: what depends on it cannot run."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    params = write_params(tmp_path, ["paths.mirrors=[]"])
    env = {**os.environ, "WORKBENCH_SOURCE_BASE": closed}
    env.pop("WORKBENCH_MIRRORS", None)
    proc = subprocess.run([sys.executable, "-m", "workbench.stages", "download", "--params",
                           str(params), "--dataset", "avazu_sample"], capture_output=True,
                          text=True, cwd=REPO_ROOT, env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("DownloadError: avazu_sample: could not fetch avazu_train_head1000.csv")
    assert f"{closed}/raw.githubusercontent.com/Ringares/Pytorch_Prac/" in line
    assert "WORKBENCH_MIRRORS=" in line and "Traceback" not in proc.stderr
    assert not (tmp_path / "data" / "raw" / "avazu_sample").exists()
    assert [p for p in (tmp_path / "data").rglob("*") if p.is_file()] == []


def test_missing_optional_local_dataset_is_recorded_not_fatal(tmp_path: Path) -> None:
    nowhere = tmp_path / "nowhere"
    params = write_params(tmp_path, ["dataset=local", "dataset.name=own",
                                     f"dataset.path={nowhere}", "dataset.format=avazu_csv",
                                     "dataset.optional=true"])
    for stage in ("download", "preprocess", "dataset-stats"):
        run([stage, "--params", str(params)])
    stats = json.loads((tmp_path / "results" / "dataset_stats" / "own" / "stats.json")
                       .read_text())
    assert stats["available"] is False and str(nowhere) in stats["reason"]


def test_missing_required_local_source_fails_with_the_path(tmp_path: Path) -> None:
    params = write_params(tmp_path, ["dataset=local", f"dataset.path={tmp_path / 'nowhere'}",
                                     "dataset.files=[a.tsv]"])
    proc = subprocess.run([sys.executable, "-m", "workbench.stages", "download", "--params",
                           str(params)], capture_output=True, text=True, cwd=REPO_ROOT)
    assert proc.returncode != 0
    assert "DatasetUnavailable" in proc.stderr and str(tmp_path / "nowhere") in proc.stderr


def test_criteo_kaggle_offline_fails_fast_and_leaves_nothing(tmp_path: Path) -> None:
    params = write_params(tmp_path, ["dataset=criteo_kaggle"])
    proc = subprocess.run([sys.executable, "-m", "workbench.stages", "download", "--offline",
                           "--params", str(params)], capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=60)
    assert proc.returncode != 0
    assert "DownloadError" in proc.stderr and "Traceback" not in proc.stderr
    downloads = tmp_path / "data" / "downloads" / "criteo_kaggle"
    assert str(downloads / "criteo-research-kaggle-display-advertising-challenge-dataset.tar.gz") \
        in proc.stderr or str(downloads) in proc.stderr
    leftovers = [p for p in (tmp_path / "data").rglob("*") if p.is_file()]
    assert leftovers == []


def test_file_placed_by_hand_is_used_as_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A registry file already under data/downloads/<source>/ that verifies is used offline."""
    import io
    import tarfile

    rows = "\n".join("\t".join([str(i % 2)] + [str(i)] * 13 + [f"{i:08x}"] * 26)
                     for i in range(50)) + "\n"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("train.txt")
        info.size = len(rows)
        tar.addfile(info, io.BytesIO(rows.encode()))
    archive = buf.getvalue()
    real = registry.get_source("criteo_kaggle")
    fake_file = source.RemoteFile(real.files[0].name, urls=("http://127.0.0.1:9/none",),
                                  md5=hashlib.md5(archive).hexdigest(), size=len(archive))
    fake = source.DatasetSource(**{**real.__dict__, "files": (fake_file,)})
    monkeypatch.setattr(registry, "get_source", lambda name: fake)

    params = write_params(tmp_path, ["dataset=criteo_kaggle"])
    cfg = load(params=params)
    place = pipeline.downloads_dir(cfg.paths.resolve("data"), "criteo_kaggle") / fake_file.name
    place.parent.mkdir(parents=True)
    place.write_bytes(archive)
    data_root = cfg.paths.resolve("data")
    pipeline.download(cfg.dataset, data_root, seed=cfg.seed, offline=True)
    out = pipeline.preprocess(cfg.dataset, data_root, seed=cfg.seed)
    train = read_split(out, "train")
    assert len(train) + len(read_split(out, "test")) == 50
    raw = pipeline.raw_dir(data_root, cfg.dataset.name)
    manifest = json.loads((raw / "manifest.json").read_text())
    assert manifest["files"][0]["file"] == "train.txt"


def test_stage_needs_download_first(tmp_path: Path) -> None:
    params = write_params(tmp_path)
    with pytest.raises(FileNotFoundError, match="run the download stage"):
        run(["preprocess", "--params", str(params), "--dataset", "synthetic"])


def test_unknown_pipeline_dataset_is_a_config_error(ci_params: Path) -> None:
    with pytest.raises(ConfigError, match="--dataset 'nope' is not configured"):
        run(["download", "--params", str(ci_params), "--dataset", "nope"])


def test_statistics_table_is_readable(ci_pipeline: Path) -> None:
    cfg = load(params=ci_pipeline)
    features = pd.read_csv(cfg.paths.resolve("results") / "dataset_stats" / "synthetic"
                           / "features.csv")
    assert list(features["feature"]) == [f"C{i}" for i in range(1, 27)]
    assert (features["rows_seen"] <= features["table_rows"]).all()


def test_a_folder_of_several_files_says_it_reads_them_as_one(tmp_path: Path, caplog) -> None:
    """Issue 68: a local folder holding two CSVs, no ``dataset.files``: both are read as one
    dataset, and the run says so, naming them and the key that picks some."""
    import logging

    folder = tmp_path / "own"
    folder.mkdir()
    for name in ("a.csv", "b.csv"):
        (folder / name).write_text("id,click\n1,0\n")
    cfg = load(["dataset=local", "dataset.name=own", f"dataset.path={folder}",
                "dataset.format=avazu_csv", f"paths.data={tmp_path / 'data'}"])
    with caplog.at_level(logging.WARNING, logger="workbench.data.pipeline"):
        pipeline.download(cfg.dataset, tmp_path / "data", seed=0)
    said = [r.getMessage() for r in caplog.records if "as one dataset" in r.getMessage()]
    assert said and "a.csv, b.csv" in said[0] and "dataset.files=[...]" in said[0]
    caplog.clear()
    picked = load(["dataset=local", "dataset.name=own", f"dataset.path={folder}",
                   "dataset.format=avazu_csv", "dataset.files=[a.csv]"])
    with caplog.at_level(logging.WARNING, logger="workbench.data.pipeline"):
        pipeline.download(picked.dataset, tmp_path / "data", seed=0)
    assert not [r for r in caplog.records if "as one dataset" in r.getMessage()]
