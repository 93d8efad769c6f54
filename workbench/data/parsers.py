"""Parsers: raw dataset files -> :class:`~workbench.data.schema.RawTable`.

Every parser has the signature ``parse_xxx(paths, *, strict=False, max_rows=None, ...)`` and
returns a :class:`RawTable` whose categorical columns still hold *raw tokens* (the encode step maps
them to ids later). Files may be plain or gzip-compressed (detected from the gzip magic bytes, so
the ``.gz`` suffix is optional). Reading is vectorised: :mod:`pyarrow.csv` streams each file in
blocks with every column as a string, and columns are validated and converted with Arrow compute
and numpy kernels; Python only loops over malformed rows.

Malformed rows
    A row is malformed when it has the wrong number of fields, an empty or non-integer value in an
    integer column, a label outside the format's label set, an unparsable timestamp or a blank
    line. By default such rows are dropped and counted in ``report.malformed`` with up to 10
    examples ``"<file>:<line>: <reason>"``; with ``strict=True`` the first one (in file order)
    raises :class:`MalformedInputError` with the same ``"<file>:<line>: <reason>"`` message.
    ``<file>`` is the path as given; ``<line>`` is the 1-based physical line number in the
    (decompressed) file, counting header lines, so ``sed -n <line>p`` shows the row.
    Malformed rows of the MovieLens side files (users, items) are reported the same way (they do
    not drop rating rows; ratings of a user or item without a valid side row get missing
    features). ``max_rows`` stops after that many good rows; rows after the last kept one are
    neither read further nor counted.

Formats and label rules
    ``criteo_tsv`` (Kaggle ``train.txt``, 1TB ``day_N``)
        No header; 40 tab-separated fields ``label, I1..I13, C1..C26``. ``label`` must be ``0`` or
        ``1``. ``I1..I13`` are integers (negative values kept; empty -> NaN) -> dense float64
        columns ``I1..I13``. ``C1..C26`` are 8-hex-digit hashes kept as their string token
        (empty -> missing) -> categorical ``C1..C26``. No session or timestamp (rows are
        chronological).
    ``avazu_csv`` (Kaggle ``train``)
        CSV with the header ``id,click,hour,C1,banner_pos,...,C21``. ``click`` in {0, 1} is the
        label; ``id`` is dropped; ``hour`` (``YYMMDDHH``, UTC) becomes ``timestamp`` (unix seconds)
        and the categorical tokens ``hour_of_day`` (``"00".."23"``) and ``weekday`` (``"0"`` =
        Monday .. ``"6"``); the raw ``hour`` is not a feature. The other 21 columns are
        categorical string tokens. No dense features.
    ``movielens_100k`` / ``movielens_1m`` / ``movielens_20m`` / ``movielens_csv`` (the directory
    holding the files)
        100k: ``u.data`` (tab: user, item, rating 1..5, ts), ``u.user`` (``id|age|gender|
        occupation|zip``), ``u.item`` (latin-1, ``|``: id, title, release date, video release
        date, url, 19 genre flags). 1M: ``ratings.dat``, ``users.dat``
        (``id::gender::age::occupation::zip``), ``movies.dat`` (latin-1, ``id::title::A|B``), all
        ``::``-separated. 20M: ``ratings.csv`` (header ``userId,movieId,rating,timestamp``,
        half-star ratings 0.5..5.0) and ``movies.csv`` (header, quoted titles); no demographics.
        ``movielens_csv`` is the same parser for the newer releases in that CSV layout: ml-25m,
        ml-32m, ml-latest and ml-latest-small (``ratings.csv`` + ``movies.csv``; their
        ``tags.csv`` and ``links.csv`` are not read).
        A timestamp before 1995 (when MovieLens ratings begin) is malformed: it is what a line
        cut short in its last field looks like. Given files with other names (``dataset.files``)
        are taken in the order ratings, users, items. Label = 1.0 if rating >= 4 else 0.0.
        Categorical: ``user_id``, ``item_id`` (int64 tokens), ``age``, ``gender``,
        ``occupation``, ``zip`` (string tokens, 100k/1M only), ``genre`` (first listed genre;
        ``unknown``/``(no genres listed)`` -> missing) and ``year`` (release year as a string
        token, from the release date (100k) or the ``(YYYY)`` suffix of the
        title; missing when absent). ``session`` = user id (int64), ``timestamp`` = rating time;
        rows sorted by (user, timestamp, item). ``user_side`` = user id + demographics.
    ``taobao_user_behavior`` (Tianchi ``UserBehavior.csv``)
        No header: ``user_id,item_id,category_id,behavior_type,timestamp``; behavior in
        {pv, buy, cart, fav} (anything else is malformed). Label = 1.0 for buy, cart and fav (an
        engagement beyond a page view), 0.0 for pv. Categorical int64 tokens ``user_id``,
        ``item_id``, ``category_id``; ``session`` = user id; rows stably sorted by
        (user, timestamp). ``user_side`` = ``[user_id]``.
    ``session_clicks`` (YOOCHOOSE ``yoochoose-clicks.dat``; :mod:`workbench.data.session_logs`)
        No header: ``session_id,timestamp,item_id,category``, timestamp ISO-8601 UTC
        (``2014-04-07T10:51:09.277Z``). Label = 1.0 if the session bought the item according to
        the optional buys file (``yoochoose-buys.dat``: given as one more file whose name
        contains ``buys``), else 0.0; without it every label is 0.0 (a warning says the dataset
        only serves key-based experiments). Categorical ``item_id`` (int64 tokens),
        ``category`` (string tokens); ``session`` = session id; ``timestamp`` = unix seconds;
        rows stably sorted by (session, timestamp).
    ``diginetica_views`` (DIGINETICA ``train-item-views.csv``; :mod:`workbench.data.session_logs`)
        Header ``session_id;user_id;item_id;timeframe;eventdate`` (``;``-separated; user ``NA`` =
        anonymous). Label = 1.0 if the session bought the item according to the optional
        ``train-purchases.csv`` (one more file whose name contains ``purchases``), else 0.0, as
        above. Categorical ``user_id`` (string tokens, ``NA`` -> missing) and ``item_id``;
        ``session`` = session id; ``timestamp`` = unix seconds of ``eventdate`` (UTC) +
        ``timeframe // 1000``; rows stably sorted by (session, timestamp). ``user_side`` =
        ``[user_id]``.

History sequences (MovieLens, Taobao, session logs)
    With ``history_length=L > 0`` a list column ``hist_item_id`` holds, for each row, the item
    tokens of the same user's (session's) previous up to ``L`` rows in the sorted order (most
    recent last; empty for its first row), and ``RawTable.sequences == {"hist_item_id":
    "item_id"}``. The column has the pandas ``ArrowDtype`` ``list<int64>`` (``large_list`` past
    2**31 elements).
"""

from __future__ import annotations

import codecs
import contextlib
import io
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from workbench.data.schema import (
    LABEL,
    SESSION,
    TIMESTAMP,
    MalformedInputError,
    ParseReport,
    RawTable,
)

__all__ = [
    "PARSERS",
    "parse",
    "ROW_FORMATS",
    "RowFormat",
    "SESSION_LOG_FORMATS",
    "row_format_for",
    "check_report",
    "parse_avazu_csv",
    "parse_criteo_csv",
    "parse_criteo_tsv",
    "parse_movielens_100k",
    "parse_movielens_1m",
    "parse_movielens_20m",
    "parse_taobao_user_behavior",
]

PathsLike = Sequence[Path | str] | Path | str

_BLOCK_SIZE = 4 << 20  # bytes per parsed block (larger blocks parse slower here)
_INT_PATTERN = r"^-?[0-9]{1,18}$"
_NUMBER = r"-?[0-9]+(\.[0-9]+)?"  # a field that is a plain number (not a header name)
_ISO_UTC = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}(\.[0-9]+)?Z"  # YOOCHOOSE's timestamps
_MAX_EXAMPLES = ParseReport.MAX_EXAMPLES

CRITEO_DENSE = [f"I{i}" for i in range(1, 14)]
CRITEO_CATEGORICAL = [f"C{i}" for i in range(1, 27)]
CRITEO_FIELDS = [LABEL, *CRITEO_DENSE, *CRITEO_CATEGORICAL]

