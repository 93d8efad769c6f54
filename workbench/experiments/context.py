"""What every run of an experiment stage shares: its input, its output, the seed, the clock's
calibration and whether to show progress.

The stage registry (:mod:`workbench.stages.registry`) builds one :class:`RunContext` per
invocation and hands it to the stage module's ``run`` beside the stage's own config objects, so
a stage's signature names only what is particular to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RunContext:
    """The run-wide inputs of one stage run.

    Attributes:
        processed: the preprocessed dataset, ``data/processed/<dataset>``.
        out: the stage's output folder, ``results/<stage>/<dataset>`` (replaced whole).
        seed: seeds every random choice of the run.
        calibration: ``results/calibration`` (the clock's compute and software costs).
        progress: show progress bars.
    """

    processed: Path
    out: Path
    seed: int
    calibration: Path
    progress: bool = False
