r"""Command line of every pipeline stage: ``python -m workbench.stages <stage> [options] [overrides]``.

::

    download --> preprocess --> dataset-stats --> notebook --> report
    (per dataset)           \-> het-cache ------/   (per notebook)
                            \-> dedup --> recd --/
                            \-> hotline-popularity, hotline, flexshard

Stages::

    download       acquire raw files (generate / fetch + verify / check local) -> data/raw/<ds>
    preprocess     parse + encode into the columnar schema             -> data/processed/<ds>
    prepare        download then preprocess (interactive convenience)
    dataset-stats  statistics and access skew (HET Fig. 3)             -> results/dataset_stats/<ds>
    het-cache      HET cache replay: miss rates, rows moved, sweeps      -> results/het_cache/<ds>
    het-train      HET training through the cluster (Fig. 6, Tables 1-2) -> results/het_train/<ds>
    calibrate      this machine's compute per model and software cost per width (the clock);
                   frozen in dvc.yaml, rerun explicitly (make calibrate) -> results/calibration
    het-time       HET time model (Fig. 2, 7, 9)                          -> results/het_time/<ds>
    esd            ESD dispatchers: cost sweeps, decision time, training  -> results/esd/<ds>
    dedup          RecD partitions (shuffled / session-clustered), storage and dedup factors
                                                  -> data/partitions/<ds>, results/dedup/<ds>
    recd           RecD preprocessing and training throughput, KJT vs IKJT -> results/recd/<ds>
    hotline-popularity  Hotline/FAE popular-input fraction against the hot-memory budget
                                                  -> results/hotline_popularity/<ds>
    hotline        Hotline's micro-batch pipeline vs the CPU-GPU hybrid, FAE, accelerator-only:
                   measured on this machine + the time model of accelerator servers
                                                  -> results/hotline/<ds>
    flexshard      FlexShard's tiered sharding vs row-wise and the other plans of a sequence
                   table: traffic, all-to-all time, memory, sweeps -> results/flexshard/<ds>
    distributed-check  the emulator against real processes (torch.distributed, gloo, shaped
                   links): counters, bytes, parameters, phase times, ESD in wall time
                                                  -> results/distributed_check/<ds>
    combined       the five mechanisms in one training run, and their ablation (bytes, time,
                   AUC)                                   -> results/combined/<ds>
    notebook NAME  execute notebooks/NAME.py with papermill            -> reports/NAME/
    report         gather every notebook section                       -> reports/README.md

Common options: ``--params params.yaml`` reads the composed config DVC tracks (dvc.yaml passes
it); without it ``conf/`` is composed. ``--dataset NAME`` picks ``datasets.NAME``; a Hydra
override ``dataset=<name>`` (``criteo_kaggle``, or ``local`` with ``dataset.path=...``) picks that
dataset, for every stage alike. Without either, ``het-train``, ``het-time``, ``esd`` and
``hotline`` run on
their experiment's ``dataset`` (``experiments.<stage>.dataset``) and the others on the
``dataset`` group's default.
``--offline`` (download) never touches the network. Everything after the options is a Hydra
override, e.g. ``python -m workbench.stages prepare dataset=movielens_1m dataset.max_rows=1000``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from workbench.config import WorkbenchConfig, load
from workbench.data.config import DatasetConfig
from workbench.utils.paths import REPO_ROOT, cli_path, repo_relative
from workbench.utils.validation import ConfigError

log = logging.getLogger("workbench.stages")

STAGES = ("download", "preprocess", "prepare", "dataset-stats", "het-cache", "calibrate",
          "het-train", "het-time", "esd", "dedup", "recd", "hotline-popularity", "hotline",
          "flexshard", "distributed-check", "combined", "notebook", "report")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m workbench.stages", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stage", choices=STAGES)
    parser.add_argument("name", nargs="?", default=None,
                        help="notebook name (for the notebook stage)")
    parser.add_argument("--params", type=cli_path, default=None,
                        help="read this composed params file instead of composing conf/")
    parser.add_argument("--dataset", default=None, help="use datasets.<NAME> from the config")
    parser.add_argument("--offline", action="store_true",
                        help="download: never use the network (use files already in place)")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. dataset=avazu")
    return parser


def _processed(cfg: WorkbenchConfig, name: str) -> Path:
    from workbench.data.pipeline import processed_dir

    return processed_dir(cfg.paths.resolve("data"), name)


def _results(cfg: WorkbenchConfig, stage: str, name: str) -> Path:
    return cfg.paths.resolve("results") / stage / name


def _partitions(cfg: WorkbenchConfig, name: str) -> Path:
    """``data/partitions/<dataset>``: written by ``dedup``, read by ``recd``."""
    return cfg.paths.resolve("data") / "partitions" / name


def _dataset_stats(cfg: WorkbenchConfig, ds: DatasetConfig) -> Path:
    from workbench.experiments import dataset_stats

    out = _results(cfg, "dataset_stats", ds.name)
    dataset_stats.run(_processed(cfg, ds.name), out, cfg.experiments.dataset_stats)
    return out


def _het_cache(cfg: WorkbenchConfig, ds: DatasetConfig) -> Path:
    from workbench.experiments import het_cache

    out = _results(cfg, "het_cache", ds.name)
    het_cache.run(_processed(cfg, ds.name), out, cfg.experiments.het_cache, cfg.seed,
                  progress=cfg.profile.progress)
    return out


def _calibration(cfg: WorkbenchConfig) -> Path:
    return cfg.paths.resolve("results") / "calibration"


def _calibrate(cfg: WorkbenchConfig, ds: DatasetConfig | None) -> Path:
    """Calibrate every model the timed experiments run, on their datasets; or on ``ds`` when
    the command line picked one, merged into the existing calibration."""
    from workbench.data.schema import DatasetMeta
    from workbench.experiments import calibrate

    exps = cfg.experiments
    names = {"train": exps.het_train.dataset, "time": exps.het_time.dataset,
             "esd": exps.esd.dataset, "combined": exps.combined.dataset}
    if ds is not None:
        names = {k: ds.name for k in names}
    shapes_of = {}
    for name in set(names.values()):
        meta = DatasetMeta.read(_processed(cfg, name))
        shapes_of[name] = (len(meta.dense), len(meta.categorical))
    shapes, dims = calibrate.required(
        cfg.models, shapes_of, train_dataset=names["train"], train_model=exps.het_train.model,
        time_dataset=names["time"], time_models=exps.het_time.models,
        fig2_dim=exps.het_time.fig2_dim, dim_sweep=exps.het_time.dim_sweep,
        esd_dataset=names["esd"], esd_model=exps.esd.train_model,
        combined_dataset=names["combined"], combined_model=exps.combined.model)
    out = _calibration(cfg)
    calibrate.run(out, exps.calibrate, shapes=shapes, wire_dims=dims, seed=cfg.seed,
                  merge=ds is not None, progress=cfg.profile.progress)
    return out


def _het_train(cfg: WorkbenchConfig, ds: DatasetConfig) -> Path:
    from workbench.experiments import het_train

    exp = cfg.experiments.het_train
    out = _results(cfg, "het_train", ds.name)
    het_train.run(_processed(cfg, ds.name), out, exp, dataset=ds,
                  model=cfg.models[exp.model], cluster=cfg.cluster, cache=cfg.cache,
                  dispatcher=cfg.dispatch.name, seed=cfg.seed,
                  calibration=_calibration(cfg), progress=cfg.profile.progress)
    return out


def _het_time(cfg: WorkbenchConfig, ds: DatasetConfig) -> Path:
    from workbench.experiments import het_time

    exp = cfg.experiments.het_time
    out = _results(cfg, "het_time", ds.name)
    het_time.run(_processed(cfg, ds.name), out, exp,
                 per_worker=cfg.experiments.het_cache.batch_size, models=cfg.models,
                 base_model=cfg.experiments.het_train.model, cluster=cfg.cluster,
                 cache=cfg.cache, dispatcher=cfg.dispatch.name, seed=cfg.seed,
                 calibration=_calibration(cfg), progress=cfg.profile.progress)
    return out


def _esd(cfg: WorkbenchConfig, ds: DatasetConfig) -> Path:
    from workbench.experiments import esd

    exp = cfg.experiments.esd
    out = _results(cfg, "esd", ds.name)
    esd.run(_processed(cfg, ds.name), out, exp, train=cfg.experiments.het_train,
            dataset=ds, model=cfg.models[exp.train_model], cluster=cfg.cluster,
            calibration=_calibration(cfg), seed=cfg.seed, progress=cfg.profile.progress)
    return out


def _combined(cfg: WorkbenchConfig, ds: DatasetConfig) -> Path:
    from workbench.experiments import combined

    exp = cfg.experiments.combined
    out = _results(cfg, "combined", ds.name)
    combined.run(_processed(cfg, ds.name), out, exp, esd=cfg.experiments.esd, dataset=ds,
                 model=cfg.models[exp.model], cluster=cfg.cluster,
                 calibration=_calibration(cfg), seed=cfg.seed, progress=cfg.profile.progress)
    return out


def _dedup(cfg: WorkbenchConfig, ds: DatasetConfig) -> Path:
    """RecD's data generation for one dataset: partitions and the storage/dedup results."""
    from workbench.experiments import dedup

    out = _results(cfg, "dedup", ds.name)
    dedup.run(_processed(cfg, ds.name), _partitions(cfg, ds.name), out, cfg.experiments.recd,
              cfg.seed, progress=cfg.profile.progress)
    return out


