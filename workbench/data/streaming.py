"""Out-of-core preprocess on DuckDB: parse -> vocabulary -> encode -> split -> Parquet, with peak
memory bounded by ``dataset.memory_limit_mb``, not by the input size.


    raw files --pyarrow CSV, one block at a time--> validated blocks (formats.RowFormat.convert,
        |                                           malformed rows counted with file and line)
        |  dense -> log1p(max(x, 0)), missing -> 0 (numpy, the in-memory path's transform)
        v  Arrow stream, _row = stored position (signals deferred while DuckDB reads it)
    DuckDB table rows (on disk, under memory_limit; spills to a temp directory)
        |  _pos = _row, or the rank by (order_by..., _row)      (Taobao, session logs: stable sort)
        |  test = _pos >= cut, or (timestamp, _pos) >= the cut-th in time order
        |  vocab_f = train tokens seen >= min_count times, id = rank of the token (1..K)
        |  encode: LEFT JOIN vocab_f -> id (0 = missing, rare or unseen)
        |  history: list(item id) OVER (PARTITION BY session ORDER BY _pos, L preceding rows)
        v  ORDER BY test, _pos, fetched in Arrow batches
    row groups of exactly row_group_rows rows --pyarrow ParquetWriter (zstd)--> train/test.parquet

Every step is the in-memory path's ([`workbench.data.preprocess.encode`][]) rule in SQL:
ids follow the sorted token order (DuckDB compares strings bytewise, as pandas' sorted
factorize does on code points), ties in time keep the stored order, and the written Parquet
is byte-identical to [`workbench.data.preprocess.write_split`][] with the same row-group size
(a test holds the two paths to that on real samples).

Why DuckDB: it runs hash aggregates, joins, window functions and sorts out of core under an
explicit ``memory_limit``, spilling to a temp directory, and exchanges Arrow batches without
copies both ways, so the validated blocks go in as they are parsed and the encoded rows come out
as they are written. Polars' streaming engine has no hard memory limit for joins and sorts, and
pyarrow datasets have no out-of-core join or sort.

Memory: DuckDB's ``memory_limit`` plus one parsed block (``block_size``) plus one row group
being written (``row_group_rows`` x the row width) plus the interpreter; the benchmark
``benchmarks/preprocess_scaling.py`` measures it.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import re
import signal
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from workbench.data.preprocess import (
    RowGroupWriter,
    dense_feature,
    id_type,
    split_point,
    warn_leaked_rows,
)
from workbench.data.schema import LABEL, SESSION, TIMESTAMP
from workbench.utils.errors import UserError

log = logging.getLogger(__name__)

ROW = "_row"
POS = "_pos"
TEST = "_test"


@dataclass(frozen=True)
class TableLayout:
    """The roles of a raw table's columns, and the whole-table steps it needs.

    Attributes:
        dense: dense feature columns (float64, NaN when missing).
        categorical: categorical feature columns (raw tokens, or ids when ``cardinalities``
            are given to [`encode_streaming`][]).
        has_session: a ``session`` column is present.
        has_timestamp: a ``timestamp`` column is present (the split is then by time).
        order_by: columns of a stable sort applied before everything else (empty: stored order).
        history: ``(column, item feature)``: build this list column from the item feature's
            previous values within a session (None: no history built).
        sequences: list columns already in the input, holding ids of the named feature (the
            synthetic source); passed through.
    """

    dense: tuple[str, ...]
    categorical: tuple[str, ...]
    has_session: bool = False
    has_timestamp: bool = False
    order_by: tuple[str, ...] = ()
    history: tuple[str, str] | None = None
    sequences: dict[str, str] = field(default_factory=dict)


@dataclass
class StreamingResult:
    """What [`encode_streaming`][] wrote: rows per split, cardinalities, how it split."""

    rows: dict[str, int]
    cardinalities: dict[str, int]
    split: str
    seconds: dict[str, float]


class _Feed:
    """The raw blocks as one Arrow stream for DuckDB, with ``_row`` added and dense values
    transformed; an exception raised while parsing is kept and re-raised by the caller (DuckDB
    would only report that the stream failed)."""

    def __init__(self, blocks: Iterable[dict[str, Any] | pa.RecordBatch], layout: TableLayout,
                 progress: bool) -> None:
        self.blocks = blocks
        self.layout = layout
        self.rows = 0
        self.error: BaseException | None = None
        self.progress = progress
        #: set by a signal deferred while DuckDB reads the stream: it ends at the next block
        self.stop = threading.Event()

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The blocks as record batches (parse errors are also kept in ``error``)."""
        from tqdm.auto import tqdm

        bar = tqdm(disable=not self.progress, desc="parse", unit=" rows", unit_scale=True)
        try:
            for block in self.blocks:
                if self.stop.is_set():
                    return
                if isinstance(block, pa.RecordBatch):
                    block = {name: block.column(name) for name in block.schema.names}
                n = len(next(iter(block.values())))
                columns: dict[str, Any] = {}
                for name, values in block.items():
                    if name in self.layout.dense:
                        values = dense_feature(np.asarray(values, dtype=np.float64)
                                               if isinstance(values, np.ndarray) else
                                               values.to_numpy(zero_copy_only=False))
                    columns[name] = values if not isinstance(values, pa.ChunkedArray) \
                        else values.combine_chunks()
                columns[ROW] = np.arange(self.rows, self.rows + n, dtype=np.int64)
                self.rows += n
                bar.update(n)
                yield pa.RecordBatch.from_pydict(columns)
        except BaseException as exc:  # noqa: BLE001 (handed back to the caller)
            self.error = exc
            raise
        finally:
            bar.close()



