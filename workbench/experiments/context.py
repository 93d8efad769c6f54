"""What every run of an experiment stage shares: its input, its output, the seed, the clock's
calibration and whether to show progress.

The stage registry ([`workbench.stages.registry`][]) builds one [`RunContext`][] per
invocation and hands it to the stage module's ``run`` beside the stage's own config objects, so
a stage's signature names only what is particular to it. [`say_if_reversed`][] is the one
warning a stage logs when its run measures the opposite of a paper's direction.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workbench.utils.fanout import FanoutConfig


@dataclass(frozen=True)
class RunContext:
    """The run-wide inputs of one stage run.

    Attributes:
        processed: the preprocessed dataset, ``data/processed/<dataset>``.
        out: the stage's output folder, ``results/<stage>/<dataset>`` (replaced whole).
        seed: seeds every random choice of the run.
        calibration: ``results/calibration`` (the clock's compute and software costs).
        progress: show progress bars.
        fanout: where its independent configurations run (``fanout``: processes here or a
            Dask cluster; [`workbench.utils.fanout`][]).
    """

    processed: Path
    out: Path
    seed: int
    calibration: Path
    progress: bool = False
    fanout: FanoutConfig = FanoutConfig()


def say_if_reversed(log: logging.Logger, what: str, ours: float, reference: float,
                    direction: str) -> bool:
    """Log a warning when a run measures the opposite of a paper's direction, so a small
    profile's reversal is said, not left for the reader to find: ``what`` (``"HybridDis"``
    against ``"random"``...) should take less emulated time than its reference.

    Args:
        log: the stage's logger.
        what: ``"<ours> against <reference>"`` in words.
        ours: our mechanism's end-to-end emulated seconds.
        reference: the reference's.
        direction: whose direction it is, in words (``"the ESD paper's (claim
            esd.speedup)"``).

    Returns:
        Whether the direction is reversed (``ours`` slower).
    """
    if not (np.isfinite(ours) and np.isfinite(reference)) or ours <= reference:
        return False
    log.warning("%s: %.3gx SLOWER end to end here (%.4g s against %.4g s emulated), the "
                "opposite of %s direction; a run this small (the ci profile's, or a small "
                "dataset) is not the paper's regime, and the claims table is measured at the "
                "default profile's",
                what, ours / reference, ours, reference, direction)
    return True
