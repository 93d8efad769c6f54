"""Provenance of what a notebook or the report drew: the commit, the sources that differ from
it, the package versions, and the digest of the configuration a notebook reads.

    provenance(repo, params)  commit, dirty sources (outside GENERATED), python, packages,
                              params.yaml sha256: the report's record
    config_digest(cfg, nb)    sha256 of the configuration sections a notebook's DVC stage
                              reads (its registry entry's params)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import platform
import subprocess
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from workbench.report.notebook_registry import NOTEBOOKS

GENERATED = ("results/", "reports/", "data/", "dvc.lock", "params.yaml")  # not "sources"
PROVENANCE_PACKAGES = ["torch", "numpy", "pandas", "pyarrow", "scipy", "numba", "hydra-core",
                       "dvc", "papermill", "jupytext", "matplotlib", "seaborn"]


def _plain(value: Any) -> Any:
    """A configuration value as JSON-able data (dataclasses, mappings, paths)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value if isinstance(value, (str, int, float, bool, type(None))) else str(value)


def config_digest(config: Any, name: str) -> tuple[str, list[str]]:
    """The sha256 (first 12 hex digits) of the configuration notebook ``name`` reads: the
    sections its registry entry names (its DVC params, [`workbench.report.notebook_registry`][]),
    or the whole configuration for a notebook not in the registry.

    Returns:
        ``(digest, sections)``: the digest and the dotted sections it covers (empty: all).
    """
    keys = list(NOTEBOOKS[name].params) if name in NOTEBOOKS else []
    chosen: Any = _plain(config)
    if keys:
        picked = {}
        for dotted in keys:
            node: Any = config
            for part in dotted.split("."):
                node = node[part] if isinstance(node, Mapping) else getattr(node, part)
            picked[dotted] = _plain(node)
        chosen = picked
    text = json.dumps(chosen, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12], keys


def _git(*args: str, cwd: Path) -> str | None:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def head_commit(repo: Path) -> str:
    """The commit ``repo`` has checked out, or ``"unknown"`` (no git, no commit)."""
    return _git("rev-parse", "HEAD", cwd=repo) or "unknown"


def _generated(path: str) -> bool:
    return any(path == g or (g.endswith("/") and path.startswith(g)) for g in GENERATED)


def dirty_sources(repo: Path) -> list[str] | None:
    """Files outside [`GENERATED`][] that differ from HEAD (staged or not), and new files git
    does not ignore (a module not yet committed changes what ran just as an edit does).

    Returns:
        The paths, sorted (empty: clean), or None when git cannot tell (no git, no commit).
    """
    changed = _git("diff", "--name-only", "-z", "HEAD", "--", cwd=repo)
    if changed is None:
        return None
    new = _git("ls-files", "--others", "--exclude-standard", "-z", cwd=repo) or ""
    paths = set(changed.split("\0")) | set(new.split("\0"))
    return sorted(p for p in paths if p and not _generated(p))


def provenance(repo: Path, params: Path) -> dict[str, Any]:
    """Git commit, modified sources, Python and package versions, and the params file's digest.

    Returns:
        ``commit`` (or ``"unknown"``), ``dirty`` (None: git cannot tell), ``dirty_files``,
        ``python``, ``packages`` (name -> version), ``params_sha256`` (None: no params file).
    """
    versions = {}
    for pkg in PROVENANCE_PACKAGES:
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = "not installed"
    dirty = dirty_sources(repo)
    return {"commit": head_commit(repo),
            "dirty": bool(dirty) if dirty is not None else None, "dirty_files": dirty or [],
            "python": platform.python_version(), "packages": versions,
            "params_sha256": (hashlib.sha256(params.read_bytes()).hexdigest()
                              if params.is_file() else None)}
