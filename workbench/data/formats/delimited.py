"""Delimited files read block by block: malformed-row bookkeeping and the shared reader.

Every line-per-sample format ([`workbench.data.formats.engine`][]) reads its files through
[`iter_delimited`][]: `pyarrow.csv` streams each file (plain or gzip, detected from the magic
bytes) in blocks with every column as a string; a format's ``convert(columns, checks)`` validates
and converts a block, recording bad rows in a [`Checks`][]; the good rows are yielded and the
malformed ones counted per file. [`read_delimited`][] gathers the blocks into whole columns.

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
"""

from __future__ import annotations

import codecs
import contextlib
import io
import sys
import zlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from workbench.data.schema import MalformedInputError, ParseReport
from workbench.utils.errors import UserError

__all__ = [
    "BLOCK_SIZE",
    "Checks",
    "PathsLike",
    "UnreadableInputError",
    "as_paths",
    "gzip_problem",
    "is_gzip",
    "iter_delimited",
    "np_bool",
    "read_delimited",
    "unreadable",
]

PathsLike = Sequence[Path | str] | Path | str

BLOCK_SIZE = 4 << 20  # bytes per parsed block (larger blocks parse slower here)
_MAX_EXAMPLES = ParseReport.MAX_EXAMPLES


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


def np_bool(mask: Any) -> np.ndarray:
    """A numpy bool array from a numpy/Arrow mask (Arrow nulls -> False)."""
    if isinstance(mask, (pa.Array, pa.ChunkedArray)):
        return mask.fill_null(False).to_numpy(zero_copy_only=False)
    return np.asarray(mask, dtype=bool)



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
