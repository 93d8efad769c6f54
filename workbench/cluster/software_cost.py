"""The software cost of a parameter-server exchange, measured on a real minimal wire protocol.

The clock of :mod:`workbench.cluster.time_model` charges ``L + bytes / B`` per transfer; what a
message costs in software (serialisation, hash look-ups) is measured here. This module
implements the messages that clock counts as a real (in-process) PS protocol, a client that
builds and reads them and a server shard that answers them out of a hash map, and times both
sides to fit a per-message and a per-row cost on each.

Wire format (little-endian; ``n`` rows; every message starts with the same 32-byte header)::

    header        magic b"PSW1" | kind u32 | rows i64 | D i64 | bound i64          32 bytes
    PULL_REQUEST  header(n, D, s_r) | keys i64[n] | versions i64[n]                 + 16 n
    PULL_RESPONSE header(m, D, s_r) | keys i64[m] | versions i64[m] | rows f32[m,D] + (16 + 4D) m
    PUSH          header(n, D, 0)   | keys i64[n] | counts i64[n]   | rows f32[n,D] + (16 + 4D) n

The request and the push carry exactly the bytes the time model charges (8 + 8 per key, plus
``4 D`` per pushed row). A returned row carries its key and server version besides its ``4 D``
bytes (the client stores that version in its cache line), 16 bytes more than the time model's
``4 D`` per pulled row. A decoder checks the magic, the kind, ``rows >= 0``, ``D >= 1``, the
table's ``D`` and that the length is exactly what the header implies; anything else raises
:class:`ValueError` naming the field.

Server shard (:class:`ShardTable`). A shard stores a sparse key space: an open-addressing hash
map (linear probing, splitmix64 hash, an index of ``2^k >= 2 x capacity`` cells so the load stays
<= 1/2, no deletion) from any int64 key to a row slot; ``values[capacity, D]`` float32 and
``versions[capacity]`` int64 hold the rows. Semantically the shard is a total map
``key -> (value, ver)`` that is ``(0, 0)`` for every key not stored yet::

    serve_pull(keys K, versions V, bound s_r):
        return (k_i, ver[k_i], value[k_i]) for every i, in request order, with
               V_i < 0 (the client has no copy)  or  ver[k_i] - V_i > s_r (stale)
        (read-only: an absent key reads as the zero row at version 0 and is not inserted)
    apply_push(keys K, counts C, rows G):
        insert the absent keys of K; then for every i in order: value[k_i] += G_i, ver[k_i] += C_i
        (duplicates accumulate, exactly as ``np.add.at``)

An open-addressing map beats ``numba.typed.Dict`` here (look-ups of 4,096 keys in a 100,000-key
shard, inside njit: 29 us against 126 us on the development machine).

This is HET's read rule (``workbench.cluster.cache``: pull iff a miss or ``server.ver -
line.version > s_r``) and its server update. The look-ups, the version test, the gather and the
scatter-add run in numba kernels; Python only parses headers and wraps buffers.

Measurement (:func:`measure`). One exchange of ``n`` keys is a pull request of ``n`` unique keys
that the server answers with all ``n`` rows (half not cached, half stale), and a push of ``n``
rows back: 2 messages, and ``3 n`` rows handled in the time model's sense (``rows_j = u_j +
pulled_j + pushed_j``: a key sent, a row received, a row pushed). The costs are in the units the
time model charges them, per message and per row handled::

    client_s(n) = encode_pull + decode_pull + encode_push = 2 client_message_s + 3n client_row_s
    server_s(n) = serve_pull + apply_push                 = 2 server_message_s + 3n server_row_s

Each size is timed ``repeats`` times (sizes interleaved, garbage collector off, kernels compiled
beforehand); the medians are fitted by :func:`fit_linear` against ``3 n`` (a least-squares fit
of relative residuals with both coefficients constrained to be >= 0) and the intercept halved.
Every message is built in place in one buffer: a new ``bytearray``, or (``out=``) a reused send
buffer, as a real PS client and server keep. :func:`measure` reuses three buffers by default, so
the costs are the protocol's work (serialisation, look-ups, copies), not the allocator's: on the
development machine (a Firecracker VM with free-page reporting) a fresh 2 MB buffer costs ~1-3
ms of page faults some of the time and nothing at other times, depending on the allocator's
state (``fresh_buffers=True`` measures that case).
"""

from __future__ import annotations

import gc
import statistics
import struct
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numba as nb
import numpy as np

if sys.byteorder != "little":  # the kernels write native-order views into the buffers
    raise ImportError("workbench.cluster.software_cost needs a little-endian machine")

