"""The ci profile's project: ``make repro`` then ``make check`` at CI's size, end to end.

``make check-ci`` (``python -m workbench.ci_project [--dir DIR] [--from BUILT] [--jobs N]``)
runs the reviewer's "reproduce and check" on the ci profile (every stage in seconds) in a
project of its own, so this tree's committed ``results/`` and ``reports/`` are never touched:

1. **copy**: this tree's sources (``PROJECT_FILES`` and DVC's config, no outputs) in
   ``DIR/project``, a new git repository, with ``params.yaml`` on the ci profile (this tree's
   mirror folders, resolved here, so the copy reads the same already-downloaded files);
2. **build**: what a clone's ``make calibrate``, ``make het-long`` and ``make repro`` run
   (``build_commands``): every stage, notebook and the report. Its ``reports/claims.csv`` is
   the ci profile's committed claims table;
3. **check**: ``make check`` itself there, on that ``params.yaml`` (``make_command``: ``make -o
   params check`` with this interpreter's virtualenv): that table copied aside, every stage a
   claim is measured from forced (``python -m workbench.repro --claims``), every claim measured
   again and judged against it (``python -m workbench.claims.check``).

``--from BUILT`` copies an already built ci project (the test suite's, ``ci-pipeline-built`` in
pytest's temporary folder) instead of steps 1-2. The exit status is the check's: 0 when no
claim's state changed, 1 when one did, 2 on unreadable input; a failed build step exits with
its status. The test suite's ci pipeline (``tests/conftest.py``) is built by the same
``copy_sources`` and ``build_commands``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from workbench.utils.errors import UserError

#: What a copy of the project needs to run its pipeline (a clone's sources, no outputs).
PROJECT_FILES = ("workbench", "notebooks", "dvc.yaml", ".dvcignore", "pyproject.toml",
                 "Makefile")
#: The built project's log of its ``python -m workbench.repro`` run.
REPRO_LOG = "repro.log"
#: The file that marks a folder as made by this module (the only kind it replaces).
MARKER = ".workbench-ci-check"


def copy_sources(source: Path, root: Path) -> None:
    """The project's sources and DVC config from ``source`` in ``root`` (created; it must not
    exist), a new git repository: a clone's files, without outputs."""
    root.mkdir(parents=True)
    for name in PROJECT_FILES:
        src = source / name
        if src.is_dir():
            shutil.copytree(src, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, root / name)
    (root / ".dvc").mkdir()
    shutil.copy2(source / ".dvc" / "config", root / ".dvc" / "config")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)


def ci_params(mirrors: Sequence[Path]) -> str:
    """``params.yaml`` of the ci profile reading the given mirror folders (absolute)."""
    from workbench.config import compose, to_yaml, validate

    composed = compose(["profile=ci", f"paths.mirrors=[{','.join(map(str, mirrors))}]"])
    validate(composed)
    return to_yaml(composed)


def _tools() -> tuple[str, str]:
    """This interpreter and the ``dvc`` beside it."""
    return sys.executable, str(Path(sys.executable).parent / "dvc")


def build_commands(jobs: int = 2) -> list[list[str]]:
    """A clone's ``make calibrate``, ``make het-long`` and ``make repro`` on its
    ``params.yaml``: the frozen calibration and long runs measured and committed, then every
    stage through DVC, ``jobs`` at a time."""
    python, dvc = _tools()
    params = ["--params", "params.yaml"]
    return [[dvc, "repro", "--glob", "preprocess@*"],
            [python, "-m", "workbench.stages", "calibrate", *params],
            [dvc, "commit", "-f", "calibrate"],
            [python, "-m", "workbench.stages", "het-long", *params],
            [dvc, "commit", "-f", "het_long"],
            [python, "-m", "workbench.repro", "--jobs", str(jobs)]]


