r"""TorchRec interop: the workbench's KJT and IKJT as ``torchrec.KeyedJaggedTensor`` and back.

TorchRec is installed by ``make torchrec`` ([`workbench.utils.torchrec`][] says how and checks
the pair). Both sides use the same layout (key-major ``lengths``, ``values`` concatenated in the
same order), so a conversion copies arrays and never reorders them:

    KeyedJaggedTensor(keys, values, lengths) [+ weights]
        --to_torchrec-->   torchrec KJT(keys, values, lengths, offsets, stride=B, weights)
        <--from_torchrec-- (int64 values and lengths; weights as float32, or None)

    InverseKeyedJaggedTensor (RecD: unique rows per dedup group + one inverse per group)
        expanded:  to_torchrec(ikjt.expand())        -- B rows per key
        kept:      ikjt_to_torchrec(ikjt)            -- TorchRec's variable-batch KJT:
                   key k holds the U_g unique rows of its group g (stride_per_key_per_rank
                   [[U_g]]), and inverse_indices = (keys, [len(keys), B]) maps every sample to
                   its unique row: row k of it is the inverse lookup of k's group
        <--ikjt_from_torchrec-- the groups given, or the keys whose inverse rows and unique
                   counts are equal (a coarser but equivalent partition when two groups'
                   lookups coincide)

Offsets are always given to TorchRec with the lengths: TorchRec computes missing offsets with an
fbgemm operator, which this path never needs. A variable-batch KJT without ``inverse_indices``
(different batch sizes per key) has no workbench KJT: it is refused with a one-line error.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from workbench.sparse.jagged_tensor import (
    InverseKeyedJaggedTensor,
    KeyedJaggedTensor,
    partition_groups,
)
from workbench.utils.torchrec import load_torchrec

__all__ = ["Converted", "torchrec_kjt_class", "to_torchrec", "from_torchrec", "ikjt_to_torchrec",
           "ikjt_from_torchrec"]

def torchrec_kjt_class() -> type:
    """``torchrec.KeyedJaggedTensor``.

    Raises:
        workbench.utils.torchrec.TorchRecUnavailable: TorchRec is absent or fails to load
            ([`load_torchrec`][workbench.utils.torchrec.load_torchrec]).
    """
    return load_torchrec("torchrec.sparse.jagged_tensor").KeyedJaggedTensor


@dataclass(frozen=True)
class Converted:
    """A TorchRec KJT as the workbench holds it.

    Attributes:
        kjt: keys, values and lengths.
        weights: one float32 weight per value, or None (an unweighted KJT).
    """

    kjt: KeyedJaggedTensor
    weights: np.ndarray | None = None


def _offsets(lengths: np.ndarray) -> np.ndarray:
    """``[0, l0, l0 + l1, ...]`` (int64): where each list starts, and the total at the end."""
    out = np.zeros(lengths.size + 1, np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def _cls(kjt_class: type | None) -> type:
    return kjt_class if kjt_class is not None else torchrec_kjt_class()


def _weights(weights: np.ndarray | torch.Tensor | None, n: int) -> torch.Tensor | None:
    if weights is None:
        return None
    w = torch.as_tensor(weights, dtype=torch.float32).reshape(-1)
    if w.numel() != n:
        raise ValueError(f"weights has {w.numel()} entries for {n} values (one per value)")
    return w


def to_torchrec(kjt: KeyedJaggedTensor, weights: np.ndarray | torch.Tensor | None = None, *,
                kjt_class: type | None = None) -> Any:
    """``kjt`` as a ``torchrec.KeyedJaggedTensor`` (int64 values, lengths and offsets).

    Args:
        kjt: the batch.
        weights: one weight per value (a weighted KJT), or None.
        kjt_class: the TorchRec class to build; None: `torchrec_kjt_class`.

    Raises:
        ValueError: ``weights`` does not have one entry per value.
        TorchRecUnavailable: see `torchrec_kjt_class`.
    """
    cls = _cls(kjt_class)
    lengths = kjt.lengths()
    return cls(keys=kjt.keys(), values=torch.from_numpy(kjt.values().copy()),
               weights=_weights(weights, kjt.num_values()),
               lengths=torch.from_numpy(lengths.copy()),
               offsets=torch.from_numpy(_offsets(lengths)), stride=kjt.batch_size)


def _numpy(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().cpu().numpy().astype(np.int64, copy=True)


def from_torchrec(trkjt: Any) -> Converted:
    """A ``torchrec.KeyedJaggedTensor`` as the workbench's [`KeyedJaggedTensor`][] (and its
    weights).

    Raises:
        ValueError: a variable-batch KJT (batch size per key) without ``inverse_indices``: the
            workbench's KJT has one batch size (a deduplicated one converts with
            [`ikjt_from_torchrec`][]).
    """
    if trkjt.variable_stride_per_key():
        raise ValueError("a variable-batch TorchRec KJT (stride_per_key_per_rank "
                         f"{trkjt.stride_per_key_per_rank()}) has no single batch size: a "
                         "deduplicated one converts with ikjt_from_torchrec")
    w = trkjt.weights_or_none()
    kjt = KeyedJaggedTensor(list(trkjt.keys()), _numpy(trkjt.values()), _numpy(trkjt.lengths()))
    return Converted(kjt, None if w is None
                     else w.detach().cpu().numpy().astype(np.float32, copy=True))


def ikjt_to_torchrec(ikjt: InverseKeyedJaggedTensor, *, kjt_class: type | None = None) -> Any:
    """``ikjt`` kept deduplicated, as TorchRec's variable-batch KJT with ``inverse_indices``
    (see the module docstring); ``to_torchrec(ikjt.expand())`` gives it expanded.

    Raises:
        TorchRecUnavailable: see `torchrec_kjt_class`.
    """
    cls = _cls(kjt_class)
    keys = ikjt.keys()
    lengths = np.concatenate([ikjt.lengths(k) for k in keys])
    values = np.concatenate([ikjt.values(k) for k in keys])
    inverse = np.stack([ikjt.inverse_lookup(k) for k in keys])
    return cls(keys=keys, values=torch.from_numpy(values), lengths=torch.from_numpy(lengths),
               offsets=torch.from_numpy(_offsets(lengths)),
               stride_per_key_per_rank=[[ikjt.num_unique(k)] for k in keys],
               inverse_indices=(keys, torch.from_numpy(inverse)))


def ikjt_from_torchrec(trkjt: Any, groups: Iterable[Sequence[str]] | None = None
                       ) -> InverseKeyedJaggedTensor:
    """TorchRec's variable-batch KJT with ``inverse_indices`` as an IKJT.

    Args:
        trkjt: the KJT (``ikjt_to_torchrec``'s layout).
        groups: the dedup groups; None: the keys whose inverse rows and unique counts are
            equal, in key order.

    Raises:
        ValueError: no ``inverse_indices``, weights (an IKJT holds none), inverse keys other
            than the KJT's, or groups whose keys' inverse rows differ.
    """
    found = trkjt.inverse_indices_or_none()
    if found is None:
        raise ValueError("this TorchRec KJT has no inverse_indices: it is not deduplicated "
                         "(convert it with from_torchrec)")
    if trkjt.weights_or_none() is not None:
        raise ValueError("a weighted TorchRec KJT has no IKJT (an IKJT holds no weights)")
    keys = list(trkjt.keys())
    inv_keys, inverse = list(found[0]), _numpy(found[1])
    if inv_keys != keys:
        raise ValueError(f"inverse_indices name keys {inv_keys}, the KJT {keys}")
    strides = [int(s[0]) if len(s) == 1 else int(sum(s))
               for s in trkjt.stride_per_key_per_rank()]
    lengths, values = _numpy(trkjt.lengths()), _numpy(trkjt.values())
    row_starts = _offsets(np.asarray(strides, np.int64))
    per_key_len = {k: lengths[row_starts[i]:row_starts[i + 1]] for i, k in enumerate(keys)}
    value_starts = _offsets(np.asarray([per_key_len[k].sum() for k in keys], np.int64))
    per_key_val = {k: values[value_starts[i]:value_starts[i + 1]] for i, k in enumerate(keys)}
    if groups is None:
        found_groups: dict[tuple[int, bytes], list[str]] = {}
        for i, k in enumerate(keys):
            found_groups.setdefault((strides[i], inverse[i].tobytes()), []).append(k)
        groups = list(found_groups.values())
    groups = [list(g) for g in partition_groups(keys, groups)]
    index = {k: i for i, k in enumerate(keys)}
    for g in groups:
        if any(not np.array_equal(inverse[index[k]], inverse[index[g[0]]]) for k in g):
            raise ValueError(f"the keys of group {g} have different inverse_indices rows")
    return InverseKeyedJaggedTensor(keys, groups, per_key_val, per_key_len,
                                    [inverse[index[g[0]]] for g in groups])

