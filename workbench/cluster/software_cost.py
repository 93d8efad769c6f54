"""The software cost of a parameter-server exchange, measured on a real minimal wire protocol.

The clock of [`workbench.cluster.time_model`][] charges ``L + bytes / B`` per transfer; what a
message costs in software (serialisation, hash look-ups) is measured here. The messages that clock
counts are a real (in-process) PS protocol ([`workbench.cluster.ps_protocol`][]): a client that
builds and reads them and a server shard ([`ShardTable`][workbench.cluster.shard_table.ShardTable])
that answers them out of a hash map. This module times both sides to fit a per-message and a
per-row cost on each.

Measurement ([`measure`][]). One exchange of ``n`` keys is a pull request of ``n`` unique keys
that the server answers with all ``n`` rows (half not cached, half stale), and a push of ``n``
rows back: 2 messages, and ``3 n`` rows handled in the time model's sense (``rows_j = u_j +
pulled_j + pushed_j``: a key sent, a row received, a row pushed). The costs are in the units the
time model charges them, per message and per row handled:

    client_s(n) = encode_pull + decode_pull + encode_push = 2 client_message_s + 3n client_row_s
    server_s(n) = serve_pull + apply_push                 = 2 server_message_s + 3n server_row_s

Each size is timed ``repeats`` times (sizes interleaved, garbage collector off, kernels compiled
beforehand); the medians are fitted by [`fit_linear`][] against ``3 n`` (a least-squares fit
of relative residuals with both coefficients constrained to be >= 0) and the intercept halved.
Every message is built in place in one buffer: a new ``bytearray``, or (``out=``) a reused send
buffer, as a real PS client and server keep. [`measure`][] reuses three buffers by default, so
the costs are the protocol's work (serialisation, look-ups, copies), not the allocator's: on the
development machine (a Firecracker VM with free-page reporting) a fresh 2 MB buffer costs ~1-3
ms of page faults some of the time and nothing at other times, depending on the allocator's
state (``fresh_buffers=True`` measures that case).
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from workbench.cluster.ps_protocol import (
    HEADER_BYTES,
    apply_push,
    decode_pull,
    encode_pull,
    encode_push,
    serve_pull,
)
from workbench.cluster.shard_table import ShardTable

__all__ = ["MESSAGES_PER_EXCHANGE", "ROWS_PER_KEY", "SoftwareCosts", "fit_linear", "measure"]

MESSAGES_PER_EXCHANGE = 2  # a pull (request + response) and a push
ROWS_PER_KEY = 3  # each key of an exchange: sent, its row received, its row pushed


# ------------------------------------------------------------------------------------------
# Fit and measurement
# ------------------------------------------------------------------------------------------

def fit_linear(rows: Sequence[float] | np.ndarray, seconds: Sequence[float] | np.ndarray,
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
    row received or pushed), as [`workbench.cluster.time_model`][] charges them.
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
    medians are fitted with [`fit_linear`][] against the ``3 n`` rows handled, and the
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
    client: list[list[float]] = [[] for _ in sizes]
    server: list[list[float]] = [[] for _ in sizes]
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