def make_command(target: str, *variables: str) -> list[str]:
    """``make -o params TARGET`` with this interpreter's virtualenv: the Makefile's recipe as a
    reviewer runs it, on the project's own ``params.yaml`` (``-o params``: not regenerated
    from the default profile) and without installing anything."""
    return ["make", "--no-print-directory", "-o", "params", target,
            f"VENV={Path(sys.executable).parent.parent}", *variables]


def tool_env() -> dict[str, str]:
    """The environment the commands run in: this interpreter's folder first on PATH (DVC's
    stages call ``python``), no progress bars, the project found from the working folder."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "TQDM_DISABLE": "1"}
    env.pop("WORKBENCH_ROOT", None)
    return env


def _run(commands: list[list[str]], root: Path) -> int:
    """Each command in ``root`` in turn, its output shown; the first non-zero status, or 0."""
    for args in commands:
        print(f"ci_project: {' '.join([Path(args[0]).name, *args[1:]])}", flush=True)
        code = subprocess.run(args, cwd=root, env=tool_env()).returncode
        if code:
            return code
    return 0


def prepare(folder: Path, source: Path, built: Path | None) -> Path:
    """``folder/project``, fresh: a copy of ``built`` when given, else this tree's sources with
    the ci profile's ``params.yaml``.

    Raises:
        UserError: ``built`` is no built ci project, or ``folder`` is this tree or holds it.
    """
    from workbench.data.download import mirror_folders
    from workbench.utils.paths import REPO_ROOT

    folder = folder.absolute()
    if folder == source or source.is_relative_to(folder):
        raise UserError(f"--dir {folder}: that folder holds this project; give a new one "
                        "(default: scratch/ci-check)")
    root = folder / "project"
    if built is not None and not ((built / "reports" / "claims.csv").is_file()
                                  and (built / "dvc.lock").is_file()):
        raise UserError(f"--from {built}: no built ci project there (no dvc.lock and "
                        "reports/claims.csv); leave --from out to build one")
    if folder.is_dir() and any(folder.iterdir()):
        if not (folder / MARKER).is_file():
            raise UserError(f"--dir {folder}: not empty and not made by make check-ci; give a "
                            "new folder (default: scratch/ci-check)")
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MARKER).touch()
    if built is not None:
        shutil.copytree(built, root, symlinks=True)
        return root
    from workbench.config import load

    copy_sources(source, root)
    mirrors = mirror_folders(load(params=REPO_ROOT / "params.yaml").paths.mirrors
                             if (REPO_ROOT / "params.yaml").is_file() else ["../shared/data"])
    (root / "params.yaml").write_text(ci_params(mirrors))
    return root


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m workbench.ci_project [--dir DIR] [--from BUILT] [--jobs N]``."""
    from workbench.utils.paths import REPO_ROOT

    parser = argparse.ArgumentParser(prog="python -m workbench.ci_project",
                                     description="make repro then make check on the ci "
                                                 "profile, in a project of its own")
    parser.add_argument("--dir", type=Path, default=REPO_ROOT / "scratch" / "ci-check",
                        help="the folder to build in, replaced (default: scratch/ci-check)")
    parser.add_argument("--from", dest="built", type=Path,
                        help="a built ci project to copy instead of building one")
    parser.add_argument("--jobs", type=int, default=2,
                        help="stages at a time in the build (default: 2)")
    args = parser.parse_args(argv)
    try:
        root = prepare(args.dir, REPO_ROOT.resolve(), args.built)
    except UserError as err:
        print(f"{type(err).__name__}: {err}", file=sys.stderr)
        return 2
    if args.built is None:
        code = _run(build_commands(args.jobs), root)
        if code:
            print(f"ci_project: the ci build failed (exit {code}); its project: {root}",
                  file=sys.stderr)
            return code
    code = _run([make_command("check")], root)
    print(f"ci_project: make check on the ci profile {'passed' if code == 0 else 'failed'} "
          f"(exit {code}) in {root}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