MAGIC = b"PSW1"
PULL_REQUEST, PULL_RESPONSE, PUSH = 1, 2, 3
KIND_NAMES = {PULL_REQUEST: "pull request", PULL_RESPONSE: "pull response", PUSH: "push"}
_HEADER = struct.Struct("<4sIqqq")
HEADER_BYTES = _HEADER.size  # 32
_EMPTY = -1  # an unused cell of the hash index
MESSAGES_PER_EXCHANGE = 2  # a pull (request + response) and a push
ROWS_PER_KEY = 3  # each key of an exchange: sent, its row received, its row pushed


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
def _select(index, slot_keys, versions, keys, client_versions, bound, pick, slots):
    """Request positions (``pick``) and slots (-1: absent) of the rows to return; their count."""
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
def _gather(values, versions, keys, pick, slots, m, body):
    """Write the response body (keys, versions, rows of the ``m`` picked keys) into ``body``."""
    dim = values.shape[1]
    meta = body[:16 * m].view(np.int64)
    rows = body[16 * m:].view(np.float32)
    for j in range(m):
        slot = slots[j]
        meta[j] = keys[pick[j]]
        meta[m + j] = versions[slot] if slot >= 0 else 0
        base = j * dim
        if slot >= 0:
            for d in range(dim):
                rows[base + d] = values[slot, d]
        else:
            for d in range(dim):
                rows[base + d] = 0.0


@nb.njit(cache=True)
def _apply(index, slot_keys, size, values, versions, keys, counts, rows):
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
        self._size = np.zeros(1, dtype=np.int64)

    @classmethod
    def from_rows(cls, keys: np.ndarray, values: np.ndarray, versions: np.ndarray | None = None,
                  capacity: int | None = None) -> "ShardTable":
        """A shard holding ``keys`` (distinct) with their rows and versions (default 0)."""
        keys = _keys(keys, "keys")
        values = np.asarray(values, dtype=np.float32)
        if values.ndim != 2 or len(values) != len(keys):
            raise ValueError(f"values shape {values.shape}: must be ({len(keys)}, D)")
        table = cls(values.shape[1], max(1, len(keys)) if capacity is None else capacity)
        slots = table.insert(keys)
        if len(table) != len(keys):
            raise ValueError("keys must be distinct")
        table.values[slots] = values
        if versions is not None:
            table.versions[slots] = _keys(versions, "versions", len(keys))
        return table

    def __len__(self) -> int:
        return int(self._size[0])

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
        keys = _keys(keys, "keys")
        out = np.empty(len(keys), dtype=np.int64)
        _lookup(self.index, self.slot_keys, keys, out)
        return out

    def insert(self, keys: np.ndarray) -> np.ndarray:
        """The slot of each key, inserting absent keys (zero row, version 0).

        Raises:
            ValueError: the shard is full (keys inserted before it filled up stay, each at the
                zero row and version 0, i.e. still reading as absent).
        """
        keys = _keys(keys, "keys")
        out = np.empty(len(keys), dtype=np.int64)
        if _insert(self.index, self.slot_keys, self._size, keys, out) < 0:
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
# Messages
# ------------------------------------------------------------------------------------------

def _keys(a, name: str, n: int | None = None) -> np.ndarray:
    """``a`` as a 1-D int64 array (of length ``n`` if given)."""
    a = np.asarray(a)
    if a.ndim != 1 or (a.dtype.kind not in "iu" and a.size):
        raise ValueError(f"{name}: must be a 1-D integer array, got {a.dtype} {a.shape}")
    if n is not None and len(a) != n:
        raise ValueError(f"{name}: {len(a)} entries, expected {n}")
    return a if a.dtype == np.int64 else a.astype(np.int64)


def _rows(a, n: int) -> np.ndarray:
    a = np.asarray(a, dtype=np.float32)
    if a.ndim != 2 or len(a) != n or a.shape[1] < 1:
        raise ValueError(f"rows shape {a.shape}: must be ({n}, D) with D >= 1")
    return np.ascontiguousarray(a)


def _buffer(size: int, out) -> bytearray | memoryview:
    """A writable message of ``size`` bytes: a new ``bytearray``, or the first ``size`` bytes of
    ``out`` (a reused send buffer)."""
    if out is None:
        return bytearray(size)
    view = memoryview(out).cast("B")
    if view.readonly or len(view) < size:
        raise ValueError(f"out: need a writable buffer of >= {size} bytes, got "
                         f"{'a read-only one' if view.readonly else f'{len(view)} bytes'}")
    return view[:size]


