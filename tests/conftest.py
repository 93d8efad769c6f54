"""Shared fixtures: Hydra compose with the `ci` profile into temporary output folders."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import strategies as st

from workbench.config import compose, to_yaml, validate
from workbench.utils.paths import REPO_ROOT

os.environ.setdefault("TQDM_DISABLE", "1")


def shared_data_dir() -> Path:
    """The real dataset samples: ``../shared/data`` beside the repo (or $WORKBENCH_SHARED_DATA)."""
    return Path(os.environ.get("WORKBENCH_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


def write_params(directory: Path, overrides: list[str] | None = None) -> Path:
    """Compose workbench/conf/ with the ci profile and outputs under ``directory``; write
    params.yaml."""
    overrides = ["profile=ci", f"paths.data={directory / 'data'}",
                 f"paths.results={directory / 'results'}",
                 f"paths.reports={directory / 'reports'}",
                 f"paths.shared_data={shared_data_dir()}", *(overrides or [])]
    composed = compose(overrides)
    validate(composed)
    path = directory / "params.yaml"
    path.write_text(to_yaml(composed))
    return path


@pytest.fixture
def ci_params(tmp_path: Path) -> Path:
    """A params.yaml for the ci profile writing into ``tmp_path``."""
    return write_params(tmp_path)


def _build_pipeline(root: Path) -> None:
    """Run every data and experiment stage on the ci profile with outputs under ``root``."""
    from workbench.config import load
    from workbench.stages import STAGES, run
    from workbench.stages.registry import config_value

    params = write_params(root)
    cfg = load(params=params)
    for stage in STAGES.values():  # the registry's order: every stage after the ones it reads
        if not stage.in_dvc or stage.name in ("notebook", "report"):
            continue
        if stage.datasets is None:
            run([stage.name, "--params", str(params)])
            continue
        for name in config_value(cfg, stage.datasets):
            run([stage.name, "--params", str(params), "--dataset", name])


@pytest.fixture(scope="session")
def ci_pipeline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every data and experiment stage of the pipeline on the ci profile, run once per test run
    and copied for this test process (each pytest-xdist worker writes its own reports there).

    The first worker to get here builds it under a lock in the run's common temporary folder;
    the others wait and copy. Returns the params file; outputs lie beside it.
    """
    import shutil

    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    common = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    built = common / "ci-pipeline-built"
    with FileLock(str(common / "ci-pipeline.lock")):
        if not (built / ".complete").exists():
            shutil.rmtree(built, ignore_errors=True)
            built.mkdir()
            _build_pipeline(built)
            (built / ".complete").touch()
    root = tmp_path_factory.mktemp("pipeline")
    shutil.copytree(built, root, dirs_exist_ok=True, symlinks=True,
                    ignore=shutil.ignore_patterns(".complete", "params.yaml"))
    return write_params(root)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark tests that execute notebooks."""
    for item in items:
        if "notebook" in item.nodeid:
            item.add_marker(pytest.mark.notebook)


@st.composite
def keys_and_hot(draw: st.DrawFn, min_samples: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A small batch of global keys ``int64[n, F]`` over a table of up to 12 rows, and a random
    hot mask ``bool[rows]`` (Hotline's popularity and micro-batch property tests)."""
    rows = draw(st.integers(1, 12))
    n = draw(st.integers(min_samples, 15))
    f = draw(st.integers(1, 5))
    flat = draw(st.lists(st.integers(0, rows - 1), min_size=n * f, max_size=n * f))
    is_hot = np.array(draw(st.lists(st.booleans(), min_size=rows, max_size=rows)), dtype=bool)
    return np.array(flat, dtype=np.int64).reshape(n, f), is_hot