AVAZU_HEADER = [
    "id", "click", "hour", "C1", "banner_pos", "site_id", "site_domain", "site_category",
    "app_id", "app_domain", "app_category", "device_id", "device_ip", "device_model",
    "device_type", "device_conn_type", "C14", "C15", "C16", "C17", "C18", "C19", "C20", "C21",
]
AVAZU_CATEGORICAL = [*AVAZU_HEADER[3:], "hour_of_day", "weekday"]

TAOBAO_FIELDS = ["user_id", "item_id", "category_id", "behavior_type", TIMESTAMP]
TAOBAO_POSITIVE = ("buy", "cart", "fav")
TAOBAO_BEHAVIORS = ("pv", *TAOBAO_POSITIVE)

ML100K_GENRES = [
    "unknown", "Action", "Adventure", "Animation", "Children's", "Comedy", "Crime",
    "Documentary", "Drama", "Fantasy", "Film-Noir", "Horror", "Musical", "Mystery", "Romance",
    "Sci-Fi", "Thriller", "War", "Western",
]
_NO_GENRE = {"unknown", "(no genres listed)"}
HIST_ITEM = "hist_item_id"
#: 1995-01-01 UTC: MovieLens ratings begin in 1995; an earlier timestamp is a damaged line.
MOVIELENS_FIRST_TIMESTAMP = 788_918_400


# --------------------------------------------------------------------------- malformed bookkeeping


class _Checks:
    """Vectorised validity checks over one batch that remember why each bad row failed.

    Attributes:
        bad: boolean mask of the rows that failed any check so far.
    """

    def __init__(self, n: int) -> None:
        self.bad = np.zeros(n, dtype=bool)
        self._failures: list[tuple[np.ndarray, Callable[[int], str]]] = []

    def fail(self, mask: Any, reason: str | Callable[[int], str]) -> None:
        """Mark the rows of ``mask`` bad; ``reason`` is a text or a function of the row index."""
        mask = _np_bool(mask)
        if mask.any():
            fn = reason if callable(reason) else (lambda _i, r=reason: r)
            self._failures.append((mask, fn))
            self.bad |= mask

    def reason(self, i: int) -> str:
        """The reason of the first check that row ``i`` failed."""
        for mask, fn in self._failures:
            if mask[i]:
                return fn(i)
        return "malformed row"


class _MalformedLog:
    """Malformed-row accounting for one file: line numbers, counts, examples, strict mode.

    The pyarrow ``invalid_row_handler`` feeds wrong-field-count rows (with their physical line
    numbers) through :meth:`on_invalid_row`; value errors found by :class:`_Checks` come through
    :meth:`add_batch_errors`. Good rows of each batch get their line numbers from
    :meth:`assign_lines` (the physical lines not skipped by the handler).
    """

    def __init__(self, file: str, report: ParseReport, strict: bool, first_line: int,
                 expected_fields: int) -> None:
        self.file = file
        self.report = report
        self.strict = strict
        self.next_line = first_line
        self.expected = expected_fields
        self._skipped: list[tuple[int, str]] = []  # from the handler, in line order
        self._pos = 0  # first entry of _skipped not yet accounted
        self.count = 0
        self.examples: list[tuple[int, str]] = []  # the smallest lines seen, sorted

    def on_invalid_row(self, row: Any) -> str:
        """pyarrow ``invalid_row_handler``: remember the row and skip it."""
        if row.number is None:  # only with multi-threaded reading, which we never use
            raise RuntimeError("pyarrow did not report a row number")
        self._skipped.append(
            (int(row.number), f"expected {self.expected} fields, got {row.actual_columns}"))
        return "skip"

    def assign_lines(self, n: int) -> np.ndarray:
        """Line numbers of the next ``n`` rows pyarrow returned (skipped lines excluded)."""
        skipped = np.fromiter((ln for ln, _ in self._skipped[self._pos:]), dtype=np.int64)
        k = np.arange(n, dtype=np.int64)
        # Number of good lines (from next_line on) before each skipped line.
        good_before = skipped - self.next_line - np.arange(len(skipped), dtype=np.int64)
        return self.next_line + k + np.searchsorted(good_before, k, side="right")

    def add_batch_errors(self, lines: np.ndarray, checks: _Checks, rows: np.ndarray) -> None:
        """Account the value errors ``rows`` (batch indices, ascending) at ``lines[rows]``."""
        if len(rows) == 0:
            return
        self.count += len(rows)
        first = [(int(lines[i]), checks.reason(int(i))) for i in rows[:_MAX_EXAMPLES]]
        self.examples = sorted(self.examples + first)[:_MAX_EXAMPLES]

    def settle(self, upto: int | None) -> None:
        """Account the skipped (field-count) rows up to line ``upto`` (all when None).

        In strict mode, raise for the earliest error known so far. Called after each batch, when
        every error at or before the batch's last line is known.
        """
        end = len(self._skipped)
        if upto is not None:
            end = self._pos
            while end < len(self._skipped) and self._skipped[end][0] <= upto:
                end += 1
        new = self._skipped[self._pos:end]
        self._pos = end
        if new:
            self.count += len(new)
            self.examples = sorted(self.examples + new[:_MAX_EXAMPLES])[:_MAX_EXAMPLES]
        if upto is not None:
            self.next_line = upto + 1
        if self.strict and self.examples:
            line, reason = self.examples[0]
            raise MalformedInputError(f"{self.file}:{line}: {reason}")

    def finish(self) -> None:
        """Copy the counts and examples into the report."""
        for line, reason in self.examples:
            self.report.add_malformed(f"{self.file}:{line}", reason)
        self.report.malformed += self.count - len(self.examples)


# ------------------------------------------------------------------------------ column converters


def _np_bool(mask: Any) -> np.ndarray:
    """A numpy bool array from a numpy/Arrow mask (Arrow nulls -> False)."""
    if isinstance(mask, (pa.Array, pa.ChunkedArray)):
        return mask.fill_null(False).to_numpy(zero_copy_only=False)
    return np.asarray(mask, dtype=bool)


def _value(arr: pa.Array, i: int) -> Any:
    return arr[i].as_py()


def _all_plain_digits(arr: pa.Array) -> bool:
    """Whether every non-null value is 1..18 ASCII digits (cheaper than the regex)."""
    if arr.null_count == len(arr):
        return True
    return (pc.all(pc.ascii_is_decimal(arr)).as_py() is True
            and pc.max(pc.binary_length(arr)).as_py() <= 18)


def _int_column(arr: pa.Array, name: str, checks: _Checks, *, required: bool = True
                ) -> np.ndarray:
    """Validate and convert a string column of integers.

    Args:
        arr: the raw strings (null = empty field).
        name: column name for messages.
        checks: where bad rows are recorded.
        required: an empty value is malformed (result int64, 0 at bad rows); otherwise it is
            missing (result float64 with NaN).

    Returns:
        The converted numpy array (values at bad rows are placeholders).
    """
    if required:
        checks.fail(pc.is_null(arr), f"missing value in column {name}")
    if _all_plain_digits(arr):  # fast path: unsigned decimals that fit in int64
        ints = pc.cast(arr, pa.int64())
    else:
        ok = pc.match_substring_regex(arr, _INT_PATTERN)
        bad = _np_bool(pc.invert(ok))
        checks.fail(bad, lambda i: f"non-integer {_value(arr, i)!r} in integer column {name}")
        ints = pc.cast(pc.if_else(ok, arr, pa.scalar(None, pa.string())) if bad.any() else arr,
                       pa.int64())
    if required:
        return ints.fill_null(0).to_numpy(zero_copy_only=False)
    return pc.cast(ints, pa.float64()).to_numpy(zero_copy_only=False)


def _binary_label(arr: pa.Array, name: str, checks: _Checks) -> np.ndarray:
    """A ``0``/``1`` string column -> float32 labels; anything else is malformed."""
    checks.fail(pc.is_null(arr), f"missing label ({name})")
    bad = pc.and_(pc.invert(pc.is_in(arr, value_set=pa.array(["0", "1"]))), pc.is_valid(arr))
    checks.fail(bad, lambda i: f"label {_value(arr, i)!r} not in {{0,1}} ({name})")
    return _np_bool(pc.equal(arr, "1")).astype(np.float32)