def _encode(kind: int, dim: int, bound: int, first: np.ndarray, second: np.ndarray,
            rows: np.ndarray | None, out) -> bytearray | memoryview:
    n = len(first)
    meta = HEADER_BYTES + 16 * n
    buf = _buffer(meta + (0 if rows is None else 4 * rows.size), out)
    _HEADER.pack_into(buf, 0, MAGIC, kind, n, dim, bound)
    words = np.frombuffer(buf, dtype=np.int64, count=2 * n, offset=HEADER_BYTES)
    words[:n] = first
    words[n:] = second
    if rows is not None:
        np.frombuffer(buf, dtype=np.float32, offset=meta)[:] = rows.ravel()
    return buf


def _decode(message, kind: int, dim: int | None) -> tuple[int, int, int]:
    """``(rows, D, bound)`` of a message's header, checked against ``kind``, ``dim`` and the
    message's length."""
    size = len(message)
    what = KIND_NAMES[kind]
    if size < HEADER_BYTES:
        raise ValueError(f"{what} truncated: {size} bytes, the header alone is {HEADER_BYTES}")
    magic, got, n, d, bound = _HEADER.unpack_from(message, 0)
    if magic != MAGIC:
        raise ValueError(f"{what}: bad magic {magic!r}, expected {MAGIC!r}")
    if got != kind:
        raise ValueError(f"message kind {got} ({KIND_NAMES.get(got, 'unknown')}) where a {what} "
                         f"(kind {kind}) was expected")
    if n < 0:
        raise ValueError(f"{what}: row count {n} < 0")
    if d < 1:
        raise ValueError(f"{what}: D = {d} < 1")
    if dim is not None and d != dim:
        raise ValueError(f"{what}: D = {d} in the message, {dim} expected")
    if kind == PULL_REQUEST and bound < 0:
        raise ValueError(f"{what}: bound {bound} < 0")
    expected = HEADER_BYTES + n * (16 if kind == PULL_REQUEST else 16 + 4 * d)
    if size != expected:
        raise ValueError(f"{what} {'truncated' if size < expected else 'has trailing bytes'}: "
                         f"{size} bytes, the header ({n} rows, D = {d}) implies {expected}")
    return n, d, bound


def _body(message, n: int, d: int, with_rows: bool):
    words = np.frombuffer(message, dtype="<i8", count=2 * n, offset=HEADER_BYTES)
    if not with_rows:
        return words[:n], words[n:]
    rows = np.frombuffer(message, dtype="<f4", count=n * d, offset=HEADER_BYTES + 16 * n)
    return words[:n], words[n:], rows.reshape(n, d)


def encode_pull(keys: np.ndarray, versions: np.ndarray, dim: int, bound: int = 0,
                out=None) -> bytearray | memoryview:
    """Client: a pull request for ``keys`` (unique) given the versions the client holds.

    Args:
        keys: ``[n]`` int64 keys.
        versions: ``[n]`` the server version of each cached copy; negative = not cached.
        dim: embedding width D the client expects (the server checks it against its table).
        bound: read staleness bound s_r >= 0.
        out: a writable buffer to build the message in (a reused send buffer; see the module
            docstring); None: a new ``bytearray``.

    Returns:
        The message: the new ``bytearray``, or a ``memoryview`` of the head of ``out``.
    """
    keys = _keys(keys, "keys")
    versions = _keys(versions, "versions", len(keys))
    if dim < 1 or bound < 0:
        raise ValueError(f"dim = {dim}, bound = {bound}: need dim >= 1 and bound >= 0")
    return _encode(PULL_REQUEST, dim, bound, keys, versions, None, out)


def serve_pull(message, table: ShardTable, out=None) -> bytearray | memoryview:
    """Server: answer a pull request with the rows the client lacks or holds too stale.

    ``out``: as for :func:`encode_pull`.

    Raises:
        ValueError: a malformed request, or one for another D than the table's.
    """
    n, d, bound = _decode(message, PULL_REQUEST, table.dim)
    keys, versions = _body(message, n, d, False)
    pick = np.empty(n, dtype=np.int64)
    slots = np.empty(n, dtype=np.int64)
    m = _select(table.index, table.slot_keys, table.versions, keys, versions, bound, pick, slots)
    response = _buffer(HEADER_BYTES + m * (16 + 4 * d), out)
    _HEADER.pack_into(response, 0, MAGIC, PULL_RESPONSE, m, d, bound)
    _gather(table.values, table.versions, keys, pick, slots, m,
            np.frombuffer(response, dtype=np.uint8, offset=HEADER_BYTES))
    return response


