r"""The host-side plan of one Hotline mini-batch: which samples are popular, and where every row
of each micro-batch is read from.

Our formalisation. For a mini-batch of keys ``K[B, F]`` and the store's slot map
(``slot[k] >= 0`` iff key k is hot,
[`TieredEmbeddingStore`][workbench.cluster.tiered_store.TieredEmbeddingStore]):

    U, inv     = unique(K)                       ONE sort of the B F keys
    hot_u      = slot[U] >= 0
    popular_i  = AND_f hot_u[inv[i, f]]          sample i's every key is hot
    for a micro-batch S (popular or not):
        used   = [u in inv[S]]                   its distinct keys, as a mask over U
        U_S    = U[used],  inv_S = (cumsum(used) - 1)[inv[S]]

``U_S`` and ``inv_S`` equal ``unique(K[S], return_inverse=True)`` (``U`` is sorted, so its subset
is), but cost O(U + |S| F) instead of a sort per micro-batch: the split of the B = 4,096
mini-batch took 7.4 ms on the H200 host with three sorts (``docs/hotline_cuda.md``). The non-popular
micro-batch's fused gather sources are ``slot[k]`` for a hot key and ``H + rank`` for the
rank-th cold key (the store's staging area).

A plan reads only the keys and the slot map, never a row, so the plan of mini-batch t + 1 can be
made while mini-batch t trains ([`TieredTrainer`][workbench.training.hotline.TieredTrainer] does it
on a thread of its own); ``version`` is the store's hot-set version it was made under, and a plan
made before the hot set changed (an online re-profile) is made again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

__all__ = ["MicroBatchPlan", "plan_minibatch", "subset_unique"]


def subset_unique(uniq: np.ndarray, inverse: np.ndarray,
                  samples: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``unique(K[samples], return_inverse=True)`` from ``uniq, inverse = unique(K)``, no sort.

    Args:
        uniq: ``int64[U]`` the sorted distinct keys of the mini-batch.
        inverse: ``int64[B, F]`` each lookup's position in ``uniq``.
        samples: ``int64[S]`` the micro-batch's sample positions.

    Returns:
        ``(keys, inverse, used)``: the micro-batch's sorted distinct keys, its ``[S, F]`` inverse
        and the ``bool[U]`` mask of ``uniq`` it uses.
    """
    sub = inverse[samples]
    used = np.zeros(uniq.size, dtype=bool)
    used[sub] = True
    remap = np.cumsum(used, dtype=np.int64) - 1
    return uniq[used], remap[sub], used


@dataclass(frozen=True)
class MicroBatchPlan:
    """Where one Hotline mini-batch's samples and rows go (host ``int64`` tensors).

    Attributes:
        pop_idx / np_idx: sample positions of the popular / non-popular micro-batch.
        uniq_p / inv_p: the popular micro-batch's distinct keys and ``[Bp, F]`` inverse.
        slots_p: their accelerator slots.
        uniq_n / inv_n: the non-popular micro-batch's distinct keys and ``[Bn, F]`` inverse.
        cold_keys: its cold keys, ascending (gathered from host memory, staged).
        sources_n: each of ``uniq_n``'s buffer row: its slot if hot, ``H + rank`` if cold.
        version: the store's hot-set version the plan was made under.
        started / ended: ``time.perf_counter()`` when making the plan began and ended
            (wherever it ran).
    """

    pop_idx: Tensor
    np_idx: Tensor
    uniq_p: Tensor
    inv_p: Tensor
    slots_p: Tensor
    uniq_n: Tensor
    inv_n: Tensor
    cold_keys: Tensor
    sources_n: Tensor
    version: int
    started: float
    ended: float

    @property
    def seconds(self) -> float:
        """How long making the plan took."""
        return self.ended - self.started


def _t(a: np.ndarray) -> Tensor:
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64))


def plan_minibatch(keys: np.ndarray, slot: np.ndarray, hot_rows: int,
                   version: int = 0) -> MicroBatchPlan:
    """Plan one mini-batch (the module docstring's formulas).

    Args:
        keys: ``int64[B, F]`` the mini-batch's keys.
        slot: ``int64[rows]`` the store's slot map (-1: cold).
        hot_rows: H, the hot tier's rows (the staging area starts there).
        version: the store's hot-set version (recorded).
    """
    begin = time.perf_counter()
    uniq, inverse = np.unique(keys, return_inverse=True)
    inverse = inverse.reshape(keys.shape)
    slot_u = slot[uniq]
    popular = (slot_u >= 0)[inverse].all(axis=1)
    pop_idx, np_idx = np.flatnonzero(popular), np.flatnonzero(~popular)
    uniq_p, inv_p, used_p = subset_unique(uniq, inverse, pop_idx)
    uniq_n, inv_n, used_n = subset_unique(uniq, inverse, np_idx)
    sources = slot_u[used_n]
    cold = sources < 0
    sources[cold] = hot_rows + np.arange(int(cold.sum()), dtype=np.int64)
    return MicroBatchPlan(
        pop_idx=_t(pop_idx), np_idx=_t(np_idx), uniq_p=_t(uniq_p), inv_p=_t(inv_p),
        slots_p=_t(slot_u[used_p]), uniq_n=_t(uniq_n), inv_n=_t(inv_n),
        cold_keys=_t(uniq_n[cold]), sources_n=_t(sources), version=version,
        started=begin, ended=time.perf_counter())
