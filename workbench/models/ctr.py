r"""Compact CTR models whose embedding tables live outside the module.

A parameter server (or a worker's embedding cache, [`workbench.cluster.cache`][]) supplies the
looked-up rows; the modules here hold only the *dense* parameters (MLPs, cross weights), the
part that AllReduce synchronises. Every model has the same interface:

    logits = model(dense, emb)      dense: [B, n_dense] (n_dense may be 0; None is accepted then)
                                    emb:   [B, F, D]    the rows of the F categorical features
                                    logits:[B]          (the caller applies BCE-with-logits)

and is differentiable with respect to ``emb`` (the caller reads ``emb.grad`` and sends the row
gradients back to the server).

Notation: B batch, F = n_sparse categorical features, D = embedding_dim, e_f = emb[:, f] the
row of feature f, x0 = concat(dense, e_1, ..., e_F) of width d = n_dense + F * D, MLP(h1, h2, ...)
a stack of Linear + ReLU layers ([`MLP`][workbench.models.layers.MLP]; the interaction
operators are in [`workbench.models.layers`][] too).

DLRM (Naumov et al. 2019; facebookresearch/dlrm ``dlrm_s_pytorch.py``, dot interaction):

                             logit
                               |
                              /\\       over arch: top MLP top_mlp... -> 1
                             /__\\      (ReLU hidden, no activation at the end)
                               |
                  concat(z, interactions)
                               |
        ___________________> Op <____________________     Op: pairwise dot products
       /                       |                      \\        <v_i, v_j>, i < j
      z                       e_1        ...          e_F
      |                        |                       |
     /\\    dense arch:     [looked-up rows, supplied from outside]
    /__\\   bottom MLP n_dense -> bottom_mlp... -> D (ReLU on every layer, the last included)
      |
  [dense features]

  vectors v = (v_0, ..., v_{n-1}) = (z, e_1, ..., e_F), n = F + 1
  interactions = (<v_i, v_j> for (i, j) in triu_indices(n, n, offset=1)), i.e. the strictly upper
                 triangle of the Gram matrix V V^T in row-major order:
                 (0,1), (0,2), ..., (0,n-1), (1,2), ..., (n-2,n-1);  n(n-1)/2 values
  top input    = concat(z, interactions)                       width D + n(n-1)/2
  With n_dense = 0 there is no z: v = (e_1, ..., e_F), n = F, top input = interactions only
  (so F >= 2 is needed). facebookresearch/dlrm gathers the strictly *lower* triangle
  (li, lj with j < i, row-major); the values are the same pairs in another column order, which
  a top MLP absorbs in its first weight matrix. torchrec's ``InteractionArch`` uses triu, as here.

WDL (Cheng et al. 2016), as in HET's ``wdl_criteo.py``: the deep MLP sees the dense features
only, and one linear layer reads its output together with every embedding (HET's WDL has
137.98K dense parameters at D = 128: 13-256-256-256 plus a 256 + 26 x 128 -> 1 head):

                       logit
                         |
                     Linear -> 1
                ________/   \________
               /\                    |
              /__\  MLP(deep_mlp)    flatten(emb)       (no deep part when n_dense = 0)
               |
             dense

DeepFM (Guo et al. 2017):

              logit = first order + FM + deep
            _____/          |           \\______
           |                |                 /\\
     Linear -> 1     FM(e_1..e_F)            /__\\  MLP(deep_mlp) -> 1
           |__________      |       __________|
                      \\     |      /
                      x0 / emb (FM sees the F vectors only)

  FM(e) = sum_{f<g} <e_f, e_g> = 0.5 * sum_d [ (sum_f e_fd)^2 - sum_f e_fd^2 ]   (Rendle 2010)

DCN (Wang et al. 2017, "Deep & Cross Network for Ad Click Predictions"):

                       logit = Linear(concat(x_L, h)) -> 1
                        _______/           \\_______
                       |                           /\\
                 cross layer L                    /__\\  h = MLP(deep_mlp) (ReLU, last included)
                      ...                          |
                 cross layer 1                     |
                       |___________   _____________|
                                   \\ /
                                    x0

  cross layer l:  x_{l+1} = x0 * (x_l . w_l) + b_l + x_l       w_l, b_l in R^d, x_l . w_l a
                  scalar per sample (x0 scaled by it element-wise); L = cross_layers (0: x_L = x0)
  With deep_mlp empty, h = x0.

FLOP convention ([`flops_per_sample`][], forward pass, one sample):

* every ``nn.Linear``: 2 * in * out (multiply-adds x 2). Bias additions and activations are not
  counted: the convention of ``torch.utils.flop_counter`` for ``addmm``;
* model operators: a multiply-add counts 2, any other element-wise add or multiply of vectors
  counts 1 per element, a sum of n vectors counts n adds per element; bias vectors (DCN's b_l)
  and per-sample scalars (combining part logits, FM's factor 0.5) are not counted:

  - DLRM dot interaction: n(n-1)/2 pairs x 2D (the distinct pairs the operator defines, not the
    full n x n Gram matrix the batched matmul computes);
  - DeepFM FM term: sum_f e_f (F*D) + its square (D) + sum_f e_f^2 (2*F*D) + difference (D) +
    sum over d (D) = 3*F*D + 3*D;
  - DCN cross layer: x_l . w_l (2d) + x0 * s (d) + ... + x_l (d) = 4d per layer.

The trainer multiplies by 3 for forward + backward.

Sources: facebookresearch/dlrm (``dlrm_s_pytorch.py``: ``create_mlp``, ``interact_features``);
torchrec ``torchrec/models/dlrm.py`` (``DenseArch`` / ``InteractionArch`` / ``OverArch``);
HET (Miao et al., VLDB 2022) and Hetu's ``examples/ctr`` models (WDL, DeepFM, DCN);
Cheng et al. 2016 (Wide & Deep); Guo et al. 2017 (DeepFM); Wang et al. 2017 (DCN).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from workbench.models.config import ModelConfig
from workbench.models.layers import (
    MLP,
    CrossDeep,
    CTRModel,
    DotInteraction,
    FactorizationMachine,
)
from workbench.models.recipe import Recipe

__all__ = [
    "DLRM",
    "WDL",
    "DeepFM",
    "DCN",
    "MODELS",
    "build_model",
    "dense_parameter_count",
    "flops_per_sample",
]


class DLRM(CTRModel):
    """DLRM with dot interaction (facebookresearch/dlrm; torchrec's ``DLRM`` structure).

    Args:
        n_dense: number of dense features (0: no bottom MLP, no dense vector).
        n_sparse: F, number of categorical features (>= 2 when ``n_dense`` is 0).
        embedding_dim: D.
        bottom_mlp: hidden widths of the bottom MLP (a final D-wide layer is appended; ReLU on
            every layer).
        top_mlp: hidden widths of the top MLP (a final 1-unit linear layer is appended).

    Attributes:
        dense_arch: the bottom MLP, or ``None`` when ``n_dense`` is 0.
        interaction_arch: [`DotInteraction`][] over F + 1 (or F) vectors.
        over_arch: the top MLP.

    Example:
        >>> model = DLRM(13, 26, 16, [512, 256, 64], [512, 256])
        >>> model(torch.randn(8, 13), torch.randn(8, 26, 16)).shape
        torch.Size([8])
    """

    def __init__(self, n_dense: int, n_sparse: int, embedding_dim: int,
                 bottom_mlp: Sequence[int], top_mlp: Sequence[int]) -> None:
        super().__init__(n_dense, n_sparse, embedding_dim)
        if n_dense == 0 and n_sparse < 2:
            raise ValueError("DLRM with n_dense = 0 needs n_sparse >= 2: a single embedding "
                             "vector has no pair to interact with")
        self.dense_arch = (MLP(n_dense, [*bottom_mlp, embedding_dim], last_activation=True)
                           if n_dense else None)
        n_vectors = n_sparse + (1 if n_dense else 0)
        self.interaction_arch = DotInteraction(n_vectors)
        over_in = self.interaction_arch.out_features + (embedding_dim if n_dense else 0)
        self.over_arch = MLP(over_in, [*top_mlp, 1])

    def forward(self, dense: Tensor | None, emb: Tensor) -> Tensor:
        """Logits ``[B]`` of ``dense`` ``[B, n_dense]`` (None when ``n_dense`` is 0) and ``emb``
        ``[B, F, D]``."""
        dense = self._check(dense, emb)
        if self.dense_arch is None:
            top_in = self.interaction_arch(emb)
        else:
            z = self.dense_arch(dense)                                  # [B, D]
            vectors = torch.cat([z.unsqueeze(1), emb], dim=1)           # [B, F + 1, D]
            top_in = torch.cat([z, self.interaction_arch(vectors)], dim=1)
        return self.over_arch(top_in).squeeze(1)

    def operator_flops(self) -> int:
        """Forward FLOPs per sample of the dot interaction."""
        return self.interaction_arch.flops(self.embedding_dim)


class WDL(CTRModel):
    """Wide & Deep as HET trains it: a deep MLP over the dense features, and one linear layer
    over its output and the flattened embeddings.

    Args:
        n_dense: number of dense features (may be 0: then the head reads the embeddings only).
        n_sparse: F.
        embedding_dim: D.
        deep_mlp: hidden widths of the deep MLP (ReLU after every layer).

    Example:
        >>> model = WDL(13, 26, 16, [256, 256, 256])
        >>> model(torch.randn(8, 13), torch.randn(8, 26, 16)).shape
        torch.Size([8])
    """

    def __init__(self, n_dense: int, n_sparse: int, embedding_dim: int,
                 deep_mlp: Sequence[int]) -> None:
        super().__init__(n_dense, n_sparse, embedding_dim)
        self.deep = (MLP(n_dense, list(deep_mlp), last_activation=True)
                     if n_dense and deep_mlp else None)
        deep_width = self.deep.out_features if self.deep is not None else n_dense
        self.head = nn.Linear(deep_width + n_sparse * embedding_dim, 1)

    def forward(self, dense: Tensor | None, emb: Tensor) -> Tensor:
        """Logits ``[B]``: ``head(concat(deep(dense), flatten(emb)))``."""
        dense = self._check(dense, emb)
        deep = self.deep(dense) if self.deep is not None else dense
        return self.head(torch.cat([deep, emb.flatten(1)], dim=1)).squeeze(1)


class DeepFM(CTRModel):
    """DeepFM: first-order linear part + FM second-order term + deep MLP.

    Args:
        n_dense: number of dense features (may be 0).
        n_sparse: F.
        embedding_dim: D.
        deep_mlp: hidden widths of the deep MLP (a final 1-unit layer is appended).

    Example:
        >>> model = DeepFM(13, 26, 16, [256, 256, 256])
        >>> model(torch.randn(8, 13), torch.randn(8, 26, 16)).shape
        torch.Size([8])
    """

    def __init__(self, n_dense: int, n_sparse: int, embedding_dim: int,
                 deep_mlp: Sequence[int]) -> None:
        super().__init__(n_dense, n_sparse, embedding_dim)
        self.first_order = nn.Linear(self.x0_width, 1)
        self.fm = FactorizationMachine()
        self.deep = MLP(self.x0_width, [*deep_mlp, 1])

    def forward(self, dense: Tensor | None, emb: Tensor) -> Tensor:
        """Logits ``[B]``: ``first_order(x0) + FM(emb) + deep(x0)``."""
        x0 = self._x0(self._check(dense, emb), emb)
        return (self.first_order(x0) + self.deep(x0)).squeeze(1) + self.fm(emb)

    def operator_flops(self) -> int:
        """Forward FLOPs per sample of the FM term."""
        return FactorizationMachine.flops(self.n_sparse, self.embedding_dim)


class DCN(CrossDeep):
    """Deep & Cross Network: a cross network and a deep MLP over x0, joined by a linear layer.

    Args:
        n_dense: number of dense features (may be 0).
        n_sparse: F.
        embedding_dim: D.
        deep_mlp: hidden widths of the deep MLP (ReLU on every layer; empty: the identity).
        cross_layers: L, number of cross layers (0: x_L = x0).

    Attributes:
        cross: [`CrossNet`][workbench.models.layers.CrossNet].
        deep: [`MLP`][].
        head: ``Linear(d + deep width, 1)`` over ``concat(x_L, deep(x0))``.

    Example:
        >>> model = DCN(13, 26, 16, [256, 256, 256], 3)
        >>> model(torch.randn(8, 13), torch.randn(8, 26, 16)).shape
        torch.Size([8])
    """

    def forward(self, dense: Tensor | None, emb: Tensor) -> Tensor:
        """Logits ``[B]``: ``head(concat(cross(x0), deep(x0)))``."""
        return self._joined(self._x0(self._check(dense, emb), emb))


MODELS: dict[str, type[CTRModel]] = {"dlrm": DLRM, "wdl": WDL, "deepfm": DeepFM, "dcn": DCN}
"""Architecture name (``ModelConfig.name``) -> model class."""


# --------------------------------------------------------------------------------------------
# Construction and accounting
# --------------------------------------------------------------------------------------------

def build_model(cfg: ModelConfig, n_dense: int, n_sparse: int) -> nn.Module:
    """Build the model a [`ModelConfig`][workbench.config.ModelConfig] names.

    Initialisation draws from torch's global generator only, so it is deterministic given
    ``torch.manual_seed``. Under the ``hetu`` recipe the model is Hetu's
    ([`workbench.models.hetu`][]).

    Args:
        cfg: the model configuration (``name``, ``embedding_dim``, MLP widths, ``cross_layers``).
        n_dense: number of dense features (may be 0).
        n_sparse: number F of categorical features (>= 1; DLRM with ``n_dense`` = 0 needs 2).

    Returns:
        The model: ``model(dense [B, n_dense], emb [B, F, D]) -> logits [B]``.

    Raises:
        ValueError: unknown ``cfg.name`` or invalid sizes.

    Example:
        >>> model = build_model(ModelConfig(name="deepfm"), n_dense=13, n_sparse=26)
        >>> type(model).__name__
        'DeepFM'
    """
    if cfg.recipe == Recipe.HETU:
        from workbench.models.hetu import build_hetu_model

        return build_hetu_model(cfg, n_dense, n_sparse)
    if cfg.name not in MODELS:
        raise ValueError(f"model name {cfg.name!r}: unknown, expected one of "
                         f"{', '.join(sorted(MODELS))}")
    if n_sparse < 1:
        raise ValueError(f"n_sparse = {n_sparse}: must be >= 1")
    dim = cfg.embedding_dim
    if cfg.name == "dlrm":
        return DLRM(n_dense, n_sparse, dim, cfg.bottom_mlp, cfg.top_mlp)
    if cfg.name == "wdl":
        return WDL(n_dense, n_sparse, dim, cfg.deep_mlp)
    if cfg.name == "deepfm":
        return DeepFM(n_dense, n_sparse, dim, cfg.deep_mlp)
    return DCN(n_dense, n_sparse, dim, cfg.deep_mlp, cfg.cross_layers)


def dense_parameter_count(model: nn.Module) -> int:
    """Number of scalars in the model's parameters: the dense part AllReduce synchronises.

    Embedding tables live outside the models, so every parameter counts.

    Args:
        model: any module.

    Returns:
        ``sum(p.numel() for p in model.parameters())``.
    """
    return sum(p.numel() for p in model.parameters())


def flops_per_sample(model: nn.Module, n_dense: int, n_sparse: int, dim: int) -> int:
    """Forward FLOPs of one sample, computed analytically from the module structure.

    ``2 * in * out`` for every ``nn.Linear`` in ``model.modules()`` (bias additions and
    activations not counted) plus the model's operator term: DLRM's dot interaction
    (``n(n-1)/2 * 2D``), DeepFM's FM (``3FD + 3D``) or DCN's cross layers (``4d`` per layer); see
    the module docstring for the convention. Multiply by 3 for forward + backward.

    Args:
        model: a model of this module (any other module counts its ``Linear`` layers only).
        n_dense: number of dense features the model was built for.
        n_sparse: number F of categorical features.
        dim: embedding width D.

    Returns:
        FLOPs per sample (int).

    Raises:
        ValueError: the sizes disagree with the ones the model was built for.
    """
    linear = sum(2 * m.in_features * m.out_features
                 for m in model.modules() if isinstance(m, nn.Linear))
    if not isinstance(model, CTRModel):
        return linear
    built = (model.n_dense, model.n_sparse, model.embedding_dim)
    if built != (n_dense, n_sparse, dim):
        raise ValueError(f"flops_per_sample: sizes (n_dense, n_sparse, dim) = "
                         f"{(n_dense, n_sparse, dim)} but {type(model).__name__} was built for "
                         f"{built}")
    return linear + model.operator_flops()
