"""A parameter-server shard: an open-addressing hash map from int64 keys to rows (numba kernels).

A shard ([`ShardTable`][]) stores a sparse key space: an open-addressing hash map (linear
probing, splitmix64 hash, an index of ``2^k >= 2 x capacity`` cells so the load stays <= 1/2, no
deletion) from any int64 key to a row slot; ``values[capacity, D]`` float32 and
``versions[capacity]`` int64 hold the rows. Semantically the shard is a total map
``key -> (value, ver)`` that is ``(0, 0)`` for every key not stored yet. Its two kernels of a
parameter-server exchange (served over the messages of [`workbench.cluster.ps_protocol`][]):

    select_rows(keys K, versions V, bound s_r):          (the rows a pull returns)
        the positions i, in request order, with
               V_i < 0 (the client has no copy)  or  ver[k_i] - V_i > s_r (stale)
        (read-only: an absent key reads as the zero row at version 0 and is not inserted)
    apply_rows(keys K, counts C, rows G):                (a push)
        insert the absent keys of K; then for every i in order: value[k_i] += G_i, ver[k_i] += C_i
        (duplicates accumulate, exactly as ``np.add.at``); nothing is applied if the shard
        would overflow its capacity

This is HET's read rule (``workbench.cluster.cache``: pull iff a miss or ``server.ver -
line.version > s_r``) and its server update. An open-addressing map beats ``numba.typed.Dict``
here (look-ups of 4,096 keys in a 100,000-key shard, inside njit: 29 us against 126 us on the
development machine).
"""

from __future__ import annotations

import numba as nb
import numpy as np

__all__ = ["ShardTable", "apply_rows", "as_int64", "select_rows"]

_EMPTY = -1  # an unused cell of the hash index


# ------------------------------------------------------------------------------------------
# Hash map kernels: index[cells] holds a slot or -1; slot_keys[slot] the slot's key
# ------------------------------------------------------------------------------------------

@nb.njit(cache=True, inline="always")
def _hash(key):
    """splitmix64's finalizer of ``key`` (as uint64)."""
    z = np.uint64(key)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@nb.njit(cache=True)
def _home(keys, mask):
    """Home cell ``hash(key) & mask`` of each key (tests use it to build collisions)."""
    out = np.empty(len(keys), np.int64)
    for i in range(len(keys)):
        out[i] = np.int64(_hash(keys[i]) & np.uint64(mask))
    return out


@nb.njit(cache=True, inline="always")
def _probe(index, slot_keys, key):
    """``(cell, slot)``: the key's slot and its cell, or ``slot = -1`` and the empty cell where
    it would go."""
    mask = len(index) - 1
    cell = np.int64(_hash(key) & np.uint64(mask))
    while True:
        slot = index[cell]
        if slot == _EMPTY or slot_keys[slot] == key:
            return cell, slot
        cell = (cell + 1) & mask


@nb.njit(cache=True)
def _lookup(index, slot_keys, keys, out):
    for i in range(len(keys)):
        out[i] = _probe(index, slot_keys, keys[i])[1]


@nb.njit(cache=True)
def _insert(index, slot_keys, size, keys, out):
    """Slot of every key, inserting the absent ones (their rows must already be zero).

    Returns -1 if the table filled up (the keys inserted so far stay: an inserted key holds the
    zero row at version 0, which is what an absent key reads as), else 0.
    """
    capacity = len(slot_keys)
    for i in range(len(keys)):
        cell, slot = _probe(index, slot_keys, keys[i])
        if slot == _EMPTY:
            if size[0] == capacity:
                return -1
            slot = size[0]
            size[0] += 1
            slot_keys[slot] = keys[i]
            index[cell] = slot
        out[i] = slot
    return 0


@nb.njit(cache=True)
def select_rows(index, slot_keys, versions, keys, client_versions, bound, pick, slots):
    """Request positions (``pick``) and slots (-1: absent) of the rows a pull returns; their count.

    A row is returned when the client holds no copy (``client_versions[i] < 0``) or its copy is
    more than ``bound`` versions behind (module docstring).
    """
    m = 0
    for i in range(len(keys)):
        slot = _probe(index, slot_keys, keys[i])[1]
        have = client_versions[i]
        ver = versions[slot] if slot >= 0 else 0
        if have < 0 or ver - have > bound:
            pick[m] = i
            slots[m] = slot
            m += 1
    return m


@nb.njit(cache=True)
def apply_rows(index, slot_keys, size, values, versions, keys, counts, rows):
    """Server side of a push; -1 if the table is full (nothing applied), else 0."""
    slots = np.empty(len(keys), np.int64)
    if _insert(index, slot_keys, size, keys, slots) < 0:
        return -1
    for i in range(len(keys)):
        slot = slots[i]
        for d in range(values.shape[1]):
            values[slot, d] += rows[i, d]
        versions[slot] += counts[i]
    return 0


