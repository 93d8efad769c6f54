"""Encode a parsed table into the columnar schema and write train/test Parquet files.


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
* **Duplicated rows across the split** are counted: a test row equal in every column to a
  train row (a file holding some lines twice) scores the model on a row it trained on; the
  stage warns with the count ([`warn_leaked_rows`][]) and leaves the rows as they are.
* **Dense** values become ``log1p(max(x, 0))`` (facebookresearch/dlrm's transform), missing -> 0.
* Parquet files are written with zstd compression and no wall-clock metadata, atomically, so the
  same input gives byte-identical files and a second ``dvc repro`` reruns nothing.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from workbench.data.schema import LABEL, SESSION, TIMESTAMP, RawTable
from workbench.utils.errors import MissingInputError
from workbench.utils.io import atomic_path

log = logging.getLogger(__name__)

SPLITS = ("train", "test")
#: Rows per Parquet row group (pyarrow's default): later stages read the splits group by group.
ROW_GROUP_ROWS = 1 << 20
#: How every encoded split is written (both engines): deterministic bytes, no wall-clock metadata.
PARQUET_OPTIONS: dict[str, Any] = {"compression": "zstd", "write_statistics": True}


def dense_feature(values: np.ndarray) -> np.ndarray:
    """A dense feature as stored: ``log1p(max(x, 0))`` in float64, missing (NaN) -> 0, float32."""
    return np.nan_to_num(np.log1p(np.clip(values, 0.0, None)), nan=0.0).astype(np.float32)


def id_type(cardinality: int) -> pa.DataType:
    """The stored type of a categorical feature's ids: int32 unless the table is that large."""
    return pa.int32() if cardinality < 2**31 else pa.int64()


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


def warn_leaked_rows(leaked: int, n_test: int) -> None:
    """Warn that ``leaked`` of the ``n_test`` test rows equal a train row in every column."""
    if leaked:
        log.warning("%d of the %d test rows (%.1f%%) equal a train row in every column (lines "
                    "the input holds more than once): the test AUC scores rows the model "
                    "trained on; drop repeated lines from the input (keeping the order: awk "
                    "'!seen[$0]++' in > out) if they are not meant", leaked, n_test,
                    100.0 * leaked / max(n_test, 1))


def leaked_rows(frame: pd.DataFrame, in_test: np.ndarray) -> int:
    """The test rows of ``frame`` equal in every column to some train row (give it the scalar
    columns: a hash of each row, then the rows whose hash a train row shares compared whole)."""
    if not in_test.any() or in_test.all():
        return 0
    scalar = list(frame.columns)
    hashes = pd.util.hash_pandas_object(frame, index=False).to_numpy()
    candidates = in_test & np.isin(hashes, hashes[~in_test])
    if not candidates.any():
        return 0
    train = frame.loc[~in_test, scalar].drop_duplicates()
    return int(len(frame.loc[candidates, scalar].merge(train, on=scalar, how="inner")))


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
    scalar = [c for c in frame.columns if c not in raw.sequences]  # histories left out
    warn_leaked_rows(leaked_rows(frame[scalar], in_test), int(in_test.sum()))
    out: dict[str, np.ndarray | pd.Series] = {LABEL: frame[LABEL].to_numpy(np.float32)}
    for name in raw.dense:
        out[name] = dense_feature(pd.to_numeric(frame[name], errors="coerce").to_numpy(np.float64))

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
        out[name] = ids.astype(id_type(cards[name]).to_pandas_dtype())
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


