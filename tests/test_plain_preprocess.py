"""The preprocess benchmark's references do the stage's work: on the same Criteo TSV and Avazu CSV,
the plain pandas, DuckDB and Polars scripts (``benchmarks/plain_preprocess.py``) write the
stage's splits, labels, dense values and categorical ids, so the benchmark compares like with
like."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from workbench.data import pipeline
from workbench.data.config import DatasetConfig, SyntheticConfig
from workbench.data.synthetic import write_criteo_tsv

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import plain_preprocess  # noqa: E402
from preprocess_scaling import write_avazu_csv  # noqa: E402

ROWS = 3_000


def _input(tmp_path: Path, fmt: str) -> Path:
    path = tmp_path / "in" / ("train.txt" if fmt == "criteo_tsv" else "train.csv")
    path.parent.mkdir()
    if fmt == "criteo_tsv":
        write_criteo_tsv(SyntheticConfig(rows=ROWS, cardinality_scale=0.0005, chunk_rows=1_000),
                         0, path)
    else:
        write_avazu_csv(ROWS, 0, path, chunk=1_000)
    return path


def _stage(tmp_path: Path, fmt: str, path: Path) -> Path:
    ds = DatasetConfig(name="plain", source="local", format=fmt, path=str(path.parent),
                       files=[path.name], min_count=3)
    root = tmp_path / "root"
    pipeline.download(ds, root, seed=0)
    pipeline.preprocess(ds, root, seed=0)
    return root / "processed" / "plain"


@pytest.mark.parametrize("fmt", ["criteo_tsv", "avazu_csv"])
@pytest.mark.parametrize("tool", ["pandas", "duckdb", "polars", "polars_streaming"])
def test_plain_scripts_write_the_stages_encoding(tmp_path: Path, fmt: str, tool: str) -> None:
    path = _input(tmp_path, fmt)
    ours = _stage(tmp_path, fmt, path)
    out = tmp_path / tool
    if tool == "pandas":
        said = plain_preprocess.with_pandas(fmt, path, out, 3)
    elif tool.startswith("polars"):
        said = plain_preprocess.with_polars(fmt, path, out, 3, tool == "polars_streaming")
    else:
        said = plain_preprocess.with_duckdb(fmt, path, out, 3, 512)
    categorical = (plain_preprocess.CRITEO_CATEGORICAL if fmt == "criteo_tsv"
                   else plain_preprocess.AVAZU_CATEGORICAL)
    dense = plain_preprocess.CRITEO_DENSE if fmt == "criteo_tsv" else []
    for split in ("train", "test"):
        stage = pd.read_parquet(ours / f"{split}.parquet")
        script = pd.read_parquet(out / f"{split}.parquet")
        assert len(script) == len(stage) == said["rows"][split] > 0
        np.testing.assert_array_equal(script["label"].to_numpy(np.int64),
                                      stage["label"].to_numpy(np.int64))
        for c in categorical:
            np.testing.assert_array_equal(script[c].to_numpy(np.int64),
                                          stage[c].to_numpy(np.int64), err_msg=c)
        for c in dense:
            np.testing.assert_allclose(script[c].to_numpy(np.float64),
                                       stage[c].to_numpy(np.float64), rtol=1e-6, err_msg=c)
    assert 0 < sum(said["vocabulary"].values())
