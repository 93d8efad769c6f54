r"""HET's three CTR models as Hetu's ``examples/ctr`` builds them (the ``hetu`` recipe).

PKU-DAIR/Hetu a1cb1bc, ``examples/ctr/models/`` (file and line in
[`workbench.models.recipe`][]). Hetu writes ``y = x @ W`` with ``W`` of shape ``[in, out]``;
torch's ``Linear`` holds ``W^T``; the draws are i.i.d., so the two are the same model.
Notation: B batch, F categorical features, D = embedding_dim, e = the looked-up rows
``[B, F, D]``, ``dense`` ``[B, n_dense]``; no layer has a bias unless said.

WDL (``wdl_criteo.py``):

    y3    = relu(relu(dense W1) W2) W3         tower: deep_mlp widths, ReLU after all but the last
    logit = concat(flatten(e), y3) W4          W4: (F D + deep_mlp[-1]) x 1

DeepFM (``deepfm_criteo.py``): Hetu keeps a second, first-order table of width 1 under the same
keys; here it is the last column of each row (``ModelConfig.row_width`` = D + 1), so one lookup
brings both and plain SGD updates both exactly as two tables would:

    y1    = dense FM_W + sum_f r_f[D]          FM_W: n_dense x 1; r_f[D] the first-order weight
    y2    = 0.5 sum_d [(sum_f e_fd)^2 - sum_f e_fd^2]        e_f = r_f[:D]
    y3    = MLP(flatten(e)): F D -> deep_mlp... -> 1, ReLU after all but the last
    logit = y1 + y2 + y3

    (Hetu's tower is 3328 -> 256 -> 256 -> 1: deep_mlp [256, 256].)

DCN (``dcn_criteo.py``):

    x     = concat(flatten(e), dense)          width d = F D + n_dense
    x_L   = L cross layers x_{l+1} = x * (x_l w_l) + b_l + x_l   (w_l, b_l: N(0, 0.01^2))
    y3    = tower(x) as WDL's (no ReLU after the last layer)
    logit = concat(x_L, y3) W4

Initialisation: every parameter (and every table row, [`workbench.training.trainer`][]) is
drawn from ``N(0, init_scale^2)``, Hetu's ``init.random_normal(stddev=0.01)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from workbench.models.config import ModelConfig
from workbench.models.layers import MLP, CrossDeep, CTRModel, FactorizationMachine

__all__ = ["HetuWDL", "HetuDeepFM", "HetuDCN", "HETU_CLASSES", "build_hetu_model"]


def _tower(in_features: int, widths: Sequence[int]) -> MLP:
    """Hetu's deep tower: bias-free ``Linear`` layers, ReLU between them, none after the last."""
    return MLP(in_features, list(widths), last_activation=False, bias=False)


class HetuWDL(CTRModel):
    """Hetu's WDL: ``concat(flatten(e), tower(dense)) W4``.

    Args:
        n_dense: dense features (0: no tower, the head reads the embeddings only).
        n_sparse: F.
        embedding_dim: D.
        deep_mlp: the tower's widths (Hetu: 256, 256, 256).

    Example:
        >>> HetuWDL(13, 26, 16, [256, 256, 256])(torch.randn(8, 13), torch.randn(8, 26, 16)).shape
        torch.Size([8])
    """

    def __init__(self, n_dense: int, n_sparse: int, embedding_dim: int,
                 deep_mlp: Sequence[int]) -> None:
        super().__init__(n_dense, n_sparse, embedding_dim)
        self.deep = _tower(n_dense, deep_mlp) if n_dense and deep_mlp else None
        deep_width = self.deep.out_features if self.deep is not None else n_dense
        self.head = nn.Linear(n_sparse * embedding_dim + deep_width, 1, bias=False)

    def forward(self, dense: Tensor | None, emb: Tensor) -> Tensor:
        """Logits ``[B]`` of ``dense`` ``[B, n_dense]`` and ``emb`` ``[B, F, D]``."""
        dense = self._check(dense, emb)
        deep = self.deep(dense) if self.deep is not None else dense
        return self.head(torch.cat([emb.flatten(1), deep], dim=1)).squeeze(1)


