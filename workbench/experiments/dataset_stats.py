"""Dataset statistics and embedding access skew (HET Fig. 3).

Every lookup of a categorical value reads (and, in training, updates) one embedding row. For each
feature table ``f`` with rows ``1..card_f-1`` (id 0, "missing", has no trainable row counted here)
the stage counts lookups per row over the train split, sequence columns counting as lookups of
their item feature's table. Then:

* per feature: table rows, rows seen, lookups, and the share of lookups taken by the top
  ``x`` fraction of the table's rows (at least one row);
* pooled over all tables (HET ranks all embeddings together): the same shares, and the
  rank-frequency curve ``lookups(rank)`` sampled at log-spaced ranks for the log-log plot.

The train split is read a row group at a time ([`workbench.data.preprocess.iter_split`][]):
[`SplitStats`][] adds each group's ``np.bincount`` per column, label sum and sessions, so the
memory is the counts (8 bytes per embedding row) plus one row group, whatever the split's size;
nothing loops over samples. The DataFrame functions ([`access_counts`][],
[`dataset_statistics`][]) feed one whole frame through the same accumulator.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from workbench.data.schema import LABEL, SESSION, DatasetMeta
from workbench.experiments.config import DatasetStatsConfig


@dataclass
class AccessCounts:
    """Lookups per embedding row, one array per feature table (index = id, id 0 excluded)."""

    per_feature: dict[str, np.ndarray]

    def pooled(self) -> np.ndarray:
        """All tables' counts concatenated."""
        return np.concatenate(list(self.per_feature.values())) if self.per_feature \
            else np.zeros(0, dtype=np.int64)


class SplitStats:
    """Streaming accumulator of one split's statistics, fed one Arrow table (row group) at a time.

    Keeps the lookups per row of every categorical table (sequence columns counted into their
    item feature's table), the label sum and count (for ``positive_rate``) and the distinct
    sessions (exact: a sorted array of the session ids seen so far).

    Args:
        meta: the dataset's metadata (features, cardinalities, sequence columns).
    """

    def __init__(self, meta: DatasetMeta) -> None:
        self.meta = meta
        self.counts = {name: np.zeros(meta.cardinalities[name], dtype=np.int64)
                       for name in meta.categorical}
        self.label_sum = 0.0
        self.label_count = 0
        self.label_dtype: np.dtype | None = None
        self.session_ids: np.ndarray | None = None

    def add(self, table: pa.Table) -> None:
        """Add one table's rows (categorical columns required; label, sequence and session
        columns counted where present)."""
        names = set(table.column_names)
        for name in self.meta.categorical:
            self._count(name, table.column(name).to_numpy())
        for column, item in self.meta.sequences.items():
            if column in names:
                values = pc.list_flatten(table.column(column)).to_numpy()
                self._count(item, values.astype(np.int64, copy=False))
        if LABEL in names:
            labels = table.column(LABEL).to_numpy()
            self.label_dtype = labels.dtype
            valid = labels[~np.isnan(labels)] if labels.dtype.kind == "f" else labels
            self.label_sum += float(valid.sum(dtype=np.float64))
            self.label_count += len(valid)
        if SESSION in names:
            seen = np.unique(table.column(SESSION).to_numpy())
            seen = seen[~np.isnan(seen)] if seen.dtype.kind == "f" else seen  # as nunique()
            self.session_ids = seen if self.session_ids is None \
                else np.union1d(self.session_ids, seen)

    def columns(self, available: Iterable[str]) -> list[str]:
        """The columns [`add`][] reads, among ``available``."""
        available = set(available)
        return [c for c in [LABEL, *self.meta.categorical, *self.meta.sequences, SESSION]
                if c in available]

    def _count(self, name: str, ids: np.ndarray) -> None:
        self.counts[name] += np.bincount(ids, minlength=len(self.counts[name]))

    def access_counts(self) -> AccessCounts:
        """Lookups per embedding row so far (id 0 excluded)."""
        return AccessCounts({name: c[1:] for name, c in self.counts.items()})

    @property
    def positive_rate(self) -> float:
        """Mean label (NaN without labels), computed as pandas' ``Series.mean`` does: in the
        label's float dtype (float32 as stored), so results match the whole-frame mean exactly
        while the label sum is exact in that dtype (0/1 labels: fewer than 2**24 positives)."""
        if not self.label_count:
            return math.nan
        dtype = np.dtype(self.label_dtype)
        if dtype.kind != "f" or dtype == np.float16:  # pandas sums these in float64
            dtype = np.dtype(np.float64)
        return float(dtype.type(self.label_sum) / dtype.type(self.label_count))

    @property
    def sessions(self) -> int | None:
        """Distinct sessions (None when the split has no session column)."""
        return None if self.session_ids is None else int(len(self.session_ids))


def frame_stats(frame: pd.DataFrame, meta: DatasetMeta) -> SplitStats:
    """[`SplitStats`][] of one whole DataFrame."""
    stats = SplitStats(meta)
    stats.add(pa.Table.from_pandas(frame[stats.columns(frame.columns)], preserve_index=False))
    return stats


def access_counts(frame: pd.DataFrame, meta: DatasetMeta) -> AccessCounts:
    """Count lookups per row of every categorical table (sequence columns included)."""
    return frame_stats(frame, meta).access_counts()