def _rating_column(arr: pa.Array, checks: _Checks, *, half_stars: bool) -> np.ndarray:
    """Validate MovieLens ratings (1..5 integers, or 0.5..5.0 in half steps) -> float64."""
    pattern = r"^[0-9](\.[05]0*)?$" if half_stars else r"^[1-5]$"
    ok = pc.match_substring_regex(arr, pattern)
    values = pc.cast(pc.if_else(ok, arr, pa.scalar(None, pa.string())), pa.float64())
    in_range = pc.and_(pc.greater_equal(values, 0.5 if half_stars else 1.0),
                       pc.less_equal(values, 5.0))
    bad = pc.and_(pc.invert(pc.fill_null(in_range, False)), pc.is_valid(arr))
    allowed = "0.5..5.0 in steps of 0.5" if half_stars else "1..5"
    checks.fail(pc.is_null(arr), "missing rating")
    checks.fail(bad, lambda i: f"rating {_value(arr, i)!r} not in {allowed}")
    return values.fill_null(0.0).to_numpy(zero_copy_only=False)


# ----------------------------------------------------------------------------- the shared reader


def _as_paths(paths: PathsLike) -> list[Path]:
    if isinstance(paths, (str, Path)):
        return [Path(paths)]
    return [Path(p) for p in paths]


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def _undecodable(path: Path, compression: str | None, encoding: str) -> bool:
    """Whether the file holds bytes that are not valid ``encoding`` text (checked in 4 MiB
    blocks; only run after pyarrow failed on the file)."""
    decoder = codecs.getincrementaldecoder(encoding)()
    with pa.input_stream(str(path), compression=compression) as stream:
        try:
            while block := stream.read(4 << 20):
                decoder.decode(block)
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            return True
    return False


@contextlib.contextmanager
def _quiet_undecodable_rows() -> Iterator[None]:
    """Silence pyarrow's "Exception ignored" report of an undecodable malformed row (it fails the
    read, which :func:`_read_delimited` then repeats through :class:`_RepairedText`)."""
    default = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if not isinstance(unraisable.exc_value, UnicodeDecodeError):
            default(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = default


class _RepairedText(io.RawIOBase):
    """A file's bytes as UTF-8 with undecodable bytes replaced by U+FFFD (a readable stream)."""

    def __init__(self, path: Path, compression: str | None, encoding: str) -> None:
        self._raw = pa.input_stream(str(path), compression=compression)
        self._decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
        self._buffer = b""
        self._eof = False

    def readable(self) -> bool:
        return True

    def readinto(self, target: Any) -> int:
        while not self._buffer and not self._eof:
            block = self._raw.read(1 << 20)
            self._eof = not block
            self._buffer = self._decoder.decode(block, final=self._eof).encode("utf-8")
        n = min(len(target), len(self._buffer))
        target[:n] = self._buffer[:n]
        self._buffer = self._buffer[n:]
        return n

    def close(self) -> None:
        self._raw.close()
        super().close()


def _first_line(path: Path, encoding: str) -> str:
    stream = pa.input_stream(str(path), compression="gzip" if _is_gzip(path) else None)
    with stream:
        head = b""
        while b"\n" not in head:
            chunk = stream.read(1 << 16)
            if not chunk:
                break
            head += chunk
    return head.split(b"\n", 1)[0].decode(encoding).rstrip("\r")


def _iter_delimited(
    paths: PathsLike,
    *,
    fields: Sequence[str],
    sep: str,
    convert: Callable[[dict[str, pa.Array], _Checks], dict[str, Any]],
    report: ParseReport,
    strict: bool = False,
    max_rows: int | None = None,
    header: Sequence[str] | Callable[[list[str], str], Sequence[str]] | None = None,
    encoding: str = "utf8",
    quoted: bool = False,
    block_size: int = _BLOCK_SIZE,
) -> dict[str, Any]:
    """Read delimited files batch by batch as string columns, validate them, yield good rows.

    Memory is one parsed block at a time: the streaming preprocess
    (:mod:`workbench.data.streaming`) consumes the batches as they come; :func:`_read_delimited`
    gathers them.

    Args:
        paths: the files, read in order (plain or gzip).
        fields: the field names of one row, in file order.
        sep: the field separator; a multi-character one (MovieLens ``::``) is split with Arrow.
        convert: ``convert(columns, checks)`` turns the raw string columns of one batch into the
            output columns (numpy arrays or Arrow arrays of the batch length), recording bad rows
            in ``checks``.
        report: receives files, malformed counts and examples (``rows`` is left to the caller).
        strict: raise :class:`MalformedInputError` at the first malformed row.
        max_rows: stop after this many good rows (over all files).
        header: when given, the first line of each file must be exactly these names; or a
            function of (the header's names, the file) returning the file's fields (it raises
            :class:`MalformedInputError` for a header it does not accept).
        encoding: the files' text encoding.
        quoted: honour ``"`` quoting (only the MovieLens 20M ``movies.csv`` needs it).
        block_size: bytes per parsed block (tests use small blocks).

    Yields:
        Per parsed block: output column name -> numpy array or Arrow array, over its good rows
        (blocks without a good row are skipped). A file's malformed rows are in ``report`` once
        its last block has been yielded.
    """
    multi = len(sep) > 1
    kept = 0
    for path in _as_paths(paths):
        if max_rows is not None and kept >= max_rows:
            break
        file = str(path)
        report.files.append(file)
        skip = 0
        if header is not None:
            got = [h.strip('"') for h in _first_line(path, encoding).split(sep)]
            if callable(header):
                fields = header(got, file)
            elif got != list(header):
                raise MalformedInputError(
                    f"{file}:1: expected the header {sep.join(header)!r}, got {sep.join(got)!r}")
            skip = 1
        columns = ["_line"] if multi else list(fields)
        read_options = pacsv.ReadOptions(
            column_names=columns, skip_rows=skip, use_threads=False, block_size=block_size,
            encoding=encoding)
        parse_options = dict(delimiter="\x1f" if multi else sep,
                             quote_char='"' if quoted else False, ignore_empty_lines=False)
        convert_options = pacsv.ConvertOptions(
            column_types={c: pa.string() for c in columns}, strings_can_be_null=True,
            null_values=[""], quoted_strings_can_be_null=False)

        def read_file(stream: Any, log: _MalformedLog, handed_on: int = 0
                      ) -> Iterator[dict[str, Any]]:
            """One pass over the file: its good rows, block by block (counted in ``log``),
            leaving out the first ``handed_on`` (already yielded by a pass that failed)."""
            nonlocal kept
            good_rows, done = 0, False
            try:
                reader = pacsv.open_csv(
                    stream, read_options=read_options, convert_options=convert_options,
                    parse_options=pacsv.ParseOptions(**parse_options,
                                                     invalid_row_handler=log.on_invalid_row))
            except pa.ArrowInvalid as exc:
                if "Empty CSV file" not in str(exc):
                    raise
                reader = []  # no data rows (header-only or empty file)
            for batch in reader:
                n = batch.num_rows
                if n == 0:
                    continue
                lines = log.assign_lines(n)
                checks = _Checks(n)
                raw = {c: batch.column(i) for i, c in enumerate(columns)}
                if multi:
                    raw = _split_multi(raw["_line"], fields, sep, checks)
                else:
                    blank = pc.is_null(raw[columns[0]])
                    for c in columns[1:]:
                        blank = pc.and_(blank, pc.is_null(raw[c]))
                    checks.fail(blank, "empty line")
                out = convert(raw, checks)
                good = ~checks.bad
                end = n
                if max_rows is not None:
                    good_idx = np.flatnonzero(good)
                    need = max_rows - kept  # kept counts this file's rows so far too
                    if len(good_idx) >= need:
                        end = int(good_idx[need - 1]) + 1 if need > 0 else 0
                        good[end:] = False
                        done = True
                log.add_batch_errors(lines, checks, np.flatnonzero(checks.bad[:end]))
                log.settle(int(lines[end - 1]) if end > 0 else int(lines[0]) - 1)
                n_good = int(good.sum())
                if good_rows < handed_on:
                    shown = good.copy()
                    shown[np.flatnonzero(good)[: handed_on - good_rows]] = False
                else:
                    shown = good
                if shown.any():
                    mask = pa.array(shown)
                    yield {k: v[shown] if isinstance(v, np.ndarray) else v.filter(mask)
                           for k, v in out.items()}
                good_rows += n_good
                kept += n_good
                if done:
                    break
            if not done:
                log.settle(None)

        compression = "gzip" if _is_gzip(path) else None
        log = _MalformedLog(file, report, strict, skip + 1, len(fields))
        kept_before = kept
        try:
            with pa.input_stream(str(path), compression=compression) as stream, \
                    _quiet_undecodable_rows():
                yield from read_file(stream, log)
        except pa.ArrowInvalid as exc:
            if not _undecodable(path, compression, encoding):
                raise MalformedInputError(
                    f"{file}: cannot read the file: {exc}") from exc
            # Bytes that are not valid text (binary garbage): read the file again with them
            # replaced, so the rows holding them are counted as malformed at their own lines.
            # The rows before them decode the same, so those already yielded are left out.
            handed_on, kept = kept - kept_before, kept_before
            log = _MalformedLog(file, report, strict, skip + 1, len(fields))
            with _RepairedText(path, compression, encoding) as stream:
                yield from read_file(stream, log, handed_on)
        log.finish()


def _read_delimited(paths: PathsLike, *, fields: Sequence[str], sep: str,
                    convert: Callable[[dict[str, pa.Array], _Checks], dict[str, Any]],
                    **kwargs: Any) -> dict[str, Any]:
    """:func:`_iter_delimited`'s good rows gathered into whole columns.

    Returns:
        Output column name -> numpy array or Arrow ChunkedArray, over the good rows.
    """
    empty = {f: pa.array([], pa.string()) for f in fields}
    chunks: dict[str, list[Any]] = {k: [v] for k, v in convert(empty, _Checks(0)).items()}
    for batch in _iter_delimited(paths, fields=fields, sep=sep, convert=convert, **kwargs):
        for k, v in batch.items():
            chunks[k].append(v)
    result: dict[str, Any] = {}
    for k, parts in chunks.items():
        if isinstance(parts[0], np.ndarray):
            result[k] = np.concatenate(parts)
        else:
            result[k] = pa.chunked_array(parts, type=parts[0].type)
    return result


def _split_multi(lines: pa.Array, fields: Sequence[str], sep: str, checks: _Checks
                 ) -> dict[str, pa.Array]:
    """Split whole lines on a multi-character separator into the named string columns."""
    checks.fail(pc.is_null(lines), "empty line")
    parts = pc.split_pattern(lines, sep)
    count = pc.list_value_length(parts)
    wrong = pc.not_equal(count, len(fields))
    checks.fail(wrong, lambda i: f"expected {len(fields)} {sep!r}-separated fields, "
                                 f"got {count[i].as_py()}")
    parts = pc.if_else(pc.fill_null(wrong, True), pa.scalar(None, parts.type), parts)
    out = {}
    for j, f in enumerate(fields):
        col = pc.list_element(parts, j)
        out[f] = pc.if_else(pc.equal(col, ""), pa.scalar(None, pa.string()), col)
    return out


def _to_series(values: Any, index: pd.Index | None = None) -> pd.Series:
    """numpy or Arrow column -> pandas Series (Arrow strings become the pandas ``str`` dtype)."""
    if isinstance(values, np.ndarray):
        return pd.Series(values, index=index)
    s = values.to_pandas()
    if index is not None:
        s.index = index
    return s


# ---------------------------------------------------------------------------- history sequences


def _history(session: np.ndarray, items: np.ndarray, length: int) -> pd.Series:
    """Each row's previous up to ``length`` items of the same session (most recent last).

    Args:
        session: session keys, grouped (each session's rows consecutive).
        items: item tokens (int64), same order.
        length: the history length L > 0.

    Returns:
        A Series with the Arrow list dtype (empty list for a session's first row).
    """
    n = len(session)
    idx = np.arange(n, dtype=np.int64)
    new_group = np.ones(n, dtype=bool)
    if n > 1:
        new_group[1:] = session[1:] != session[:-1]
    group_start = np.maximum.accumulate(np.where(new_group, idx, 0))
    lengths = np.minimum(idx - group_start, length)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    # Element j of row i's list is items[i - lengths[i] + j]; offsets[i] + j is its flat position.
    take = np.repeat(idx - lengths - offsets[:-1], lengths) + np.arange(total, dtype=np.int64)
    values = pa.array(items[take], type=pa.int64())
    if total < 2**31 - 1:
        lists = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values)
    else:
        lists = pa.LargeListArray.from_arrays(pa.array(offsets), values)
    return pd.Series(pd.arrays.ArrowExtensionArray(lists))