def _recd(cfg: WorkbenchConfig, ds: DatasetConfig) -> Path:
    """RecD's throughput stage for one dataset (reads the dedup stage's partitions)."""
    from workbench.experiments import recd

    out = _results(cfg, "recd", ds.name)
    recd.run(_partitions(cfg, ds.name), out, cfg.experiments.recd, cfg.seed,
             progress=cfg.profile.progress)
    return out


def _hotline_popularity(cfg: WorkbenchConfig, ds: DatasetConfig) -> Path:
    """Hotline's popular-input fraction against the hot-memory budget on one dataset."""
    from workbench.experiments import hotline

    exp = cfg.experiments.hotline
    out = _results(cfg, "hotline_popularity", ds.name)
    hotline.popularity(_processed(cfg, ds.name), out, exp,
                       dim=cfg.models[exp.model].embedding_dim, seed=cfg.seed)
    return out


def _hotline(cfg: WorkbenchConfig, ds: DatasetConfig) -> Path:
    """Hotline's pipeline against its baselines, measured and modelled."""
    from workbench.experiments import hotline

    exp = cfg.experiments.hotline
    out = _results(cfg, "hotline", ds.name)
    hotline.run(_processed(cfg, ds.name), out, exp, dataset=ds, model=cfg.models[exp.model],
                hardware=cfg.hardware, seed=cfg.seed, progress=cfg.profile.progress)
    return out


