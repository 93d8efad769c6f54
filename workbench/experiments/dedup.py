"""RecD's ``dedup`` stage: session-clustered partitions, their storage bytes and dedup factors.

**Our formalisation of RecD** (the paper's method section is unavailable; see
[`workbench.data.partition`][], [`workbench.sparse.reader`][],
[`workbench.sparse.transforms`][], [`workbench.models.recd`][]):

    data/processed/<ds>/train.parquet
        |  dedup stage: sessions, history snapshot, windows of W rows in log order
        v
    data/partitions/<ds>/{shuffled,clustered,sessions}/part-*      results/dedup/<ds>/
        |                                                          storage.csv  dedup.csv
        |  recd stage: batches of b rows in partition order          summary.json
        v
    KJT --transforms--> KJT --model--> loss          (every row)
    KJT --to_ikjt--> IKJT --transforms--> IKJT --model--> loss   (unique rows of the groups)
                                                               results/recd/<ds>/
                                                               timing.csv training.csv summary.json

* ``storage.csv``: partition bytes (zstd Parquet) per layout and window, split by column class
  (user-side features, history, other sparse features, dense features, other columns); the
  layouts are ``shuffled``, ``clustered`` and ``sessions`` (the clustered partitions with the
  columns constant within every session written once per session,
  [`workbench.data.partition.session_partition`][]).
* ``dedup.csv``: rows / unique rows per dedup group and values / unique values of all sparse
  features per layout, window and batch size. The dedup factor counts the non-empty rows of a
  group only; rows whose group is empty (no history, nothing else in the group) are
  ``empty_rows``, and the stage warns when they are most of the rows
  ([`workbench.data.partition.EMPTY_WARN_FRACTION`][]), since then the factor describes a few rows
  ([`workbench.sparse.reader`][]).

The partitions and the results are one commit ([`workbench.utils.io.atomic_dirs`][]): both
are built in temporary directories and renamed into place under a journal, so a run killed
between the two renames is completed by the next reader, never left half old, half new. The
``recd`` stage ([`workbench.experiments.recd`][]) reads the partitions.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from workbench.data import partition as part
from workbench.data.schema import LABEL, SESSION, TIMESTAMP, DatasetMeta
from workbench.experiments.config import RecdConfig
from workbench.sparse import reader

log = logging.getLogger(__name__)

def warn_empty_groups(name: str, groups: list[list[str]], empty: list[int], rows: int,
                      exp: RecdConfig, sequences: dict[str, str]) -> None:
    """Log a warning for each dedup group empty in most rows, with the numbers.

    Args:
        name: the dataset.
        groups: the dedup groups.
        empty: per group, its empty rows ([`workbench.sparse.reader.empty_rows`][]).
        rows: rows of the table.
        exp: the RecD settings (``history`` names the likely cause).
        sequences: the dataset's sequence features (``DatasetMeta.sequences``).
    """
    for group, n in zip(groups, empty, strict=True):
        if n <= part.EMPTY_WARN_FRACTION * rows:
            continue
        hint = ""
        if exp.history == "snapshot" and any(key in sequences for key in group):
            hint = ("; with experiments.recd.history=snapshot every row takes its session's "
                    "first history, empty when the history is the session's own earlier events "
                    "(session logs), and with per_sample no two rows of a session share one: "
                    "such data has no user history for RecD to deduplicate")
        log.warning("%s: dedup group %s is empty in %d of %d rows (%.0f%%): an empty value "
                    "saves nothing when deduplicated, so the dedup factor counts the %d "
                    "non-empty rows only (empty_rows in dedup.csv)%s", name, "+".join(group), n,
                    rows, 100 * n / max(rows, 1), rows - n, hint)


def column_classes(meta: DatasetMeta) -> dict[str, str]:
    """Column -> class for the storage breakdown."""
    classes = {name: "dense" for name in meta.dense}
    classes.update({name: "other sparse" for name in meta.categorical})
    classes.update({name: "user-side" for name in meta.user_side})
    classes.update({name: "history" for name in meta.sequences})
    for name in (LABEL, SESSION, TIMESTAMP, part.REQUEST):
        classes[name] = "label, ids, time"
    return classes


def storage_frame(table, meta: DatasetMeta, orders: dict[tuple[str, int], np.ndarray],
                  sessions: np.ndarray, constant: list[str],
                  progress: bool = False) -> pd.DataFrame:
    """Bytes per (layout, window, column class); class ``total`` is the whole files. Every
    window of the clustered order is also written in the session layout (``sessions``:
    ``constant`` once per session)."""
    from tqdm.auto import tqdm

    classes = column_classes(meta)
    classes[part.SESSION_ROW] = "label, ids, time"
    layouts = list(orders.items())
    layouts += [((part.SESSION_LAYOUT, w), order) for (layout, w), order in orders.items()
                if layout == "clustered"]
    records = []
    for (layout, window), order in tqdm(layouts, desc="storage", disable=not progress):
        total, per_column = (
            part.session_storage_bytes(table, order, window, sessions, constant)
            if layout == part.SESSION_LAYOUT else part.storage_bytes(table, order, window))
        by_class: dict[str, int] = {}
        for name, size in per_column.items():
            by_class[classes.get(name, "label, ids, time")] = \
                by_class.get(classes.get(name, "label, ids, time"), 0) + size
        for cls, size in sorted(by_class.items()):
            records.append({"layout": layout, "window": window, "column_class": cls,
                            "bytes": size})
        records.append({"layout": layout, "window": window, "column_class": "total",
                        "bytes": total})
    frame = pd.DataFrame.from_records(records)
    frame["rows"] = table.num_rows
    return frame


def _ratio(frame: pd.DataFrame, value: str, against: str = "clustered", **where: Any) -> float:
    """``shuffled / against`` of ``value`` in the rows matching ``where``."""
    sel = frame
    for key, wanted in where.items():
        sel = sel[sel[key] == wanted]
    by_layout = sel.set_index("layout")[value]
    return float(by_layout["shuffled"] / by_layout[against])


def run(processed: Path, partitions: Path, out: Path, exp: RecdConfig, seed: int,
              progress: bool = False) -> None:
    """The ``dedup`` stage for one dataset: write the partitions and the storage/dedup results.

    Args:
        processed: ``data/processed/<ds>``.
        partitions: ``data/partitions/<ds>`` (replaced whole).
        out: ``results/dedup/<ds>`` (replaced whole).
        exp: the RecD settings.
        seed: seeds the shuffled layout.
        progress: show progress bars.
    """
    from workbench.data.pipeline import unavailable_result
    from workbench.utils.io import atomic_dirs, write_json

    with atomic_dirs(partitions, out) as (tmp_parts, tmp_out):  # one commit for both
        if unavailable_result(processed, tmp_out / "summary.json"):
            write_json(tmp_parts / part.PARTITIONS_META, {"available": False})
            return
        table, meta = part.read_train_table(processed)
        part.require_sessions(meta, exp.datasets)
        table, sessions = part.prepare_table(table, meta, exp.session_gap_s, exp.history)
        log_rows = part.log_order(table, meta)
        groups, plain = reader.dedup_groups(meta, exp.dedup_groups)
        windows = sorted({*exp.window_sweep, exp.window})
        orders = {(layout, w): part.layout_order(log_rows, sessions, w, layout, seed)
                  for w in windows for layout in part.LAYOUTS}
        written = {layout: part.write_partitions(table, orders[(layout, exp.window)], exp.window,
                                                 tmp_parts / layout)
                   for layout in part.LAYOUTS}
        constant = part.constant_columns(table, sessions, [k for g in groups for k in g])
        written[part.SESSION_LAYOUT] = part.write_session_partitions(
            table, orders[("clustered", exp.window)], exp.window, sessions, constant,
            tmp_parts / part.SESSION_LAYOUT)
        storage = storage_frame(table, meta, orders, sessions, constant, progress)
        kjt = reader.table_to_kjt(table, reader.sparse_keys(meta))
        dedup = reader.dedup_table(kjt, groups, orders, exp.batch_sizes)
        empty = reader.empty_rows(kjt, groups)
        warn_empty_groups(meta.name, groups, empty, table.num_rows, exp, meta.sequences)
        storage.to_csv(tmp_out / "storage.csv", index=False)
        dedup.to_csv(tmp_out / "dedup.csv", index=False, float_format="%.6g")
        n_sessions = int(sessions.max(initial=-1)) + 1
        info = {
            "dataset": meta.name, "available": True, "rows": table.num_rows,
            "sessions": n_sessions, "mean_session_rows": table.num_rows / max(n_sessions, 1),
            "groups": groups, "plain": plain, "window": exp.window, "history": exp.history,
            "empty_group_rows": {"+".join(g): n for g, n in zip(groups, empty, strict=True)},
            "session_gap_s": exp.session_gap_s if meta.has_timestamp else None,
            "partition_bytes": written,
            "storage_ratio": _ratio(storage, "bytes", window=exp.window, column_class="total"),
            "session_columns": constant,
            "session_storage_ratio": _ratio(storage, "bytes", part.SESSION_LAYOUT,
                                            window=exp.window, column_class="total"),
        }
        write_json(tmp_parts / part.PARTITIONS_META, {
            **info, "keys": reader.sparse_keys(meta), "dense": meta.dense,
            "cardinalities": meta.cardinalities, "sequences": meta.sequences,
            "partitions": {layout: len(list((tmp_parts / layout).glob("part-*.parquet")))
                           for layout in part.LAYOUTS}
            | {part.SESSION_LAYOUT: len(list((tmp_parts / part.SESSION_LAYOUT).glob(
                "part-*.sessions.parquet")))}})
        write_json(tmp_out / "summary.json", info)
        log.info("%s: %d rows, %d sessions; storage shuffled/clustered %.2fx, shuffled/session "
                 "layout %.2fx (%s once per session) at window %d", meta.name, table.num_rows,
                 n_sessions, info["storage_ratio"], info["session_storage_ratio"],
                 ", ".join(constant) or "no column", exp.window)