def _sort_order(*keys: np.ndarray) -> np.ndarray:
    """Stable sort permutation by ``keys`` (primary key first), like ``np.lexsort(keys[::-1])``.

    When the key ranges fit, the keys are packed into one int64 and sorted with numpy's stable
    sort, which is several times faster than ``lexsort`` on (nearly) grouped data.
    """
    if len(keys[0]) == 0:
        return np.arange(0, dtype=np.int64)
    lows = [int(k.min()) for k in keys]
    spans = [int(k.max()) - lo + 1 for k, lo in zip(keys, lows, strict=True)]
    if int(np.prod([float(x) for x in spans])) >= 2**62:
        return np.lexsort(keys[::-1])
    packed = np.zeros(len(keys[0]), dtype=np.int64)
    for k, lo, span in zip(keys, lows, spans, strict=True):
        packed *= span
        packed += k - lo
    return np.argsort(packed, kind="stable")


def _check_history_length(history_length: int) -> None:
    if history_length < 0:
        raise ValueError(f"history_length must be >= 0, got {history_length}")


# -------------------------------------------------------------------------------- row formats


@dataclass(frozen=True)
class RowFormat:
    """A format in which every line is one sample: parsed block by block, so it can stream.

    ``convert`` turns one block's raw string columns into the :class:`RawTable` columns, in
    schema order (label, dense, categorical, then session and timestamp when present). A few
    steps need the whole table and are applied after the blocks (in memory by
    :func:`parse_rows`, out of core by :mod:`workbench.data.streaming`): a stable sort by
    ``order_by``, and the history sequence of ``history_item`` within a session.

    Attributes:
        name: the config's ``dataset.format``.
        fields: the fields of one line, in file order.
        sep: the field separator.
        convert: block converter (see :func:`_iter_delimited`).
        dense: dense feature columns.
        categorical: categorical feature columns.
        user_side: categorical features constant within a session.
        has_session: ``convert`` yields a ``session`` column.
        has_timestamp: ``convert`` yields a ``timestamp`` column.
        order_by: columns of the stable whole-table sort (empty: file order).
        history_item: the feature whose previous values form ``hist_item_id`` (None: no history).
        header: the header line (names, or a function choosing the fields; None: no header).
        encoding: the files' text encoding.
    """

    name: str
    fields: tuple[str, ...]
    sep: str
    convert: Callable[[dict[str, pa.Array], _Checks], dict[str, Any]]
    dense: tuple[str, ...] = ()
    categorical: tuple[str, ...] = ()
    user_side: tuple[str, ...] = ()
    has_session: bool = False
    has_timestamp: bool = False
    order_by: tuple[str, ...] = ()
    history_item: str | None = None
    header: Sequence[str] | Callable[[list[str], str], Sequence[str]] | None = None
    encoding: str = "utf8"

    @property
    def columns(self) -> list[str]:
        """The :class:`RawTable` columns ``convert`` yields, in schema order."""
        return [LABEL, *self.dense, *self.categorical, *([SESSION] if self.has_session else []),
                *([TIMESTAMP] if self.has_timestamp else [])]

    def batches(self, paths: PathsLike, report: ParseReport, *, strict: bool = False,
                max_rows: int | None = None, block_size: int = _BLOCK_SIZE
                ) -> Iterator[dict[str, Any]]:
        """The good rows of ``paths``, block by block (see :func:`_iter_delimited`)."""
        return _iter_delimited(paths, fields=self.fields, sep=self.sep, convert=self.convert,
                               report=report, strict=strict, max_rows=max_rows,
                               header=self.header, encoding=self.encoding,
                               block_size=block_size)


