"""The reader engine of the raw formats: delimited files -> validated blocks -> ``RawTable``.

Every parser has the signature ``parse_xxx(paths, *, strict=False, max_rows=None, ...)`` and
returns a [`RawTable`][workbench.data.schema.RawTable] whose categorical columns still hold *raw
tokens* (the encode step maps them to ids later). Files may be plain or gzip-compressed (detected
from the gzip magic bytes, so the ``.gz`` suffix is optional). Reading is vectorised:
`pyarrow.csv` streams each file in blocks with every column as a string, and columns are
validated and converted with Arrow compute and numpy kernels; Python only loops over malformed
rows.

This module is the machinery every format shares (the format modules of
[`workbench.data.formats`][] import it; it imports none of them): the column converters, the
history sequences and [`RowFormat`][] with [`parse_rows`][]. The files themselves are read, and
malformed rows and unreadable files reported, by [`workbench.data.formats.delimited`][]:

    files --pyarrow CSV, block by block--> string columns --convert(columns, Checks)--> good rows
    (iter_delimited; read_delimited gathers them); a RowFormat names a
    line-per-sample format, and parse_rows reads it in memory: every block, then the
    stable sort by ``order_by`` and the history sequence.

History sequences (MovieLens, Taobao, session logs)
    With ``history_length=L > 0`` a list column ``hist_item_id`` holds, for each row, the item
    tokens of the same user's (session's) previous up to ``L`` rows in the sorted order (most
    recent last; empty for its first row), and ``RawTable.sequences == {"hist_item_id":
    "item_id"}``. The column has the pandas ``ArrowDtype`` ``list<int64>`` (``large_list`` past
    2**31 elements).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from workbench.data.formats.delimited import (
    BLOCK_SIZE,
    Checks,
    PathsLike,
    iter_delimited,
    np_bool,
    read_delimited,
)
from workbench.data.schema import LABEL, SESSION, TIMESTAMP, ParseReport, RawTable

__all__ = [
    "FLOAT_PATTERN",
    "HIST_ITEM",
    "INT_PATTERN",
    "RowFormat",
    "binary_label",
    "check_history_length",
    "history_column",
    "int_column",
    "parse_rows",
    "sort_order",
    "to_series",
    "value_at",
]

INT_PATTERN = r"^-?[0-9]{1,18}$"
#: A decimal or exponent float (``260.0``, ``1e3``, ``.5``); no ``nan``/``inf``.
FLOAT_PATTERN = r"^-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$"
_EXACT_FLOAT_INT = 2**52  # below it a float64 keeps a fraction (2.5 stays 2.5), so none is lost
#: The history list column (module docstring, "History sequences").
HIST_ITEM = "hist_item_id"


# ------------------------------------------------------------------------------ column converters


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


