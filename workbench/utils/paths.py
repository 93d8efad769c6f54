"""Where the project root is, and paths relative to it.

The project root is the directory that holds ``params.yaml``, ``data/``, ``results/``,
``reports/``, ``scratch/`` (and, in a source checkout, ``notebooks/``). It is, in this order:

1. ``$WORKBENCH_ROOT`` when that environment variable is set (and not empty); a relative value is
   relative to the working directory;
2. the source checkout, when the package runs from one: the package directory's parent holds
   ``pyproject.toml`` and ``dvc.yaml`` (an editable install or ``python -m`` in the checkout);
3. else the current working directory (a regular ``pip install .``: the package lives in
   ``site-packages``, which is never written to).

It is fixed once, when this module is imported ([`REPO_ROOT`][]; [`PROJECT_ROOT`][] is the
same path). Relative paths in the configuration (``paths.*``, a local dataset's ``path``) are
relative to the project root, not to the working directory, so every stage resolves them the same
way wherever DVC or a notebook starts it. The configuration tree itself, [`CONF_DIR`][], is
package data (``workbench/conf/``) and always read from the package.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from workbench.utils.validation import ConfigError

#: The ``workbench`` package directory (in the checkout or in ``site-packages``).
PACKAGE_DIR = Path(__file__).resolve().parents[1]
#: Environment variable that names the project root explicitly.
ROOT_ENV = "WORKBENCH_ROOT"


def is_checkout(path: Path) -> bool:
    """Whether ``path`` is a source checkout (it holds ``pyproject.toml`` and ``dvc.yaml``)."""
    return (path / "pyproject.toml").is_file() and (path / "dvc.yaml").is_file()


def project_root(environ: Mapping[str, str] | None = None, package_dir: Path | None = None,
                 cwd: Path | None = None) -> Path:
    """The project root by the rule of this module's docstring (absolute).

    Args:
        environ: the environment (default ``os.environ``).
        package_dir: the ``workbench`` package directory (default this package's).
        cwd: the working directory (default the process's).
    """
    environ = os.environ if environ is None else environ
    package_dir = PACKAGE_DIR if package_dir is None else package_dir
    base = Path.cwd() if cwd is None else cwd
    value = environ.get(ROOT_ENV, "")
    if value:
        path = Path(value).expanduser()
        return (path if path.is_absolute() else base / path).resolve()
    if is_checkout(package_dir.parent):
        return package_dir.parent
    return base.resolve()


#: The project root (see the module docstring); the historical name, used throughout.
REPO_ROOT = project_root()
PROJECT_ROOT = REPO_ROOT
#: The Hydra configuration tree, shipped inside the package.
CONF_DIR = PACKAGE_DIR / "conf"
PARAMS_FILE = REPO_ROOT / "params.yaml"
NOTEBOOK_DIR = REPO_ROOT / "notebooks"
#: Where a notebook run by hand (JupyterLab, papermill) writes its figures and tables unless told
#: otherwise: ignored by git, so a hand run never rewrites the committed ``reports/``.
SCRATCH_DIR = REPO_ROOT / "scratch"


#: A name from the user that becomes one directory level (a dataset, a notebook): letters,
#: digits, ``_``, ``.``, ``-``, not starting with ``.`` -- so never ``..``, ``/`` or absolute.
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
MAX_NAME = 100
"""The longest plain name (a file system allows 255 bytes a name)."""


def check_name(key: str, name: object) -> str:
    """``name`` when it is a plain name ([`PLAIN_NAME`][]), else a one-line ``ConfigError``
    naming ``key``: a name from the user is a name, never a path."""
    if not isinstance(name, str) or not PLAIN_NAME.fullmatch(name):
        raise ConfigError(f"{key} = {name!r}: must be a plain name (letters, digits, '_', '.', "
                          "'-'; not starting with '.'; no '/')")
    if len(name) > MAX_NAME:
        raise ConfigError(f"{key} = {name[:20]!r}... ({len(name)} characters): must be at most "
                          f"{MAX_NAME} characters (it names folders, and their temporary "
                          "siblings add to it)")
    return name


def inside(root: Path | str, *parts: str, key: str = "path",
           guard: Path | str | None = None) -> Path:
    """``root / parts`` after checking it stays inside ``guard`` (default ``root``; symbolic
    links followed, at every level below ``guard``).

    The one guard of every path built from a user's name or file list: a data or results
    directory that a stage replaces, a local dataset's file. ``..``, an absolute part or a link
    out of ``guard`` raises a one-line ``ConfigError`` naming ``key``. Pass the data or results
    root as ``guard`` when ``root`` is a folder below it (``data/processed``): a link planted at
    ``data/processed`` itself is then refused too.
    """
    base = Path(root)
    fence = Path(guard) if guard is not None else base
    path = base.joinpath(*parts)
    real_fence = fence.resolve()
    real = path.resolve()
    if any(Path(part).is_absolute() for part in parts) or (
            real != real_fence and real_fence not in real.parents):
        shown = "/".join(parts)
        raise ConfigError(f"{key} = {shown!r}: must stay inside {fence} (no '..', no absolute "
                          "path, no link out of it)")
    return path


def resolve(path: Path | str) -> Path:
    """``path`` itself when absolute, else ``REPO_ROOT / path`` (the project root)."""
    p = Path(path)
    return p if p.is_absolute() else REPO_ROOT / p


def cli_path(text: str) -> Path:
    """A path typed on a command line: relative to the shell's working directory, as a shell user
    means it (made absolute here, so the project-root rule of [`resolve`][] never applies)."""
    return Path(text).absolute()


#: The project's own folders (committed files, or the pipeline's data and results): a
#: notebook's out_dir may not lie in one (reports/<name> is the notebook stage's own).
PROJECT_FOLDERS = frozenset({".git", ".dvc", ".ci", "workbench", "docs", "tests", "notebooks",
                             "benchmarks", "data", "results", "reports", "site"})


def notebook_output(name: str, out_dir: Path | str | None) -> Path:
    """Where notebook ``name`` writes its figures, tables and ``section.json``.

    ``None`` (a notebook opened in JupyterLab or run by hand) is ``scratch/<name>``; the
    pipeline's ``notebook`` stage passes ``reports/<name>``. A relative path is relative to the
    project root, wherever the kernel started. An empty value, the project root or a folder
    above it is refused (``ConfigError``): the section's ``README.md`` would replace another;
    so is a folder inside one of [`PROJECT_FOLDERS`][] (another notebook's section under
    ``reports/``, ``docs/``, ``results/``...) other than ``reports/<name>`` (the path is
    resolved: a link to one is refused too).
    """
    if out_dir is None:
        return SCRATCH_DIR / name
    if not str(out_dir).strip():
        raise ConfigError(f"out_dir = {str(out_dir)!r}: give a folder for the notebook's figures "
                          f"and tables, e.g. out_dir=scratch/{name}")
    path = resolve(out_dir)
    root = REPO_ROOT.resolve()
    if path.resolve() == root or path.resolve() in root.parents:
        raise ConfigError(f"out_dir = {str(out_dir)!r} is the project's root or above it: its "
                          f"README.md would be overwritten; give a folder of its own, e.g. "
                          f"out_dir=scratch/{name}")
    try:
        inside = path.resolve().relative_to(root).parts
    except ValueError:
        return path
    if inside and inside[0] in PROJECT_FOLDERS and inside != ("reports", name):
        what = (f"notebook {inside[1]}'s section" if inside[0] == "reports" and len(inside) > 1
                else f"the project's {inside[0]}/")
        raise ConfigError(f"out_dir = {str(out_dir)!r} is inside {what}, whose committed files "
                          f"its figures, tables and section.json would replace (only the "
                          f"pipeline writes reports/{name}); give a folder of its own, e.g. "
                          f"out_dir=scratch/{name}")
    return path


def repo_relative(path: Path | str) -> str:
    """``path`` relative to the project root when inside it, else absolute (portable records)."""
    resolved = Path(path).resolve()
    try:
        return str(resolved.relative_to(REPO_ROOT))
    except ValueError:
        return str(resolved)


def known_notebooks() -> list[str]:
    """The figure notebooks, ``notebooks/<name>.py``, by name (sorted)."""
    return sorted(p.stem for p in NOTEBOOK_DIR.glob("*.py"))
