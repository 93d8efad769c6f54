"""Configuration root: Hydra ``workbench/conf/`` -> validated, typed dataclasses -> code.

Config flows one way:

    workbench/conf/*.yaml --(Hydra compose + overrides)--> DictConfig
        DictConfig --(validate)--> WorkbenchConfig
        DictConfig --(python -m workbench.config dump)--> params.yaml (what DVC tracks)

* ``workbench/conf/`` is the only hand-edited configuration. ``params.yaml`` is generated from
  it (``make params``; ``dvc exp run`` does the same composition) and committed, because
  ``dvc repro`` reads only ``params.yaml``; a test asserts the two agree.
* Pipeline stages read ``params.yaml`` (``--params params.yaml``), so ``dvc exp run -S key=value``
  works. Interactive use composes ``workbench/conf/`` with Hydra overrides on the command line:

      python -m workbench.stages prepare dataset=criteo_kaggle dataset.max_rows=100000

* Each layer declares its own schema next to its code (``workbench/data/config.py``,
  ``cluster/config.py``, ``dispatch/config.py``, ``models/config.py``,
  ``experiments/config.py``); this module composes them into [`WorkbenchConfig`][], adds the
  run-wide parts (profile, paths, pipeline) and the cross-references between them, and loads it.
  The one converter they share is [`workbench.utils.validation`][].
* Every value is checked before any work starts. A bad value stops with
  ``ConfigError: dataset.synthetic.rows = -5: must be an integer >= 1`` — the key, the value and
  what is allowed.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from omegaconf import DictConfig, ListConfig, OmegaConf

from workbench.cluster.config import CacheConfig, ClusterConfig, HardwareConfig
from workbench.data.config import DatasetConfig
from workbench.dispatch.config import DispatchConfig
from workbench.experiments.config import ExperimentsConfig
from workbench.models.config import ModelConfig
from workbench.sharding.config import TopologyConfig
from workbench.utils.errors import one_line
from workbench.utils.fanout import FanoutConfig
from workbench.utils.paths import (
    CONF_DIR,
    PARAMS_FILE,
    REPO_ROOT,
    cli_path,
    known_notebooks,
    resolve,
)
from workbench.utils.signals import wraps_interrupt
from workbench.utils.validation import (
    ConfigError,
    from_dict,
    in_range,
    nonempty,
    unknown_key,
)


@dataclass(frozen=True)
class ProfileConfig:
    """Run size: which profile composed the config (``workbench/conf/profile/``).

    A profile is a global override: every size lives in its own stage's, dataset's or model's
    config, and ``profile=ci`` overrides exactly those keys (``workbench/conf/profile/ci.yaml``).

    Attributes:
        name: ``default`` (the full embedded reproduction) or ``ci`` (every stage in seconds).
        progress: show tqdm progress bars.
    """

    name: str = "default"
    progress: bool = True


@dataclass(frozen=True)
class PathsConfig:
    """Where stages read and write (relative paths are relative to the repository root).

    Attributes:
        data: downloads, raw and processed datasets, partitions.
        results: the experiments' outputs.
        reports: figures, tables, executed notebooks, the report.
        mirrors: folders holding already-downloaded files by name, looked in before any URL
            (``WORKBENCH_MIRRORS`` adds a user's own; [`workbench.data.download.fetch`][]).
    """

    data: str = "data"
    results: str = "results"
    reports: str = "reports"
    mirrors: list[str] = field(default_factory=lambda: ["../shared/data"])

    def __post_init__(self) -> None:
        root = REPO_ROOT.resolve()
        for key in ("data", "results", "reports"):
            value = getattr(self, key)
            if not str(value).strip():
                raise ConfigError(f"paths.{key} = {value!r}: give a folder, e.g. "
                                  f"paths.{key}={key} (relative to the project root)")
            real = resolve(value).resolve()
            if real == root or real in root.parents:
                raise ConfigError(f"paths.{key} = {value!r} is the project's root or above it: "
                                  f"stages would write and replace folders there; give a "
                                  f"folder of its own, e.g. paths.{key}={key}")
        for i, value in enumerate(self.mirrors):
            if not str(value).strip():
                raise ConfigError(f"paths.mirrors[{i}] = {value!r}: give a folder, or leave it "
                                  "out (paths.mirrors=[])")

    def resolve(self, key: str) -> Path:
        """Absolute path of ``data``, ``results`` or ``reports``."""
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
    fanout: FanoutConfig = field(default_factory=FanoutConfig)

    def __post_init__(self) -> None:
        for name in self.pipeline.datasets:
            if name not in self.datasets:
                raise ConfigError(f"pipeline.datasets names '{name}', which is not a key of "
                                  f"datasets (known: {sorted(self.datasets)})")
        for owner, names, known in (
                ("experiments.het_cache.datasets", self.experiments.het_cache.datasets,
                 self.pipeline.datasets),
                ("experiments.recd.datasets", self.experiments.recd.datasets,
                 self.pipeline.datasets),
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
        # an installed package outside a checkout has no notebooks/: nothing to check against
        for name in self.pipeline.notebooks if known else []:
            if name not in known:
                raise ConfigError(f"pipeline.notebooks names '{name}', which is not a notebook "
                                  f"in notebooks/ (known: {known})")
        for key, ds in self.datasets.items():
            if ds.name != key:
                raise ConfigError(f"datasets.{key}.name = {ds.name!r}: must equal its key {key!r}")
        # every configured dataset (the pipeline's, and those its stages name: synthetic_long,
        # the claims datasets) owns its data/ and results/ folders
        taken = self.datasets.get(self.dataset.name)
        if taken is not None and any(getattr(self.dataset, k) != getattr(taken, k)
                                     for k in ("source", "registry", "path")):
            raise ConfigError(
                f"dataset.name = {self.dataset.name!r} is a dataset of the pipeline "
                f"(datasets.{self.dataset.name}) with another source: its data/ and results/ "
                f"would be replaced; give yours another name, e.g. "
                f"dataset.name=my_{self.dataset.name}")

    def dataset_named(self, name: str | None) -> DatasetConfig:
        """The dataset config ``datasets[name]``, or ``dataset`` when ``name`` is None."""
        if name is None:
            return self.dataset
        if name not in self.datasets:
            raise ConfigError(f"--dataset {name!r} is not configured: choose one of "
                              f"{sorted(self.datasets)} (workbench/conf/config.yaml mounts them "
                              "under datasets) or select one with the override dataset=<name>")
        return self.datasets[name]



def validate(cfg: DictConfig | dict[str, Any]) -> WorkbenchConfig:
    """Resolve interpolations and validate the whole config into [`WorkbenchConfig`][]."""
    if isinstance(cfg, (DictConfig, ListConfig)):
        try:
            data = cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True,
                                                               throw_on_missing=True))
        except Exception as err:  # interpolation errors name the key themselves
            raise ConfigError(f"cannot resolve the config: {err}") from err
    else:
        data = cfg
    return from_dict(WorkbenchConfig, data)


def compose(overrides: list[str] | None = None) -> DictConfig:
    """Compose ``workbench/conf/config.yaml`` with Hydra overrides (the command-line grammar)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException

    GlobalHydra.instance().clear()
    for item in overrides or []:  # Hydra looks a key up as a file name: one that long crashes
        key = str(item).split("=", 1)[0]
        if len(key) > 200:
            raise ConfigError(f"override {key[:40]}... ({len(key):,} characters): no config "
                              "key is that long; overrides are key=value with a dotted key, "
                              "e.g. experiments.esd.workers=4")
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return hydra_compose(config_name="config", overrides=list(overrides or []))
    except HydraException as err:
        if wraps_interrupt(err):  # a Ctrl-C while composing: the interrupt, not a bad override
            raise KeyboardInterrupt from None
        missing = re.search(r"Could not override '([^']+)'", str(err))
        if missing:
            raise override_error(missing[1]) from None
        raise ConfigError(f"bad override or config group: {err}") from err
    finally:
        GlobalHydra.instance().clear()


def override_error(key: str) -> ConfigError:
    """Why ``key=value`` overrides nothing: the first part of ``key`` the schema does not have,
    with the closest key and the allowed ones (never Hydra's "+key", which would add the typo);
    under a mapping of named entries (``datasets``, ``models``, ``hardware``) a new entry is
    added with ``+key=value``."""
    node: Any = WorkbenchConfig
    parts = key.lstrip("+~").split(".")
    for i, part in enumerate(parts):
        prefix = ".".join(parts[:i])
        if dataclasses.is_dataclass(node):
            fields = {f.name: f for f in dataclasses.fields(node)}
            if part not in fields:
                return unknown_key(prefix, part, fields)
            node = typing.get_type_hints(node)[part]
        elif typing.get_origin(node) is dict:
            # a field the entries do not have (models.wdl.lr) is that field's error, not the
            # entry's: the entry may well exist
            entry = typing.get_args(node)[1]
            for j, rest in enumerate(parts[i + 1:], start=i + 1):
                if not dataclasses.is_dataclass(entry):
                    break
                fields = {f.name: f for f in dataclasses.fields(entry)}
                if rest not in fields:
                    return unknown_key(".".join(parts[:j]), rest, fields)
                entry = typing.get_type_hints(entry)[rest]
            return ConfigError(f"{key}: {prefix} has no entry {part!r} (its entries are named "
                               f"by you); to add one, write +{key}=...")
        else:
            break
    return ConfigError(f"{key} cannot be set this way: {'.'.join(parts[:-1]) or key} is a "
                       "value, not a section (python -m workbench.stages <stage> --help lists "
                       "a stage's keys)")


def load(overrides: list[str] | None = None, params: Path | str | None = None) -> WorkbenchConfig:
    """Load and validate the configuration.

    Args:
        overrides: Hydra overrides (``key=value``, ``group=option``, ``+key=value``). With
            ``params`` only ``key=value`` dot-list overrides apply.
        params: a composed ``params.yaml`` to read instead of composing ``workbench/conf/``; a
            relative path is read from the project root (as every path of the project), wherever the
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
        hint = ("run `make params` to generate it from workbench/conf/" if path == PARAMS_FILE
                else "give an existing file (relative paths are read from the repository root "
                f"{REPO_ROOT})")
        raise ConfigError(f"params file {path} not found: {hint}")
    cfg = read_params_file(path)
    lacking = [k for k in ("pipeline", "datasets") if k not in cfg]
    if lacking:  # else the first check to trip names a key the file never meant to set
        raise ConfigError(f"params file {path} has no {' and no '.join(lacking)} section: it is "
                          f"not a whole params file (a composed configuration); {_REGENERATE}, "
                          "and pass changes as key=value overrides")
    bad = [o for o in overrides if "=" not in o]
    if bad:
        raise ConfigError(f"override {bad[0]!r} is not key=value")
    _no_group_choice(cfg, overrides, path)
    try:
        dotlist = OmegaConf.from_dotlist(overrides)
    except Exception as err:  # yaml's and omegaconf's parse errors: one line, not a trace
        raise ConfigError(f"an override of {overrides} is not a valid value "
                          f"({' '.join(str(err).split())[:200]}); write values as YAML, e.g. "
                          "cache.ratio=0.1 or 'experiments.esd.dispatchers=[random]'") from None
    return validate(cast(DictConfig, OmegaConf.merge(cfg, dotlist)))


def _no_group_choice(cfg: DictConfig, overrides: list[str], path: Path) -> None:
    """Refuse ``key=value`` where ``key`` is a section of the params file and ``value`` is not a
    mapping: on a composed file a config group's choice (``dataset=local``) has nothing to
    select, and OmegaConf would drop it silently when a later ``dataset.x=...`` sets the same
    section."""
    for override in overrides:
        key, _, value = override.partition("=")
        node = OmegaConf.select(cfg, key.lstrip("+~"), default=None)
        if not isinstance(node, DictConfig) or value.strip().startswith("{"):
            continue
        if (CONF_DIR / key).is_dir():
            raise ConfigError(f"{override}: a config group's choice, which a composed params "
                              f"file ({path.name}) cannot apply; leave --params out (the stage "
                              f"composes workbench/conf/ with {override}, add profile=ci for "
                              "the ci sizes)" + (", or --dataset NAME for a dataset of the "
                                                  "file's datasets" if key == "dataset" else ""))
        raise ConfigError(f"{override}: {key} is a section of {path.name}, not a value; set "
                          f"its keys ({key}.<name>=...)")


#: The deepest nesting a params file may have (``params.yaml`` has 6 levels).
MAX_PARAMS_DEPTH = 64
#: The largest params file read (``params.yaml`` is about 30 KB).
MAX_PARAMS_BYTES = 16 << 20
_REGENERATE = "regenerate it with `make params` (or `python -m workbench.config dump -o FILE`)"


def _create(path: Path, text: str) -> Any:
    """OmegaConf's reading of ``text``; what YAML allows and a config cannot hold (a number or
    a mapping as a key, a ``!!set``, an integer of thousands of digits) is one line."""
    import yaml

    try:
        cfg = OmegaConf.create(text)
        _names_only(OmegaConf.to_container(cfg, resolve=False), "")
        return cfg
    except yaml.YAMLError:
        raise
    except Exception as err:  # noqa: BLE001 - OmegaConf's and Python's own, on any value
        first = " ".join(str(err).split())[:160] or type(err).__name__
        raise ConfigError(f"params file {path}: YAML a config cannot hold (keys are names, values "
                          f"plain numbers, strings, lists and mappings): {first}; "
                          f"{_REGENERATE}") from None


def _names_only(node: Any, where: str) -> None:
    """Raise ``TypeError`` at the first mapping key that is not a name (a number, a bool)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if not isinstance(key, str):
                raise TypeError(f"the key {key!r} under {where or 'the top level'} is a "
                                f"{type(key).__name__}, not a name")
            _names_only(value, f"{where}.{key}" if where else key)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _names_only(value, f"{where}[{i}]")