def parse_rows(fmt: RowFormat, paths: PathsLike, *, strict: bool = False,
               max_rows: int | None = None, history_length: int = 0,
               block_size: int = _BLOCK_SIZE) -> RawTable:
    """Parse a :class:`RowFormat` in memory: every block, then the sort and the history.

    Args:
        fmt: the format.
        paths: one file or several (read in order; plain or gzip).
        strict: raise :class:`MalformedInputError` at the first malformed row.
        max_rows: keep at most this many rows (the first of the files, before sorting).
        history_length: add ``hist_item_id`` with up to this many previous items when > 0
            (formats with a ``history_item`` only).
        block_size: bytes per parsed block.
    """
    _check_history_length(history_length)
    report = ParseReport()
    cols = _read_delimited(paths, fields=fmt.fields, sep=fmt.sep, convert=fmt.convert,
                           report=report, strict=strict, max_rows=max_rows, header=fmt.header,
                           encoding=fmt.encoding, block_size=block_size)
    if fmt.order_by:
        order = _sort_order(*(cols[k] for k in fmt.order_by))
        cols = {k: v[order] if isinstance(v, np.ndarray) else v.take(pa.array(order))
                for k, v in cols.items()}
    frame = pd.DataFrame({k: _to_series(cols[k]) for k in fmt.columns})
    sequences: dict[str, str] = {}
    if history_length > 0 and fmt.history_item is not None:
        frame[HIST_ITEM] = _history(frame[SESSION].to_numpy(),
                                    frame[fmt.history_item].to_numpy(), history_length).array
        sequences = {HIST_ITEM: fmt.history_item}
    report.rows = len(frame)
    return RawTable(frame, dense=list(fmt.dense), categorical=list(fmt.categorical),
                    user_side=list(fmt.user_side), sequences=sequences,
                    has_session=fmt.has_session, has_timestamp=fmt.has_timestamp, report=report)


# ------------------------------------------------------------------------------------- Criteo


def _criteo_convert(cols: dict[str, pa.Array], checks: _Checks) -> dict[str, Any]:
    out: dict[str, Any] = {LABEL: _binary_label(cols[LABEL], LABEL, checks)}
    for name in CRITEO_DENSE:
        out[name] = _int_column(cols[name], name, checks, required=False)
    for name in CRITEO_CATEGORICAL:
        out[name] = cols[name]
    return out


def _criteo_csv_header(names: list[str], file: str) -> list[str]:
    """The fields of a Criteo CSV: its header is ``label,I1..I13,C1..C26``, optionally after an
    ``id`` column (any letter case)."""
    lowered = [n.strip().lower() for n in names]
    expected = [f.lower() for f in CRITEO_FIELDS]
    if lowered == expected:
        return list(CRITEO_FIELDS)
    if lowered == ["id", *expected]:
        return ["id", *CRITEO_FIELDS]
    raise MalformedInputError(
        f"{file}:1: expected the header [id,]label,I1,...,I13,C1,...,C26 (any case), got "
        f"{','.join(names)[:200]!r}")


CRITEO_TSV = RowFormat("criteo_tsv", tuple(CRITEO_FIELDS), "\t", _criteo_convert,
                       dense=tuple(CRITEO_DENSE), categorical=tuple(CRITEO_CATEGORICAL))
CRITEO_CSV = RowFormat("criteo_csv", tuple(CRITEO_FIELDS), ",", _criteo_convert,
                       dense=tuple(CRITEO_DENSE), categorical=tuple(CRITEO_CATEGORICAL),
                       header=_criteo_csv_header)


def parse_criteo_tsv(paths: PathsLike, *, strict: bool = False, max_rows: int | None = None,
                     block_size: int = _BLOCK_SIZE) -> RawTable:
    """Parse Criteo Kaggle ``train.txt`` / 1TB ``day_N`` files (40 tab-separated fields).

    Args:
        paths: one file or several (read in order; plain or gzip).
        strict: raise :class:`MalformedInputError` at the first malformed row.
        max_rows: keep at most this many rows.
        block_size: bytes per parsed block.

    Returns:
        ``label`` (float32), dense ``I1..I13`` (float64, NaN when empty, negatives kept),
        categorical ``C1..C26`` (8-hex-digit string tokens, missing when empty).
    """
    return parse_rows(CRITEO_TSV, paths, strict=strict, max_rows=max_rows, block_size=block_size)


def parse_criteo_csv(paths: PathsLike, *, strict: bool = False, max_rows: int | None = None,
                     block_size: int = _BLOCK_SIZE) -> RawTable:
    """Parse Criteo rows as CSV with a header (the form many libraries ship): the header is
    ``label,I1..I13,C1..C26``, or ``id,label,...`` with an id column that is dropped.

    Returns:
        As :func:`parse_criteo_tsv`.
    """
    return parse_rows(CRITEO_CSV, paths, strict=strict, max_rows=max_rows, block_size=block_size)


# -------------------------------------------------------------------------------------- Avazu


def _avazu_convert(cols: dict[str, pa.Array], checks: _Checks) -> dict[str, Any]:
    out: dict[str, Any] = {LABEL: _binary_label(cols["click"], "click", checks)}
    hour = cols["hour"]
    checks.fail(pc.is_null(hour), "missing hour")
    encoded = pc.dictionary_encode(hour)
    uniques = encoded.dictionary.to_pylist()
    parsed = pd.to_datetime(pd.Series(uniques, dtype=object), format="%y%m%d%H",
                            errors="coerce", utc=True)
    valid = np.array([bool(re.fullmatch(r"[0-9]{8}", u)) for u in uniques], dtype=bool)
    valid &= parsed.notna().to_numpy()
    codes = encoded.indices.fill_null(0).to_numpy(zero_copy_only=False)
    if len(uniques):
        checks.fail(pc.and_(pc.is_valid(hour), pa.array(~valid[codes])),
                    lambda i: f"bad hour {_value(hour, i)!r} (expected YYMMDDHH)")
        epoch = pd.Timestamp("1970-01-01", tz="UTC")
        seconds = ((parsed - epoch).dt.total_seconds().fillna(0).to_numpy(np.float64)
                   .astype(np.int64))
        hod = [f"{t.hour:02d}" if ok else None for t, ok in zip(parsed, valid, strict=True)]
        dow = [str(t.day_of_week) if ok else None for t, ok in zip(parsed, valid, strict=True)]
        index = pa.array(codes)
        out[TIMESTAMP] = seconds.astype(np.int64)[codes]
        out["hour_of_day"] = pa.array(hod, pa.string()).take(index)
        out["weekday"] = pa.array(dow, pa.string()).take(index)
    else:
        out[TIMESTAMP] = np.zeros(len(hour), dtype=np.int64)
        out["hour_of_day"] = pa.nulls(len(hour), pa.string())
        out["weekday"] = pa.nulls(len(hour), pa.string())
    for name in AVAZU_HEADER[3:]:
        out[name] = cols[name]
    return {k: out[k] for k in (LABEL, *AVAZU_CATEGORICAL, TIMESTAMP)}


AVAZU_CSV = RowFormat("avazu_csv", tuple(AVAZU_HEADER), ",", _avazu_convert,
                      categorical=tuple(AVAZU_CATEGORICAL), has_timestamp=True,
                      header=AVAZU_HEADER)


def parse_avazu_csv(paths: PathsLike, *, strict: bool = False, max_rows: int | None = None,
                    block_size: int = _BLOCK_SIZE) -> RawTable:
    """Parse Avazu ``train`` CSV files (header ``id,click,hour,...,C21``).

    Args:
        paths: one file or several (each with the header; plain or gzip).
        strict: raise :class:`MalformedInputError` at the first malformed row.
        max_rows: keep at most this many rows.
        block_size: bytes per parsed block.

    Returns:
        ``label`` = click (float32), ``timestamp`` (unix seconds of ``hour``, UTC), categorical
        string tokens: the 21 raw feature columns, ``hour_of_day`` and ``weekday``; no dense.
    """
    return parse_rows(AVAZU_CSV, paths, strict=strict, max_rows=max_rows, block_size=block_size)


# --------------------------------------------------------------------------------- MovieLens


def _resolve(paths: PathsLike, names: Sequence[str]) -> dict[str, Path]:
    """Find the named files in a directory (or among the given files); ``.gz`` also accepted."""
    given = _as_paths(paths)
    found: dict[str, Path] = {}
    for name in names:
        for p in given:
            if p.is_dir():
                for cand in (p / name, p / f"{name}.gz"):
                    if cand.exists():
                        found[name] = cand
                        break
            elif p.name in (name, f"{name}.gz"):
                found[name] = p
            if name in found:
                break
    missing = [n for n in names if n not in found]
    spare = [p for p in given if p.is_file() and p not in found.values()]
    if missing and len(spare) == len(missing):  # renamed files, given in the names' order
        found.update(zip(missing, spare))
    elif missing:
        raise FileNotFoundError(
            f"{missing[0]} not found in {', '.join(str(p) for p in given)} (give the files in "
            f"the order {', '.join(names)}; other names are taken in that order)")
    return {n: found[n] for n in names}


