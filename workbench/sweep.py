"""Sweeps beyond one process: any experiment stage under Hydra multirun and its launchers.

::

    python -m workbench.sweep --multirun +stage=esd \\
        experiments.esd.cache_ratio=0.01,0.05,0.1 hydra/launcher=joblib hydra.launcher.n_jobs=2

composes ``workbench/conf/`` once per point of the sweep (Hydra's override grammar: ``a,b,c``,
``range(...)``, ``glob(...)``), and the launcher runs the points: ``basic`` one after another in
this process, ``joblib`` in parallel local processes (``hydra-joblib-launcher``), or a cluster
launcher (``hydra-submitit-launcher``'s ``submitit_slurm``, ``hydra-ray-launcher``) installed by
the user. Each point writes its composed config (``params.yaml``) and the stage's outputs into
its own job directory, ``sweeps/<time>/<job number>/results/<experiment>/<dataset>/``, so points
never overwrite each other or the pipeline's ``results/``; the processed datasets under
``data/`` are shared (run ``dvc repro`` or ``prepare`` first), and the clock's calibration
(``results/calibration``) is copied into each point's ``results/``.

Every stage of :mod:`workbench.stages` except ``notebook`` and ``report`` can be swept; the
point's dataset is the stage's default (``experiments.<stage>.dataset`` or the ``dataset``
group), or ``+stage_dataset=<name>``.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any, cast

import hydra
from omegaconf import DictConfig, OmegaConf

from workbench.utils.paths import CONF_DIR, resolve

log = logging.getLogger("workbench.sweep")
SWEEP_KEYS = ("stage", "stage_dataset")


def run_point(cfg: DictConfig, job_dir: Path) -> Path:
    """Run one sweep point: ``cfg.stage`` on ``cfg`` with outputs under ``job_dir``.

    Returns:
        The stage's output directory.

    Raises:
        ConfigError: no ``stage`` given, or one that cannot be swept.
    """
    from workbench import stages
    from workbench.config import to_yaml
    from workbench.utils.io import write_text
    from workbench.utils.validation import ConfigError

    stage = cfg.get("stage")
    if stage is None:
        raise ConfigError("no stage to sweep: add +stage=<name> (one of "
                          f"{[s for s in stages.STAGES if s not in ('notebook', 'report')]})")
    if stage not in stages.STAGES or stage in ("notebook", "report"):
        raise ConfigError(f"+stage={stage}: cannot be swept (a pipeline stage other than "
                          "notebook and report)")
    dataset = cfg.get("stage_dataset")
    container = cast(dict[str, Any], OmegaConf.to_container(cfg))  # a DictConfig's: a dict
    plain = OmegaConf.create({k: v for k, v in container.items() if k not in SWEEP_KEYS})
    results = job_dir / "results"
    calibration = resolve(plain.paths.results) / "calibration"
    if stage != "calibrate" and calibration.is_dir():
        # the clock's calibration is an input of the timed stages (frozen in dvc.yaml): every
        # point reads the project's, copied beside its own outputs
        shutil.copytree(calibration, results / "calibration", dirs_exist_ok=True)
    plain.paths.results = str(results)
    plain.paths.data = str(resolve(plain.paths.data))
    params = job_dir / "params.yaml"
    write_text(params, to_yaml(plain))
    argv = [stage, "--params", str(params)] + (["--dataset", dataset] if dataset else [])
    return stages.run(argv)


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def main(cfg: DictConfig) -> None:
    """Entry point: one call per sweep point (Hydra's launcher calls it)."""
    from hydra.core.hydra_config import HydraConfig

    job_dir = Path(HydraConfig.get().runtime.output_dir)
    out = run_point(cfg, job_dir)
    log.info("sweep point %s -> %s", HydraConfig.get().job.override_dirname, out)


if __name__ == "__main__":
    main()
