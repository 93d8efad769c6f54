"""`dvc repro` end to end on the ci profile, in a copy of the repository (slow).

The run is the one every pipeline test reads (``tests/conftest.py``'s ``ci_project``: the
README's ``make repro``, ``python -m workbench.repro``, two stages at a time). Checks: the whole
chain ran and wrote reports/README.md; a second `dvc repro` (DVC's own, serial) reruns nothing;
editing one experiment's parameters invalidates only the stages that depend on it.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPRO_LOG, sh

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def repo(ci_project: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the ci pipeline's project after its ``python -m workbench.repro`` run
    (``tests/conftest.py``: the calibration measured and committed as ``make calibrate`` does,
    then every stage through DVC, two at a time), to run DVC in and edit."""
    root = tmp_path_factory.mktemp("repo") / "project"
    shutil.copytree(ci_project, root, symlinks=True)
    return root


def test_repro_runs_everything_then_nothing(repo: Path) -> None:
    first = (repo / REPRO_LOG).read_text()  # what `make repro` printed
    assert "Running stage 'calibrate'" not in first  # frozen: never re-measured by repro
    assert "Running stage 'report'" in first and "repro: done report" in first
    assert "(alone: it measures wall-clock time)" in first  # recd, hotline, distributed_check
    report = (repo / "reports" / "README.md").read_text()
    assert "## Claims" in report and "(datasets/README.md" in report
    assert "het_fig3_access_skew.png" in (repo / "reports" / "datasets" / "README.md").read_text()
    # the lock is the one a serial `dvc repro` writes: plain DVC finds nothing to do
    second = sh([str(Path(sys.executable).parent / "dvc"), "repro"], repo)
    assert "Running stage" not in second, second
    again = sh([sys.executable, "-m", "workbench.repro"], repo)
    assert "Data and pipelines are up to date." in again, again


def test_editing_one_experiment_reruns_only_its_dependents(repo: Path) -> None:
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["experiments"]["dataset_stats"]["rank_points"] = 150
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    out = sh([str(Path(sys.executable).parent / "dvc"), "status", "--json"], repo)
    # the JSON line; DVC also warns that the frozen calibrate stage's deps are not shown
    status = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    changed = {name.split("@")[0] for name in status}
    assert "dataset_stats" in {n.split(":")[-1] for n in changed} or \
        any("dataset_stats" in n for n in status)
    assert not any("download" in n or "preprocess" in n for n in status), status
