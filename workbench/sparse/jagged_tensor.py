"""Jagged sparse-feature batches: ``KeyedJaggedTensor`` (KJT) and RecD's IKJT.

A KJT holds, for every key (sparse feature) and every sample of the batch, one variable-length list
of int64 ids. As in torchrec, ``lengths`` is key-major: all ``B`` samples of key 0, then all ``B``
samples of key 1, and so on; ``values`` is the concatenation of the lists in the same order.

An IKJT (RecD, MLSys'23; our formalisation) partitions the keys into *dedup groups*. A *row* of
a group is the tuple of the group's per-key lists for one sample; two samples are duplicates iff
every key of the group has identical lists. Each group keeps only its unique rows (per key: values
and lengths of the unique rows) and ONE ``inverse_lookup[B]`` mapping each sample to its unique
row. Unique rows are numbered in first-occurrence order, so the layout is deterministic.

Worked example, batch of 3, groups ``[["b"], ["c", "d"]]``:

    KJT (key-major)                       IKJT
    sample:   0        1        2         group (b)        unique rows: [3,4,5] | [4,5,6]
    b      [3,4,5] | [4,5,6] | [3,4,5]      b values  [3,4,5,4,5,6]   lengths [3,3] offsets [0,3,6]
    c      [7,8]   | [7,8]   | [10]         inverse   [0,1,0]
    d      [9]     | [9]     | [11]       group (c, d)     unique rows: ([7,8],[9]) | ([10],[11])
                                            c values  [7,8,10]        lengths [2,1]
    values  [3,4,5,4,5,6,3,4,5,             d values  [9,11]          lengths [1,1]
             7,8,7,8,10, 9,9,11]            inverse   [0,0,1]   (one lookup shared by c and d)
    lengths [3,3,3, 2,2,1, 1,1,1]

    (DESIGN's "offsets [0,3]" are the list starts, i.e. ``offsets()[:-1]``)

    expand():  key k of sample s  =  unique row inverse[group(k)][s] of key k   ->  the KJT again

Compute that depends only on a group runs on its unique rows and is expanded through the inverse
lookup afterwards ([`dedup_pooled_lookup`][workbench.sparse.lookup.dedup_pooled_lookup]:
``unique_out[inverse]``); the result equals the non-deduplicated computation (forward exactly,
gradients up to summation order). How rows are found equal, and the IKJT built from a KJT, is
[`workbench.sparse.dedup`][]; the pooled lookups are [`workbench.sparse.lookup`][].
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

__all__ = [
    "InverseKeyedJaggedTensor",
    "JaggedTensor",
    "KeyedJaggedTensor",
    "as_int64_1d",
    "gather_segments",
    "list_offsets",
    "partition_groups",
]


# ------------------------------------------------------------------------------------------------
# helpers


def as_int64_1d(name: str, array: object) -> np.ndarray:
    """``array`` as a contiguous 1-D int64 array; raise ``ValueError``/``TypeError`` otherwise."""
    if (type(array) is np.ndarray and array.dtype == np.int64 and array.ndim == 1
            and array.flags.c_contiguous):
        return array  # the common case, without the slower generic checks
    arr = np.asarray(array)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must hold integers, got dtype {arr.dtype}")
    return np.ascontiguousarray(arr, dtype=np.int64)


def _check_lengths(values: np.ndarray, lengths: np.ndarray) -> None:
    """Raise ``ValueError`` unless ``lengths`` are non-negative and sum to ``len(values)``."""
    if lengths.size and lengths.min() < 0:
        raise ValueError("lengths must be non-negative")
    total = int(lengths.sum())
    if total != values.size:
        raise ValueError(f"lengths sum to {total} but there are {values.size} values")


def list_offsets(lengths: np.ndarray) -> np.ndarray:
    """Exclusive prefix sum ``[0, l0, l0+l1, ...]`` (length ``len(lengths) + 1``)."""
    out = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def gather_segments(values: np.ndarray, lengths: np.ndarray,
                     idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lists ``idx[0], idx[1], ...`` of a jagged array, concatenated (vectorised).

    Args:
        values: concatenated lists.
        lengths: length of each list.
        idx: list indices to gather (repeats allowed).

    Returns:
        ``(values, lengths)`` of the gathered jagged array.
    """
    starts = list_offsets(lengths)[:-1][idx]
    new_lengths = lengths[idx]
    new_offsets = list_offsets(new_lengths)
    src = np.arange(new_offsets[-1], dtype=np.int64) + np.repeat(starts - new_offsets[:-1],
                                                                  new_lengths)
    return values[src], new_lengths