def decode_pull(response, dim: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Client: ``(keys [m], versions [m], rows [m, D])`` of a pull response (views into
    ``response``, valid until its buffer is reused); ``dim``, if given, is checked."""
    n, d, _ = _decode(response, PULL_RESPONSE, dim)
    return _body(response, n, d, True)


def encode_push(keys: np.ndarray, counts: np.ndarray, rows: np.ndarray,
                out=None) -> bytearray | memoryview:
    """Client: a push of ``rows [n, D]`` (float32 gradients) with their update ``counts``;
    ``out`` as for :func:`encode_pull`."""
    keys = _keys(keys, "keys")
    counts = _keys(counts, "counts", len(keys))
    rows = _rows(rows, len(keys))
    return _encode(PUSH, rows.shape[1], 0, keys, counts, rows, out)


def apply_push(message, table: ShardTable) -> None:
    """Server: ``value[k] += row``, ``ver[k] += count`` for every pushed row (absent keys are
    inserted first).

    Raises:
        ValueError: a malformed push, one for another D than the table's, or a full shard
            (then nothing is applied).
    """
    n, d, _ = _decode(message, PUSH, table.dim)
    keys, counts, rows = _body(message, n, d, True)
    if _apply(table.index, table.slot_keys, table._size, table.values, table.versions, keys,
              counts, rows) < 0:
        raise ValueError(f"shard full: capacity {table.capacity} keys, push not applied")


# ------------------------------------------------------------------------------------------
# Fit and measurement
# ------------------------------------------------------------------------------------------

def fit_linear(rows: Sequence[float], seconds: Sequence[float],
               relative: bool = True) -> tuple[float, float]:
    """Fit ``seconds = per_message + per_row x rows`` by least squares with both >= 0.

    Args:
        rows: rows per message (at least two distinct values).
        seconds: the time of each message.
        relative: minimise relative residuals ``(fit - t) / t`` (the default: timings spread
            over orders of magnitude, and absolute residuals would let the largest messages
            decide the intercept alone); False minimises absolute residuals.

    Returns:
        ``(per_message, per_row)``. Where the unconstrained fit has a negative intercept, the
        intercept is clipped to 0 and the per-row cost refitted through the origin (likewise a
        negative slope is clipped to 0 and the intercept refitted as a weighted mean).
    """
    x = np.asarray(rows, dtype=np.float64)
    y = np.asarray(seconds, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"rows {x.shape} and seconds {y.shape}: need equal 1-D shapes")
    if not (np.isfinite(x).all() and np.isfinite(y).all()) or (x < 0).any():
        raise ValueError("rows and seconds must be finite, rows >= 0")
    if len(np.unique(x)) < 2:
        raise ValueError("need at least two distinct row counts")
    if relative and (y <= 0).any():
        raise ValueError("relative fit: every time must be > 0")
    scale = float(np.abs(y).max()) or 1.0  # fit in units of the largest time
    y = y / scale
    w = 1 / y if relative else np.ones_like(y)
    w2 = w * w
    a, b = np.linalg.lstsq(np.stack([w, w * x], axis=1), w * y, rcond=None)[0]
    if not (a >= 0 and b >= 0):

        def loss(ab: tuple[float, float]) -> float:
            return float((w2 * (ab[0] + ab[1] * x - y) ** 2).sum())

        through_origin = (0.0, max(0.0, float((w2 * x * y).sum() / (w2 * x * x).sum())))
        flat = (max(0.0, float((w2 * y).sum() / w2.sum())), 0.0)
        a, b = min(through_origin, flat, key=loss)
    return float(a) * scale, float(b) * scale


@dataclass(frozen=True)
class SoftwareCosts:
    """Fitted software costs of a PS exchange (seconds) and the medians they come from.

    ``*_message_s``: seconds per message; ``*_row_s``: seconds per row handled (a key sent, a
    row received or pushed), as :mod:`workbench.cluster.time_model` charges them.
    ``client_seconds[i]`` / ``server_seconds[i]``: median time of one whole exchange of
    ``sizes[i]`` keys (2 messages, ``3 x sizes[i]`` rows) on each side (module docstring).
    """

    client_message_s: float
    client_row_s: float
    server_message_s: float
    server_row_s: float
    dim: int
    sizes: tuple[int, ...]
    client_seconds: tuple[float, ...]
    server_seconds: tuple[float, ...]

    def to_dict(self) -> dict:
        """Plain JSON-ready dict (tuples as lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


def _distinct_keys(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` distinct keys spread over [0, 2^62) in random order (a sparse key space)."""
    keys = np.unique(rng.integers(0, 2**62, size=n + n // 8 + 16, dtype=np.int64))
    while len(keys) < n:  # practically never
        keys = np.union1d(keys, rng.integers(0, 2**62, size=n, dtype=np.int64))
    return rng.permutation(keys)[:n]


def _exchange(table: ShardTable, request: tuple, push: tuple,
              buffers: tuple) -> tuple[float, float]:
    """One pull + push exchange; ``(client seconds, server seconds)``."""
    keys, versions, bound = request
    counts, grads = push
    request_buf, response_buf, push_buf = buffers
    t0 = time.perf_counter()
    message = encode_pull(keys, versions, table.dim, bound, out=request_buf)
    t1 = time.perf_counter()
    response = serve_pull(message, table, out=response_buf)
    t2 = time.perf_counter()
    decode_pull(response, table.dim)
    update = encode_push(keys, counts, grads, out=push_buf)
    t3 = time.perf_counter()
    apply_push(update, table)
    t4 = time.perf_counter()
    return (t1 - t0) + (t3 - t2), (t2 - t1) + (t4 - t3)


def measure(dim: int, sizes: Sequence[int] = (1, 8, 64, 512, 4096), repeats: int = 7,
            table_rows: int = 100_000, seed: int = 0,
            fresh_buffers: bool = False) -> SoftwareCosts:
    """Time the client and server sides of exchanges of each size and fit their costs.

    A shard of ``table_rows`` random keys (random rows and versions) serves, per size ``n``, a
    pull of ``n`` distinct stored keys (half not cached, half one update beyond the bound, so
    all ``n`` rows come back) and a push of ``n`` rows. Sizes are interleaved over
    ``repeats`` rounds after one untimed exchange per size (JIT compilation, caches); the
    medians are fitted with :func:`fit_linear` against the ``3 n`` rows handled, and the
    intercept is split over the exchange's 2 messages (module docstring). A negative fitted
    intercept is clipped to 0 and the per-row cost refitted through the origin. Inputs are
    deterministic in ``seed``; the timings are not.

    Args:
        dim: embedding width D.
        sizes: keys per exchange (at least two distinct, each <= ``table_rows``).
        repeats: timed exchanges per size.
        table_rows: keys stored in the shard.
        seed: seed of the keys, rows, versions and messages.
        fresh_buffers: build every message in a new ``bytearray`` instead of three reused send
            buffers (measures the allocator and page faults too; see the module docstring).
    """
    sizes = tuple(int(n) for n in sizes)
    if repeats < 1 or dim < 1:
        raise ValueError(f"repeats = {repeats}, dim = {dim}: both must be >= 1")
    if len(set(sizes)) < 2 or min(sizes) < 1 or max(sizes) > table_rows:
        raise ValueError(f"sizes {sizes}: need two distinct sizes in [1, table_rows]")
    rng = np.random.default_rng(seed)
    keys = _distinct_keys(rng, table_rows)
    versions = rng.integers(0, 1000, size=table_rows, dtype=np.int64)
    table = ShardTable.from_rows(keys, rng.standard_normal((table_rows, dim), np.float32),
                                 versions)
    bound = 4
    work = []
    for n in sizes:
        pick = rng.choice(table_rows, size=n, replace=False)
        have = versions[pick] - bound - 1  # stale (server versions only grow)
        have[rng.random(n) < 0.5] = -1  # not cached
        grads = rng.standard_normal((n, dim), np.float32) * np.float32(1e-3)
        work.append(((keys[pick], have, bound), (rng.integers(1, 4, size=n), grads)))
    largest = max(sizes)
    buffers = (None, None, None) if fresh_buffers else (
        bytearray(HEADER_BYTES + 16 * largest),
        bytearray(HEADER_BYTES + (16 + 4 * dim) * largest),
        bytearray(HEADER_BYTES + (16 + 4 * dim) * largest))
    for request, push in work:
        _exchange(table, request, push, buffers)
    client = [[] for _ in sizes]
    server = [[] for _ in sizes]
    enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            for i, (request, push) in enumerate(work):
                c, s = _exchange(table, request, push, buffers)
                client[i].append(c)
                server[i].append(s)
    finally:
        if enabled:
            gc.enable()
    client_s = tuple(statistics.median(t) for t in client)
    server_s = tuple(statistics.median(t) for t in server)
    rows = [ROWS_PER_KEY * n for n in sizes]
    cm, cr = fit_linear(rows, client_s)
    sm, sr = fit_linear(rows, server_s)
    return SoftwareCosts(client_message_s=cm / MESSAGES_PER_EXCHANGE, client_row_s=cr,
                         server_message_s=sm / MESSAGES_PER_EXCHANGE, server_row_s=sr, dim=dim,
                         sizes=sizes, client_seconds=client_s, server_seconds=server_s)
