"""Dataset statistics and embedding access skew (HET Fig. 3).

Every lookup of a categorical value reads (and, in training, updates) one embedding row. For each
feature table ``f`` with rows ``1..card_f-1`` (id 0, "missing", has no trainable row counted here)
the stage counts lookups per row over the train split, sequence columns counting as lookups of
their item feature's table. Then:

* per feature: table rows, rows seen, lookups, and the share of lookups taken by the top
  ``x`` fraction of the table's rows (at least one row);
* pooled over all tables (HET ranks all embeddings together): the same shares, and the
  rank-frequency curve ``lookups(rank)`` sampled at log-spaced ranks for the log-log plot.

All counting is ``np.bincount`` over whole columns; nothing loops over samples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from workbench.data.schema import LABEL, DatasetMeta
from workbench.experiments.config import DatasetStatsConfig


@dataclass
class AccessCounts:
    """Lookups per embedding row, one array per feature table (index = id, id 0 excluded)."""

    per_feature: dict[str, np.ndarray]

    def pooled(self) -> np.ndarray:
        """All tables' counts concatenated."""
        return np.concatenate(list(self.per_feature.values())) if self.per_feature \
            else np.zeros(0, dtype=np.int64)


def access_counts(frame: pd.DataFrame, meta: DatasetMeta) -> AccessCounts:
    """Count lookups per row of every categorical table (sequence columns included)."""
    counts: dict[str, np.ndarray] = {}
    for name in meta.categorical:
        card = meta.cardinalities[name]
        counts[name] = np.bincount(frame[name].to_numpy(np.int64), minlength=card)
    for column, item in meta.sequences.items():
        if column not in frame:
            continue
        import pyarrow as pa

        arr = pa.array(frame[column])
        values = arr.flatten().to_numpy(zero_copy_only=False).astype(np.int64)
        counts[item] = counts[item] + np.bincount(values, minlength=len(counts[item]))
    return AccessCounts({name: c[1:] for name, c in counts.items()})


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


def dataset_statistics(frame: pd.DataFrame, meta: DatasetMeta,
                       cfg: DatasetStatsConfig) -> tuple[dict[str, Any], pd.DataFrame, pd.DataFrame]:
    """Summary, per-feature table and pooled rank curve of one dataset's train split.

    Returns:
        ``(summary, features, curve)``: a JSON-serialisable summary, one row per feature, and the
        pooled rank curve (:func:`rank_curve`).
    """
    counts = access_counts(frame, meta)
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
        "positive_rate": float(frame[LABEL].mean()) if len(frame) else math.nan,
        "malformed_rows": int(meta.provenance.get("parse", {}).get("malformed", 0)),
        "top_share": {_pct(f): top_share(pooled, f) for f in cfg.top_fractions},
        "claim_share": top_share(pooled, cfg.skew_claim_fraction),
        "claim_fraction": cfg.skew_claim_fraction,
        "sessions": int(frame["session"].nunique()) if "session" in frame else None,
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
    from workbench.data.pipeline import unavailable_result
    from workbench.data.preprocess import read_split
    from workbench.utils.io import atomic_dir, write_json

    with atomic_dir(out) as tmp:
        if unavailable_result(processed, tmp / "stats.json"):
            return
        meta = DatasetMeta.read(processed)
        frame = read_split(processed, "train")
        summary, features, curve = dataset_statistics(frame, meta, cfg)
        write_json(tmp / "stats.json", summary)
        features.to_csv(tmp / "features.csv", index=False, float_format="%.6g")
        curve.to_csv(tmp / "rank_curve.csv", index=False, float_format="%.6g")
