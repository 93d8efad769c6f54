"""Benchmark: the exact solver's seconds against its size, fitted for HybridDis' predictor.

HybridDis runs the exact solver on a batch when its predicted seconds fit the decision budget
saved ([`workbench.dispatch.hybriddis`][]). The ``fitted`` predictor is ``t(V) = a + b V`` for
V = N x W sample-worker variables, fitted by least squares
([`fit_exact_time`][workbench.dispatch.hybriddis.fit_exact_time]) to the exact solver's measured
solves on the esd stage's own instances: ``esd_exact`` at every point of the worker and
samples-per-worker sweeps (V from 2 x 256 x 2 to 16 x 256 x 16 at the default), its caches
warmed with its own plans as the stage warms them, each solve's wall seconds alone (the cost
model's pricing excluded). The fit is committed as ``experiments.esd.exact_time_fit`` (the
stage's runs stay deterministic); each esd run writes its own solves to ``exact_times.csv``,
the fit's residuals on that run.

Writes JSON (every solve, the fit, its residuals' quartiles, the machine) and prints the
config line. Run alone on a quiet machine:

    python benchmarks/exact_time_fit.py [--params params.yaml] [--out ...json]
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np

from workbench.cluster.calibration import calibration_dir
from workbench.cluster.construction import clock_cluster
from workbench.config import load
from workbench.data.keys import read_keys, table_rows
from workbench.data.schema import DatasetMeta
from workbench.dispatch.hybriddis import fit_exact_time
from workbench.experiments.esd import EsdPoint, one_run
from workbench.training.clock import ModelShape, clock_costs
from workbench.utils.io import write_json
from workbench.utils.timing import machine

OUT = Path(__file__).parent / "results" / "exact_time_fit.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    cfg = load(params=args.params)
    exp = cfg.experiments.esd
    model = cfg.models[exp.train_model]
    if exp.embedding_dim is not None:
        model = dataclasses.replace(model, embedding_dim=exp.embedding_dim)
    processed = cfg.paths.resolve("data") / "processed" / exp.dataset
    meta = DatasetMeta.read(processed)
    keys, rows = read_keys(processed, meta), table_rows(meta)
    calibration = calibration_dir(cfg.paths.resolve("results"))
    compute, _ = clock_costs(clock_cluster(exp, cfg.cluster), calibration, ModelShape(
        exp.train_model, model, len(meta.dense), len(meta.categorical)))
    base = EsdPoint.base(exp)
    points = ([dataclasses.replace(base, workers=w) for w in exp.worker_sweep]
              + [dataclasses.replace(base, per_worker=b) for b in exp.batch_sweep])
    solves = []
    for point in dict.fromkeys(points):
        _, records = one_run(keys, rows, exp, "esd_exact", point, wire_dim=model.embedding_dim,
                             seed=cfg.seed, compute=compute)
        n = point.workers * point.per_worker
        solves += [{"workers": point.workers, "per_worker": point.per_worker,
                    "variables": n * point.workers, "exact_s": float(r["exact_s"])}
                   for r in records]
        median = float(np.median([r["exact_s"] for r in records]))
        print(f"W = {point.workers}, N = {n}: median {median:.4f} s")
    v = np.array([s["variables"] for s in solves], dtype=float)
    t = np.array([s["exact_s"] for s in solves])
    a, b = fit_exact_time(v, t)
    residual = t - (a + b * v)
    result = {"machine": machine(), "dataset": exp.dataset, "solves": solves,
              "fit": {"intercept_s": a, "seconds_per_variable": b},
              "residual_quartiles_s": np.quantile(residual, [0.25, 0.5, 0.75]).tolist(),
              "fixed_prior_seconds_per_variable": exp.exact_seconds_per_variable}
    write_json(args.out, result)
    print(f"experiments.esd.exact_time_fit: [{a:.4g}, {b:.4g}]   # {args.out}")


if __name__ == "__main__":
    main()
