r"""The notebooks' exploration sections: one [`Explorer`][workbench.report.explore.Explorer] each.

Each notebook ends with ``explorers.show("<notebook>", cfg, <knob>=<parameter>, ...)``, below its
report and apart from it: the figures above read ``results/``; these rerun a small variant of the
experiment live through [`workbench.api`][], in seconds, whenever a widget moves. A knob given
as None starts at the configuration's value; a papermill parameter (``-p bandwidth_spread 100``)
starts it elsewhere, so a papermill run executes the live variant at that value.

The builders live in ``replays`` (the datasets' skew, HET's cache, RecD, Hotline and
FlexShard: replays and counts) and ``training`` (HET training, ESD, the distributed run, the
mechanisms together: a few iterations of [`workbench.api.train`][]); ``parts`` holds what they
share (each knob's accepted values, the widgets, the sweep grid, the data an explorer needs).

The notebook registry ([`workbench.report.notebook_registry.NOTEBOOKS`][]) names each
explorer's knobs, their ranges and its live run; ``docs/notebooks.md`` shows them as a table
([`explorer_table`][workbench.report.notebook_registry.explorer_table]).

Every builder takes the configuration (``load(params=params_file)``: its paths are the data
read) and the knobs' initial values, and raises `FileNotFoundError` when the data it
needs is not there; [`show`][] turns that into a printed note. Sweeps (the het, hotline and
flexshard curves) run the configured grid plus the chosen value, which the plot marks.

A knob's initial value is checked before any work against
[`KNOBS`][workbench.explorers.parts.KNOBS] (a config key's range, written once in its schema):
``het(cfg, cache_ratio=5)`` stops with one line,
``ArgumentError: explorers.het: cache_ratio = 5.0: must be a number > 0.0 and <= 1.0 (as config
key experiments.het_cache.cache_ratio)``; a notebook checks its parameters (the same knobs) the
same way in its first cell ([`workbench.report.notebook.notebook_config`][]).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from workbench.arguments import ArgumentError
from workbench.config import WorkbenchConfig
from workbench.explorers.parts import KNOBS, TooLittleData, check_knobs
from workbench.explorers.replays import datasets, flexshard, het, hotline, recd
from workbench.explorers.training import combined, distributed, esd, het_train
from workbench.report.explore import Explorer

__all__ = ["BUILDERS", "KNOBS", "TooLittleData", "check_knobs", "notebook_config", "show",
           "datasets", "het", "het_train", "esd", "recd", "hotline", "flexshard", "distributed",
           "combined"]

#: notebook -> its explorer's builder
BUILDERS: dict[str, Callable[..., Explorer]] = {
    "datasets": datasets, "het": het, "het_train": het_train, "esd": esd, "recd": recd,
    "hotline": hotline, "flexshard": flexshard, "distributed": distributed,
    "combined": combined}


def notebook_config(name: str, params_file: str | Path = "params.yaml",
                    dataset: str | None = None, **knobs: Any) -> WorkbenchConfig:
    """A notebook's first cell: its explorer's starting values checked, then its configuration.

    [`workbench.report.notebook.notebook_config`][] with the notebook's other parameters
    (its explorer's starting values; None: the configuration's) checked first, before any
    work, against their ranges.

    Raises:
        NotebookError: a knob is unknown or outside its range (naming the parameter, its value
            and the allowed range), or as [`workbench.report.notebook.notebook_config`][].
    """
    import inspect

    from workbench.report import notebook

    if knobs:
        if name not in BUILDERS:
            raise notebook.NotebookError(f"notebook {name!r} has no explorer, so no parameter "
                                         f"{sorted(knobs)}")
        accepted = [p for p in inspect.signature(BUILDERS[name]).parameters if p != "cfg"]
        unknown = sorted(set(knobs) - set(accepted))
        if unknown:
            raise notebook.NotebookError(
                f"notebook {name!r} has no parameter {unknown[0]!r}: its explorer's parameters "
                f"are {accepted} (and params_file, out_dir, dataset)")
        try:
            check_knobs(name, "", **knobs)
        except ArgumentError as err:
            raise notebook.NotebookError(
                f"notebook {name!r}: parameter {err}; set it in the parameters cell or with "
                "papermill -p, or None for the configuration's value") from None
    return notebook.notebook_config(name, params_file, dataset)


def show(name: str, cfg: WorkbenchConfig, **initial: Any) -> Explorer | None:
    """Build notebook ``name``'s explorer at ``initial`` (None: the config's value) and display
    it (its plot, and under it the values it ran with, updated on every rerun); print a note
    instead when its data is missing.

    Returns:
        The explorer (``explorer.update(knob=value)`` reruns it), or None when skipped.

    Raises:
        ArgumentError: no explorer is named ``name`` (the message lists them), or a knob is
            outside its range.
    """
    from IPython.display import display

    if name not in BUILDERS:
        raise ArgumentError(f"explorers.show: no explorer named {name!r}: the known explorers "
                            f"are {', '.join(BUILDERS)} (one per notebook)")
    try:
        explorer = BUILDERS[name](cfg, **initial)
    except (FileNotFoundError, TooLittleData) as err:
        print(f"Explore section skipped: {err}")
        return None
    display(explorer)  # the line under its plot says what it ran with, updated on every run
    return explorer
