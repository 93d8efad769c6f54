"""Toy distributed jobs and the check of a real run against the emulator."""

from __future__ import annotations

import numpy as np

from workbench.cluster.config import CacheConfig, ClusterConfig
from workbench.models.config import ModelConfig
from workbench.training.components import SystemSpec
from workbench.training.distributed import (
    DistributedJob,
)
from workbench.training.trainer import Split


def toy_split(n: int = 512, rows: int = 300, f: int = 3, seed: int = 0) -> Split:
    rng = np.random.default_rng(seed)
    keys = (rng.zipf(1.4, size=(n, f)) - 1) % rows
    return Split(rng.normal(size=(n, 2)).astype(np.float32), keys.astype(np.int64),
                 (rng.random(n) < 0.3).astype(np.float32))


def toy_job(steps: int = 6, bound: int = 0, **kw) -> DistributedJob:
    model = ModelConfig(name="wdl", embedding_dim=8, deep_mlp=[16], bottom_mlp=[16, 8],
                        top_mlp=[16], optimizer="sgd", lr_dense=0.05, lr_sparse=0.05,
                        batch_size=32)
    cluster = ClusterConfig(workers=2, bandwidth_gbps=[0.5, 1.0], latency_ms=[0.5],
                            overlap="none", software="off")
    return DistributedJob(model, n_dense=2, n_sparse=3, table_rows=300,
                          system=SystemSpec("c", "cache", bound), cluster_cfg=cluster,
                          cache_cfg=CacheConfig(policy="lru", ratio=0.1), steps=steps,
                          dispatcher="random", timeout_s=20, deadline_s=120, **kw)


def checked_against_emulator(job: DistributedJob, train: Split, real):
    """The emulated run of ``job`` and the exact checks of the distributed ``real`` against it
    (counters, bytes, versions asserted identical)."""
    from workbench.cluster.time_model import ComputeCost, SoftwareCost
    from workbench.training.emulator_check import compare, run_emulated

    emulated = run_emulated(job, train, ComputeCost(0.0, 1e-6, "test"),
                            SoftwareCost(0, 0, 0, 0, "test"))
    check = compare(emulated, real)
    assert check["counters_identical"], check
    assert check["embedding_bytes_identical"] and check["meta_bytes_explained"]
    assert check["versions_identical"]
    return emulated, check
