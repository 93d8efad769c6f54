"""The notebooks' side of the pipeline: executing them (papermill), and the config each shows.

Notebooks live in git as ``notebooks/<name>.py`` (``# %%`` cells, one cell tagged
``parameters``). The ``notebook`` stage converts the text notebook in memory, injects the
parameters and executes it; the notebook reads run outputs (metrics files), never recomputes
experiments, and writes its figures and ``section.json`` into ``reports/<name>/``. The executed
``.ipynb`` (which holds per-cell timestamps, so it differs on every run) goes to
``reports/notebooks/`` and nothing depends on it.

Every notebook opens with [`notebook_config`][], so it behaves the same wherever it runs:

    parameters cell: params_file, out_dir, dataset (+ the explorer's knobs)
        |  (papermill -p, or edited in JupyterLab; relative paths from the repository root)
        v
    notebook_config(name, params_file, dataset, **knobs)
        - every knob given (not None) within its range (workbench.explorers.KNOBS: a config
          key's range), or NotebookError naming the parameter, its value and the range
        - load the params file (ConfigError -> NotebookError naming the path tried)
        - dataset given: a plain name, preprocessed under paths.data; mounted as datasets.<name>
          when no config names it; NOTEBOOK_STAGES' keys all set to it
        - every stage the notebook reads has results for its datasets, or NotebookError with
          the command that computes them
        v
    WorkbenchConfig  ->  results/<stage>/<dataset>/  ->  Section(out_dir=None: scratch/<name>)

[`NotebookError`][] shows in a notebook as its one-line message, without a traceback.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.report import lineage
from workbench.report.notebook_registry import NOTEBOOKS
from workbench.utils.errors import MissingInputError, UserError
from workbench.utils.paths import NOTEBOOK_DIR, REPO_ROOT, known_notebooks, repo_relative, resolve

if TYPE_CHECKING:
    from workbench.config import WorkbenchConfig

log = logging.getLogger(__name__)

#: Per notebook: the stages whose results it reads (``results/<stage>/<dataset>/``), each with
#: the config key naming its dataset(s) (:data:`~workbench.report.notebook_registry.NOTEBOOKS`).
#: A notebook's ``dataset`` parameter sets every key.
NOTEBOOK_STAGES: dict[str, tuple[tuple[str, str], ...]] = {
    name: tuple((r.stage, r.key) for r in nb.reads) for name, nb in NOTEBOOKS.items()}
#: The file that says a stage ran, where it is not ``summary.json``.
_SUMMARY = {r.stage: r.summary for nb in NOTEBOOKS.values() for r in nb.reads
            if r.summary != "summary.json"}
#: Keys that follow the notebook's dataset without a stage of their own.
_ALSO = {name: nb.also for name, nb in NOTEBOOKS.items() if nb.also}
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


class NotebookError(UserError):
    """A notebook's input is missing or wrong. In a notebook it shows as its one-line message,
    without a traceback ([`UserError`][workbench.utils.errors.UserError]); papermill reports the
    same
    line."""


def notebook_config(name: str, params_file: str | Path = "params.yaml",
                    dataset: str | None = None) -> WorkbenchConfig:
    """The configuration a notebook shows, with its ``dataset`` parameter applied.

    Args:
        name: the notebook (a key of [`NOTEBOOK_STAGES`][]).
        params_file: the composed config of the run whose outputs are shown (relative: from the
            repository root, wherever the kernel started).
        dataset: None (the pipeline's datasets), or the name of any preprocessed dataset under
            ``paths.data`` (one of the pipeline's, or your own prepared with
            ``dataset=local dataset.name=NAME``): every key of [`NOTEBOOK_STAGES`][] then names
            it, so the notebook reads ``results/<stage>/<dataset>/`` and its live section runs
            on it.

    Raises:
        NotebookError: the params file is missing or invalid, the name is not a plain name,
            the dataset is not preprocessed (the message gives the command that prepares it),
            or the notebook's stages have not run on it (the message gives their commands).
    """
    from workbench.config import load
    from workbench.data.pipeline import is_preprocessed, processed_dir
    from workbench.utils.validation import ConfigError

    params_file = resolve(params_file)  # from the repository root, as load() reads it
    try:
        cfg = load(params=params_file)
    except ConfigError as err:
        raise NotebookError(str(err)) from None
    # what the notebook reads from here on is logged: its figures name it (Section.figure)
    lineage.ReadLog.fresh((cfg.paths.resolve("results"), cfg.paths.resolve("data")))
    if dataset is None:
        _check_results(name, cfg, params_file)
        return cfg
    if not isinstance(dataset, str) or not _PLAIN_NAME.fullmatch(dataset):
        raise NotebookError(f"dataset parameter {dataset!r} is not a dataset name (letters, "
                            "digits, '_', '-', '.'; not a path)")
    data = processed_dir(cfg.paths.resolve("data"), dataset)
    if not is_preprocessed(cfg.paths.resolve("data"), dataset):
        prepare = (f"python -m workbench.stages prepare --params {repo_relative(params_file)} "
                   f"--dataset {dataset}" if dataset in cfg.datasets else
                   f"python -m workbench.stages prepare dataset=local dataset.name={dataset} "
                   "dataset.path=<folder of your files> dataset.format=<format>")
        raise NotebookError(f"dataset {dataset!r} is not preprocessed ({repo_relative(data)} has "
                            f"no train.parquet): prepare it with `{prepare}`")
    mounted = dataset not in cfg.datasets
    overrides = _mount(cfg, dataset, data) if mounted else []
    keys = [key for _, key in NOTEBOOK_STAGES[name]] + list(_ALSO.get(name, ()))
    # added to the pipeline's (every stage's dataset keys must name one of them); a notebook
    # over every pipeline dataset shows its dataset parameter's alone (notebooks/datasets.py)
    names = dict.fromkeys([*cfg.pipeline.datasets, dataset])
    overrides.append(f"pipeline.datasets=[{','.join(names)}]")
    for key in dict.fromkeys(keys):
        if key != "pipeline.datasets":
            many = key.endswith("datasets")
            overrides.append(f"{key}=[{dataset}]" if many else f"{key}={dataset}")
    try:
        cfg = load(overrides, params_file)
    except ConfigError as err:
        raise NotebookError(f"dataset {dataset!r}: {err}") from None
    _check_results(name, cfg, params_file, mounted=dataset if mounted else None, only=dataset)
    return cfg


def _mount(cfg: WorkbenchConfig, dataset: str, data: Path) -> list[str]:
    """Overrides mounting a preprocessed dataset the config does not name as ``datasets.<name>``
    (a ``local`` source whose path is its processed folder; its raw format from the download
    manifest, only read again if someone re-prepares it)."""
    import json

    manifest = cfg.paths.resolve("data") / "raw" / dataset / "manifest.json"
    raw_format = "criteo_tsv"
    if manifest.is_file():
        raw_format = json.loads(manifest.read_text()).get("format") or raw_format
    return [f"datasets.{dataset}.name={dataset}", f"datasets.{dataset}.source=local",
            f"datasets.{dataset}.format={raw_format}",
            f"datasets.{dataset}.path={repo_relative(data)}"]


def _named(cfg: WorkbenchConfig, key: str) -> list[str]:
    """The dataset name(s) under a dotted config key."""
    value: Any = cfg
    for part in key.split("."):
        value = getattr(value, part)
    return [value] if isinstance(value, str) else list(value)


def _check_results(name: str, cfg: WorkbenchConfig, params_file: Path,
                   mounted: str | None = None, only: str | None = None) -> None:
    """Every stage the notebook reads has results for each dataset it names.

    Args:
        mounted: the dataset `_mount` added (no config names it: its stages run with
            ``dataset=local``), if any.
        only: the notebook's dataset parameter: the one dataset it reads (None: every dataset
            its keys name).

    Raises:
        NotebookError: one has not (the message gives the command that computes it).
    """
    for stage, key in NOTEBOOK_STAGES[name]:
        for dataset in [only] if only is not None else _named(cfg, key):
            out = cfg.paths.resolve("results") / stage.replace("-", "_") / dataset
            command = (f"python -m workbench.stages {stage} profile={cfg.profile.name} "
                       f"dataset=local dataset.name={dataset} "
                       "dataset.path=<folder of your files> dataset.format=<format>"
                       if dataset == mounted else f"python -m workbench.stages {stage} --params "
                       f"{repo_relative(params_file)} --dataset {dataset}")
            summary = out / _SUMMARY.get(stage, "summary.json")
            if not summary.is_file():
                raise NotebookError(f"{repo_relative(out)} holds no results: the {stage} stage "
                                    f"has not run on {dataset!r}; run `{command}` (or `dvc "
                                    "repro` for the pipeline's datasets)")
            other = _computed_otherwise(stage, cfg, summary)
            if other is not None:
                raise NotebookError(
                    f"{repo_relative(out)} was computed with another configuration than "
                    f"{repo_relative(params_file)}'s ({other}; another profile?): set "
                    "params_file to the params file of the run that computed it, or rerun "
                    f"`{command}`")


def _computed_otherwise(stage: str, cfg: WorkbenchConfig, summary: Path) -> str | None:
    """How ``stage``'s results (its ``summary``) differ from what ``cfg`` makes the notebook
    look up in them (a model at a width the run did not time), in words; None if they agree."""
    if stage not in ("het-time", "het-train"):
        return None
    import json

    found = json.loads(summary.read_text())
    if stage == "het-time":
        have = found.get("clock", {})
        need = [f"{m}/D{cfg.models[m].embedding_dim}" for m in cfg.experiments.het_time.models]
        missing = [k for k in need if k not in have]
        return (f"it timed {', '.join(sorted(have))}; the params file asks for {missing[0]}"
                if missing else None)
    exp = cfg.experiments.het_train
    dim = cfg.models[exp.model].embedding_dim
    ran = (found.get("model"), found.get("embedding_dim"))
    return (None if ran == (exp.model, dim) else
            f"it trained {ran[0]} at D = {ran[1]}; the params file asks for {exp.model} at "
            f"D = {dim}")


def notebook_path(name: str) -> Path:
    """``notebooks/<name>.py``, with a clear error listing the notebooks when absent."""
    path = NOTEBOOK_DIR / f"{name}.py"
    if not path.exists():
        raise MissingInputError(f"notebook {path} not found (known notebooks: "
                                f"{known_notebooks()})")
    return path


def execute(name: str, executed: Path, parameters: dict[str, Any], cwd: Path = REPO_ROOT,
            timeout: int = 1800) -> Path:
    """Run notebook ``name`` with ``parameters``; write the executed copy to ``executed``.

    Args:
        name: notebook name (``notebooks/<name>.py``).
        executed: path of the executed ``.ipynb``.
        parameters: values injected after the ``parameters`` cell.
        cwd: working directory of the kernel.
        timeout: per-cell timeout in seconds.

    Raises:
        papermill.PapermillExecutionError: a cell failed (the message names the cell and error).
    """
    import jupytext
    import nbformat
    import papermill as pm

    from workbench.utils.io import atomic_path, writing

    nb = jupytext.read(notebook_path(name))
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    os.environ.setdefault("TQDM_DISABLE", "1")
    with writing(executed), atomic_path(executed, suffix=".ipynb") as tmp:
        pm.execute_notebook(nb, str(tmp), parameters=parameters, kernel_name="python3",
                            cwd=str(cwd), progress_bar=False, execution_timeout=timeout)
        # papermill records the input notebook whole and the temporary output's absolute path:
        # name them as the repository does instead (no machine-specific path in the copy)
        done = nbformat.read(tmp, as_version=4)
        done.metadata.papermill["input_path"] = repo_relative(notebook_path(name))
        done.metadata.papermill["output_path"] = repo_relative(executed)
        nbformat.write(done, tmp)
    log.info("executed %s -> %s", name, executed)
    return executed
