"""Session click logs: YOOCHOOSE (RecSys Challenge 2015) and DIGINETICA (CIKM Cup 2016).

Both are [`RowFormat`][workbench.data.formats.engine.RowFormat] formats (every line is one sample,
so they stream), labelled from a second, much smaller file of purchases: a click is positive when
its session bought its item. The purchases are read once, when the format is made for a given set of
files ([`session_clicks_format`][], [`diginetica_views_format`][]), into a sorted array of packed
``(session, item)`` pairs; each block's labels are then one vectorised lookup, so the clicks are
still read block by block.

Formats
    ``session_clicks`` (YOOCHOOSE ``yoochoose-clicks.dat``)
        No header; 4 comma-separated fields per line:

            session_id,timestamp,item_id,category
            1,2014-04-07T10:51:09.277Z,214536502,0

        ``session_id`` and ``item_id`` are integers; ``timestamp`` is ISO-8601 UTC,
        ``YYYY-MM-DDThh:mm:ss[.fff]Z``; ``category`` is a token (``0`` = unknown, ``S`` = a
        special offer, ``1``..``12`` a category, or a longer number = a brand), kept as a string
        (empty -> missing). The labels file is YOOCHOOSE ``yoochoose-buys.dat``, no header:

            session_id,timestamp,item_id,price,quantity
            420374,2014-04-06T18:44:58.314Z,214537888,12462,1

        given as one more file whose name contains ``buys`` (only its ``session_id`` and
        ``item_id`` are used). Other files are clicks, read in order (``yoochoose-test.dat``
        has the clicks layout too: leave it out unless it is wanted).
    ``diginetica_views`` (DIGINETICA ``train-item-views.csv``)
        Semicolon-separated with the header ``session_id;user_id;item_id;timeframe;eventdate``:

            1;NA;81766;526309;2016-05-09

        ``session_id`` and ``item_id`` are integers; ``user_id`` is a token, ``NA`` for an
        anonymous session; ``eventdate`` is the session's day ``YYYY-MM-DD`` (UTC) and
        ``timeframe`` the milliseconds since the session's start (>= 0). The labels file is
        ``train-purchases.csv``, with the header ``sessionId;userId;timeframe;eventdate;
        ordernumber;itemId``, given as one more file whose name contains ``purchases`` (only
        ``sessionId`` and ``itemId`` are used).

Label rule
    ``label`` = 1.0 when the row's ``(session_id, item_id)`` pair occurs in the purchases file
    (the session bought the item: every click of that item in that session is positive, also the
    clicks after the purchase), else 0.0. Without a purchases file every label is 0.0 and a
    warning is logged: such a dataset only serves the experiments that look at keys (embedding
    cache, dedup, dispatch), not training for AUC.

Columns
    ``session_clicks``: ``label``, categorical ``item_id`` (int64 tokens) and ``category``
    (string tokens), ``session`` = session id, ``timestamp`` = unix seconds (the fraction is
    dropped). ``diginetica_views``: ``label``, categorical ``user_id`` (string tokens, ``NA`` ->
    missing; user-side) and ``item_id`` (int64 tokens), ``session`` = session id, ``timestamp`` =
    unix seconds of ``eventdate`` + ``timeframe // 1000``. Both are stably sorted by
    (session, timestamp), and ``history_length`` > 0 adds ``hist_item_id``: the same session's
    previous items (see [`workbench.data.formats.engine`][]).

Malformed rows
    A row is malformed when it has the wrong number of fields, an empty or non-integer id, or an
    unparsable timestamp (not ISO-8601 UTC, an impossible date or time, a bad ``eventdate`` or a
    negative or non-integer ``timeframe``); rows are dropped and counted, or raise in strict mode,
    as described in [`workbench.data.formats.delimited`][]. Malformed rows of the purchases file do
    not drop clicks: they are counted in the same report (a purchases file without a single good
    row is an error).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from workbench.data.formats.delimited import (
    BLOCK_SIZE,
    Checks,
    PathsLike,
    as_paths,
    np_bool,
    read_delimited,
)
from workbench.data.formats.engine import RowFormat, int_column, parse_rows, value_at
from workbench.data.formats.sniff import describe_file
from workbench.data.schema import (
    LABEL,
    LABEL_FREE_STAGES,
    SESSION,
    TIMESTAMP,
    MalformedInputError,
    ParseReport,
    RawTable,
)

__all__ = [
    "DIGINETICA_PURCHASES_HEADER",
    "EXPECTS",
    "DIGINETICA_VIEWS_HEADER",
    "YOOCHOOSE_BUYS_FIELDS",
    "YOOCHOOSE_CLICKS_FIELDS",
    "diginetica_views_format",
    "parse_diginetica_views",
    "parse_session_clicks",
    "session_clicks_format",
]

log = logging.getLogger(__name__)

YOOCHOOSE_CLICKS_FIELDS = ("session_id", "timestamp", "item_id", "category")
YOOCHOOSE_BUYS_FIELDS = ("session_id", "timestamp", "item_id", "price", "quantity")
DIGINETICA_VIEWS_HEADER = ("session_id", "user_id", "item_id", "timeframe", "eventdate")
DIGINETICA_PURCHASES_HEADER = ("sessionId", "userId", "timeframe", "eventdate", "ordernumber",
                               "itemId")

#: ISO-8601 UTC as YOOCHOOSE writes it: ``2014-04-07T10:51:09.277Z`` (the fraction optional).
ISO_UTC_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?Z$"
_DATE_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
_EPOCH = pd.Timestamp("1970-01-01", tz="UTC")
_KEY_ONLY = ("only serves the stages that need no labels (" + ", ".join(LABEL_FREE_STAGES)
             + "), not training for AUC")

#: What each format expects, in the words of the error a parse without good rows raises.
EXPECTS: dict[str, str] = {
    "session_clicks": "YOOCHOOSE clicks: no header; 4 comma-separated fields per line: "
                      "session_id,timestamp,item_id,category with an ISO-8601 UTC timestamp like "
                      "2014-04-07T10:51:09.277Z (labels from an optional buys file, a file "
                      "named like yoochoose-buys.dat: session_id,timestamp,item_id,price,"
                      "quantity)",
    "diginetica_views": "DIGINETICA train-item-views.csv: the header session_id;user_id;item_id;"
                        "timeframe;eventdate, then 5 semicolon-separated fields per line (labels "
                        "from an optional train-purchases.csv)",
}


# ---------------------------------------------------------------------------- purchased pairs


class _PairSet:
    """A set of ``(session, item)`` int64 pairs with a vectorised membership test.

    The pairs are packed into one int64 each (offsets from the smallest session and item, so any
    ids whose ranges fit in 62 bits pack) and kept sorted and unique; a lookup is one
    ``np.searchsorted``. Ranges too wide to pack fall back to a pandas ``MultiIndex``.
    """

    def __init__(self, session: np.ndarray, item: np.ndarray) -> None:
        self._keys: np.ndarray | None = None
        self._index: pd.MultiIndex | None = None
        self.size = 0
        if len(session) == 0:
            return
        self._lo_s, self._hi_s = int(session.min()), int(session.max())
        self._lo_i, self._hi_i = int(item.min()), int(item.max())
        self._span_i = self._hi_i - self._lo_i + 1
        if (self._hi_s - self._lo_s + 1) * self._span_i < 2**62:
            self._keys = np.unique(self._pack(session, item))
            self.size = len(self._keys)
        else:
            self._index = pd.MultiIndex.from_arrays([session, item]).unique()
            self.size = len(self._index)

    def _pack(self, session: np.ndarray, item: np.ndarray) -> np.ndarray:
        s = np.clip(session, self._lo_s, self._hi_s) - self._lo_s
        i = np.clip(item, self._lo_i, self._hi_i) - self._lo_i
        return s * self._span_i + i

    def contains(self, session: np.ndarray, item: np.ndarray) -> np.ndarray:
        """Whether each ``(session[k], item[k])`` is in the set (a bool array)."""
        if self.size == 0:
            return np.zeros(len(session), dtype=bool)
        if self._index is not None:
            return np.asarray(pd.MultiIndex.from_arrays([session, item]).isin(self._index))
        assert self._keys is not None
        in_range = ((session >= self._lo_s) & (session <= self._hi_s)
                    & (item >= self._lo_i) & (item <= self._hi_i))
        key = self._pack(session, item)
        pos = np.minimum(np.searchsorted(self._keys, key), len(self._keys) - 1)
        return in_range & (self._keys[pos] == key)


def _split_files(paths: PathsLike, marker: str, fmt: str, samples: str
                 ) -> tuple[list[Path], list[Path]]:
    """Split the given files into (samples, purchases): a purchases file's name holds ``marker``.

    Raises:
        MalformedInputError: only purchases files were given.
    """
    given = as_paths(paths)
    purchases = [p for p in given if marker in p.name.lower()]
    samples_files = [p for p in given if marker not in p.name.lower()]
    if not samples_files:
        first = purchases[0] if purchases else Path("<no files>")
        raise MalformedInputError(
            f"{first}:1: format {fmt} needs the {samples} file(s); only files named like a "
            f"{marker} file were given ({', '.join(str(p) for p in given) or 'none'})")
    return samples_files, purchases


def _read_purchases(files: list[Path], *, fmt: str, marker: str, what: str,
                    fields: Sequence[str], sep: str,
                    header: Callable[[list[str], str], Sequence[str]] | None,
                    session_field: str, item_field: str, strict: bool,
                    report: ParseReport | None) -> _PairSet | None:
    """Read the purchases files into a `_PairSet` (None when no file is given).

    Args:
        files: the purchases files (possibly none).
        fmt: the format's name (for messages).
        marker: what a purchases file's name contains (for messages).
        what: the purchases file's layout in words (for messages).
        fields: the fields of one line.
        sep: the field separator.
        header: the header check (None: no header).
        session_field: the session id field.
        item_field: the item id field.
        strict: raise at the first malformed row.
        report: where the files and malformed rows are recorded (None: only logged).

    Raises:
        MalformedInputError: a purchases file has rows but not one good one.
    """
    if not files:
        log.warning("%s: no purchases file among the given files (a file whose name contains "
                    "%r): every label is 0.0, so this dataset %s", fmt, marker, _KEY_ONLY)
        return None

    def convert(cols: dict[str, pa.Array], checks: Checks) -> dict[str, Any]:
        return {SESSION: int_column(cols[session_field], session_field, checks),
                "item": int_column(cols[item_field], item_field, checks)}

    side = ParseReport()
    pairs = read_delimited(files, fields=fields, sep=sep, convert=convert, report=side,
                            strict=strict, header=header)
    if side.malformed and len(pairs[SESSION]) == 0:
        raise MalformedInputError(
            f"{side.examples[0]} (no good row in the purchases file of format {fmt}: it should "
            f"hold {what}; {Path(side.files[0]).name} looks like "
            f"{describe_file(side.files[0])})")
    if side.malformed:
        log.warning("%s: %d malformed rows in the purchases file(s), e.g. %s", fmt,
                    side.malformed, "; ".join(side.examples[:3]))
    bought = _PairSet(pairs[SESSION], pairs["item"])
    if bought.size == 0:
        log.warning("%s: the purchases file(s) %s hold no purchase: every label is 0.0, so this "
                    "dataset %s", fmt, ", ".join(str(f) for f in files), _KEY_ONLY)
    if report is not None:
        report.files.extend(side.files)
        report.malformed += side.malformed
        report.examples = (report.examples + side.examples)[:ParseReport.MAX_EXAMPLES]
    return bought


def _labels(bought: _PairSet | None, session: np.ndarray, item: np.ndarray) -> np.ndarray:
    if bought is None:
        return np.zeros(len(session), dtype=np.float32)
    return bought.contains(session, item).astype(np.float32)


# --------------------------------------------------------------------------------- timestamps


def _iso_utc_seconds(arr: pa.Array, name: str, checks: Checks) -> np.ndarray:
    """ISO-8601 UTC strings (``2014-04-07T10:51:09.277Z``) -> int64 unix seconds (floored).

    A value not of that shape, or an impossible date or time, is malformed.
    """
    checks.fail(pc.is_null(arr), f"missing {name}")
    shaped = np_bool(pc.match_substring_regex(arr, ISO_UTC_PATTERN))
    strings = arr if shaped.all() else pc.if_else(pa.array(shaped), arr,
                                                  pa.scalar(None, pa.string()))
    try:
        ns = pc.cast(pc.cast(strings, pa.timestamp("ns", tz="UTC")), pa.int64())
        nanos = ns.fill_null(0).to_numpy(zero_copy_only=False)
        good = shaped
    except pa.ArrowInvalid:  # a well-shaped but impossible value, e.g. 2014-02-30: per value
        parsed = pd.to_datetime(strings.to_pandas(), format="ISO8601",
                                utc=True, errors="coerce")
        stamps = np.asarray(parsed.dt.tz_convert(None), dtype="datetime64[ns]")
        good = shaped & ~np.isnat(stamps)
        nanos = np.where(good, stamps.view(np.int64), 0)
    bad = ~good & np_bool(pc.is_valid(arr))
    checks.fail(bad, lambda i: f"unparsable {name} {value_at(arr, i)!r} (expected ISO-8601 UTC "
                               "like 2014-04-07T10:51:09.277Z)")
    return np.floor_divide(nanos, 10**9).astype(np.int64)


def _date_seconds(arr: pa.Array, name: str, checks: Checks) -> np.ndarray:
    """``YYYY-MM-DD`` strings (UTC days) -> int64 unix seconds of the day's start.

    Parsed once per distinct date (a block holds few); an impossible date is malformed.
    """
    checks.fail(pc.is_null(arr), f"missing {name}")
    encoded = pc.dictionary_encode(arr)
    uniques = encoded.dictionary
    if len(uniques) == 0:
        return np.zeros(len(arr), dtype=np.int64)
    shaped = np_bool(pc.match_substring_regex(uniques, _DATE_PATTERN))
    parsed = pd.to_datetime(uniques.to_pandas(), format="%Y-%m-%d",
                            utc=True, errors="coerce")
    valid = shaped & parsed.notna().to_numpy()
    seconds = ((parsed - _EPOCH).dt.total_seconds().fillna(0).to_numpy(np.float64)
               .astype(np.int64))
    codes = encoded.indices.fill_null(0).to_numpy(zero_copy_only=False)
    checks.fail(pc.and_(pc.is_valid(arr), pa.array(~valid[codes])),
                lambda i: f"unparsable {name} {value_at(arr, i)!r} (expected a date YYYY-MM-DD)")
    return np.where(valid, seconds, 0)[codes]


# ---------------------------------------------------------------------------------- YOOCHOOSE


def _clicks_convert(bought: _PairSet | None
                    ) -> Callable[[dict[str, pa.Array], Checks], dict[str, Any]]:
    def convert(cols: dict[str, pa.Array], checks: Checks) -> dict[str, Any]:
        session = int_column(cols["session_id"], "session_id", checks)
        item = int_column(cols["item_id"], "item_id", checks)
        ts = _iso_utc_seconds(cols["timestamp"], "timestamp", checks)
        return {LABEL: _labels(bought, session, item), "item_id": item,
                "category": cols["category"], SESSION: session, TIMESTAMP: ts}
    return convert


def session_clicks_format(paths: PathsLike, *, strict: bool = False,
                          report: ParseReport | None = None) -> tuple[RowFormat, list[Path]]:
    """The ``session_clicks`` format for these files, and the clicks files it reads.

    The buys file(s) (name containing ``buys``) are read here, once; the returned format's
    ``convert`` labels each block of clicks from them.

    Args:
        paths: the clicks file(s) and optionally the buys file(s) (plain or gzip).
        strict: raise [`MalformedInputError`][] at the first malformed buys row.
        report: receives the buys files and their malformed rows (None: they are only logged).

    Returns:
        ``(format, clicks files)``: pass the files to [`parse_rows`][] or ``format.batches``.

    Raises:
        MalformedInputError: only buys files given, or a buys file without a good row.
    """
    clicks, buys = _split_files(paths, "buys", "session_clicks", "clicks")
    bought = _read_purchases(
        buys, fmt="session_clicks", marker="buys", fields=YOOCHOOSE_BUYS_FIELDS, sep=",",
        header=None,
        what="YOOCHOOSE buys lines session_id,timestamp,item_id,price,quantity, like "
             "420374,2014-04-06T18:44:58.314Z,214537888,12462,1",
        session_field="session_id", item_field="item_id", strict=strict, report=report)
    fmt = RowFormat("session_clicks", YOOCHOOSE_CLICKS_FIELDS, ",", _clicks_convert(bought),
                    categorical=("item_id", "category"), has_session=True, has_timestamp=True,
                    order_by=(SESSION, TIMESTAMP), history_item="item_id")
    return fmt, clicks


def parse_session_clicks(paths: PathsLike, *, strict: bool = False, max_rows: int | None = None,
                         history_length: int = 0, block_size: int = BLOCK_SIZE) -> RawTable:
    """Parse YOOCHOOSE clicks (``session_id,timestamp,item_id,category``), labelled by buys.

    Args:
        paths: the clicks file(s) and optionally the buys file (``yoochoose-buys.dat``: any
            name containing ``buys``); plain or gzip.
        strict: raise [`MalformedInputError`][] at the first malformed row.
        max_rows: keep at most this many clicks (the first of the files, before sorting).
        history_length: add ``hist_item_id`` with up to this many previous items of the session
            when > 0.
        block_size: bytes per parsed block.

    Returns:
        ``label`` (1.0 when the session bought the item), categorical ``item_id`` (int64
        tokens) and ``category`` (string tokens), ``session``, ``timestamp`` (unix seconds);
        stably sorted by (session, timestamp).
    """
    return _parse_log(session_clicks_format, paths, strict=strict, max_rows=max_rows,
                      history_length=history_length, block_size=block_size)


# --------------------------------------------------------------------------------- DIGINETICA


def _header_check(expected: Sequence[str], fmt: str, what: str
                  ) -> Callable[[list[str], str], Sequence[str]]:
    """A header check for [`read_delimited`][] that names the format in its error."""
    def check(names: list[str], file: str) -> Sequence[str]:
        got = [n.strip() for n in names]
        if got:
            got[0] = got[0].lstrip("\ufeff")
        if got != list(expected):
            raise MalformedInputError(
                f"{file}:1: format {fmt} expects the {what} header {';'.join(expected)!r}, got "
                f"{';'.join(names)[:200]!r}; {Path(file).name} looks like {describe_file(file)}")
        return list(expected)
    return check


def _views_convert(bought: _PairSet | None
                   ) -> Callable[[dict[str, pa.Array], Checks], dict[str, Any]]:
    def convert(cols: dict[str, pa.Array], checks: Checks) -> dict[str, Any]:
        session = int_column(cols["session_id"], "session_id", checks)
        item = int_column(cols["item_id"], "item_id", checks)
        timeframe = int_column(cols["timeframe"], "timeframe", checks)
        checks.fail(timeframe < 0, lambda i: f"negative timeframe {timeframe[i]}")
        day = _date_seconds(cols["eventdate"], "eventdate", checks)
        user = cols["user_id"]
        user = pc.if_else(pc.equal(user, "NA"), pa.scalar(None, pa.string()), user)
        return {LABEL: _labels(bought, session, item), "user_id": user, "item_id": item,
                SESSION: session, TIMESTAMP: day + np.floor_divide(timeframe, 1000)}
    return convert


def diginetica_views_format(paths: PathsLike, *, strict: bool = False,
                            report: ParseReport | None = None) -> tuple[RowFormat, list[Path]]:
    """The ``diginetica_views`` format for these files, and the views files it reads.

    The purchases file(s) (name containing ``purchases``, e.g. ``train-purchases.csv``) are
    read here, once; the returned format's ``convert`` labels each block of views from them.

    Args:
        paths: ``train-item-views.csv`` (or several views files) and optionally the purchases
            file; plain or gzip.
        strict: raise [`MalformedInputError`][] at the first malformed purchases row.
        report: receives the purchases files and their malformed rows (None: only logged).

    Returns:
        ``(format, views files)``.

    Raises:
        MalformedInputError: only purchases files given, a purchases file whose header is not
            DIGINETICA's, or one without a good row.
    """
    views, purchases = _split_files(paths, "purchases", "diginetica_views", "item views")
    bought = _read_purchases(
        purchases, fmt="diginetica_views", marker="purchases",
        fields=DIGINETICA_PURCHASES_HEADER, sep=";",
        header=_header_check(DIGINETICA_PURCHASES_HEADER, "diginetica_views",
                             "train-purchases.csv"),
        what="the header " + ";".join(DIGINETICA_PURCHASES_HEADER) + ", then 6 "
             "semicolon-separated fields per line",
        session_field="sessionId", item_field="itemId", strict=strict, report=report)
    fmt = RowFormat("diginetica_views", DIGINETICA_VIEWS_HEADER, ";", _views_convert(bought),
                    categorical=("user_id", "item_id"), user_side=("user_id",),
                    has_session=True, has_timestamp=True, order_by=(SESSION, TIMESTAMP),
                    history_item="item_id",
                    header=_header_check(DIGINETICA_VIEWS_HEADER, "diginetica_views",
                                         "train-item-views.csv"))
    return fmt, views


def parse_diginetica_views(paths: PathsLike, *, strict: bool = False,
                           max_rows: int | None = None, history_length: int = 0,
                           block_size: int = BLOCK_SIZE) -> RawTable:
    """Parse DIGINETICA ``train-item-views.csv``, labelled by ``train-purchases.csv``.

    The arguments are [`parse_session_clicks`][]'s, with views for clicks: ``paths`` holds the
    views file(s) and optionally the purchases file (any name containing ``purchases``).

    Returns:
        ``label`` (1.0 when the session bought the item), categorical ``user_id`` (string
        tokens, missing for ``NA``; user-side) and ``item_id`` (int64 tokens), ``session``,
        ``timestamp`` (unix seconds of eventdate + timeframe // 1000); stably sorted by
        (session, timestamp).
    """
    return _parse_log(diginetica_views_format, paths, strict=strict, max_rows=max_rows,
                      history_length=history_length, block_size=block_size)


def _parse_log(build: Callable[..., tuple[RowFormat, list[Path]]], paths: PathsLike, *,
               strict: bool, max_rows: int | None, history_length: int, block_size: int
               ) -> RawTable:
    """Parse a session log in memory: its format for these files (the purchases read once),
    then [`parse_rows`][] over the sample files; the purchases' rows join the report."""
    side = ParseReport()
    fmt, files = build(paths, strict=strict, report=side)
    table = parse_rows(fmt, files, strict=strict, max_rows=max_rows,
                       history_length=history_length, block_size=block_size)
    table.report = table.report.merge(side)
    return table
