r"""RecD's model on TorchRec's own sparse path: TorchRec's ``EmbeddingBagCollection`` under the
workbench's DLRM dense part, fed a TorchRec KJT (every row) or RecD's IKJT as TorchRec's
variable-batch KJT (the unique rows of each dedup group plus ``inverse_indices``).

    KJT  --torchrec EBC (every row, pooled sum)------------------+
    IKJT --ikjt_to_torchrec--> VBE KJT --torchrec EBC            +--> [B, K, D] --DLRM--> logits
           (unique rows, expanded by inverse_indices) -----------+

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
as on the workbench's path. TorchRec's fused kernels (``FusedEmbeddingBagCollection``, fbgemm's
TBE with the optimizer in backward) take one batch size for every feature and so no
variable-batch KJT: they are not a path of RecD's deduplicated batches on CPU.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from workbench.models.ctr import DLRM
from workbench.sparse.jagged_tensor import InverseKeyedJaggedTensor, KeyedJaggedTensor
from workbench.sparse.torchrec_interop import ikjt_to_torchrec, to_torchrec
from workbench.utils.torchrec import load_torchrec


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
        tr = load_torchrec()
        owners: dict[str, list[str]] = {}
        for k in keys:
            owners.setdefault(tables.get(k, k), []).append(k)
        self.keys = list(keys)
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.ebc = tr.EmbeddingBagCollection(tables=[
                tr.EmbeddingBagConfig(name=table, embedding_dim=embedding_dim,
                                      num_embeddings=int(cardinalities[table]),
                                      feature_names=features)
                for table, features in owners.items()], device=torch.device("cpu"))
            self.dlrm = DLRM(n_dense, len(self.keys), embedding_dim, bottom_mlp, top_mlp)
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
