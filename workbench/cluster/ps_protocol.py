"""A minimal parameter-server wire protocol: pull and push messages, served from a shard.

The messages the clock of [`workbench.cluster.time_model`][] counts, as a real (in-process) PS
protocol: a client that builds and reads them ([`encode_pull`][], [`decode_pull`][],
[`encode_push`][]) and a server shard that answers them ([`serve_pull`][],
[`apply_push`][]) out of a [`ShardTable`][workbench.cluster.shard_table.ShardTable].
[`workbench.cluster.software_cost`][] times both sides. (Not to be confused with
[`workbench.cluster.wire`][], the framed messages between real processes.)

Wire format (little-endian; ``n`` rows; every message starts with the same 32-byte header):

    header        magic b"PSW1" | kind u32 | rows i64 | D i64 | bound i64          32 bytes
    PULL_REQUEST  header(n, D, s_r) | keys i64[n] | versions i64[n]                 + 16 n
    PULL_RESPONSE header(m, D, s_r) | keys i64[m] | versions i64[m] | rows f32[m,D] + (16 + 4D) m
    PUSH          header(n, D, 0)   | keys i64[n] | counts i64[n]   | rows f32[n,D] + (16 + 4D) n

The request and the push carry exactly the bytes the time model charges (8 + 8 per key, plus
``4 D`` per pushed row). A returned row carries its key and server version besides its ``4 D``
bytes (the client stores that version in its cache line), 16 bytes more than the time model's
``4 D`` per pulled row. A decoder checks the magic, the kind, ``rows >= 0``, ``D >= 1``, the
table's ``D`` and that the length is exactly what the header implies; anything else raises
`ValueError` naming the field.

Server side: [`serve_pull`][] returns ``(k_i, ver[k_i], value[k_i])`` for the keys the shard's
``select_rows`` picks (missing or too stale for the client), in request order; [`apply_push`][]
is the shard's ``apply_rows`` (see [`workbench.cluster.shard_table`][]). The look-ups, the
version test, the gather and the scatter-add run in numba kernels; Python only parses headers
and wraps buffers.

Buffers: every message is built in place in one buffer: a new ``bytearray``, or (``out=``) a
reused send buffer, as a real PS client and server keep.
"""

from __future__ import annotations

import struct
import sys

import numba as nb
import numpy as np

from workbench.cluster.shard_table import ShardTable, apply_rows, as_int64, select_rows

if sys.byteorder != "little":  # the kernels write native-order views into the buffers
    raise ImportError("workbench.cluster.ps_protocol needs a little-endian machine")

__all__ = [
    "HEADER_BYTES",
    "KIND_NAMES",
    "MAGIC",
    "PULL_REQUEST",
    "PULL_RESPONSE",
    "PUSH",
    "apply_push",
    "decode_pull",
    "encode_pull",
    "encode_push",
    "serve_pull",
]

MAGIC = b"PSW1"
PULL_REQUEST, PULL_RESPONSE, PUSH = 1, 2, 3
KIND_NAMES = {PULL_REQUEST: "pull request", PULL_RESPONSE: "pull response", PUSH: "push"}
_HEADER = struct.Struct("<4sIqqq")
HEADER_BYTES = _HEADER.size  # 32


# ------------------------------------------------------------------------------------------
# Server kernel: the rows of a pull response
# ------------------------------------------------------------------------------------------

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


# ------------------------------------------------------------------------------------------
# Messages
# ------------------------------------------------------------------------------------------

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
    keys = as_int64(keys, "keys")
    versions = as_int64(versions, "versions", len(keys))
    if dim < 1 or bound < 0:
        raise ValueError(f"dim = {dim}, bound = {bound}: need dim >= 1 and bound >= 0")
    return _encode(PULL_REQUEST, dim, bound, keys, versions, None, out)


def serve_pull(message, table: ShardTable, out=None) -> bytearray | memoryview:
    """Server: answer a pull request with the rows the client lacks or holds too stale.

    ``out``: as for [`encode_pull`][].

    Raises:
        ValueError: a malformed request, or one for another D than the table's.
    """
    n, d, bound = _decode(message, PULL_REQUEST, table.dim)
    keys, versions = _body(message, n, d, False)
    pick = np.empty(n, dtype=np.int64)
    slots = np.empty(n, dtype=np.int64)
    m = select_rows(table.index, table.slot_keys, table.versions, keys, versions, bound, pick,
                    slots)
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
    ``out`` as for [`encode_pull`][]."""
    keys = as_int64(keys, "keys")
    counts = as_int64(counts, "counts", len(keys))
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
    if apply_rows(table.index, table.slot_keys, table.size_cell, table.values, table.versions, keys,
              counts, rows) < 0:
        raise ValueError(f"shard full: capacity {table.capacity} keys, push not applied")
