"""The reader engine of the raw formats: delimited files -> validated blocks -> ``RawTable``.

Every parser has the signature ``parse_xxx(paths, *, strict=False, max_rows=None, ...)`` and
returns a [`RawTable`][workbench.data.schema.RawTable] whose categorical columns still hold *raw
tokens* (the encode step maps them to ids later). Files may be plain or gzip-compressed (detected
from the gzip magic bytes, so the ``.gz`` suffix is optional). Reading is vectorised:
`pyarrow.csv` streams each file in blocks with every column as a string, and columns are
validated and converted with Arrow compute and numpy kernels; Python only loops over malformed
rows.

This module is the machinery every format shares (the format modules of
[`workbench.data.formats`][] import it; it imports none of them):

    files --pyarrow CSV, block by block--> string columns --convert(columns, Checks)--> good rows
    (iter_delimited; read_delimited gathers them); a RowFormat names a
    line-per-sample format, and parse_rows reads it in memory: every block, then the
    stable sort by ``order_by`` and the history sequence.

Malformed rows
    A row is malformed when it has the wrong number of fields, an empty or non-integer value in an
    integer column, a label outside the format's label set, an unparsable timestamp or a blank
    line. By default such rows are dropped and counted in ``report.malformed`` with up to 10
    examples ``"<file>:<line>: <reason>"``; with ``strict=True`` the first one (in file order)
    raises [`MalformedInputError`][] with the same ``"<file>:<line>: <reason>"`` message.
    ``<file>`` is the path as given; ``<line>`` is the 1-based physical line number in the
    (decompressed) file, counting header lines, so ``sed -n <line>p`` shows the row.
    Malformed rows of side files (the MovieLens users and items, the purchases of a session log)
    are reported the same way (they do not drop sample rows). ``max_rows`` stops after that many
    good rows; rows after the last kept one are neither read further nor counted.

Unreadable files
    A file whose bytes cannot be read to the end (a gzip stream cut short or corrupt, an I/O
    error) raises [`UnreadableInputError`][]: ``"<file>: gzip stream ends early (truncated at
    byte N?) — re-download or re-compress it"``, whatever the mode (no row count is right then).

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
import sys
import zlib
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
from workbench.utils.errors import UserError

__all__ = [
    "BLOCK_SIZE",
    "FLOAT_PATTERN",
    "HIST_ITEM",
    "INT_PATTERN",
    "Checks",
    "PathsLike",
    "RowFormat",
    "UnreadableInputError",
    "as_paths",
    "binary_label",
    "check_history_length",
    "gzip_problem",
    "history_column",
    "int_column",
    "is_gzip",
    "iter_delimited",
    "np_bool",
    "parse_rows",
    "read_delimited",
    "sort_order",
    "to_series",
    "unreadable",
    "value_at",
]

PathsLike = Sequence[Path | str] | Path | str

BLOCK_SIZE = 4 << 20  # bytes per parsed block (larger blocks parse slower here)
INT_PATTERN = r"^-?[0-9]{1,18}$"
#: A decimal or exponent float (``260.0``, ``1e3``, ``.5``); no ``nan``/``inf``.
FLOAT_PATTERN = r"^-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$"
_EXACT_FLOAT_INT = 2**52  # below it a float64 keeps a fraction (2.5 stays 2.5), so none is lost
_MAX_EXAMPLES = ParseReport.MAX_EXAMPLES
#: The history list column (module docstring, "History sequences").
HIST_ITEM = "hist_item_id"


# --------------------------------------------------------------------------- malformed bookkeeping


class Checks:
    """Vectorised validity checks over one batch that remember why each bad row failed.

    Attributes:
        bad: boolean mask of the rows that failed any check so far.
    """

    def __init__(self, n: int) -> None:
        self.bad = np.zeros(n, dtype=bool)
        self._failures: list[tuple[np.ndarray, Callable[[int], str]]] = []

    def fail(self, mask: Any, reason: str | Callable[[int], str]) -> None:
        """Mark the rows of ``mask`` bad; ``reason`` is a text or a function of the row index."""
        mask = np_bool(mask)
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
    numbers) through [`on_invalid_row`][]; value errors found by [`Checks`][] come through
    [`add_batch_errors`][]. Good rows of each batch get their line numbers from
    [`assign_lines`][] (the physical lines not skipped by the handler).
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

    def add_batch_errors(self, lines: np.ndarray, checks: Checks, rows: np.ndarray) -> None:
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


def np_bool(mask: Any) -> np.ndarray:
    """A numpy bool array from a numpy/Arrow mask (Arrow nulls -> False)."""
    if isinstance(mask, (pa.Array, pa.ChunkedArray)):
        return mask.fill_null(False).to_numpy(zero_copy_only=False)
    return np.asarray(mask, dtype=bool)


def value_at(arr: pa.Array, i: int) -> Any:
    """Element ``i`` of ``arr`` as a Python value (for the message of a bad row)."""
    return arr[i].as_py()


def _all_plain_digits(arr: pa.Array) -> bool:
    """Whether every non-null value is 1..18 ASCII digits (cheaper than the regex)."""
    if arr.null_count == len(arr):
        return True
    return (pc.all(pc.ascii_is_decimal(arr)).as_py() is True
            and pc.max(pc.binary_length(arr)).as_py() <= 18)


def int_column(arr: pa.Array, name: str, checks: Checks, *, required: bool = True,
               float_notation: bool = False) -> np.ndarray:
    """Validate and convert a string column of integers.

    Args:
        arr: the raw strings (null = empty field).
        name: column name for messages.
        checks: where bad rows are recorded.
        required: an empty value is malformed (result int64, 0 at bad rows); otherwise it is
            missing (result float64 with NaN).
        float_notation: also accept an integer written as a float (``260.0``, ``1e3``), as
            pandas writes an integer column with missing values; a value with a fraction
            (``2.5``) or of 2**52 or more (where a float64 drops fractions) stays malformed.

    Returns:
        The converted numpy array (values at bad rows are placeholders).
    """
    if required:
        checks.fail(pc.is_null(arr), f"missing value in column {name}")
    if _all_plain_digits(arr):  # fast path: unsigned decimals that fit in int64
        ints = pc.cast(arr, pa.int64())
    else:
        ok = pc.match_substring_regex(arr, INT_PATTERN)
        if float_notation:
            ints, ok = _ints_in_float_notation(arr, ok)
        bad = np_bool(pc.invert(ok))
        checks.fail(bad, lambda i: f"non-integer {value_at(arr, i)!r} in integer column {name}")
        if not float_notation:
            ints = pc.cast(pc.if_else(ok, arr, pa.scalar(None, pa.string())) if bad.any()
                           else arr, pa.int64())
    if required:
        return ints.fill_null(0).to_numpy(zero_copy_only=False)
    return pc.cast(ints, pa.float64()).to_numpy(zero_copy_only=False)


def _ints_in_float_notation(arr: pa.Array, plain: pa.Array) -> tuple[pa.Array, pa.Array]:
    """``(int64 values, ok mask)`` of ``arr`` where a value is a plain integer (``plain``) or a
    float with no fraction below 2**52 (``260.0``, ``1e3``); the values are null
    where not ok, the mask is null where the value is (missing, not malformed)."""
    floaty = pc.and_(pc.invert(plain), pc.match_substring_regex(arr, FLOAT_PATTERN))
    values = pc.cast(pc.if_else(floaty, arr, pa.scalar(None, pa.string())), pa.float64())
    integral = pc.and_(pc.equal(values, pc.floor(values)),
                       pc.less(pc.abs(values), float(_EXACT_FLOAT_INT)))
    whole = pc.fill_null(integral, False)
    ints = pc.if_else(plain, pc.cast(pc.if_else(plain, arr, pa.scalar(None, pa.string())),
                                     pa.int64()),
                      pc.cast(pc.if_else(whole, values, pa.scalar(None, pa.float64())),
                              pa.int64()))
    ok = pc.or_(pc.fill_null(plain, False), whole)
    return ints, pc.if_else(pc.is_valid(arr), ok, pa.scalar(None, pa.bool_()))


def binary_label(arr: pa.Array, name: str, checks: Checks) -> np.ndarray:
    """A ``0``/``1`` string column -> float32 labels: ``0`` and ``1`` also in float notation
    (``0.0``, ``1.0``, as pandas writes a label column) and in double quotes (``"1"``); any
    other value is malformed."""
    checks.fail(pc.is_null(arr), f"missing label ({name})")
    ok = pc.is_in(arr, value_set=pa.array(["0", "1"]))
    plain, one = arr, pc.equal(arr, "1")
    if not pc.all(pc.fill_null(ok, True)).as_py():  # quoted, or in float notation
        plain = pc.replace_substring_regex(arr, r'^"(.*)"$', r"\1")
        ok = pc.is_in(plain, value_set=pa.array(["0", "1"]))
        one = pc.equal(plain, "1")
        floaty = pc.and_(pc.invert(ok), pc.match_substring_regex(plain, FLOAT_PATTERN))
        values = pc.cast(pc.if_else(floaty, plain, pa.scalar(None, pa.string())), pa.float64())
        ok = pc.or_(ok, pc.fill_null(pc.is_in(values, value_set=pa.array([0.0, 1.0])), False))
        one = pc.or_(one, pc.fill_null(pc.equal(values, 1.0), False))
    bad = pc.and_(pc.invert(ok), pc.is_valid(arr))
    checks.fail(bad, lambda i: f"label {value_at(arr, i)!r} not in {{0,1}} ({name})")
    return np_bool(one).astype(np.float32)



# ----------------------------------------------------------------------------- the shared reader


def as_paths(paths: PathsLike) -> list[Path]:
    """``paths`` (one path or several) as a list of `Path`."""
    if isinstance(paths, (str, Path)):
        return [Path(paths)]
    return [Path(p) for p in paths]


def is_gzip(path: Path) -> bool:
    """Whether the file starts with the gzip magic bytes."""
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


class UnreadableInputError(UserError, OSError):
    """A raw file cannot be read to its end: a gzip stream cut short or corrupt, an I/O error.
    The message names the file and what to do."""


def gzip_problem(path: Path, chunk: int = 1 << 20) -> str | None:
    """What is wrong with gzip file ``path``, or None when its members all decompress to their
    end (read in ``chunk``-byte steps, the output discarded a chunk at a time)."""
    size = path.stat().st_size
    z = zlib.decompressobj(16 + zlib.MAX_WBITS)
    with open(path, "rb") as fh:
        try:
            while block := fh.read(chunk):
                while block:
                    z.decompress(block, chunk)
                    if z.eof:  # the next member of a multi-member file, if any
                        block = z.unused_data
                        if block:
                            z = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    else:
                        block = z.unconsumed_tail
        except zlib.error as exc:
            return f"not valid gzip data ({exc})"
    if not z.eof:
        return f"gzip stream ends early (truncated at byte {size}?)"
    return None


def unreadable(path: Path, exc: OSError) -> UnreadableInputError:
    """The one-line error of raw file ``path`` whose reading failed with ``exc``."""
    try:
        problem = gzip_problem(path) if is_gzip(path) else None
    except OSError:
        problem = None
    if problem is not None:
        return UnreadableInputError(f"{path}: {problem} — re-download or re-compress it")
    return UnreadableInputError(f"{path}: cannot read the file ({exc.strerror or exc}); check "
                                "that it is a complete, readable file")


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
    read, which [`read_delimited`][] then repeats through `_RepairedText`)."""
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
    stream = pa.input_stream(str(path), compression="gzip" if is_gzip(path) else None)
    with stream:
        head = b""
        while b"\n" not in head:
            chunk = stream.read(1 << 16)
            if not chunk:
                break
            head += chunk
    return head.split(b"\n", 1)[0].decode(encoding).rstrip("\r")