def _ratings_convert(*, half_stars: bool) -> Callable[[dict[str, pa.Array], _Checks],
                                                     dict[str, Any]]:
    def convert(cols: dict[str, pa.Array], checks: _Checks) -> dict[str, Any]:
        out = {
            "user_id": _int_column(cols["user_id"], "user_id", checks),
            "item_id": _int_column(cols["item_id"], "item_id", checks),
            "rating": _rating_column(cols["rating"], checks, half_stars=half_stars),
            TIMESTAMP: _int_column(cols[TIMESTAMP], TIMESTAMP, checks),
        }
        ts = out[TIMESTAMP]
        checks.fail(ts < MOVIELENS_FIRST_TIMESTAMP,
                    lambda i: f"timestamp {ts[i]} is before 1995, when MovieLens ratings begin "
                              "(a line cut short?)")
        return out
    return convert


def _users_convert(cols: dict[str, pa.Array], checks: _Checks) -> dict[str, Any]:
    out: dict[str, Any] = {"user_id": _int_column(cols["user_id"], "user_id", checks)}
    for name in ("age", "gender", "occupation", "zip"):
        out[name] = cols[name]
    return out


def _year_from_title(titles: pd.Series) -> pd.Series:
    return titles.str.extract(r"\((\d{4})[^)]*\)\s*$", expand=False)


def _first_genre(genres: pd.Series) -> pd.Series:
    first = genres.str.split("|", n=1, regex=False).str[0]
    return first.where(~first.isin(list(_NO_GENRE)))


def _movielens(ratings: dict[str, Any], users: pd.DataFrame | None, items: pd.DataFrame,
               report: ParseReport, history_length: int) -> RawTable:
    """Join, label, sort and (optionally) add histories to parsed MovieLens tables.

    Args:
        ratings: columns user_id, item_id, rating, timestamp (numpy).
        users: user_id + demographic string columns, or None (20M).
        items: item_id, genre, year.
        report: the report so far (``rows`` is set here).
        history_length: see the module docstring.
    """
    user = ratings["user_id"]
    item = ratings["item_id"]
    ts = ratings[TIMESTAMP]
    order = _sort_order(user, ts, item)
    user, item, ts = user[order], item[order], ts[order]
    frame = pd.DataFrame({
        LABEL: (ratings["rating"][order] >= 4.0).astype(np.float32),
        "user_id": user,
        "item_id": item,
    })
    user_feats: list[str] = []
    if users is not None:
        side = users.drop_duplicates("user_id").set_index("user_id")
        user_feats = [c for c in side.columns]
        joined = side.reindex(user)
        for c in user_feats:
            frame[c] = joined[c].array
    side_items = items.drop_duplicates("item_id").set_index("item_id").reindex(item)
    frame["genre"] = side_items["genre"].array
    frame["year"] = side_items["year"].array
    frame[SESSION] = user
    frame[TIMESTAMP] = ts
    sequences: dict[str, str] = {}
    if history_length > 0:
        frame[HIST_ITEM] = _history(user, item, history_length).array
        sequences = {HIST_ITEM: "item_id"}
    report.rows = len(frame)
    return RawTable(frame, dense=[], categorical=["user_id", "item_id", *user_feats, "genre",
                                                  "year"],
                    user_side=["user_id", *user_feats], sequences=sequences, has_session=True,
                    has_timestamp=True, report=report)


def parse_movielens_100k(paths: PathsLike, *, strict: bool = False, max_rows: int | None = None,
                         history_length: int = 0) -> RawTable:
    """Parse MovieLens 100K (``u.data``, ``u.user``, ``u.item``).

    Args:
        paths: the directory holding the files (or the three files).
        strict: raise :class:`MalformedInputError` at the first malformed row.
        max_rows: keep at most this many ratings (the first of ``u.data``, before sorting).
        history_length: add ``hist_item_id`` with up to this many previous items when > 0.

    Returns:
        See the module docstring (label = rating >= 4; sorted by user, timestamp, item).
    """
    _check_history_length(history_length)
    files = _resolve(paths, ["u.data", "u.user", "u.item"])
    report = ParseReport()
    ratings = _read_delimited(files["u.data"], fields=["user_id", "item_id", "rating", TIMESTAMP],
                              sep="\t", convert=_ratings_convert(half_stars=False),
                              report=report, strict=strict, max_rows=max_rows)
    users = _read_delimited(files["u.user"], fields=["user_id", "age", "gender", "occupation",
                                                     "zip"],
                            sep="|", convert=_users_convert, report=report, strict=strict,
                            encoding="latin-1")
    item_fields = ["item_id", "title", "release", "video_release", "url", *ML100K_GENRES]

    def items_convert(cols: dict[str, pa.Array], checks: _Checks) -> dict[str, Any]:
        out: dict[str, Any] = {"item_id": _int_column(cols["item_id"], "item_id", checks),
                               "release": cols["release"]}
        flags = np.stack([_int_column(cols[g], f"genre flag {g}", checks)
                          for g in ML100K_GENRES], axis=1) if len(cols["item_id"]) else \
            np.zeros((0, len(ML100K_GENRES)), dtype=np.int64)
        first = np.where((flags[:, 1:] != 0).any(axis=1), (flags[:, 1:] != 0).argmax(axis=1) + 1,
                         0)
        names = pa.array([None, *ML100K_GENRES[1:]], pa.string())
        out["genre"] = names.take(pa.array(first))
        return out

    items = _read_delimited(files["u.item"], fields=item_fields, sep="|", convert=items_convert,
                            report=report, strict=strict, encoding="latin-1")
    item_frame = pd.DataFrame({
        "item_id": items["item_id"],
        "genre": _to_series(items["genre"]),
        "year": _to_series(items["release"]).str.extract(r"(\d{4})\s*$", expand=False),
    })
    user_frame = pd.DataFrame({k: _to_series(v) for k, v in users.items()})
    return _movielens(ratings, user_frame, item_frame, report, history_length)


def parse_movielens_1m(paths: PathsLike, *, strict: bool = False, max_rows: int | None = None,
                       history_length: int = 0) -> RawTable:
    """Parse MovieLens 1M (``ratings.dat``, ``users.dat``, ``movies.dat``; ``::``-separated).

    Args:
        paths: the directory holding the files (or the three files).
        strict: raise :class:`MalformedInputError` at the first malformed row.
        max_rows: keep at most this many ratings (the first of ``ratings.dat``).
        history_length: add ``hist_item_id`` with up to this many previous items when > 0.

    Returns:
        See the module docstring (``age`` and ``occupation`` are the 1M codes, as tokens).
    """
    _check_history_length(history_length)
    files = _resolve(paths, ["ratings.dat", "users.dat", "movies.dat"])
    report = ParseReport()
    ratings = _read_delimited(files["ratings.dat"],
                              fields=["user_id", "item_id", "rating", TIMESTAMP], sep="::",
                              convert=_ratings_convert(half_stars=False), report=report,
                              strict=strict, max_rows=max_rows)
    users = _read_delimited(files["users.dat"],
                            fields=["user_id", "gender", "age", "occupation", "zip"], sep="::",
                            convert=_users_convert, report=report, strict=strict,
                            encoding="latin-1")
    movies = _read_delimited(files["movies.dat"], fields=["item_id", "title", "genres"],
                             sep="::", convert=_movies_convert, report=report, strict=strict,
                             encoding="latin-1")
    user_frame = pd.DataFrame({k: _to_series(users[k]) for k in
                               ("user_id", "age", "gender", "occupation", "zip")})
    return _movielens(ratings, user_frame, _movie_frame(movies), report, history_length)


def _movies_convert(cols: dict[str, pa.Array], checks: _Checks) -> dict[str, Any]:
    return {"item_id": _int_column(cols["item_id"], "item_id", checks), "title": cols["title"],
            "genres": cols["genres"]}


