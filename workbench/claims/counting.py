"""Claims that share one measurement: the verdict counts count measurements, not rows.

Two register entries can be read from one measurement: Fig. 7a's WDL, DFM and DCN rows read the
embedding exchange of one replay, which does not depend on the model, so the three rows hold one
number judged against three paper values. Counting them as three reproductions would count one
replay three times. Formally, with ``by(e) = (stage, file, column)`` of entry e's
``measured_by`` and ``v(r) = (measured, mean, ci_low, ci_high, seeds)`` of its row r:

    r ~ r'   iff   by(e) = by(e')  and  v(r) = v(r')  (exactly; a row without a mean is alone)
    measurement_id(r) = the key of the first row of r's class, in register order

The index shows one row per measurement and state (its claims named, their paper values side by
side), and every count (the index's verdict table, the DVC metrics, the README and the docs) is
the number of distinct ``(measurement_id, state)`` pairs: a measurement judged ``reproduced``
against one paper value and ``direction only`` against another counts once in each state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from workbench.claims import register as reg

#: The row fields that make two rows one measurement (with the entry's measured_by).
VALUE_FIELDS = ("measured", "mean", "ci_low", "ci_high", "seeds")


def _value(row: dict[str, Any]) -> tuple | None:
    """The row's measured values, or None when it has none (never shared)."""
    mean = row.get("mean")
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return None
    return tuple(str(row.get(k)) for k in VALUE_FIELDS)


def measurement_keys(claims: Sequence[dict[str, Any]], register: reg.Register) -> list[str]:
    """Each row's measurement: the key of the first row (in the rows' order) that holds the same
    measurement (the module docstring's relation); a row's own key when none before it does.

    Args:
        claims: the judged rows (``key``, ``measured``, ``mean``, ...).
        register: the register whose entries name each row's ``measured_by``.

    Returns:
        One key per row.

    Example:
        >>> from workbench.claims.register import load
        >>> rows = [{"key": "het.fig7a_comm.wdl", "measured": "6.25x", "mean": 6.25,
        ...          "ci_low": 6.25, "ci_high": 6.25, "seeds": 1},
        ...         {"key": "het.fig7a_comm.dcn", "measured": "6.25x", "mean": 6.25,
        ...          "ci_low": 6.25, "ci_high": 6.25, "seeds": 1}]
        >>> measurement_keys(rows, load())
        ['het.fig7a_comm.wdl', 'het.fig7a_comm.wdl']
    """
    first: dict[tuple, str] = {}
    out = []
    for row in claims:
        value = _value(row)
        if value is None or row["key"] not in register.keys():
            out.append(row["key"])
            continue
        by = register[row["key"]].measured_by
        ident = (str(by.get("stage")), str(by.get("file")), str(by.get("column")), *value)
        out.append(first.setdefault(ident, row["key"]))
    return out


def counted(claims: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows a count counts: the first row of each distinct ``(measurement_id, state)`` (a row
    without a ``measurement_id`` counts as its own)."""
    seen: set[tuple[str, str]] = set()
    out = []
    for row in claims:
        pair = (str(row.get("measurement_id") or row["key"]), str(row["state"]))
        if pair not in seen:
            seen.add(pair)
            out.append(row)
    return out


def shared_with(claims: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per row counted ([`counted`][]), by key: every row of its measurement and state, in
    order (itself first)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in claims:
        pair = (str(row.get("measurement_id") or row["key"]), str(row["state"]))
        groups.setdefault(pair, []).append(row)
    return {rows[0]["key"]: rows for rows in groups.values()}


def variants(keys: Sequence[str]) -> str:
    """The keys' distinct last parts after their common prefix, e.g. ``wdl/deepfm/dcn`` for
    ``het.fig7a_comm.{wdl,deepfm,dcn}`` (the whole keys when they share no prefix)."""
    parts = [k.split(".") for k in keys]
    common = 0
    while all(len(p) > common + 1 and p[common] == parts[0][common] for p in parts):
        common += 1
    return "/".join(".".join(p[common:]) for p in parts)
