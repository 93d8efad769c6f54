"""Encode a parsed table into the columnar schema and write train/test Parquet files.

::

    RawTable (tokens)                                   data/processed/<name>/
      label, I*, C*, session, ts, hist_*   --encode-->    train.parquet   (first 1 - test_fraction)
                                                          test.parquet    (last test_fraction)
                                                          meta.json       (DatasetMeta)

* **Split** by time, so the test split is the most recent data, as in Criteo's day-7 protocol:
  where the source has timestamps (MovieLens, Taobao, Avazu), the rows with the latest
  ``test_fraction`` of timestamps (ties in stored order) form the test split; otherwise (Criteo,
  whose rows are chronological) the last rows do. Each split keeps the stored row order (by user
  and time for MovieLens and Taobao). ``meta.json`` records which (``provenance.split``).
* **Categorical encoding** is fitted on the train split only: a token seen at least ``min_count``
  times gets an id in ``1..K`` (ids follow the sorted token order, so they are deterministic);
  rarer, unseen and missing tokens map to id 0. The cardinality is ``K + 1``. Sequence columns
  share the vocabulary of their item feature. Sources whose columns are already ids (the
  synthetic generator) pass their table sizes and skip the vocabulary.
* **Dense** values become ``log1p(max(x, 0))`` (facebookresearch/dlrm's transform), missing -> 0.
* Parquet files are written with zstd compression and no wall-clock metadata, atomically, so the
  same input gives byte-identical files and a second ``dvc repro`` reruns nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from workbench.data.schema import LABEL, SESSION, TIMESTAMP, DatasetMeta, RawTable
from workbench.utils.io import atomic_path

log = logging.getLogger(__name__)

SPLITS = ("train", "test")


@dataclass
class EncodedDataset:
    """The encoded splits, the table size of every categorical feature, and how the test split
    was chosen (``"by timestamp"`` or ``"row order"``)."""

    train: pd.DataFrame
    test: pd.DataFrame
    cardinalities: dict[str, int]
    split: str = "row order"


def split_point(rows: int, test_fraction: float) -> int:
    """Index of the first test row: at least one row in each split when ``rows >= 2``."""
    n_test = int(round(rows * test_fraction))
    n_test = min(max(n_test, 1 if rows >= 2 else 0), max(rows - 1, 0))
    return rows - n_test


def _vocabulary(train_tokens: pd.Series, min_count: int) -> tuple[pd.Index, np.ndarray]:
    """Sorted distinct train tokens and the id each maps to (0 when rarer than ``min_count``)."""
    codes, uniques = pd.factorize(train_tokens, sort=True, use_na_sentinel=True)
    counts = np.bincount(codes[codes >= 0], minlength=len(uniques))
    keep = counts >= min_count
    ids = np.where(keep, np.cumsum(keep), 0).astype(np.int64)
    return pd.Index(uniques), ids


def _lookup(vocab: pd.Index, ids: np.ndarray, tokens: pd.Series | np.ndarray) -> np.ndarray:
    if len(vocab) == 0:  # no train token at all: everything is "missing"
        return np.zeros(len(tokens), dtype=np.int64)
    pos = vocab.get_indexer(tokens)
    return np.where(pos >= 0, ids[np.maximum(pos, 0)], 0).astype(np.int64)


def _list_parts(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Flat values and offsets of a list-valued column (Arrow-backed or object lists)."""
    arr = pa.array(column) if not isinstance(column.array, pd.arrays.ArrowExtensionArray) \
        else column.array._pa_array.combine_chunks()
    arr = arr.cast(pa.large_list(arr.type.value_type))
    return arr.values.to_numpy(zero_copy_only=False), arr.offsets.to_numpy()


def _list_column(values: np.ndarray, offsets: np.ndarray) -> pd.Series:
    array = pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()),
                                          pa.array(values, pa.int32()))
    return pd.Series(pd.arrays.ArrowExtensionArray(array))


