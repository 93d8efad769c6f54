"""Running a stage or module as a user would, and reading the one-line error it fails with."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from workbench.utils.paths import REPO_ROOT


def run(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=600)


def stage(tmp: Path, *args: str, results: str = "results") -> subprocess.CompletedProcess:
    """``python -m workbench.stages ...`` writing under ``tmp`` instead of the repository."""
    return run("workbench.stages", *args, f"paths.data={tmp / 'data'}",
               f"paths.results={tmp / results}", "profile.progress=false")


def failed_with(proc: subprocess.CompletedProcess, *needles: str) -> str:
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    for needle in needles:
        assert needle in last, last
    return last


def criteo_lines(n: int) -> list[str]:
    rng = np.random.default_rng(0)
    return ["\t".join([str(int(rng.random() < 0.3)), *map(str, rng.integers(0, 50, 13)),
                       *(f"{v:08x}" for v in rng.integers(0, 2**32, 26))]) for _ in range(n)]


def local(tmp: Path, name: str, text: str | bytes, fmt: str) -> tuple[str, ...]:
    folder = tmp / "own"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return ("dataset=local", f"dataset.path={folder}", f"dataset.format={fmt}",
            f"dataset.files=[{name}]")
