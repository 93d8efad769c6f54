"""Range checks of the values a caller hands a function: api calls, notebook parameters, explorer
knobs, command-line options.

A parameter that stands for a config key takes that key's type and range, so the range is written
once (the ``in_range`` metadata of the config dataclass):

    check("api.replay_cache", cache_ratio=(cache_ratio, key("cache.ratio")),
          rows=(rows, arg(int, 1)))
    ->  ArgumentError: api.replay_cache: cache_ratio = 5.0: must be a number > 0.0 and <= 1.0
        (as config key cache.ratio)

Every check runs before any work; NaN and infinities are refused like in the configuration. A
keyword set of a config section (``api.dispatch(..., workers=16)``) goes through [`replace`][],
which validates the changed section exactly as the configuration is validated.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from functools import cache
from typing import Any, TypeVar

import numpy as np

from workbench.utils.validation import ConfigError, _convert, from_dict, in_range

__all__ = ["Arg", "ArgumentError", "arg", "check", "key", "replace"]

T = TypeVar("T")


class ArgumentError(ConfigError):
    """A parameter of an api call, a notebook or a command is outside its allowed range."""


@dataclass(frozen=True)
class Arg:
    """What one parameter accepts.

    Attributes:
        tp: its type, as a config field spells it (``int``, ``float``, ``int | None``,
            ``list[float]``, a ``Literal``).
        meta: the field metadata (``in_range(...)``, ``nonempty(...)``).
        source: the config key the type and range come from ("" when the parameter's own).
    """

    tp: Any
    meta: dict[str, Any] = field(default_factory=dict)
    source: str = ""

    def many(self) -> Arg:
        """A non-empty list of such values (the range applies to every element)."""
        return Arg(list.__class_getitem__(self.tp), {**self.meta, "nonempty": True}, self.source)

    def or_none(self) -> Arg:
        """The same, or None (the caller's default)."""
        return Arg(self.tp | None, self.meta, self.source)


def arg(tp: Any, lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
        hi_open: bool = False) -> Arg:
    """A parameter of its own (no config key): ``tp`` in ``[lo, hi]`` (open ends as told)."""
    return Arg(tp, in_range(lo, hi, lo_open=lo_open, hi_open=hi_open)
               if lo is not None or hi is not None else {})


@cache
def key(dotted: str) -> Arg:
    """The type and range of config key ``dotted`` (``"experiments.esd.cache_ratio"``); a key
    ending in ``[]`` is one element of a list key (``"experiments.het_train.cache_bounds[]"``).

    Raises:
        KeyError: no such key (a bug of the caller, not the user's input).
    """
    from workbench.config import WorkbenchConfig

    element = dotted.endswith("[]")
    tp: Any = WorkbenchConfig
    meta: dict[str, Any] = {}
    for part in dotted.removesuffix("[]").split("."):
        if typing.get_origin(tp) is dict:  # models.<name>.x: the value type of the mapping
            tp = typing.get_args(tp)[1]
            continue
        fields = {f.name: f for f in dataclasses.fields(tp)}
        if part not in fields:
            raise KeyError(f"{dotted}: {tp.__name__} has no field {part!r}")
        tp, meta = typing.get_type_hints(tp)[part], dict(fields[part].metadata)
    if element:
        if typing.get_origin(tp) is not list:
            raise KeyError(f"{dotted}: not a list key")
        tp = typing.get_args(tp)[0]
        meta.pop("nonempty", None)
    return Arg(tp, meta, dotted.removesuffix("[]"))


def _plain(value: Any) -> Any:
    """NumPy scalars as Python numbers, tuples and arrays as lists (what the checks compare)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (tuple, np.ndarray)):
        return [_plain(v) for v in value]
    return value


def _message(where: str, err: ConfigError, source: str) -> str:
    text = f"{where}: {err}" if where else str(err)
    return f"{text} (as config key {source})" if source else text


def check(where: str, /, **values: tuple[Any, Arg]) -> dict[str, Any]:
    """Check every ``name=(value, Arg)``; return the values converted (NumPy scalars to Python).

    Args:
        where: what takes them, the message's prefix (``"api.replay_cache"``).
        values: parameter name -> (its value, what it accepts).

    Raises:
        ArgumentError: ``"<where>: <name> = <value>: must be <range>"`` for the first bad one.
    """
    out = {}
    for name, (value, spec) in values.items():
        try:
            out[name] = _convert(_plain(value), spec.tp, name, spec.meta)
        except ConfigError as err:
            raise ArgumentError(_message(where, err, spec.source)) from None
    return out


def replace(obj: T, where: str, section: str, changes: dict[str, Any]) -> T:
    """``dataclasses.replace(obj, **changes)``, validated as the configuration validates
    ``section`` (types, ranges, NaN, the section's cross-field checks).

    Args:
        obj: a config dataclass (e.g. ``cfg.experiments.esd``).
        where: what takes the changes (``"api.dispatch"``).
        section: the config key of ``obj``, for the messages.
        changes: field -> new value.

    Raises:
        ArgumentError: an unknown field, or a value outside its range.
    """
    if not changes:
        return obj
    names = [f.name for f in dataclasses.fields(obj)]  # type: ignore[arg-type]
    unknown = sorted(set(changes) - set(names))
    if unknown:
        raise ArgumentError(f"{where}: unknown keyword {unknown[0]!r}: the keywords are the "
                            f"fields of {section}: {sorted(names)}")
    data = {**dataclasses.asdict(obj),  # type: ignore[call-overload]
            **{k: _plain(v) for k, v in changes.items()}}
    try:
        return typing.cast(T, from_dict(type(obj), data))
    except ConfigError as err:
        bad = next((k for k in changes if str(err).startswith(f"{k} =")
                    or str(err).startswith(f"{k}[")), "")
        raise ArgumentError(_message(where, err, f"{section}.{bad}" if bad else "")) from None