def _movie_frame(movies: dict[str, Any]) -> pd.DataFrame:
    return pd.DataFrame({
        "item_id": movies["item_id"],
        "genre": _first_genre(_to_series(movies["genres"])),
        "year": _year_from_title(_to_series(movies["title"])),
    })


def parse_movielens_20m(paths: PathsLike, *, strict: bool = False, max_rows: int | None = None,
                        history_length: int = 0) -> RawTable:
    """Parse MovieLens 20M (``ratings.csv``, ``movies.csv``; CSV with headers; no demographics).

    Also the parser of ``movielens_csv``: the newer releases in the same layout (ml-25m, ml-32m,
    ml-latest, ml-latest-small).

    Args:
        paths: the directory holding the files (or the two files).
        strict: raise :class:`MalformedInputError` at the first malformed row.
        max_rows: keep at most this many ratings (the first of ``ratings.csv``).
        history_length: add ``hist_item_id`` with up to this many previous items when > 0.

    Returns:
        See the module docstring (half-star ratings; label = rating >= 4.0).
    """
    _check_history_length(history_length)
    files = _resolve(paths, ["ratings.csv", "movies.csv"])
    report = ParseReport()
    ratings = _read_delimited(files["ratings.csv"],
                              fields=["user_id", "item_id", "rating", TIMESTAMP], sep=",",
                              header=["userId", "movieId", "rating", "timestamp"],
                              convert=_ratings_convert(half_stars=True), report=report,
                              strict=strict, max_rows=max_rows)
    movies = _read_delimited(files["movies.csv"], fields=["item_id", "title", "genres"], sep=",",
                             header=["movieId", "title", "genres"], convert=_movies_convert,
                             report=report, strict=strict, quoted=True)
    return _movielens(ratings, None, _movie_frame(movies), report, history_length)


# ------------------------------------------------------------------------------------- Taobao


def _taobao_convert(cols: dict[str, pa.Array], checks: _Checks) -> dict[str, Any]:
    out = {name: _int_column(cols[name], name, checks)
           for name in ("user_id", "item_id", "category_id", TIMESTAMP)}
    behavior = cols["behavior_type"]
    checks.fail(pc.is_null(behavior), "missing behavior_type")
    unknown = pc.and_(pc.invert(pc.is_in(behavior, value_set=pa.array(list(TAOBAO_BEHAVIORS)))),
                      pc.is_valid(behavior))
    checks.fail(unknown, lambda i: f"unknown behavior_type {_value(behavior, i)!r} "
                                   f"(expected one of {', '.join(TAOBAO_BEHAVIORS)})")
    positive = pc.is_in(behavior, value_set=pa.array(list(TAOBAO_POSITIVE)))
    return {LABEL: _np_bool(positive).astype(np.float32), "user_id": out["user_id"],
            "item_id": out["item_id"], "category_id": out["category_id"],
            SESSION: out["user_id"], TIMESTAMP: out[TIMESTAMP]}


TAOBAO_USER_BEHAVIOR = RowFormat(
    "taobao_user_behavior", tuple(TAOBAO_FIELDS), ",", _taobao_convert,
    categorical=("user_id", "item_id", "category_id"), user_side=("user_id",), has_session=True,
    has_timestamp=True, order_by=("user_id", TIMESTAMP), history_item="item_id")


def parse_taobao_user_behavior(paths: PathsLike, *, strict: bool = False,
                               max_rows: int | None = None, history_length: int = 0,
                               block_size: int = _BLOCK_SIZE) -> RawTable:
    """Parse Taobao ``UserBehavior.csv`` (``user,item,category,behavior,timestamp``, no header).

    Args:
        paths: one file or several (plain or gzip).
        strict: raise :class:`MalformedInputError` at the first malformed row.
        max_rows: keep at most this many rows (the first of the file, before sorting).
        history_length: add ``hist_item_id`` with up to this many previous items when > 0.
        block_size: bytes per parsed block.

    Returns:
        label = 1.0 for buy/cart/fav, 0.0 for pv; categorical int64 tokens ``user_id``,
        ``item_id``, ``category_id``; session = user id; stably sorted by (user, timestamp).
    """
    return parse_rows(TAOBAO_USER_BEHAVIOR, paths, strict=strict, max_rows=max_rows,
                      history_length=history_length, block_size=block_size)


# ----------------------------------------------------------------------------------- dispatch

#: The formats whose every line is a sample: the streaming preprocess reads them out of core.
ROW_FORMATS: dict[str, RowFormat] = {
    f.name: f for f in (CRITEO_TSV, CRITEO_CSV, AVAZU_CSV, TAOBAO_USER_BEHAVIOR)}

#: Row formats whose :class:`RowFormat` depends on the files (their labels come from a second
#: file read up front): made by :func:`row_format_for` (:mod:`workbench.data.session_logs`).
SESSION_LOG_FORMATS: tuple[str, ...] = ("session_clicks", "diginetica_views")


def _session_log_parser(name: str) -> Callable[..., RawTable]:
    """A parser of :mod:`workbench.data.session_logs`, imported when first called (that module
    imports this one)."""
    def parser(paths: PathsLike, **kw: Any) -> RawTable:
        from workbench.data import session_logs
        return getattr(session_logs, name)(paths, **kw)
    parser.__name__ = parser.__qualname__ = name
    parser.__doc__ = f"See :func:`workbench.data.session_logs.{name}`."
    return parser


def row_format_for(format_name: str, paths: PathsLike, *, strict: bool = False,
                   report: ParseReport | None = None) -> tuple[RowFormat, list[Path]]:
    """The :class:`RowFormat` that reads ``paths`` as ``format_name``, and the files it reads.

    For the plain row formats (:data:`ROW_FORMATS`) that is the registered format and all the
    files. For the session logs (:data:`SESSION_LOG_FORMATS`) the purchases file among ``paths``
    is read here, once, into the returned format's labels, and the files returned are the others.

    Args:
        format_name: the config's ``dataset.format``.
        paths: the raw files.
        strict: raise :class:`MalformedInputError` at the first malformed row of a purchases
            file (the returned files are checked when they are read).
        report: receives the purchases files and their malformed rows (None: only logged).

    Returns:
        ``(format, files)``: read the files with ``format.batches`` or :func:`parse_rows`.

    Raises:
        ValueError: ``format_name`` is not a row format (a directory format, or unknown).
        MalformedInputError: a purchases file that is not in its format, or no sample file.
    """
    if format_name in ROW_FORMATS:
        return ROW_FORMATS[format_name], _as_paths(paths)
    if format_name in SESSION_LOG_FORMATS:
        from workbench.data import session_logs
        return session_logs.FORMAT_BUILDERS[format_name](paths, strict=strict, report=report)
    raise ValueError(
        f"{format_name!r} is not a row format (one sample per line); row formats: "
        f"{', '.join(sorted([*ROW_FORMATS, *SESSION_LOG_FORMATS]))}")


PARSERS: dict[str, Callable[..., RawTable]] = {
    "criteo_tsv": parse_criteo_tsv,
    "criteo_csv": parse_criteo_csv,
    "avazu_csv": parse_avazu_csv,
    "movielens_100k": parse_movielens_100k,
    "movielens_1m": parse_movielens_1m,
    "movielens_20m": parse_movielens_20m,
    "movielens_csv": parse_movielens_20m,
    "taobao_user_behavior": parse_taobao_user_behavior,
    "session_clicks": _session_log_parser("parse_session_clicks"),
    "diginetica_views": _session_log_parser("parse_diginetica_views"),
}


