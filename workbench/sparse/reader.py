r"""RecD's reader: columnar partitions -> KJT / IKJT batches, and exact per-batch dedup factors.

Our formalisation (RecD's method section is unavailable). The partitions of
[`workbench.data.partition`][] hold one row per sample, with a ``request`` (session) column:

    columnar batch --table_to_kjt-----------------------> KJT  (every row of every key)
                   --table_to_ikjt (request column)-----> IKJT (a dedup group's keys read once
                                                               per request; plain keys whole)
    session layout --session_ikjt (sessions file = the unique rows, session_row = the inverse
                                   lookup: nothing to find, the writer stored each once)

* **Dedup groups** (RecD's ``dedup_sparse_features``): by default one group of the user-side and
  sequence features; the other sparse features stay plain.
* **Dedup factor**: non-empty rows / unique non-empty rows of a dedup group inside each batch
  of ``b`` consecutive rows of a layout (batches run across partition boundaries, as a
  streaming reader does). Rows are identified exactly: one
  [`workbench.sparse.dedup.to_ikjt`][] over the whole split gives every row its
  global unique-row id per group, and a batch's unique rows are its distinct ``(batch, row id)``
  pairs (no per-batch Python loop).
* **Empty rows** (every key of the group an empty list: a session log's first click has no
  history, and with the history snapshot every row of such a session has none) are counted
  apart, as ``empty_rows``, not as duplicates of each other. RecD's saving is the ids of a
  repeated feature value read, transformed and looked up once instead of once per sample; an
  empty value carries no id, so deduplicating it saves nothing, and counting the empty rows of
  a batch as one unique row would report a dedup factor as large as the batch (512 at a batch
  of 512 on a session log whose histories are all empty) where nothing is saved.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from workbench.data.partition import REQUEST, SESSION_ROW
from workbench.data.schema import DatasetMeta
from workbench.sparse.dedup import request_rows, to_ikjt
from workbench.sparse.jagged_tensor import InverseKeyedJaggedTensor, KeyedJaggedTensor
from workbench.utils.validation import ConfigError


def sparse_keys(meta: DatasetMeta) -> list[str]:
    """The KJT keys of a dataset: every categorical feature, then every sequence feature."""
    return [*meta.categorical, *meta.sequences]


def dedup_groups(meta: DatasetMeta,
                 configured: Sequence[Sequence[str]] | None) -> tuple[list[list[str]], list[str]]:
    """RecD's ``dedup_sparse_features`` and the keys left plain.

    Args:
        meta: the dataset.
        configured: explicit groups, or None for one group of the user-side and sequence
            features.

    Returns:
        ``(groups, plain keys)``.

    Raises:
        ConfigError: a configured group names an unknown feature or a feature twice; or none is
            configured and the dataset has no user-side or sequence feature (nothing a
            session's samples share: RecD would have nothing to deduplicate).
    """
    keys = sparse_keys(meta)
    if configured is None:
        user = [k for k in keys if k in meta.user_side or k in meta.sequences]
        if not user:
            raise ConfigError(
                f"dataset {meta.name} has no user-side or sequence feature, so RecD has nothing "
                "to deduplicate (the features a session's samples share); prepare it with a "
                "history (dataset.history_length=20, for session logs) or name features in "
                f"experiments.recd.dedup_groups (e.g. [[{keys[0]}]]; its features: {keys})")
        groups = [user]
    else:
        groups = [list(g) for g in configured]
        seen: set[str] = set()
        for gi, group in enumerate(groups):
            for key in group:
                if key not in keys:
                    raise ConfigError(f"experiments.recd.dedup_groups[{gi}] names {key!r}, which "
                                     f"is not a sparse feature of {meta.name}: {keys}")
                if key in seen:
                    raise ConfigError(f"experiments.recd.dedup_groups: {key!r} is in two groups")
                seen.add(key)
    grouped = {k for g in groups for k in g}
    return groups, [k for k in keys if k not in grouped]


def _column_lists(column: pa.ChunkedArray | pa.Array,
                  rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(values, lengths)`` int64 of a column (a scalar column gives lists of one id), of the
    rows ``rows`` only when given (an Arrow ``take``, so only those rows' values are copied)."""
    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if rows is not None:
        col = col.take(pa.array(rows))
    if pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
        col = col.cast(pa.large_list(pa.int64()))
        offsets = col.offsets.to_numpy()
        flat = col.values.to_numpy(zero_copy_only=False)
        return (flat[offsets[0]:offsets[-1]].astype(np.int64, copy=False),
                np.diff(offsets).astype(np.int64))
    return (col.to_numpy(zero_copy_only=False).astype(np.int64),
            np.ones(len(col), dtype=np.int64))


def table_to_kjt(table: pa.Table, keys: Sequence[str]) -> KeyedJaggedTensor:
    """A KJT of ``keys`` over all rows of ``table`` (scalar columns give lists of one id)."""
    parts = [_column_lists(table.column(key)) for key in keys]
    return KeyedJaggedTensor(list(keys), np.concatenate([v for v, _ in parts]),
                             np.concatenate([n for _, n in parts]))


def table_to_ikjt(table: pa.Table, keys: Sequence[str], groups: Sequence[Sequence[str]],
                  plain: Sequence[str]) -> InverseKeyedJaggedTensor:
    """RecD's reader: an IKJT straight from a columnar batch, keyed by its ``request`` column.

    The grouped features are request-level (constant within a request), so only the first row
    of every request is read for them (an Arrow ``take`` of ``U`` rows); the plain keys are
    read whole. No KJT of all rows is materialised for the groups. Equal to
    ``to_ikjt_by_request(table_to_kjt(table, keys), groups, requests, plain)``.
    """
    requests = table.column(REQUEST).to_numpy().astype(np.int64)
    unique_rows, inverse = request_rows(requests)
    values: dict[str, np.ndarray] = {}
    lengths: dict[str, np.ndarray] = {}
    for group in groups:
        for key in group:
            values[key], lengths[key] = _column_lists(table.column(key), unique_rows)
    for key in plain:
        values[key], lengths[key] = _column_lists(table.column(key))
    identity = np.arange(table.num_rows, dtype=np.int64)
    return InverseKeyedJaggedTensor(list(keys), [*groups, *([k] for k in plain)], values,
                                    lengths, [inverse] * len(groups) + [identity] * len(plain))


#: The session-layout reader's name in the ``recd`` stage's timings (its preprocessing path).
SESSION_PATH = "ikjt (session layout)"


def session_ikjt(sessions: pa.Table, rows: pa.Table, keys: Sequence[str],
                 groups: Sequence[Sequence[str]], plain: Sequence[str]
                 ) -> InverseKeyedJaggedTensor:
    """RecD's reader on the session layout ([`workbench.data.partition.session_partition`][]):
    the sessions file's rows are a group's unique rows and ``session_row`` is its inverse
    lookup, so nothing is deduplicated at read time. Equal to [`table_to_ikjt`][] of the
    clustered partition the two files were written from.

    Raises:
        ValueError: a grouped key is not in the sessions file (it was not constant within
            every session, e.g. a per-sample history: ``experiments.recd.history =
            per_sample``).
    """
    for group in groups:
        for key in group:
            if key not in sessions.column_names:
                raise ValueError(f"dedup key {key!r} is not in the sessions file: it is not "
                                 "constant within every session (history = per_sample?), so "
                                 "the session layout stores it per sample")
    inverse = rows.column(SESSION_ROW).to_numpy().astype(np.int64)
    values: dict[str, np.ndarray] = {}
    lengths: dict[str, np.ndarray] = {}
    for group in groups:
        for key in group:
            values[key], lengths[key] = _column_lists(sessions.column(key))
    for key in plain:
        values[key], lengths[key] = _column_lists(rows.column(key))
    identity = np.arange(rows.num_rows, dtype=np.int64)
    return InverseKeyedJaggedTensor(list(keys), [*groups, *([k] for k in plain)], values,
                                    lengths, [inverse] * len(groups) + [identity] * len(plain))


def global_row_ids(kjt: KeyedJaggedTensor,
                   groups: Sequence[Sequence[str]]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per group: the unique-row id of every row over the whole table and each row's values.

    Returns:
        For each group ``(row_id [rows], values_per_unique_row [U])``.
    """
    grouped = {k for g in groups for k in g}
    ikjt = to_ikjt(kjt, groups, plain=[k for k in kjt.keys() if k not in grouped])  # noqa: SIM118
    out = []
    for group in ikjt.groups[:len(groups)]:
        per_row = sum(ikjt.lengths(k) for k in group)
        out.append((ikjt.inverse_lookup(group), np.asarray(per_row, dtype=np.int64)))
    return out


def batch_dedup(row_ids: np.ndarray, row_values: np.ndarray, order: np.ndarray,
                batch_size: int) -> tuple[int, int, int, int, int]:
    """Rows, unique rows, values, unique values and empty rows over batches of a layout.

    An empty row (no value in any key of the group) is counted in ``empty rows`` only: it is
    neither a row deduplicated nor a unique row (see the module docstring).

    Args:
        row_ids: global unique-row id of every row (one group).
        row_values: values (ids) of each unique row.
        order: the layout's row order.
        batch_size: rows per batch (the last batch may be short).

    Returns:
        ``(non-empty rows, unique non-empty rows, values, unique values, empty rows)`` summed
        over all batches.
    """
    ids = row_ids[order]
    filled = row_values[ids] > 0
    batch = np.arange(ids.size, dtype=np.int64)[filled] // batch_size
    n_ids = int(row_values.size)
    pairs = np.unique(batch * n_ids + ids[filled])
    unique_ids = pairs % n_ids if n_ids else pairs
    n_filled = int(filled.sum())
    return (n_filled, int(pairs.size), int(row_values[ids].sum()),
            int(row_values[unique_ids].sum()), int(ids.size) - n_filled)


def dedup_table(kjt: KeyedJaggedTensor, groups: Sequence[Sequence[str]],
                orders: dict[tuple[str, int], np.ndarray],
                batch_sizes: Sequence[int]) -> pd.DataFrame:
    """Dedup factors of every group (and all keys together) for layouts x batch sizes.

    Args:
        kjt: every sparse key over the whole table.
        groups: the dedup groups (other keys count as plain: every row stored).
        orders: ``{(layout, window): row order}``.
        batch_sizes: the batch sizes.

    Returns:
        One row per (layout, window, batch size, group) with ``rows`` (all rows),
        ``empty_rows`` (rows with no value in any key of the group), ``unique_rows`` (unique
        non-empty rows), ``values``, ``unique_values``, ``dedup_factor`` (non-empty rows /
        unique non-empty rows; empty, NaN, when the group has no non-empty row) and
        ``values_factor`` (values / unique values; NaN without values); ``group = "all"`` sums
        every key (plain keys contribute all their values).
    """
    ids = global_row_ids(kjt, groups)
    grouped = {k for g in groups for k in g}
    plain = [k for k in kjt.keys() if k not in grouped]  # noqa: SIM118 (a KJT, not a dict)
    plain_values = sum(int(kjt[k].values().size) for k in plain)
    records = []
    for (layout, window), order in orders.items():
        for b in batch_sizes:
            tot_v = tot_u = plain_values
            for group, (row_ids, row_values) in zip(groups, ids):
                rows, urows, vals, uvals, empty = batch_dedup(row_ids, row_values, order, b)
                records.append({"layout": layout, "window": window, "batch_size": b,
                                "group": "+".join(group), "rows": rows + empty,
                                "empty_rows": empty, "unique_rows": urows, "values": vals,
                                "unique_values": uvals})
                tot_v += vals
                tot_u += uvals
            records.append({"layout": layout, "window": window, "batch_size": b, "group": "all",
                            "rows": kjt.batch_size, "empty_rows": 0,
                            "unique_rows": kjt.batch_size, "values": tot_v,
                            "unique_values": tot_u})
    frame = pd.DataFrame.from_records(records)
    unique = frame["unique_rows"].where(frame["unique_rows"] > 0)  # none: no factor (NaN)
    frame["dedup_factor"] = (frame["rows"] - frame["empty_rows"]) / unique
    frame["values_factor"] = frame["values"] / frame["unique_values"].where(
        frame["unique_values"] > 0)
    return frame


def empty_rows(kjt: KeyedJaggedTensor, groups: Sequence[Sequence[str]]) -> list[int]:
    """Per group, the rows with no value in any of its keys (whole table, any order)."""
    out = []
    for group in groups:
        lengths = np.zeros(kjt.batch_size, dtype=np.int64)
        for key in group:
            lengths += kjt[key].lengths()
        out.append(int((lengths == 0).sum()))
    return out

