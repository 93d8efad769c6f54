r"""Command line of every pipeline stage: ``python -m workbench.stages <stage> [options] [overrides]``.

::

    download --> preprocess --> dataset-stats --> notebook --> report
    (per dataset)           \-> het-cache ------/   (per notebook)
                            \-> dedup --> recd --/

Stages::

    download       acquire raw files (generate / fetch + verify / check local) -> data/raw/<ds>
    preprocess     parse + encode into the columnar schema             -> data/processed/<ds>
    prepare        download then preprocess (interactive convenience)
    dataset-stats  statistics and access skew (HET Fig. 3)             -> results/dataset_stats/<ds>
    het-cache      HET cache replay: miss rates, rows moved, sweeps      -> results/het_cache/<ds>
    het-train      HET training through the cluster (Fig. 6, Tables 1-2) -> results/het_train/<ds>
    het-time       HET time model (Fig. 2, 7, 9)                          -> results/het_time/<ds>
    esd            ESD dispatchers: cost sweeps, decision time, training  -> results/esd/<ds>
    dedup          RecD partitions (shuffled / session-clustered), storage and dedup factors
                                                  -> data/partitions/<ds>, results/dedup/<ds>
    recd           RecD preprocessing and training throughput, KJT vs IKJT -> results/recd/<ds>
    notebook NAME  execute notebooks/NAME.py with papermill            -> reports/NAME/
    report         gather every notebook section                       -> reports/README.md

Common options: ``--params params.yaml`` reads the composed config DVC tracks (dvc.yaml passes
it); without it ``conf/`` is composed. ``--dataset NAME`` picks ``datasets.NAME``; otherwise the
``dataset`` group's selection is used, so ``dataset=criteo_kaggle`` works as a Hydra override.
``--offline`` (download) never touches the network. Everything after the options is a Hydra
override, e.g. ``python -m workbench.stages prepare dataset=movielens_1m dataset.max_rows=1000``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from workbench.config import REPO_ROOT, ConfigError, DatasetConfig, WorkbenchConfig, load

log = logging.getLogger("workbench.stages")

STAGES = ("download", "preprocess", "prepare", "dataset-stats", "het-cache", "het-train",
          "het-time", "esd", "dedup", "recd", "notebook", "report")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m workbench.stages", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stage", choices=STAGES)
    parser.add_argument("name", nargs="?", default=None,
                        help="notebook name (for the notebook stage)")
    parser.add_argument("--params", type=Path, default=None,
                        help="read this composed params file instead of composing conf/")
    parser.add_argument("--dataset", default=None, help="use datasets.<NAME> from the config")
    parser.add_argument("--offline", action="store_true",
                        help="download: never use the network (use files already in place)")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. dataset=avazu")
    return parser


def _dataset_stats(cfg: WorkbenchConfig, ds: DatasetConfig) -> Path:
    from workbench import stats
    from workbench.data.pipeline import processed_dir

    out = cfg.paths.resolve("results") / "dataset_stats" / ds.name
    stats.run(processed_dir(cfg, ds), out, cfg.experiments.dataset_stats)
    return out


def _het_cache(cfg: WorkbenchConfig, ds: DatasetConfig) -> Path:
    from workbench import het_cache
    from workbench.data.pipeline import processed_dir

    out = cfg.paths.resolve("results") / "het_cache" / ds.name
    het_cache.run(processed_dir(cfg, ds), out, cfg.experiments.het_cache, cfg.seed,
                  progress=cfg.profile.progress)
    return out


def _het_experiment(cfg: WorkbenchConfig, stage: str) -> Path:
    """``het-train``, ``het-time`` and ``esd``: each runs on its experiment's dataset."""
    from workbench import esd_experiments, het_time, het_train
    from workbench.data.pipeline import processed_dir

    name = stage.replace("-", "_")
    exp = getattr(cfg.experiments, name)
    out = cfg.paths.resolve("results") / name / exp.dataset
    module = {"het_train": het_train, "het_time": het_time, "esd": esd_experiments}[name]
    module.run(processed_dir(cfg, cfg.datasets[exp.dataset]), out, cfg,
               progress=cfg.profile.progress)
    return out


def _recd(cfg: WorkbenchConfig, ds: DatasetConfig, stage: str) -> Path:
    """``dedup`` and ``recd``: RecD's stages for one dataset."""
    from workbench import recd
    from workbench.data.pipeline import processed_dir

    partitions = cfg.paths.resolve("data") / "partitions" / ds.name
    exp = cfg.experiments.recd
    if stage == "dedup":
        out = cfg.paths.resolve("results") / "dedup" / ds.name
        recd.run_dedup(processed_dir(cfg, ds), partitions, out, exp, cfg.seed,
                       progress=cfg.profile.progress)
    else:
        out = cfg.paths.resolve("results") / "recd" / ds.name
        recd.run_throughput(partitions, out, exp, cfg.seed, progress=cfg.profile.progress)
    return out


def _notebook(cfg: WorkbenchConfig, name: str | None, params: Path | None) -> Path:
    from workbench.notebook import execute

    if not name:
        raise ConfigError("the notebook stage needs a notebook name, e.g. "
                          "`python -m workbench.stages notebook datasets`")
    if params is None:
        raise ConfigError("the notebook stage reads run outputs through a params file: pass "
                          "--params params.yaml (make params writes it)")
    reports = cfg.paths.resolve("reports")
    return execute(name, reports / "notebooks" / f"{name}.ipynb",
                   {"params_file": str(params.resolve()), "out_dir": str(reports / name)})


def run(argv: list[str] | None = None) -> Path:
    """Parse ``argv``, validate the config, run the stage; return its output path."""
    from workbench.logs import setup

    parser = _parser()
    args = parser.parse_intermixed_args(argv)
    if args.name is not None and "=" in args.name:  # an override, not a notebook name
        args.overrides.insert(0, args.name)
        args.name = None
    try:
        cfg = load(args.overrides, args.params)
        ds = cfg.dataset_named(args.dataset)
    except ConfigError as err:
        parser.exit(2, f"ConfigError: {err}\n")
    setup(cfg.log_level, role=f"{args.stage}{'@' + ds.name if args.stage not in ('notebook', 'report') else ''}")
    if not cfg.profile.progress:
        import os

        os.environ["TQDM_DISABLE"] = "1"
    from workbench.data import pipeline

    if args.stage == "download":
        return pipeline.download(cfg, ds, offline=args.offline)
    if args.stage == "preprocess":
        return pipeline.preprocess(cfg, ds)
    if args.stage == "prepare":
        pipeline.download(cfg, ds, offline=args.offline)
        return pipeline.preprocess(cfg, ds)
    if args.stage == "dataset-stats":
        return _dataset_stats(cfg, ds)
    if args.stage == "het-cache":
        return _het_cache(cfg, ds)
    if args.stage in ("het-train", "het-time", "esd"):
        return _het_experiment(cfg, args.stage)
    if args.stage in ("dedup", "recd"):
        return _recd(cfg, ds, args.stage)
    if args.stage == "notebook":
        return _notebook(cfg, args.name, args.params)
    from workbench import report

    report.main(([f"--params={args.params}"] if args.params else []) + list(args.overrides))
    return cfg.paths.resolve("reports") / "README.md"


def main(argv: list[str] | None = None) -> None:
    """Entry point: known failures print one clear line and exit non-zero (no traceback)."""
    from workbench.data.partition import NoSessionsError
    from workbench.data.pipeline import DatasetUnavailable

    try:
        out = run(argv)
    except (ConfigError, DatasetUnavailable, FileNotFoundError, NoSessionsError) as err:
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
