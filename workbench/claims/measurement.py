"""What a claim's measure returns, and the results it reads.

A measure is a function ``measure(res, entry) -> Measurement`` (one per register entry that
needs one; the register names it, [`workbench.claims.resolve`][] finds it):

    results/<stage>/<dataset>/...  --Results(cfg)-->  res.json(...), res.csv(...) (read once)
    res, entry  --measure-->  Measurement(key, text, setting, payload, conditions, note)

``payload`` has the shape of the entry's rule (see [`workbench.claims.register`][]):
``values`` per seed (factor, percent, decline), or ``a``, ``b``, ``labels`` (less, close), and
``missing`` (why the value is absent when it is). ``conditions`` maps each assumed parameter to
its sweep's points ``{"value": v, **payload}``. Judging is the report's: a measurement holds no
verdict, so the same numbers can be judged by the notebook's row, the report stage and
``make check`` alike.

[`Estimate`][] is the one statistic a measure shows: a mean over seeds with its two-sided
95% Student-t interval.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd

from workbench.config import WorkbenchConfig
from workbench.utils.errors import MissingInputError

CONFIDENCE = 0.95  # the interval of a mean over seeds
#: The largest results file read (the stages' own are under 1 MiB; results/ is about 5 MB).
MAX_RESULT_BYTES = 64 * 2**20
#: The results folders of the frozen stages (``dvc repro`` never reruns them) and the command
#: that writes each.
FROZEN = {"het_long": "make het-long: the long runs, about an hour on 2 cores, on their own "
                      "dataset (the committed ones are in results/het_long/synthetic_long)",
          "calibration": "make calibrate"}


class EntryLike(Protocol):
    """What a measure reads from its register entry ([`workbench.claims.register.Entry`][])."""

    @property
    def key(self) -> str: ...

    @property
    def ours(self) -> Mapping[str, Any]: ...

    @property
    def paper_table(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class Measurement:
    """One claim measured from ``results/``, not yet judged.

    Attributes:
        key: the register key.
        text: the measured value as shown (e.g. ``"2.73x (95% CI ...)"``).
        setting: the exact setting of the measurement.
        payload: the rule's payload (``values`` or ``a``/``b``/``labels``; ``missing``).
        conditions: each assumed parameter's sweep, ``{name: [{"value": v, **payload}]}``.
        note: caveats.
    """

    key: str
    text: str
    setting: str
    payload: Mapping[str, Any] = field(default_factory=dict)
    conditions: Mapping[str, list[dict[str, Any]]] = field(default_factory=dict)
    note: str = ""


class Results:
    """The pipeline's outputs as a configuration locates them, each file read once.

    Args:
        cfg: the composed configuration (``cfg.paths`` locates ``results/``).
    """

    def __init__(self, cfg: WorkbenchConfig) -> None:
        self.cfg = cfg
        self.root: Path = cfg.paths.resolve("results")
        self._cache: dict[tuple[str, Path], Any] = {}
        self.read: list[Path] = []  # every file read, relative to ``root`` (first read order)

    def path(self, *parts: str) -> Path:
        """``results/<parts...>``."""
        return self.root.joinpath(*parts)

    def _existing(self, parts: tuple[str, ...]) -> Path:
        path = self.path(*parts)
        if not path.is_file():
            how = FROZEN.get(parts[0], f"dvc repro {parts[0]}, or make repro")
            raise MissingInputError(f"{path} not found: the {parts[0]} stage has not run here "
                                    f"({how})")
        size = path.stat().st_size
        if size > MAX_RESULT_BYTES:  # a folder from elsewhere: never read a huge file whole
            raise MissingInputError(f"{path}: {size / 2**20:,.0f} MiB, larger than any file a "
                                    f"stage writes there ({MAX_RESULT_BYTES / 2**20:.0f} MiB at "
                                    "most); is this the stage's results folder?")
        return path

    def json(self, *parts: str) -> Any:
        """The parsed JSON file ``results/<parts...>`` (read once)."""
        path = self._existing(parts)
        key = ("json", path)
        if key not in self._cache:
            self._cache[key] = json.loads(path.read_text())
            self.read.append(path.relative_to(self.root))
        return self._cache[key]

    def csv(self, *parts: str) -> pd.DataFrame:
        """The CSV file ``results/<parts...>`` (read once; a copy each call)."""
        path = self._existing(parts)
        key = ("csv", path)
        if key not in self._cache:
            self._cache[key] = pd.read_csv(path)
            self.read.append(path.relative_to(self.root))
        return self._cache[key].copy()

    def available(self, stage: str, datasets: Sequence[str], summary: str = "summary.json"
                  ) -> tuple[dict[str, dict[str, Any]], list[tuple[str, str]]]:
        """A per-dataset stage's summaries of the datasets it could run on, in order, and
        ``(dataset, reason)`` for each it could not (its summary says ``available: false``)."""
        found, unavailable = {}, []
        for name in datasets:
            info = self.json(stage, name, summary)
            if info.get("available", True):
                found[name] = info
            else:
                unavailable.append((name, str(info.get("reason", ""))))
        return found, unavailable

    def memo(self, name: str, build: Callable[[], Any]) -> Any:
        """A value derived from several files, built once per [`Results`][]."""
        key = ("memo", Path(name))
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]


def series(values: object) -> np.ndarray | None:
    """``values`` as a 1-D float array, or None if empty or any entry is missing."""
    try:
        arr = np.atleast_1d(np.asarray(values, dtype=float)).ravel()
    except (TypeError, ValueError):
        return None
    return arr if arr.size and np.isfinite(arr).all() else None


@dataclass(frozen=True)
class Estimate:
    """A measured value over seeds: the mean and its two-sided 95% interval (Student's t).

    Attributes:
        mean: the mean of the samples.
        lo: the interval's lower end (``mean`` for one sample or identical samples).
        hi: the interval's upper end.
        n: the number of samples (seeds).
    """

    mean: float
    lo: float
    hi: float
    n: int

    @classmethod
    def of(cls, samples: float | Sequence[float] | Estimate | None,
           confidence: float = CONFIDENCE) -> Estimate | None:
        """The estimate of ``samples``; None when any sample is missing (None, NaN, inf).

        ``mean +- t(confidence, n - 1) s / sqrt(n)``; one sample is an interval of width 0.
        """
        if isinstance(samples, Estimate):
            return samples
        arr = series(samples)
        if arr is None:
            return None
        mean = float(arr.mean())
        if arr.size < 2 or float(arr.std()) == 0.0:
            return cls(mean, mean, mean, int(arr.size))
        from scipy import stats
        half = float(stats.t.ppf(0.5 + confidence / 2, arr.size - 1)
                     * arr.std(ddof=1) / math.sqrt(arr.size))
        return cls(mean, mean - half, mean + half, int(arr.size))

    def text(self, fmt: Callable[[float], str]) -> str:
        """``"2.73x (95% CI 2.61x-2.85x, n = 5)"``; ``"2.73x"`` for a single value."""
        if self.n < 2:
            return fmt(self.mean)
        if self.lo == self.hi:
            return f"{fmt(self.mean)} (identical over n = {self.n})"
        return f"{fmt(self.mean)} (95% CI {fmt(self.lo)}-{fmt(self.hi)}, n = {self.n})"


def estimate_text(values: Sequence[float] | None, fmt: Callable[[float], str]) -> str:
    """[`Estimate.text`][] of ``values``, or ``"-"`` when there is none."""
    est = Estimate.of(values) if values is not None and len(values) else None
    return est.text(fmt) if est else "-"
