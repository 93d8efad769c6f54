"""Raw dataset formats: files -> [`RawTable`][workbench.data.schema.RawTable], a module per format.

Modules
    ``delimited``
        The reader every format shares: vectorised validity checks (``Checks``), malformed-row
        bookkeeping, block-by-block reading of delimited files (``iter_delimited``,
        ``read_delimited``); the specification of malformed rows and unreadable files. It
        imports nothing of this package.
    ``engine``
        The column converters, RowFormat (a line-per-sample format, which streams) and
        parse_rows; the specification of history sequences. It imports only ``delimited``.
    ``criteo``
        ``criteo_tsv`` (Kaggle ``train.txt``, 1TB ``day_N``) and ``criteo_csv``.
    ``avazu``
        ``avazu_csv`` (Kaggle Avazu ``train``).
    ``movielens``
        ``movielens_100k``, ``movielens_1m``, ``movielens_20m`` and ``movielens_csv`` (directory
        formats joined in memory).
    ``taobao``
        ``taobao_user_behavior`` (Tianchi ``UserBehavior.csv``).
    ``session_logs``
        ``session_clicks`` (YOOCHOOSE) and ``diginetica_views`` (DIGINETICA), labelled from a
        purchases file read when the format is made for a set of files.
    ``sniff``
        [`describe_file`][]: what a raw file looks like and the known format it matches.

Registry
    [`FORMATS`][] maps each ``dataset.format`` name to its [`Format`][]: the parser, what
    the format expects (the words of its errors) and, for a line-per-sample format, either its
    fixed [`RowFormat`][] or the builder that makes one for a set of files (session logs).
    [`PARSERS`][], [`ROW_FORMATS`][], [`SESSION_LOG_FORMATS`][] and [`EXPECTS`][] are
    views of it, and [`parse`][], [`row_format_for`][] and [`check_report`][] dispatch
    through it. Imports go one way, with no circle: ``delimited`` <- ``engine`` <- ``criteo``,
    ``avazu``, ``movielens``, ``taobao`` <- ``sniff`` (Taobao's behaviours) <- ``session_logs``
    <- this package (``tests/test_formats_registry.py`` checks it).

Checked parse
    [`parse`][] = the format's parser, then [`check_report`][]: a parse that keeps no row,
    or (unless strict) drops more than ``max_malformed_fraction`` of the rows it read as
    malformed, fails with ``<file>:<line>: ...``, the first bad lines, what the format expects
    and what the file looks like ([`describe_file`][]). A [`MalformedInputError`][] the
    parser raises itself (unless strict; e.g. a wrong header) gets what the format expects
    appended, unless it names the format already.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.data.formats import avazu, criteo, movielens, session_logs, taobao
from workbench.data.formats.avazu import parse_avazu_csv
from workbench.data.formats.criteo import parse_criteo_csv, parse_criteo_tsv
from workbench.data.formats.delimited import PathsLike, as_paths
from workbench.data.formats.engine import HIST_ITEM, RowFormat, parse_rows
from workbench.data.formats.movielens import (
    parse_movielens_1m,
    parse_movielens_20m,
    parse_movielens_100k,
)
from workbench.data.formats.session_logs import (
    diginetica_views_format,
    parse_diginetica_views,
    parse_session_clicks,
    session_clicks_format,
)
from workbench.data.formats.sniff import describe_file
from workbench.data.formats.taobao import parse_taobao_user_behavior
from workbench.data.schema import MalformedInputError, ParseReport, RawTable

__all__ = [
    "EXPECTS",
    "FORMATS",
    "HIST_ITEM",
    "PARSERS",
    "ROW_FORMATS",
    "SESSION_LOG_FORMATS",
    "Format",
    "RowFormat",
    "check_report",
    "describe_file",
    "parse",
    "parse_avazu_csv",
    "parse_criteo_csv",
    "parse_criteo_tsv",
    "parse_diginetica_views",
    "parse_movielens_100k",
    "parse_movielens_1m",
    "parse_movielens_20m",
    "parse_rows",
    "parse_session_clicks",
    "parse_taobao_user_behavior",
    "row_format_for",
]


@dataclass(frozen=True)
class Format:
    """One raw format of the registry.

    Attributes:
        name: the config's ``dataset.format``.
        parser: ``parser(paths, *, strict, max_rows, ...) -> RawTable`` (in memory).
        expects: what the format expects, in the words of its errors.
        row_format: the format's fixed [`RowFormat`][] (every line a sample), or None.
        builder: ``builder(paths, *, strict, report) -> (RowFormat, files)`` for a row format
            that depends on the files (its labels come from a file read up front), or None.
    """

    name: str
    parser: Callable[..., RawTable]
    expects: str
    row_format: RowFormat | None = None
    builder: Callable[..., tuple[RowFormat, list[Path]]] | None = None


def _format(module: Any, name: str, parser: Callable[..., RawTable], *,
            row_format: RowFormat | None = None,
            builder: Callable[..., tuple[RowFormat, list[Path]]] | None = None) -> Format:
    return Format(name, parser, module.EXPECTS[name], row_format, builder)


#: Every raw format, by its ``dataset.format`` name.
FORMATS: dict[str, Format] = {f.name: f for f in (
    _format(criteo, "criteo_tsv", parse_criteo_tsv, row_format=criteo.CRITEO_TSV),
    _format(criteo, "criteo_csv", parse_criteo_csv, row_format=criteo.CRITEO_CSV),
    _format(avazu, "avazu_csv", parse_avazu_csv, row_format=avazu.AVAZU_CSV),
    _format(movielens, "movielens_100k", parse_movielens_100k),
    _format(movielens, "movielens_1m", parse_movielens_1m),
    _format(movielens, "movielens_20m", parse_movielens_20m),
    _format(movielens, "movielens_csv", parse_movielens_20m),
    _format(taobao, "taobao_user_behavior", parse_taobao_user_behavior,
            row_format=taobao.TAOBAO_USER_BEHAVIOR),
    _format(session_logs, "session_clicks", parse_session_clicks,
            builder=session_clicks_format),
    _format(session_logs, "diginetica_views", parse_diginetica_views,
            builder=diginetica_views_format),
)}

#: Format name -> its in-memory parser.
PARSERS: dict[str, Callable[..., RawTable]] = {n: f.parser for n, f in FORMATS.items()}

#: The formats whose every line is a sample: the streaming preprocess reads them out of core.
ROW_FORMATS: dict[str, RowFormat] = {
    n: f.row_format for n, f in FORMATS.items() if f.row_format is not None}

#: Row formats whose :class:`RowFormat` depends on the files (their labels come from a second
#: file read up front): made by :func:`row_format_for` (:mod:`workbench.data.formats.session_logs`).
SESSION_LOG_FORMATS: tuple[str, ...] = tuple(
    n for n, f in FORMATS.items() if f.builder is not None)

#: What each format expects, in the words of the error a parse without good rows raises.
EXPECTS: dict[str, str] = {n: f.expects for n, f in FORMATS.items()}


def row_format_for(format_name: str, paths: PathsLike, *, strict: bool = False,
                   report: ParseReport | None = None) -> tuple[RowFormat, list[Path]]:
    """The [`RowFormat`][] that reads ``paths`` as ``format_name``, and the files it reads.

    For the plain row formats ([`ROW_FORMATS`][]) that is the registered format and all the
    files. For the session logs ([`SESSION_LOG_FORMATS`][]) the purchases file among ``paths``
    is read here, once, into the returned format's labels, and the files returned are the others.

    Args:
        format_name: the config's ``dataset.format``.
        paths: the raw files.
        strict: raise [`MalformedInputError`][] at the first malformed row of a purchases
            file (the returned files are checked when they are read).
        report: receives the purchases files and their malformed rows (None: only logged).

    Returns:
        ``(format, files)``: read the files with ``format.batches`` or [`parse_rows`][].

    Raises:
        ValueError: ``format_name`` is not a row format (a directory format, or unknown).
        MalformedInputError: a purchases file that is not in its format, or no sample file.
    """
    fmt = FORMATS.get(format_name)
    if fmt is not None and fmt.row_format is not None:
        return fmt.row_format, as_paths(paths)
    if fmt is not None and fmt.builder is not None:
        return fmt.builder(paths, strict=strict, report=report)
    raise ValueError(
        f"{format_name!r} is not a row format (one sample per line); row formats: "
        f"{', '.join(sorted([*ROW_FORMATS, *SESSION_LOG_FORMATS]))}")


def parse(format: str, paths: PathsLike, *,  # noqa: A002 (the config word)
          max_malformed_fraction: float | None = None, **kw: Any) -> RawTable:
    """Parse ``paths`` with the parser registered for ``format``, and check the result.

    A parse that keeps no row, or (unless strict) drops more than ``max_malformed_fraction`` of
    the rows it read as malformed, is a file in another format or a corrupt one: it fails with
    the file, the first bad lines, what ``format`` expects and what the file looks like.

    Args:
        format: a key of [`FORMATS`][].
        paths: passed to the parser.
        max_malformed_fraction: the largest share of malformed rows accepted (None: any).
        **kw: passed to the parser (``strict``, ``max_rows``, ``history_length``...).

    Raises:
        ValueError: ``format`` is not a known format (the message lists the known ones).
        MalformedInputError: no good row, or too many malformed ones (``<file>:<line>: ...``).
    """
    try:
        registered = FORMATS[format]
    except KeyError:
        raise ValueError(
            f"unknown raw format {format!r}; known formats: {', '.join(sorted(FORMATS))}"
        ) from None
    try:
        table = registered.parser(paths, **kw)
    except MalformedInputError as exc:  # (not strict) a header or a file not in the format
        if kw.get("strict", False) or f"format {format}" in str(exc) or repr(format) in str(exc):
            raise
        raise MalformedInputError(
            f"{exc} (format {format!r} expects {registered.expects})") from exc
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
                                                   or as_paths(paths))[0]
    what = (f"no good rows in {read:,} read" if report.rows == 0 else
            f"{report.malformed:,} of {read:,} rows malformed, more than "
            f"dataset.max_malformed_fraction = {max_malformed_fraction:g}")
    shown = "; ".join(f"line {line}: {reason}" for _, line, reason in examples)
    raise MalformedInputError(
        f"{first}:{examples[0][1] if examples else 1}: {what} with format {format!r}. "
        f"{'First bad lines: ' + shown if shown else 'No data rows'}. {format} expects "
        f"{FORMATS[format].expects}; {first.name} looks like {describe_file(first)}")
