"""Criteo display-ad click logs: ``criteo_tsv`` and ``criteo_csv``.

Formats
    ``criteo_tsv`` (Kaggle ``train.txt``, 1TB ``day_N``)
        No header; 40 tab-separated fields ``label, I1..I13, C1..C26``. ``label`` must be ``0`` or
        ``1``. ``I1..I13`` are integers (negative values kept; empty -> NaN; an integer written as
        a float, ``260.0`` or ``1e3``, is that integer, ``2.5`` is malformed) -> dense float64
        columns ``I1..I13``. ``C1..C26`` are 8-hex-digit hashes kept as their string token
        (empty -> missing) -> categorical ``C1..C26``. No session or timestamp (rows are
        chronological).
    ``criteo_csv`` (the CSV form many libraries ship)
        The same 40 fields, comma-separated, after the header ``label,I1,...,I13,C1,...,C26``
        (any letter case), optionally preceded by an ``id`` column that is dropped; columns as
        ``criteo_tsv``. This is the sample many libraries ship (DeepCTR's ``criteo_sample.txt``,
        written by pandas: ``I1..I13`` as floats such as ``260.0``, empty cells for missing).

Both are [`RowFormat`][workbench.data.formats.engine.RowFormat] formats (every line is one sample,
so they stream); malformed rows as in [`workbench.data.formats.delimited`][].
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from workbench.data.formats.delimited import BLOCK_SIZE, Checks, PathsLike
from workbench.data.formats.engine import RowFormat, binary_label, int_column, parse_rows
from workbench.data.schema import LABEL, MalformedInputError, RawTable

__all__ = [
    "CRITEO_CATEGORICAL",
    "CRITEO_CSV",
    "CRITEO_DENSE",
    "CRITEO_FIELDS",
    "CRITEO_TSV",
    "EXPECTS",
    "parse_criteo_csv",
    "parse_criteo_tsv",
]

CRITEO_DENSE = [f"I{i}" for i in range(1, 14)]
CRITEO_CATEGORICAL = [f"C{i}" for i in range(1, 27)]
CRITEO_FIELDS = [LABEL, *CRITEO_DENSE, *CRITEO_CATEGORICAL]

#: What each format expects, in the words of the error a parse without good rows raises.
EXPECTS: dict[str, str] = {
    "criteo_tsv": "no header; 40 tab-separated fields per line: label (0/1), I1..I13 integers "
                  "(260.0 and 1e3 count as integers), C1..C26 hex tokens",
    "criteo_csv": "a CSV whose first line is the header label,I1,...,I13,C1,...,C26 (any case), "
                  "optionally after an id column, then 40 (41) comma-separated fields per line",
}


def _criteo_convert(cols: dict[str, pa.Array], checks: Checks) -> dict[str, Any]:
    out: dict[str, Any] = {LABEL: binary_label(cols[LABEL], LABEL, checks)}
    for name in CRITEO_DENSE:
        out[name] = int_column(cols[name], name, checks, required=False, float_notation=True)
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
                     block_size: int = BLOCK_SIZE) -> RawTable:
    """Parse Criteo Kaggle ``train.txt`` / 1TB ``day_N`` files (40 tab-separated fields).

    Args:
        paths: one file or several (read in order; plain or gzip).
        strict: raise [`MalformedInputError`][] at the first malformed row.
        max_rows: keep at most this many rows.
        block_size: bytes per parsed block.

    Returns:
        ``label`` (float32), dense ``I1..I13`` (float64, NaN when empty, negatives kept),
        categorical ``C1..C26`` (8-hex-digit string tokens, missing when empty).
    """
    return parse_rows(CRITEO_TSV, paths, strict=strict, max_rows=max_rows, block_size=block_size)


def parse_criteo_csv(paths: PathsLike, *, strict: bool = False, max_rows: int | None = None,
                     block_size: int = BLOCK_SIZE) -> RawTable:
    """Parse Criteo rows as CSV with a header (the form many libraries ship): the header is
    ``label,I1..I13,C1..C26``, or ``id,label,...`` with an id column that is dropped.

    Returns:
        As [`parse_criteo_tsv`][].
    """
    return parse_rows(CRITEO_CSV, paths, strict=strict, max_rows=max_rows, block_size=block_size)
