r"""RecD's data generation: training partitions written shuffled or clustered by session.

RecD (Zhao et al., MLSys'23) observes that one user session produces many samples whose
user-side features (demographics, the user's history) do not change, and changes the pipeline
that writes training tables so that a session's samples land *next to each other*: duplicates
then compress well in a columnar file and fall into the same training batch, where an
InverseKeyedJaggedTensor ([`workbench.sparse.jagged_tensor`][]) stores them once. The paper's
method section is unavailable; this module is our formalisation of that data-generation step:

    processed train split          log order              partitions of W rows (the window)
    (sorted by user, time)  --sort by timestamp-->  [ w0 | w1 | w2 | ... ]  each written as
                                                          |                 part-0000p.parquet
                                   shuffled:  rows of the window in a seeded random order
                                              (a conventional training table)
                                   clustered: rows of the window sorted by (session, log order)
                                              (RecD)

* **Sessions** (requests). A source's ``session`` column is the user; on timestamped sources a
  user's rows more than ``session_gap_s`` apart start a new session (the usual 30-minute rule).
  The synthetic generator's sessions are used as they are.
* **History snapshot** (``history: snapshot``): a production feature store serves the user's
  history once per request, so every sample of a session carries the history the session started
  with. Our preprocessed sources store a per-sample history (it grows by one item every sample
  and so never repeats); the snapshot gives every row of a session its first row's history.
* **Windows**: rows are cut into windows of ``W`` consecutive rows in log order (timestamp order;
  the stored order when there is no timestamp), like hourly partitions; clustering can only
  bring together the samples of a session that fall into the same window.
* **Storage**: each partition is a zstd Parquet file (deterministic, no wall-clock metadata);
  the bytes of the layouts are the storage result. Every column is written in every layout.
* **Session layout** (``sessions``: RecD's data generation stores a session's request-level
  features once): the clustered partition split in two files, ``part-p.sessions.parquet``
  (one row per session of the partition, in order of appearance: the columns constant within
  every session, [`constant_columns`][]) and ``part-p.rows.parquet`` (one row per sample: the
  other columns and ``session_row``, the sample's row in the sessions file). Read back, the
  sessions file *is* the unique rows of an IKJT and ``session_row`` its inverse lookup
  ([`workbench.sparse.reader.session_ikjt`][]):

      clustered partition        sessions file (U rows)     rows file (R rows)
      s0 | u0 h0 | a           ->  0: u0 h0                 a  0
      s0 | u0 h0 | b               1: u1 h1                 b  0
      s1 | u1 h1 | c                                        c  1
* **Reading**: the partitions become KJT / IKJT batches, and their dedup factors are counted, in
  [`workbench.sparse.reader`][].
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from workbench.data.schema import SESSION, TIMESTAMP, DatasetMeta
from workbench.utils.errors import MissingInputError, UserError

log = logging.getLogger(__name__)

LAYOUTS = ("shuffled", "clustered")
SESSION_LAYOUT = "sessions"  # the clustered order, written once per session (not a row order)
REQUEST = "request"
PART_NAME = "part-{:05d}.parquet"
SESSIONS_NAME = "part-{:05d}.sessions.parquet"
ROWS_NAME = "part-{:05d}.rows.parquet"
SESSION_ROW = "session_row"  # a sample's row in its partition's sessions file


class NoSessionsError(UserError, ValueError):
    """The dataset has no user/session column, so there is nothing to cluster by."""


# ------------------------------------------------------------------------------------------------
# sessions, history snapshot, layouts


def read_train_table(processed: Path | str) -> tuple[pa.Table, DatasetMeta]:
    """The encoded train split as an Arrow table (list columns stay columnar) and its meta."""
    meta = DatasetMeta.read(processed)
    path = Path(processed) / "train.parquet"
    if not path.exists():
        raise MissingInputError(f"{path} not found: run the preprocess stage for {meta.name}")
    return pq.read_table(path), meta


def session_keys(table: pa.Table, meta: DatasetMeta, gap_s: int | None) -> np.ndarray:
    """Dense session (request) id of every row.

    Args:
        table: the train split.
        meta: its metadata (``has_session`` is required).
        gap_s: on timestamped sources, a gap longer than this between two consecutive rows of a
            user (in time order) starts a new session; None keeps one session per user.

    Returns:
        int64 ``[rows]`` ids ``0..S-1``, numbered in (user, time) order.

    Raises:
        NoSessionsError: the dataset has no session/user column.
    """
    if not meta.has_session:
        raise NoSessionsError(
            f"dataset {meta.name} has no session/user column: RecD clusters samples by session, "
            "so use a source with users (movielens_*, taobao_*, synthetic_sessions)")
    user = table.column(SESSION).to_numpy().astype(np.int64)
    rows = user.size
    if rows == 0:
        return np.zeros(0, dtype=np.int64)
    if meta.has_timestamp and gap_s is not None:
        ts = table.column(TIMESTAMP).to_numpy().astype(np.int64)
        order = np.lexsort((np.arange(rows), ts, user))
    else:
        ts = None
        order = np.lexsort((np.arange(rows), user))
    u = user[order]
    new = np.ones(rows, dtype=bool)
    new[1:] = u[1:] != u[:-1]
    if ts is not None:
        t = ts[order]
        new[1:] |= (t[1:] - t[:-1]) > gap_s
    out = np.empty(rows, dtype=np.int64)
    out[order] = np.cumsum(new) - 1
    return out


def log_order(table: pa.Table, meta: DatasetMeta) -> np.ndarray:
    """Row indices in log order: by timestamp (stable) when there is one, else as stored."""
    rows = table.num_rows
    if not meta.has_timestamp:
        return np.arange(rows, dtype=np.int64)
    ts = table.column(TIMESTAMP).to_numpy().astype(np.int64)
    return np.argsort(ts, kind="stable").astype(np.int64)


def snapshot_histories(table: pa.Table, meta: DatasetMeta, sessions: np.ndarray,
                       first_of: np.ndarray | None = None) -> pa.Table:
    """Every row of a session takes the sequence features of the session's first row.

    Args:
        table: the train split.
        meta: names the sequence columns.
        sessions: session id per row.
        first_of: row index of the first row of every session; default the lowest row index of
            the session (our sources store each user's rows in time order).

    Returns:
        The table with its sequence columns replaced (other columns untouched).
    """
    if not meta.sequences:
        return table
    if first_of is None:
        first_of = first_rows(sessions)
    take = pa.array(first_of[sessions])
    for name in meta.sequences:
        i = table.schema.get_field_index(name)
        table = table.set_column(i, name, pc.take(table.column(name), take))
    return table


def layout_order(log_rows: np.ndarray, sessions: np.ndarray, window: int, layout: str,
                 seed: int) -> np.ndarray:
    """Row order of a layout: windows of ``window`` log rows, shuffled or clustered inside.

    Args:
        log_rows: row indices in log order ([`log_order`][]).
        sessions: session id per row.
        window: rows per partition.
        layout: ``"shuffled"`` or ``"clustered"``.
        seed: seeds the shuffle.

    Returns:
        int64 row indices: partition ``p`` is ``order[p * window : (p + 1) * window]``.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout = {layout!r}: must be one of {LAYOUTS}")
    if window < 1:
        raise ValueError(f"window = {window}: must be >= 1")
    pos = np.arange(log_rows.size, dtype=np.int64)
    win = pos // window
    if layout == "shuffled":
        noise = np.random.default_rng(seed).permutation(log_rows.size)
        return log_rows[np.lexsort((noise, win))]
    return log_rows[np.lexsort((pos, sessions[log_rows], win))]


def prepare_table(table: pa.Table, meta: DatasetMeta, gap_s: int | None,
                  history: str) -> tuple[pa.Table, np.ndarray]:
    """Sessions, the ``request`` column and (``history == "snapshot"``) the history snapshot.

    Returns:
        ``(table with a request column, session id per row)``.
    """
    if history not in ("snapshot", "per_sample"):
        raise ValueError(f"history = {history!r}: must be 'snapshot' or 'per_sample'")
    sessions = session_keys(table, meta, gap_s)
    if history == "snapshot":
        table = snapshot_histories(table, meta, sessions)
    if REQUEST in table.column_names:
        table = table.drop_columns([REQUEST])
    return table.append_column(REQUEST, pa.array(sessions, pa.int64())), sessions


# ------------------------------------------------------------------------------------------------
# writing


def _parquet_bytes(table: pa.Table) -> bytes:
    """One deterministic zstd Parquet file (no pandas/wall-clock metadata) as bytes."""
    sink = io.BytesIO()
    pq.write_table(table.replace_schema_metadata(None), sink, compression="zstd",
                   write_statistics=True)
    return sink.getvalue()


def partition_files(table: pa.Table, order: np.ndarray, window: int) -> Iterator[bytes]:
    """The Parquet bytes of each partition of a layout, in order."""
    for start in range(0, order.size, window):
        yield _parquet_bytes(table.take(pa.array(order[start:start + window])))


def column_bytes(data: bytes) -> dict[str, int]:
    """Compressed bytes of every top-level column of one Parquet file (all row groups)."""
    md = pq.ParquetFile(io.BytesIO(data)).metadata
    out: dict[str, int] = {}
    for rg in range(md.num_row_groups):
        group = md.row_group(rg)
        for c in range(group.num_columns):
            col = group.column(c)
            name = col.path_in_schema.split(".")[0]
            out[name] = out.get(name, 0) + int(col.total_compressed_size)
    return out


def _tally(files: Iterable[bytes], columns: Sequence[str]) -> tuple[int, dict[str, int]]:
    """Total bytes of ``files`` and the compressed bytes of each of ``columns`` in them."""
    total, per_column = 0, dict.fromkeys(columns, 0)
    for data in files:
        total += len(data)
        for name, size in column_bytes(data).items():
            per_column[name] += size
    return total, per_column


def storage_bytes(table: pa.Table, order: np.ndarray, window: int) -> tuple[int, dict[str, int]]:
    """Total file bytes of the partitions of a layout, and the compressed bytes per column
    (the rest of the total is Parquet metadata)."""
    return _tally(partition_files(table, order, window), table.column_names)


def first_rows(sessions: np.ndarray) -> np.ndarray:
    """Row index of the first row of every session id (``len`` = the ids' maximum + 1)."""
    first = np.full(int(sessions.max(initial=-1)) + 1, sessions.size, dtype=np.int64)
    np.minimum.at(first, sessions, np.arange(sessions.size, dtype=np.int64))
    return first


def _same_values(column: pa.ChunkedArray, other: pa.Array) -> bool:
    """Whether two columns hold the same values row by row (lists compared element-wise)."""
    col = column.combine_chunks()
    if pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
        kind = pa.large_list(col.type.value_type)
        a, b = col.cast(kind), other.cast(kind)
        return (np.array_equal(np.diff(a.offsets.to_numpy()), np.diff(b.offsets.to_numpy()))
                and pc.list_flatten(a).equals(pc.list_flatten(b)))
    return col.equals(other)


def constant_columns(table: pa.Table, sessions: np.ndarray,
                     candidates: Sequence[str]) -> list[str]:
    """The ``candidates`` whose value is the same in every row of a session, in their order
    (the session layout writes them once per session; the others stay per sample)."""
    ref = pa.array(first_rows(sessions)[sessions])
    return [name for name in candidates
            if _same_values(table.column(name), table.column(name).combine_chunks().take(ref))]


def session_partition(table: pa.Table, rows: np.ndarray, sessions: np.ndarray,
                      constant: Sequence[str]) -> tuple[pa.Table, pa.Table]:
    """One partition in the session layout: ``(sessions file, rows file)`` of its ``rows``.

    The sessions file holds ``constant`` (plus the request id) once per session, in order of
    first appearance; the rows file the other columns per row and [`SESSION_ROW`][]."""
    _, first, inverse = np.unique(sessions[rows], return_index=True, return_inverse=True)
    by_appearance = np.argsort(first, kind="stable")
    rank = np.empty_like(by_appearance)
    rank[by_appearance] = np.arange(by_appearance.size)
    shared = [*constant, *([REQUEST] if REQUEST in table.column_names else [])]
    once = table.select(shared).take(pa.array(rows[first[by_appearance]]))
    each = table.drop_columns(shared).take(pa.array(rows)).append_column(
        SESSION_ROW, pa.array(rank[inverse.ravel()], pa.int32()))
    return once, each


def session_files(table: pa.Table, order: np.ndarray, window: int, sessions: np.ndarray,
                  constant: Sequence[str]) -> Iterator[tuple[bytes, bytes]]:
    """The Parquet bytes of each partition's sessions and rows files, in order (``order``:
    the clustered order, so a session's rows of a window are adjacent)."""
    for start in range(0, order.size, window):
        once, each = session_partition(table, order[start:start + window], sessions, constant)
        yield _parquet_bytes(once), _parquet_bytes(each)


def session_storage_bytes(table: pa.Table, order: np.ndarray, window: int,
                          sessions: np.ndarray, constant: Sequence[str]
                          ) -> tuple[int, dict[str, int]]:
    """Total bytes of the session layout's files and the compressed bytes per column."""
    return _tally((data for pair in session_files(table, order, window, sessions, constant)
                   for data in pair), [*table.column_names, SESSION_ROW])


def write_session_partitions(table: pa.Table, order: np.ndarray, window: int,
                             sessions: np.ndarray, constant: Sequence[str],
                             directory: Path) -> int:
    """Write each partition's sessions and rows files into ``directory`` (fresh); total bytes."""
    directory.mkdir(parents=True, exist_ok=False)
    total = 0
    for p, (once, each) in enumerate(session_files(table, order, window, sessions, constant)):
        (directory / SESSIONS_NAME.format(p)).write_bytes(once)
        (directory / ROWS_NAME.format(p)).write_bytes(each)
        total += len(once) + len(each)
    return total


def read_session_partition(directory: Path | str, p: int) -> tuple[pa.Table, pa.Table]:
    """Partition ``p`` of the session layout: ``(sessions file, rows file)``."""
    directory = Path(directory)
    path = directory / SESSIONS_NAME.format(p)
    if not path.is_file():
        raise MissingInputError(f"{path} not found: run the dedup stage")
    return pq.read_table(path), pq.read_table(directory / ROWS_NAME.format(p))


def write_partitions(table: pa.Table, order: np.ndarray, window: int, directory: Path) -> int:
    """Write ``part-00000.parquet, ...`` into ``directory`` (which must be fresh); total bytes."""
    directory.mkdir(parents=True, exist_ok=False)
    total = 0
    for p, data in enumerate(partition_files(table, order, window)):
        (directory / PART_NAME.format(p)).write_bytes(data)
        total += len(data)
    return total


def read_partitions(directory: Path | str, columns: Sequence[str] | None = None) -> pa.Table:
    """All partitions of one layout, concatenated in partition order."""
    directory = Path(directory)
    parts = sorted(directory.glob("part-*.parquet"))
    if not parts:
        raise MissingInputError(f"no part-*.parquet in {directory}: run the dedup stage")
    return pa.concat_tables([pq.read_table(p, columns=list(columns) if columns else None)
                             for p in parts])


PARTITIONS_META = "partitions.json"

#: Warn when more than this fraction of a dedup group's rows are empty (nothing to deduplicate).
EMPTY_WARN_FRACTION = 0.5

#: The dataset options and the formats of one's own files that have sessions.
SESSION_SOURCES = ("dataset=synthetic_sessions, synthetic_sessions_full, movielens_* or taobao_*, "
                   "or your own files with dataset=local and dataset.format = movielens_100k, "
                   "movielens_1m, movielens_20m, movielens_csv, taobao_user_behavior, "
                   "session_clicks or diginetica_views")


def require_sessions(meta: DatasetMeta, datasets: Sequence[str]) -> None:
    """Stop when the dataset has no session/user column: RecD has nothing to cluster by.

    Raises:
        NoSessionsError: naming the dataset and the datasets and formats that have sessions.
    """
    if not meta.has_session:
        raise NoSessionsError(
            f"dataset {meta.name} has no session/user column, and RecD clusters and "
            f"deduplicates the samples of a session: use data with sessions, {SESSION_SOURCES} "
            f"(the pipeline runs RecD on experiments.recd.datasets = {list(datasets)})")
