"""Detect a damaged ``dvc.lock`` before trusting it.

DVC (3.x) rewrites ``dvc.lock`` in place after every stage (``open(path, "w+")`` in
``dvc/utils/serialize/_common.py``), not through a temporary file and a rename: a ``dvc repro``
killed while it writes leaves a lock cut short, often still valid YAML. DVC then sees the lost
stages as never run and recomputes them, and a cut entry may hold hashes of only some of a
stage's dependencies. This check, run by ``make repro`` before ``dvc repro``, compares the lock
with the pipeline and with the committed lock:

    dvc.yaml stages (matrix expanded) --+
    dvc.lock entries -------------------+--> unreadable lock | entries missing | entries cut
    git HEAD:dvc.lock (when in git) ----+     (a stage in dvc.yaml and in the committed lock
                                               but not in the working lock was lost, not new)

Recovery (the README says the same): ``git checkout dvc.lock`` restores the committed lock,
then ``make repro`` reruns only what changed since.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

#: The keys a complete lock entry has for each part its dvc.yaml stage declares.
_ENTRY_KEYS = ("cmd", "deps", "params", "outs")


@dataclass
class LockReport:
    """What is wrong with a lock (all empty: nothing)."""

    unreadable: str = ""
    lost: list[str] = field(default_factory=list)
    cut: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.unreadable or self.lost or self.cut)

    def message(self, lock: Path) -> str:
        """One paragraph naming the problem and the recovery."""
        if self.unreadable:
            what = f"{lock} is not readable YAML ({self.unreadable})"
        else:
            parts = []
            if self.lost:
                parts.append(f"no entry for {len(self.lost)} stage(s) the committed lock has "
                             f"({', '.join(self.lost[:5])}{', ...' if len(self.lost) > 5 else ''})")
            if self.cut:
                parts.append(f"incomplete entries for {', '.join(self.cut)}")
            what = f"{lock} is damaged: " + "; ".join(parts)
        return (f"{what}. A dvc repro interrupted while writing it leaves it so (DVC does not "
                f"write it atomically). Restore the committed lock with `git checkout "
                f"{lock.name}` and run `make repro` again; it reruns only what changed.")


def _stages(repo: Path) -> dict[str, dict[str, bool]]:
    """Every stage of ``dvc.yaml`` (matrix expanded), with which parts it declares."""
    from dvc.repo import Repo

    with Repo(str(repo)) as dvc_repo:
        return {s.addressing: {"cmd": bool(s.cmd), "deps": bool(s.deps),
                               "params": bool(getattr(s, "params", None)),
                               "outs": bool(s.outs)}
                for s in dvc_repo.index.stages if s.addressing != "dvc.yaml"}


def _committed_stages(repo: Path, lock: Path) -> set[str] | None:
    """Stage names in ``HEAD:dvc.lock``, or None outside git or when it is not committed."""
    try:
        text = subprocess.run(["git", "show", f"HEAD:{lock.relative_to(repo).as_posix()}"],
                              cwd=repo, capture_output=True, text=True, check=True).stdout
        return set((yaml.safe_load(text) or {}).get("stages", {}))
    except (OSError, subprocess.CalledProcessError, yaml.YAMLError, ValueError):
        return None


def check(repo: Path, stages: dict[str, dict[str, bool]] | None = None) -> LockReport:
    """Check ``repo/dvc.lock`` against the pipeline (and the committed lock, in git).

    Args:
        repo: the repository root (holding ``dvc.yaml``).
        stages: the pipeline's stages as `_stages` gives them (read from ``dvc.yaml``
            when None).

    Returns:
        A [`LockReport`][]; a missing lock (nothing run yet) is fine.
    """
    lock = repo / "dvc.lock"
    if not lock.exists():
        return LockReport()
    try:
        data: Any = yaml.safe_load(lock.read_text())
    except yaml.YAMLError as err:
        return LockReport(unreadable=str(err).splitlines()[0])
    if not isinstance(data, dict) or not isinstance(data.get("stages", {}), dict):
        return LockReport(unreadable="no 'stages' mapping")
    entries = data.get("stages", {})
    stages = _stages(repo) if stages is None else stages
    committed = _committed_stages(repo, lock)
    report = LockReport()
    for name, parts in stages.items():
        entry = entries.get(name)
        if entry is None:
            if committed is not None and name in committed:
                report.lost.append(name)
            continue
        if not isinstance(entry, dict) or any(
                parts.get(key) and key not in entry for key in _ENTRY_KEYS):
            report.cut.append(name)
    return report


def main() -> None:
    """``python -m workbench.utils.dvc_lock``: exit 1 with the recovery when the lock is damaged."""
    import sys

    from workbench.utils.paths import REPO_ROOT

    report = check(REPO_ROOT)
    if not report.ok:
        sys.exit(f"LockError: {report.message(REPO_ROOT / 'dvc.lock')}")


if __name__ == "__main__":
    main()
