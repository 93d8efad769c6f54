"""Global embedding keys of an encoded dataset.

HET (and the workbench's cluster) keeps all categorical features in one concatenated table:

    key = offset[f] + id_f,     offset[f] = sum of the cardinalities of the features before f

(id 0, "missing or rare", is a real row that models look up and train). Sequence (list) features
are not part of the keys. [`workbench.dispatch.base.build_trace`][] cuts these keys into the
per-worker, per-iteration traces the cluster replays.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from workbench.data.schema import DatasetMeta


def table_offsets(meta: DatasetMeta) -> np.ndarray:
    """Offset of every categorical feature in the concatenated table (``int64[F]``)."""
    cards = np.array([meta.cardinalities[f] for f in meta.categorical], dtype=np.int64)
    return np.r_[0, np.cumsum(cards)[:-1]].astype(np.int64)


def table_rows(meta: DatasetMeta) -> int:
    """Rows of the concatenated table."""
    return int(sum(meta.cardinalities[f] for f in meta.categorical))


def sample_keys(frame: pd.DataFrame, meta: DatasetMeta) -> np.ndarray:
    """Global keys of every sample: ``int64[n, F]``."""
    ids = frame[meta.categorical].to_numpy(np.int64)
    return ids + table_offsets(meta)[None, :]


def key_dtype(meta: DatasetMeta) -> type[np.signedinteger]:
    """int32 when every global key fits (Criteo Kaggle's 33.8M rows do), else int64."""
    return np.int32 if table_rows(meta) < 2**31 else np.int64


def read_keys(directory: Path | str, meta: DatasetMeta, split: str = "train",
              max_rows: int | None = None) -> np.ndarray:
    """Global keys of a split's samples, ``[n, F]``, read a row group at a time into one array.

    The result is the only full-size allocation (``n x F x 4`` bytes with int32 keys: 4.7 GB
    for Criteo Kaggle's 45M rows): no DataFrame and no int64 copy of the whole split.

    Args:
        directory: the processed dataset.
        meta: its metadata.
        split: ``train`` or ``test``.
        max_rows: the first this many samples only (None: all).
    """
    from workbench.data.preprocess import iter_split, split_rows

    n = split_rows(directory, split)
    n = n if max_rows is None else min(n, max_rows)
    dtype = key_dtype(meta)
    offsets = table_offsets(meta).astype(dtype)
    keys = np.empty((n, len(meta.categorical)), dtype=dtype)
    start = 0
    for table in iter_split(directory, split, columns=list(meta.categorical), max_rows=n):
        stop = start + table.num_rows
        for j, name in enumerate(meta.categorical):
            np.add(table.column(name).to_numpy(), offsets[j], out=keys[start:stop, j],
                   casting="unsafe")
        start = stop
    return keys
