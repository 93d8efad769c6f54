"""Configuration root: Hydra ``conf/`` -> validated, typed dataclasses -> code.

Config flows one way::

    conf/*.yaml --(Hydra compose + overrides)--> DictConfig --(validate)--> WorkbenchConfig
                 \\--(python -m workbench.config dump)--> params.yaml (what DVC tracks)

* ``conf/`` is the only hand-edited configuration. ``params.yaml`` is generated from it (``make
  params``; ``dvc exp run`` does the same composition) and committed, because ``dvc repro`` reads
  only ``params.yaml``; a test asserts the two agree.
* Pipeline stages read ``params.yaml`` (``--params params.yaml``), so ``dvc exp run -S key=value``
  works. Interactive use composes ``conf/`` with Hydra overrides on the command line::

      python -m workbench.stages prepare dataset=criteo_kaggle dataset.max_rows=100000

* Each layer declares its own schema next to its code (``workbench/data/config.py``,
  ``cluster/config.py``, ``dispatch/config.py``, ``models/config.py``,
  ``experiments/config.py``); this module composes them into :class:`WorkbenchConfig`, adds the
  run-wide parts (profile, paths, pipeline) and the cross-references between them, and loads it.
  The one converter they share is :mod:`workbench.utils.validation`.
* Every value is checked before any work starts. A bad value stops with
  ``ConfigError: dataset.synthetic.rows = -5: must be an integer >= 1`` — the key, the value and
  what is allowed.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from omegaconf import DictConfig, ListConfig, OmegaConf

from workbench.cluster.config import CacheConfig, ClusterConfig, HardwareConfig
from workbench.data.config import DatasetConfig
from workbench.dispatch.config import DispatchConfig
from workbench.experiments.config import ExperimentsConfig
from workbench.models.config import ModelConfig
from workbench.sharding.config import TopologyConfig
from workbench.utils.paths import (CONF_DIR, PARAMS_FILE, REPO_ROOT, cli_path, known_notebooks,
                                    resolve)
from workbench.utils.validation import ConfigError, from_dict, in_range, nonempty


@dataclass(frozen=True)
class ProfileConfig:
    """Run size. ``default`` is the full embedded reproduction; ``ci`` shrinks everything.

    Attributes:
        name: ``default`` or ``ci``.
        synthetic_rows: rows of the synthetic dataset.
        cardinality_scale: scale of Criteo's cardinalities for the synthetic dataset.
        sample_max_rows: rows read from each real sample (null = all).
        het_max_samples: train samples replayed by the HET cache experiments (null = all).
        het_min_steps: iterations the HET cache experiments replay at least.
        het_batch_size: samples per worker per iteration of the HET cache experiments.
        train_epochs: epochs of the training experiments.
        train_eval_every: iterations between two test evaluations.
        train_max_samples: train samples of the training experiments (null = all).
        train_max_test: test samples of the training experiments (null = all).
        het_embedding_dim: embedding width of HET's models (WDL, DeepFM, DCN).
        esd_per_worker: samples per worker per batch of the ESD experiments.
        esd_warmup_max: ESD warm-up cap in batches (steady state usually comes earlier).
        esd_batches: global batches per ESD run.
        combined_max_samples: train samples of each run of the ``combined`` ablation.
        recd_rows: rows of the synthetic sessions dataset of the RecD experiments.
        recd_window: rows per partition (clustering window) of the RecD experiments.
        recd_batches: batches of each RecD training run.
        recd_preprocess_rows: rows of each RecD preprocessing-throughput run.
        het_dim_sweep: embedding widths of HET Fig. 9c (each one is calibrated).
        calibrate_batch_sizes: per-worker batch sizes of the compute calibration.
        calibrate_repeats: timed repeats per calibration point.
        hotline_sweep_steps: timed mini-batches per point of Hotline's speedup sweep.
        flexshard_batch: samples per device per iteration of the FlexShard experiments.
        flexshard_devices: device counts of FlexShard's scaling sweep.
        flexshard_full_scale: cardinality scale of ``synthetic_sessions_full``.
        flexshard_full_rows: rows of ``synthetic_sessions_full``.
        dist_steps: iterations of every ``distributed_check`` run.
        progress: show tqdm progress bars.
    """

    name: str = "default"
    synthetic_rows: int = field(default=400_000, metadata=in_range(10, None))
    cardinality_scale: float = field(default=0.01, metadata=in_range(0.0, 1.0, lo_open=True))
    sample_max_rows: int | None = field(default=None, metadata=in_range(1, None))
    het_max_samples: int | None = field(default=None, metadata=in_range(1, None))
    het_min_steps: int = field(default=200, metadata=in_range(1, None))
    het_batch_size: int = field(default=128, metadata=in_range(1, None))
    train_epochs: int = field(default=1, metadata=in_range(1, None))
    train_eval_every: int = field(default=25, metadata=in_range(1, None))
    train_max_samples: int | None = field(default=None, metadata=in_range(1, None))
    train_max_test: int | None = field(default=None, metadata=in_range(1, None))
    het_embedding_dim: int = field(default=128, metadata=in_range(1, 65_536))
    esd_per_worker: int = field(default=64, metadata=in_range(1, None))
    esd_warmup_max: int = field(default=400, metadata=in_range(0, None))
    esd_batches: int = field(default=40, metadata=in_range(1, None))
    combined_max_samples: int = field(default=131072, metadata=in_range(1, None))
    recd_rows: int = field(default=200_000, metadata=in_range(10, None))
    recd_window: int = field(default=16384, metadata=in_range(1, None))
    recd_batches: int = field(default=40, metadata=in_range(1, None))
    recd_preprocess_rows: int = field(default=65536, metadata=in_range(1, None))
    het_dim_sweep: list[int] = field(default_factory=lambda: [128, 256, 512, 1024, 2048, 4096])
    calibrate_batch_sizes: list[int] = field(default_factory=lambda: [32, 64, 128, 256])
    calibrate_repeats: int = field(default=5, metadata=in_range(1, 1000))
    hotline_sweep_steps: int = field(default=12, metadata=in_range(1, None))
    flexshard_batch: int = field(default=512, metadata=in_range(1, None))
    flexshard_devices: list[int] = field(default_factory=lambda: [8, 16, 32, 64])
    flexshard_full_scale: float = field(default=1.0, metadata=in_range(0.0, 1.0, lo_open=True))
    flexshard_full_rows: int = field(default=100_000, metadata=in_range(10, None))
    dist_steps: int = field(default=30, metadata=in_range(2, 100_000))
    progress: bool = True


@dataclass(frozen=True)
class PathsConfig:
    """Where stages read and write (relative paths are relative to the repository root)."""

    data: str = "data"
    results: str = "results"
    reports: str = "reports"
    shared_data: str = "../shared/data"

    def resolve(self, key: str) -> Path:
        """Absolute path of ``data``, ``results``, ``reports`` or ``shared_data``."""
        return resolve(getattr(self, key))


@dataclass(frozen=True)
class PipelineConfig:
    """What ``dvc repro`` runs.

    Attributes:
        datasets: the datasets (keys of ``datasets``) every per-dataset stage runs on.
        notebooks: the figure notebooks (``notebooks/<name>.py``) executed by papermill.
    """

    datasets: list[str] = field(default_factory=lambda: ["synthetic"], metadata=nonempty())
    notebooks: list[str] = field(default_factory=lambda: ["datasets"], metadata=nonempty())


@dataclass(frozen=True)
class WorkbenchConfig:
    """The whole validated configuration."""

    seed: int = field(default=0, metadata=in_range(0, 2**32 - 1))
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    profile: ProfileConfig = field(default_factory=ProfileConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    datasets: dict[str, DatasetConfig] = field(default_factory=dict)
    model: ModelConfig = field(default_factory=ModelConfig)
    models: dict[str, ModelConfig] = field(default_factory=dict)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    hardware: dict[str, HardwareConfig] = field(default_factory=dict)
    topology: TopologyConfig = field(default_factory=TopologyConfig)
    cache: CacheConfig = field(default_factory=CacheConfig)
    dispatch: DispatchConfig = field(default_factory=DispatchConfig)
    experiments: ExperimentsConfig = field(default_factory=ExperimentsConfig)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)

    def __post_init__(self) -> None:
        for name in self.pipeline.datasets:
            if name not in self.datasets:
                raise ConfigError(f"pipeline.datasets names '{name}', which is not a key of "
                                  f"datasets (known: {sorted(self.datasets)})")
        for name in self.experiments.het_cache.datasets:
            if name not in self.pipeline.datasets:
                raise ConfigError(f"experiments.het_cache.datasets names '{name}', which is not "
                                  f"in pipeline.datasets {self.pipeline.datasets}")
        for owner, names, known in (
                ("experiments.het_train.dataset", [self.experiments.het_train.dataset],
                 self.pipeline.datasets),
                ("experiments.het_time.dataset", [self.experiments.het_time.dataset],
                 self.pipeline.datasets),
                ("experiments.het_train.model", [self.experiments.het_train.model],
                 list(self.models)),
                ("experiments.het_time.models", self.experiments.het_time.models,
                 list(self.models)),
                ("experiments.esd.dataset", [self.experiments.esd.dataset],
                 self.pipeline.datasets),
                ("experiments.esd.train_model", [self.experiments.esd.train_model],
                 list(self.models)),
                ("experiments.hotline.dataset", [self.experiments.hotline.dataset],
                 self.pipeline.datasets),
                ("experiments.hotline.popularity_datasets",
                 self.experiments.hotline.popularity_datasets, self.pipeline.datasets),
                ("experiments.hotline.model", [self.experiments.hotline.model],
                 list(self.models)),
                ("experiments.hotline.hardware", self.experiments.hotline.hardware,
                 list(self.hardware)),
                ("experiments.flexshard.datasets", self.experiments.flexshard.datasets,
                 self.pipeline.datasets),
                ("experiments.combined.dataset", [self.experiments.combined.dataset],
                 self.pipeline.datasets),
                ("experiments.combined.model", [self.experiments.combined.model],
                 list(self.models))):
            for name in names:
                if name not in known:
                    raise ConfigError(f"{owner} names '{name}', which is not one of {known}")
        g = self.topology.devices_per_node
        for n in self.experiments.flexshard.device_sweep:
            if n % g:
                raise ConfigError(f"experiments.flexshard.device_sweep has {n}: every value must "
                                  f"be a multiple of topology.devices_per_node = {g}")
        for name in self.experiments.recd.datasets:
            if name not in self.pipeline.datasets:
                raise ConfigError(f"experiments.recd.datasets names '{name}', which is not "
                                  f"in pipeline.datasets {self.pipeline.datasets}")
        for key, model in self.models.items():
            if model.name != key:
                raise ConfigError(f"models.{key}.name = {model.name!r}: must equal its key")
        for key, model in [("model", self.model),
                           *((f"models.{k}", m) for k, m in self.models.items())]:
            if model.batch_size % self.cluster.workers:
                raise ConfigError(f"{key}.batch_size = {model.batch_size}: must be a multiple of "
                                  f"cluster.workers = {self.cluster.workers} (every worker takes "
                                  "an equal share of a global batch)")
        known = known_notebooks()
        for name in self.pipeline.notebooks:
            if name not in known:
                raise ConfigError(f"pipeline.notebooks names '{name}', which is not a notebook "
                                  f"in notebooks/ (known: {known})")
        for key, ds in self.datasets.items():
            if ds.name != key:
                raise ConfigError(f"datasets.{key}.name = {ds.name!r}: must equal its key {key!r}")

    def dataset_named(self, name: str | None) -> DatasetConfig:
        """The dataset config ``datasets[name]``, or ``dataset`` when ``name`` is None."""
        if name is None:
            return self.dataset
        if name not in self.datasets:
            raise ConfigError(f"--dataset {name!r} is not configured: choose one of "
                              f"{sorted(self.datasets)} (conf/config.yaml mounts them under "
                              "datasets) or select one with the override dataset=<name>")
        return self.datasets[name]



def validate(cfg: DictConfig | dict[str, Any]) -> WorkbenchConfig:
    """Resolve interpolations and validate the whole config into :class:`WorkbenchConfig`."""
    if isinstance(cfg, (DictConfig, ListConfig)):
        try:
            data = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
        except Exception as err:  # interpolation errors name the key themselves
            raise ConfigError(f"cannot resolve the config: {err}") from err
    else:
        data = cfg
    return from_dict(WorkbenchConfig, data)


def compose(overrides: list[str] | None = None) -> DictConfig:
    """Compose ``conf/config.yaml`` with Hydra overrides (the command-line grammar)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return hydra_compose(config_name="config", overrides=list(overrides or []))
    except HydraException as err:
        raise ConfigError(f"bad override or config group: {err}") from err
    finally:
        GlobalHydra.instance().clear()