#: What each format expects, in the words of the error a parse without good rows raises.
EXPECTS: dict[str, str] = {
    "criteo_tsv": "no header; 40 tab-separated fields per line: label (0/1), I1..I13 integers, "
                  "C1..C26 hex tokens",
    "criteo_csv": "a CSV whose first line is the header label,I1,...,I13,C1,...,C26 (any case), "
                  "optionally after an id column, then 40 (41) comma-separated fields per line",
    "avazu_csv": "a CSV whose first line is the header id,click,hour,C1,banner_pos,...,C21",
    "movielens_100k": "a directory with u.data (user<TAB>item<TAB>rating<TAB>timestamp), u.user "
                      "and u.item",
    "movielens_1m": "a directory with ratings.dat (user::item::rating::timestamp), users.dat and "
                    "movies.dat",
    "movielens_20m": "a directory with ratings.csv (header userId,movieId,rating,timestamp) and "
                     "movies.csv",
    "movielens_csv": "a directory with ratings.csv (header userId,movieId,rating,timestamp) and "
                     "movies.csv (header movieId,title,genres), as in MovieLens 25M, 32M, "
                     "latest and latest-small",
    "taobao_user_behavior": "no header; 5 comma-separated fields per line: user_id,item_id,"
                            "category_id,behavior (pv/buy/cart/fav),timestamp",
    "session_clicks": "YOOCHOOSE clicks: no header; 4 comma-separated fields per line: "
                      "session_id,timestamp,item_id,category with an ISO-8601 UTC timestamp like "
                      "2014-04-07T10:51:09.277Z (labels from an optional buys file, a file "
                      "named like yoochoose-buys.dat: session_id,timestamp,item_id,price,"
                      "quantity)",
    "diginetica_views": "DIGINETICA train-item-views.csv: the header session_id;user_id;item_id;"
                        "timeframe;eventdate, then 5 semicolon-separated fields per line (labels "
                        "from an optional train-purchases.csv)",
}


def describe_file(path: Path | str, lines: int = 20) -> str:
    """What a raw file looks like, from its first lines, naming the known format it matches.

    Args:
        path: a file (plain or gzip).
        lines: how many lines to look at.

    Returns:
        E.g. ``"40 tab-separated fields per line, like criteo_tsv"`` or ``"a header line, then 40
        comma-separated fields per line (none of the known formats)"``; ``"an empty file"``.
    """
    path = Path(path)
    if path.is_dir():
        return "a directory"
    if path.stat().st_size == 0:
        return "an empty file (0 bytes)"
    with pa.input_stream(str(path), compression="gzip" if _is_gzip(path) else None) as stream:
        head = stream.read(1 << 16)
    text = head.decode("utf-8", errors="replace").splitlines()[:lines]
    if not text or not any(t.strip() for t in text):
        return "a file of blank lines"
    first = text[0].strip().strip("\ufeff")
    if first.startswith("id,click,hour"):
        return "an Avazu CSV (header id,click,hour,...), like avazu_csv"
    if first == "userId,movieId,rating,timestamp":
        return ("MovieLens ratings.csv (20M, 25M, 32M, latest), like movielens_20m / "
                "movielens_csv (a directory with movies.csv)")
    if first == "session_id;user_id;item_id;timeframe;eventdate":
        return ("DIGINETICA train-item-views.csv (header session_id;user_id;item_id;timeframe;"
                "eventdate), like diginetica_views")
    if first == "sessionId;userId;timeframe;eventdate;ordernumber;itemId":
        return ("DIGINETICA train-purchases.csv, the labels of diginetica_views (give it beside "
                "train-item-views.csv)")
    if "\ufffd" in "".join(text) and sum(c.isprintable() for c in first) < 0.9 * len(first):
        return "binary data (not text)"
    sep_name, width, sep = _field_shape(text[1:] or text)
    has_header = len(text) > 1 and not any(
        re.fullmatch(_NUMBER, f.strip()) for f in first.split(sep)) and any(
        re.fullmatch(_NUMBER, f.strip()) for r in text[1:] for f in r.split(sep))
    body = text[1:] if has_header else text
    header = "a header line, then " if has_header else ""
    if not has_header:
        sep_name, width, sep = _field_shape(body)
    guess = ""
    rows = [r for r in body if r.strip()]
    if not header and rows:
        if sep_name == "tab" and width == 40 and all(r.split("\t")[0] in "01" for r in rows):
            guess = ", like criteo_tsv"
        elif sep_name == "tab" and width == 4 and all(_all_ints(r.split("\t")) for r in rows):
            guess = ", like MovieLens 100k u.data (format movielens_100k, a directory)"
        elif sep_name == "'::'" and width == 4:
            guess = ", like MovieLens 1M ratings.dat (format movielens_1m, a directory)"
        elif sep_name == "comma" and width == 5 and all(
                r.split(",")[3] in TAOBAO_BEHAVIORS for r in rows):
            guess = ", like taobao_user_behavior"
        elif sep_name == "comma" and width == 4 and all(
                re.fullmatch(_ISO_UTC, r.split(",")[1]) for r in rows):
            guess = ", like session_clicks (YOOCHOOSE clicks)"
        elif sep_name == "comma" and width == 5 and all(
                re.fullmatch(_ISO_UTC, r.split(",")[1]) for r in rows):
            guess = (", like a YOOCHOOSE buys file (the labels of session_clicks, given beside "
                     "the clicks file with 'buys' in its name)")
    if not guess:
        guess = " (none of the known formats)"
    return f"{header}{width} {sep_name}-separated fields per line{guess}"


def _field_shape(rows: Sequence[str]) -> tuple[str, int, str]:
    """``(name, fields, separator)``: the separator that splits every row into the same number
    (> 1) of fields."""
    for name, sep in (("tab", "\t"), ("'::'", "::"), ("comma", ","), ("'|'", "|"),
                      ("semicolon", ";")):
        widths = {len(r.split(sep)) for r in rows if r.strip()}
        if len(widths) == 1 and (width := widths.pop()) > 1:
            return name, width, sep
    return "no", 1, "\t"


def _all_ints(values: Sequence[str]) -> bool:
    return all(re.fullmatch(_INT_PATTERN, v.strip() or "x") for v in values)


def parse(format: str, paths: PathsLike, *,  # noqa: A002 (the config word)
          max_malformed_fraction: float | None = None, **kw: Any) -> RawTable:
    """Parse ``paths`` with the parser registered for ``format``, and check the result.

    A parse that keeps no row, or (unless strict) drops more than ``max_malformed_fraction`` of
    the rows it read as malformed, is a file in another format or a corrupt one: it fails with
    the file, the first bad lines, what ``format`` expects and what the file looks like.

    Args:
        format: a key of :data:`PARSERS`.
        paths: passed to the parser.
        max_malformed_fraction: the largest share of malformed rows accepted (None: any).
        **kw: passed to the parser (``strict``, ``max_rows``, ``history_length``...).

    Raises:
        ValueError: ``format`` is not a known format (the message lists the known ones).
        MalformedInputError: no good row, or too many malformed ones (``<file>:<line>: ...``).
    """
    try:
        parser = PARSERS[format]
    except KeyError:
        raise ValueError(
            f"unknown raw format {format!r}; known formats: {', '.join(sorted(PARSERS))}"
        ) from None
    try:
        table = parser(paths, **kw)
    except MalformedInputError as exc:  # (not strict) a header or a file not in the format
        if kw.get("strict", False) or f"format {format}" in str(exc) or repr(format) in str(exc):
            raise
        raise MalformedInputError(f"{exc} (format {format!r} expects {EXPECTS[format]})") from exc
    check_report(format, table.report, paths, max_malformed_fraction=max_malformed_fraction,
                 strict=kw.get("strict", False))
    return table


def check_report(format: str, report: ParseReport, paths: PathsLike, *,  # noqa: A002
                 max_malformed_fraction: float | None = None, strict: bool = False) -> None:
    """Fail a parse that kept no row or (unless strict) dropped too many as malformed.

    Raises:
        MalformedInputError: ``<file>:<line>: ...`` with the first bad lines, what ``format``
            expects and what the file looks like.
    """
    read = report.rows + report.malformed
    too_many = (max_malformed_fraction is not None and not strict
                and report.malformed > max_malformed_fraction * read)
    if report.rows > 0 and not too_many:
        return
    examples = [m.groups() for e in report.examples[:3]
                if (m := re.match(r"^(.*):(\d+): (.*)$", e))]
    first = Path(examples[0][0]) if examples else ([Path(f) for f in report.files]
                                                   or _as_paths(paths))[0]
    what = (f"no good rows in {read:,} read" if report.rows == 0 else
            f"{report.malformed:,} of {read:,} rows malformed, more than "
            f"dataset.max_malformed_fraction = {max_malformed_fraction:g}")
    shown = "; ".join(f"line {line}: {reason}" for _, line, reason in examples)
    raise MalformedInputError(
        f"{first}:{examples[0][1] if examples else 1}: {what} with format {format!r}. "
        f"{'First bad lines: ' + shown if shown else 'No data rows'}. {format} expects "
        f"{EXPECTS[format]}; {first.name} looks like {describe_file(first)}")
