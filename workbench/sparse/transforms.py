"""Feature preprocessing on unique rows: RecD's "transform each unique value once".

A *transform* here is a function of ONE list: the ids of one key for one sample (a *row* of that
key). Hashing, vocabulary remapping, bucketizing and truncating a history are all of this kind;
each transform takes a [`JaggedTensor`][workbench.sparse.jagged_tensor.JaggedTensor] of ``B`` lists
and returns ``B`` lists, list ``i`` of the output depending only on list ``i`` of the input.

Formal model. Let ``f`` be such a row-wise transform (or a chain of them: a composition of
row-wise functions is row-wise) and take a dedup group with unique rows ``u_0 .. u_{U-1}`` and
inverse lookup ``inv``, so that sample ``s`` holds ``row_s = u_{inv[s]}`` (``to_ikjt``). Then
``f(row_s) = f(u_{inv[s]})``: transforming the ``U`` unique rows and gathering through the
unchanged inverse lookup gives exactly the transformed batch. For [`FeatureTransforms`][]
this is the identity

    ``apply_ikjt(to_ikjt(kjt, groups)).expand() == apply_kjt(kjt)``   (for every grouping)

and the work saved is the ratio of values processed,
``values_processed_kjt(kjt) / values_processed_ikjt(to_ikjt(kjt, groups))``, i.e. each
transformed key's dedup factor weighted by its list lengths. One batch, one key, ``f`` = keep
the last 2 ids then hash:

    KJT rows (B = 4)        apply_kjt: f on all 4 rows (12 values in)
      s0  [3, 4, 5]   --f-->  f([3, 4, 5])
      s1  [4, 5, 6]   --f-->  f([4, 5, 6])
      s2  [3, 4, 5]   --f-->  f([3, 4, 5])      <- same work as s0, done again
      s3  [3, 4, 5]   --f-->  f([3, 4, 5])

    IKJT (to_ikjt)          apply_ikjt: f on the 2 unique rows (6 values in)
      u0  [3, 4, 5]   --f-->  f([3, 4, 5])  --+
      u1  [4, 5, 6]   --f-->  f([4, 5, 6])  --+--> expand(): sample s gets row inv[s],
      inv [0, 1, 0, 0]  (kept unchanged) -----+    i.e. exactly the 4 rows above

    work saved = 12 / 6 = 2x (= the group's dedup factor here, all rows having equal length)

Transforms that are NOT row-wise (batch statistics such as normalising by the batch mean, or
crossing two keys of different dedup groups) do not commute with deduplication and do not belong
here. After a transform, two unique rows of an IKJT may have become equal (a hash collision, a
truncation cutting off the only difference); the IKJT is still correct (``expand()`` is exact),
merely not maximally deduplicated.

Every transform is a small frozen dataclass, validates its arguments in ``__post_init__``
(``ValueError`` naming the argument and its allowed range) and is fully vectorised over the
batch (numpy; no per-list Python loop). [`from_spec`][] builds a [`FeatureTransforms`][]
from a config mapping such as:

    {"item_id": [{"op": "hash", "num_buckets": 1000}],
     "hist_item_id": [{"op": "truncate", "max_length": 20},
                      {"op": "hash", "num_buckets": 1000, "salt": 1}],
     "age": [{"op": "bucketize", "boundaries": [18, 25, 35]}]}
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from workbench.sparse.jagged_tensor import InverseKeyedJaggedTensor, JaggedTensor, KeyedJaggedTensor

__all__ = [
    "Bucketize",
    "FeatureTransforms",
    "HashIds",
    "Remap",
    "Transform",
    "Truncate",
    "from_spec",
]

Transform = Callable[[JaggedTensor], JaggedTensor]
"""Row-wise transform: ``B`` lists in, ``B`` lists out, list ``i`` depending only on list ``i``."""

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_UINT64_MAX = 2**64 - 1
_BOUND_TEXT = {_INT64_MIN: "-2**63", _INT64_MAX: "2**63 - 1", _UINT64_MAX: "2**64 - 1"}


# ------------------------------------------------------------------------------------------------
# helpers


def _check_int(name: str, value: object, lo: int, hi: int) -> int:
    """``value`` as a Python int if it is an integer (not a bool) in ``[lo, hi]``.

    Raises:
        ValueError: naming ``name`` and the allowed range otherwise.
    """
    if (isinstance(value, bool) or not isinstance(value, int | np.integer)
            or not lo <= int(value) <= hi):
        raise ValueError(f"{name} must be an integer in [{_BOUND_TEXT.get(lo, lo)}, "
                         f"{_BOUND_TEXT.get(hi, hi)}], got {value!r}")
    return int(value)


_GOLDEN = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB


def _splitmix64_int(x: int) -> int:
    """splitmix64 (Steele et al.; add the golden gamma, then finalise) on one Python int."""
    z = (x + _GOLDEN) & _UINT64_MAX
    z = ((z ^ (z >> 30)) * _M1) & _UINT64_MAX
    z = ((z ^ (z >> 27)) * _M2) & _UINT64_MAX
    return z ^ (z >> 31)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 on a uint64 array (array arithmetic wraps modulo 2**64 silently)."""
    z = x + np.uint64(_GOLDEN)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(_M1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(_M2)
    return z ^ (z >> np.uint64(31))


# ------------------------------------------------------------------------------------------------
# transforms


@dataclass(frozen=True)
class HashIds:
    """Sigrid-style id hashing: ``id -> splitmix64(id ^ splitmix64(salt)) % num_buckets``.

    Ids are taken as their 64-bit two's-complement pattern (uint64), so negative ids hash too;
    the arithmetic wraps modulo 2**64. Lengths are unchanged.

    Args:
        num_buckets: size of the hashed id space, in ``[1, 2**63 - 1]``.
        salt: in ``[0, 2**64 - 1]``; different salts give independent hash functions (e.g. one
            per table sharing a key).

    Raises:
        ValueError: an argument out of range or not an integer.

    Example:

        HashIds(10)(JaggedTensor(np.array([0, 1, 0]), np.array([2, 1]))).to_list()
        # [[h0, h1], [h0]]: equal ids hash equally, every h in [0, 10)
    """

    num_buckets: int
    salt: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "num_buckets",
                           _check_int("num_buckets", self.num_buckets, 1, _INT64_MAX))
        object.__setattr__(self, "salt", _check_int("salt", self.salt, 0, _UINT64_MAX))

    def hash_ids(self, ids: np.ndarray) -> np.ndarray:
        """Hash a flat array of int64 ids (int64 result in ``[0, num_buckets)``)."""
        bits = np.ascontiguousarray(ids, dtype=np.int64).view(np.uint64)
        mixed = _splitmix64(bits ^ np.uint64(_splitmix64_int(self.salt)))
        return (mixed % np.uint64(self.num_buckets)).astype(np.int64)

    def __call__(self, jt: JaggedTensor) -> JaggedTensor:
        """Hash every id of ``jt``."""
        return JaggedTensor(self.hash_ids(jt.values()), jt.lengths())