# ------------------------------------------------------------------------------------------------
# JaggedTensor / KeyedJaggedTensor


class _Lists:
    """Concatenated int64 lists and their lengths (a [`JaggedTensor`][]'s, or every key's of a
    [`KeyedJaggedTensor`][], key-major)."""

    _values: np.ndarray
    _lengths: np.ndarray

    def values(self) -> np.ndarray:
        """The lists concatenated (int64; key-major in a KJT)."""
        return self._values

    def lengths(self) -> np.ndarray:
        """The length of each list (int64 ``[B]``; ``[len(keys) * B]`` in a KJT)."""
        return self._lengths

    def offsets(self) -> np.ndarray:
        """List boundaries ``[0, l0, l0+l1, ..., sum]`` into ``values()`` (int64)."""
        return list_offsets(self._lengths)


class JaggedTensor(_Lists):
    """One sparse feature for a batch: ``B`` variable-length int64 lists.

    Args:
        values: concatenated lists, int64 ``[sum(lengths)]``.
        lengths: length of each list, int64 ``[B]``, non-negative.

    Example:

        jt = JaggedTensor(np.array([3, 4, 5, 9]), np.array([3, 0, 1]))
        jt.offsets()   # array([0, 3, 3, 4])
        jt.to_list()   # [[3, 4, 5], [], [9]]
    """

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, values: np.ndarray, lengths: np.ndarray) -> None:
        self._values = as_int64_1d("values", values)
        self._lengths = as_int64_1d("lengths", lengths)
        _check_lengths(self._values, self._lengths)

    @property
    def batch_size(self) -> int:
        """Number of lists ``B``."""
        return int(self._lengths.size)

    def to_list(self) -> list[list[int]]:
        """The lists as Python lists."""
        return [chunk.tolist() for chunk in np.split(self._values, self.offsets()[1:-1])] \
            if self.batch_size else []

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, JaggedTensor):
            return NotImplemented
        return (np.array_equal(self._lengths, other._lengths)
                and np.array_equal(self._values, other._values))

    def __repr__(self) -> str:
        return f"JaggedTensor(values={self._values.tolist()}, lengths={self._lengths.tolist()})"


