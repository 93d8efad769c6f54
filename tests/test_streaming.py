"""The streaming preprocess (DuckDB, out of core) against the in-memory path: same bytes, bounded
memory, every guarantee of the parse kept."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from workbench.data import pipeline
from workbench.data.config import DatasetConfig, SequenceConfig, SessionConfig, SyntheticConfig
from workbench.data.formats.criteo import CRITEO_TSV
from workbench.data.schema import MalformedInputError, ParseReport
from workbench.data.streaming import TableLayout, encode_streaming
from workbench.data.synthetic import write_criteo_tsv

FILES = ("train.parquet", "test.parquet", "meta.json", "status.json")



def _both_engines(ds: DatasetConfig, tmp_path: Path, seed: int = 0) -> dict[str, Path]:
    """Download once, preprocess with each engine into its own data root."""
    out = {}
    for engine in ("memory", "streaming"):
        root = tmp_path / engine
        pipeline.download(ds, root, seed=seed)
        out[engine] = pipeline.preprocess(replace(ds, engine=engine), root, seed=seed)
    return out


def _assert_same_bytes(dirs: dict[str, Path]) -> None:
    for name in FILES:
        a, b = (dirs[e] / name for e in ("memory", "streaming"))
        assert a.read_bytes() == b.read_bytes(), f"{name} differs between the engines"


def _local(tmp_path: Path, fmt: str, files: list[Path], **kw) -> DatasetConfig:
    return DatasetConfig(name="own", source="local", format=fmt, path=str(files[0].parent),
                         files=[f.name for f in files], **kw)


@pytest.mark.parametrize("folder,file,fmt,kw", [
    ("criteo_kaggle", "wide_resdnn_train.tsv", "criteo_tsv", {"min_count": 2}),
    ("avazu", "avazu_train_head1000.csv", "avazu_csv", {}),
    ("diginetica", "sample_train-item-views.csv", "diginetica_views", {"history_length": 3}),
])
def test_real_samples_give_the_same_bytes(shared: Path, tmp_path: Path, folder: str,
                                          file: str, fmt: str, kw: dict) -> None:
    path = shared / folder / file
    ds = _local(tmp_path, fmt, [path], row_group_rows=1024, **kw)
    _assert_same_bytes(_both_engines(ds, tmp_path))
    train = pq.ParquetFile(tmp_path / "streaming" / "processed" / "own" / "train.parquet")
    assert train.num_row_groups == -(-train.metadata.num_rows // 1024)


def test_taobao_sort_history_and_time_split_give_the_same_bytes(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    n = 3000
    users = rng.integers(1, 60, n)
    lines = [f"{u},{rng.integers(1, 400)},{rng.integers(1, 30)},"
             f"{rng.choice(['pv', 'pv', 'pv', 'buy', 'cart', 'fav'])},"
             f"{1511540000 + int(rng.integers(0, 500))}" for u in users]  # many ties in time
    path = tmp_path / "UserBehavior.csv"
    path.write_text("\n".join(lines) + "\n")
    ds = _local(tmp_path, "taobao_user_behavior", [path], history_length=5, min_count=2,
                row_group_rows=1024)
    _assert_same_bytes(_both_engines(ds, tmp_path))


@pytest.mark.parametrize("sessions", [False, True])
def test_synthetic_gives_the_same_bytes(tmp_path: Path, sessions: bool) -> None:
    syn = SyntheticConfig(rows=5000, cardinality_scale=0.001,
                          sessions=SessionConfig(enabled=sessions, user_features=["C1"]),
                          sequence=SequenceConfig(enabled=sessions, length=4), chunk_rows=1500)
    ds = DatasetConfig(name="syn", source="synthetic", format="parquet", synthetic=syn,
                       row_group_rows=1024)
    _assert_same_bytes(_both_engines(ds, tmp_path))


def test_synthetic_in_chunks_is_deterministic_and_one_chunk_is_generate(tmp_path: Path) -> None:
    from workbench.data.synthetic import SyntheticGenerator, generate

    cfg = SyntheticConfig(rows=3000, cardinality_scale=0.001)
    whole, _ = generate(cfg, 1)
    one = SyntheticGenerator(cfg, 1).chunk(3000)
    assert whole.frame.equals(one)
    a = list(SyntheticGenerator(cfg, 1).chunks(1000))
    b = list(SyntheticGenerator(cfg, 1).chunks(1000))
    assert all(x.equals(y) for x, y in zip(a, b, strict=True))
    # The streams continue across chunks: the ids of chunk 2 are not those of chunk 1.
    assert not np.array_equal(a[0]["C3"].to_numpy(), a[1]["C3"].to_numpy())


def test_strict_mode_fails_at_the_first_malformed_row_with_file_and_line(
        tmp_path: Path) -> None:
    path = tmp_path / "train.txt"
    write_criteo_tsv(SyntheticConfig(rows=2000, cardinality_scale=0.001), 0, path)
    lines = path.read_text().splitlines()
    lines[1500] = "2" + lines[1500][1:]  # a label outside {0, 1}
    path.write_text("\n".join(lines) + "\n")
    ds = _local(tmp_path, "criteo_tsv", [path], strict=True)
    pipeline.download(ds, tmp_path, seed=0)
    with pytest.raises(MalformedInputError, match=rf"^{path}:1501: label '2' not in"):
        pipeline.preprocess(replace(ds, engine="streaming"), tmp_path, seed=0)
    assert not (tmp_path / "processed" / "own").exists()  # nothing half-written
    assert not list((tmp_path / "processed").glob(".duckdb-*"))  # scratch removed
    lenient = replace(ds, strict=False, engine="streaming")
    out = pipeline.preprocess(lenient, tmp_path, seed=0)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["provenance"]["parse"]["malformed"] == 1
    assert meta["provenance"]["parse"]["examples"] == [f"{path}:1501: label '2' not in {{0,1}} "
                                                       "(label)"]


def test_a_file_in_another_format_fails_clearly(shared: Path, tmp_path: Path) -> None:
    path = shared / "avazu" / "avazu_train_head1000.csv"
    ds = _local(tmp_path, "criteo_tsv", [path], engine="streaming")
    pipeline.download(ds, tmp_path, seed=0)
    with pytest.raises(MalformedInputError, match="no good rows .* with format 'criteo_tsv'.*"
                                                  "looks like an Avazu CSV"):
        pipeline.preprocess(ds, tmp_path, seed=0)


def test_streaming_refuses_a_directory_format() -> None:
    ds = DatasetConfig(name="ml", source="local", format="movielens_100k", path="x",
                       engine="streaming")
    with pytest.raises(ValueError, match="engine = streaming: format 'movielens_100k'"):
        _refuse(ds)


def _refuse(ds: DatasetConfig) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "raw" / ds.name).mkdir(parents=True)
        (Path(tmp) / "raw" / ds.name / "manifest.json").write_text(
            json.dumps({"available": True, "files": [], "root": "x"}))
        pipeline.preprocess(ds, Path(tmp), seed=0)


def test_given_ids_outside_the_cardinalities_fail(tmp_path: Path) -> None:
    blocks = [{"label": np.zeros(3, np.float32), "C1": np.array([1, 2, 7])}]
    with pytest.raises(ValueError, match=r"feature C1: ids outside 0\.\.4"):
        encode_streaming(blocks, TableLayout(dense=(), categorical=("C1",)), tmp_path,
                         test_fraction=0.5, cardinalities={"C1": 5})


def test_parse_report_rows_count_every_kept_row(tmp_path: Path) -> None:
    path = tmp_path / "train.txt"
    write_criteo_tsv(SyntheticConfig(rows=1200, cardinality_scale=0.001), 0, path)
    report = ParseReport()
    blocks = list(CRITEO_TSV.batches(path, report, max_rows=1000, block_size=1 << 14))
    assert sum(len(b["label"]) for b in blocks) == 1000 and len(blocks) > 1
