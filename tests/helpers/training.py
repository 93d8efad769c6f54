"""Toy training data and model shared by the trainer, clock and combined tests."""

from __future__ import annotations

import numpy as np

from workbench.data.config import SyntheticConfig
from workbench.data.synthetic import generate
from workbench.models.config import ModelConfig
from workbench.training.trainer import Split

MODEL = ModelConfig(name="wdl", embedding_dim=8, deep_mlp=[16, 16], batch_size=64,
                    lr_dense=0.01, lr_sparse=0.05, optimizer="adam")


def toy_data(rows: int = 4096, seed: int = 0) -> tuple[Split, Split, int]:
    table, cards = generate(SyntheticConfig(rows=rows, cardinality_scale=0.0005), seed)
    frame = table.frame
    offsets = np.r_[0, np.cumsum([cards[c] for c in table.categorical])[:-1]]
    keys = frame[table.categorical].to_numpy(np.int64) + offsets
    dense = np.log1p(np.clip(np.nan_to_num(frame[table.dense].to_numpy(np.float32)), 0, None))
    labels = frame["label"].to_numpy(np.float32)
    cut = int(rows * 0.8)
    rows_total = int(sum(cards.values()))
    return (Split(dense[:cut], keys[:cut], labels[:cut]),
            Split(dense[cut:], keys[cut:], labels[cut:]), rows_total)
