r"""The stage registry: every pipeline stage, named once, with its entry point and its config.


    download --> preprocess --> dataset-stats --> notebook --> report
    (per dataset)           \-> het-cache ------/   (per notebook)
                            \-> dedup --> recd --/
                            \-> hotline-popularity, hotline, flexshard, ...

A [`Stage`][] says what the command line, the tests and ``dvc.yaml`` need to know:

* ``name``: the command-line name (``het-cache``); ``dvc.yaml`` names it ``het_cache``
* ``run``: the entry point: ``run(StageRun) -> Path`` (the adapter below the entry, which hands the
  stage module its own config objects)
* ``config``: its stage config, ``experiments.<config>`` (``workbench/conf/stages/<config>.yaml``)
* ``datasets``: the config key listing the datasets ``dvc.yaml`` runs it on (a matrix stage)
* ``dataset``: the config key naming the one dataset it runs on when none is picked
* ``module``: the module that implements it (``dvc.yaml`` lists it among the stage's deps)
* ``output``: where it writes (``<dataset>`` stands for the dataset's name)
* ``costed``: whether a run records its cost ([`workbench.stages.costs`][]); not the report, which
  reads the records (its own would make it stale after every run)

Adding a stage touches three places: its module (``workbench/experiments/<stage>.py``), its
config (``workbench/conf/stages/<stage>.yaml`` + its schema) and one entry here (with its
adapter). ``python -m workbench.stages --help`` lists the stages from [`STAGES`][];
``tests/test_dvc_pipeline.py`` holds ``dvc.yaml`` to it, and the tests' pipeline fixture runs it
in [`STAGES`][] order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.config import WorkbenchConfig
from workbench.data.config import DatasetConfig, SyntheticConfig
from workbench.experiments.context import RunContext
from workbench.utils.paths import inside, repo_relative
from workbench.utils.validation import ConfigError


@dataclass(frozen=True)
class StageRun:
    """One invocation of a stage: the validated config and what the command line picked.

    Attributes:
        cfg: the validated configuration.
        dataset: the dataset the stage runs on ([`Stage.dataset_of`][]).
        picked: whether the command line picked the dataset (``--dataset`` or ``dataset=``).
        params: the params file the config was read from (None: ``workbench/conf/`` composed).
        name: the notebook name (``notebook`` stage only).
        offline: ``download``: never touch the network.
        overrides: the command line's Hydra overrides (the ``report`` stage recomposes with them).
        progress_bars: show progress bars: ``profile.progress`` and standard error is a terminal
            (a log file, a pipe or ``dvc repro``'s captured output gets log lines only).
    """

    cfg: WorkbenchConfig
    dataset: DatasetConfig
    picked: bool = False
    params: Path | None = None
    name: str | None = None
    offline: bool = False
    overrides: tuple[str, ...] = ()
    progress_bars: bool = False

    @property
    def seed(self) -> int:
        """The run's seed (``seed``)."""
        return self.cfg.seed

    @property
    def progress(self) -> bool:
        """Whether to show progress bars (see ``progress_bars``)."""
        return self.progress_bars

    def processed(self, name: str | None = None) -> Path:
        """``data/processed/<dataset>`` (of ``name``, default: the stage's dataset)."""
        from workbench.data.pipeline import processed_dir

        return processed_dir(self.cfg.paths.resolve("data"), name or self.dataset.name)

    def results(self, stage: str) -> Path:
        """``results/<stage>/<dataset>``."""
        results = self.cfg.paths.resolve("results")
        return inside(results / stage, self.dataset.name, key="dataset.name", guard=results)

    def partitions(self) -> Path:
        """``data/partitions/<dataset>``: written by ``dedup``, read by ``recd``."""
        data = self.cfg.paths.resolve("data")
        return inside(data / "partitions", self.dataset.name, key="dataset.name", guard=data)

    @property
    def calibration(self) -> Path:
        """The clock's calibration a timed stage reads: ``results/calibration`` (the
        pipeline's), or a picked dataset's own ``results/calibrate/<dataset>`` when calibrated
        ([`calibration_dir`][workbench.cluster.calibration.calibration_dir])."""
        from workbench.cluster.calibration import calibration_dir

        return calibration_dir(self.cfg.paths.resolve("results"),
                               self.dataset.name if self.picked else None)

    def context(self, out: Path) -> RunContext:
        """The run-wide inputs of a stage module writing ``out``."""
        return RunContext(self.processed(), out, self.seed, self.calibration, self.progress,
                          self.cfg.fanout)


@dataclass(frozen=True)
class Stage:
    """One pipeline stage (see the module docstring for the fields)."""

    name: str
    run: Callable[[StageRun], Path]
    summary: str
    output: str
    config: str | None = None
    datasets: str | None = None
    dataset: str | None = None
    module: str | None = None
    per_dataset: bool = True
    in_dvc: bool = True
    costed: bool = True

    @property
    def writes_data(self) -> bool:
        """Whether one of its outputs lies under ``data/`` (not committed: a fresh clone reruns
        the stage to make it)."""
        return any(part.strip().startswith("data/") for part in self.output.split(","))

    @property
    def dvc_name(self) -> str:
        """The stage's name in ``dvc.yaml`` (``het-cache`` -> ``het_cache``)."""
        return self.name.replace("-", "_")

    def dataset_of(self, cfg: WorkbenchConfig, picked: str | None, any_picked: bool
                   ) -> DatasetConfig:
        """The dataset this stage runs on.

        ``--dataset NAME`` picks ``datasets.NAME``; a ``dataset=<name>`` override picks the
        ``dataset`` group's selection (a user's ``local`` data included), for every stage alike.
        Without either, a stage with a ``dataset`` key runs on the dataset that key names and
        the others on the ``dataset`` group's default.
        """
        if not any_picked and self.dataset is not None:
            return cfg.dataset_named(config_value(cfg, self.dataset))
        return cfg.dataset_named(picked)


def config_value(cfg: WorkbenchConfig, key: str) -> Any:
    """The value at dotted ``key`` of the validated config (e.g. ``pipeline.datasets``)."""
    value: Any = cfg
    for part in key.split("."):
        value = getattr(value, part)
    return value


# --- adapters: each hands its stage module the stage's own config objects ---------------------

def _download(run: StageRun) -> Path:
    from workbench.data import pipeline
    from workbench.data.download import mirror_folders

    return pipeline.download(run.dataset, run.cfg.paths.resolve("data"), seed=run.seed,
                             progress=run.progress, offline=run.offline,
                             mirrors=mirror_folders(run.cfg.paths.mirrors))


def _preprocess(run: StageRun) -> Path:
    from workbench.data import pipeline

    return pipeline.preprocess(run.dataset, run.cfg.paths.resolve("data"), seed=run.seed,
                               progress=run.progress)


def _prepare(run: StageRun) -> Path:
    _download(run)
    return _preprocess(run)


def _dataset_stats(run: StageRun) -> Path:
    from workbench.experiments import dataset_stats

    out = run.results("dataset_stats")
    dataset_stats.run(run.processed(), out, run.cfg.experiments.dataset_stats)
    return out


def _het_cache(run: StageRun) -> Path:
    from workbench.experiments import het_cache

    out = run.results("het_cache")
    het_cache.run(run.processed(), out, run.cfg.experiments.het_cache, run.seed,
                  progress=run.progress)
    return out


def _calibrate(run: StageRun) -> Path:
    """Calibrate every model the timed stages run, on their datasets, into the pipeline's
    ``results/calibration``; or on the picked dataset, into its own ``results/calibrate/<ds>``
    (the pipeline's entries change only through a plain ``calibrate``: ``make calibrate``)."""
    from workbench.cluster.calibration import own_dir, pipeline_dir
    from workbench.data.schema import DatasetMeta
    from workbench.experiments import calibrate

    exps = run.cfg.experiments
    datasets = {"het_train": exps.het_train.dataset, "het_time": exps.het_time.dataset,
                "esd": exps.esd.dataset, "combined": exps.combined.dataset}
    if run.picked:
        datasets = {k: run.dataset.name for k in datasets}
    shapes_of = {}
    for name in set(datasets.values()):
        meta = DatasetMeta.read(run.processed(name))
        shapes_of[name] = (len(meta.dense), len(meta.categorical))
    shapes, dims = calibrate.required(run.cfg.models, exps, shapes_of, datasets)
    results = run.cfg.paths.resolve("results")
    out = own_dir(results, run.dataset.name) if run.picked else pipeline_dir(results)
    calibrate.run(out, exps.calibrate, shapes=shapes, wire_dims=dims, seed=run.seed,
                  progress=run.progress, keep_earlier=run.picked)
    return out


def _het_train(run: StageRun) -> Path:
    from workbench.experiments import het_train

    cfg, exp = run.cfg, run.cfg.experiments.het_train
    out = run.results("het_train")
    het_train.run(run.context(out), exp, dataset=run.dataset, model=cfg.models[exp.model],
                  cluster=cfg.cluster, cache=cfg.cache, dispatcher=cfg.dispatch.name)
    return out


def _het_long(run: StageRun) -> Path:
    from workbench.experiments import het_long

    cfg, exp = run.cfg, run.cfg.experiments
    out = run.results("het_long")
    het_long.run(run.context(out), exp.het_long, train_exp=exp.het_train, dataset=run.dataset,
                 model=cfg.models[exp.het_train.model], cluster=cfg.cluster, cache=cfg.cache,
                 dispatcher=cfg.dispatch.name)
    return out


def _het_time(run: StageRun) -> Path:
    from workbench.experiments import het_time

    cfg, exp = run.cfg, run.cfg.experiments.het_time
    out = run.results("het_time")
    het_time.run(run.context(out), exp, per_worker=cfg.experiments.het_cache.batch_size,
                 models=cfg.models, base_model=cfg.experiments.het_train.model,
                 cluster=cfg.cluster, cache=cfg.cache, dispatcher=cfg.dispatch.name)
    return out


def _generator_of(run: StageRun, stage: str, what: str, key: str = "dataset"
                  ) -> SyntheticConfig:
    """The generator settings of a stage that draws keys from a synthetic dataset's generator.

    Raises:
        ConfigError: the stage's dataset is not a generated one (names the key).
    """
    if run.dataset.source != "synthetic" or run.dataset.synthetic is None:
        raise ConfigError(f"experiments.{stage}.{key} = {run.dataset.name}: {what} draws keys "
                          "from a synthetic dataset's generator (source: synthetic), not from "
                          f"{run.dataset.source} files")
    return run.dataset.synthetic


def _het_scale(run: StageRun) -> Path:
    from workbench.experiments import het_scale

    cfg, exp = run.cfg, run.cfg.experiments.het_scale
    synthetic = _generator_of(run, "het_scale", "the table-size study")
    out = run.results("het_scale")
    model = cfg.experiments.het_train.model
    het_scale.run(run.context(out), exp, synthetic=synthetic, model_name=model,
                  model=cfg.models[model], per_worker=cfg.experiments.het_cache.batch_size,
                  cluster=cfg.cluster, cache=cfg.cache, dispatcher=cfg.dispatch.name)
    return out


def _het_epoch(run: StageRun) -> Path:
    from workbench.experiments import het_epoch

    cfg, exp = run.cfg, run.cfg.experiments.het_epoch
    synthetic = _generator_of(run, "het_epoch", "the epoch replay")
    out = run.results("het_epoch")
    het_epoch.run(run.context(out), exp, synthetic=synthetic, models=cfg.models,
                  base_model=cfg.experiments.het_train.model,
                  per_worker=cfg.experiments.het_cache.batch_size, cluster=cfg.cluster,
                  cache=cfg.cache, dispatcher=cfg.dispatch.name,
                  keys_dir=cfg.paths.resolve("data") / "keys")
    return out


def _esd(run: StageRun) -> Path:
    from workbench.experiments import esd

    cfg, exp = run.cfg, run.cfg.experiments.esd
    out = run.results("esd")
    esd.run(run.context(out), exp, train=cfg.experiments.het_train, dataset=run.dataset,
            model=cfg.models[exp.train_model], cluster=cfg.cluster)
    return out


def _combined(run: StageRun) -> Path:
    from workbench.experiments import combined

    cfg, exp = run.cfg, run.cfg.experiments.combined
    out = run.results("combined")
    combined.run(run.context(out), exp, esd=cfg.experiments.esd, dataset=run.dataset,
                 model=cfg.models[exp.model], cluster=cfg.cluster)
    return out


def _dedup(run: StageRun) -> Path:
    from workbench.experiments import dedup

    out = run.results("dedup")
    dedup.run(run.processed(), run.partitions(), out, run.cfg.experiments.recd, run.seed,
              progress=run.progress)
    return out


def _recd(run: StageRun) -> Path:
    from workbench.experiments import recd

    out = run.results("recd")
    recd.run(run.partitions(), out, run.cfg.experiments.recd, run.seed, progress=run.progress)
    return out


def _hotline_popularity(run: StageRun) -> Path:
    from workbench.experiments import hotline

    exp = run.cfg.experiments.hotline
    out = run.results("hotline_popularity")
    hotline.popularity(run.processed(), out, exp,
                       dim=run.cfg.models[exp.model].embedding_dim, seed=run.seed)
    return out


def _hotline(run: StageRun) -> Path:
    from workbench.experiments import hotline

    cfg, exp = run.cfg, run.cfg.experiments.hotline
    out = run.results("hotline")
    hotline.run(run.processed(), out, exp, dataset=run.dataset, model=cfg.models[exp.model],
                hardware=cfg.hardware, seed=run.seed, progress=run.progress)
    return out


def _flexshard(run: StageRun) -> Path:
    from workbench.experiments import flexshard

    out = run.results("flexshard")
    flexshard.run(run.processed(), out, run.cfg.experiments.flexshard,
                  topology=run.cfg.topology)
    return out


def _flexshard_stream(run: StageRun) -> Path:
    from workbench.data.synthetic import SyntheticGenerator
    from workbench.experiments import flexshard

    exp = run.cfg.experiments.flexshard
    synthetic = _generator_of(run, "flexshard", "the streamed claims run", "claims_dataset")
    if not synthetic.sequence.enabled:
        raise ConfigError(f"experiments.flexshard.claims_dataset = {run.dataset.name}: its "
                          "generator draws no item history (synthetic.sequence.enabled: false); "
                          "name a session dataset such as synthetic_sessions_full")
    out = run.results("flexshard_stream")
    flexshard.run_stream(SyntheticGenerator(synthetic, run.seed, keys_only=True),
                         run.dataset.name, out, exp, topology=run.cfg.topology,
                         progress=run.progress)
    return out


def _distributed_check(run: StageRun) -> Path:
    from workbench.experiments import distributed_check

    cfg = run.cfg
    name = cfg.experiments.het_train.model
    out = run.results("distributed_check")
    distributed_check.run(run.context(out), cfg.experiments.distributed_check,
                          dataset=run.dataset, model_name=name, model=cfg.models[name],
                          cluster=cfg.cluster, cache=cfg.cache, esd=cfg.experiments.esd)
    return out


def _notebook(run: StageRun) -> Path:
    from workbench.report.notebook import execute

    if not run.name:
        raise ConfigError("the notebook stage needs a notebook name, e.g. "
                          "`python -m workbench.stages notebook datasets`")
    if run.params is None:
        raise ConfigError("the notebook stage reads run outputs through a params file: pass "
                          "--params params.yaml (make params writes it)")
    reports = run.cfg.paths.resolve("reports")
    # repository-relative where possible: the executed notebook records its parameters, and a
    # notebook resolves relative paths against the repository root
    return execute(run.name, reports / "notebooks" / f"{run.name}.ipynb",
                   {"params_file": repo_relative(run.params),
                    "out_dir": repo_relative(reports / run.name)})


def _report(run: StageRun) -> Path:
    from workbench.report import index

    index.main(([f"--params={run.params}"] if run.params else []) + list(run.overrides))
    return run.cfg.paths.resolve("reports") / "README.md"


_EXP = "workbench/experiments"

#: Every stage, in pipeline order (a stage comes after every stage it reads).
STAGES: dict[str, Stage] = {s.name: s for s in (
    Stage("download", _download, "acquire raw files (generate / fetch + verify / check local)",
          "data/raw/<dataset>", datasets="pipeline.datasets", module="workbench/data/download.py"),
    Stage("preprocess", _preprocess, "parse + encode into the columnar schema",
          "data/processed/<dataset>", datasets="pipeline.datasets",
          module="workbench/data/preprocess.py"),
    Stage("prepare", _prepare, "download then preprocess (interactive convenience)",
          "data/processed/<dataset>", in_dvc=False),
    Stage("dataset-stats", _dataset_stats, "statistics and access skew (HET Fig. 3)",
          "results/dataset_stats/<dataset>", config="dataset_stats", datasets="pipeline.datasets",
          module=f"{_EXP}/dataset_stats.py"),
    Stage("het-cache", _het_cache, "HET cache replay: miss rates, rows moved, sweeps",
          "results/het_cache/<dataset>", config="het_cache",
          datasets="experiments.het_cache.datasets", module=f"{_EXP}/het_cache.py"),
    Stage("calibrate", _calibrate,
          "this machine's compute per model and software cost per width (the clock); frozen in "
          "dvc.yaml, rerun explicitly (make calibrate)", "results/calibration",
          config="calibrate", module=f"{_EXP}/calibrate.py", per_dataset=False),
    Stage("het-train", _het_train, "HET training through the cluster (Fig. 6, Tables 1-2)",
          "results/het_train/<dataset>", config="het_train",
          dataset="experiments.het_train.dataset", module=f"{_EXP}/het_train.py"),
    Stage("het-long", _het_long,
          "HET's Tables 1-2 from long training runs (>= 10,000 iterations, seeds); frozen in "
          "dvc.yaml, rerun explicitly (make het-long)", "results/het_long/<dataset>",
          config="het_long", dataset="experiments.het_long.dataset",
          module=f"{_EXP}/het_long.py"),
    Stage("het-time", _het_time, "HET time model (Fig. 2, 7, 9)", "results/het_time/<dataset>",
          config="het_time", dataset="experiments.het_time.dataset",
          module=f"{_EXP}/het_time.py"),
    Stage("het-scale", _het_scale,
          "HET replays against the table size (1% .. 100% of Criteo Kaggle's cardinality)",
          "results/het_scale/<dataset>", config="het_scale",
          dataset="experiments.het_scale.dataset", module=f"{_EXP}/het_scale.py"),
    Stage("het-epoch", _het_epoch,
          "HET's replay claims from one whole Criteo Kaggle epoch at its cardinality (Fig. 2, "
          "7, 9a)", "results/het_epoch/<dataset>", config="het_epoch",
          dataset="experiments.het_epoch.dataset", module=f"{_EXP}/het_epoch.py"),
    Stage("esd", _esd, "ESD dispatchers: cost sweeps, decision time, training",
          "results/esd/<dataset>", config="esd", dataset="experiments.esd.dataset",
          module=f"{_EXP}/esd.py"),
    Stage("combined", _combined,
          "the five mechanisms in one training run, and their ablation (bytes, time, AUC)",
          "results/combined/<dataset>", config="combined", dataset="experiments.combined.dataset",
          module=f"{_EXP}/combined.py"),
    Stage("dedup", _dedup,
          "RecD partitions (shuffled / session-clustered), storage and dedup factors",
          "data/partitions/<dataset>, results/dedup/<dataset>", config="recd",
          datasets="experiments.recd.datasets", module=f"{_EXP}/dedup.py"),
    Stage("recd", _recd, "RecD preprocessing and training throughput, KJT vs IKJT",
          "results/recd/<dataset>", config="recd", datasets="experiments.recd.datasets",
          module=f"{_EXP}/recd.py"),
    Stage("hotline-popularity", _hotline_popularity,
          "Hotline/FAE popular-input fraction against the hot-memory budget",
          "results/hotline_popularity/<dataset>", config="hotline",
          datasets="experiments.hotline.popularity_datasets", module=f"{_EXP}/hotline.py"),
    Stage("hotline", _hotline,
          "Hotline's micro-batch pipeline vs the CPU-GPU hybrid, FAE, accelerator-only: "
          "measured here + the time model of accelerator servers", "results/hotline/<dataset>",
          config="hotline", dataset="experiments.hotline.dataset", module=f"{_EXP}/hotline.py"),
    Stage("flexshard", _flexshard,
          "FlexShard's tiered sharding vs row-wise and the other plans of a sequence table: "
          "traffic, all-to-all time, memory, sweeps", "results/flexshard/<dataset>",
          config="flexshard", datasets="experiments.flexshard.datasets",
          module=f"{_EXP}/flexshard.py"),
    Stage("flexshard-stream", _flexshard_stream,
          "FlexShard's claims: every plan profiled on tens of millions of samples streamed from "
          "the claims dataset's generator (coverage >= 95%), the coverage swept, the replay "
          "held out", "results/flexshard_stream/<dataset>", config="flexshard",
          dataset="experiments.flexshard.claims_dataset", module=f"{_EXP}/flexshard.py"),
    Stage("distributed-check", _distributed_check,
          "the emulator against real processes (torch.distributed, gloo, shaped links): "
          "counters, bytes, parameters, phase times, ESD in wall time",
          "results/distributed_check/<dataset>", config="distributed_check",
          dataset="experiments.het_train.dataset", module=f"{_EXP}/distributed_check.py"),
    Stage("notebook", _notebook, "execute notebooks/NAME.py with papermill", "reports/NAME/",
          module="workbench/report/notebook.py", per_dataset=False),
    Stage("report", _report, "gather every notebook section", "reports/README.md",
          module="workbench/report/index.py", per_dataset=False, costed=False),
)}
