"""The explorers' parts: each knob's accepted values, the widgets, the sweep grid and mark, and
the data an explorer needs (the preprocessed datasets, the iterations a dataset holds)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from workbench import api
from workbench.arguments import Arg, check
from workbench.config import WorkbenchConfig
from workbench.report.explore import dropdown, log_slider
from workbench.report.notebook_registry import NOTEBOOKS
from workbench.utils.errors import UserError

#: notebook -> its explorer's knobs that take a number or a fixed choice (the notebook's
#: parameters of the same names) -> what each accepts: a config key's type and range, or its
#: own (the notebook registry's, :data:`workbench.report.notebook_registry.NOTEBOOKS`). A knob
#: given as None starts at the configuration's value and is not checked.
KNOBS: dict[str, Mapping[str, Arg]] = {name: nb.knobs for name, nb in NOTEBOOKS.items()}


def check_knobs(name: str, where: str, **values: Any) -> None:
    """Check explorer ``name``'s knob values against [`KNOBS`][] (None: not checked).

    Args:
        name: the notebook.
        where: the messages' prefix (``"explorers.het"``; "" for none).
        values: knob -> value.

    Raises:
        ArgumentError: one line naming the knob, its value and the allowed range.
    """
    specs = KNOBS[name]
    check(where, **{k: (v, specs[k]) for k, v in values.items() if k in specs and v is not None})


class TooLittleData(UserError):
    """A dataset too small for one iteration of an explorer:
    [`show`][workbench.explorers.show] skips the section with this line instead of failing the
    notebook."""


def _fit(name: str, train_samples: int, per_step: int, steps: int) -> tuple[int, str]:
    """The iterations of ``per_step`` samples that ``train_samples`` hold, at most ``steps``,
    and the words saying so when fewer ("" when all ``steps`` fit).

    Raises:
        TooLittleData: not even one iteration fits.
    """
    fit = train_samples // per_step
    if fit < 1:
        raise TooLittleData(f"{name} has {train_samples:,} train samples, fewer than one "
                            f"iteration's {per_step:,} (workers x samples per worker of this "
                            "notebook's configuration): the live section needs a larger "
                            "dataset")
    if fit >= steps:
        return steps, ""
    return fit, f" (all {fit * per_step:,} of {name}'s train samples)"


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def _log(value: float, lo_exp: float, hi_exp: float, label: str, step: float = 0.25):
    """A log slider over ``10 ** [lo_exp, hi_exp]``, widened to hold ``value``."""
    e = math.log10(value)
    return log_slider(value, min(lo_exp, math.floor(e)), max(hi_exp, math.ceil(e)), step, label)


def _choice(value: Any, options: Sequence[Any], label: str):
    """A dropdown over ``options`` and ``value`` (sorted, each once)."""
    return dropdown(value, sorted(set(options) | {value}), label)


def _combination(value: str, presets: Sequence[str], label: str):
    """A text box suggesting ``presets`` that takes any other value too (on Enter)."""
    import ipywidgets as w

    return w.Combobox(value=value, options=list(dict.fromkeys([value, *presets])),
                      ensure_option=False, continuous_update=False, description=label,
                      style={"description_width": "initial"})


def _grid(values: Iterable[float], chosen: float) -> list[float]:
    """The sweep: ``values`` and the chosen value, ascending, each once."""
    return sorted(set(values) | {chosen})


def _mark(ax, x: float, text: str) -> None:
    """A dashed vertical line at the chosen value of a sweep."""
    ax.axvline(x, color="0.3", ls="--", lw=0.8)
    ax.annotate(text, (x, 0.02), xycoords=("data", "axes fraction"), xytext=(3, 0),
                textcoords="offset points")


def _processed(cfg: WorkbenchConfig, names: Sequence[str]) -> list[str]:
    """The datasets among ``names`` that are preprocessed under the config's ``paths.data``."""
    return [n for n in names if api.preprocessed(cfg, n)]


def _first(cfg: WorkbenchConfig, names: Sequence[str]) -> str:
    """The first preprocessed dataset of ``names``.

    Raises:
        FileNotFoundError: none of them is.
    """
    found = _processed(cfg, names)
    if not found:
        raise FileNotFoundError(f"none of {list(names)} is preprocessed under "
                                f"{cfg.paths.resolve('data')} (dvc repro makes them)")
    return found[0]