class StreamingMemoryError(UserError, MemoryError):
    """DuckDB ran out of its ``memory_limit``: the limit is too small for this data.

    Attributes:
        memory_limit_mb: the limit it ran under.
        phase: what it was doing (``"building the vocabularies"``...).
        used: DuckDB's account of the memory in use (``"122.0 MiB/122.0 MiB used"``), or "".
    """

    def __init__(self, memory_limit_mb: int, phase: str, detail: str) -> None:
        found = re.search(r"\(([^()]*used)\)", detail)
        self.memory_limit_mb = memory_limit_mb
        self.phase = phase
        self.used = found.group(1) if found else ""
        super().__init__(f"memory_limit_mb = {memory_limit_mb}: DuckDB ran out of memory while "
                         f"{phase}{f' ({self.used})' if self.used else ''}; raise the limit")


def _phase(seconds: dict[str, float]) -> str:
    """What [`encode_streaming`][] was doing, from the phases it has finished."""
    for phase, doing in (("parse", "loading the parsed rows"),
                         ("vocabulary", "sorting the rows and building the vocabularies"),
                         ("write", "encoding and writing the splits")):
        if phase not in seconds:
            return doing
    return "finishing"


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def encode_streaming(blocks: Iterable[dict[str, Any] | pa.RecordBatch], layout: TableLayout,
                     out_dir: Path, *, test_fraction: float, min_count: int = 1,
                     cardinalities: dict[str, int] | None = None, history_length: int = 0,
                     memory_limit_mb: int = 2048, row_group_rows: int = 1 << 20,
                     work_dir: Path | None = None, progress: bool = False,
                     ) -> StreamingResult:
    """Encode and split a stream of raw blocks into ``out_dir/{train,test}.parquet``.

    Args:
        blocks: the raw table's blocks (column name -> numpy or Arrow array, in schema order,
            or Arrow record batches), e.g. [`workbench.data.formats.RowFormat.batches`][].
        layout: the columns' roles.
        out_dir: where the two Parquet files go (the caller makes it atomic).
        test_fraction: the latest fraction of rows forms the test split.
        min_count: train frequency below which a token maps to id 0.
        cardinalities: categorical columns are already ids in ``0..card-1`` (kept as they are).
        history_length: length L of the history built for ``layout.history`` (0 = none).
        memory_limit_mb: DuckDB's memory limit (it spills to ``work_dir`` beyond it).
        row_group_rows: rows per Parquet row group.
        work_dir: where DuckDB's database and spill files live (a temporary directory inside
            ``out_dir`` when None; removed afterwards).
        progress: show a tqdm counter of parsed rows.

    Returns:
        Rows per split, cardinalities, the split rule and per-phase seconds.

    Raises:
        ValueError: an id outside ``0..card-1`` with given cardinalities; no rows at all.
        StreamingMemoryError: DuckDB ran out of ``memory_limit_mb`` (the data needs more).
        Exception: whatever the block iterator raises (e.g. ``MalformedInputError`` in strict
            mode).
    """
    import duckdb

    feed = _Feed(blocks, layout, progress)
    batches = feed.batches()
    first = next(batches, None)
    if first is None:
        if feed.error is not None:
            raise feed.error
        raise ValueError("no rows to preprocess: the input yielded no good row")
    # inside out_dir (the caller's temporary folder) by default: a run killed outright leaves
    # it there, and the next run's writer lock removes that folder whole (utils.io.writing)
    scratch = tempfile.TemporaryDirectory(prefix=".duckdb-", dir=work_dir or out_dir)
    seconds: dict[str, float] = {}
    con = None
    try:
        con = duckdb.connect(str(Path(scratch.name) / "work.duckdb"), config={
            "memory_limit": f"{int(memory_limit_mb)}MB",
            "temp_directory": str(Path(scratch.name) / "spill"),
            "preserve_insertion_order": False})  # every order is explicit (_row, _pos)
        con.execute("SET enable_progress_bar = false")
        t0 = time.perf_counter()
        _load(con, first, batches, feed)
        seconds["parse"] = time.perf_counter() - t0
        result = _encode_in_duckdb(con, layout, out_dir, feed.rows, test_fraction=test_fraction,
                                   min_count=min_count, cardinalities=cardinalities,
                                   history_length=history_length, row_group_rows=row_group_rows,
                                   seconds=seconds)
    except duckdb.OutOfMemoryException as exc:
        raise StreamingMemoryError(int(memory_limit_mb), _phase(seconds), str(exc)) from exc
    except RuntimeError as exc:  # "Query interrupted": Ctrl-C or SIGTERM inside a statement
        if isinstance(exc.__cause__, (KeyboardInterrupt, SystemExit)):
            raise exc.__cause__ from None
        raise
    finally:
        if con is not None:  # closed before its files go, on failure too (a full disk...)
            with contextlib.suppress(duckdb.Error):
                con.close()
        scratch.cleanup()
    log.info("streamed %d train + %d test rows (parse %.1f s, vocabulary %.1f s, encode and "
             "write %.1f s)", result.rows["train"], result.rows["test"], seconds["parse"],
             seconds["vocabulary"], seconds["write"])
    return result


