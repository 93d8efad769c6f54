"""Where the repository is, and paths relative to it.

Relative paths in the configuration (``paths.*``, a local dataset's ``path``) are relative to the
repository root, not to the working directory, so every stage resolves them the same way
wherever DVC or a notebook starts it.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CONF_DIR = REPO_ROOT / "conf"
PARAMS_FILE = REPO_ROOT / "params.yaml"
NOTEBOOK_DIR = REPO_ROOT / "notebooks"
#: Where a notebook run by hand (JupyterLab, papermill) writes its figures and tables unless told
#: otherwise: ignored by git, so a hand run never rewrites the committed ``reports/``.
SCRATCH_DIR = REPO_ROOT / "scratch"


def resolve(path: Path | str) -> Path:
    """``path`` itself when absolute, else ``REPO_ROOT / path``."""
    p = Path(path)
    return p if p.is_absolute() else REPO_ROOT / p


def cli_path(text: str) -> Path:
    """A path typed on a command line: relative to the shell's working directory, as a shell user
    means it (made absolute here, so the repository-root rule of :func:`resolve` never applies)."""
    return Path(text).absolute()


def notebook_output(name: str, out_dir: Path | str | None) -> Path:
    """Where notebook ``name`` writes its figures, tables and ``section.json``.

    ``None`` (a notebook opened in JupyterLab or run by hand) is ``scratch/<name>``; the
    pipeline's ``notebook`` stage passes ``reports/<name>``. A relative path is relative to the
    repository root, wherever the kernel started.
    """
    return SCRATCH_DIR / name if out_dir is None else resolve(out_dir)


def repo_relative(path: Path | str) -> str:
    """``path`` relative to the repository root when inside it, else absolute (portable records)."""
    resolved = Path(path).resolve()
    try:
        return str(resolved.relative_to(REPO_ROOT))
    except ValueError:
        return str(resolved)


def known_notebooks() -> list[str]:
    """The figure notebooks, ``notebooks/<name>.py``, by name (sorted)."""
    return sorted(p.stem for p in NOTEBOOK_DIR.glob("*.py"))
