"""Sniffing a raw file: what its first lines look like, and the known format they match.

[`describe_file`][] reads the head of a file (plain or gzip; 64 KiB, at most ``lines`` lines)
and names its shape, for the errors of a file given in the wrong format:

    directory | empty file | blank lines | binary data (U+FFFD and unprintable first line)
    | a known header (Avazu, MovieLens ratings.csv, DIGINETICA views or purchases)
    | [a header line, then] W <separator>-separated fields per line[, like <format>]

The separator is the first of tab, ``::``, comma, ``|``, semicolon that splits every line into
the same number (> 1) of fields. A first line is a header when none of its fields is a plain
number and some field of a later line is. Without a header the field shape picks a format:
40 tab-separated with a 0/1 first field (``criteo_tsv``), 4 tab-separated integers (MovieLens
100k ``u.data``), 4 ``::``-separated (MovieLens 1M ``ratings.dat``), 5 comma-separated with a
Taobao behavior (``taobao_user_behavior``), 4 or 5 comma-separated with an ISO-8601 UTC second
field (YOOCHOOSE clicks or buys), 39 tab-separated ending in a hex token (the Criteo Kaggle
``test.txt``: no label). A header naming the Criteo fields picks ``criteo_csv``, or without
``label`` the Criteo test set.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from workbench.data.formats.criteo import CRITEO_FIELDS
from workbench.data.formats.delimited import is_gzip
from workbench.data.formats.engine import INT_PATTERN
from workbench.data.formats.taobao import TAOBAO_BEHAVIORS

__all__ = ["describe_file"]

_NUMBER = r"-?[0-9]+(\.[0-9]+)?"  # a field that is a plain number (not a header name)
_ISO_UTC = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}(\.[0-9]+)?Z"  # YOOCHOOSE's timestamps
_HEX8 = r"[0-9a-f]{8}"  # a Criteo categorical token
#: Said of a file with the Criteo features but no label column (Kaggle's test set).
_NO_LABEL = " (a test set without labels: it cannot be trained or scored on; use the train file)"


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
    try:
        with pa.input_stream(str(path), compression="gzip" if is_gzip(path) else None) as stream:
            head = stream.read(1 << 16)
    except OSError as exc:  # a gzip file cut short or corrupt in its first 64 KiB
        return f"gzip data that cannot be read ({exc})"
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
    if header:
        guess = _criteo_header_guess([f.strip().strip('"') for f in first.split(sep)])
    if not header and rows:
        if sep_name == "tab" and width == 40 and all(r.split("\t")[0] in "01" for r in rows):
            guess = ", like criteo_tsv"
        elif sep_name == "tab" and width == len(CRITEO_FIELDS) - 1 and all(
                r.split("\t")[-1] == "" or re.fullmatch(_HEX8, r.split("\t")[-1])
                for r in rows):
            guess = f", like the Criteo Kaggle test.txt{_NO_LABEL}"
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


def _criteo_header_guess(names: Sequence[str]) -> str:
    """The guess for a header naming the Criteo fields: ``criteo_csv``, or a test file without
    the label column ("" for any other header)."""
    lowered = [n.lower() for n in names]
    fields = [f.lower() for f in CRITEO_FIELDS]
    if lowered in (fields, ["id", *fields]):
        return ", like criteo_csv (header [id,]label,I1..I13,C1..C26)"
    if lowered in (fields[1:], ["id", *fields[1:]]):
        return f", a Criteo CSV with no label column{_NO_LABEL}"
    return ""


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
    return all(re.fullmatch(INT_PATTERN, v.strip() or "x") for v in values)
