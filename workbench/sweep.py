"""Sweeps beyond one process: any experiment stage under Hydra multirun and its launchers.


    python -m workbench.sweep --multirun +stage=esd \\
        experiments.esd.cache_ratio=0.01,0.05,0.1 hydra/launcher=joblib hydra.launcher.n_jobs=2

composes ``workbench/conf/`` once per point of the sweep (Hydra's override grammar: ``a,b,c``,
``range(...)``, ``glob(...)``), and the launcher runs the points: ``basic`` one after another in
this process, ``joblib`` in parallel local processes (``hydra-joblib-launcher``), or a cluster
launcher (``hydra-submitit-launcher``'s ``submitit_slurm``, ``hydra-ray-launcher``) installed by
the user. Each point writes its composed config (``params.yaml``) and the stage's outputs into
its own job directory, ``sweeps/<time>/<job number>/results/<experiment>/<dataset>/``, so points
never overwrite each other or the pipeline's ``results/``. The processed datasets under
``data/`` are the points' shared input (run ``dvc repro`` or ``prepare`` first), except for a
sweep of a data stage (``download``, ``preprocess``, ``prepare``, ``dedup``): each of its points
writes its own ``<job dir>/data/`` (the project's downloads are its mirror; ``dedup`` gets a copy
of the processed dataset). The clock's calibration
(``results/calibration``) is copied into each point's ``results/``.

Every stage of [`workbench.stages`][] except ``notebook`` and ``report`` can be swept; the
point's dataset is the stage's default (``experiments.<stage>.dataset`` or the ``dataset``
group), or ``+stage_dataset=<name>``.

A point that fails does not stop the sweep and loses no other point's error:

    point fails --> its one-line error in its log and in <job dir>/failed.json (an internal
                    error: its traceback in the log too); the next points run
    sweep ends  --> FailureReport (a Hydra callback, registered by main()) collects the
                    failed.json of this sweep's points; main() prints one line per failed point,
                    "#<job> <overrides>: <Class>: <message>", and exits 2 (1 if any failure was
                    an internal error); the successful points' outputs stay where they are

A point's config is validated before anything is written into its job directory.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
from pathlib import Path
from typing import Any, cast

import hydra
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from workbench.utils.errors import UserError, one_line
from workbench.utils.paths import CONF_DIR, resolve
from workbench.utils.validation import ConfigError

log = logging.getLogger("workbench.sweep")
SWEEP_KEYS = ("stage", "stage_dataset")
#: Stages whose output is data under ``paths.data``: each point gets its own data root.
DATA_STAGES = ("download", "preprocess", "prepare", "dedup")
#: The record a failed point leaves in its job directory: ``{"job", "overrides", "error",
#: "internal"}``.
FAILED = "failed.json"
#: The override that registers :class:`FailureReport` (added by :func:`main`).
REPORT_OVERRIDE = "+hydra.callbacks.workbench_failures._target_=workbench.sweep.FailureReport"
#: The failed points of the last sweep of this process, filled by :class:`FailureReport`.
FAILURES: list[dict[str, Any]] = []


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

    stage = cfg.get("stage")
    if stage is None:
        raise ConfigError("no stage to sweep: add +stage=<name> (one of "
                          f"{[s for s in stages.STAGES if s not in ('notebook', 'report')]})")
    if stage not in stages.STAGES or stage in ("notebook", "report"):
        raise ConfigError(f"+stage={stage}: cannot be swept (a pipeline stage other than "
                          "notebook and report)")
    from workbench.config import validate

    dataset = cfg.get("stage_dataset")
    container = cast(dict[str, Any], OmegaConf.to_container(cfg))  # a DictConfig's: a dict
    plain = OmegaConf.create({k: v for k, v in container.items() if k not in SWEEP_KEYS})
    checked = validate(plain)  # a bad value stops here, before anything is written for it
    if stage in DATA_STAGES:
        stage = _own_data(plain, checked, stage, dataset, job_dir)
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


def _own_data(plain: DictConfig, cfg: Any, stage: str, dataset: str | None,
              job_dir: Path) -> str:
    """Give a point of a data stage its own ``paths.data`` (``<job dir>/data``), so the points
    of a sweep of ``prepare`` (or ``dedup``) keep their processed datasets (partitions) side by
    side instead of each replacing the last one's in the project's ``data/``.

    The registry files the project has already downloaded are the point's first mirror (copied
    and verified, not fetched again); ``preprocess`` runs as ``prepare`` (the point's data has
    no raw files until its download step); ``dedup`` gets a copy of the processed dataset it
    partitions. Returns the stage the point runs.
    """
    from workbench import stages
    from workbench.data.pipeline import downloads_dir, processed_dir

    ds = stages.STAGES[stage].dataset_of(cfg, dataset, dataset is not None)
    shared = resolve(plain.paths.data)
    plain.paths.data = str(job_dir / "data")
    if stage == "dedup":  # its input, the processed dataset, copied beside its partitions
        source = processed_dir(shared, ds.name)
        if source.is_dir():
            shutil.copytree(source, processed_dir(job_dir / "data", ds.name), dirs_exist_ok=True)
        return stage
    if ds.registry is not None:
        plain.paths.mirrors = [str(downloads_dir(shared, ds.registry)), *plain.paths.mirrors]
    return "prepare" if stage == "preprocess" else stage


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def point(cfg: DictConfig) -> None:
    """One sweep point (Hydra's launcher calls it once per point, in whatever process): run it;
    a failure is logged and recorded in the job directory ([`FAILED`][]), not raised, so the
    other points run and every failure is reported at the end."""
    from hydra.core.hydra_config import HydraConfig

    hydra_cfg = HydraConfig.get()
    job_dir = Path(hydra_cfg.runtime.output_dir)
    (job_dir / FAILED).unlink(missing_ok=True)  # a record of an earlier sweep into this folder
    try:
        out = run_point(cfg, job_dir)
    except Exception as err:  # every point's failure is reported at the end, none is lost
        internal = not isinstance(err, UserError)
        if internal:  # a bug or a crash: its traceback goes to the point's log
            log.exception("sweep point %s failed", hydra_cfg.job.override_dirname)
        else:
            log.error("sweep point %s failed: %s", hydra_cfg.job.override_dirname, one_line(err))
        from workbench.utils.io import write_text

        write_text(job_dir / FAILED, json.dumps({
            "job": OmegaConf.select(cast(DictConfig, hydra_cfg), "job.num", default=None),
            "internal": internal, "error": one_line(err),
            "overrides": [o for o in hydra_cfg.overrides.task if o != REPORT_OVERRIDE]}))
        return
    log.info("sweep point %s -> %s", hydra_cfg.job.override_dirname, out)


class FailureReport(Callback):
    """Collects into [`FAILURES`][] the failed points of the run or sweep that just ended (the
    [`FAILED`][] records its points wrote, whichever process or machine ran them)."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        FAILURES.clear()
        for old in Path(str(config.hydra.sweep.dir)).glob(f"*/{FAILED}"):
            old.unlink()  # an earlier sweep's, into the same folder

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        self._collect(Path(str(config.hydra.sweep.dir)).glob(f"*/{FAILED}"))

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        FAILURES.clear()

    def on_run_end(self, config: DictConfig, **kwargs: Any) -> None:
        self._collect([Path(str(config.hydra.runtime.output_dir)) / FAILED])

    @staticmethod
    def _collect(records: Any) -> None:
        found = [json.loads(path.read_text()) for path in records if path.is_file()]
        FAILURES.extend(sorted(found, key=lambda r: r["job"] if r["job"] is not None else -1))


def report(failures: list[dict[str, Any]]) -> int:
    """Print one line per failed point to stderr; the exit status (0: none failed; 2: only
    input errors; 1: an internal error among them)."""
    if not failures:
        return 0
    print(f"sweep: {len(failures)} point(s) failed (the other points' outputs are kept in "
          "their job directories):", file=sys.stderr)
    for record in failures:
        job = "" if record["job"] is None else f"#{record['job']} "
        print(f"  {job}{' '.join(record['overrides'])}: {record['error']}", file=sys.stderr)
    return 1 if any(r["internal"] for r in failures) else 2


def _launcher_client(argv: list[str]) -> Any:
    """The Dask client the joblib launcher's ``dask`` backend runs the points on (a context
    manager): a ``LocalCluster`` of ``hydra.launcher.n_jobs`` workers, or the scheduler at
    ``fanout.scheduler``; a null context for any other launcher."""
    from contextlib import nullcontext

    given = dict(arg.split("=", 1) for arg in argv if "=" in arg)
    if given.get("hydra.launcher.backend") != "dask":
        return nullcontext()
    from workbench.utils.fanout import FanoutConfig, dask_client

    jobs = int(given.get("hydra.launcher.n_jobs", "2"))
    if jobs < 1:
        raise ConfigError(f"hydra.launcher.n_jobs = {jobs}: give the Dask workers to start, "
                          "e.g. hydra.launcher.n_jobs=2")
    return dask_client(FanoutConfig("dask", given.get("fanout.scheduler") or None), jobs)


def main() -> None:
    """Entry point (``python -m workbench.sweep``, ``workbench sweep``): run the sweep (Hydra
    parses ``sys.argv``), then report every failed point and exit non-zero if one failed.

    With ``hydra/launcher=joblib hydra.launcher.backend=dask`` the points run on Dask
    (joblib's dask backend): a ``LocalCluster`` of ``hydra.launcher.n_jobs`` worker processes,
    or the running scheduler at ``fanout.scheduler=tcp://host:8786`` (its workers need this
    project's environment and its data and sweep folders on a shared filesystem).
    """
    if REPORT_OVERRIDE not in sys.argv:
        sys.argv.append(REPORT_OVERRIDE)
    FAILURES.clear()
    try:
        client = _launcher_client(sys.argv[1:])
    except UserError as err:
        print(f"sweep: {one_line(err)}", file=sys.stderr)
        sys.exit(2)
    with client:
        point()
    status = report(FAILURES)
    if status:
        sys.exit(status)


if __name__ == "__main__":
    # Hydra instantiates FailureReport from workbench.sweep, which fills that module's FAILURES,
    # not this __main__ copy's: run that module's main
    from workbench.sweep import main as sweep_main

    sweep_main()
