r"""RecD's model on TorchRec's own sparse path: TorchRec's ``EmbeddingBagCollection`` under the
workbench's DLRM dense part, fed a TorchRec KJT (every row) or RecD's IKJT as TorchRec's
variable-batch KJT (the unique rows of each dedup group plus ``inverse_indices``).

    KJT  --torchrec EBC or fused TBE (every row, pooled sum)---------+
    IKJT --ikjt_to_torchrec--> VBE KJT --torchrec EBC or fused TBE   +--> [B, K, D] --DLRM--> logits
           (unique rows, expanded by inverse_indices) ---------------+

Every feature is a pooled sum bag (TorchRec's EBC pools; a sequence feature is the sum of its
history's rows in the item table it shares, one ``EmbeddingBagConfig`` with both feature
names), so this is not [`RecDModel`][workbench.models.recd.RecDModel] (whose history tower
attends over the sequence): it is the model TorchRec's modules build, trained on both inputs to
the same parameters (TorchRec expands the pooled unique rows with ``index_select``, so both
paths compute the same logits up to float summation order).

The tables' gradients are TorchRec's: dense ``[num_rows, D]`` (``nn.EmbeddingBag`` as the EBC
builds it), so an optimizer step updates every row of every table whatever the batch reads;
``sparse_gradients=True`` switches the EBC's bags to row-indexed sparse gradients (a setting
TorchRec's module does not expose: ``EmbeddingBag.sparse``), so the step follows the rows read
as on the workbench's path.

[`FusedTBEDLRM`][] is the same model on TorchRec's fused kernel: fbgemm's table-batched embedding
(TBE, ``SplitTableBatchedEmbeddingBagsCodegen``, the operator TorchRec's fused and sharded EBCs
run), every table in one host-memory TBE, its optimizer applied inside the backward to the rows
read. Two ways in for an IKJT, each a step's whole cost:

    variable batch  TBE(values, offsets, batch_size_per_feature_per_rank=[[U_k]])
                    (TorchRec's VBE call)
    padded          each key's U_k bags, then B - U_k empty ones: a fixed-batch TBE call
    both            pooled [U_k, D] per key --index_select(inverse_k)--> [B, D]

TorchRec's unsharded ``FusedEmbeddingBagCollection`` passes no per-key batch to its TBE (a
variable-batch KJT fails its offsets check), so the variable-batch call is the TBE's own, as
TorchRec's sharded lookup makes it. Measured on fbgemm-gpu-cpu 1.8 (the taobao batch of 512,
4 keys): the variable-batch forward spends ~7 ms per call building its metadata
(``fbgemm::generate_vbe_metadata``, thousands of ATen calls on CPU) against 0.15 ms for the
fixed-batch forward, so the padded call is the one a CPU path would make. The fused optimizer
is exact SGD at the trainer's rate: fbgemm-gpu-cpu 1.8's row-wise Adagrad fails in its backward
when two features share a table (``num of rows processed by adagrad: 0 does not match c_block
size``), as the history and the item do here, and element-wise Adagrad has no variable-batch
path. The dense part keeps the trainer's optimizer; the tables start from the EBC's initial
values under the same seed, so both TorchRec paths start from the same parameters.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

import torch
from torch import nn

from workbench.models.ctr import DLRM
from workbench.sparse.jagged_tensor import InverseKeyedJaggedTensor, KeyedJaggedTensor
from workbench.sparse.torchrec_interop import ikjt_to_torchrec, to_torchrec
from workbench.utils.torchrec import load_torchrec


def _ebc_and_dlrm(n_dense: int, keys: Sequence[str], cardinalities: Mapping[str, int],
                  tables: Mapping[str, str], embedding_dim: int, bottom_mlp: Sequence[int],
                  top_mlp: Sequence[int], seed: int) -> tuple[Any, DLRM]:
    """TorchRec's EBC (one table per name, its features listed on it) and the DLRM dense part,
    initialised in that order from ``torch.manual_seed(seed)`` in a forked RNG."""
    tr = load_torchrec()
    owners: dict[str, list[str]] = {}
    for k in keys:
        owners.setdefault(tables.get(k, k), []).append(k)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        ebc = tr.EmbeddingBagCollection(tables=[
            tr.EmbeddingBagConfig(name=table, embedding_dim=embedding_dim,
                                  num_embeddings=int(cardinalities[table]),
                                  feature_names=features)
            for table, features in owners.items()], device=torch.device("cpu"))
        return ebc, DLRM(n_dense, len(keys), embedding_dim, bottom_mlp, top_mlp)


class TorchRecDLRM(nn.Module):
    """DLRM over TorchRec's ``EmbeddingBagCollection`` (see the module docstring).

    Args:
        n_dense: number of dense features (0: no bottom MLP).
        keys: the sparse features, in interaction order.
        cardinalities: rows of each table, by table name.
        tables: each feature's table (a sequence feature names its item table; default: its
            own name).
        embedding_dim: D.
        bottom_mlp: hidden widths of the bottom MLP.
        top_mlp: hidden widths of the top MLP.
        seed: parameters initialised from ``torch.manual_seed(seed)`` in a forked RNG.
        sparse_gradients: the EBC's bags give row-indexed sparse gradients (False: TorchRec's
            dense ones).

    Raises:
        workbench.utils.torchrec.TorchRecUnavailable: TorchRec is absent or does not load.
    """

    def __init__(self, n_dense: int, keys: Sequence[str], cardinalities: Mapping[str, int],
                 tables: Mapping[str, str], embedding_dim: int, bottom_mlp: Sequence[int],
                 top_mlp: Sequence[int], seed: int, sparse_gradients: bool = False) -> None:
        super().__init__()
        self.keys = list(keys)
        self.ebc, self.dlrm = _ebc_and_dlrm(n_dense, self.keys, cardinalities, tables,
                                            embedding_dim, bottom_mlp, top_mlp, seed)
        for bag in self.ebc.embedding_bags.values():
            bag.sparse = sparse_gradients

    @staticmethod
    def batch(sparse: KeyedJaggedTensor | InverseKeyedJaggedTensor) -> Any:
        """The TorchRec input of a workbench batch: a KJT of every row, or an IKJT as
        TorchRec's variable-batch KJT."""
        if isinstance(sparse, InverseKeyedJaggedTensor):
            return ikjt_to_torchrec(sparse)
        return to_torchrec(sparse)

    def forward(self, dense: torch.Tensor | None, features: Any) -> torch.Tensor:
        """Logits ``[B]`` of a TorchRec KJT (every row, or variable-batch with
        ``inverse_indices``)."""
        pooled = self.ebc(features).to_dict()
        return self.dlrm(dense, torch.stack([pooled[k] for k in self.keys], dim=1))


