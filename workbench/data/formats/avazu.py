"""Avazu mobile-ad click logs: ``avazu_csv``.

Format
    ``avazu_csv`` (Kaggle ``train``)
        CSV with the header ``id,click,hour,C1,banner_pos,...,C21``. ``click`` in {0, 1} is the
        label; ``id`` is dropped; ``hour`` (``YYMMDDHH``, UTC) becomes ``timestamp`` (unix seconds)
        and the categorical tokens ``hour_of_day`` (``"00".."23"``) and ``weekday`` (``"0"`` =
        Monday .. ``"6"``); the raw ``hour`` is not a feature. The other 21 columns are
        categorical string tokens. No dense features.

A [`RowFormat`][workbench.data.formats.engine.RowFormat] format (every line is one sample, so it
streams); malformed rows (also an ``hour`` that is not ``YYMMDDHH``) as in
[`workbench.data.formats.delimited`][].
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from workbench.data.formats.delimited import BLOCK_SIZE, Checks, PathsLike
from workbench.data.formats.engine import RowFormat, binary_label, parse_rows, value_at
from workbench.data.schema import LABEL, TIMESTAMP, RawTable

__all__ = ["AVAZU_CATEGORICAL", "AVAZU_CSV", "AVAZU_HEADER", "EXPECTS", "parse_avazu_csv"]

AVAZU_HEADER = [
    "id", "click", "hour", "C1", "banner_pos", "site_id", "site_domain", "site_category",
    "app_id", "app_domain", "app_category", "device_id", "device_ip", "device_model",
    "device_type", "device_conn_type", "C14", "C15", "C16", "C17", "C18", "C19", "C20", "C21",
]
AVAZU_CATEGORICAL = [*AVAZU_HEADER[3:], "hour_of_day", "weekday"]

#: What the format expects, in the words of the error a parse without good rows raises.
EXPECTS: dict[str, str] = {
    "avazu_csv": "a CSV whose first line is the header id,click,hour,C1,banner_pos,...,C21",
}


def _avazu_convert(cols: dict[str, pa.Array], checks: Checks) -> dict[str, Any]:
    out: dict[str, Any] = {LABEL: binary_label(cols["click"], "click", checks)}
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
                    lambda i: f"bad hour {value_at(hour, i)!r} (expected YYMMDDHH)")
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
                    block_size: int = BLOCK_SIZE) -> RawTable:
    """Parse Avazu ``train`` CSV files (header ``id,click,hour,...,C21``).

    Args:
        paths: one file or several (each with the header; plain or gzip).
        strict: raise [`MalformedInputError`][] at the first malformed row.
        max_rows: keep at most this many rows.
        block_size: bytes per parsed block.

    Returns:
        ``label`` = click (float32), ``timestamp`` (unix seconds of ``hour``, UTC), categorical
        string tokens: the 21 raw feature columns, ``hour_of_day`` and ``weekday``; no dense.
    """
    return parse_rows(AVAZU_CSV, paths, strict=strict, max_rows=max_rows, block_size=block_size)
