"""The stage registry is the one list of stages: the command line, dvc.yaml and the tests'
pipeline fixture all follow it."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from workbench.config import load
from workbench.stages import STAGES, main
from workbench.stages.registry import config_value
from workbench.utils.paths import REPO_ROOT

DVC = yaml.safe_load((REPO_ROOT / "dvc.yaml").read_text())["stages"]


def test_help_lists_every_stage_of_the_registry() -> None:
    out = subprocess.run([sys.executable, "-m", "workbench.stages", "--help"],
                         capture_output=True, text=True, cwd=REPO_ROOT, check=True).stdout
    for stage in STAGES.values():
        assert f"  {stage.name} " in out, stage.name


def test_dvc_yaml_runs_exactly_the_registry_stages() -> None:
    assert set(DVC) == {s.dvc_name for s in STAGES.values() if s.in_dvc}


def test_no_stage_depends_on_another_stages_module() -> None:
    """A stage's code is its own module and the floors below it (no stage is a library for
    another: tests/test_layering.py holds the imports, this the DVC dependencies)."""
    modules = {s.module for s in STAGES.values()
               if s.module and s.module.startswith("workbench/experiments/")}
    for stage in STAGES.values():
        if stage.in_dvc:
            deps = DVC[stage.dvc_name].get("do", DVC[stage.dvc_name]).get("deps", [])
            others = modules & set(deps) - {stage.module}
            assert not others, f"{stage.dvc_name} depends on {sorted(others)}"


@pytest.mark.parametrize("stage", [s for s in STAGES.values() if s.in_dvc], ids=lambda s: s.name)
def test_dvc_stage_follows_its_registry_entry(stage) -> None:
    entry = DVC[stage.dvc_name].get("do", DVC[stage.dvc_name])  # a foreach stage's body
    assert entry["cmd"].startswith(f"python -m workbench.stages {stage.name} ")
    matrix = entry.get("matrix", {})
    if stage.datasets is not None:
        assert matrix.get("dataset") == f"${{{stage.datasets}}}"
        assert "--dataset ${item.dataset}" in entry["cmd"]
    else:
        assert "dataset" not in matrix and "--dataset" not in entry["cmd"]
    if stage.module is not None:
        assert stage.module in entry.get("deps", []), f"{stage.module} not among the deps"
    if stage.config is not None:
        params = [p if isinstance(p, str) else next(iter(p)) for p in entry.get("params", [])]
        assert any(p == f"experiments.{stage.config}" or
                   p.startswith(f"experiments.{stage.config}.") for p in params), params


def test_every_registry_key_exists_in_the_config() -> None:
    cfg = load()
    for stage in STAGES.values():
        for key in (stage.datasets, stage.dataset):
            if key is not None:
                config_value(cfg, key)  # raises AttributeError when the key is gone
        if stage.config is not None:
            assert hasattr(cfg.experiments, stage.config), stage.name


def test_a_user_error_is_one_line_with_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["esd", "profile=ci", "experiments.esd.batches=-1"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err == "ConfigError: experiments.esd.batches = -1: must be an integer >= 1"
