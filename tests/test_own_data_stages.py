"""Every single-dataset stage on a user's own files leaves the committed files alone (issue 68).

In a copy of the built ci project with its outputs committed to git, each stage that ``dvc.yaml``
runs on one dataset is run as the docs show a user (``dataset=local dataset.name=mine
dataset.path=... dataset.format=criteo_tsv``, composed from ``workbench/conf/`` on the ci
profile): it writes ``results/<stage>/mine`` and ``results/costs/<stage>@mine.json``, and
``git status`` shows no committed file changed. A stage that needs a synthetic generator or
more rows than the toy holds says so in one line and writes nothing.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.ci_project import tool_env

pytestmark = pytest.mark.slow

#: Single-dataset stages that run on a local file, and the output each writes for it.
RUNS = {"het-train": "het_train", "het-time": "het_time", "esd": "esd", "combined": "combined",
        "hotline": "hotline", "calibrate": "calibrate"}
#: Single-dataset stages that refuse local files, with the reason they give.
REFUSED = {"het-scale": "draws keys from a synthetic dataset's generator",
           "het-epoch": "draws keys from a synthetic dataset's generator",
           "flexshard-stream": "draws keys from a synthetic dataset's generator",
           "het-long": "give a longer dataset"}


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root,
                          capture_output=True, text=True, check=True).stdout


def test_own_data_runs_of_single_dataset_stages_leave_git_status_clean(
        ci_project: Path, tmp_path: Path) -> None:
    from helpers.traps import criteo_lines

    root = tmp_path / "project"
    shutil.copytree(ci_project, root, symlinks=True)
    _git(root, "add", "params.yaml", "dvc.yaml", "dvc.lock", "results", "reports")
    _git(root, "commit", "-qm", "committed")
    own = tmp_path / "own"
    own.mkdir()
    (own / "train.txt").write_text("\n".join(criteo_lines(4000)) + "\n")
    words = ["profile=ci", "paths.mirrors=[]", "dataset=local", "dataset.name=mine",
             f"dataset.path={own}", "dataset.format=criteo_tsv", "dataset.files=[train.txt]"]

    def stage(name: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "workbench.stages", name, *words],
                              cwd=root, env=tool_env(), capture_output=True,
                              text=True, timeout=600)

    assert stage("prepare").returncode == 0
    for name, out in RUNS.items():
        proc = stage(name)
        assert proc.returncode == 0, f"{name}: {proc.stderr[-2000:]}"
        assert (root / "results" / out / "mine").is_dir(), name
        assert (root / "results" / "costs" / f"{out}@mine.json").is_file(), name
    for name, reason in REFUSED.items():
        proc = stage(name)
        assert proc.returncode == 2 and reason in proc.stderr.splitlines()[-1], proc.stderr
        assert "Traceback" not in proc.stderr
    assert _git(root, "status", "--porcelain", "--untracked-files=no") == ""
