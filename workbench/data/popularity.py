r"""Embedding popularity: access profiles, the hot set under a memory budget, popular inputs.

FAE (Adnan et al., PVLDB 2021; ``DLRM/dlrm_input_profiler.py``) and Hotline (ISCA 2024, which
inherits it; our reading) place the most-accessed embedding rows in accelerator
memory and call a training input *popular* when every one of its lookups hits them:

    profile   S = round(rate x n) samples drawn uniformly WITH replacement (FAE: rate 5%)
              count[k] = occurrences of key k in the lookups of S          (FAE's "skew table")
    hot set   H = the N most-counted keys (count > 0), N = floor(budget_bytes / (4 D))
              ties broken by the smaller key, so the set is a pure function of the counts
    popular   sample i is popular  <=>  every key of row i is in H

    keys [n, F] (global, workbench.data.keys)   is_hot[k]   popular[i] = all_f is_hot[keys[i, f]]

FAE sizes the budget for the full Criteo Kaggle tables (128 / 256 / 512 MiB of GPU memory,
FAE's own byte counts, e.g. ``--hot-emb-gpu-mem=268435456``,
against 33.76M rows x 16 x 4 B = 2.16 GB, i.e. 6.2 / 12.4 / 24.8% of the table bytes);
[`scaled_budget_bytes`][] keeps that *fraction* on the smaller tables here.

Everything is vectorised (``np.bincount``, one stable sort); [`OnlineProfile`][] accumulates
the counts of the mini-batches actually seen, for the online variant that re-profiles every
N mini-batches.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "FLOAT_BYTES",
    "profile_counts",
    "hot_keys",
    "hot_mask",
    "popular_mask",
    "scaled_budget_bytes",
    "OnlineProfile",
]

FLOAT_BYTES = 4


def profile_counts(keys: np.ndarray, rows: int, rate: float,
                   rng: np.random.Generator) -> np.ndarray:
    """Access count of every row in a profile of ``rate`` of the inputs.

    Args:
        keys: ``int64[n, F]`` global keys of the inputs (one row per sample).
        rows: rows of the concatenated table (keys lie in ``[0, rows)``).
        rate: fraction of the inputs profiled, in ``(0, 1]``; the samples are drawn uniformly
            with replacement (FAE), ``max(1, round(rate x n))`` of them.
        rng: the generator that draws them (seeded by the caller).

    Returns:
        ``int64[rows]`` occurrences of each key in the profiled samples' lookups.

    Raises:
        ValueError: ``rate`` outside ``(0, 1]``, no inputs, or a key outside the table.
    """
    keys = np.asarray(keys)
    if not 0.0 < rate <= 1.0:
        raise ValueError(f"profile rate = {rate}: must be in (0, 1]")
    if keys.ndim != 2 or keys.shape[0] == 0:
        raise ValueError(f"keys has shape {keys.shape}: need [n >= 1, F]")
    if keys.size and (keys.min() < 0 or keys.max() >= rows):
        raise ValueError(f"keys span [{keys.min()}, {keys.max()}]: outside the table of "
                         f"{rows} rows")
    picked = rng.integers(0, keys.shape[0], size=max(1, round(rate * keys.shape[0])))
    return np.bincount(keys[picked].ravel(), minlength=rows).astype(np.int64)


def hot_keys(counts: np.ndarray, budget_bytes: int, dim: int) -> np.ndarray:
    """The hot set: the most-counted keys whose rows fit ``budget_bytes``.

    Args:
        counts: ``int64[rows]`` access counts ([`profile_counts`][]).
        budget_bytes: accelerator memory for hot rows, in bytes (>= 0).
        dim: embedding width D (a row is ``4 D`` bytes).

    Returns:
        ``int64[N]`` the hot keys in ascending order, ``N <= budget_bytes // (4 D)``; keys
        never counted are never hot.
    """
    if budget_bytes < 0 or dim < 1:
        raise ValueError(f"budget_bytes = {budget_bytes}, dim = {dim}: need >= 0 and >= 1")
    counts = np.asarray(counts)
    capacity = int(budget_bytes // (FLOAT_BYTES * dim))
    seen = np.flatnonzero(counts > 0)
    if capacity >= seen.size:
        return seen.astype(np.int64)
    # stable sort on -count: equal counts keep ascending key order
    order = np.argsort(-counts[seen], kind="stable")[:capacity]
    return np.sort(seen[order]).astype(np.int64)


def hot_mask(hot: np.ndarray, rows: int) -> np.ndarray:
    """``bool[rows]``: whether each key is in the hot set ``hot``."""
    mask = np.zeros(rows, dtype=bool)
    mask[np.asarray(hot, dtype=np.int64)] = True
    return mask


def popular_mask(keys: np.ndarray, is_hot: np.ndarray) -> np.ndarray:
    """``bool[n]``: sample i is popular iff every key of ``keys[i]`` is hot."""
    keys = np.asarray(keys)
    if keys.ndim != 2:
        raise ValueError(f"keys has shape {keys.shape}: need [n, F]")
    return is_hot[keys].all(axis=1)


def scaled_budget_bytes(budget_mb_full: float, full_rows: int, full_dim: int, rows: int,
                        dim: int) -> int:
    """A budget given for full-size tables, scaled to these tables by its fraction of their bytes.

    ``budget_mb_full`` MiB against ``full_rows x full_dim x 4`` bytes is a fraction of the full
    table; the same fraction of ``rows x dim x 4`` bytes is returned (FAE's 256 MB for Criteo
    Kaggle at D = 16 is 12.4% of the table; budgets are MiB, as FAE's byte counts).
    """
    if budget_mb_full < 0 or full_rows < 1 or full_dim < 1:
        raise ValueError("budget_mb_full must be >= 0 and full_rows, full_dim >= 1")
    fraction = budget_mb_full * 2**20 / (full_rows * full_dim * FLOAT_BYTES)
    return int(fraction * rows * dim * FLOAT_BYTES)


class OnlineProfile:
    """Access counts of the mini-batches seen so far (Hotline's online variant).

    Args:
        rows: rows of the concatenated table.
    """

    def __init__(self, rows: int) -> None:
        self.counts = np.zeros(rows, dtype=np.int64)
        self.batches = 0

    def observe(self, keys: np.ndarray) -> None:
        """Count the lookups of one mini-batch (``int64[b, F]``)."""
        self.counts += np.bincount(np.asarray(keys).ravel(), minlength=self.counts.size)
        self.batches += 1

    def hot(self, budget_bytes: int, dim: int) -> np.ndarray:
        """The hot set of what was seen ([`hot_keys`][])."""
        return hot_keys(self.counts, budget_bytes, dim)
