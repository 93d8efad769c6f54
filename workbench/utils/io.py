"""Atomic file output: nothing is ever half-written.

Every writer goes through :func:`atomic_path`: the content is written to a temporary file in the
destination's directory and moved into place with ``os.replace`` (atomic on POSIX) only once it is
complete. If the writer raises, the temporary file is removed and the destination is untouched.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


@contextlib.contextmanager
def atomic_path(dest: Path | str, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path; on success move it to ``dest`` atomically.

    Args:
        dest: final location (its parent directories are created).
        suffix: suffix for the temporary name (some writers infer the format from it).

    Example::

        with atomic_path("out/table.parquet", suffix=".parquet") as tmp:
            df.to_parquet(tmp)
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp" + suffix,
                                    dir=dest.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600 files; give the usual permissions
    try:
        yield tmp
        os.replace(tmp, dest)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text(dest: Path | str, text: str) -> None:
    """Write ``text`` to ``dest`` atomically (UTF-8)."""
    with atomic_path(dest) as tmp:
        tmp.write_text(text, encoding="utf-8")


def _strict_json(obj: Any) -> Any:
    """Replace NaN/inf floats (not valid JSON) by None, recursively."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _strict_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_strict_json(v) for v in obj]
    return obj


def write_json(dest: Path | str, obj: Any) -> None:
    """Write ``obj`` as deterministic, strict JSON (sorted keys, NaN -> null) atomically."""
    write_text(dest, json.dumps(_strict_json(obj), indent=2, sort_keys=True, allow_nan=False)
               + "\n")


@contextlib.contextmanager
def atomic_dir(dest: Path | str) -> Iterator[Path]:
    """Yield a temporary directory; on success it replaces ``dest`` as a whole.

    The old ``dest`` (if any) is removed only after the new content is complete.
    """
    dest = Path(dest)
    tmp = _temp_dir_beside(dest)
    try:
        yield tmp
        _replace_dir(tmp, dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def _temp_dir_beside(dest: Path) -> Path:
    """A new empty directory next to ``dest`` (same filesystem: the final rename is atomic)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
    os.chmod(tmp, 0o777 & ~_UMASK)
    return tmp


def _journal(dest: Path) -> Path:
    """The journal of a multi-directory commit whose first directory is ``dest``."""
    return dest.with_name(f".{dest.name}.commit.json")


def _replace_dir(tmp: Path, dest: Path) -> None:
    """Put directory ``tmp`` at ``dest`` (the old ``dest`` removed after the rename)."""
    if dest.exists():
        old = dest.with_name(f".{dest.name}.old")
        if old.exists():
            shutil.rmtree(old)
        os.replace(dest, old)
        os.replace(tmp, dest)
        shutil.rmtree(old)
    else:
        os.replace(tmp, dest)


def finish_commit(dest: Path | str) -> bool:
    """Complete a multi-directory commit of :func:`atomic_dirs` that was interrupted.

    Args:
        dest: the first directory of the commit.

    Returns:
        Whether an interrupted commit was found (and rolled forward).
    """
    dest = Path(dest)
    journal = _journal(dest)
    if not journal.exists():
        return False
    for tmp, target in json.loads(journal.read_text()):
        if Path(tmp).exists():
            _replace_dir(Path(tmp), Path(target))
    journal.unlink()
    return True


@contextlib.contextmanager
def atomic_dirs(*dests: Path | str) -> Iterator[list[Path]]:
    """Like :func:`atomic_dir` for several directories that must change together.

    The new contents are built in temporary directories; on success a journal naming every
    ``(temporary, destination)`` pair is written (atomically), the directories are renamed into
    place, and the journal is removed. A process killed between two renames leaves the journal:
    :func:`finish_commit` (called here first, and by readers) completes the renames, so readers
    never see one directory new and another old.
    """
    paths = [Path(d) for d in dests]
    journal = _journal(paths[0])
    finish_commit(paths[0])
    with contextlib.ExitStack() as stack:
        tmps = [_temp_dir_beside(d) for d in paths]
        for tmp in tmps:
            # once the journal exists the temporaries belong to it (finish_commit moves them)
            def drop(t: Path = tmp) -> None:
                if t.exists() and not journal.exists():
                    shutil.rmtree(t)

            stack.callback(drop)
        yield tmps
        write_text(journal, json.dumps([[str(t), str(d)] for t, d in zip(tmps, paths)]))
        finish_commit(paths[0])