#: How [`FusedTBEDLRM`][] takes an IKJT (see the module docstring).
IkjtCall = Literal["variable batch", "padded"]


class FusedTBEDLRM(nn.Module):
    """DLRM over fbgemm's fused table-batched embedding, TorchRec's fused kernel (see the module
    docstring): the same model, parameters and inputs as [`TorchRecDLRM`][], the tables updated
    by exact SGD inside the backward.

    Args:
        n_dense: as [`TorchRecDLRM`][].
        keys: as [`TorchRecDLRM`][].
        cardinalities: as [`TorchRecDLRM`][].
        tables: as [`TorchRecDLRM`][].
        embedding_dim: D.
        bottom_mlp: as [`TorchRecDLRM`][].
        top_mlp: as [`TorchRecDLRM`][].
        seed: the tables start from the EBC's values under ``seed``, the dense part as
            [`TorchRecDLRM`][]'s.
        lr: the tables' SGD rate (the trainer's rate: the dense part's optimizer is the
            trainer's).
        ikjt_call: how an IKJT reaches the TBE: ``"variable batch"`` or ``"padded"``.

    Raises:
        workbench.utils.torchrec.TorchRecUnavailable: TorchRec is absent or does not load.
    """

    def __init__(self, n_dense: int, keys: Sequence[str], cardinalities: Mapping[str, int],
                 tables: Mapping[str, str], embedding_dim: int, bottom_mlp: Sequence[int],
                 top_mlp: Sequence[int], seed: int, lr: float,
                 ikjt_call: IkjtCall = "padded") -> None:
        super().__init__()
        if ikjt_call not in ("variable batch", "padded"):
            raise ValueError(f"ikjt_call = {ikjt_call!r}, expected 'variable batch' or 'padded'")
        self.keys, self.dim, self.ikjt_call = list(keys), embedding_dim, ikjt_call
        ebc, self.dlrm = _ebc_and_dlrm(n_dense, self.keys, cardinalities, tables,
                                       embedding_dim, bottom_mlp, top_mlp, seed)
        from fbgemm_gpu.split_embedding_configs import EmbOptimType  # loaded with torchrec
        from fbgemm_gpu.split_table_batched_embeddings_ops_common import (
            EmbeddingLocation,
            PoolingMode,
        )
        from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
            ComputeDevice,
            SplitTableBatchedEmbeddingBagsCodegen,
        )

        names = list(ebc.embedding_bags)
        self.tbe = SplitTableBatchedEmbeddingBagsCodegen(
            [(ebc.embedding_bags[t].weight.shape[0], embedding_dim, EmbeddingLocation.HOST,
              ComputeDevice.CPU) for t in names],
            feature_table_map=[names.index(tables.get(k, k)) for k in self.keys],
            optimizer=EmbOptimType.EXACT_SGD, learning_rate=lr,
            pooling_mode=PoolingMode.SUM)
        with torch.no_grad():
            for weight, t in zip(self.tbe.split_embedding_weights(), names, strict=True):
                weight.copy_(ebc.embedding_bags[t].weight)

    batch = staticmethod(TorchRecDLRM.batch)

    def optimizer_parameters(self) -> Iterator[nn.Parameter]:
        """The dense part's parameters: the tables are updated inside the TBE's backward, so a
        trainer's optimizer keeps no state for them."""
        return self.dlrm.parameters()

    def pooled(self, features: Any) -> torch.Tensor:
        """``[B, K, D]``: every key's pooled rows, in the model's key order, from a TorchRec KJT
        (every row, or variable-batch with ``inverse_indices``)."""
        found = features.inverse_indices_or_none()  # TorchRec's permute drops them
        order = list(features.keys())
        if order != self.keys:
            features = features.permute([order.index(k) for k in self.keys])
        if found is None:
            return self.tbe(features.values(), features.offsets()).view(-1, len(self.keys),
                                                                          self.dim)
        inverse_keys, inverse = found
        unique = [s[0] for s in features.stride_per_key_per_rank()]
        batch = inverse.shape[1]
        if self.ikjt_call == "variable batch":
            flat = self.tbe(features.values(), features.offsets(),
                            batch_size_per_feature_per_rank=[[u] for u in unique])
            rows = [part.view(u, self.dim)
                    for part, u in zip(flat.split([u * self.dim for u in unique]), unique,
                                       strict=True)]
        else:
            lengths = features.lengths().split(unique)
            padded = torch.cat([torch.cat([n, n.new_zeros(batch - n.numel())])
                                for n in lengths])
            offsets = torch.zeros(padded.numel() + 1, dtype=padded.dtype)
            torch.cumsum(padded, 0, out=offsets[1:])
            out = self.tbe(features.values(), offsets).view(batch, len(self.keys), self.dim)
            rows = [out[:u, i] for i, u in enumerate(unique)]
        return torch.stack([r.index_select(0, inverse[inverse_keys.index(k)])
                            for r, k in zip(rows, self.keys, strict=True)], dim=1)

    def forward(self, dense: torch.Tensor | None, features: Any) -> torch.Tensor:
        """Logits ``[B]`` of a TorchRec KJT (every row, or variable-batch with
        ``inverse_indices``)."""
        return self.dlrm(dense, self.pooled(features))