def load(overrides: list[str] | None = None, params: Path | str | None = None) -> WorkbenchConfig:
    """Load and validate the configuration.

    Args:
        overrides: Hydra overrides (``key=value``, ``group=option``, ``+key=value``). With
            ``params`` only ``key=value`` dot-list overrides apply.
        params: a composed ``params.yaml`` to read instead of composing ``conf/``; a relative
            path is read from the repository root (as every path of the project), wherever the
            process or notebook kernel was started.

    Raises:
        ConfigError: the params file is missing (the message names the path tried) or a value
            is invalid.
    """
    overrides = list(overrides or [])
    if params is None:
        return validate(compose(overrides))
    path = resolve(params)
    if not path.is_file():
        hint = ("run `make params` to generate it from conf/" if path == PARAMS_FILE
                else "give an existing file (relative paths are read from the repository root "
                f"{REPO_ROOT})")
        raise ConfigError(f"params file {path} not found: {hint}")
    cfg = OmegaConf.load(path)
    bad = [o for o in overrides if "=" not in o]
    if bad:
        raise ConfigError(f"override {bad[0]!r} is not key=value")
    cfg = OmegaConf.merge(cfg, OmegaConf.from_dotlist(overrides))
    return validate(cfg)


def to_yaml(cfg: DictConfig) -> str:
    """The resolved YAML text of a composed config (what ``params.yaml`` holds)."""
    return OmegaConf.to_yaml(OmegaConf.create(OmegaConf.to_container(cfg, resolve=True)),
                             sort_keys=False)


