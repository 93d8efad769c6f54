"""A stage's configurations fanned out to Dask (``workbench.utils.fanout``): the same results as
the serial run on a ``LocalCluster`` of two worker processes and on a running scheduler's
address, every failed configuration named, the sweep's points on Dask, bad settings refused."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from workbench.cluster.config import CacheConfig
from workbench.config import load
from workbench.data.config import SyntheticConfig
from workbench.data.synthetic_keys import write_keys
from workbench.experiments import het_epoch
from workbench.experiments.config import HetEpochConfig
from workbench.training.clock import replay_epoch
from workbench.utils.fanout import FanoutConfig, FanoutFailed, WorkerFailed, fan_out
from workbench.utils.paths import REPO_ROOT
from workbench.utils.validation import ConfigError, from_dict

SMALL = SyntheticConfig(cardinality_scale=0.001, rows=1000)


@pytest.mark.parametrize("backend, first", [("dask", None), ("processes", 4)])
def test_het_epoch_replays_side_by_side_equal_the_serial_replays(tmp_path: Path, backend: str,
                                                                 first: int | None) -> None:
    """het_epoch's 14 configurations on a LocalCluster of two worker processes (and four of
    them on two spawned processes, one each: 10 s of imports apiece), each equal to the same
    replay computed alone in this process."""
    rows = write_keys(tmp_path / "k.npy", SMALL, 0.001, 3000, 2, 1000)
    configs = het_epoch.replays(HetEpochConfig(workers=[2]), 2,
                                CacheConfig(policy="lru", ratio=0.1))[:first]
    both = het_epoch.run_replays(tmp_path / "k.npy", rows, configs, 32, "contiguous", 2,
                                 jobs=2, budget_gb=100.0, progress=False,
                                 fanout=FanoutConfig(backend=backend))
    keys = np.load(tmp_path / "k.npy")
    assert list(both) == configs
    for config in configs:
        alone, flushed = replay_epoch(keys, rows, config.workers, 32, config.cache,
                                      "contiguous", 2)
        np.testing.assert_array_equal(both[config]["counters"], alone)
        np.testing.assert_array_equal(both[config]["flushed"], flushed)


def test_a_running_schedulers_address_computes_the_configurations() -> None:
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster:
        config = FanoutConfig(backend="dask", scheduler=cluster.scheduler_address)
        got = fan_out(divmod, [(7, 2), (9, 4), (1, 1)], ["a", "b", "c"], jobs=1, config=config)
    assert got == [(3, 1), (2, 1), (1, 0)]


@pytest.mark.parametrize("backend", ["processes", "dask"])
def test_every_failed_configuration_is_named_and_the_others_computed(backend: str) -> None:
    """A configuration's input error does not stop the others: each failed one is named on a
    line of its own; an internal error (a bug) is a WorkerFailed."""
    ended: list[int] = []
    configs = [(FanoutConfig, {}), (FanoutConfig, {"backend": "threads"}),
               (FanoutConfig, {"backend": "dask"}), (FanoutConfig, {"scheduler": "x"})]
    with pytest.raises(FanoutFailed) as err:
        fan_out(from_dict, configs, ["plain", "threads", "dask", "address"], jobs=2,
                config=FanoutConfig(backend=backend), done=lambda i, _: ended.append(i))
    lines = str(err.value).splitlines()
    assert lines[0] == "2 of 4 configurations failed (2 computed):"
    assert lines[1].startswith("threads: ConfigError: backend = 'threads'")
    assert lines[2].startswith("address: ConfigError: fanout.scheduler = 'x' is read by the "
                               "dask backend only")
    assert sorted(ended) == [0, 2]
    with pytest.raises(WorkerFailed, match=r"1 of 2 configurations failed \(1 computed\):\n"
                                           r"x: ValueError: invalid literal"):
        fan_out(int, [("1",), ("x",)], ["one", "x"], jobs=2,
                config=FanoutConfig(backend=backend))


def test_the_fanout_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"fanout\.backend = 'threads': must be one of "
                                          r"'processes', 'dask'"):
        load(["fanout.backend=threads"])
    with pytest.raises(ConfigError, match=r"add fanout\.backend=dask"):
        load(["fanout.scheduler=tcp://127.0.0.1:8786"])
    with pytest.raises(ConfigError, match=r"fanout\.scheduler=tcp://127\.0\.0\.1:8786"):
        FanoutConfig(backend="dask", scheduler="127.0.0.1:8786")
    assert load(["fanout.backend=dask"]).fanout == FanoutConfig(backend="dask")


def _sweep(data: Path, out: Path, *launcher: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workbench.sweep", "--multirun", "+stage=het-cache",
         "profile=ci", f"paths.data={data}", "seed=0,1", f"hydra.sweep.dir={out}", *launcher],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "TQDM_DISABLE": "1"})


@pytest.mark.pipeline
def test_a_sweep_on_dask_writes_what_the_serial_sweep_writes(ci_pipeline: Path,
                                                             tmp_path: Path) -> None:
    """``workbench.sweep`` through joblib's dask backend on a LocalCluster of two workers: each
    point's results equal the serial sweep's."""
    data = load(params=ci_pipeline).paths.resolve("data")
    dask = _sweep(data, tmp_path / "dask", "hydra/launcher=joblib", "hydra.launcher.backend=dask",
                  "hydra.launcher.n_jobs=2")
    assert dask.returncode == 0, dask.stderr
    serial = _sweep(data, tmp_path / "serial")
    assert serial.returncode == 0, serial.stderr
    for job in ("0", "1"):
        ours = tmp_path / "dask" / job / "results" / "het_cache" / "synthetic"
        theirs = tmp_path / "serial" / job / "results" / "het_cache" / "synthetic"
        names = sorted(p.name for p in ours.iterdir())
        assert names == sorted(p.name for p in theirs.iterdir()) and names
        for name in names:
            assert (ours / name).read_bytes() == (theirs / name).read_bytes(), name
    bad = _sweep(data, tmp_path / "bad", "hydra/launcher=joblib", "hydra.launcher.backend=dask",
                 "hydra.launcher.n_jobs=0")
    assert bad.returncode == 2
    assert "hydra.launcher.n_jobs = 0: give the Dask workers to start" in bad.stderr


def test_the_stages_that_read_fanout_are_those_that_fan_out() -> None:
    """``FANOUT_STAGES`` (who may be given a ``fanout`` override) is exactly the experiment
    modules that call ``fan_out``."""
    from workbench.stages.reads import FANOUT_STAGES

    calling = {p.stem for p in (REPO_ROOT / "workbench" / "experiments").glob("*.py")
               if "fan_out(" in p.read_text()}
    assert calling == set(FANOUT_STAGES)
