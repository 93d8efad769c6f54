r"""Lineage: the pipeline's graph, which stage output a file comes from, and what a notebook read.

Everything here is read from ``dvc.lock`` (DVC's record of every stage's dependencies and
outputs, with their hashes) and from the files themselves:

    dvc.lock --stage_graph--> stage id -> the stage ids directly upstream of it (a dependency
                              path is, holds or lies inside one of their outputs: DVC's rule)
             --mermaid------> the rendered pipeline (docs/pipeline.md), foreach items folded
    a path   --locate-------> the stage output holding it: (stage id, output path, dvc.lock md5)
    a path   --dvc_md5------> DVC's hash of it as it is now: a file's md5, or a folder's
                              md5(json([{"md5", "relpath"}, ...] sorted by relpath)) + ".dir"
    opens    --ReadLog------> the files a process opened for reading under some roots
                              (``sys.addaudithook``'s ``open`` event: pandas, json, numpy)

A figure's provenance ([`workbench.report.sections.Section.figure`][]) is the files it
declares it reads, held to what the notebook really opened, each mapped to its stage output and
that output's ``dvc.lock`` hash; ``current`` says whether the output on disk still has exactly
that hash (a notebook run by hand on results the pipeline did not record says ``False``).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ["stage_graph", "behind", "base", "load_lock", "locate", "outdated", "dvc_md5", "Output",
           "ReadLog", "mermaid"]


def base(stage_id: str) -> str:
    """The stage's name without its foreach item: ``preprocess@criteo_sample`` -> ``preprocess``."""
    return stage_id.split("@", 1)[0]


def load_lock(root: Path) -> dict[str, Any]:
    """``root/dvc.lock`` parsed (empty when there is none)."""
    path = Path(root) / "dvc.lock"
    return (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}


