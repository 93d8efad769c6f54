"""Building blocks of the CTR models ([`workbench.models.ctr`][]): MLP stacks and the feature
interaction operators, each with its forward FLOPs per sample.

| block | computes (B samples, F vectors of width D, x0 of width d) |
| --- | --- |
| ``CTRModel`` | the models' base: input checks, ``x0 = concat(dense, flatten(emb))`` |
| ``MLP`` | Linear + ReLU stack (ReLU after the last layer optional) |
| ``DotInteraction`` | DLRM: the n(n-1)/2 pairwise dot products ``<v_i, v_j>``, ``i < j`` |
| ``FactorizationMachine`` | DeepFM: ``0.5 * sum_d [(sum_f e_fd)^2 - sum_f e_fd^2]`` |
| ``CrossNet`` | DCN: ``x_{l+1} = x0 * (x_l . w_l) + b_l + x_l``, L layers |

The FLOP convention is the one in [`workbench.models.ctr`][].
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn


class MLP(nn.Sequential):
    """A stack of ``Linear`` layers with ReLU between them (the one MLP builder of every model).

    Args:
        in_features: input width.
        widths: output width of each layer, in order (empty: the identity).
        last_activation: apply ReLU after the last layer too (DLRM's bottom MLP, DCN's deep part)
            instead of leaving its output linear (logit layers).
        bias: give every layer a bias (Hetu's towers have none).

    Attributes:
        in_features: input width.
        out_features: output width (``in_features`` when ``widths`` is empty).

    Example:
        >>> mlp = MLP(13, [512, 256, 1])
        >>> mlp(torch.randn(4, 13)).shape
        torch.Size([4, 1])
    """

    def __init__(self, in_features: int, widths: Sequence[int], *,
                 last_activation: bool = False, bias: bool = True) -> None:
        layers: list[nn.Module] = []
        width_in = in_features
        for i, width in enumerate(widths):
            if width < 1:
                raise ValueError(f"MLP layer {i} width = {width}: must be >= 1")
            layers.append(nn.Linear(width_in, width, bias=bias))
            if i < len(widths) - 1 or last_activation:
                layers.append(nn.ReLU())
            width_in = width
        super().__init__(*layers)
        self.in_features = in_features
        self.out_features = width_in


class DotInteraction(nn.Module):
    """DLRM's dot interaction: the pairwise dot products of n vectors, no self-interaction.

    Args:
        n_vectors: number n of vectors interacted (F + 1 with a dense vector, F without).

    Attributes:
        pairs: the ``(i, j)`` index of every output column, ``i < j``, in row-major order of
            the strictly upper triangle (``torch.triu_indices(n, n, offset=1)``).

    Example:
        >>> DotInteraction(3)(torch.ones(2, 3, 4))
        tensor([[4., 4., 4.],
                [4., 4., 4.]])
    """

    rows: Tensor  # buffers (register_buffer)
    cols: Tensor

    def __init__(self, n_vectors: int) -> None:
        super().__init__()
        self.n_vectors = n_vectors
        rows, cols = torch.triu_indices(n_vectors, n_vectors, offset=1)
        self.register_buffer("rows", rows, persistent=False)
        self.register_buffer("cols", cols, persistent=False)
        self.pairs = list(zip(rows.tolist(), cols.tolist()))

    @property
    def out_features(self) -> int:
        """Number of output columns, n(n-1)/2."""
        return len(self.pairs)

    def forward(self, vectors: Tensor) -> Tensor:
        """Pairwise dot products.

        Args:
            vectors: ``[B, n, D]``.

        Returns:
            ``[B, n(n-1)/2]``: column k is ``<vectors[:, i], vectors[:, j]>`` for
            ``(i, j) = pairs[k]``.
        """
        gram = torch.bmm(vectors, vectors.transpose(1, 2))
        return gram[:, self.rows, self.cols]

    def flops(self, dim: int) -> int:
        """Forward FLOPs per sample: 2 * D per distinct pair.

        Args:
            dim: vector width D.

        Returns:
            ``n(n-1)/2 * 2 * D``.
        """
        return self.out_features * 2 * dim


class FactorizationMachine(nn.Module):
    """The FM second-order term: the sum of the dot products of every pair of field vectors.

    ``0.5 * sum_d((sum_f e_fd)^2 - sum_f e_fd^2) == sum_{f<g} <e_f, e_g>`` (Rendle 2010).

    Example:
        >>> FactorizationMachine()(torch.ones(2, 3, 4))
        tensor([12., 12.])
    """

    def forward(self, emb: Tensor) -> Tensor:
        """FM term.

        Args:
            emb: ``[B, F, D]``.

        Returns:
            ``[B]``.
        """
        square_of_sum = emb.sum(dim=1).pow(2)
        sum_of_squares = emb.pow(2).sum(dim=1)
        return 0.5 * (square_of_sum - sum_of_squares).sum(dim=1)

    @staticmethod
    def flops(n_fields: int, dim: int) -> int:
        """Forward FLOPs per sample (see the module docstring).

        Args:
            n_fields: F.
            dim: D.

        Returns:
            ``3 * F * D + 3 * D``.
        """
        return 3 * n_fields * dim + 3 * dim


class CrossNet(nn.Module):
    """DCN's cross network: ``x_{l+1} = x0 * (x_l . w_l) + b_l + x_l`` for ``l < L``.

    Args:
        width: d, the width of x0.
        n_layers: L (0: the identity).

    Attributes:
        weight: ``[L, d]``, row l is w_l (uniform in ``+-1/sqrt(d)``, as ``nn.Linear(d, 1)``).
        bias: ``[L, d]``, row l is b_l (zeros).

    Example:
        >>> CrossNet(5, 2)(torch.randn(3, 5)).shape
        torch.Size([3, 5])
    """

    def __init__(self, width: int, n_layers: int) -> None:
        super().__init__()
        self.width = width
        self.n_layers = n_layers
        bound = 1.0 / math.sqrt(width) if width > 0 else 0.0
        self.weight = nn.Parameter(torch.empty(n_layers, width).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.zeros(n_layers, width))

    def forward(self, x0: Tensor) -> Tensor:
        """Apply the L cross layers.

        Args:
            x0: ``[B, d]``.

        Returns:
            x_L, ``[B, d]``.
        """
        x = x0
        for layer in range(self.n_layers):
            scale = x @ self.weight[layer]                       # [B]: x_l . w_l
            x = x0 * scale.unsqueeze(1) + self.bias[layer] + x
        return x

    def flops(self) -> int:
        """Forward FLOPs per sample: 4 * d per layer (see the module docstring).

        Returns:
            ``4 * d * L``.
        """
        return 4 * self.width * self.n_layers


class CTRModel(nn.Module):
    """Common input checks and the x0 = concat(dense, flatten(emb)) helper.

    Every model's ``forward(dense, emb)`` takes ``dense`` ``[B, n_dense]`` (``None`` when
    ``n_dense`` is 0) and the looked-up rows ``emb`` ``[B, F, D]``, and returns ``[B]`` logits.

    Attributes:
        row_width: floats per looked-up row the model reads (``embedding_dim``; Hetu's DeepFM
            reads one more: [`workbench.models.hetu`][]).
    """

    def __init__(self, n_dense: int, n_sparse: int, embedding_dim: int) -> None:
        super().__init__()
        if n_dense < 0:
            raise ValueError(f"n_dense = {n_dense}: must be >= 0")
        if n_sparse < 1:
            raise ValueError(f"n_sparse = {n_sparse}: must be >= 1")
        if embedding_dim < 1:
            raise ValueError(f"embedding_dim = {embedding_dim}: must be >= 1")
        self.n_dense = n_dense
        self.n_sparse = n_sparse
        self.embedding_dim = embedding_dim
        self.row_width = embedding_dim

    @property
    def x0_width(self) -> int:
        """d = n_dense + F * D."""
        return self.n_dense + self.n_sparse * self.embedding_dim

    def _check(self, dense: Tensor | None, emb: Tensor) -> Tensor:
        """Validate shapes; return ``dense`` as a ``[B, n_dense]`` tensor."""
        shape = (self.n_sparse, self.row_width)
        if emb.dim() != 3 or tuple(emb.shape[1:]) != shape:
            raise ValueError(f"{type(self).__name__}: emb has shape {tuple(emb.shape)}, "
                             f"expected [B, {shape[0]}, {shape[1]}]")
        batch = emb.shape[0]
        if dense is None:
            if self.n_dense:
                raise ValueError(f"{type(self).__name__}: dense is None, expected "
                                 f"[B, {self.n_dense}]")
            return emb.new_zeros(batch, 0)
        if tuple(dense.shape) != (batch, self.n_dense):
            raise ValueError(f"{type(self).__name__}: dense has shape {tuple(dense.shape)}, "
                             f"expected [{batch}, {self.n_dense}]")
        return dense

    def _x0(self, dense: Tensor, emb: Tensor) -> Tensor:
        return torch.cat([dense, emb.flatten(1)], dim=1)

    def operator_flops(self) -> int:
        """Forward FLOPs per sample of the model's non-``Linear`` operators (0 by default)."""
        return 0


