"""Fitting an experiment's batches and sweeps to the data it is given.

A user's own file may hold a few hundred rows, fewer than one global batch of the default setting.
Every experiment checks, before any work, that its base setting fits the data: if it does not,
it stops with one line naming the knob and a value that works ([`DatasetTooSmall`][], a
[`ConfigError`][workbench.utils.validation.ConfigError], so the stage exits 2 without a traceback).
Sweep points that do not fit (more workers than the data can feed one batch each) are dropped,
logged, and listed in the experiment's ``summary.json`` under ``skipped``, so a figure with fewer
points says why.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from workbench.utils.validation import ConfigError

log = logging.getLogger(__name__)


class DatasetTooSmall(ConfigError):
    """The data holds less than one batch of an experiment's base setting."""


def require_samples(samples: int, need: int, dataset: str, what: str, fix: str) -> None:
    """Stop when ``samples < need``.

    Args:
        samples: train samples the experiment has.
        need: samples one batch of the base setting takes.
        dataset: the dataset's name (for the message).
        what: the batch, in the config's words (``"a global batch of experiments.het_cache.workers
            = 8 x experiments.het_cache.batch_size = 128"``).
        fix: the knob and a value that works (``"set experiments.het_cache.batch_size=33"``).

    Raises:
        DatasetTooSmall: naming all of the above.
    """
    if samples < need:
        raise DatasetTooSmall(f"{dataset} has {samples} train samples, fewer than {what} "
                              f"({need} samples): {fix}")


def require_global_batch(samples: int, workers: int, per_worker: int, dataset: str,
                         workers_key: str, per_worker_key: str) -> None:
    """Stop when ``samples`` hold no global batch of ``workers x per_worker``; the message names
    both keys and the largest ``per_worker`` that fits."""
    require_samples(samples, workers * per_worker, dataset,
                    f"one global batch of {workers_key} = {workers} x {per_worker_key} = "
                    f"{per_worker}", f"set {per_worker_key}={largest_fit(samples, workers)} "
                    f"(or fewer {workers_key})")


def largest_fit(samples: int, per: int, multiple_of: int = 1) -> int:
    """The largest ``b <= samples // per`` that is a multiple of ``multiple_of`` (at least 1)."""
    b = samples // max(per, 1)
    return max(b - b % multiple_of, 1) if b >= multiple_of else 1


def fitting(knob: str, values: Sequence[int], fits: Callable[[int], bool],
            skipped: dict[str, list[int]]) -> list[int]:
    """The sweep points of ``knob`` that fit; the others are logged and added to ``skipped``.

    Args:
        knob: the sweep's config key (``experiments.het_cache.worker_sweep``).
        values: its points.
        fits: whether one point fits the data.
        skipped: ``{knob: dropped points}``, updated in place (goes to ``summary.json``).

    Returns:
        The points that fit, in order.

    Raises:
        DatasetTooSmall: no point fits.
    """
    kept = [v for v in values if fits(v)]
    dropped = [v for v in values if not fits(v)]
    if not kept:
        if not fits(1):
            raise DatasetTooSmall(f"{knob} = {list(values)}: no point fits the data, not even "
                                  f"{knob} = [1] (one batch needs more samples than it holds): "
                                  "use a larger dataset")
        lo, hi = 1, min(values)  # fits(lo), not fits(hi): the largest point that fits
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid)
        raise DatasetTooSmall(f"{knob} = {list(values)}: no point fits the data (each needs more "
                              f"samples than one batch holds); the largest that fits is {lo}: "
                              f"set {knob}=[{lo}] or smaller values")
    if dropped:
        skipped[knob] = dropped
        log.warning("%s: %s skipped, the data holds less than one batch for them", knob, dropped)
    return kept