@dataclass(frozen=True, eq=False, repr=False)
class Remap:
    """Vocabulary remapping: ``id -> table[id]`` for ``0 <= id < len(table)``, else ``default``.

    ``table`` is copied into a read-only int64 array, so later changes to the caller's array do
    not leak in. Instances compare and hash by identity (a table can be large). Lengths are
    unchanged.

    Args:
        table: 1-D integer array (or sequence) mapping raw ids to compact ids; may be empty.
        default: id given to raw ids outside ``[0, len(table))``, in ``[-2**63, 2**63 - 1]``.

    Raises:
        ValueError: ``table`` not a 1-D array of int64-range integers, or a bad ``default``.

    Example:

        Remap(np.array([5, 6, 7]), default=-1)(JaggedTensor(np.array([2, 3, -1, 0]),
                                                            np.array([3, 1]))).to_list()
        # [[7, -1, -1], [5]]
    """

    table: np.ndarray
    default: int = 0

    def __post_init__(self) -> None:
        try:
            arr = np.asarray(self.table if isinstance(self.table, np.ndarray)
                             else list(self.table))
        except (TypeError, ValueError, OverflowError) as err:
            raise ValueError(f"table must be a 1-D sequence of integers in [-2**63, 2**63 - 1], "
                             f"got {type(self.table).__name__}: {err}") from None
        if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
            raise ValueError("table must be a 1-D sequence of integers in [-2**63, 2**63 - 1], "
                             f"got shape {arr.shape} dtype {arr.dtype}")
        if arr.size and arr.dtype.kind == "u" and int(arr.max()) > _INT64_MAX:
            raise ValueError(f"table must hold integers in [-2**63, 2**63 - 1], "
                             f"got {int(arr.max())}")
        table = np.array(arr, dtype=np.int64, copy=True)
        table.setflags(write=False)
        object.__setattr__(self, "table", table)
        object.__setattr__(self, "default",
                           _check_int("default", self.default, _INT64_MIN, _INT64_MAX))

    def __call__(self, jt: JaggedTensor) -> JaggedTensor:
        """Remap every id of ``jt``."""
        ids = jt.values()
        known = (ids >= 0) & (ids < self.table.size)
        out = np.full(ids.size, self.default, dtype=np.int64)
        out[known] = self.table[ids[known]]
        return JaggedTensor(out, jt.lengths())

    def __repr__(self) -> str:
        return f"Remap(table=<int64[{self.table.size}]>, default={self.default})"