class CrossDeep(CTRModel):
    """A cross network and a deep tower over the same input, joined by one linear head: what
    DCN and Hetu's DCN share (they differ in the tower, the head's bias and the input's order).

    Args:
        n_dense: number of dense features (may be 0).
        n_sparse: F.
        embedding_dim: D.
        deep_mlp: the tower's widths.
        cross_layers: L, number of cross layers (0: x_L = x).
    """

    #: Whether the head ``Linear`` has a bias.
    head_bias = True

    def __init__(self, n_dense: int, n_sparse: int, embedding_dim: int,
                 deep_mlp: Sequence[int], cross_layers: int) -> None:
        super().__init__(n_dense, n_sparse, embedding_dim)
        if cross_layers < 0:
            raise ValueError(f"cross_layers = {cross_layers}: must be >= 0")
        self.cross = CrossNet(self.x0_width, cross_layers)
        self.deep = self._deep(deep_mlp)
        self.head = nn.Linear(self.x0_width + self.deep.out_features, 1, bias=self.head_bias)

    def _deep(self, widths: Sequence[int]) -> MLP:
        """The deep tower: ReLU on every layer."""
        return MLP(self.x0_width, list(widths), last_activation=True)

    def _joined(self, x: Tensor) -> Tensor:
        """``[B]`` logits ``head(concat(cross(x), deep(x)))``."""
        return self.head(torch.cat([self.cross(x), self.deep(x)], dim=1)).squeeze(1)

    def operator_flops(self) -> int:
        """Forward FLOPs per sample of the cross layers."""
        return self.cross.flops()
