"""RecD's batch dedup: the rows of a dedup group found equal, and the IKJT built from a KJT.

A *row* of a dedup group is the tuple of the group's per-key lists for one sample
([`workbench.sparse.jagged_tensor`][] defines the KJT and IKJT layouts). [`to_ikjt`][] groups
equal rows of every group; [`to_ikjt_by_request`][] takes the grouping from request ids when every
grouped feature is request-level.

Row deduplication is exact (no false merges). The default ``method="hash"`` computes a 64-bit
hash per row: a numba kernel chains the splitmix64 finaliser over (key salt, list length, the
list's values in order) for each list, and the list hashes are chained over the group's keys.
Runs of equal hashes after an ``np.argsort`` give a candidate grouping, which is then *verified
exactly*: every sample's lengths and values are compared element by element (vectorised gathers)
with those of its group representative. If any hash collision is found, the group is recomputed
with ``method="sort"``: every row is encoded as a padded int64 matrix row
``[len_k1, values_k1 padded with 0, len_k2, ...]`` (the lengths make the padding unambiguous) and
equal rows are grouped by ``np.lexsort`` over the columns. Either way the runs are renumbered in
first-occurrence order without a second sort, so both methods give identical output.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

import numba as nb
import numpy as np

from workbench.sparse.jagged_tensor import (
    InverseKeyedJaggedTensor,
    JaggedTensor,
    KeyedJaggedTensor,
    as_int64_1d,
    gather_segments,
    list_offsets,
    partition_groups,
)

__all__ = ["DedupMethod", "request_rows", "to_ikjt", "to_ikjt_by_request"]

DedupMethod = Literal["hash", "sort"]


_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _splitmix64(x):
    """splitmix64 finaliser of one uint64 (wrapping arithmetic); compiled twice below."""
    x = x + _GOLDEN
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


#: splitmix64 on a uint64 array (a numba ufunc) and on one uint64 (inside the kernel).
_mix = nb.vectorize(["uint64(uint64)"], cache=True)(_splitmix64)
_mix_scalar = nb.njit(cache=True, _nrt=False)(_splitmix64)


@nb.njit(cache=True, _nrt=False)
def _list_hashes_kernel(values: np.ndarray, lengths: np.ndarray, salt: np.uint64,
                        out: np.ndarray) -> None:
    """``out[i]`` = chained splitmix64 over ``(salt, length_i, values of list i in order)``."""
    pos = 0
    for i in range(lengths.size):
        n = lengths[i]
        acc = _mix_scalar(_mix_scalar(salt) ^ np.uint64(n))
        for j in range(n):
            acc = _mix_scalar(acc ^ np.uint64(values[pos + j]))
        out[i] = acc
        pos += n


def _list_hashes(values: np.ndarray, lengths: np.ndarray, salt: int) -> np.ndarray:
    """One uint64 hash per list, depending on the list's length, values and their order."""
    out = np.empty(lengths.size, dtype=np.uint64)
    _list_hashes_kernel(values, lengths, np.uint64(salt), out)
    return out


