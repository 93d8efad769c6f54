"""Framed messages of numpy arrays over torch.distributed point-to-point (gloo), with byte
accounting and sender-side link shaping.

A message is a fixed header and one byte payload, sent as two tensors with their own tags so a
receiver can take the next header from *any* sender and then the payload from that sender:

    header int64[4 + 4 x MAX_ARRAYS]  (tag 1)        payload uint8[payload_bytes]  (tag 2)
    +----+-----------+----------+---------------+    +--------------------------------------+
    | op | iteration | n_arrays | payload_bytes |    | array 0 bytes | array 1 bytes | ...  |
    +----+-----------+----------+---------------+    +--------------------------------------+
    | dtype, rows, cols, category  per array    |

Every array is tagged with a byte *category* ([`CATEGORIES`][]): ``rows`` (embedding values),
``meta`` (keys, versions, update counts, masks) or ``dense`` (dense parameters); the header
counts as ``header``. Each [`Endpoint`][] counts the bytes and messages it really sent and
received per category, which the validation compares with the emulated clock's accounting.

Sends leave through the [`ShapedLink`][workbench.cluster.shaped_link.ShapedLink] of their
destination (the sender's side of that link), and optionally through a shared one (a server's own
network link). With ``threaded=True`` every destination gets its own sender thread, so a server
shaping its reply to a slow worker does not hold up the reply to a fast one: the links are parallel,
as in the emulated clock.

A process supervised by the launcher ([`workbench.training.distributed`][]) passes ``waiting``:
a context manager around every call that blocks on a peer (a receive, a flush), so that the
launcher can tell a process waiting for the others from one stuck in its own code.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

from workbench.cluster.shaped_link import ShapedLink

__all__ = ["CATEGORIES", "GLOO_TRANSFER_BYTES", "Endpoint", "Message"]

MAX_ARRAYS = 4
HEADER_LEN = 4 + 4 * MAX_ARRAYS
HEADER_BYTES = 8 * HEADER_LEN
TAG_HEADER, TAG_PAYLOAD = 1, 2
#: Bytes gloo adds to one transfer (a ``dist.send`` and its ``dist.recv``) on the link between
#: two nodes: 96 from the sender (its operation preamble) and 48 from the receiver (its
#: notification), whatever the size -- measured on the kernel network's interface counters
#: (:mod:`workbench.cluster.edge_network`) for 400 B and 40 kB transfers, to the byte.
GLOO_TRANSFER_BYTES = 96 + 48
CATEGORIES = ("rows", "meta", "dense", "header")
_DTYPES = (np.dtype(np.int64), np.dtype(np.float32), np.dtype(np.uint8))


@dataclass
class Message:
    """A received message: its sender, opcode, iteration and arrays (in send order)."""

    src: int
    op: int
    iteration: int
    arrays: list[np.ndarray]

    @property
    def nbytes(self) -> int:
        """Bytes on the wire, header included."""
        return HEADER_BYTES + sum(a.nbytes for a in self.arrays)


def _frame(op: int, iteration: int, arrays: list[tuple[np.ndarray, str]]
           ) -> tuple[torch.Tensor, torch.Tensor | None, dict[str, int]]:
    if len(arrays) > MAX_ARRAYS:
        raise ValueError(f"a message holds at most {MAX_ARRAYS} arrays, got {len(arrays)}")
    header = np.zeros(HEADER_LEN, np.int64)
    parts, counted = [], defaultdict(int)
    counted["header"] = HEADER_BYTES
    for i, (array, category) in enumerate(arrays):
        array = np.ascontiguousarray(array)
        if array.dtype not in _DTYPES or array.ndim > 2:
            raise ValueError(f"array {i}: dtype {array.dtype}, ndim {array.ndim} cannot be sent "
                             f"(int64, float32 or uint8, 1-D or 2-D)")
        rows = array.shape[0]
        cols = array.shape[1] if array.ndim == 2 else 0
        header[4 + 4 * i: 8 + 4 * i] = (_DTYPES.index(array.dtype), rows, cols,
                                        CATEGORIES.index(category))
        parts.append(array.reshape(-1).view(np.uint8))
        counted[category] += array.nbytes
    payload = np.concatenate(parts) if parts else np.zeros(0, np.uint8)
    header[:4] = (op, iteration, len(arrays), len(payload))
    body = torch.from_numpy(payload) if len(payload) else None
    return torch.from_numpy(header), body, counted


def _unframe(src: int, header: np.ndarray, payload: np.ndarray
             ) -> tuple[Message, dict[str, int]]:
    """The message a header and its payload hold, and its bytes per category."""
    op, iteration, n_arrays, _ = (int(v) for v in header[:4])
    arrays, offset = [], 0
    counted: dict[str, int] = defaultdict(int)
    counted["header"] = HEADER_BYTES
    for i in range(n_arrays):
        code, rows, cols, category = (int(v) for v in header[4 + 4 * i: 8 + 4 * i])
        dtype = _DTYPES[code]
        count = rows * (cols or 1)
        array = np.frombuffer(payload, dtype, count, offset).copy()
        arrays.append(array.reshape(rows, cols) if cols else array)
        offset += count * dtype.itemsize
        counted[CATEGORIES[category]] += count * dtype.itemsize
    return Message(src, op, iteration, arrays), counted


class Endpoint:
    """One process's side of the message layer.

    Args:
        links: the shaped link towards each destination rank (missing: unshaped).
        shared: a link every send also passes (a server's own network link), or None.
        threaded: one sender thread per destination (sends return at once, in order per
            destination); without it [`send`][] blocks until the bytes have left.
        group: the torch.distributed process group (None: the default one).
        waiting: a context manager factory entered around every call that blocks on a peer
            ([`recv`][], [`flush`][], an unthreaded [`send`][]), or None; used by the
            calling thread only (never by the sender threads).
    """

    def __init__(self, links: dict[int, ShapedLink] | None = None,
                 shared: ShapedLink | None = None, threaded: bool = False,
                 group=None,
                 waiting: Callable[[], contextlib.AbstractContextManager] | None = None
                 ) -> None:
        self.links = dict(links or {})
        self.shared = shared
        self.threaded = threaded
        self.group = group
        self.waiting = waiting or contextlib.nullcontext
        self.sent: dict[str, int] = defaultdict(int)
        self.received: dict[str, int] = defaultdict(int)
        self.messages_sent = 0
        self.messages_received = 0
        self.transfers_sent = 0  # torch.distributed sends: a header, and a payload if any
        self.transfers_received = 0
        self._lock = threading.Lock()
        self._queues: dict[int, queue.Queue] = {}
        self._threads: list[threading.Thread] = []
        self._error: BaseException | None = None

    # -- sending -----------------------------------------------------------------------------
    def send(self, dst: int, op: int, iteration: int,
             arrays: Sequence[tuple[np.ndarray, str]] = ()) -> None:
        """Send ``arrays`` (each with its byte category) to rank ``dst``."""
        self._raise_pending()
        framed = _frame(op, iteration, list(arrays))
        if not self.threaded:
            with self.waiting():  # the link's delay, then a send the peer must take
                self._transmit(dst, *framed)
            return
        if dst not in self._queues:
            self._queues[dst] = queue.Queue()
            thread = threading.Thread(target=self._sender, args=(dst,), daemon=True,
                                      name=f"send->{dst}")
            thread.start()
            self._threads.append(thread)
        self._queues[dst].put(framed)

    def _transmit(self, dst: int, header: torch.Tensor, body: torch.Tensor | None,
                  counted: dict[str, int]) -> None:
        nbytes = sum(counted.values())
        # the message leaves when both its link and the shared link allow: reserve on both, wait
        # for the later (not one after the other)
        delay = max([link.delay(nbytes) for link in (self.links.get(dst), self.shared)
                     if link is not None and link.shaped], default=0.0)
        if delay > 0:
            time.sleep(delay)
        dist.send(header, dst, group=self.group, tag=TAG_HEADER)
        if body is not None:
            dist.send(body, dst, group=self.group, tag=TAG_PAYLOAD)
        with self._lock:
            for category, n in counted.items():
                self.sent[category] += n
            self.messages_sent += 1
            self.transfers_sent += 1 + (body is not None)

    def _sender(self, dst: int) -> None:
        q = self._queues[dst]
        while True:
            item = q.get()
            try:
                if item is None:
                    return
                if self._error is None:
                    self._transmit(dst, *item)
            except BaseException as error:  # surfaced on the caller's next send / flush
                self._error = error
            finally:
                q.task_done()

    def _raise_pending(self) -> None:
        if self._error is not None:
            raise RuntimeError(f"a send from this process failed: {self._error}") from self._error

    def flush(self) -> None:
        """Wait until every queued send has left (threaded mode), re-raising a send error."""
        with self.waiting():
            for q in self._queues.values():
                q.join()
        self._raise_pending()

    def close(self) -> None:
        """Flush and stop the sender threads."""
        self.flush()
        for q in self._queues.values():
            q.put(None)
        for thread in self._threads:
            thread.join()
        self._queues.clear()
        self._threads.clear()

    # -- receiving ---------------------------------------------------------------------------
    def recv(self, src: int | None = None) -> Message:
        """Receive the next message from ``src`` (None: from any rank)."""
        header = torch.zeros(HEADER_LEN, dtype=torch.int64)
        with self.waiting():
            sender = dist.recv(header, src, group=self.group, tag=TAG_HEADER)
            sender = src if src is not None else sender
            payload = np.zeros(int(header[3]), np.uint8)
            if len(payload):
                dist.recv(torch.from_numpy(payload), sender, group=self.group, tag=TAG_PAYLOAD)
        message, counted = _unframe(int(sender), header.numpy(), payload)
        with self._lock:
            for category, n in counted.items():
                self.received[category] += n
            self.messages_received += 1
            self.transfers_received += 1 + bool(len(payload))
        return message

    def traffic(self) -> dict[str, int]:
        """Bytes sent and received per category, message counts, and transfer counts (each a
        torch.distributed send: gloo frames it, [`workbench.cluster.edge_network`][])."""
        out = {f"sent_{c}_bytes": int(self.sent.get(c, 0)) for c in CATEGORIES}
        out.update({f"recv_{c}_bytes": int(self.received.get(c, 0)) for c in CATEGORIES})
        out["messages_sent"] = self.messages_sent
        out["messages_received"] = self.messages_received
        out["transfers_sent"] = self.transfers_sent
        out["transfers_received"] = self.transfers_received
        return out