def _load(con: Any, first: pa.RecordBatch, batches: Iterator[pa.RecordBatch],
          feed: _Feed) -> None:
    """Load the parsed batches into DuckDB's table ``feed`` as one Arrow stream.

    DuckDB pulls the stream on its own threads (the parse overlaps its inserts, twice as fast as
    one INSERT per batch), so a signal must not raise there: an interrupt inside a Python
    iterator that DuckDB is scanning aborts the interpreter as it exits (``PyGILState_Release``).
    While the stream is read, Ctrl-C, SIGTERM and SIGHUP only stop the stream at its next block
    (`_signals_deferred`); once DuckDB has returned, the signal is raised again here, in
    the calling thread, where it unwinds as usual.
    """
    import duckdb

    with _signals_deferred(feed.stop):
        con.register("feed_stream", pa.RecordBatchReader.from_batches(
            first.schema, itertools.chain([first], batches)))
        try:
            con.execute("CREATE TABLE feed AS SELECT * FROM feed_stream")
        except duckdb.Error:
            if feed.error is not None:
                raise feed.error from None
            raise
        con.unregister("feed_stream")
    if feed.error is not None:
        raise feed.error


@contextlib.contextmanager
def _signals_deferred(stop: threading.Event) -> Iterator[None]:
    """Inside: SIGINT, SIGTERM and SIGHUP set ``stop`` instead of raising; on leaving, the
    handlers are restored and the first signal that came is raised again (so it does what it
    would have done: ``KeyboardInterrupt``, or [`workbench.utils.signals.exit_on_signals`][]'
    ``SystemExit``). Outside the main thread (no handler can be set there) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []

    def defer(signum, _frame):
        came.append(signum)
        stop.set()

    saved = {s: signal.signal(s, defer) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)
        if came:
            signal.raise_signal(came[0])


def _warn_leaked(con: Any, layout: TableLayout, is_test: str) -> None:
    """[`warn_leaked_rows`][workbench.data.preprocess.warn_leaked_rows] for the ``rows`` table:
    one hash of every row's scalar columns (kept with its position and split: 17 bytes a row),
    the test rows whose hash a train row shares, and of those the ones equal to such a train row
    in every scalar column (the few candidates compared column by column)."""
    scalar = [LABEL, *layout.dense, *layout.categorical,
              *([SESSION] if layout.has_session else []),
              *([TIMESTAMP] if layout.has_timestamp else [])]
    cols = ", ".join(map(_quote, scalar))
    same = " AND ".join(f"r.{_quote(c)} IS NOT DISTINCT FROM c.{_quote(c)}" for c in scalar)
    con.execute(f"CREATE TEMP TABLE row_hash AS SELECT hash({cols}) AS _h, {is_test} AS _t, "
                f"{POS} AS _p FROM rows")
    n_test, = con.execute("SELECT count(*) FROM row_hash WHERE _t").fetchone()
    con.execute("CREATE TEMP TABLE leak_candidate AS SELECT _h, _p FROM row_hash WHERE _t AND "
                "_h IN (SELECT _h FROM row_hash WHERE NOT _t)")
    leaked, = con.execute(
        f"SELECT count(*) FROM rows c JOIN leak_candidate k ON c.{POS} = k._p WHERE EXISTS ("
        f"SELECT 1 FROM row_hash t JOIN rows r ON r.{POS} = t._p WHERE NOT t._t AND "
        f"t._h = k._h AND {same})").fetchone()
    con.execute("DROP TABLE leak_candidate")
    con.execute("DROP TABLE row_hash")
    warn_leaked_rows(int(leaked), int(n_test))


def _encode_in_duckdb(con: Any, layout: TableLayout, out_dir: Path, n: int, *,
                      test_fraction: float, min_count: int, cardinalities: dict[str, int] | None,
                      history_length: int, row_group_rows: int, seconds: dict[str, float]
                      ) -> StreamingResult:
    t0 = time.perf_counter()
    if layout.order_by:
        keys = ", ".join([*map(_quote, layout.order_by), ROW])
        con.execute(f"CREATE TABLE rows AS SELECT *, row_number() OVER (ORDER BY {keys}) - 1 "
                    f"AS {POS} FROM feed")
        con.execute("DROP TABLE feed")
    else:
        con.execute(f"CREATE VIEW rows AS SELECT *, {ROW} AS {POS} FROM feed")
    cut = split_point(n, test_fraction)
    if layout.has_timestamp and cut < n:
        t_cut, p_cut = con.execute(
            f'SELECT "{TIMESTAMP}", {POS} FROM rows ORDER BY "{TIMESTAMP}", {POS} '
            f"LIMIT 1 OFFSET {cut}").fetchone()
        is_test = f'("{TIMESTAMP}" > {int(t_cut)} OR ("{TIMESTAMP}" = {int(t_cut)} AND ' \
                  f"{POS} >= {int(p_cut)}))"
    else:
        is_test = f"({POS} >= {cut})"

    _warn_leaked(con, layout, is_test)
    cards: dict[str, int] = {}
    ids: dict[str, str] = {}
    joins: list[str] = []
    for i, name in enumerate(layout.categorical):
        col = _quote(name)
        if cardinalities is not None:
            lo, hi = con.execute(f"SELECT min({col}), max({col}) FROM rows").fetchone()
            card = int(cardinalities[name])
            if lo is not None and (lo < 0 or hi >= card):
                raise ValueError(f"feature {name}: ids outside 0..{card - 1}")
            cards[name] = card
            ids[name] = f"r.{col}"
            continue
        con.execute(
            f"CREATE TABLE vocab{i} AS SELECT _tok, row_number() OVER (ORDER BY _tok) AS _id "
            f"FROM (SELECT {col} AS _tok FROM rows WHERE NOT {is_test} AND {col} IS NOT NULL "
            f"GROUP BY 1 HAVING count(*) >= {int(min_count)})")
        cards[name] = int(con.execute(f"SELECT count(*) FROM vocab{i}").fetchone()[0]) + 1
        joins.append(f"LEFT JOIN vocab{i} v{i} ON r.{col} = v{i}._tok")
        ids[name] = f"coalesce(v{i}._id, 0)"
    seconds["vocabulary"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    select = [f"r.{_quote(LABEL)}", *(f"r.{_quote(d)}" for d in layout.dense),
              *(f"{ids[c]} AS {_quote(c)}" for c in layout.categorical)]
    select += [f'r."{SESSION}"'] if layout.has_session else []
    select += [f'r."{TIMESTAMP}"'] if layout.has_timestamp else []
    select += [f"r.{_quote(c)}" for c in layout.sequences]
    select += [f"{POS}", f"{is_test} AS {TEST}"]
    query = f"SELECT {', '.join(select)} FROM rows r {' '.join(joins)}"
    sequences = dict(layout.sequences)
    if layout.history is not None and history_length > 0:
        column, item = layout.history
        query = (f"SELECT *, coalesce(list({_quote(item)}) OVER (PARTITION BY \"{SESSION}\" "
                 f"ORDER BY {POS} ROWS BETWEEN {int(history_length)} PRECEDING AND 1 PRECEDING),"
                 f" []) AS {_quote(column)} FROM ({query})")
        sequences[column] = item
    columns = [LABEL, *layout.dense, *layout.categorical,
               *([SESSION] if layout.has_session else []),
               *([TIMESTAMP] if layout.has_timestamp else []), *sequences]
    target = output_schema(layout, cards, sequences)
    stream = con.execute(f"SELECT {', '.join(map(_quote, columns))}, {TEST} FROM ({query}) "
                         f"ORDER BY {TEST}, {POS}").fetch_record_batch(65536)
    rows = {"train": 0, "test": 0}
    writers = {split: RowGroupWriter(out_dir / f"{split}.parquet", target, row_group_rows)
               for split in ("train", "test")}
    try:
        for batch in stream:
            test = batch.column(TEST).to_numpy(zero_copy_only=False)
            data = batch.drop_columns([TEST])
            cut_at = int(np.searchsorted(test, True))  # ordered by TEST: train rows come first
            for split, part in (("train", data.slice(0, cut_at)), ("test", data.slice(cut_at))):
                if part.num_rows:
                    writers[split].write(_conform(part, target))
                    rows[split] += part.num_rows
        for writer in writers.values():
            writer.close()
    except BaseException:
        for writer in writers.values():
            writer.abort()
        raise
    seconds["write"] = time.perf_counter() - t0
    return StreamingResult(rows=rows, cardinalities=cards,
                           split="by timestamp" if layout.has_timestamp else "row order",
                           seconds=seconds)


def output_schema(layout: TableLayout, cards: dict[str, int],
                  sequences: dict[str, str]) -> pa.Schema:
    """The encoded splits' Arrow schema (as the in-memory path writes it)."""
    fields = [pa.field(LABEL, pa.float32()), *(pa.field(d, pa.float32()) for d in layout.dense),
              *(pa.field(c, id_type(cards[c])) for c in layout.categorical)]
    fields += [pa.field(SESSION, pa.int64())] if layout.has_session else []
    fields += [pa.field(TIMESTAMP, pa.int64())] if layout.has_timestamp else []
    fields += [pa.field(c, pa.large_list(pa.int32())) for c in sequences]
    return pa.schema(fields)


def _conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """Cast DuckDB's columns to the output schema (lists rebuilt as ``large_list<int32>``)."""
    arrays = []
    for f in schema:
        col = batch.column(f.name)
        if pa.types.is_large_list(f.type):
            col = col.cast(pa.large_list(pa.int64()))
            col = pa.LargeListArray.from_arrays(col.offsets, col.values.cast(pa.int32()))
        else:
            col = col.cast(f.type)
        arrays.append(col)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