def _groups_from_sorted(order: np.ndarray, new_run: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Turn a sort of the samples into a first-occurrence grouping (no further sorting).

    Args:
        order: permutation of the samples putting equal rows next to each other.
        new_run: ``new_run[i]`` is True iff sorted position ``i`` starts a run of equal rows.

    Returns:
        ``(unique_samples, inverse)``: the first sample of each unique row, ascending (so rows are
        numbered in first-occurrence order), and sample -> row number.
    """
    batch = order.size
    if batch == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    run_of_sorted = np.cumsum(new_run) - 1
    first = np.minimum.reduceat(order, np.flatnonzero(new_run))  # first sample of each run
    is_first = np.zeros(batch, dtype=bool)
    is_first[first] = True
    rank = np.cumsum(is_first) - 1  # rank[s] = row number if s is a first occurrence
    inverse = np.empty(batch, dtype=np.int64)
    inverse[order] = rank[first][run_of_sorted]
    return np.flatnonzero(is_first).astype(np.int64), inverse


def _rows_equal_to(jts: Sequence[JaggedTensor], rep: np.ndarray) -> bool:
    """True iff, for every key, each sample's list equals the list of sample ``rep[s]``."""
    for jt in jts:
        lengths, values = jt.lengths(), jt.values()
        if not np.array_equal(lengths, lengths[rep]):
            return False
        starts = list_offsets(lengths)[:-1]
        src = np.arange(values.size, dtype=np.int64) + np.repeat(starts[rep] - starts, lengths)
        if not np.array_equal(values, values[src]):
            return False
    return True


def _dedup_rows_hash(jts: Sequence[JaggedTensor],
                     salts: Sequence[int]) -> tuple[np.ndarray, np.ndarray] | None:
    """Hash grouping verified exactly; ``None`` if a hash collision merged different rows."""
    batch = jts[0].lengths().size
    h = np.zeros(batch, dtype=np.uint64)
    for jt, salt in zip(jts, salts):
        h = _mix(h ^ _list_hashes(jt.values(), jt.lengths(), salt))
    order = np.argsort(h)  # any sort will do: runs are renumbered by first occurrence
    hs = h[order]
    new_run = np.ones(batch, dtype=bool)
    new_run[1:] = hs[1:] != hs[:-1]
    unique_samples, inverse = _groups_from_sorted(order, new_run)
    if not _rows_equal_to(jts, unique_samples[inverse]):
        return None
    return unique_samples, inverse


def _dedup_rows_sort(jts: Sequence[JaggedTensor]) -> tuple[np.ndarray, np.ndarray]:
    """Exact grouping: lexsort of padded ``[len, values...]`` rows over the group's keys."""
    batch = jts[0].lengths().size
    blocks = []
    for jt in jts:
        lengths, values = jt.lengths(), jt.values()
        width = int(lengths.max(initial=0))
        block = np.zeros((batch, 1 + width), dtype=np.int64)
        block[:, 0] = lengths
        rows = np.repeat(np.arange(batch, dtype=np.int64), lengths)
        starts = np.repeat(list_offsets(lengths)[:-1], lengths)
        cols = np.arange(values.size, dtype=np.int64) - starts
        block[rows, 1 + cols] = values
        blocks.append(block)
    mat = np.concatenate(blocks, axis=1)
    order = np.lexsort(mat.T[::-1])
    srt = mat[order]
    new_run = np.ones(batch, dtype=bool)
    if batch > 1:
        new_run[1:] = np.any(srt[1:] != srt[:-1], axis=1)
    return _groups_from_sorted(order, new_run)


def to_ikjt(kjt: KeyedJaggedTensor, groups: Iterable[Sequence[str]],
            method: DedupMethod = "hash", plain: Iterable[str] = ()) -> InverseKeyedJaggedTensor:
    """Deduplicate a KJT into an IKJT, one inverse lookup per dedup group.

    Args:
        kjt: the batch.
        groups: the dedup groups, e.g. ``[["b"], ["c", "d"]]`` (RecD's
            ``dedup_sparse_features``); a key alone is a group of one. Together with ``plain``
            they must partition ``kjt.keys()``.
        method: ``"hash"`` (64-bit row hash, verified exactly, falling back to ``"sort"`` on a
            collision) or ``"sort"`` (lexsort of padded rows). Both give identical results.
        plain: keys that are NOT deduplicated: each becomes a group of one whose "unique rows"
            are all ``B`` rows and whose inverse lookup is the identity.

    Returns:
        The IKJT; unique rows in first-occurrence order.

    Raises:
        ValueError: ``groups`` does not partition the keys, or unknown ``method``.

    Example:

        kjt = KeyedJaggedTensor.from_dict({
            "b": [[3, 4, 5], [4, 5, 6], [3, 4, 5]],
            "c": [[7, 8], [7, 8], [10]],
            "d": [[9], [9], [11]],
        })
        ikjt = to_ikjt(kjt, [["b"], ["c", "d"]])
        ikjt.values("c")                # array([ 7,  8, 10])
        ikjt.inverse_lookup(["c", "d"]) # array([0, 0, 1])
    """
    if method not in ("hash", "sort"):
        raise ValueError(f"method must be 'hash' or 'sort', got {method!r}")
    keys = kjt.keys()
    plain = list(plain)
    groups_t = partition_groups(keys, [*groups, *([k] for k in plain)])
    n_dedup = len(groups_t) - len(plain)
    key_index = {k: i for i, k in enumerate(keys)}
    values: dict[str, np.ndarray] = {}
    lengths: dict[str, np.ndarray] = {}
    inverses = []
    for gi, group in enumerate(groups_t):
        jts = [kjt[k] for k in group]
        if gi >= n_dedup:  # a plain key: kept as it is, identity inverse
            values[group[0]], lengths[group[0]] = jts[0].values(), jts[0].lengths()
            inverses.append(np.arange(kjt.batch_size, dtype=np.int64))
            continue
        result = None
        if method == "hash":
            result = _dedup_rows_hash(jts, [key_index[k] + 1 for k in group])
        if result is None:
            result = _dedup_rows_sort(jts)
        unique_samples, inverse = result
        for k, jt in zip(group, jts):
            values[k], lengths[k] = gather_segments(jt.values(), jt.lengths(), unique_samples)
        inverses.append(inverse)
    return InverseKeyedJaggedTensor(keys, groups_t, values, lengths, inverses)


def request_rows(requests: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First sample of every distinct request (ascending) and sample -> request number.

    Args:
        requests: ``[B]`` request ids.

    Returns:
        ``(unique_samples, inverse)`` in first-occurrence order, as [`to_ikjt`][] numbers rows.
    """
    requests = as_int64_1d("requests", requests)
    order = np.argsort(requests, kind="stable")
    srt = requests[order]
    new_run = np.ones(requests.size, dtype=bool)
    new_run[1:] = srt[1:] != srt[:-1]
    return _groups_from_sorted(order, new_run)


def to_ikjt_by_request(kjt: KeyedJaggedTensor, groups: Iterable[Sequence[str]],
                       requests: np.ndarray, plain: Iterable[str] = (),
                       verify: bool = False) -> InverseKeyedJaggedTensor:
    """RecD's reader-side dedup: the samples of one request share their grouped features.

    When every dedup group holds request-level features (the user-side features and the history
    snapshot a feature store serves once per request), two samples of the same request have
    equal rows by construction, so the inverse lookup follows from the request ids alone
    (``O(B)`` keys instead of hashing every value). Rows of *different* requests are not merged
    even when equal, so the result may be less deduplicated than [`to_ikjt`][], but
    ``expand()`` is exact whenever the premise holds.

    Args:
        kjt: the batch.
        groups: the dedup groups (request-level features only).
        requests: ``[B]`` request (session) id of every sample.
        plain: keys not deduplicated (identity inverse).
        verify: check the premise element by element (``ValueError`` if a request's rows differ).

    Returns:
        The IKJT; unique rows in first-occurrence order, one per distinct request.
    """
    requests = as_int64_1d("requests", requests)
    if requests.size != kjt.batch_size:
        raise ValueError(f"{requests.size} request ids for a batch of {kjt.batch_size}")
    plain = list(plain)
    groups_t = partition_groups(kjt.keys(), [*groups, *([k] for k in plain)])
    n_dedup = len(groups_t) - len(plain)
    unique_samples, inverse = request_rows(requests)
    identity = np.arange(kjt.batch_size, dtype=np.int64)
    values: dict[str, np.ndarray] = {}
    lengths: dict[str, np.ndarray] = {}
    inverses = []
    for gi, group in enumerate(groups_t):
        jts = [kjt[k] for k in group]
        if gi >= n_dedup:
            values[group[0]], lengths[group[0]] = jts[0].values(), jts[0].lengths()
            inverses.append(identity)
            continue
        if verify and not _rows_equal_to(jts, unique_samples[inverse]):
            raise ValueError(f"group {list(group)} differs between samples of one request: "
                             "its features are not request-level; use to_ikjt")
        for k, jt in zip(group, jts):
            values[k], lengths[k] = gather_segments(jt.values(), jt.lengths(), unique_samples)
        inverses.append(inverse)
    return InverseKeyedJaggedTensor(kjt.keys(), groups_t, values, lengths, inverses)
