"""The emulated clock of a run: its compute and software costs, and an epoch replayed through it.

The clock ([`workbench.cluster.time_model`][]) charges a worker ``(a + b x samples) / speed``
seconds of compute per iteration and a per-message / per-row software cost on client and server;
``results/calibration/calibration.json`` (the ``calibrate`` stage) holds this machine's
measurements of both:

    cluster.compute  calibrated -> calibration.compute[<model>/D<d>/dense<i>/sparse<j>]
                     flops      -> 3 x the model's forward FLOPs / cluster.gflops
    cluster.software calibrated -> calibration.software[D<d>]; explicit -> cluster.*_us; off
        --clock_costs--> (ComputeCost, SoftwareCost)  --clock_summary--> the summary's "clock"

[`clock_costs`][] is how every timed stage turns ``cluster.compute`` and ``cluster.software``
into the clock's costs; a calibrated model entry carries a [`fingerprint`][] of the model's
configuration, so changing ``models.wdl`` without recalibrating is an error naming the stage.
[`replay_counters`][] replays one epoch of a dispatched key trace through HET's caches into
the per-iteration counters [`workbench.cluster.time_model.epoch_time`][] clocks.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from workbench.cluster.cache import COUNTERS
from workbench.cluster.calibration import Calibration, compute_key
from workbench.cluster.config import CacheConfig, ClusterConfig
from workbench.cluster.edge_cluster import EdgeCluster, replay_steps
from workbench.cluster.time_model import ComputeCost, SoftwareCost
from workbench.dispatch.base import iter_trace
from workbench.models.config import ModelConfig
from workbench.models.ctr import build_model, flops_per_sample
from workbench.models.recipe import Recipe

#: ModelConfig fields that do not change the compute of one step.
NOT_COMPUTE = ("lr_dense", "lr_sparse", "batch_size", "init_scale", "divide_by_workers")


@dataclasses.dataclass(frozen=True)
class ModelShape:
    """One model to calibrate: its config name, config, and the dataset shape it runs on."""

    name: str
    model: ModelConfig
    n_dense: int
    n_sparse: int

    @property
    def key(self) -> str:
        """Its [`compute_key`][workbench.cluster.calibration.compute_key]; a recipe other
        than ``workbench`` is part of the name (``wdl@hetu/D128/...``), so one calibration can
        hold a model under both recipes."""
        name = self.name if self.model.recipe == Recipe.WORKBENCH \
            else f"{self.name}@{self.model.recipe}"
        return compute_key(name, self.model.embedding_dim, self.n_dense, self.n_sparse)


def fingerprint(model: ModelConfig) -> str:
    """A short hash of the fields of ``model`` that set its compute (not the learning rates
    or the batch size). The ``workbench`` recipe's name is left out, so a calibration made
    before recipes existed still matches its model."""
    fields = {k: v for k, v in dataclasses.asdict(model).items() if k not in NOT_COMPUTE}
    if fields["recipe"] == Recipe.WORKBENCH:
        del fields["recipe"]
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def clock_costs(cluster: ClusterConfig, calibration_dir: Path, shape: ModelShape,
                wire_dim: int | None = None) -> tuple[ComputeCost, SoftwareCost]:
    """The clock's compute and software costs for ``shape`` under ``cluster``'s settings.

    Args:
        cluster: its ``compute`` (``calibrated`` / ``flops``) and ``software`` (``calibrated``
            / ``explicit`` / ``off``) choose the source.
        calibration_dir: ``results/calibration`` (read only when something is calibrated).
        shape: the model and dataset shape timed.
        wire_dim: the width of a row on the wire (default: the model's embedding width).

    Raises:
        ConfigError: a calibrated value is missing or stale (names the stage to run).
    """
    dim = shape.model.embedding_dim if wire_dim is None else wire_dim
    needs = cluster.compute == "calibrated" or cluster.software == "calibrated"
    calibration = Calibration.load(calibration_dir) if needs else None
    if cluster.compute == "calibrated":
        assert calibration is not None  # loaded whenever a cost is calibrated
        compute = calibration.compute_cost(shape.key, fingerprint(shape.model))
    else:
        model = build_model(shape.model, shape.n_dense, shape.n_sparse)
        compute = ComputeCost.from_flops(
            3 * flops_per_sample(model, shape.n_dense, shape.n_sparse,
                                 shape.model.embedding_dim), cluster.gflops)
    if cluster.software == "calibrated":
        assert calibration is not None
        software = calibration.software_cost(dim)
    elif cluster.software == "explicit":
        software = SoftwareCost(1e-6 * cluster.client_message_us, 1e-6 * cluster.client_row_us,
                                1e-6 * cluster.server_message_us, 1e-6 * cluster.server_row_us,
                                source="cluster.*_us")
    else:
        software = SoftwareCost(source="off")
    return compute, software


def clock_summary(cluster: ClusterConfig, compute: ComputeCost,
                  software: SoftwareCost) -> dict[str, Any]:
    """The clock a timed experiment ran on, as its summary records it (and reports print)."""
    return {"overlap": cluster.overlap, "compute": cluster.compute,
            "per_sample_s": compute.per_sample_s, "per_batch_s": compute.per_batch_s,
            "compute_source": compute.source, "software": cluster.software,
            "client_message_s": software.client_message_s, "client_row_s": software.client_row_s,
            "server_message_s": software.server_message_s, "server_row_s": software.server_row_s,
            "software_source": software.source, "dense_mode": cluster.dense_mode,
            "describe": f"{compute.describe()}; {software.describe()}; overlap {cluster.overlap}"
                        f"; dense sync {cluster.dense_sync().describe()}"}


def replay_counters(keys: np.ndarray, rows: int, workers: int, per_worker: int,
                    cache: CacheConfig, dispatcher: str, seed: int) -> np.ndarray:
    """Per-iteration counter deltas ``[iterations, workers, counters]`` of one epoch."""
    return _replay(keys, rows, workers, per_worker, cache, dispatcher, seed)[1]


def replay_epoch(keys: np.ndarray, rows: int, workers: int, per_worker: int,
                 cache: CacheConfig, dispatcher: str, seed: int, dim: int = 4
                 ) -> tuple[np.ndarray, np.ndarray]:
    """One epoch's per-iteration counter deltas ``[iterations, workers, counters]`` and what
    a flush of every cache at its end adds ``[workers, counters]`` (the dirty lines and queued
    evictees the epoch leaves unpushed: ``flush_pushes``).

    Args:
        keys: the epoch's keys ``[samples, fields]``.
        rows: the table's rows.
        workers: W.
        per_worker: samples per worker per iteration.
        cache: every worker's cache.
        dispatcher: the baseline dispatch of every global batch.
        seed: the dispatch's seed.
        dim: the width of the emulated rows (the counters do not depend on it; 1 keeps a
            full-size cluster's memory lowest).
    """
    cluster, counters = _replay(keys, rows, workers, per_worker, cache, dispatcher, seed, dim)
    before = np.stack([c.counters.copy() for c in cluster.caches])
    cluster.flush()
    return counters, np.stack([c.counters for c in cluster.caches]) - before


def _replay(keys: np.ndarray, rows: int, workers: int, per_worker: int, cache: CacheConfig,
            dispatcher: str, seed: int, dim: int = 4) -> tuple[EdgeCluster, np.ndarray]:
    """The cluster after one epoch's replay and its per-iteration counter deltas.

    The trace is cut a window at a time ([`iter_trace`][workbench.dispatch.base.iter_trace]), so a
    memory-mapped ``keys`` is read as it is replayed: only one window of the trace is in memory.
    """
    cluster = EdgeCluster(ClusterConfig(workers=workers), cache, rows, dim=dim)
    steps = 0
    for window in iter_trace(keys, workers, per_worker, dispatcher, seed):
        replay_steps(cluster, window, order="bsp")
        steps += len(window)
    hist = cluster.history()
    return cluster, hist[list(COUNTERS)].to_numpy().reshape(steps, workers, len(COUNTERS))