def _bucket_thresholds(boundaries: tuple[int | float, ...]) -> np.ndarray:
    """Integer thresholds ``t_j`` with ``b_j <= v  <=>  t_j <= v`` for every int64 ``v``.

    ``t_j = ceil(b_j)`` (exact for ints and floats), ``-inf`` and boundaries below ``-2**63``
    become ``-2**63``; boundaries no int64 reaches (``+inf``, above ``2**63 - 1``) are dropped,
    which keeps the counts right because they can only be at the end of an increasing tuple.
    """
    out: list[int] = []
    for b in boundaries:
        if b == -math.inf:
            out.append(_INT64_MIN)
            continue
        if b == math.inf or math.ceil(b) > _INT64_MAX:
            break
        out.append(max(math.ceil(b), _INT64_MIN))
    return np.array(out, dtype=np.int64)


@dataclass(frozen=True)
class Bucketize:
    """Bucketize a numeric feature: ``v -> np.searchsorted(boundaries, v, side="right")``.

    The bucket is the number of boundaries ``<= v``: ``0`` below the first boundary,
    ``len(boundaries)`` at or above the last. Int and float boundaries (``±inf`` included) are
    compared with the int64 values *exactly* (no rounding of large ids to float64). Lengths are
    unchanged.

    Args:
        boundaries: non-empty, strictly increasing ints or floats (no NaN); a list is stored as
            a tuple.

    Raises:
        ValueError: empty, not strictly increasing, NaN or non-numeric boundaries.

    Example:

        Bucketize((18, 25, 35))(JaggedTensor(np.array([17, 18, 30, 99]), np.array([4])))
        # [[0, 1, 2, 3]]
    """

    boundaries: tuple[int | float, ...]
    _thresholds: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        raw = self.boundaries
        if isinstance(raw, str | bytes) or not isinstance(raw, Iterable):
            # ValueError, not TypeError: one exception type for every bad argument (from_spec)
            raise ValueError(  # noqa: TRY004
                "boundaries must be a non-empty, strictly increasing sequence of numbers, "
                f"got {raw!r}")
        bounds: list[int | float] = []
        for i, b in enumerate(raw):
            if isinstance(b, bool) or not isinstance(b, int | float | np.integer | np.floating):
                raise ValueError(  # noqa: TRY004
                    f"boundaries[{i}] must be an int or float, got {b!r}")
            b = int(b) if isinstance(b, int | np.integer) else float(b)
            if isinstance(b, float) and math.isnan(b):
                raise ValueError(f"boundaries[{i}] is NaN; boundaries must be numbers, "
                                 "strictly increasing")
            if bounds and not b > bounds[-1]:
                raise ValueError(f"boundaries must be strictly increasing, but boundaries[{i}] = "
                                 f"{b!r} <= boundaries[{i - 1}] = {bounds[-1]!r}")
            bounds.append(b)
        if not bounds:
            raise ValueError("boundaries must be a non-empty, strictly increasing sequence of "
                             "numbers, got an empty one")
        object.__setattr__(self, "boundaries", tuple(bounds))
        object.__setattr__(self, "_thresholds", _bucket_thresholds(self.boundaries))

    def __call__(self, jt: JaggedTensor) -> JaggedTensor:
        """Replace every value of ``jt`` by its bucket index."""
        buckets = np.searchsorted(self._thresholds, jt.values(), side="right")
        return JaggedTensor(buckets.astype(np.int64, copy=False), jt.lengths())