def read_params_file(path: Path) -> DictConfig:
    """Read a params file, refusing in one line what could hang or crash the YAML reader.

    A params file is what ``make params`` writes: UTF-8 YAML mappings and lists. Refused before
    it is parsed: a file too big, binary bytes, text that is not UTF-8 (a UTF-16 file), an empty
    file, anchors and aliases (``&a`` / ``*a``: a 1 KB "billion laughs" file expands to
    gigabytes), nesting deeper than [`MAX_PARAMS_DEPTH`][]; then any YAML error (a tab in the
    indentation, a duplicate key, a ``!!python`` tag) is one line with its line number, and so
    is a top level that is not a mapping.

    Raises:
        ConfigError: the file, the line and what is wrong, and how to regenerate it.
    """
    import yaml

    if path.stat().st_size > MAX_PARAMS_BYTES:
        raise ConfigError(f"params file {path}: {path.stat().st_size:,} bytes, larger than a "
                          f"params file can be ({MAX_PARAMS_BYTES:,}); {_REGENERATE}")
    raw = path.read_bytes()
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ConfigError(f"params file {path}: UTF-16 text; save it as UTF-8, or {_REGENERATE}")
    if b"\x00" in raw:
        raise ConfigError(f"params file {path}: binary bytes, not YAML text; {_REGENERATE}")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ConfigError(f"params file {path}: not UTF-8 text (byte {err.start:,}; UTF-16?); "
                          f"save it as UTF-8, or {_REGENERATE}") from None
    if not text.strip():
        raise ConfigError(f"params file {path} is empty: {_REGENERATE}")

    def where(mark: Any) -> str:
        return f"{path}:{mark.line + 1}" if mark is not None else str(path)

    depth, top = 0, None
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if top is None and isinstance(event, yaml.NodeEvent):
                top = event
                if not isinstance(event, yaml.MappingStartEvent):  # never echo what it holds
                    kind = ("a list" if isinstance(event, yaml.SequenceStartEvent) else
                            "null" if isinstance(event, yaml.ScalarEvent)
                            and event.value in ("", "~", "null", "Null", "NULL")
                            else "a single text value")
                    raise ConfigError(f"params file {path}: the top level must be a mapping "
                                      f"(key: value), not {kind}; is it a params file? "
                                      f"{_REGENERATE}")
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise ConfigError(f"params file {where(event.start_mark)}: anchors and aliases "
                                  f"(&name / *name) are not read in a params file; write the "
                                  f"values out, or {_REGENERATE}")
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_PARAMS_DEPTH:
                    raise ConfigError(f"params file {where(event.start_mark)}: nested deeper "
                                      f"than {MAX_PARAMS_DEPTH} levels; {_REGENERATE}")
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
        cfg = _create(path, text)
    except yaml.MarkedYAMLError as err:
        what = " ".join(str(err.problem or err.context or "not valid YAML").split())
        raise ConfigError(f"params file {where(err.problem_mark)}: {what}; fix that line, or "
                          f"{_REGENERATE}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"params file {path}: not valid YAML ({' '.join(str(err).split())}); "
                          f"{_REGENERATE}") from None
    if not isinstance(cfg, DictConfig):
        raise ConfigError(f"params file {path}: the top level must be a mapping (key: value), "
                          f"not a list; {_REGENERATE}")
    return cfg


