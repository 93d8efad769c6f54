r"""Two-tier embedding storage: hot rows in accelerator memory, every row in host memory.

Hotline (ISCA 2024) and FAE (PVLDB 2021) keep the popular rows in GPU HBM and the rest in CPU
DRAM (our formalisation of Hotline):

        accelerator tier  (CUDA: device memory; CPU: a separate tensor store)
        +---------------------------+
        | hot[slot] = row of key k  |  slot[k] >= 0  <=> k is hot          gather_hot / update_hot
        +---------------------------+
                     ^  upload (link: PCIe; CPU: a copy)   |  download
                     |                                     v
        host tier  (CUDA: pinned host memory; CPU: the table)
        +---------------------------+
        | host[k] for every key k   |  authoritative for cold keys;        gather_host / update_host
        +---------------------------+  a hot key's host copy is synced only by sync_to_host

A hot key is read and updated in the accelerator tier only; its host copy is refreshed when the
hot set changes (`set_hot`, which writes the evicted rows back) or by an explicit
`sync_to_host` (FAE's phase switch). `table` merges both into the current table.

The accelerator tier is the head of one buffer whose tail is a staging area for cold rows:

    buffer = [ hot[0] ... hot[H-1] | staged cold row 0 ... staged cold row C-1 | spare ]
    source index of a micro-batch's distinct key k:  slot[k]  if hot,  H + (rank of k among
                                                      the micro-batch's cold keys) if cold

so a micro-batch whose rows are partly hot and partly cold (Hotline's non-popular one) reads
them with ONE gather (`gather_fused`) and updates them with ONE ``index_add_``
(`update_fused`): the hot rows in place, the staged cold rows to be written back whole
(`staged`). ``host[k] += delta`` and ``staged + delta`` copied back are the same float32
addition, so the result is bitwise the separate gathers' and updates'.

Gathers are ``index_select`` calls, which release the GIL, so a background thread gathering
host rows really runs beside the main thread's compute ([`workbench.training.hotline`][]). On
CUDA the host tier is pinned so that `upload` copies without blocking on a side stream.

A CPU has no host-accelerator link: the copy is a memcpy in the same DRAM. With ``link_gbps``
set, `upload` and `download` shape the link in wall time like a token bucket: the copy
is made, then the caller sleeps (releasing the GIL) until ``latency + bytes / bandwidth`` has
passed since it started, so a transfer on the background thread really overlaps the main
thread's compute and one on the main thread really delays it.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from torch import Tensor

__all__ = ["TieredEmbeddingStore"]


class TieredEmbeddingStore:
    """Embedding rows split over an accelerator tier (hot keys) and a host tier (all keys).

    Args:
        table: ``float32[rows, D]`` initial rows (copied).
        hot: the hot keys (any order; duplicates ignored).
        device: the accelerator (``"cpu"`` emulates it with a separate tensor; ``"cuda"`` puts
            the hot tier in device memory and pins the host tier).
        link_gbps: CPU only: shape `upload` / `download` to this bandwidth (GB/s,
            1e9 bytes/s); None copies at memory speed. Ignored on CUDA (the link is real).
        link_latency_us: CPU only: latency added to every shaped transfer.

    Attributes:
        host: ``[rows, D]`` host tier.
        hot: ``[H, D]`` accelerator tier (the head of the staging buffer).
        slot: ``int64[rows]`` slot of each key in the accelerator tier, -1 when cold (host
            memory).
        hot_keys: ``int64[H]`` the key of each slot, ascending.
        version: counts the changes of the hot set (a plan made under another version is stale).
    """

    def __init__(self, table: np.ndarray, hot: np.ndarray, device: str | torch.device = "cpu",
                 link_gbps: float | None = None, link_latency_us: float = 0.0):
        if link_gbps is not None and not link_gbps > 0:
            raise ValueError(f"link_gbps = {link_gbps}: must be > 0 (or None: unshaped)")
        table = np.asarray(table, dtype=np.float32)
        if table.ndim != 2:
            raise ValueError(f"table has shape {table.shape}: need [rows, D]")
        self.device = torch.device(device)
        shaped = link_gbps is not None and self.device.type == "cpu"
        self.link_bytes_per_s = link_gbps * 1e9 if shaped and link_gbps is not None else None
        self.link_latency_s = link_latency_us * 1e-6 if shaped else 0.0
        host = torch.from_numpy(table.copy())
        self.host = host.pin_memory() if self.device.type == "cuda" else host
        self.rows, self.dim = table.shape
        self.slot = torch.full((self.rows,), -1, dtype=torch.int64)
        self.hot_keys = torch.zeros(0, dtype=torch.int64)
        self._buffer = torch.zeros((0, self.dim), dtype=torch.float32, device=self.device)
        self.hot = self._buffer
        self._slot_device = self.slot.to(self.device)
        self.version = 0
        self.set_hot(hot)

    # -- placement ------------------------------------------------------------------------------
    def set_hot(self, hot: np.ndarray) -> int:
        """Make ``hot`` the hot set: write the current hot rows back to the host tier, then load
        the new ones from it. Returns the rows moved (written back + loaded)."""
        keys = np.unique(np.asarray(hot, dtype=np.int64))
        if keys.size and (keys[0] < 0 or keys[-1] >= self.rows):
            raise ValueError(f"hot keys span [{keys[0]}, {keys[-1]}]: outside the table of "
                             f"{self.rows} rows")
        moved = self.sync_to_host()
        self.slot.fill_(-1)
        self.hot_keys = torch.from_numpy(keys)
        self.slot[self.hot_keys] = torch.arange(keys.size, dtype=torch.int64)
        self._slot_device = self.slot.to(self.device)
        self._buffer = self.host.index_select(0, self.hot_keys).to(self.device)
        self.hot = self._buffer
        self.version += 1
        return moved + int(keys.size)

    def sync_to_host(self) -> int:
        """Copy every hot row to its host copy (FAE's switch to a normal phase); returns rows."""
        if self.hot_keys.numel():
            self.host.index_copy_(0, self.hot_keys, self.hot.to("cpu"))
        return int(self.hot_keys.numel())

    def sync_to_hot(self) -> int:
        """Reload every hot row from its host copy (FAE's switch to a hot phase); returns rows."""
        if self.hot_keys.numel():
            self.hot.copy_(self.host.index_select(0, self.hot_keys).to(self.device))
        return int(self.hot_keys.numel())

    def reserve_staging(self, rows: int) -> None:
        """Make room for ``rows`` staged cold rows behind the hot tier (grows the buffer by at
        least half when it must: amortised O(1) copies of the hot tier). Call it before a
        background thread stages into the area, never while one does."""
        hot_rows = int(self.hot_keys.numel())
        if self._buffer.shape[0] - hot_rows >= rows:
            return
        spare = max(rows, (self._buffer.shape[0] - hot_rows) * 3 // 2, 64)
        grown = torch.empty((hot_rows + spare, self.dim), dtype=torch.float32,
                            device=self.device)
        grown[:hot_rows] = self.hot
        self._buffer, self.hot = grown, grown[:hot_rows]

    def is_hot(self, keys: Tensor) -> Tensor:
        """``bool`` mask of the keys (host ``int64`` tensor) that live in the accelerator tier."""
        return self.slot[keys] >= 0

    def slots(self, keys: Tensor) -> Tensor:
        """Accelerator slots of ``keys`` (on the accelerator; -1 for cold keys)."""
        return self._slot_device[keys.to(self.device, non_blocking=True)]

    @property
    def hot_bytes(self) -> int:
        """Bytes the accelerator tier holds."""
        return int(self.hot.numel()) * 4

    # -- data movement --------------------------------------------------------------------------
    def gather_hot(self, slots: Tensor) -> Tensor:
        """Rows of accelerator ``slots`` (all >= 0), on the accelerator."""
        return self.hot.index_select(0, slots)

    def gather_host(self, keys: Tensor) -> Tensor:
        """Rows of host ``keys`` (a CPU ``int64`` tensor) from the host tier; pinned on CUDA."""
        out = self.host.index_select(0, keys)
        return out.pin_memory() if self.device.type == "cuda" else out

    def _shaped_copy(self, rows: Tensor, into: Tensor | None = None) -> Tensor:
        """A CPU copy (into ``into`` if given) that takes at least ``latency + bytes /
        bandwidth`` when shaped."""
        begin = time.perf_counter()
        out = rows.clone() if into is None else into.copy_(rows)
        if self.link_bytes_per_s is not None and rows.numel():
            due = self.link_latency_s + rows.numel() * rows.element_size() / self.link_bytes_per_s
            left = due - (time.perf_counter() - begin)
            if left > 0:
                time.sleep(left)
        return out

    def upload(self, rows: Tensor) -> Tensor:
        """Host rows -> accelerator (the link): a non-blocking copy on CUDA (on the current
        stream), a (shaped) copy into a separate tensor on CPU."""
        if self.device.type == "cpu":
            return self._shaped_copy(rows)
        return rows.to(self.device, non_blocking=True)

    def download(self, rows: Tensor) -> Tensor:
        """Accelerator rows -> host (the link back)."""
        return rows.to("cpu") if self.device.type != "cpu" else self._shaped_copy(rows)

    def stage(self, rows: Tensor) -> None:
        """Host rows -> the staging area's first ``len(rows)`` rows (the link; reserve first):
        a non-blocking copy on CUDA (on the current stream), a (shaped) copy on CPU."""
        area = self.staged(rows.shape[0])
        if area.shape[0] != rows.shape[0]:
            raise ValueError(f"{rows.shape[0]} rows to stage: the staging area holds "
                             f"{area.shape[0]} (reserve_staging first)")
        if self.device.type == "cpu":
            self._shaped_copy(rows, into=area)
        else:
            area.copy_(rows, non_blocking=True)

    def gather_fused(self, sources: Tensor) -> Tensor:
        """Rows of buffer ``sources`` (slots of hot rows, ``H + i`` for staged row i), on the
        accelerator: one gather for hot and cold rows."""
        return self._buffer.index_select(0, sources)

    def update_fused(self, sources: Tensor, delta: Tensor) -> None:
        """``buffer[sources] += delta``: hot rows updated in place, staged rows made current
        (write them back with `staged`)."""
        self._buffer.index_add_(0, sources, delta)

    def staged(self, rows: int) -> Tensor:
        """The staging area's first ``rows`` rows (a view, on the accelerator)."""
        return self._buffer[self.hot.shape[0]:self.hot.shape[0] + rows]

    def write_host(self, keys: Tensor, rows: Tensor) -> None:
        """``host[keys] = rows`` (host tensors): the write-back of updated staged rows."""
        self.host.index_copy_(0, keys, rows)

    def update_hot(self, slots: Tensor, delta: Tensor) -> None:
        """``hot[slots] += delta`` (one row per slot, on the accelerator)."""
        self.hot.index_add_(0, slots, delta)

    def update_host(self, keys: Tensor, delta: Tensor) -> None:
        """``host[keys] += delta`` (host tensors): the write-back of updated cold rows."""
        self.host.index_add_(0, keys, delta)

    def table(self) -> np.ndarray:
        """The current table: host rows with every hot row taken from the accelerator tier."""
        out = self.host.clone()
        if self.hot_keys.numel():
            out.index_copy_(0, self.hot_keys, self.hot.to("cpu"))
        return out.numpy()
