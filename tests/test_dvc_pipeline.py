"""`dvc repro` end to end on the ci profile, in a copy of the repository (slow).

Checks: the whole chain runs and writes reports/README.md; a second `dvc repro` reruns nothing;
editing one experiment's parameters invalidates only the stages that depend on it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import shared_data_dir
from workbench.config import compose, to_yaml
from workbench.utils.paths import REPO_ROOT

pytestmark = pytest.mark.slow
COPY = ["workbench", "notebooks", "dvc.yaml", ".dvcignore", "pyproject.toml"]


def _sh(args: list[str], cwd: Path) -> str:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "TQDM_DISABLE": "1"}
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, f"{' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("repo")
    for name in COPY:
        src = REPO_ROOT / name
        if src.is_dir():
            shutil.copytree(src, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, root / name)
    (root / ".dvc").mkdir()
    shutil.copy2(REPO_ROOT / ".dvc" / "config", root / ".dvc" / "config")
    # this module tests the pipeline's wiring (what runs, what reruns): the real-process check
    # runs one network in one dense mode here; the ci pipeline of the other tests
    # (tests/conftest.py) runs it on both networks in both modes. Every notebook runs: the
    # report's claims need each one's section.
    (root / "params.yaml").write_text(to_yaml(compose(
        ["profile=ci", f"paths.shared_data={shared_data_dir()}",
         "experiments.distributed_check.networks=[token_bucket]",
         "experiments.distributed_check.dense_modes=[after_backward]"])))
    _sh(["git", "init", "-q"], root)
    return root


def test_repro_runs_everything_then_nothing(repo: Path) -> None:
    dvc = str(Path(sys.executable).parent / "dvc")
    # the calibration is a frozen stage: `make calibrate` measures it (on the preprocessed
    # data's shapes) and records it, as the Makefile does
    _sh([dvc, "repro", "--glob", "preprocess@*"], repo)
    _sh([sys.executable, "-m", "workbench.stages", "calibrate", "--params", "params.yaml"], repo)
    _sh([dvc, "commit", "-f", "calibrate"], repo)
    first = _sh([dvc, "repro"], repo)
    assert "Running stage 'calibrate'" not in first  # frozen: never re-measured by repro
    assert "Running stage 'report'" in first
    report = (repo / "reports" / "README.md").read_text()
    assert "## Claims" in report and "(datasets/README.md" in report
    assert "het_fig3_access_skew.png" in (repo / "reports" / "datasets" / "README.md").read_text()
    second = _sh([str(Path(sys.executable).parent / "dvc"), "repro"], repo)
    assert "Running stage" not in second, second


def test_editing_one_experiment_reruns_only_its_dependents(repo: Path) -> None:
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["experiments"]["dataset_stats"]["rank_points"] = 150
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    out = _sh([str(Path(sys.executable).parent / "dvc"), "status", "--json"], repo)
    # the JSON line; DVC also warns that the frozen calibrate stage's deps are not shown
    status = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    changed = {name.split("@")[0] for name in status}
    assert "dataset_stats" in {n.split(":")[-1] for n in changed} or \
        any("dataset_stats" in n for n in status)
    assert not any("download" in n or "preprocess" in n for n in status), status