def to_yaml(cfg: DictConfig) -> str:
    """The resolved YAML text of a composed config (what ``params.yaml`` holds)."""
    return OmegaConf.to_yaml(OmegaConf.create(OmegaConf.to_container(cfg, resolve=True)),
                             sort_keys=False)


def stage_arguments(description: str, argv: list[str] | None = None) -> tuple[WorkbenchConfig,
                                                                               argparse.Namespace]:
    """Common command line of every stage entry point.

    ``--params FILE`` reads a composed params file (what DVC stages do); otherwise
    ``workbench/conf/`` is composed. Remaining arguments are Hydra overrides. ``--dataset NAME``
    picks ``datasets.NAME`` (the pipeline's per-dataset stages); without it ``dataset`` is used.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--params", type=cli_path, default=None,
                        help="read this composed params file instead of composing workbench/conf/")
    parser.add_argument("--dataset", default=None, help="use datasets.<NAME> from the config")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. dataset=criteo_kaggle")
    args = parser.parse_args(argv)
    try:
        cfg = load(args.overrides, args.params)
        cfg.dataset_named(args.dataset)
    except ConfigError as err:
        parser.exit(2, one_line(err) + "\n")
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
        parser.exit(2, one_line(err) + "\n")
    text = ("# GENERATED from workbench/conf/ by `python -m workbench.config dump` (make params).\n"
            "# Do not edit: change workbench/conf/ instead. dvc repro reads this file.\n"
            + to_yaml(composed))
    if args.command == "dump" and args.out is not None:
        if not args.out.exists() or args.out.read_text() != text:
            write_text(args.out, text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