def _outs(lock: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {stage: list(entry.get("outs", []))
            for stage, entry in lock.get("stages", {}).items()}


def _related(a: str, b: str) -> bool:
    """One path is, holds or lies inside the other (relative POSIX paths)."""
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def stage_graph(lock: dict[str, Any]) -> dict[str, set[str]]:
    """Each stage id of ``dvc.lock`` -> the stage ids directly upstream of it."""
    stages = lock.get("stages", {})
    outs = {stage: [str(o["path"]).rstrip("/") for o in entries]
            for stage, entries in _outs(lock).items()}
    graph: dict[str, set[str]] = {}
    for stage, entry in stages.items():
        ups: set[str] = set()
        for dep in entry.get("deps", []):
            path = str(dep["path"]).rstrip("/")
            ups.update(other for other, paths in outs.items()
                       if other != stage and any(_related(path, o) for o in paths))
        graph[stage] = ups
    return graph


def behind(stages: Iterable[str], graph: dict[str, set[str]]) -> list[str]:
    """``stages`` and everything upstream of them (sorted)."""
    todo, seen = list(stages), set()
    while todo:
        s = todo.pop()
        if s not in seen:
            seen.add(s)
            todo.extend(graph.get(s, ()))
    return sorted(seen)


@dataclass(frozen=True)
class Output:
    """A stage output as ``dvc.lock`` records it.

    Attributes:
        stage: the stage id (``hotline``, ``preprocess@criteo_sample``).
        path: the output's path, relative to the project root.
        md5: its hash in ``dvc.lock`` (a folder's ends in ``.dir``).
    """

    stage: str
    path: str
    md5: str


def locate(path: str, lock: dict[str, Any]) -> Output | None:
    """The stage output that is or holds ``path`` (relative to the project root), or None (no
    stage writes it)."""
    path = path.rstrip("/")
    for stage, entries in _outs(lock).items():
        for out in entries:
            where = str(out["path"]).rstrip("/")
            if path == where or path.startswith(where + "/"):
                return Output(stage, where, str(out.get("md5", "")))
    return None


def outdated(lineage: dict[str, Any] | None, lock: dict[str, Any]) -> list[str]:
    """The stage outputs a section read whose ``dvc.lock`` hash has changed since: each as
    ``<path> (read at <md5>, dvc.lock now <md5>)``; empty when the section is current.

    Args:
        lineage: the section's ``lineage`` (its ``outputs``: path, md5), or None.
        lock: ``dvc.lock`` parsed ([`load_lock`][]).
    """
    out = []
    for read in (lineage or {}).get("outputs", []):
        now = locate(read["path"], lock)
        if now is not None and now.md5 != read["md5"]:
            out.append(f"{read['path']} (read at {read['md5'][:12]}, dvc.lock now {now.md5[:12]})")
    return out


def _file_md5(path: Path) -> str:
    digest = hashlib.md5()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def dvc_md5(path: Path) -> str:
    """DVC's (3.x) hash of a file or folder as it is on disk, comparable with ``dvc.lock``'s.

    Raises:
        FileNotFoundError: ``path`` does not exist.
    """
    path = Path(path)
    if path.is_file():
        return _file_md5(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such file or folder")
    entries = [{"md5": _file_md5(p), "relpath": p.relative_to(path).as_posix()}
               for p in path.rglob("*") if p.is_file()]
    entries.sort(key=lambda e: tuple(e["relpath"].split("/")))
    return hashlib.md5(json.dumps(entries, sort_keys=True).encode()).hexdigest() + ".dir"


_LOGS: list[ReadLog] = []  # the active logs; the hook below feeds them
_HOOKED = False


def _is_read(mode: Any, flags: Any) -> bool:
    if isinstance(mode, str):
        return "r" in mode and "+" not in mode
    return isinstance(flags, int) and not flags & (os.O_WRONLY | os.O_RDWR)


def _hook(event: str, args: tuple[Any, ...]) -> None:
    """The audit hook: every ``open`` for reading goes to each active log whose roots hold it."""
    if event != "open" or not _LOGS:
        return
    try:
        path, mode, flags = args
        if isinstance(path, int) or path is None or not _is_read(mode, flags):
            return
        name = os.path.abspath(os.fsdecode(path))
        for log in _LOGS:
            log._add(name)
    except Exception:  # noqa: BLE001 - an audit hook must never break the open it watches
        return


@dataclass(eq=False)
class ReadLog:
    """The files this process opened for reading under ``roots`` while the log is active.

    Python's audit hooks cannot be removed, so one hook is installed the first time a log
    starts and feeds every active log; a stopped log costs nothing. Reads from C code that
    bypasses Python's ``open`` (e.g. pyarrow's own file system) are not seen.

    Args:
        roots: folders whose files are logged (e.g. the results root).
    """

    roots: tuple[Path, ...]
    files: set[Path] = field(default_factory=set)

    def __post_init__(self) -> None:
        self._prefixes = tuple(os.path.abspath(r).rstrip(os.sep) + os.sep for r in self.roots)

    def _add(self, name: str) -> None:
        if name.startswith(self._prefixes):
            self.files.add(Path(name))

    def _over(self, roots: Iterable[Path]) -> bool:
        """Whether this log watches exactly ``roots``."""
        return {os.path.abspath(r) for r in self.roots} == {os.path.abspath(r) for r in roots}

    @classmethod
    def shared(cls, roots: Iterable[Path]) -> ReadLog:
        """The active log over exactly ``roots`` (started earlier in this process, e.g. by
        [`workbench.report.notebook.notebook_config`][] before a notebook reads its results),
        or a new one, started."""
        roots = tuple(roots)
        for log in _LOGS:
            if log._over(roots):
                return log
        return cls(roots).start()

    @classmethod
    def fresh(cls, roots: Iterable[Path]) -> ReadLog:
        """A new log over ``roots``, started, replacing any active one over the same roots (a
        notebook run again in the same kernel starts from nothing)."""
        roots = tuple(roots)
        for log in list(_LOGS):
            if log._over(roots):
                log.stop()
        return cls(roots).start()

    def start(self) -> ReadLog:
        """Begin logging (idempotent); returns the log."""
        global _HOOKED
        if not _HOOKED:
            sys.addaudithook(_hook)
            _HOOKED = True
        if self not in _LOGS:
            _LOGS.append(self)
        return self

    def stop(self) -> None:
        """Stop logging (the files logged so far stay)."""
        if self in _LOGS:
            _LOGS.remove(self)

    def under(self, path: Path) -> list[Path]:
        """The logged files that are ``path`` or lie inside it, sorted."""
        target = Path(os.path.abspath(path))
        return sorted(f for f in self.files if f == target or target in f.parents)


def mermaid(graph: dict[str, set[str]], unfold: tuple[str, ...] = ("notebook",)) -> str:
    """The pipeline as a Mermaid flowchart: one node per stage name (a foreach stage's items
    folded into one node, labelled with their count; the stages in ``unfold`` keep one node per
    item), one edge per upstream relation."""
    def node(stage: str) -> str:
        return stage if base(stage) in unfold else base(stage)

    items: dict[str, int] = {}
    for stage in graph:
        items[node(stage)] = items.get(node(stage), 0) + 1
    edges = sorted({(node(up), node(stage)) for stage, ups in graph.items() for up in ups
                    if node(up) != node(stage)})
    order = sorted(items)
    ids = {name: f"s{i}" for i, name in enumerate(order)}
    lines = ["flowchart LR"]
    lines += [f'  {ids[n]}["{n}' + (f" x{items[n]}" if items[n] > 1 else "") + '"]'
              for n in order]
    lines += [f"  {ids[a]} --> {ids[b]}" for a, b in edges]
    return "\n".join(lines)
