"""Shared fixtures: Hydra compose with the `ci` profile into temporary output folders."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import strategies as st

from workbench import ci_project as ci_build
from workbench.config import compose, to_yaml, validate
from workbench.utils.paths import REPO_ROOT

os.environ.setdefault("TQDM_DISABLE", "1")


def shared_data_dir() -> Path:
    """This repository's CI copy of the real samples, the mirror the tests name in
    ``paths.mirrors``: ``../shared/data`` beside the repo (or $WORKBENCH_SHARED_DATA)."""
    return Path(os.environ.get("WORKBENCH_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="module")
def shared() -> Path:
    """The real samples' mirror (``../shared/data``, or ``WORKBENCH_SHARED_DATA``); skips the
    test where it is absent."""
    root = shared_data_dir()
    if not root.is_dir():
        pytest.skip(f"{root}: the real samples are not present (set WORKBENCH_SHARED_DATA)")
    return root


def write_params(directory: Path, overrides: list[str] | None = None) -> Path:
    """Compose workbench/conf/ with the ci profile and outputs under ``directory``; write
    params.yaml."""
    overrides = ["profile=ci", f"paths.data={directory / 'data'}",
                 f"paths.results={directory / 'results'}",
                 f"paths.reports={directory / 'reports'}",
                 f"paths.mirrors=[{shared_data_dir()}]", *(overrides or [])]
    composed = compose(overrides)
    validate(composed)
    path = directory / "params.yaml"
    path.write_text(to_yaml(composed))
    return path


@pytest.fixture
def ci_params(tmp_path: Path) -> Path:
    """A params.yaml for the ci profile writing into ``tmp_path``."""
    return write_params(tmp_path)


#: The log of the ci pipeline's ``python -m workbench.repro`` run, in the built project.
REPRO_LOG = ci_build.REPRO_LOG


def sh(args: list[str], cwd: Path, *, own_root: bool = False) -> str:
    """Run a command of the project (this venv's ``python`` and ``dvc`` first on PATH, no
    progress bars); its output, or a failed assertion with it. ``own_root`` drops
    ``WORKBENCH_ROOT``, so the command finds its project from ``cwd`` as a user's shell does."""
    import sys

    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "TQDM_DISABLE": "1"}
    if own_root:
        env.pop("WORKBENCH_ROOT", None)
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, f"{' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout + proc.stderr


def _build_pipeline(root: Path) -> None:
    """The whole pipeline on the ci profile in a copy of the project at ``root``, as ``make
    check-ci`` builds it (:mod:`workbench.ci_project`: the frozen calibration and long runs
    measured and committed as ``make calibrate`` and ``make het-long`` do, then ``python -m
    workbench.repro``, two stages at a time: every data and experiment stage, every notebook,
    the report). The runner's output goes to ``root/repro.log``."""
    ci_build.copy_sources(REPO_ROOT, root)
    (root / "params.yaml").write_text(ci_build.ci_params([shared_data_dir()]))
    *steps, repro = ci_build.build_commands(jobs=2)
    for args in steps:
        sh(args, root)
    (root / REPRO_LOG).write_text(sh(repro, root))


def _pipeline_home(base: Path) -> Path:
    """The run's common temporary folder (every pytest-xdist worker's basetemp's parent)."""
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def build_pipeline_once(common: Path) -> Path:
    """The ci pipeline's project built in ``common`` (:func:`_build_pipeline`) once per test
    run: under a lock, by whoever gets there first (the background build
    :func:`pytest_collection_modifyitems` starts, or a test); the others wait."""
    import shutil

    from filelock import FileLock

    built = common / "ci-pipeline-built"
    with FileLock(str(common / "ci-pipeline.lock")):
        if not (built / ".complete").exists():
            shutil.rmtree(built, ignore_errors=True)
            _build_pipeline(built)
            (built / ".complete").touch()
    return built


def built_pipeline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ci pipeline's project (:func:`build_pipeline_once`) in the run's common temporary
    folder. Read it, never write into it (copy what you change)."""
    return build_pipeline_once(_pipeline_home(tmp_path_factory.getbasetemp()))


@pytest.fixture(scope="session")
def ci_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built ci pipeline's project (read only): sources, ``params.yaml``, ``dvc.lock``,
    every output, the notebooks as executed and the report, ``repro.log``."""
    return built_pipeline(tmp_path_factory)


@pytest.fixture(scope="session")
def ci_pipeline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every output of the ci pipeline (data, results, the executed notebooks and the report),
    copied for this test process (each pytest-xdist worker writes its own reports there).

    Returns a params file of the ci profile whose outputs lie beside it.
    """
    import shutil

    built = built_pipeline(tmp_path_factory)
    root = tmp_path_factory.mktemp("pipeline")
    for name in ("data", "results", "reports"):
        shutil.copytree(built / name, root / name, symlinks=True)
    return write_params(root)


#: The fixtures that read the built ci pipeline: their tests run last (the build runs meanwhile).
PIPELINE_FIXTURES = ("ci_project", "ci_pipeline")
_background: dict[str, subprocess.Popen[bytes]] = {}  # the build, in the worker that started it


@pytest.hookimpl(hookwrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]):
    """Mark tests that execute notebooks and those that read the built ci pipeline (before
    ``-m``/``-k`` select: ``make test-fast`` leaves both out); then, among the tests
    selected, move those that read the built ci pipeline to the end and start building it in
    the background, so the other tests run while it builds (instead of every pytest-xdist
    worker waiting on the first one's build). A run that selects none of them builds nothing."""
    for item in items:
        if "notebook" in item.nodeid:
            item.add_marker(pytest.mark.notebook)
        if any(f in getattr(item, "fixturenames", ()) for f in PIPELINE_FIXTURES):
            item.add_marker(pytest.mark.pipeline)
    yield
    uses = [any(f in getattr(item, "fixturenames", ()) for f in PIPELINE_FIXTURES)
            for item in items]
    items[:] = [item for item, u in zip(items, uses) if not u] + \
        [item for item, u in zip(items, uses) if u]
    if any(uses) and not config.option.collectonly:
        _start_background_build(config)


def _start_background_build(config: pytest.Config) -> None:
    """:func:`build_pipeline_once` in a child process, started by the first worker to get here
    (its log: ``ci-pipeline-build.log`` in the run's common temporary folder)."""
    import sys

    common = _pipeline_home(config._tmp_path_factory.getbasetemp())  # type: ignore[attr-defined]
    try:
        os.close(os.open(common / "ci-pipeline.started", os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return  # another worker started it
    code = ("import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); "
            "from conftest import build_pipeline_once; build_pipeline_once(Path(sys.argv[2]))")
    with open(common / "ci-pipeline-build.log", "w") as log:
        _background["build"] = subprocess.Popen(
            [sys.executable, "-c", code, str(Path(__file__).parent), str(common)],
            cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The background build: waited for (another worker's tests may still need it), or stopped
    with its process group when the run was interrupted."""
    import signal

    proc = _background.pop("build", None)
    if proc is None:
        return
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    proc.wait()


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


@pytest.fixture
def server():
    """A local HTTP file server on 127.0.0.1 (:class:`helpers.downloads.FileServer`)."""
    import threading
    from http.server import ThreadingHTTPServer

    from helpers.downloads import FileServer, Handler

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    state = FileServer()
    state.base = f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.state = state  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