class RowGroupWriter:
    """A Parquet file written in row groups of exactly ``rows`` rows (the last one shorter),
    from batches of any size: both engines write through it, so the same table gives the same
    bytes however it arrived. The caller makes the path atomic.

    Args:
        path: the file.
        schema: its Arrow schema (no metadata).
        rows: rows per row group.
    """

    def __init__(self, path: Path, schema: pa.Schema, rows: int) -> None:
        self.path = path
        self.schema = schema
        self.rows = rows
        self.pending: list[pa.RecordBatch] = []
        self.pending_rows = 0
        self.writer = pq.ParquetWriter(path, schema, **PARQUET_OPTIONS)
        self.written = 0

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Append rows (written out in whole row groups as they fill)."""
        if isinstance(batch, pa.Table):
            for b in batch.to_batches():
                self.write(b)
            return
        self.pending.append(batch)
        self.pending_rows += batch.num_rows
        while self.pending_rows >= self.rows:
            self._flush(self.rows)

    def _flush(self, n: int) -> None:
        table = pa.Table.from_batches(self.pending, schema=self.schema)
        self.writer.write_table(table.slice(0, n).combine_chunks(), row_group_size=n)
        rest = table.slice(n)
        self.pending = rest.combine_chunks().to_batches() if rest.num_rows else []
        self.pending_rows = rest.num_rows
        self.written += n

    def close(self) -> None:
        """Write the last, partial row group (an empty file gets one empty group) and close."""
        if self.pending_rows or self.written == 0:
            self._flush(self.pending_rows)
        self.writer.close()

    def abort(self) -> None:
        """Close after a failure (a full disk...), writing nothing more: the caller discards the
        file. Errors of the close itself are dropped (the first failure is the one to report)."""
        self.pending = []
        with contextlib.suppress(Exception):
            self.writer.close()


def write_split(frame: pd.DataFrame | Iterable[pd.DataFrame], path: Path,
                row_group_rows: int = ROW_GROUP_ROWS, progress: bool = False) -> None:
    """Write one split as deterministic, zstd-compressed Parquet in row groups of
    ``row_group_rows`` rows (atomically).

    Args:
        frame: the rows, or an iterable of frames with the same columns (written as they come:
            one in memory at a time).
        path: the file.
        row_group_rows: rows per row group.
        progress: show a counter of rows written.
    """
    from tqdm.auto import tqdm

    frames = [frame] if isinstance(frame, pd.DataFrame) else frame
    writer: RowGroupWriter | None = None
    with atomic_path(path, suffix=".parquet") as tmp, \
            tqdm(disable=not progress, desc=path.name, unit=" rows", unit_scale=True) as bar:
        try:
            for part in frames:
                table = pa.Table.from_pandas(part, preserve_index=False)
                table = table.replace_schema_metadata(None)
                if writer is None:
                    writer = RowGroupWriter(tmp, table.schema, row_group_rows)
                writer.write(table)
                bar.update(table.num_rows)
            if writer is None:
                raise ValueError(f"{path}: no rows to write")
            writer.close()
        except BaseException:
            if writer is not None:
                writer.abort()
            raise


def read_split(directory: Path | str, split: str = "train",
               columns: list[str] | None = None) -> pd.DataFrame:
    """Read one encoded split (``train`` or ``test``) of a processed dataset."""
    if split not in SPLITS:
        raise ValueError(f"split {split!r}: must be one of {SPLITS}")
    path = Path(directory) / f"{split}.parquet"
    if not path.exists():
        raise MissingInputError(f"{path} not found: run the preprocess stage for this dataset")
    return pq.read_table(path, columns=columns).to_pandas()


def iter_split(directory: Path | str, split: str = "train", columns: list[str] | None = None,
               max_rows: int | None = None) -> Iterator[pa.Table]:
    """One encoded split, a row group at a time (memory: one row group of ``columns``).

    Args:
        directory: the processed dataset.
        split: ``train`` or ``test``.
        columns: the columns to read (None: all).
        max_rows: stop after this many rows (the last group is cut).

    Yields:
        Arrow tables of at most ``dataset.row_group_rows`` rows, in stored order.
    """
    if split not in SPLITS:
        raise ValueError(f"split {split!r}: must be one of {SPLITS}")
    path = Path(directory) / f"{split}.parquet"
    if not path.exists():
        raise MissingInputError(f"{path} not found: run the preprocess stage for this dataset")
    source = pq.ParquetFile(path)
    left = source.metadata.num_rows if max_rows is None else max_rows
    for group in range(source.num_row_groups):
        if left <= 0:
            return
        table = source.read_row_group(group, columns=columns)
        if table.num_rows > left:
            table = table.slice(0, left)
        left -= table.num_rows
        yield table


def split_rows(directory: Path | str, split: str = "train") -> int:
    """Rows of one encoded split (from the Parquet footer, nothing else read)."""
    return int(pq.ParquetFile(Path(directory) / f"{split}.parquet").metadata.num_rows)


def write_processed(directory: Path, encoded: EncodedDataset,
                    row_group_rows: int = ROW_GROUP_ROWS) -> None:
    """Write ``train.parquet`` and ``test.parquet`` into ``directory``."""
    write_split(encoded.train, directory / "train.parquet", row_group_rows)
    write_split(encoded.test, directory / "test.parquet", row_group_rows)
    log.info("encoded %d train + %d test rows", len(encoded.train), len(encoded.test))