def iter_delimited(
    paths: PathsLike,
    *,
    fields: Sequence[str],
    sep: str,
    convert: Callable[[dict[str, pa.Array], Checks], dict[str, Any]],
    report: ParseReport,
    strict: bool = False,
    max_rows: int | None = None,
    header: Sequence[str] | Callable[[list[str], str], Sequence[str]] | None = None,
    encoding: str = "utf8",
    quoted: bool = False,
    block_size: int = BLOCK_SIZE,
) -> Iterator[dict[str, Any]]:
    """Read delimited files batch by batch as string columns, validate them, yield good rows.

    Memory is one parsed block at a time: the streaming preprocess
    ([`workbench.data.streaming`][]) consumes the batches as they come; [`read_delimited`][]
    gathers them.

    Args:
        paths: the files, read in order (plain or gzip).
        fields: the field names of one row, in file order.
        sep: the field separator; a multi-character one (MovieLens ``::``) is split with Arrow.
        convert: ``convert(columns, checks)`` turns the raw string columns of one batch into the
            output columns (numpy arrays or Arrow arrays of the batch length), recording bad rows
            in ``checks``.
        report: receives files, malformed counts and examples (``rows`` is left to the caller).
        strict: raise [`MalformedInputError`][] at the first malformed row.
        max_rows: stop after this many good rows (over all files).
        header: when given, the first line of each file must be exactly these names; or a
            function of (the header's names, the file) returning the file's fields (it raises
            [`MalformedInputError`][] for a header it does not accept).
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
    for path in as_paths(paths):
        if max_rows is not None and kept >= max_rows:
            break
        file = str(path)
        report.files.append(file)
        skip = 0
        if header is not None:
            try:
                head = _first_line(path, encoding)
            except OSError as exc:
                raise unreadable(path, exc) from None
            # a UTF-8 byte-order mark (Excel's "CSV UTF-8") is not part of the first name
            got = [h.strip('"') for h in head.removeprefix("\ufeff").split(sep)]
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

        # consumed (yield from) within this iteration: the loop variables it reads (B023) are
        # this file's
        def read_file(stream: Any, log: _MalformedLog, handed_on: int = 0
                      ) -> Iterator[dict[str, Any]]:
            """One pass over the file: its good rows, block by block (counted in ``log``),
            leaving out the first ``handed_on`` (already yielded by a pass that failed)."""
            nonlocal kept
            good_rows, done = 0, False
            try:
                reader = pacsv.open_csv(
                    stream, read_options=read_options, convert_options=convert_options,  # noqa: B023
                    parse_options=pacsv.ParseOptions(**parse_options,  # noqa: B023
                                                     invalid_row_handler=log.on_invalid_row))
            except pa.ArrowInvalid as exc:
                if "Empty CSV file" not in str(exc):
                    raise
                reader = []  # no data rows (header-only or empty file)
            try:
                for batch in reader:
                    n = batch.num_rows
                    if n == 0:
                        continue
                    lines = log.assign_lines(n)
                    checks = Checks(n)
                    raw = {c: batch.column(i) for i, c in enumerate(columns)}  # noqa: B023
                    if multi:
                        raw = _split_multi(raw["_line"], fields, sep, checks)  # noqa: B023
                    else:
                        blank = pc.is_null(raw[columns[0]])  # noqa: B023
                        for c in columns[1:]:  # noqa: B023
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
            finally:  # a reader left open keeps its threads past the interpreter's exit
                if hasattr(reader, "close"):
                    reader.close()
            if not done:
                log.settle(None)

        try:  # an I/O error (a gzip file cut short) is the file's, said in one line
            compression = "gzip" if is_gzip(path) else None
            log = _MalformedLog(file, report, strict, skip + 1, len(fields))
            kept_before = kept
            try:
                with pa.input_stream(str(path), compression=compression) as stream, \
                        _quiet_undecodable_rows():
                    yield from read_file(stream, log)
            except pa.ArrowInvalid as exc:
                if "straddl" in str(exc):  # a line longer than a parse block
                    raise _too_long(file, path, compression, block_size, exc) from None
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
        except OSError as exc:
            raise unreadable(path, exc) from None
        log.finish()


def _too_long(file: str, path: Path, compression: str | None, block_size: int,
              exc: Exception) -> MalformedInputError:
    """The error of a file holding a line longer than a parse block (pyarrow says only "a
    straddling object straddles two block boundaries"): the first such line, by number."""
    found = _first_long_line(path, compression, block_size)
    if found is None:
        return MalformedInputError(f"{file}: cannot read the file: {exc}")
    line, size = found
    remove = (f"gzip -dc {path} | sed '{line}d' | gzip > {path}.fixed && mv {path}.fixed {path}"
              if compression else f"sed -i '{line}d' {path}")
    return MalformedInputError(
        f"{file}: line {line:,} is {_size(size)} long, more than a parse block "
        f"({_size(block_size)}): a sample's line is a few KB, so the file is damaged there (or "
        f"not in this format); remove or repair that line (e.g. {remove}) and run again")


def _size(n: int) -> str:
    return f"{n / 2**20:,.1f} MB" if n >= 2**20 else f"{n / 2**10:,.1f} KB"


def _first_long_line(path: Path, compression: str | None,
                     limit: int) -> tuple[int, int] | None:
    """``(line number, bytes)`` of the first line of ``path`` longer than ``limit`` bytes."""
    number, start, offset = 1, 0, 0
    with pa.input_stream(str(path), compression=compression) as stream:
        while data := stream.read(1 << 24):
            ends = np.flatnonzero(np.frombuffer(data, np.uint8) == ord("\n")) + offset
            lengths = np.diff(np.concatenate([[start], ends + 1]))
            over = np.flatnonzero(lengths > limit)
            if len(over):
                return number + int(over[0]), int(lengths[over[0]])
            if len(ends):
                number += len(ends)
                start = int(ends[-1]) + 1
            offset += len(data)
    return (number, offset - start) if offset - start > limit else None


def read_delimited(paths: PathsLike, *, fields: Sequence[str], sep: str,
                    convert: Callable[[dict[str, pa.Array], Checks], dict[str, Any]],
                    **kwargs: Any) -> dict[str, Any]:
    """[`iter_delimited`][]'s good rows gathered into whole columns.

    Returns:
        Output column name -> numpy array or Arrow ChunkedArray, over the good rows.
    """
    empty = {f: pa.array([], pa.string()) for f in fields}
    chunks: dict[str, list[Any]] = {k: [v] for k, v in convert(empty, Checks(0)).items()}
    for batch in iter_delimited(paths, fields=fields, sep=sep, convert=convert, **kwargs):
        for k, v in batch.items():
            chunks[k].append(v)
    result: dict[str, Any] = {}
    for k, parts in chunks.items():
        if isinstance(parts[0], np.ndarray):
            result[k] = np.concatenate(parts)
        else:
            result[k] = pa.chunked_array(parts, type=parts[0].type)
    return result


def _split_multi(lines: pa.Array, fields: Sequence[str], sep: str, checks: Checks
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


def to_series(values: Any, index: pd.Index | None = None) -> pd.Series:
    """numpy or Arrow column -> pandas Series (Arrow strings become the pandas ``str`` dtype)."""
    if isinstance(values, np.ndarray):
        return pd.Series(values, index=index)
    s = values.to_pandas()
    if index is not None:
        s.index = index
    return s


# ---------------------------------------------------------------------------- history sequences


def history_column(session: np.ndarray, items: np.ndarray, length: int) -> pd.Series:
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


def sort_order(*keys: np.ndarray) -> np.ndarray:
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


def check_history_length(history_length: int) -> None:
    """Raise `ValueError` for a negative ``history_length``."""
    if history_length < 0:
        raise ValueError(f"history_length must be >= 0, got {history_length}")


# -------------------------------------------------------------------------------- row formats


@dataclass(frozen=True)
class RowFormat:
    """A format in which every line is one sample: parsed block by block, so it can stream.

    ``convert`` turns one block's raw string columns into the [`RawTable`][] columns, in
    schema order (label, dense, categorical, then session and timestamp when present). A few
    steps need the whole table and are applied after the blocks (in memory by
    [`parse_rows`][], out of core by [`workbench.data.streaming`][]): a stable sort by
    ``order_by``, and the history sequence of ``history_item`` within a session.

    Attributes:
        name: the config's ``dataset.format``.
        fields: the fields of one line, in file order.
        sep: the field separator.
        convert: block converter (see [`iter_delimited`][]).
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
    convert: Callable[[dict[str, pa.Array], Checks], dict[str, Any]]
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
        """The [`RawTable`][] columns ``convert`` yields, in schema order."""
        return [LABEL, *self.dense, *self.categorical, *([SESSION] if self.has_session else []),
                *([TIMESTAMP] if self.has_timestamp else [])]

    def batches(self, paths: PathsLike, report: ParseReport, *, strict: bool = False,
                max_rows: int | None = None, block_size: int = BLOCK_SIZE
                ) -> Iterator[dict[str, Any]]:
        """The good rows of ``paths``, block by block (see [`iter_delimited`][])."""
        return iter_delimited(paths, fields=self.fields, sep=self.sep, convert=self.convert,
                               report=report, strict=strict, max_rows=max_rows,
                               header=self.header, encoding=self.encoding,
                               block_size=block_size)


def parse_rows(fmt: RowFormat, paths: PathsLike, *, strict: bool = False,
               max_rows: int | None = None, history_length: int = 0,
               block_size: int = BLOCK_SIZE) -> RawTable:
    """Parse a [`RowFormat`][] in memory: every block, then the sort and the history.

    Args:
        fmt: the format.
        paths: one file or several (read in order; plain or gzip).
        strict: raise [`MalformedInputError`][] at the first malformed row.
        max_rows: keep at most this many rows (the first of the files, before sorting).
        history_length: add ``hist_item_id`` with up to this many previous items when > 0
            (formats with a ``history_item`` only).
        block_size: bytes per parsed block.
    """
    check_history_length(history_length)
    report = ParseReport()
    cols = read_delimited(paths, fields=fmt.fields, sep=fmt.sep, convert=fmt.convert,
                           report=report, strict=strict, max_rows=max_rows, header=fmt.header,
                           encoding=fmt.encoding, block_size=block_size)
    if fmt.order_by:
        order = sort_order(*(cols[k] for k in fmt.order_by))
        cols = {k: v[order] if isinstance(v, np.ndarray) else v.take(pa.array(order))
                for k, v in cols.items()}
    frame = pd.DataFrame({k: to_series(cols[k]) for k in fmt.columns})
    sequences: dict[str, str] = {}
    if history_length > 0 and fmt.history_item is not None:
        frame[HIST_ITEM] = history_column(frame[SESSION].to_numpy(),
                                    frame[fmt.history_item].to_numpy(), history_length).array
        sequences = {HIST_ITEM: fmt.history_item}
    report.rows = len(frame)
    return RawTable(frame, dense=list(fmt.dense), categorical=list(fmt.categorical),
                    user_side=list(fmt.user_side), sequences=sequences,
                    has_session=fmt.has_session, has_timestamp=fmt.has_timestamp, report=report)