def _flexshard(cfg: WorkbenchConfig, ds: DatasetConfig) -> Path:
    """FlexShard's plans on one dataset's sequence table."""
    from workbench.experiments import flexshard

    out = _results(cfg, "flexshard", ds.name)
    flexshard.run(_processed(cfg, ds.name), out, cfg.experiments.flexshard,
                  topology=cfg.topology)
    return out


def _distributed_check(cfg: WorkbenchConfig, ds: DatasetConfig) -> Path:
    """The emulated cluster against the distributed backend on ``het_train``'s model."""
    from workbench.experiments import distributed_check

    name = cfg.experiments.het_train.model
    out = _results(cfg, "distributed_check", ds.name)
    distributed_check.run(_processed(cfg, ds.name), out, cfg.experiments.distributed_check,
                          dataset=ds, model_name=name, model=cfg.models[name],
                          cluster=cfg.cluster, cache=cfg.cache, esd=cfg.experiments.esd,
                          calibration=_calibration(cfg), seed=cfg.seed)
    return out


def _notebook(cfg: WorkbenchConfig, name: str | None, params: Path | None) -> Path:
    from workbench.report.notebook import execute

    if not name:
        raise ConfigError("the notebook stage needs a notebook name, e.g. "
                          "`python -m workbench.stages notebook datasets`")
    if params is None:
        raise ConfigError("the notebook stage reads run outputs through a params file: pass "
                          "--params params.yaml (make params writes it)")
    reports = cfg.paths.resolve("reports")
    # repository-relative where possible: the executed notebook records its parameters, and a
    # notebook resolves relative paths against the repository root
    return execute(name, reports / "notebooks" / f"{name}.ipynb",
                   {"params_file": repo_relative(params), "out_dir": repo_relative(reports / name)})


