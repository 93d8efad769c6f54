"""The toy Hotline workload the Hotline tests share (a support module, not a test file: no
test file imports another): a 6-field DLRM over 240 rows, six mini-batches of 64 samples, its
hot set, one epoch of a scheme on the CPU, and the time model's hardware."""

from __future__ import annotations

from functools import cache

import numpy as np

from workbench.cluster.config import HardwareConfig
from workbench.data.popularity import hot_keys
from workbench.models.config import ModelConfig
from workbench.training.components import ModelSpec
from workbench.training.hotline import TieredTrainer
from workbench.training.hotline_epoch import Schedule, train_scheme
from workbench.training.trainer import Split

MODEL = ModelConfig(name="dlrm", embedding_dim=8, bottom_mlp=[16], top_mlp=[16],
                    optimizer="adam", lr_dense=1e-3, lr_sparse=0.05)
N_DENSE, F, VOCAB, DIM, BATCH, STEPS = 13, 6, 40, 8, 64, 6
ROWS = F * VOCAB
SPEC = ModelSpec(MODEL, N_DENSE, F, ROWS)
# float32 summation order differs between one backward over the mini-batch and two over its
# micro-batches (and between one index_add_ and two): parity holds to rounding, not bitwise.
# One training step moves the rows by up to ~1e-2, so 1e-5 still catches a lost update.
ATOL = 1e-5


# -- data ------------------------------------------------------------------------------------------
def _split(n: int, seed: int) -> Split:
    """``n`` samples: F zipf(2) keys per sample (field f owns rows [f V, (f + 1) V)), 13 dense
    features, labels from a fixed logistic model of both."""
    rng = np.random.default_rng(seed)
    local = np.minimum(rng.zipf(2.0, size=(n, F)) - 1, VOCAB - 1)
    keys = (local + np.arange(F) * VOCAB).astype(np.int64)
    dense = rng.random((n, N_DENSE), dtype=np.float32)
    weights = np.random.default_rng(99).normal(size=ROWS)
    logit = weights[keys].sum(axis=1) + 2 * dense[:, 0] - 1
    labels = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.float32)
    return Split(dense, keys, labels)


@cache
def toy_data() -> tuple[Split, Split, np.ndarray, np.ndarray]:
    """(train: STEPS mini-batches, test, initial table, hot set of 24 rows)."""
    train, test = _split(STEPS * BATCH, 0), _split(128, 1)
    table = np.random.default_rng(5).uniform(-0.05, 0.05, (ROWS, DIM)).astype(np.float32)
    counts = np.bincount(train.keys.ravel(), minlength=ROWS)
    hot = hot_keys(counts, 24 * 4 * DIM, DIM)  # budget: 24 rows of D floats
    return train, test, table, hot


def _train(scheme: str, hot: np.ndarray, *, seed: int = 0, overlap: bool = True,
           device: str = "cpu", is_hot: np.ndarray | None = None, **schedule):
    """Train one epoch; returns (merged table, dense parameters, metrics, steps, trainer info)."""
    train, test, table, _ = toy_data()
    trainer = TieredTrainer(SPEC, table, hot, device=device, seed=seed, overlap=overlap)
    try:
        metrics, steps = train_scheme(scheme, trainer, train, test,
                                      Schedule(BATCH, 3, **schedule), is_hot=is_hot)
        params = [p.detach().cpu().numpy().copy() for p in trainer.model.parameters()]
        info = {"hot_device": trainer.store.hot.device.type,
                "host_pinned": trainer.store.host.is_pinned(),
                "param_device": next(trainer.model.parameters()).device.type}
        return trainer.store.table().copy(), params, metrics, steps, info
    finally:
        trainer.close()


@cache
def _cpu_run(scheme: str, hot_kind: str, seed: int = 0, overlap: bool = True):
    _, _, _, hot = toy_data()
    keys = {"none": np.zeros(0, dtype=np.int64), "hot": hot, "all": np.arange(ROWS)}[hot_kind]
    return _train(scheme, keys, seed=seed, overlap=overlap)


# -- the time model --------------------------------------------------------------------------------
HW = HardwareConfig(peak_tflops=10.0, compute_efficiency=0.5, step_overhead_us=100.0,
                    dense_update_us=30.0, accelerator_gbps=200.0, host_gbps=8.0, link_gbps=16.0,
                    link_latency_us=5.0)
DENSE = 30e-6  # once per mini-batch, whatever the micro-batches
ROW_BYTES, FLOPS = 64, 2e6