class KeyedJaggedTensor(_Lists):
    """Several sparse features for a batch, torchrec layout (key-major lengths).

    Args:
        keys: feature names, unique, at least one.
        values: all lists concatenated, key-major (key 0's ``B`` lists, then key 1's, ...), int64.
        lengths: ``[len(keys) * B]`` list lengths in the same key-major order.

    Raises:
        ValueError: duplicate/empty keys, ``len(lengths)`` not a multiple of ``len(keys)``,
            negative lengths, or lengths not summing to ``len(values)``.
        TypeError: non-string keys or non-integer values/lengths.

    Example:

        kjt = KeyedJaggedTensor.from_dict({"b": [[3, 4, 5], [4, 5, 6]], "c": [[7], []]})
        kjt.lengths()      # array([3, 3, 1, 0])
        kjt.batch_size     # 2
        kjt["c"].to_list() # [[7], []]
    """

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, keys: Sequence[str], values: np.ndarray, lengths: np.ndarray) -> None:
        keys = list(keys)
        if not keys:
            raise ValueError("a KeyedJaggedTensor needs at least one key")
        if not all(isinstance(k, str) for k in keys):
            raise TypeError(f"keys must be strings, got {keys!r}")
        if len(set(keys)) != len(keys):
            raise ValueError(f"duplicate keys in {keys!r}")
        self._keys = keys
        self._values = as_int64_1d("values", values)
        self._lengths = as_int64_1d("lengths", lengths)
        if self._lengths.size % len(keys):
            raise ValueError(f"len(lengths)={self._lengths.size} is not a multiple of "
                             f"len(keys)={len(keys)} (lengths are key-major [len(keys) * B])")
        _check_lengths(self._values, self._lengths)
        self._stride = self._lengths.size // len(keys)
        per_key = self._lengths.reshape(len(keys), self._stride).sum(axis=1)
        self._key_offsets = list_offsets(per_key)
        self._index = {k: i for i, k in enumerate(keys)}

    @classmethod
    def from_dict(cls, lists: Mapping[str, Sequence[Sequence[int]]]) -> KeyedJaggedTensor:
        """Build from ``{key: [list of sample 0, list of sample 1, ...]}`` (for tests and demos).

        Args:
            lists: per key, one list of ids per sample; every key must have the same batch size.

        Returns:
            The KJT with keys in the mapping's order.
        """
        keys = list(lists)
        sizes = {k: len(lists[k]) for k in keys}
        if len(set(sizes.values())) > 1:
            raise ValueError(f"keys have different batch sizes: {sizes}")
        lengths = [len(row) for k in keys for row in lists[k]]
        values = [int(v) for k in keys for row in lists[k] for v in row]
        return cls(keys, np.array(values, dtype=np.int64), np.array(lengths, dtype=np.int64))

    @classmethod
    def from_jt_dict(cls, jts: Mapping[str, JaggedTensor]) -> KeyedJaggedTensor:
        """Build from ``{key: JaggedTensor}`` (all of the same batch size)."""
        keys = list(jts)
        sizes = {k: jts[k].batch_size for k in keys}
        if len(set(sizes.values())) > 1:
            raise ValueError(f"keys have different batch sizes: {sizes}")
        empty = np.zeros(0, dtype=np.int64)  # no keys: the constructor raises
        return cls(keys, np.concatenate([jts[k].values() for k in keys]) if keys else empty,
                   np.concatenate([jts[k].lengths() for k in keys]) if keys else empty)

    def keys(self) -> list[str]:
        """Feature names in storage order."""
        return list(self._keys)

    @property
    def batch_size(self) -> int:
        """Number of samples ``B`` (torchrec's ``stride``)."""
        return self._stride

    def stride(self) -> int:
        """Alias of [`batch_size`][] (torchrec name)."""
        return self._stride

    def num_values(self) -> int:
        """Total number of ids stored."""
        return int(self._values.size)

    def length_per_key(self) -> list[int]:
        """Number of ids per key."""
        return np.diff(self._key_offsets).tolist()

    def __getitem__(self, key: str) -> JaggedTensor:
        try:
            i = self._index[key]
        except KeyError:
            raise KeyError(f"unknown key {key!r}; keys are {self._keys}") from None
        b = self._stride
        return JaggedTensor(self._values[self._key_offsets[i]:self._key_offsets[i + 1]],
                            self._lengths[i * b:(i + 1) * b])

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def to_dict(self) -> dict[str, list[list[int]]]:
        """``{key: per-sample lists}`` (inverse of [`from_dict`][]); ``kjt[key]`` gives a
        [`JaggedTensor`][] instead."""
        return {k: self[k].to_list() for k in self._keys}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, KeyedJaggedTensor):
            return NotImplemented
        return (self._keys == other._keys and self._stride == other._stride
                and np.array_equal(self._lengths, other._lengths)
                and np.array_equal(self._values, other._values))

    def __repr__(self) -> str:
        return (f"KeyedJaggedTensor(keys={self._keys}, batch_size={self._stride}, "
                f"num_values={self._values.size})")


# ------------------------------------------------------------------------------------------------
# InverseKeyedJaggedTensor


