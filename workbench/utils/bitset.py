"""A two-level bitmap that de-duplicates and sorts integer keys in one pass (numba kernels).

Sorting the distinct keys of a batch (the HET cache's ascending-key protocol, LAIA's
ascending-key touches) costs ``m log m`` with a comparison sort; with keys bounded by a table of
``rows`` rows, a bitmap lists them in order instead::

    bitmap[k // 64]     bit k % 64            one bit per key: rows / 8 bytes (125 kB per 1M
                                              rows, resident in a core's L2 cache)
    summary[k // 4096]  bit (k // 64) % 64    one bit per bitmap word that holds a key

``mark`` sets both bits of a key; ``drain_sorted`` scans the summary's set bits, then each marked
word's, writing the keys in ascending order, and clears what it read, so the bitmap is all zero
again for the next batch. O(n + m + rows / 4096) for n keys with m distinct.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

__all__ = ["bitset_arrays", "drain_sorted", "mark"]


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


@nb.njit(cache=True, _nrt=False)
def drain_sorted(bitmap, summary, out):  # pragma: no cover - compiled
    """Write the set's keys to ``out`` in ascending order, empty the set; return their count."""
    one = np.uint64(1)
    m = 0
    for sw in range(summary.shape[0]):
        x = summary[sw]
        if x == 0:
            continue
        summary[sw] = 0
        while x != 0:
            w = sw * 64 + trailing_zeros(x)
            x &= x - one
            y = bitmap[w]
            bitmap[w] = 0
            while y != 0:
                out[m] = w * 64 + trailing_zeros(y)
                y &= y - one
                m += 1
    return m