@dataclass(frozen=True)
class Truncate:
    """Keep at most ``max_length`` ids of each list (sequence features such as a history).

    Args:
        max_length: maximum list length kept, in ``[0, 2**63 - 1]``.
        keep: ``"last"`` (default: the most recent ids, lists being in time order) or
            ``"first"``.

    Raises:
        ValueError: ``max_length`` out of range, or ``keep`` not ``"last"``/``"first"``.

    Example:

        Truncate(2)(JaggedTensor(np.array([1, 2, 3, 4]), np.array([3, 0, 1]))).to_list()
        # [[2, 3], [], [4]]
    """

    max_length: int
    keep: Literal["last", "first"] = "last"

    def __post_init__(self) -> None:
        object.__setattr__(self, "max_length",
                           _check_int("max_length", self.max_length, 0, _INT64_MAX))
        if self.keep not in ("last", "first"):
            raise ValueError(f"keep must be one of ['first', 'last'], got {self.keep!r}")

    def __call__(self, jt: JaggedTensor) -> JaggedTensor:
        """Truncate every list of ``jt``."""
        lengths, values = jt.lengths(), jt.values()
        if not lengths.size or int(lengths.max()) <= self.max_length:
            return jt
        pos = np.arange(values.size, dtype=np.int64) - np.repeat(jt.offsets()[:-1], lengths)
        if self.keep == "first":
            kept = pos < self.max_length
        else:
            kept = pos >= np.repeat(lengths - self.max_length, lengths)
        return JaggedTensor(values[kept], np.minimum(lengths, self.max_length))


# ------------------------------------------------------------------------------------------------
# per-key chains