def stage_arguments(description: str, argv: list[str] | None = None) -> tuple[WorkbenchConfig,
                                                                               argparse.Namespace]:
    """Common command line of every stage entry point.

    ``--params FILE`` reads a composed params file (what DVC stages do); otherwise ``conf/`` is
    composed. Remaining arguments are Hydra overrides. ``--dataset NAME`` picks
    ``datasets.NAME`` (the pipeline's per-dataset stages); without it ``dataset`` is used.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--params", type=cli_path, default=None,
                        help="read this composed params file instead of composing conf/")
    parser.add_argument("--dataset", default=None, help="use datasets.<NAME> from the config")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. dataset=criteo_kaggle")
    args = parser.parse_args(argv)
    try:
        cfg = load(args.overrides, args.params)
        cfg.dataset_named(args.dataset)
    except ConfigError as err:
        parser.exit(2, f"ConfigError: {err}\n")
    return cfg, args


def main(argv: list[str] | None = None) -> None:
    """``python -m workbench.config dump [overrides] [-o params.yaml]``: write the composed config.

    ``check`` validates and prints the resolved config.
    """
    from workbench.utils.io import write_text

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("command", choices=["dump", "check"])
    parser.add_argument("overrides", nargs="*")
    parser.add_argument("-o", "--out", type=Path, default=None)
    args = parser.parse_intermixed_args(argv)
    try:
        composed = compose(args.overrides)
        validate(composed)
    except ConfigError as err:
        parser.exit(2, f"ConfigError: {err}\n")
    text = ("# GENERATED from conf/ by `python -m workbench.config dump` (make params).\n"
            "# Do not edit: change conf/ instead. dvc repro reads this file.\n" + to_yaml(composed))
    if args.command == "dump" and args.out is not None:
        if not args.out.exists() or args.out.read_text() != text:
            write_text(args.out, text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
