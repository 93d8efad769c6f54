"""Layer 10, the pipeline's stages: ``python -m workbench.stages <stage> ...`` (or
``workbench stage ...``).

* ``registry``: every stage named once: its entry point, its config, its datasets, its outputs
  ([`STAGES`][]); the adapters that hand each stage module its config objects
* ``cli``: the command line: argument parsing from the registry, one-line user errors
* ``reads``: what configuration each stage reads (its ``dvc.yaml`` params): an override of
  anything else is refused
* ``costs``: what each stage run cost (wall, CPU, memory, output size), recorded when it ran
  (``results/costs/<stage id>.json``)
* ``cost_rerun``: a stage's cost from a rerun into a copy of ``results/`` (the committed outputs
  untouched): ``python -m workbench.stages.cost_rerun <stage id> ...``
* ``__main__``: ``python -m workbench.stages``
"""

from workbench.stages.cli import main, run
from workbench.stages.registry import STAGES, Stage, StageRun

__all__ = ["STAGES", "Stage", "StageRun", "main", "run"]
