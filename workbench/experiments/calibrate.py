"""The ``calibrate`` stage: this machine's compute and software costs, for the emulated clock.

The clock ([`workbench.cluster.time_model`][]) charges a worker ``(a + b x samples) / speed``
seconds of compute per iteration and a per-message / per-row software cost on client and server.
This stage measures both for exactly what the experiments run, and writes
``results/calibration/calibration.json`` ([`workbench.cluster.calibration`][]):

    for each (model, embedding width D, dataset shape) an experiment trains or times:
        build the model (torch, ``calibration.threads`` threads), and for each batch size n:
            time forward + BCE loss + backward (dense and embedding-input gradients) +
            optimizer step, ``repeats`` times after ``warmup`` steps; keep the median
        fit seconds = a + b x n by least squares      -> compute[<model>/D<d>/dense<i>/sparse<j>]
    for each width D the experiments put on the wire:
        software_cost.measure(D)                      -> software[D<d>]

It is a DVC stage that ``dvc repro`` never re-executes (``frozen: true``): the pipeline reads the
committed calibration so results are byte-identical from run to run, and recalibrating is an
explicit step (``make calibrate``), after which the downstream stages rerun. The model entries
carry a fingerprint of the model's configuration: changing ``models.wdl`` without recalibrating
is an error that names this stage.

[`workbench.training.clock.clock_costs`][] is how every timed experiment turns
``cluster.compute`` and ``cluster.software`` into the clock's costs.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from workbench.cluster.calibration import Calibration, software_key
from workbench.cluster.software_cost import fit_linear, measure
from workbench.cluster.time_model import SoftwareCost
from workbench.experiments.config import CalibrationConfig, ExperimentsConfig
from workbench.models.config import ModelConfig
from workbench.models.ctr import build_model, flops_per_sample
from workbench.training.clock import ModelShape, fingerprint
from workbench.training.trainer import dense_optimizer
from workbench.utils.timing import cpu_model
from workbench.utils.validation import ConfigError

log = logging.getLogger(__name__)
def time_model_step(shape: ModelShape, batch_sizes: list[int], repeats: int, warmup: int,
                    seed: int) -> dict[str, Any]:
    """Median seconds of one training step of ``shape`` per batch size, and the linear fit.

    Returns:
        ``fingerprint``, ``batch_sizes``, ``seconds`` (medians), ``per_batch_s`` and
        ``per_sample_s`` (the fit), and ``flops_per_sample`` (3 x forward, for comparison).
    """
    torch.manual_seed(seed)
    model = build_model(shape.model, shape.n_dense, shape.n_sparse)
    optimizer = dense_optimizer(shape.model, model)
    gen = torch.Generator().manual_seed(seed)
    dim = shape.model.embedding_dim
    medians = []
    for n in batch_sizes:
        dense = torch.rand(n, shape.n_dense, generator=gen)
        emb = (torch.rand(n, shape.n_sparse, dim, generator=gen) - 0.5) * 0.1
        labels = (torch.rand(n, generator=gen) < 0.25).float()
        times = []
        for i in range(warmup + repeats):
            start = time.perf_counter()
            emb_t = emb.clone().requires_grad_(True)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(model(dense, emb_t),
                                                                        labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if i >= warmup:
                times.append(time.perf_counter() - start)
        medians.append(float(np.median(times)))
    per_batch, per_sample = fit_linear(np.array(batch_sizes, dtype=np.float64),
                                       np.array(medians))
    return {"fingerprint": fingerprint(shape.model), "batch_sizes": list(batch_sizes),
            "seconds": medians, "per_batch_s": float(per_batch),
            "per_sample_s": float(per_sample),
            "flops_per_sample": 3 * flops_per_sample(model, shape.n_dense, shape.n_sparse, dim)}


def machine() -> dict[str, Any]:
    """What the calibration was measured on."""
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(),
            "torch": torch.__version__, "numpy": np.__version__}


def run(out: Path, exp: CalibrationConfig, *, shapes: list[ModelShape], wire_dims: list[int],
        seed: int, progress: bool = False, keep_earlier: bool = False) -> Calibration:
    """The ``calibrate`` stage: measure and write ``out/calibration.json`` (atomically).

    Args:
        out: ``results/calibration`` (the pipeline's, replaced whole: one file holds one
            run's measurements and the machine and settings they were taken with) or
            ``results/calibrate/<dataset>`` (a picked dataset's own, ``keep_earlier``).
        exp: batch sizes, repeats and threads of the measurement.
        shapes: the models and dataset shapes the experiments run (see [`required`][]).
        wire_dims: the embedding widths whose software cost is measured.
        seed: seeds the random inputs.
        progress: show a progress bar.
        keep_earlier: keep what the file at ``out`` measured and this run does not
            ([`Calibration.keeping`][workbench.cluster.calibration.Calibration.keeping]): an
            own calibration run under another profile leaves the first profile's entries.
    """
    from tqdm.auto import tqdm

    from workbench.utils.io import atomic_dir, write_json

    if not shapes:
        raise ValueError("nothing to calibrate: no model is configured for a timed experiment")
    threads = torch.get_num_threads()
    torch.set_num_threads(exp.threads)
    compute: dict[str, dict[str, Any]] = {}
    software: dict[str, dict[str, Any]] = {}
    try:
        bar = tqdm(total=len(shapes) + len(wire_dims), disable=not progress, desc="calibrate")
        for shape in sorted({s.key: s for s in shapes}.values(), key=lambda s: s.key):
            compute[shape.key] = time_model_step(shape, list(exp.batch_sizes), exp.repeats,
                                                 exp.warmup, seed)
            log.info("%s: %.3g ms/sample + %.3g ms/step", shape.key,
                     1e3 * compute[shape.key]["per_sample_s"],
                     1e3 * compute[shape.key]["per_batch_s"])
            bar.update()
        for dim in sorted(set(wire_dims)):
            costs = measure(dim, sizes=tuple(exp.software_sizes), repeats=exp.repeats,
                            seed=seed)
            software[software_key(dim)] = costs.to_dict()
            log.info("software cost at D = %d: %s", dim,
                     SoftwareCost(costs.client_message_s, costs.client_row_s,
                                  costs.server_message_s, costs.server_row_s).describe())
            bar.update()
        bar.close()
    finally:
        torch.set_num_threads(threads)
    settings = {"threads": exp.threads, "batch_sizes": list(exp.batch_sizes),
                "repeats": exp.repeats, "warmup": exp.warmup,
                "software_sizes": list(exp.software_sizes)}
    calibration = Calibration(path=out / "calibration.json", machine=machine(),
                              settings=settings, compute=dict(sorted(compute.items())),
                              software=dict(sorted(software.items())))
    if keep_earlier and (out / "calibration.json").is_file():
        try:
            calibration = calibration.keeping(Calibration.load(out))
        except ConfigError as err:
            log.warning("%s; it is replaced by this run's measurements", err)
    with atomic_dir(out) as tmp:
        write_json(tmp / "calibration.json", calibration.to_dict())
    return calibration


def required(models: dict[str, ModelConfig], exps: ExperimentsConfig,
             shapes_of: dict[str, tuple[int, int]], datasets: dict[str, str]
             ) -> tuple[list[ModelShape], list[int]]:
    """What the timed stages need calibrated: model shapes and wire widths.

    ``het_train``'s model (Fig. 6, Tables 1-2), ``esd``'s (at the stage's own width, when it
    sets one) and ``combined``'s end-to-end models,
    every ``het_time`` model at its own width and at Fig. 2's, and ``het_train``'s model at every
    width of Fig. 9c, each on the dataset its stage runs on.

    Args:
        models: every configured model by name.
        exps: the stage configs (``experiments``).
        shapes_of: ``(n_dense, n_sparse)`` of each dataset of ``datasets``.
        datasets: the dataset each timed stage runs on: ``het_train``, ``het_time``, ``esd``
            and ``combined`` (absent: ``combined`` is not calibrated).
    """
    train_model, time_dataset = exps.het_train.model, datasets["het_time"]

    def shape(name: str, dataset: str, dim: int | None = None) -> ModelShape:
        model = models[name] if dim is None else dataclasses.replace(models[name],
                                                                     embedding_dim=dim)
        return ModelShape(name, model, *shapes_of[dataset])

    shapes = [shape(train_model, datasets["het_train"]),
              shape(exps.esd.train_model, datasets["esd"], exps.esd.embedding_dim)]
    if "combined" in datasets:
        shapes.append(shape(exps.combined.model, datasets["combined"]))
    for name in exps.het_time.models:
        shapes += [shape(name, time_dataset), shape(name, time_dataset, exps.het_time.fig2_dim)]
    shapes += [shape(train_model, time_dataset, d) for d in exps.het_time.dim_sweep]
    unique = {s.key: s for s in shapes}
    return list(unique.values()), sorted({s.model.embedding_dim for s in unique.values()})