class FeatureTransforms:
    """A chain of row-wise transforms per key, applied to a KJT or to an IKJT's unique rows.

    Args:
        per_key: ``{key: [transform, ...]}``; transforms run in order. Keys of a batch not
            named here pass through unchanged; an empty chain is allowed (and processes
            nothing).

    Raises:
        TypeError: a non-string key, or a chain that is not a sequence of callables.

    Example:

        ft = FeatureTransforms({"b": [Truncate(2), HashIds(100)]})
        kjt = KeyedJaggedTensor.from_dict({"b": [[3, 4, 5], [4, 5, 6], [3, 4, 5]]})
        ikjt = to_ikjt(kjt, [["b"]])
        ft.apply_ikjt(ikjt).expand() == ft.apply_kjt(kjt)            # True
        ft.values_processed_kjt(kjt), ft.values_processed_ikjt(ikjt) # (9, 6)
    """

    def __init__(self, per_key: Mapping[str, Sequence[Transform]]) -> None:
        chains: dict[str, tuple[Transform, ...]] = {}
        for key, steps in per_key.items():
            if not isinstance(key, str):
                raise TypeError(f"keys must be strings, got {key!r}")
            if callable(steps) or isinstance(steps, str | bytes) \
                    or not isinstance(steps, Iterable):
                raise TypeError(f"transforms of key {key!r} must be a sequence of transforms "
                                f"(write [step] for one), got {steps!r}")
            chain = tuple(steps)
            for i, step in enumerate(chain):
                if not callable(step):
                    raise TypeError(f"transform {key}[{i}] is not callable: {step!r}")
            chains[key] = chain
        self._chains = chains

    @property
    def per_key(self) -> dict[str, tuple[Transform, ...]]:
        """``{key: chain}`` (a copy)."""
        return dict(self._chains)

    def _check_keys(self, keys: Sequence[str]) -> None:
        """Raise ``KeyError`` if a chain names a key the batch does not have."""
        unknown = [k for k in self._chains if k not in keys]
        if unknown:
            raise KeyError(f"transforms name unknown key(s) {unknown}; the batch has keys "
                           f"{list(keys)}")

    def _run(self, key: str, jt: JaggedTensor) -> JaggedTensor:
        """Apply ``key``'s chain to ``jt``, checking each step keeps the number of lists."""
        for i, step in enumerate(self._chains.get(key, ())):
            out = step(jt)
            if not isinstance(out, JaggedTensor) or out.batch_size != jt.batch_size:
                got = (f"{out.batch_size} lists" if isinstance(out, JaggedTensor)
                       else type(out).__name__)
                raise ValueError(f"transform {key}[{i}] ({step!r}) must map {jt.batch_size} lists "
                                 f"to {jt.batch_size} lists (a row-wise transform), got {got}")
            jt = out
        return jt

    def apply_kjt(self, kjt: KeyedJaggedTensor) -> KeyedJaggedTensor:
        """Transform every row of ``kjt``.

        Args:
            kjt: the batch.

        Returns:
            A KJT with the same keys (same order) and batch size; keys without a chain are
            unchanged.

        Raises:
            KeyError: a chain names a key ``kjt`` lacks.
        """
        keys = kjt.keys()
        self._check_keys(keys)
        jts = [self._run(k, kjt[k]) for k in keys]
        return KeyedJaggedTensor(keys, np.concatenate([jt.values() for jt in jts]),
                                 np.concatenate([jt.lengths() for jt in jts]))

    def apply_ikjt(self, ikjt: InverseKeyedJaggedTensor) -> InverseKeyedJaggedTensor:
        """Transform only the unique rows of ``ikjt``; groups and inverse lookups are kept.

        ``apply_ikjt(to_ikjt(kjt, groups)).expand() == apply_kjt(kjt)`` for row-wise chains.

        Args:
            ikjt: the deduplicated batch.

        Returns:
            An IKJT with the same keys, groups and inverse lookups (the same arrays).

        Raises:
            KeyError: a chain names a key ``ikjt`` lacks.
        """
        keys = ikjt.keys()
        self._check_keys(keys)
        jts = {k: self._run(k, ikjt[k]) for k in keys}
        return InverseKeyedJaggedTensor(
            keys, ikjt.groups,
            {k: jt.values() for k, jt in jts.items()},
            {k: jt.lengths() for k, jt in jts.items()},
            [ikjt.inverse_lookup(g) for g in ikjt.groups])

    def values_processed_kjt(self, kjt: KeyedJaggedTensor) -> int:
        """Input values of the transformed keys (non-empty chains) of ``kjt``: the work of
        [`apply_kjt`][].

        Raises:
            KeyError: a chain names a key ``kjt`` lacks.
        """
        self._check_keys(kjt.keys())
        return int(sum(kjt[k].values().size for k, chain in self._chains.items() if chain))

    def values_processed_ikjt(self, ikjt: InverseKeyedJaggedTensor) -> int:
        """Input values (unique rows only) of the transformed keys of ``ikjt``: the work of
        [`apply_ikjt`][]; never more than [`values_processed_kjt`][] of ``ikjt.expand()``.

        Raises:
            KeyError: a chain names a key ``ikjt`` lacks.
        """
        self._check_keys(ikjt.keys())
        return int(sum(ikjt[k].values().size for k, chain in self._chains.items() if chain))

    def __repr__(self) -> str:
        chains = ", ".join(f"{k!r}: {list(c)!r}" for k, c in self._chains.items())
        return f"FeatureTransforms({{{chains}}})"


