"""The same ``dvc.lock`` wherever the project and ``shared/`` are placed (slow).

Two copies of the working tree sit at different depths, each with the real samples beside it as
``../shared`` (one a plain folder, one a link to a folder elsewhere). In each, the README's setup
steps run (``make params``, the lock check, then ``dvc repro`` of the stages a fresh clone
re-executes first: every ``download``); afterwards both locks equal the committed one, byte for
byte, and no stage output holds the machine's paths.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import sh, shared_data_dir
from workbench.utils.paths import REPO_ROOT

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not shared_data_dir().is_dir(), reason="no ../shared/data")]


def _sh(args: list[str], cwd: Path) -> str:
    return sh(args, cwd, own_root=True)


def _copy_tree(dest: Path) -> None:
    """The working tree's files that git tracks (what a clone holds), DVC outputs excluded."""
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True,
                             check=True).stdout.decode().split("\0")
    for name in filter(None, tracked):
        src = REPO_ROOT / name
        if src.is_file() and not name.startswith(("results/", "reports/")):
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    _sh(["git", "init", "-q"], dest)


def _place(project: Path, shared: Path, link: bool) -> Path:
    """A copy of the project at ``project`` with the samples at ``shared`` as its ../shared."""
    project.mkdir(parents=True)
    _copy_tree(project)
    shutil.copytree(shared_data_dir(), shared / "data")
    if link:
        (project.parent / "shared").symlink_to(shared, target_is_directory=True)
    return project


def test_lock_is_the_same_wherever_it_is_cloned(tmp_path: Path) -> None:
    first = _place(tmp_path / "a" / "project", tmp_path / "a" / "shared", link=False)
    second = _place(tmp_path / "b" / "deep" / "er" / "wb", tmp_path / "elsewhere" / "samples",
                    link=True)
    dvc = str(Path(sys.executable).parent / "dvc")
    locks = []
    for root in (first, second):
        _sh([sys.executable, "-m", "workbench.config", "dump", "-o", "params.yaml"], root)
        assert (root / "params.yaml").read_bytes() == (REPO_ROOT / "params.yaml").read_bytes()
        _sh([sys.executable, "-m", "workbench.utils.dvc_lock"], root)
        _sh([dvc, "repro", "--single-item", "--glob", "download@*"], root)
        for manifest in (root / "data" / "raw").glob("*/manifest.json"):
            text = manifest.read_text()
            assert str(tmp_path) not in text and str(REPO_ROOT) not in text, manifest
        locks.append((root / "dvc.lock").read_bytes())
    assert locks[0] == locks[1]
    assert locks[0] == (REPO_ROOT / "dvc.lock").read_bytes()