def encode(raw: RawTable, *, test_fraction: float, min_count: int = 1,
           cardinalities: dict[str, int] | None = None) -> EncodedDataset:
    """Encode and split a parsed table.

    Args:
        raw: the parsed table.
        test_fraction: fraction of the rows, the latest in time, that form the test split.
        min_count: train frequency below which a token maps to id 0.
        cardinalities: when given, categorical columns are already ids in ``0..card-1`` and are
            kept as they are (the synthetic source).

    Returns:
        The encoded train and test frames and the cardinalities.
    """
    frame = raw.frame
    cut = split_point(len(frame), test_fraction)
    in_test = np.zeros(len(frame), dtype=bool)
    if raw.has_timestamp:  # the latest rows in time (a stable sort: ties in stored order)
        in_test[np.argsort(frame[TIMESTAMP].to_numpy(np.int64), kind="stable")[cut:]] = True
    else:
        in_test[cut:] = True
    in_train = ~in_test
    out: dict[str, np.ndarray | pd.Series] = {LABEL: frame[LABEL].to_numpy(np.float32)}
    for name in raw.dense:
        values = pd.to_numeric(frame[name], errors="coerce").to_numpy(np.float64)
        out[name] = np.nan_to_num(np.log1p(np.clip(values, 0.0, None)), nan=0.0).astype(np.float32)

    vocabularies: dict[str, tuple[pd.Index, np.ndarray]] = {}
    cards: dict[str, int] = {}
    for name in raw.categorical:
        if cardinalities is not None:
            ids = frame[name].to_numpy(np.int64)
            if len(ids) and (ids.min() < 0 or ids.max() >= cardinalities[name]):
                raise ValueError(f"feature {name}: ids outside 0..{cardinalities[name] - 1}")
            cards[name] = int(cardinalities[name])
        else:
            tokens = frame[name]
            vocab, mapping = _vocabulary(tokens[in_train], min_count)
            vocabularies[name] = (vocab, mapping)
            ids = _lookup(vocab, mapping, tokens)
            cards[name] = int(mapping.max(initial=0)) + 1
        out[name] = ids.astype(np.int32 if cards[name] < 2**31 else np.int64)
    if raw.has_session:
        out[SESSION] = frame[SESSION].to_numpy(np.int64)
    if raw.has_timestamp:
        out[TIMESTAMP] = frame[TIMESTAMP].to_numpy(np.int64)
    for column, item in raw.sequences.items():
        values, offsets = _list_parts(frame[column])
        if cardinalities is None:
            vocab, mapping = vocabularies[item]
            values = _lookup(vocab, mapping, values)
        out[column] = _list_column(values.astype(np.int64), offsets)
    encoded = pd.DataFrame(out)
    train = encoded[in_train].reset_index(drop=True)
    test = encoded[in_test].reset_index(drop=True)
    return EncodedDataset(train=train, test=test, cardinalities=cards,
                          split="by timestamp" if raw.has_timestamp else "row order")


def write_split(frame: pd.DataFrame, path: Path) -> None:
    """Write one split as deterministic, zstd-compressed Parquet (atomically)."""
    table = pa.Table.from_pandas(frame, preserve_index=False).replace_schema_metadata(None)
    with atomic_path(path, suffix=".parquet") as tmp:
        pq.write_table(table, tmp, compression="zstd", write_statistics=True)


def read_split(directory: Path | str, split: str = "train",
               columns: list[str] | None = None) -> pd.DataFrame:
    """Read one encoded split (``train`` or ``test``) of a processed dataset."""
    if split not in SPLITS:
        raise ValueError(f"split {split!r}: must be one of {SPLITS}")
    path = Path(directory) / f"{split}.parquet"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: run the preprocess stage for this dataset")
    return pq.read_table(path, columns=columns).to_pandas()


def write_processed(directory: Path, encoded: EncodedDataset, meta: DatasetMeta) -> None:
    """Write ``train.parquet``, ``test.parquet`` and ``meta.json`` into ``directory``."""
    from workbench.utils.io import write_text

    write_split(encoded.train, directory / "train.parquet")
    write_split(encoded.test, directory / "test.parquet")
    write_text(directory / "meta.json", meta.to_json())
    log.info("encoded %d train + %d test rows", len(encoded.train), len(encoded.test))
