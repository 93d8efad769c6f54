"""Embedding key traces from an encoded dataset.

HET (and the workbench's cluster) keeps all categorical features in one concatenated table::

    key = offset[f] + id_f,     offset[f] = sum of the cardinalities of the features before f

(id 0, "missing or rare", is a real row that models look up and train). A trace is the keys each
worker reads per iteration: the train split in order, cut into global batches of ``W x b``
samples, each batch split among the workers by a dispatcher (:mod:`workbench.dispatch`)::

    trace[step, w, :] = keys of the b samples worker w got in global batch `step` (b x F keys)

A final partial batch is dropped. Sequence (list) features are not part of the trace.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from workbench.data.schema import DatasetMeta
from workbench.dispatch import assign


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


def build_trace(keys: np.ndarray, workers: int, per_worker: int, dispatcher: str = "contiguous",
                seed: int = 0, epochs: int = 1) -> np.ndarray:
    """Cut per-sample keys into ``[steps, workers, per_worker x F]`` (``epochs`` passes).

    Args:
        keys: ``[n, F]`` keys per sample, in data order.
        workers: W.
        per_worker: samples per worker per iteration b.
        dispatcher: how a global batch is split among workers.
        seed: seed of the ``random`` dispatcher.
        epochs: passes over the data (the same order every epoch).

    Raises:
        ValueError: the data holds less than one global batch.
    """
    n, features = keys.shape
    batch = workers * per_worker
    steps = n // batch
    if steps == 0:
        raise ValueError(f"{n} samples hold no global batch of {workers} workers x {per_worker}")
    rng = np.random.default_rng(seed)
    per_epoch = keys[: steps * batch].reshape(steps, batch, features)
    out = np.empty((steps * epochs, workers, per_worker * features), dtype=np.int64)
    for epoch in range(epochs):
        for step in range(steps):
            owner = assign(dispatcher, workers, per_worker, rng)
            order = np.argsort(owner, kind="stable")
            out[epoch * steps + step] = per_epoch[step][order].reshape(workers, -1)
    return out