class HetuDeepFM(CTRModel):
    """Hetu's DeepFM: first order (dense ``FM_W`` + per-key weights) + FM + deep tower.

    The rows are ``D + 1`` wide: ``emb[..., :D]`` the second-order vectors, ``emb[..., D]`` the
    first-order weight (Hetu's ``Embedding1``).

    Args:
        n_dense: dense features (0: no dense first-order term).
        n_sparse: F.
        embedding_dim: D.
        deep_mlp: the tower's hidden widths; a 1-unit output layer follows (Hetu: 256, 256).

    Example:
        >>> HetuDeepFM(13, 26, 16, [256, 256])(torch.randn(8, 13), torch.randn(8, 26, 17)).shape
        torch.Size([8])
    """

    def __init__(self, n_dense: int, n_sparse: int, embedding_dim: int,
                 deep_mlp: Sequence[int]) -> None:
        super().__init__(n_dense, n_sparse, embedding_dim)
        self.row_width = embedding_dim + 1
        self.first_order = nn.Linear(n_dense, 1, bias=False) if n_dense else None
        self.fm = FactorizationMachine()
        self.deep = _tower(n_sparse * embedding_dim, [*deep_mlp, 1])

    def forward(self, dense: Tensor | None, emb: Tensor) -> Tensor:
        """Logits ``[B]`` of ``dense`` ``[B, n_dense]`` and ``emb`` ``[B, F, D + 1]``."""
        dense = self._check(dense, emb)
        vectors, weights = emb[..., :self.embedding_dim], emb[..., self.embedding_dim]
        y1 = weights.sum(dim=1)
        if self.first_order is not None:
            y1 = y1 + self.first_order(dense).squeeze(1)
        return y1 + self.fm(vectors) + self.deep(vectors.flatten(1)).squeeze(1)

    def operator_flops(self) -> int:
        """Forward FLOPs per sample of the FM term and the first-order sum (F adds)."""
        return FactorizationMachine.flops(self.n_sparse, self.embedding_dim) + self.n_sparse


class HetuDCN(CrossDeep):
    """Hetu's DCN: ``concat(cross(x), tower(x)) W4`` with ``x = concat(flatten(e), dense)``.

    Args:
        n_dense: dense features (may be 0).
        n_sparse: F.
        embedding_dim: D.
        deep_mlp: the tower's widths (Hetu: 256, 256, 256; no ReLU after the last).
        cross_layers: L (Hetu: 3).

    Example:
        >>> HetuDCN(13, 26, 16, [256, 256, 256], 3)(torch.randn(8, 13),
        ...                                         torch.randn(8, 26, 16)).shape
        torch.Size([8])
    """

    head_bias = False

    def _deep(self, widths: Sequence[int]) -> MLP:
        """Hetu's tower: no ReLU after the last layer, no biases."""
        return _tower(self.x0_width, widths)

    def forward(self, dense: Tensor | None, emb: Tensor) -> Tensor:
        """Logits ``[B]`` of ``dense`` ``[B, n_dense]`` and ``emb`` ``[B, F, D]``."""
        dense = self._check(dense, emb)
        return self._joined(torch.cat([emb.flatten(1), dense], dim=1))


HETU_CLASSES: dict[str, type[CTRModel]] = {"wdl": HetuWDL, "deepfm": HetuDeepFM,
                                           "dcn": HetuDCN}
"""Architecture name -> Hetu's model class."""


def build_hetu_model(cfg: ModelConfig, n_dense: int, n_sparse: int) -> CTRModel:
    """Hetu's model of ``cfg.name``, every parameter drawn from ``N(0, cfg.init_scale^2)``
    with torch's global generator (deterministic given ``torch.manual_seed``).

    Args:
        cfg: a ``hetu``-recipe model config (``wdl``, ``deepfm`` or ``dcn``).
        n_dense: dense features.
        n_sparse: F.

    Returns:
        The model.

    Raises:
        ValueError: ``cfg.name`` has no Hetu model.

    Example:
        >>> cfg = ModelConfig(name="wdl", embedding_dim=128, recipe="hetu", optimizer="sgd")
        >>> sum(p.numel() for p in build_hetu_model(cfg, 13, 26).parameters())  # HET: 137.98K
        137984
    """
    if cfg.name not in HETU_CLASSES:
        raise ValueError(f"model {cfg.name!r}: Hetu defines {', '.join(HETU_CLASSES)} only")
    dim = cfg.embedding_dim
    model: CTRModel
    if cfg.name == "dcn":
        model = HetuDCN(n_dense, n_sparse, dim, cfg.deep_mlp, cfg.cross_layers)
    else:
        model = HETU_CLASSES[cfg.name](n_dense, n_sparse, dim, cfg.deep_mlp)  # type: ignore[call-arg]
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, cfg.init_scale)
    return model