# ------------------------------------------------------------------------------------------------
# config


_OPS: dict[str, tuple[type, tuple[str, ...], tuple[str, ...]]] = {
    # op: (class, required arguments, optional arguments)
    "bucketize": (Bucketize, ("boundaries",), ()),
    "hash": (HashIds, ("num_buckets",), ("salt",)),
    "remap": (Remap, ("table",), ("default",)),
    "truncate": (Truncate, ("max_length",), ("keep",)),
}


def _step_from_spec(where: str, step: object) -> Transform:
    """One transform from ``{"op": ..., **arguments}``; ``where`` prefixes error messages."""
    ops = sorted(_OPS)
    if not isinstance(step, Mapping):
        raise ValueError(  # noqa: TRY004 (every config error is a ValueError)
            f"{where}: must be a mapping with an 'op' entry (one of {ops}), got {step!r}")
    if "op" not in step:
        raise ValueError(f"{where}.op: missing; must be one of {ops}")
    op = step["op"]
    if not isinstance(op, str) or op not in _OPS:
        raise ValueError(f"{where}.op = {op!r}: must be one of {ops}")
    cls, required, optional = _OPS[op]
    allowed = sorted(required + optional)
    args = {k: v for k, v in step.items() if k != "op"}
    for name in args:
        if name not in allowed:
            raise ValueError(f"{where}.{name}: unknown argument of op {op!r}; its arguments "
                             f"are {allowed} (required: {list(required)})")
    for name in required:
        if name not in args:
            raise ValueError(f"{where}.{name}: missing argument of op {op!r}; its arguments "
                             f"are {allowed} (required: {list(required)})")
    try:
        return cls(**args)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{where} (op {op!r}): {err}") from err


def from_spec(spec: Mapping[str, Sequence[Mapping[str, object]]]) -> FeatureTransforms:
    """Build [`FeatureTransforms`][] from a config mapping (e.g. a Hydra/YAML section).

    Args:
        spec: ``{key: [{"op": name, **arguments}, ...]}``. Ops and arguments (``*`` optional):
            ``hash`` (``num_buckets``, ``salt*``), ``remap`` (``table`` list, ``default*``),
            ``bucketize`` (``boundaries`` list), ``truncate`` (``max_length``, ``keep*``).

    Returns:
        The transforms, chains in the spec's order.

    Raises:
        ValueError: a malformed spec, an unknown op, or a missing, unknown or invalid argument;
            the message names the place (``transforms.<key>[<step>]``) and what is allowed, e.g.
            ``transforms.item_id[0].op = 'foo': must be one of ['bucketize', 'hash', 'remap',
            'truncate']``.

    Example:

        ft = from_spec({"item_id": [{"op": "hash", "num_buckets": 1000}],
                        "age": [{"op": "bucketize", "boundaries": [18, 25, 35]}]})
        ft.per_key["age"]   # (Bucketize(boundaries=(18, 25, 35)),)
    """
    if not isinstance(spec, Mapping):
        raise ValueError(  # noqa: TRY004 (every config error is a ValueError)
            f"transforms: must be a mapping {{key: [steps]}}, got {spec!r}")
    per_key: dict[str, list[Transform]] = {}
    for key, steps in spec.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"transforms: keys must be non-empty strings, got {key!r}")
        if isinstance(steps, str | bytes | Mapping) or not isinstance(steps, Iterable):
            raise ValueError(f"transforms.{key}: must be a list of steps "  # noqa: TRY004
                             f"[{{'op': ..., ...}}, ...], got {steps!r}")
        per_key[key] = [_step_from_spec(f"transforms.{key}[{i}]", step)
                        for i, step in enumerate(steps)]
    return FeatureTransforms(per_key)
