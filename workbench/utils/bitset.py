"""A two-level bitmap that de-duplicates and sorts integer keys in one pass (numba kernels).

Sorting the distinct keys of a batch (the HET cache's ascending-key protocol, LAIA's
ascending-key touches) costs ``m log m`` with a comparison sort; with keys bounded by a table of
``rows`` rows, a bitmap lists them in order instead:

    bitmap[k // 64]     bit k % 64            one bit per key: rows / 8 bytes (125 kB per 1M
                                              rows, resident in a core's L2 cache)
    summary[k // 4096]  bit (k // 64) % 64    one bit per bitmap word that holds a key

``mark`` sets both bits of a key; ``drain_sorted`` scans the summary's set bits, then each marked
word's, writing the keys in ascending order, and clears what it read, so the bitmap is all zero
again for the next batch. O(n + m + rows / 4096) for n keys with m distinct.

``sorted_unique`` also gives each occurrence its key's index in the sorted unique keys (the
inverse) by rank: the drain records, per marked word, how many keys came before it
(``rank_arrays``: 4 bytes per 64 keys), and an occurrence's index is that count plus a popcount
of its word below it. No ``rows``-long index is read or written beyond the bitmap and ranks.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numba import types
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import intrinsic

__all__ = ["bitset_arrays", "drain_sorted", "mark", "rank_arrays", "sorted_unique"]


def bitset_arrays(rows: int) -> tuple[np.ndarray, np.ndarray]:
    """The zeroed ``(bitmap, summary)`` of a key space of ``rows`` keys."""
    words = (int(rows) + 63) // 64
    return np.zeros(words, dtype=np.uint64), np.zeros((words + 63) // 64, dtype=np.uint64)


@nb.njit(cache=True, _nrt=False, inline="always")
def mark(bitmap, summary, k):  # pragma: no cover - compiled
    """Add key ``k`` (``0 <= k < rows``) to the set."""
    one = np.uint64(1)
    w = k >> 6
    bitmap[w] |= one << np.uint64(k & 63)
    summary[w >> 6] |= one << np.uint64(w & 63)


@nb.njit(cache=True, _nrt=False, inline="always")
def _drain(bitmap, summary, out, rank, words, ranked):  # pragma: no cover - compiled
    """Write the set's keys to ``out`` in ascending order and clear the summary; clear each
    marked bitmap word too, or (``ranked``) leave it set, give it its rank (the keys before it)
    and list it in ``words``. Returns (keys, marked words)."""
    one = np.uint64(1)
    m = 0
    nw = 0
    for sw in range(summary.shape[0]):
        x = summary[sw]
        if x == 0:
            continue
        summary[sw] = 0
        while x != 0:
            w = sw * 64 + trailing_zeros(x)
            x &= x - one
            y = bitmap[w]
            if ranked:
                rank[w] = m
                words[nw] = w
                nw += 1
            else:
                bitmap[w] = 0
            while y != 0:
                out[m] = w * 64 + trailing_zeros(y)
                y &= y - one
                m += 1
    return m, nw


@nb.njit(cache=True)
def drain_sorted(bitmap, summary, out):  # pragma: no cover - compiled
    """Write the set's keys to ``out`` in ascending order, empty the set; return their count."""
    return _drain(bitmap, summary, out, out[:0], out[:0], False)[0]


def rank_arrays(rows: int) -> np.ndarray:
    """The rank scratch of [`sorted_unique`][] for a key space of ``rows`` keys: one int32
    per bitmap word (``rows / 16`` bytes)."""
    return np.zeros((int(rows) + 63) // 64, dtype=np.int32)


@intrinsic
def _popcount(typingctx, src):  # pragma: no cover - compiled
    """The number of set bits of a uint64 (LLVM's ctpop: one popcnt instruction)."""
    if not isinstance(src, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        return builder.ctpop(args[0])

    return src(src), codegen


@nb.njit(cache=True)
def sorted_unique(keys, bitmap, summary, rank):  # pragma: no cover - compiled
    """Sorted distinct ``keys`` and, per occurrence, its key's index among them.

    The keys are marked in the bitmap and drained in order as [`drain_sorted`][] does, but the
    marked words stay set until every occurrence has its index: the rank of key k is the count
    of keys in the words before k's (``rank[k // 64]``, written by the drain) plus the set bits
    below k in its word (one popcount). So the inverse costs two reads of lines the marks
    brought in, and no ``rows``-sized index.

    Args:
        keys: ``int64[n]`` in ``[0, rows)``.
        bitmap: [`bitset_arrays`][]' bitmap of ``rows`` (all zero; left all zero).
        summary: its summary (all zero; left all zero).
        rank: [`rank_arrays`][] of ``rows`` (any content).

    Returns:
        ``(uniq int64[m], inv int64[n])`` with ``uniq[inv] == keys``.
    """
    one = np.uint64(1)
    n = keys.shape[0]
    for i in range(n):
        mark(bitmap, summary, keys[i])
    uniq = np.empty(n, np.int64)
    words = np.empty(n, np.int64)
    m, nw = _drain(bitmap, summary, uniq, rank, words, True)
    inv = np.empty(n, np.int64)
    for i in range(n):
        k = keys[i]
        w = k >> 6
        below = bitmap[w] & ((one << np.uint64(k & 63)) - one)
        inv[i] = rank[w] + np.int64(_popcount(below))
    for i in range(nw):
        bitmap[words[i]] = 0
    return uniq[:m], inv
