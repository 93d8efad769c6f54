"""Training of the RecD model ([`workbench.models.recd.RecDModel`][]) on KJT or IKJT batches.

One optimizer over every parameter (embedding tables included), BCE-with-logits; the same steps
on a KJT batch and on its IKJT agree up to float summation order (the model computes per dedup
group on unique rows and expands through the inverse lookup).

The tables' gradients are row-indexed sparse COO tensors by default
(``RecDModel(sparse_gradients=True)``), so a step costs in proportion to the ids read, not to the
table sizes. Both optimizers offered take them in ``torch.optim``'s sparse path: plain ``SGD``
and ``Adagrad``, neither with weight decay, which rejects sparse gradients (each updates only the
rows present; an absent row has a zero gradient, a zero Adagrad increment and a zero
update in the dense path too, so both paths give the same parameters up to float rounding).
``zero_grad(set_to_none=True)`` drops the sparse gradients between steps, and nothing here
clips or rescales gradients.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from workbench.models.recd import SparseBatch


class RecDTrainer:
    """Minimal trainer: BCE-with-logits, one optimizer over every parameter (tables included;
    a model's ``optimizer_parameters()``, when it has one, when the rest are updated in its
    backward).

    Args:
        model: the model, called as ``model(dense, sparse)``
            ([`RecDModel`][workbench.models.recd.RecDModel], or TorchRec's path,
            [`TorchRecDLRM`][workbench.models.torchrec_dlrm.TorchRecDLRM]; sparse or dense table
            gradients: both optimizers accept either).
        lr: learning rate (> 0).
        optimizer: ``"adagrad"`` (DLRM's usual choice) or ``"sgd"`` (plain: no momentum or
            weight decay).

    Example:
        >>> trainer = RecDTrainer(model, lr=0.05)          # doctest: +SKIP
        >>> trainer.step(dense, model.dedup(kjt), labels)  # doctest: +SKIP
        0.69...
    """

    def __init__(self, model: nn.Module, lr: float,
                 optimizer: Literal["sgd", "adagrad"] = "adagrad") -> None:
        if not lr > 0:
            raise ValueError(f"lr = {lr}: must be > 0")
        # a model that updates some parameters inside its backward (fbgemm's fused tables) names
        # the ones left to the optimizer, which would otherwise keep state for the tables
        owned = getattr(model, "optimizer_parameters", model.parameters)()
        if optimizer == "sgd":
            self.optimizer: torch.optim.Optimizer = torch.optim.SGD(owned, lr=lr)
        elif optimizer == "adagrad":
            self.optimizer = torch.optim.Adagrad(owned, lr=lr)
        else:
            raise ValueError(f"optimizer = {optimizer!r}, expected 'sgd' or 'adagrad'")
        self.model = model
        self.lr = lr

    def step(self, dense: Tensor | np.ndarray | None, sparse: SparseBatch,
             labels: Tensor | np.ndarray) -> float:
        """One optimisation step.

        Args:
            dense: ``[B, n_dense]`` (or ``None`` when the model has no dense features).
            sparse: the batch's sparse features, KJT or IKJT.
            labels: ``[B]`` 0/1 labels.

        Returns:
            The batch's mean loss before the update.
        """
        self.model.train()
        dense_t = None if dense is None else torch.as_tensor(dense, dtype=torch.float32)
        labels_t = torch.as_tensor(labels, dtype=torch.float32)
        logits = self.model(dense_t, sparse)
        loss = F.binary_cross_entropy_with_logits(logits, labels_t)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        # Sparse table gradients come from the embedding backward, valid by construction: opt
        # out of torch's sparse invariant checks explicitly (left unset, torch warns).
        with torch.sparse.check_sparse_tensor_invariants(enable=False):
            self.optimizer.step()
        return float(loss.detach())

    def predict(self, dense: Tensor | np.ndarray | None, sparse: SparseBatch) -> np.ndarray:
        """Click probabilities (sigmoid of the logits), without gradients.

        Args:
            dense: ``[B, n_dense]`` (or ``None``).
            sparse: KJT or IKJT.

        Returns:
            float32 ``[B]``.
        """
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                dense_t = None if dense is None else torch.as_tensor(dense, dtype=torch.float32)
                return torch.sigmoid(self.model(dense_t, sparse)).numpy()
        finally:
            self.model.train(was_training)
