"""Config schema of the models layer: the CTR models (``workbench/conf/model/``,
``models.<name>``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from workbench.utils.validation import check_each, in_range


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
        init_scale: embedding rows start uniform in [-init_scale, init_scale].
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

    def __post_init__(self) -> None:
        for key in ("bottom_mlp", "top_mlp", "deep_mlp"):
            check_each(key, getattr(self, key), lambda width: width >= 1, ">= 1")