def partition_groups(keys: Sequence[str],
                     groups: Iterable[Sequence[str]]) -> tuple[tuple[str, ...], ...]:
    """Check that ``groups`` partitions ``keys`` (every key in exactly one group); return it as
    a tuple of tuples. Raises ``ValueError``/``TypeError`` naming the offending group and key."""
    out: list[tuple[str, ...]] = []
    owner: dict[str, int] = {}
    known = set(keys)
    for gi, group in enumerate(groups):
        if isinstance(group, str):
            raise TypeError(f"group {gi} is the string {group!r}; write [{group!r}] for a group "
                            "of one key")
        group = tuple(group)
        if not group:
            raise ValueError(f"group {gi} is empty")
        for key in group:
            if key not in known:
                raise ValueError(f"group {gi} names unknown key {key!r}; keys are {list(keys)}")
            if key in owner:
                where = "twice in" if owner[key] == gi else f"in groups {owner[key]} and"
                raise ValueError(f"key {key!r} appears {where} group {gi}; every key must be in "
                                 "exactly one dedup group")
            owner[key] = gi
        out.append(group)
    missing = [k for k in keys if k not in owner]
    if missing:
        raise ValueError(f"keys {missing} are in no dedup group; every key must be in exactly one "
                         "group (a key alone is a group of one)")
    return tuple(out)


