r"""RecD's model path: a DLRM with a user-history sequence tower, computed on deduplicated rows.

RecD (Zhao et al., MLSys'23) observes that the samples of a training batch share much of their
sparse input: every impression of a user session carries the same user features and the same
interaction history. An
[`InverseKeyedJaggedTensor`][workbench.sparse.jagged_tensor.InverseKeyedJaggedTensor] (IKJT) keeps,
per *dedup group* of features, only the group's ``U_g <= B`` unique rows and one inverse lookup
``inverse_g[B]``. Any compute that reads one group only can run on the ``U_g`` unique rows and be
expanded afterwards with ``out[inverse_g]``; this module does that for the embedding-bag lookups and
for the (much more expensive) sequence tower.

Notation: B batch, D = embedding_dim, K features ``f_1..f_K`` (in the order given to
[`RecDModel`][]), G dedup groups partitioning them, ``x_{s,k}`` the id list of feature k for
sample s, ``T_k`` the embedding table of feature k (``[num_rows, D]``; several features may share
one table, e.g. ``hist_item_id`` reads ``item_id``'s table).

Per-feature vectors (for sample s):

    pooled   f_k:  e_k = sum_{i in x_{s,k}} T_k[i]                        (EmbeddingBag, sum;
                                                                           an empty list gives 0)
    sequence f_k:  e_k = SequenceTower_k(x_{s,k}; T_k)                    (see below)

Per dedup group g with unique rows ``r = 0..U_g-1`` (``row(s) = inverse_g[s]``):

      unique rows of g (U_g of them)            per key k of g                       [B, D]
    +------------------------------+      +----------------------+
    | x_{r,k1} | x_{r,k2} | ...    | ---> | pooled:   EmbBag(sum) | --> out_k [U_g, D] --+
    +------------------------------+      | sequence: SeqTower    |                      |
                                          +----------------------+                       v
                                                        e_k = out_k[inverse_g]  (index_select)

SequenceTower (one self-attention block over the last ``max_length`` ids of the list):

    ids (left-truncated to the last L = max_length) -> T[ids] + P[pos]       [U, L, D]
        pos = 0 for the most recent item, 1 for the one before, ...          (padded, masked)
    h1 = LayerNorm(x + MHA(x, x, x; key padding mask))                      (no bias in MHA)
    h2 = LayerNorm(h1 + W2 ReLU(W1 h1 + b1) + b2)
    out = mean of h2 over the valid positions                               [U, D]
    (an empty list: 0; it attends to one dummy position so no softmax row is all -inf, and
     the pooling weights then zero it)

DLRM on top (a [`workbench.models.ctr.DLRM`][] fed with the e_k from above):

                          logit [B]
                            |
                           /\\      top MLP: top_mlp... -> 1 (ReLU hidden, linear last)
                          /__\\
                            |
                concat(z, interactions)
                            |
        _________________> Op <__________________        Op = DotInteraction over
       /                    |                    \\           (z, e_1, ..., e_K): <v_i, v_j>, i < j
      z                    e_1       ...         e_K
      |                     |                     |
     /\\   bottom MLP     [per-group compute above, expanded to B rows]
    /__\\  n_dense -> bottom_mlp... -> D (ReLU on every layer)
      |
   [dense]      (n_dense = 0: no bottom MLP, no z, top input = interactions, K >= 2)

Deduplicated and plain paths: [`RecDModel.forward`][] accepts either a
[`KeyedJaggedTensor`][workbench.sparse.jagged_tensor.KeyedJaggedTensor] or an IKJT. With a KJT the
*same* code runs with the group rows being all B samples (no dedup, no inverse lookup); with an IKJT
it runs on the ``U_g`` unique rows and expands through ``index_select(0, inverse_g)``. Every
operation above is row-independent (no batch statistics, no cross-sample attention, MHA kept off its
inference fast path by a float mask), so the two paths give equal logits and equal parameter
gradients up to floating-point summation order (the expansion's backward sums the gradients of
duplicate rows before they reach the parameters; padded widths may differ). [`RecDModel.work`][]
counts the rows and ids the per-group compute processes, the quantity RecD's dedup reduces.

Gradients w.r.t. the tables are row-indexed. Both lookups read a table through a
sparse-gradient op (``embedding_bag(..., sparse=True)`` for pooled features,
``embedding(..., sparse=True)`` in the tower), so ``T_k.grad`` is a sparse COO tensor: one
``[D]`` row per id read in the batch (the unique rows' ids on the IKJT path; padded tower
positions add zero rows for id 0), whatever ``num_rows`` is. A table shared by two features gets
both features' rows (autograd concatenates the two sparse gradients; the optimizer coalesces
them). Why: a dense gradient is a ``[num_rows, D]`` tensor zero-filled by the backward and swept
in full by the optimizer every step, a cost that grows with the table, not with the batch. On a
1M-row table it makes the whole step several times slower (``benchmarks/embedding_backward.py``),
swamps the compute dedup saves, and the IKJT/KJT training ratio then measures the table size
rather than dedup. In exact arithmetic both give the same update with SGD and with Adagrad (an
untouched row's gradient, Adagrad state increment and update are zero); ``sparse_gradients=False``
restores the dense path, for optimizers that reject sparse gradients (Adam, AdamW, weight decay).

MHA uses ``bias=False``: an additive key bias has a gradient that is exactly zero in exact
arithmetic (softmax is shift-invariant) but floating-point noise in practice, which Adagrad would
turn into +-lr updates of arbitrary sign, so the two paths would drift apart.

Sources: RecD (Zhao et al., "RecD: Deduplication for End-to-End Deep Learning Recommendation
Model Training Infrastructure", MLSys 2023); torchrec ``KeyedJaggedTensor`` layout; DLRM
(Naumov et al. 2019); SASRec-style self-attention over the interaction history (Kang & McAuley
2018).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from workbench.models.ctr import DLRM
from workbench.sparse.dedup import to_ikjt
from workbench.sparse.jagged_tensor import (
    InverseKeyedJaggedTensor,
    JaggedTensor,
    KeyedJaggedTensor,
    partition_groups,
)
from workbench.sparse.lookup import pooled_lookup

__all__ = [
    "FeatureKind",
    "FeatureSpec",
    "RecDModel",
    "SequenceTower",
]

FeatureKind = Literal["pooled", "sequence"]
SparseBatch = KeyedJaggedTensor | InverseKeyedJaggedTensor


# ------------------------------------------------------------------------------------------------
# feature specification


@dataclass(frozen=True)
class FeatureSpec:
    """One sparse feature of a [`RecDModel`][].

    Args:
        name: feature (KJT key) name.
        num_rows: rows of the feature's embedding table (ids must lie in ``[0, num_rows)``).
        kind: ``"pooled"`` (embedding bag, sum) or ``"sequence"`` ([`SequenceTower`][]).
        table: name of a table owned by another feature to share (e.g. ``hist_item_id`` with
            ``table="item_id"``); ``None`` (or the feature's own name): the feature owns a table
            named after itself.

    Raises:
        ValueError: empty name/table, ``num_rows < 1`` or an unknown kind.
        TypeError: non-string name/table or non-integer ``num_rows``.

    Example:
        >>> FeatureSpec("hist_item_id", 50, "sequence", table="item_id").table_name
        'item_id'
    """

    name: str
    num_rows: int
    kind: FeatureKind
    table: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"FeatureSpec name must be a string, got {self.name!r}")
        if not self.name:
            raise ValueError("FeatureSpec name must be non-empty")
        if isinstance(self.num_rows, bool) or not isinstance(self.num_rows, (int, np.integer)):
            raise TypeError(f"feature {self.name!r}: num_rows must be an int, got "
                            f"{self.num_rows!r}")
        if self.num_rows < 1:
            raise ValueError(f"feature {self.name!r}: num_rows = {self.num_rows}, must be >= 1")
        if self.kind not in ("pooled", "sequence"):
            raise ValueError(f"feature {self.name!r}: kind = {self.kind!r}, expected 'pooled' "
                             "or 'sequence'")
        if self.table is not None:
            if not isinstance(self.table, str):
                raise TypeError(f"feature {self.name!r}: table must be a string or None, got "
                                f"{self.table!r}")
            if not self.table:
                raise ValueError(f"feature {self.name!r}: table must be non-empty (or None)")

    @property
    def table_name(self) -> str:
        """Name of the embedding table the feature reads."""
        return self.table if self.table is not None else self.name

    @property
    def owns_table(self) -> bool:
        """True iff the feature owns its table (``table`` is ``None`` or its own name)."""
        return self.table_name == self.name


# ------------------------------------------------------------------------------------------------
# sequence tower


class SequenceTower(nn.Module):
    """One self-attention block over an id list, mean-pooled to one vector per row.

    Row-independent: the output of a row depends on that row's list only (no batch statistics,
    float key-padding mask so ``nn.MultiheadAttention`` never takes its inference fast path), so
    running on a subset of the rows gives the same per-row results up to float rounding.

    Args:
        dim: D, width of the embeddings and of the block.
        heads: attention heads (must divide ``dim``).
        max_length: L, lists are left-truncated to their last L ids.
        ffn_dim: hidden width of the feed-forward layer (default ``2 * dim``).

    Attributes:
        positions: ``[L, D]`` learned position embeddings; position 0 is the most recent item.
        attention: ``nn.MultiheadAttention(dim, heads, bias=False, batch_first=True)``.
        norm1, norm2: the two ``LayerNorm`` s.
        ffn: ``Linear(D, ffn_dim) -> ReLU -> Linear(ffn_dim, D)``.

    Example:
        >>> tower = SequenceTower(8, 2, max_length=5)
        >>> table = torch.randn(50, 8)
        >>> tower(JaggedTensor(np.array([3, 4, 5]), np.array([2, 0, 1])), table).shape
        torch.Size([3, 8])
    """

    def __init__(self, dim: int, heads: int, max_length: int, ffn_dim: int | None = None) -> None:
        super().__init__()
        if dim < 1:
            raise ValueError(f"SequenceTower dim = {dim}: must be >= 1")
        if heads < 1 or dim % heads:
            raise ValueError(f"SequenceTower heads = {heads}: must be >= 1 and divide dim = {dim}")
        if max_length < 1:
            raise ValueError(f"SequenceTower max_length = {max_length}: must be >= 1")
        ffn_dim = 2 * dim if ffn_dim is None else ffn_dim
        if ffn_dim < 1:
            raise ValueError(f"SequenceTower ffn_dim = {ffn_dim}: must be >= 1")
        self.dim = dim
        self.heads = heads
        self.max_length = max_length
        self.positions = nn.Parameter(torch.empty(max_length, dim).uniform_(
            -1.0 / math.sqrt(dim), 1.0 / math.sqrt(dim)))
        self.attention = nn.MultiheadAttention(dim, heads, bias=False, batch_first=True)
        self.norm1 = nn.LayerNorm(dim)
        self.ffn = nn.Sequential(nn.Linear(dim, ffn_dim), nn.ReLU(), nn.Linear(ffn_dim, dim))
        self.norm2 = nn.LayerNorm(dim)

    def padded(self, jt: JaggedTensor) -> tuple[Tensor, Tensor, Tensor]:
        """Left-truncate and pad the lists (vectorised, no per-row loop).

        Args:
            jt: U lists of ids.

        Returns:
            ``(ids, positions, valid)``, each ``[U, W]`` with ``W = max(1, max kept length)``:
            the kept ids in list order (0 where padded), their position indices (0 = the most
            recent item) and the validity mask.
        """
        values = torch.from_numpy(jt.values())
        lengths = torch.from_numpy(jt.lengths())
        ends = torch.from_numpy(jt.offsets()[1:])
        kept = lengths.clamp(max=self.max_length)                        # [U]
        width = max(int(kept.max()) if kept.numel() else 0, 1)
        col = torch.arange(width, dtype=torch.int64)
        valid = col.unsqueeze(0) < kept.unsqueeze(1)                      # [U, W]
        src = (ends - kept).unsqueeze(1) + col.unsqueeze(0)               # last `kept` ids
        if values.numel():
            ids = torch.where(valid, values[torch.where(valid, src, 0)], 0)
        else:
            ids = torch.zeros_like(src)
        positions = (kept.unsqueeze(1) - 1 - col.unsqueeze(0)).clamp(min=0)
        return ids, positions, valid

    def forward(self, jt: JaggedTensor, table: Tensor, sparse: bool = True) -> Tensor:
        """Encode each list.

        Args:
            jt: U lists of ids (rows of one sequence feature).
            table: ``[num_rows, D]`` embedding table of the ids (gradients flow to it).
            sparse: the gradient w.r.t. ``table`` is a sparse COO tensor with one row per
                looked-up position (padding reads row 0 with weight 0) if True, a dense
                ``[num_rows, D]`` tensor if False.

        Returns:
            ``[U, D]``; a row with an empty list is exactly zero.

        Raises:
            ValueError: ``table`` is not ``[num_rows, D]``.
            IndexError: an id outside ``[0, num_rows)``.
        """
        if table.dim() != 2 or table.shape[1] != self.dim:
            raise ValueError(f"SequenceTower: table has shape {tuple(table.shape)}, expected "
                             f"[num_rows, {self.dim}]")
        values = jt.values()
        if values.size and (int(values.min()) < 0 or int(values.max()) >= table.shape[0]):
            raise IndexError(f"SequenceTower: ids out of range for a table with "
                             f"{table.shape[0]} rows")
        if jt.batch_size == 0:
            return table.new_zeros(0, self.dim)
        ids, positions, valid = self.padded(jt)
        weight = valid.to(table.dtype).unsqueeze(-1)                      # [U, W, 1]
        x = (F.embedding(ids, table, sparse=sparse) + self.positions[positions]) * weight
        # Padded keys are masked with -inf; an empty row instead sees its (zero) position 0,
        # so no softmax row is all -inf (NaN); its output is dropped by the pooling weights.
        attend = valid.clone()
        attend[:, 0] = True
        mask = torch.zeros(attend.shape, dtype=table.dtype).masked_fill(~attend, float("-inf"))
        attn, _ = self.attention(x, x, x, key_padding_mask=mask, need_weights=False)
        h = self.norm1(x + attn)
        h = self.norm2(h + self.ffn(h))
        count = valid.sum(dim=1, keepdim=True).clamp(min=1).to(h.dtype)  # [U, 1]
        return (h * weight).sum(dim=1) / count


# ------------------------------------------------------------------------------------------------
# model


class RecDModel(nn.Module):
    """DLRM with pooled features and sequence towers, computed per dedup group (RecD).

    See the module docstring for the formal model. The embedding tables live in the module
    (``tables``, one ``[num_rows, D]`` parameter per owned table).

    Args:
        n_dense: number of dense features (0: no bottom MLP; then at least 2 features).
        features: the K sparse features, in interaction order.
        groups: dedup groups, a partition of the feature names, e.g.
            ``[["user_id", "age", "hist_item_id"], ["item_id"], ["category_id"]]``.
        embedding_dim: D.
        bottom_mlp: hidden widths of the bottom MLP (a D-wide last layer is appended).
        top_mlp: hidden widths of the top MLP (a 1-unit linear last layer is appended).
        seq_heads: attention heads of the sequence towers (must divide D).
        seq_max_length: sequence lists are left-truncated to their last ``seq_max_length`` ids.
        seed: if given, parameters are initialised from ``torch.manual_seed(seed)`` inside a
            forked RNG (the global generator is left untouched); ``None``: the global generator.
        sparse_gradients: gradients w.r.t. the tables are row-indexed sparse COO tensors
            (True, the default: the cost of backward and optimizer step follows the ids read,
            not the table size) or dense ``[num_rows, D]`` tensors (False: for optimizers that
            reject sparse gradients, e.g. Adam or weight decay). Forward and updates are equal
            either way up to float summation order.

    Attributes:
        features: the feature specs, by name (ordered).
        sparse_gradients: as given (read at every forward).
        groups: the dedup groups.
        tables: ``nn.ParameterDict`` table name -> ``[num_rows, D]`` (uniform in
            ``+-1/sqrt(num_rows)``, as DLRM).
        towers: ``nn.ModuleDict`` sequence feature name -> [`SequenceTower`][].
        dlrm: the dense part, a [`DLRM`][workbench.models.ctr.DLRM] over the K feature vectors
            (bottom MLP, dot interaction over ``K (+ 1)`` vectors, top MLP).

    Raises:
        ValueError: duplicate feature names, groups not partitioning the features, a ``table``
            naming no feature that owns a table, a shared table with a different ``num_rows``,
            or invalid sizes.

    Example:
        >>> feats = [FeatureSpec("user_id", 50, "pooled"), FeatureSpec("item_id", 50, "pooled"),
        ...          FeatureSpec("hist_item_id", 50, "sequence", table="item_id")]
        >>> model = RecDModel(0, feats, [["user_id", "hist_item_id"], ["item_id"]], 8, [], [16],
        ...                   seed=0)
        >>> kjt = KeyedJaggedTensor.from_dict({"user_id": [[1], [1]], "item_id": [[2], [3]],
        ...                                    "hist_item_id": [[4, 5], [4, 5]]})
        >>> model(None, kjt).shape
        torch.Size([2])
    """

    def __init__(self, n_dense: int, features: Sequence[FeatureSpec],
                 groups: Sequence[Sequence[str]], embedding_dim: int, bottom_mlp: Sequence[int],
                 top_mlp: Sequence[int], seq_heads: int = 2, seq_max_length: int = 20,
                 seed: int | None = None, sparse_gradients: bool = True) -> None:
        super().__init__()
        features = list(features)
        if n_dense < 0:
            raise ValueError(f"n_dense = {n_dense}: must be >= 0")
        if embedding_dim < 1:
            raise ValueError(f"embedding_dim = {embedding_dim}: must be >= 1")
        if not features:
            raise ValueError("RecDModel needs at least one feature")
        if not all(isinstance(f, FeatureSpec) for f in features):
            raise TypeError("features must be FeatureSpec instances")
        names = [f.name for f in features]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate feature names {duplicates}")
        if n_dense == 0 and len(features) < 2:
            raise ValueError("RecDModel with n_dense = 0 needs at least 2 features: a single "
                             "vector has no pair to interact with")
        if any(f.kind == "sequence" for f in features) and embedding_dim % max(seq_heads, 1):
            raise ValueError(f"seq_heads = {seq_heads} must divide embedding_dim = "
                             f"{embedding_dim}")
        self.features = {f.name: f for f in features}
        self.groups = partition_groups(names, groups)
        owners = {f.name: f for f in features if f.owns_table}
        for f in features:
            if f.owns_table:
                continue
            owner = owners.get(f.table_name)
            if owner is None:
                hint = ("that feature itself shares another table"
                        if f.table_name in self.features else "there is no such feature")
                raise ValueError(f"feature {f.name!r} shares table {f.table_name!r}, but no "
                                 f"feature owns a table of that name ({hint}); tables are "
                                 f"{sorted(owners)}")
            if owner.num_rows != f.num_rows:
                raise ValueError(f"feature {f.name!r} shares table {f.table_name!r} of "
                                 f"{owner.num_rows} rows but declares num_rows = {f.num_rows}")
        self.n_dense = n_dense
        self.embedding_dim = embedding_dim
        self.seq_max_length = seq_max_length
        self.sparse_gradients = bool(sparse_gradients)

        with torch.random.fork_rng(devices=[], enabled=seed is not None):
            if seed is not None:
                torch.manual_seed(seed)
            self.tables = nn.ParameterDict({
                name: nn.Parameter(torch.empty(f.num_rows, embedding_dim).uniform_(
                    -1.0 / math.sqrt(f.num_rows), 1.0 / math.sqrt(f.num_rows)))
                for name, f in owners.items()})
            self.towers = nn.ModuleDict({
                f.name: SequenceTower(embedding_dim, seq_heads, seq_max_length)
                for f in features if f.kind == "sequence"})
            self.dlrm = DLRM(n_dense, len(features), embedding_dim, bottom_mlp, top_mlp)

    # -- inputs ----------------------------------------------------------------------------------

    def _check_sparse(self, sparse: SparseBatch) -> None:
        """Raise a clear error unless ``sparse`` carries exactly the model's features."""
        if not isinstance(sparse, (KeyedJaggedTensor, InverseKeyedJaggedTensor)):
            raise TypeError(f"sparse must be a KeyedJaggedTensor or InverseKeyedJaggedTensor, "
                            f"got {type(sparse).__name__}")
        keys = sparse.keys()
        unknown = [k for k in keys if k not in self.features]
        missing = [n for n in self.features if n not in keys]
        if unknown or missing:
            raise ValueError(f"{type(sparse).__name__} keys do not match the model's features: "
                             f"unknown keys {unknown}, missing features {missing}; features "
                             f"are {list(self.features)}")
        if isinstance(sparse, InverseKeyedJaggedTensor):
            for group in self.groups:
                owners = {sparse.group_of(k) for k in group}
                if len(owners) != 1:
                    raise ValueError(f"model group {list(group)} spans the IKJT dedup groups "
                                     f"{sorted(list(g) for g in owners)}; it must lie inside "
                                     f"one (dedup with model.dedup(kjt) or "
                                     f"to_ikjt(kjt, model.groups))")

    def _group_rows(self, sparse: SparseBatch,
                    group: Sequence[str]) -> tuple[dict[str, JaggedTensor], Tensor | None]:
        """Rows of each key of ``group`` and the inverse lookup (``None``: rows are samples)."""
        rows = {k: sparse[k] for k in group}
        if isinstance(sparse, InverseKeyedJaggedTensor):
            return rows, torch.from_numpy(sparse.inverse_lookup(group[0]))
        return rows, None

    def dedup(self, kjt: KeyedJaggedTensor) -> InverseKeyedJaggedTensor:
        """``to_ikjt(kjt, self.groups)``: the batch deduplicated along the model's groups."""
        return to_ikjt(kjt, self.groups)

    # -- compute ---------------------------------------------------------------------------------

    def feature_rows(self, name: str, jt: JaggedTensor) -> Tensor:
        """The per-row vector of one feature (before expansion).

        Args:
            name: feature name.
            jt: the rows' id lists.

        Returns:
            ``[rows, D]``: the embedding bag (sum) of a pooled feature, the tower output of a
            sequence feature; the table's gradient is sparse iff [`sparse_gradients`][].
        """
        spec = self.features[name]
        table = self.tables[spec.table_name]
        if spec.kind == "pooled":
            return pooled_lookup(table, jt, "sum", sparse=self.sparse_gradients)
        return self.towers[name](jt, table, sparse=self.sparse_gradients)

    def embeddings(self, sparse: SparseBatch) -> Tensor:
        """All feature vectors, computed per dedup group and expanded to the batch.

        Args:
            sparse: a KJT (group rows = the B samples) or an IKJT (group rows = unique rows,
                expanded with ``index_select(0, inverse)``).

        Returns:
            ``[B, K, D]`` in feature order.
        """
        self._check_sparse(sparse)
        per_feature: dict[str, Tensor] = {}
        for group in self.groups:
            rows, inverse = self._group_rows(sparse, group)
            block = torch.stack([self.feature_rows(k, rows[k]) for k in group], dim=1)
            if inverse is not None:
                block = block.index_select(0, inverse)                   # [U_g, |g|, D] -> B
            for i, k in enumerate(group):
                per_feature[k] = block[:, i]
        return torch.stack([per_feature[n] for n in self.features], dim=1)

    def forward(self, dense: Tensor | None, sparse: SparseBatch) -> Tensor:
        """Logits.

        Args:
            dense: ``[B, n_dense]`` (or ``None`` when ``n_dense`` is 0).
            sparse: a [`KeyedJaggedTensor`][workbench.sparse.jagged_tensor.KeyedJaggedTensor]
                or an [`IKJT`][workbench.sparse.jagged_tensor.InverseKeyedJaggedTensor] with
                exactly the model's features (an IKJT's dedup groups must each contain whole
                model groups).

        Returns:
            ``[B]`` logits.

        Raises:
            ValueError: keys not matching the features, wrong dense shape, or an IKJT whose
                dedup groups split a model group.
        """
        return self.dlrm(dense, self.embeddings(sparse))

    def work(self, sparse: SparseBatch) -> dict[str, Any]:
        """Rows and ids the per-group compute processes for a batch (before expansion).

        Args:
            sparse: a KJT (every group processes B rows) or an IKJT (``U_g`` unique rows).

        Returns:
            ``{"batch_size": B, "rows": sum_g rows_g, "values": ids read by all features,
            "sequence_rows": rows through sequence towers, "sequence_positions": valid
            (post-truncation) positions through sequence towers, "groups": [{"keys": [...],
            "rows": rows_g, "values": ids_g}, ...]}``. The work ratio KJT / IKJT is the dedup
            saving.
        """
        self._check_sparse(sparse)
        out_groups: list[dict[str, object]] = []
        rows_total = values_total = seq_rows = seq_positions = 0
        for group in self.groups:
            rows, _ = self._group_rows(sparse, group)
            n_rows = rows[group[0]].batch_size
            n_values = int(sum(rows[k].values().size for k in group))
            for k in group:
                if self.features[k].kind == "sequence":
                    seq_rows += n_rows
                    seq_positions += int(np.minimum(rows[k].lengths(), self.seq_max_length).sum())
            out_groups.append({"keys": list(group), "rows": n_rows, "values": n_values})
            rows_total += n_rows
            values_total += n_values
        return {"batch_size": sparse.batch_size, "rows": rows_total, "values": values_total,
                "sequence_rows": seq_rows, "sequence_positions": seq_positions,
                "groups": out_groups}