def top_share(counts: np.ndarray, fraction: float) -> float:
    """Share of all lookups taken by the most-accessed ``fraction`` of rows (at least one row).

    Returns NaN for a table with no lookups.
    """
    total = counts.sum()
    if len(counts) == 0 or total == 0:
        return math.nan
    k = max(1, int(math.ceil(fraction * len(counts))))
    top = np.partition(counts, len(counts) - k)[len(counts) - k:]
    return float(top.sum() / total)


def rank_curve(counts: np.ndarray, points: int) -> pd.DataFrame:
    """The rank-frequency curve at ``points`` log-spaced ranks (for a log-log plot).

    Returns:
        Columns ``rank`` (1-based), ``rank_fraction`` (rank / rows), ``lookups`` at that rank and
        ``cumulative_share`` of lookups taken by ranks ``1..rank``.
    """
    ordered = np.sort(counts)[::-1]
    ordered = ordered[ordered > 0]
    if len(ordered) == 0:
        return pd.DataFrame(columns=["rank", "rank_fraction", "lookups", "cumulative_share"])
    ranks = np.unique(np.geomspace(1, len(ordered), num=points).round().astype(np.int64))
    cumulative = np.cumsum(ordered)
    return pd.DataFrame({
        "rank": ranks,
        "rank_fraction": ranks / len(counts),
        "lookups": ordered[ranks - 1],
        "cumulative_share": cumulative[ranks - 1] / cumulative[-1],
    })


def dataset_statistics(
        frame: pd.DataFrame, meta: DatasetMeta,
        cfg: DatasetStatsConfig) -> tuple[dict[str, Any], pd.DataFrame, pd.DataFrame]:
    """Summary, per-feature table and pooled rank curve of one dataset's train split (a whole
    DataFrame; see [`split_statistics`][])."""
    return split_statistics(frame_stats(frame, meta), meta, cfg)


def split_statistics(stats: SplitStats, meta: DatasetMeta, cfg: DatasetStatsConfig
                     ) -> tuple[dict[str, Any], pd.DataFrame, pd.DataFrame]:
    """Summary, per-feature table and pooled rank curve of one dataset's train split.

    Args:
        stats: the split's accumulated statistics.
        meta: the dataset's metadata.
        cfg: top fractions, skew claim and rank-curve points.

    Returns:
        ``(summary, features, curve)``: a JSON-serialisable summary, one row per feature, and the
        pooled rank curve ([`rank_curve`][]).
    """
    counts = stats.access_counts()
    pooled = counts.pooled()
    rows = []
    for name, c in counts.per_feature.items():
        row = {"feature": name, "table_rows": int(len(c)), "rows_seen": int((c > 0).sum()),
               "lookups": int(c.sum()), "user_side": name in meta.user_side}
        for f in cfg.top_fractions:
            row[f"top_{_pct(f)}_share"] = top_share(c, f)
        rows.append(row)
    features = pd.DataFrame(rows)
    summary: dict[str, Any] = {
        "dataset": meta.name,
        "source": meta.source,
        "available": True,
        "rows_train": meta.rows["train"],
        "rows_test": meta.rows["test"],
        "dense_features": len(meta.dense),
        "categorical_features": len(meta.categorical),
        "sequence_features": len(meta.sequences),
        "embedding_rows": int(len(pooled)),
        "rows_seen": int((pooled > 0).sum()),
        "lookups": int(pooled.sum()),
        "singleton_share_of_seen": float(((pooled == 1).sum()) / max(1, (pooled > 0).sum())),
        "positive_rate": stats.positive_rate,
        "malformed_rows": int(meta.provenance.get("parse", {}).get("malformed", 0)),
        "top_share": {_pct(f): top_share(pooled, f) for f in cfg.top_fractions},
        "claim_share": top_share(pooled, cfg.skew_claim_fraction),
        "claim_fraction": cfg.skew_claim_fraction,
        "sessions": stats.sessions,
    }
    return summary, features, rank_curve(pooled, cfg.rank_points)


def _pct(fraction: float) -> str:
    """``0.01`` -> ``"1pct"``, ``0.1`` -> ``"10pct"`` (stable keys for JSON and CSV)."""
    return f"{fraction * 100:g}pct"


def run(processed: Path, out: Path, cfg: DatasetStatsConfig) -> None:
    """The ``dataset_stats`` stage: read ``processed`` and write ``out`` (atomically, whole).

    Writes ``stats.json`` (summary), ``features.csv`` and ``rank_curve.csv``; for an unavailable
    dataset only ``stats.json`` with ``available: false`` and the reason.
    """
    import pyarrow.parquet as pq

    from workbench.data.pipeline import unavailable_result
    from workbench.data.preprocess import iter_split
    from workbench.utils.io import atomic_dir, write_json

    with atomic_dir(out) as tmp:
        if unavailable_result(processed, tmp / "stats.json"):
            return
        meta = DatasetMeta.read(processed)
        stats = SplitStats(meta)
        columns = stats.columns(pq.read_schema(Path(processed) / "train.parquet").names)
        for table in iter_split(processed, "train", columns=columns):
            stats.add(table)
        summary, features, curve = split_statistics(stats, meta, cfg)
        write_json(tmp / "stats.json", summary)
        features.to_csv(tmp / "features.csv", index=False, float_format="%.6g")
        curve.to_csv(tmp / "rank_curve.csv", index=False, float_format="%.6g")
