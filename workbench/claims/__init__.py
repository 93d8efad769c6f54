"""Layer 8, claims: every register entry's measurement, computed from ``results/`` in code.

The register (``workbench/conf/claims.yaml``, [`workbench.claims.register`][]) names, per
entry, the function that measures it (``measure: het.fig2_share``: the function ``fig2_share``
of [`workbench.claims.het`][]); [`measure`][] calls it on the pipeline's outputs and returns
a [`Measurement`][workbench.claims.measurement.Measurement] (value, interval payload, the sweep of
every assumed parameter), which the report judges. The notebooks show the same measurements beside
their figures (``section.record(claims.measure(entry, cfg))``); ``make check`` and the ``report``
stage call them without running a notebook:

    results/ --claims.measure(entry, cfg)--> Measurement --register.judge--> Verdict
                                                         \\-> section.record (notebook row)

Everything about a claim lives here; ``report`` only renders what the record holds. Imports
``config``, ``training`` and lower; never ``report``.

* ``register``: the register's loader and schema (``conf/claims.yaml``): one entry per claim,
  its measure, its rule, the figures that show it (``shown_in``), the paper's numbers
* ``verdict``: the rules that grade a claim in direction and magnitude
* ``record``: a claim's row (``Claim``), judged once with every sweep point, and the gathering
  of every section's rows into one row per register entry (``collect``)
* ``check``: every claim measured again against the committed table (``make check``), or from
  anyone's results folder (``workbench check --results DIR``)
* ``counting``: claims read from one measurement, counted once
* ``measurement``: [`Measurement`][], the [`Results`][] reader, [`Estimate`][]
* ``het``: HET: Fig. 2, 3, 7a/b, 8, 9a; Tables 1, 2
* ``esd``: ESD: transmission cost, end-to-end speedup
* ``recd``: RecD: training, preprocessing, storage
* ``hotline``: Hotline: v2 speedup, v1 against the hybrid (modelled)
* ``flexshard``: FlexShard: inter-node traffic, all-to-all latency
* ``metrics_view``: the report's claims metrics as short tables, and their diff against a git
  revision (``make metrics``)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable

from workbench.claims.measurement import EntryLike, Estimate, Measurement, Results
from workbench.config import WorkbenchConfig
from workbench.utils.errors import WorkbenchError

__all__ = ["MODULES", "Estimate", "Measurement", "MeasureError", "Results", "measure",
           "measure_all", "resolve"]

MODULES = ("het", "esd", "recd", "hotline", "flexshard")

Measure = Callable[[Results, EntryLike], Measurement]


class MeasureError(WorkbenchError, LookupError):
    """A register entry names a measure that does not exist."""


def resolve(name: str) -> Measure:
    """The measure function a register entry names (``"het.fig2_share"``).

    Raises:
        MeasureError: the module is not one of [`MODULES`][] or has no such function.
    """
    module, _, function = name.partition(".")
    if module not in MODULES or not function:
        raise MeasureError(f"measure {name!r}: expected <module>.<function> with module one of "
                           f"{', '.join(MODULES)} (workbench/claims/)")
    found = getattr(importlib.import_module(f"workbench.claims.{module}"), function, None)
    if not callable(found):
        raise MeasureError(f"measure {name!r}: workbench/claims/{module}.py has no function "
                           f"{function!r}")
    return found


def measure(entry: EntryLike, cfg: WorkbenchConfig | Results) -> Measurement:
    """Measure one register entry from the outputs ``cfg`` locates.

    Args:
        entry: the register entry (its ``measure`` names the function).
        cfg: the composed configuration, or a [`Results`][] already reading it (several
            measures then share the files they read).

    Raises:
        MeasureError: the entry names no measure (a ``not_comparable`` entry needs none).
        FileNotFoundError: a stage output the measure reads is missing.
    """
    name = getattr(entry, "measure", "")
    if not name:
        raise MeasureError(f"claim {entry.key!r} names no measure (its rule needs none)")
    res = cfg if isinstance(cfg, Results) else Results(cfg)
    return resolve(name)(res, entry)


def measure_all(entries: Iterable[EntryLike], cfg: WorkbenchConfig) -> dict[str, Measurement]:
    """Every entry that names a measure, measured (register order), sharing one reader."""
    res = Results(cfg)
    return {e.key: measure(e, res) for e in entries if getattr(e, "measure", "")}