#: Stages that run on one dataset the configuration names (``experiments.<stage>.dataset``)
#: unless the command line picks another.
SINGLE_DATASET = {"het-train": "het_train", "het-time": "het_time", "esd": "esd",
                  "hotline": "hotline", "distributed-check": "het_train",
                  "combined": "combined"}


def _picked(args: argparse.Namespace) -> bool:
    """Whether the command line picked a dataset (``--dataset`` or a ``dataset=`` override)."""
    return args.dataset is not None or any(
        o.split("=", 1)[0].lstrip("+~") == "dataset" for o in args.overrides)


def _stage_dataset(cfg: WorkbenchConfig, args: argparse.Namespace) -> DatasetConfig:
    """The dataset a stage runs on.

    ``--dataset NAME`` picks ``datasets.NAME``; a ``dataset=<name>`` override picks the
    ``dataset`` group's selection (a user's ``local`` data included), for every stage alike.
    Without either, ``het-train``, ``het-time``, ``esd`` and ``hotline`` run on their experiment's
    ``dataset`` and the other stages on the ``dataset`` group's default.
    """
    if not _picked(args) and args.stage in SINGLE_DATASET:
        return cfg.dataset_named(getattr(cfg.experiments, SINGLE_DATASET[args.stage]).dataset)
    return cfg.dataset_named(args.dataset)


def run(argv: list[str] | None = None) -> Path:
    """Parse ``argv``, validate the config, run the stage; return its output path."""
    from workbench.utils.logs import setup

    parser = _parser()
    args = parser.parse_intermixed_args(argv)
    if args.name is not None and "=" in args.name:  # an override, not a notebook name
        args.overrides.insert(0, args.name)
        args.name = None
    try:
        cfg = load(args.overrides, args.params)
        ds = _stage_dataset(cfg, args)
    except ConfigError as err:
        parser.exit(2, f"ConfigError: {err}\n")
    global_stage = args.stage in ("notebook", "report", "calibrate")
    setup(cfg.log_level, role=f"{args.stage}{'' if global_stage else '@' + ds.name}")
    if not cfg.profile.progress:
        import os

        os.environ["TQDM_DISABLE"] = "1"
    from workbench.data import pipeline

    data_root = cfg.paths.resolve("data")
    if args.stage in ("download", "prepare"):
        out = pipeline.download(ds, data_root, seed=cfg.seed, progress=cfg.profile.progress,
                                offline=args.offline)
        if args.stage == "download":
            return out
    if args.stage in ("preprocess", "prepare"):
        return pipeline.preprocess(ds, data_root, seed=cfg.seed, progress=cfg.profile.progress)
    experiments = {"dataset-stats": _dataset_stats, "het-cache": _het_cache, "dedup": _dedup,
                   "recd": _recd, "het-train": _het_train, "het-time": _het_time, "esd": _esd,
                   "hotline-popularity": _hotline_popularity, "hotline": _hotline,
                   "flexshard": _flexshard, "distributed-check": _distributed_check,
                   "combined": _combined}
    if args.stage in experiments:
        return experiments[args.stage](cfg, ds)
    if args.stage == "calibrate":
        return _calibrate(cfg, ds if _picked(args) else None)
    if args.stage == "notebook":
        return _notebook(cfg, args.name, args.params)
    from workbench.report import sections as report

    report.main(([f"--params={args.params}"] if args.params else []) + list(args.overrides))
    return cfg.paths.resolve("reports") / "README.md"


def main(argv: list[str] | None = None) -> None:
    """Entry point: known failures print one clear line and exit non-zero (no traceback)."""
    from workbench.data.partition import NoSessionsError
    from workbench.data.pipeline import DatasetUnavailable
    from workbench.experiments.flexshard import NoSequenceError

    try:
        out = run(argv)
    except (ConfigError, DatasetUnavailable, FileNotFoundError, NoSessionsError,
            NoSequenceError) as err:
        sys.exit(f"{type(err).__name__}: {err}")
    except Exception as err:  # download errors carry their own clear message
        if type(err).__name__ in ("DownloadError", "ChecksumError", "MalformedInputError"):
            sys.exit(f"{type(err).__name__}: {err}")
        raise
    try:
        shown = out.relative_to(REPO_ROOT)
    except ValueError:
        shown = out
    log.info("done: %s", shown)


if __name__ == "__main__":
    main()
