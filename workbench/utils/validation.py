"""The shared validation core of every config schema: plain data -> typed, range-checked dataclass.

Every layer declares its own schema as frozen dataclasses next to the code it configures
(``workbench/<layer>/config.py``); [`workbench.config`][] composes them into the whole
configuration. This module is the one converter they share:

    resolved Hydra dict --from_dict(cls)--> cls(...)    every key known, every type and range
                                                        checked, then the schema's own
                                                        __post_init__ cross-field checks

A field declares its interval as metadata (``field(default=0.1, metadata=in_range(0, 1,
lo_open=True))``); for a list field the interval applies to every element, and
``nonempty(...)`` makes an empty list an error (a sweep with no point would silently drop a
figure). A number must be finite everywhere (NaN and infinities are rejected: a bound that means
"infinite" is spelled as the schema documents, e.g. ``-1``). A bad value stops with one line
naming the dotted key, the value and what is allowed:

    ConfigError: cache.ratio = 1.5: must be a number > 0.0 and <= 1.0

Hand-written rather than pydantic: the messages above are the contract (tests pin them), the
schemas stay plain frozen dataclasses that any layer can import without a dependency, and the
whole converter is the hundred lines below.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any, Literal

from workbench.utils.errors import UserError


class ConfigError(UserError, ValueError):
    """A configuration value is missing, unknown or outside its allowed range."""


#: The magnitude every integer setting stays below: counts, sizes and bounds are int64 in the
#: numba kernels, and sums of two of them must not overflow.
INT_LIMIT = 2**62


def in_range(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
             hi_open: bool = False) -> dict[str, Any]:
    """Field metadata: the allowed numeric interval (for a list field: of every element).

    Args:
        lo: lower bound (None: unbounded).
        hi: upper bound (None: unbounded).
        lo_open: exclude ``lo`` itself.
        hi_open: exclude ``hi`` itself.
    """
    return {"range": (lo, hi, lo_open, hi_open)}


def nonempty(meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """Field metadata of a list that must hold at least one element (plus ``meta``, e.g. a range
    for every element: ``nonempty(in_range(1, None))``)."""
    return {**(meta or {}), "nonempty": True}


def check_each(key: str, values: Iterable[Any], ok: Callable[[Any], bool], must: str) -> None:
    """Raise ``ConfigError("<key>[i] = <value>: must be <must>")`` for the first bad element.

    Args:
        key: the list's key, relative to its schema.
        values: the elements.
        ok: the predicate every element must satisfy.
        must: what is allowed, as the message says it (``"in (0, 1]"``, ``">= 1"``).
    """
    for i, value in enumerate(values):
        if not ok(value):
            raise ConfigError(f"{key}[{i}] = {value!r}: must be {must}")


def _describe(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (list, dict):
        return str(tp).replace("typing.", "")
    return getattr(tp, "__name__", str(tp))


def _convert(value: Any, tp: Any, key: str, meta: dict[str, Any] | None = None) -> Any:
    """Convert a plain (OmegaConf-resolved) value to ``tp``, raising ConfigError on mismatch."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            if type(None) in args:
                return None
            raise ConfigError(f"{key} = null: a value is required")
        non_none = [a for a in args if a is not type(None)]
        return _convert(value, non_none[0], key, meta)
    if value is None:
        raise ConfigError(f"{key} = null: a value is required ({_describe(tp)})")
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"{key} = {value!r}: must be {_describe(tp)}")
        return value
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{key} = {value!r}: must be a mapping of {tp.__name__} fields")
        return from_dict(tp, value, key)
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{key} = {value!r}: must be a list")
        if not value and meta and meta.get("nonempty"):
            raise ConfigError(f"{key} = []: must not be empty (give at least one value)")
        return [_convert(v, args[0], f"{key}[{i}]", meta) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key} = {value!r}: must be a mapping")
        return {str(k): _convert(v, args[1], f"{key}.{k}") for k, v in value.items()}
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key} = {value!r}: must be true or false")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key} = {value!r}: must be an integer{range_text(meta)}")
        _check_range(value, key, meta)
        if abs(value) >= INT_LIMIT:  # every count, size and bound is an int64 in the kernels
            raise ConfigError(f"{key} = {value}: must be below 2**62 in size (counts, sizes "
                              "and bounds are 64-bit integers in the kernels)")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key} = {value!r}: must be a number{range_text(meta)}")
        if not math.isfinite(value):
            raise ConfigError(f"{key} = {value!r}: must be a finite number{range_text(meta)}")
        _check_range(float(value), key, meta)
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key} = {value!r}: must be a string")
        return value
    raise TypeError(f"unsupported config type {tp} at {key}")


def range_text(meta: dict[str, Any] | None) -> str:
    """A field's allowed range as the errors and ``--help`` show it (``" >= 1 and <= 64"``), or
    ``""`` when its metadata gives none."""
    if not meta or "range" not in meta:
        return ""
    lo, hi, lo_open, hi_open = meta["range"]
    parts = []
    if lo is not None:
        parts.append(f"{'>' if lo_open else '>='} {lo}")
    if hi is not None:
        parts.append(f"{'<' if hi_open else '<='} {hi}")
    return " " + " and ".join(parts)


def _check_range(value: float, key: str, meta: dict[str, Any] | None) -> None:
    if not meta or "range" not in meta:
        return
    lo, hi, lo_open, hi_open = meta["range"]
    bad = (lo is not None and (value < lo or (lo_open and value == lo))) or \
          (hi is not None and (value > hi or (hi_open and value == hi)))
    if bad:
        kind = "an integer" if isinstance(value, int) else "a number"
        raise ConfigError(f"{key} = {value!r}: must be {kind}{range_text(meta)}")


def unknown_key(prefix: str, name: str, allowed: Iterable[str]) -> ConfigError:
    """The error for key ``name`` under ``prefix``: the closest allowed key ("did you mean")
    and every allowed one."""
    import difflib

    dot = f"{prefix}." if prefix else ""
    allowed = sorted(allowed)
    close = difflib.get_close_matches(name, allowed, n=1)
    hint = f"did you mean {dot}{close[0]}? " if close else ""
    shown = name if len(name) <= 60 else f"{name[:40]}... ({len(name):,} characters)"
    return ConfigError(f"unknown key {dot}{shown}: {hint}allowed keys of "
                       f"{prefix or 'the config'} are {allowed}")


def from_dict(cls: type, data: dict[str, Any], prefix: str = "") -> Any:
    """Build and validate dataclass ``cls`` from a plain dict.

    Args:
        cls: the dataclass type.
        data: plain (resolved) mapping; unknown keys are an error.
        prefix: dotted key of ``data`` in the whole config, for messages.

    Raises:
        ConfigError: naming the dotted key, the value and what is allowed.
    """
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    dot = f"{prefix}." if prefix else ""
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise unknown_key(prefix, unknown[0], fields)
    kwargs = {name: _convert(data[name], hints[name], f"{dot}{name}", dict(fields[name].metadata))
              for name in fields if name in data}
    try:
        return cls(**kwargs)
    except ConfigError as err:  # a cross-field check in __post_init__: its key is relative
        if not prefix:
            raise
        raise ConfigError(f"{dot}{err}") from None