# ------------------------------------------------------------------------------------------
# The server shard
# ------------------------------------------------------------------------------------------

class ShardTable:
    """One PS shard: a hash map from int64 keys to row slots, and the rows.

    Args:
        dim: embedding width D.
        capacity: the most keys the shard can hold (rows are preallocated).

    Attributes:
        index: the hash index (``2^k >= 2 x capacity`` cells, each a slot or -1).
        slot_keys: ``[capacity]`` the key of each slot.
        values: ``[capacity, D]`` float32 rows (slot order; the first ``len(self)`` are used).
        versions: ``[capacity]`` int64 versions (updates applied to each row).
        size_cell: ``[1]`` int64, the number of stored keys (an array, so the kernels update it).
    """

    def __init__(self, dim: int, capacity: int) -> None:
        if dim < 1:
            raise ValueError(f"dim = {dim}: must be >= 1")
        if capacity < 1:
            raise ValueError(f"capacity = {capacity}: must be >= 1")
        cells = 1 << max(3, int(2 * capacity - 1).bit_length())  # 2^k >= 2 x capacity
        self.index = np.full(cells, _EMPTY, dtype=np.int64)
        self.slot_keys = np.zeros(capacity, dtype=np.int64)
        self.values = np.zeros((capacity, dim), dtype=np.float32)
        self.versions = np.zeros(capacity, dtype=np.int64)
        self.size_cell = np.zeros(1, dtype=np.int64)

    @classmethod
    def from_rows(cls, keys: np.ndarray, values: np.ndarray, versions: np.ndarray | None = None,
                  capacity: int | None = None) -> ShardTable:
        """A shard holding ``keys`` (distinct) with their rows and versions (default 0)."""
        keys = as_int64(keys, "keys")
        values = np.asarray(values, dtype=np.float32)
        if values.ndim != 2 or len(values) != len(keys):
            raise ValueError(f"values shape {values.shape}: must be ({len(keys)}, D)")
        table = cls(values.shape[1], max(1, len(keys)) if capacity is None else capacity)
        slots = table.insert(keys)
        if len(table) != len(keys):
            raise ValueError("keys must be distinct")
        table.values[slots] = values
        if versions is not None:
            table.versions[slots] = as_int64(versions, "versions", len(keys))
        return table

    def __len__(self) -> int:
        return int(self.size_cell[0])

    @property
    def dim(self) -> int:
        """Embedding width D."""
        return self.values.shape[1]

    @property
    def capacity(self) -> int:
        """The most keys the shard can hold."""
        return len(self.slot_keys)

    def keys(self) -> np.ndarray:
        """The stored keys in slot order (a copy)."""
        return self.slot_keys[:len(self)].copy()

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """The slot of each key, -1 where absent."""
        keys = as_int64(keys, "keys")
        out = np.empty(len(keys), dtype=np.int64)
        _lookup(self.index, self.slot_keys, keys, out)
        return out

    def insert(self, keys: np.ndarray) -> np.ndarray:
        """The slot of each key, inserting absent keys (zero row, version 0).

        Raises:
            ValueError: the shard is full (keys inserted before it filled up stay, each at the
                zero row and version 0, i.e. still reading as absent).
        """
        keys = as_int64(keys, "keys")
        out = np.empty(len(keys), dtype=np.int64)
        if _insert(self.index, self.slot_keys, self.size_cell, keys, out) < 0:
            raise ValueError(f"shard full: capacity {self.capacity} keys")
        return out

    def get(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(values [n, D], versions [n])`` of the keys (copies; zero and 0 where absent)."""
        slots = self.lookup(keys)
        found = slots >= 0
        values = np.zeros((len(slots), self.dim), dtype=np.float32)
        versions = np.zeros(len(slots), dtype=np.int64)
        values[found] = self.values[slots[found]]
        versions[found] = self.versions[slots[found]]
        return values, versions


# ------------------------------------------------------------------------------------------
# Input checks
# ------------------------------------------------------------------------------------------

def as_int64(a, name: str, n: int | None = None) -> np.ndarray:
    """``a`` as a 1-D int64 array (of length ``n`` if given)."""
    a = np.asarray(a)
    if a.ndim != 1 or (a.dtype.kind not in "iu" and a.size):
        raise ValueError(f"{name}: must be a 1-D integer array, got {a.dtype} {a.shape}")
    if n is not None and len(a) != n:
        raise ValueError(f"{name}: {len(a)} entries, expected {n}")
    return a if a.dtype == np.int64 else a.astype(np.int64)
