"""Taobao user behaviour logs: ``taobao_user_behavior``.

Format
    ``taobao_user_behavior`` (Tianchi ``UserBehavior.csv``)
        No header: ``user_id,item_id,category_id,behavior_type,timestamp``; behavior in
        {pv, buy, cart, fav} (anything else is malformed). Label = 1.0 for buy, cart and fav (an
        engagement beyond a page view), 0.0 for pv. Categorical int64 tokens ``user_id``,
        ``item_id``, ``category_id``; ``session`` = user id; rows stably sorted by
        (user, timestamp). ``user_side`` = ``[user_id]``. ``history_length`` > 0 adds
        ``hist_item_id`` (the user's previous items; see [`workbench.data.formats.engine`][]).

A [`RowFormat`][workbench.data.formats.engine.RowFormat] format (every line is one sample, so it
streams); malformed rows as in [`workbench.data.formats.delimited`][].
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from workbench.data.formats.delimited import BLOCK_SIZE, Checks, PathsLike, np_bool
from workbench.data.formats.engine import RowFormat, int_column, parse_rows, value_at
from workbench.data.schema import LABEL, SESSION, TIMESTAMP, RawTable

__all__ = [
    "EXPECTS",
    "TAOBAO_BEHAVIORS",
    "TAOBAO_FIELDS",
    "TAOBAO_POSITIVE",
    "TAOBAO_USER_BEHAVIOR",
    "parse_taobao_user_behavior",
]

TAOBAO_FIELDS = ["user_id", "item_id", "category_id", "behavior_type", TIMESTAMP]
TAOBAO_POSITIVE = ("buy", "cart", "fav")
TAOBAO_BEHAVIORS = ("pv", *TAOBAO_POSITIVE)

#: What the format expects, in the words of the error a parse without good rows raises.
EXPECTS: dict[str, str] = {
    "taobao_user_behavior": "no header; 5 comma-separated fields per line: user_id,item_id,"
                            "category_id,behavior (pv/buy/cart/fav),timestamp",
}


def _taobao_convert(cols: dict[str, pa.Array], checks: Checks) -> dict[str, Any]:
    out = {name: int_column(cols[name], name, checks)
           for name in ("user_id", "item_id", "category_id", TIMESTAMP)}
    behavior = cols["behavior_type"]
    checks.fail(pc.is_null(behavior), "missing behavior_type")
    unknown = pc.and_(pc.invert(pc.is_in(behavior, value_set=pa.array(list(TAOBAO_BEHAVIORS)))),
                      pc.is_valid(behavior))
    checks.fail(unknown, lambda i: f"unknown behavior_type {value_at(behavior, i)!r} "
                                   f"(expected one of {', '.join(TAOBAO_BEHAVIORS)})")
    positive = pc.is_in(behavior, value_set=pa.array(list(TAOBAO_POSITIVE)))
    return {LABEL: np_bool(positive).astype(np.float32), "user_id": out["user_id"],
            "item_id": out["item_id"], "category_id": out["category_id"],
            SESSION: out["user_id"], TIMESTAMP: out[TIMESTAMP]}


TAOBAO_USER_BEHAVIOR = RowFormat(
    "taobao_user_behavior", tuple(TAOBAO_FIELDS), ",", _taobao_convert,
    categorical=("user_id", "item_id", "category_id"), user_side=("user_id",), has_session=True,
    has_timestamp=True, order_by=("user_id", TIMESTAMP), history_item="item_id")


def parse_taobao_user_behavior(paths: PathsLike, *, strict: bool = False,
                               max_rows: int | None = None, history_length: int = 0,
                               block_size: int = BLOCK_SIZE) -> RawTable:
    """Parse Taobao ``UserBehavior.csv`` (``user,item,category,behavior,timestamp``, no header).

    Args:
        paths: one file or several (plain or gzip).
        strict: raise [`MalformedInputError`][] at the first malformed row.
        max_rows: keep at most this many rows (the first of the file, before sorting).
        history_length: add ``hist_item_id`` with up to this many previous items when > 0.
        block_size: bytes per parsed block.

    Returns:
        label = 1.0 for buy/cart/fav, 0.0 for pv; categorical int64 tokens ``user_id``,
        ``item_id``, ``category_id``; session = user id; stably sorted by (user, timestamp).
    """
    return parse_rows(TAOBAO_USER_BEHAVIOR, paths, strict=strict, max_rows=max_rows,
                      history_length=history_length, block_size=block_size)
