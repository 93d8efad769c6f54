"""Config schema of the models layer: the CTR models (``workbench/conf/model/``,
``models.<name>``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from workbench.models.recipe import HETU_MODELS, Recipe
from workbench.utils.validation import ConfigError, check_each, in_range


@dataclass(frozen=True)
class ModelConfig:
    """A compact recommendation model: DLRM and HET's three (WDL, DeepFM, DCN).

    Attributes:
        name: architecture.
        embedding_dim: width D of every embedding row.
        bottom_mlp: DLRM's bottom MLP hidden sizes (dense features -> ... -> D is appended).
        top_mlp: DLRM's top MLP hidden sizes (a final 1-unit layer is appended).
        deep_mlp: hidden sizes of the deep part of WDL, DeepFM and DCN (HET: 3 x 256).
        cross_layers: DCN's cross layers.
        lr_dense: learning rate of the dense parameters.
        lr_sparse: plain-SGD learning rate of the embedding rows (as in HET).
        optimizer: optimizer of the dense parameters.
        batch_size: global mini-batch size (all workers together).
        init_scale: the initial draw's scale: embedding rows uniform in
            ``[-init_scale, init_scale]`` (``workbench`` recipe); every weight and row from
            ``N(0, init_scale^2)`` (``hetu``).
        recipe: how the model is shaped, initialised, stepped and scored
            ([`workbench.models.recipe`][]): ``workbench`` (our choice) or ``hetu`` (HET's
            reference code; WDL, DeepFM and DCN, plain SGD).
        divide_by_workers: ``hetu`` only: the parameter-server path's rate divided by the
            workers, as Hsword/Hetu's initial commit (149095d) did.

    Raises:
        ConfigError: a width below 1; the ``hetu`` recipe on DLRM or with an optimizer other
            than SGD; ``divide_by_workers`` without the ``hetu`` recipe.
    """

    name: Literal["dlrm", "wdl", "deepfm", "dcn"] = "dlrm"
    embedding_dim: int = field(default=16, metadata=in_range(1, 65_536))
    bottom_mlp: list[int] = field(default_factory=lambda: [512, 256, 64])
    top_mlp: list[int] = field(default_factory=lambda: [512, 256])
    deep_mlp: list[int] = field(default_factory=lambda: [256, 256, 256])
    cross_layers: int = field(default=3, metadata=in_range(0, 64))
    lr_dense: float = field(default=0.1, metadata=in_range(0.0, None, lo_open=True))
    lr_sparse: float = field(default=0.1, metadata=in_range(0.0, None, lo_open=True))
    optimizer: Literal["sgd", "adagrad", "adam"] = "adagrad"
    batch_size: int = field(default=1024, metadata=in_range(1, None))
    init_scale: float = field(default=0.05, metadata=in_range(0.0, None))
    recipe: Literal["workbench", "hetu"] = "workbench"
    divide_by_workers: bool = False

    def __post_init__(self) -> None:
        for key in ("bottom_mlp", "top_mlp", "deep_mlp"):
            check_each(key, getattr(self, key), lambda width: width >= 1, ">= 1")
        if self.recipe == Recipe.HETU:
            if self.name not in HETU_MODELS:
                raise ConfigError(f"recipe = hetu, name = {self.name!r}: Hetu's examples/ctr "
                                  f"defines {', '.join(HETU_MODELS)} only; pick one of them or "
                                  "set recipe=workbench")
            if self.optimizer != "sgd":
                raise ConfigError(f"recipe = hetu, optimizer = {self.optimizer!r}: Hetu's "
                                  "examples train every parameter with SGDOptimizer; set "
                                  "optimizer=sgd (or recipe=workbench)")
        elif self.divide_by_workers:
            raise ConfigError("divide_by_workers = true: it is the hetu recipe's switch (Hetu "
                              "149095d's parameter-server rate / workers); set recipe=hetu or "
                              "divide_by_workers=false")

    def ps_rate(self, workers: int) -> float:
        """The factor on what goes through the parameter server: ``1 / workers`` under the
        ``hetu`` recipe with ``divide_by_workers`` (Hetu 149095d), else 1."""
        hetu = self.recipe == Recipe.HETU
        return 1.0 / workers if hetu and self.divide_by_workers else 1.0

    def row_step(self, workers: int, through_ps: bool) -> float:
        """A row's update per occurrence, as a multiple of that occurrence's gradient of the
        step's objective ([`workbench.models.recipe`][]): ``-lr_sparse x batch_size`` under
        ``workbench`` (the objective is the batch mean: this is the per-sample gradient's SGD);
        ``-lr_sparse`` under ``hetu`` (each worker's mean is already in the objective), times
        [`ps_rate`][] when the rows go ``through_ps``."""
        if self.recipe != Recipe.HETU:
            return -self.lr_sparse * self.batch_size
        return -self.lr_sparse * (self.ps_rate(workers) if through_ps else 1.0)

    @property
    def row_width(self) -> int:
        """Floats per embedding row: ``embedding_dim``, plus one under the ``hetu`` recipe's
        DeepFM (its first-order table of width 1, looked up with the same keys, kept as the
        row's last column: [`workbench.models.hetu`][])."""
        extra = self.recipe == Recipe.HETU and self.name == "deepfm"
        return self.embedding_dim + int(extra)