class InverseKeyedJaggedTensor:
    """RecD's deduplicated batch: unique rows per dedup group plus one inverse lookup per group.

    Usually built with [`to_ikjt`][workbench.sparse.dedup.to_ikjt]. Unique rows are in
    first-occurrence order.

    Args:
        keys: feature names in the original KJT order.
        groups: partition of ``keys`` into dedup groups, e.g. ``[["b"], ["c", "d"]]``.
        values: per key, the ids of the group's unique rows (int64).
        lengths: per key, ``[U_g]`` lengths of the unique rows (``U_g`` = unique rows of its group).
        inverse_lookups: per group (same order as ``groups``), ``[B]`` sample -> unique row index.

    Raises:
        ValueError: groups not partitioning the keys, inconsistent sizes, or inverse indices out
            of range.

    Example:

        kjt = KeyedJaggedTensor.from_dict({"b": [[3, 4, 5], [4, 5, 6], [3, 4, 5]]})
        ikjt = to_ikjt(kjt, [["b"]])
        ikjt["b"].to_list()        # [[3, 4, 5], [4, 5, 6]]
        ikjt.inverse_lookup("b")   # array([0, 1, 0])
        ikjt.dedup_factor("b")     # 1.5
        ikjt.expand() == kjt       # True
    """

    def __init__(self, keys: Sequence[str], groups: Iterable[Sequence[str]],
                 values: Mapping[str, np.ndarray], lengths: Mapping[str, np.ndarray],
                 inverse_lookups: Sequence[np.ndarray]) -> None:
        self._keys = list(keys)
        if not self._keys or len(set(self._keys)) != len(self._keys):
            raise ValueError(f"keys must be non-empty and unique, got {self._keys!r}")
        self._groups = partition_groups(self._keys, groups)
        if len(inverse_lookups) != len(self._groups):
            raise ValueError(f"{len(inverse_lookups)} inverse lookups for "
                             f"{len(self._groups)} groups")
        self._inverse = [as_int64_1d(f"inverse_lookups[{i}]", inv)
                         for i, inv in enumerate(inverse_lookups)]
        sizes = {inv.size for inv in self._inverse}
        if len(sizes) != 1:
            raise ValueError(f"inverse lookups have different batch sizes {sorted(sizes)}")
        self._batch = sizes.pop()
        self._group_of = {k: gi for gi, g in enumerate(self._groups) for k in g}
        self._jts: dict[str, JaggedTensor] = {}
        self._num_unique: list[int] = []
        for gi, group in enumerate(self._groups):
            n_unique = {int(np.asarray(lengths[k]).size) for k in group}
            if len(n_unique) != 1:
                raise ValueError(f"keys of group {group} have different numbers of unique rows")
            n = n_unique.pop()
            inv = self._inverse[gi]
            if inv.size and (inv.min() < 0 or inv.max() >= n):
                raise ValueError(f"inverse lookup of group {group} out of range [0, {n})")
            self._num_unique.append(n)
            for k in group:
                self._jts[k] = JaggedTensor(values[k], lengths[k])

    def keys(self) -> list[str]:
        """Feature names in the original KJT order."""
        return list(self._keys)

    @property
    def groups(self) -> tuple[tuple[str, ...], ...]:
        """The dedup groups."""
        return self._groups

    @property
    def batch_size(self) -> int:
        """Number of samples ``B`` of the original batch."""
        return self._batch

    def _group_index(self, group: str | Sequence[str]) -> int:
        if isinstance(group, str):
            if group not in self._group_of:
                raise KeyError(f"unknown key {group!r}; keys are {self._keys}")
            return self._group_of[group]
        wanted = set(group)
        for gi, g in enumerate(self._groups):
            if set(g) == wanted:
                return gi
        raise KeyError(f"{list(group)} is not a dedup group; groups are {self._groups}")

    def group_of(self, key: str) -> tuple[str, ...]:
        """The dedup group containing ``key``."""
        return self._groups[self._group_index(key)]

    def __getitem__(self, key: str) -> JaggedTensor:
        """The unique rows of ``key`` (``U_g`` lists, first-occurrence order)."""
        if key not in self._jts:
            raise KeyError(f"unknown key {key!r}; keys are {self._keys}")
        return self._jts[key]

    def values(self, key: str) -> np.ndarray:
        """Ids of the unique rows of ``key``."""
        return self[key].values()

    def lengths(self, key: str) -> np.ndarray:
        """Lengths of the unique rows of ``key``."""
        return self[key].lengths()

    def offsets(self, key: str) -> np.ndarray:
        """Offsets of the unique rows of ``key``."""
        return self[key].offsets()

    def inverse_lookup(self, group: str | Sequence[str]) -> np.ndarray:
        """``[B]`` sample -> unique row, for a group (given by one of its keys or its key list)."""
        return self._inverse[self._group_index(group)]

    def num_unique(self, group: str | Sequence[str]) -> int:
        """Number of unique rows of a group."""
        return self._num_unique[self._group_index(group)]

    def dedup_factor(self, group: str | Sequence[str], skip_empty: bool = False) -> float:
        """``B / unique rows`` of a group (1.0 for an empty batch); always >= 1.

        With ``skip_empty``, RecD's saving: non-empty samples / unique non-empty rows (an empty
        row, no id in any key of the group, saves nothing when deduplicated, so a batch of
        empty histories is not "deduplicated B times"); NaN when every sample's row is empty.
        """
        gi = self._group_index(group)
        n = self._num_unique[gi]
        if not skip_empty:
            return self._batch / n if n else 1.0
        empty = self._empty_unique(gi)
        filled = self._batch - int(empty[self._inverse[gi]].sum())
        unique = n - int(empty.sum())
        return filled / unique if unique else float("nan")

    def num_empty(self, group: str | Sequence[str]) -> int:
        """Samples whose row of ``group`` is empty (no id in any of its keys)."""
        gi = self._group_index(group)
        return int(self._empty_unique(gi)[self._inverse[gi]].sum())

    def _empty_unique(self, gi: int) -> np.ndarray:
        """``bool[U_g]``: the group's unique rows with no id in any key."""
        lengths = np.zeros(self._num_unique[gi], dtype=np.int64)
        for key in self._groups[gi]:
            lengths += self._jts[key].lengths()
        return lengths == 0

    def num_values(self) -> int:
        """Total ids stored (unique rows only, all keys)."""
        return int(sum(jt.values().size for jt in self._jts.values()))

    def expand(self) -> KeyedJaggedTensor:
        """The original [`KeyedJaggedTensor`][] (every sample's rows gathered back)."""
        values, lengths = [], []
        for key in self._keys:
            jt = self._jts[key]
            v, length = gather_segments(jt.values(), jt.lengths(),
                                         self._inverse[self._group_of[key]])
            values.append(v)
            lengths.append(length)
        return KeyedJaggedTensor(self._keys, np.concatenate(values), np.concatenate(lengths))

    def __repr__(self) -> str:
        factors = ", ".join(f"{list(g)}: {self.dedup_factor(g):.2f}" for g in self._groups)
        return (f"InverseKeyedJaggedTensor(batch_size={self._batch}, "
                f"num_values={self.num_values()}, dedup_factors={{{factors}}})")

