"""Global embedding keys of an encoded dataset.

HET (and the workbench's cluster) keeps all categorical features in one concatenated table::

    key = offset[f] + id_f,     offset[f] = sum of the cardinalities of the features before f

(id 0, "missing or rare", is a real row that models look up and train). Sequence (list) features
are not part of the keys. :func:`workbench.dispatch.base.build_trace` cuts these keys into the
per-worker, per-iteration traces the cluster replays.
"""

from __future__ import annotations

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
