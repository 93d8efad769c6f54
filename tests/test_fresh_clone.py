"""``make repro`` in a clone with no ``../shared`` beside it, as a user outside CI has it (slow).

The clone holds what git tracks (the working tree's versions, committed in the clone), at a
different depth from this repository. The internet is stood in for by a static HTTP server on
127.0.0.1 holding the samples' public files laid out by host (``WORKBENCH_SOURCE_BASE``, see
``tests/test_sample_sources.py``):

1. the server down and no mirror: ``make repro`` regenerates every other stage's data, checks
   every stage, fails the four samples' downloads, runs nothing that needs them, exits non-zero
   with a summary naming the four datasets, the URLs tried and how to provide them, and
   ``git status`` is clean (no committed result, figure, claim or ``dvc.lock`` line changed);
2. the server up: ``make repro`` fetches and verifies the samples, exits 0, and ``git status``
   is still clean: the committed results are what these bytes give, wherever the clone sits.

``make`` runs with this test's virtual environment as ``VENV`` (``-o`` keeps it from being
reinstalled: CI has no network).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import shared_data_dir
from helpers.public_sources import serve, sources_tree
from workbench.data.registry import SAMPLES
from workbench.utils.paths import REPO_ROOT

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not shared_data_dir().is_dir(), reason="no ../shared/data"),
              pytest.mark.skipif(shutil.which("make") is None, reason="no make")]


def _clone(dest: Path) -> None:
    """What git tracks here (the working tree's versions), committed in a new repository."""
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True,
                             check=True).stdout.decode().split("\0")
    for name in filter(None, tracked):
        src = REPO_ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    for args in (["init", "-q"], ["add", "-A"],
                 ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "clone"]):
        subprocess.run(["git", *args], cwd=dest, check=True, capture_output=True)


def _make_repro(clone: Path, base: str) -> subprocess.CompletedProcess[str]:
    venv = Path(sys.prefix)
    env = {**os.environ, "WORKBENCH_SOURCE_BASE": base, "TQDM_DISABLE": "1",
           "PATH": f"{venv / 'bin'}:{os.environ['PATH']}"}
    for name in ("WORKBENCH_ROOT", "WORKBENCH_MIRRORS", "WORKBENCH_SHARED_DATA",
                 "WORKBENCH_OFFLINE"):
        env.pop(name, None)
    return subprocess.run(["make", "repro", f"VENV={venv}", "-o", f"{venv}/.installed",
                           "-o", f"{venv}/bin/activate"], cwd=clone, env=env,
                          capture_output=True, text=True, timeout=3000)


def _status(clone: Path) -> str:
    return subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True,
                          text=True, check=True).stdout


def test_make_repro_without_shared_offline_then_from_the_sources(tmp_path: Path) -> None:
    clone = tmp_path / "somewhere" / "else" / "workbench"
    clone.mkdir(parents=True)
    _clone(clone)
    assert not (clone.parent / "shared").exists()

    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    offline = _make_repro(clone, closed)
    log = offline.stdout + offline.stderr
    assert offline.returncode != 0, log[-3000:]
    summary = log[log.index("stages FAILED"):]
    for source in SAMPLES:
        assert f"download@{source.name}: DownloadError: {source.name}: could not fetch" in \
            summary, summary
    assert f"{closed}/raw.githubusercontent.com/" in summary and "WORKBENCH_MIRRORS=" in summary
    assert "not run: " in summary and "Traceback" not in log
    assert _status(clone) == "", _status(clone)

    base, httpd = serve(sources_tree(tmp_path / "internet"))
    try:
        online = _make_repro(clone, base)
    finally:
        httpd.shutdown()
        httpd.server_close()
    log = online.stdout + online.stderr
    assert online.returncode == 0, log[-3000:]
    assert _status(clone) == "", _status(clone)
    for source in SAMPLES:
        for f in source.files:
            assert (clone / "data" / "downloads" / source.name / f.name).read_bytes() == \
                (shared_data_dir() / source.mirror_dir / f.name).read_bytes()
    manifests = "".join(p.read_text() for p in (clone / "data" / "raw").glob("*/manifest.json"))
    assert str(tmp_path) not in manifests  # nothing machine-specific in DVC's outputs
