r"""How one micro-batch's forward and backward run: eagerly, or captured as a graph.

On an accelerator a small micro-batch is bound by launching its kernels from Python, not by its
FLOPs: on an H200 the forward and backward of Hotline's 50-sample popular micro-batch took
2.5 ms, as long as the whole 1,024-sample mini-batch (``docs/hotline_cuda.md``). Capturing the
step removes the per-kernel Python cost: ``torch.compile`` fuses the kernels, and with
``mode = "reduce-overhead"`` replays the step as a CUDA graph (one launch).

A captured graph has fixed shapes, so a micro-batch of ``b`` samples over ``U`` distinct rows is
padded to ``(bucket(b), bucket(U))`` with ``bucket(n)`` the next power of two at least
``min_bucket``: at most ``log2`` as many graphs as sizes, each captured once. The padding adds
nothing: padded samples have loss weight 0 (so zero gradient everywhere) and look up row 0,
padded rows are looked up by nobody (zero gradient), and the deltas returned are the first ``U``
rows'. Only the summation order of the dense gradients' matrix products can change (different
shapes), so a captured step equals the eager one to float32 rounding, not bitwise; the eager
step is the reference and the default ([`EAGER`][]).

Formally, for a micro-batch with rows ``R[U, D]``, lookups ``inv[b, F]`` and a mini-batch of
``B`` samples (the loss is ``sum_i l_i / B``):

    loss  = sum_{i < b} w_i l(model(x_i, R[inv_i]), y_i),   w_i = 1 (0 on padding)
    delta = -lr_sparse x B x d(loss / B) / dR      (the rows' SGD step on the per-sample loss)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["Capture", "CAPTURES", "bucket", "MicroBatchStep"]


@dataclass(frozen=True)
class Capture:
    """How [`MicroBatchStep`][] runs a micro-batch.

    Attributes:
        name: the name it is chosen by ([`CAPTURES`][]).
        backend: ``torch.compile`` backend; None runs eagerly.
        mode: ``torch.compile`` mode (``reduce-overhead``: CUDA graphs).
        min_bucket: the smallest padded size (samples and rows).
        cuda_only: whether it needs a CUDA device.
    """

    name: str
    backend: str | None = None
    mode: str | None = None
    min_bucket: int = 16
    cuda_only: bool = False


EAGER = Capture("eager")
CAPTURES = {c.name: c for c in (
    EAGER, Capture("compile", backend="inductor"),
    Capture("cuda_graphs", backend="inductor", mode="reduce-overhead", cuda_only=True))}


def bucket(n: int, minimum: int) -> int:
    """The next power of two >= ``max(n, minimum)``."""
    n = max(int(n), int(minimum), 1)
    return 1 << (n - 1).bit_length()


class MicroBatchStep:
    """Forward and backward of one micro-batch of ``model``, eager or captured.

    Args:
        model: the dense model (``model(dense, embeddings[b, F, D]) -> logits[b]``).
        capture: how to run it.
        device: where it runs.
        lr_sparse: the rows' SGD learning rate.
    """

    def __init__(self, model: torch.nn.Module, capture: Capture, device: torch.device,
                 lr_sparse: float) -> None:
        if capture.cuda_only and device.type != "cuda":
            raise ValueError(f"capture {capture.name!r} needs a CUDA device (this one is "
                             f"{device.type}): use 'eager' or 'compile'")
        self.model, self.capture, self.lr_sparse = model, capture, lr_sparse
        self.shapes: set[tuple[int, int]] = set()
        self._compiled = None if capture.backend is None else torch.compile(
            self._padded_loss, backend=capture.backend, mode=capture.mode, dynamic=False)
        self._mark_step = (torch.compiler.cudagraph_mark_step_begin
                           if capture.mode == "reduce-overhead" else None)

    def _padded_loss(self, rows: Tensor, inverse: Tensor, dense: Tensor | None,
                     labels: Tensor, weight: Tensor) -> Tensor:
        logits = self.model(dense, rows[inverse])
        return F.binary_cross_entropy_with_logits(logits, labels, weight=weight,
                                                  reduction="sum")

    def __call__(self, rows: Tensor, inverse: Tensor, dense: Tensor | None, labels: Tensor,
                 total: int) -> tuple[Tensor, Tensor]:
        """Forward + backward of a micro-batch on its distinct ``rows`` (``[U, D]``) expanded
        by ``inverse`` (``[b, F]``); the dense gradients accumulate. Returns the rows' SGD deltas
        (``-lr x`` per-sample-loss gradient summed over occurrences) and the loss sum (a 0-d
        tensor on the device: read after the step, so that reading it does not stall the
        device's queue between the micro-batches)."""
        if self._compiled is None:
            rows = rows.detach().requires_grad_(True)
            logits = self.model(dense, rows[inverse])
            loss = F.binary_cross_entropy_with_logits(logits, labels, reduction="sum")
            (loss / total).backward()
            assert rows.grad is not None  # rows require grad: backward() set it
            return rows.grad.mul_(-self.lr_sparse * total), loss.detach()
        return self._captured(rows, inverse, dense, labels, total)

    def _captured(self, rows: Tensor, inverse: Tensor, dense: Tensor | None, labels: Tensor,
                  total: int) -> tuple[Tensor, Tensor]:
        (u, _), b = rows.shape, inverse.shape[0]
        ub, bb = bucket(u, self.capture.min_bucket), bucket(b, self.capture.min_bucket)
        self.shapes.add((bb, ub))
        padded = F.pad(rows.detach(), (0, 0, 0, ub - u)).requires_grad_(True)
        inv = F.pad(inverse, (0, 0, 0, bb - b))
        d = F.pad(dense, (0, 0, 0, bb - b)) if dense is not None else None
        y = F.pad(labels, (0, bb - b))
        weight = F.pad(torch.ones_like(labels), (0, bb - b))
        if self._mark_step is not None:
            self._mark_step()
        assert self._compiled is not None
        with torch._dynamo.config.patch(recompile_limit=256,
                                        accumulated_recompile_limit=4096):
            loss = self._compiled(padded, inv, d, y, weight)
        (loss / total).backward()
        assert padded.grad is not None
        # a CUDA graph's outputs are overwritten by its next replay: keep copies
        return padded.grad[:u].mul(-self.lr_sparse * total), loss.detach().clone()
