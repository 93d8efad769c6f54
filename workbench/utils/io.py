"""Atomic file output: nothing is ever half-written.

Every writer goes through [`atomic_path`][]: the content is written to a temporary file in the
destination's directory and moved into place with ``os.replace`` (atomic on POSIX) only once it is
complete. If the writer raises, the temporary file is removed and the destination is untouched.

A full disk is the user's to fix, not a bug: [`disk_full_reported`][] turns "no space left on
device" raised inside it (by Python, pyarrow or DuckDB, whose errors carry only the text) into
one line, [`DiskFullError`][], ``disk full while writing <path> (N MB free under
paths.data): free space or set paths.data elsewhere``, after the temporaries are gone.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from workbench.utils.errors import UserError

#: How every library words ENOSPC (DuckDB's errors carry no errno, only this text).
_NO_SPACE = os.strerror(errno.ENOSPC)


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

    Example:

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


class ConcurrentRunError(UserError, RuntimeError):
    """Another run is writing the same output now."""


@contextlib.contextmanager
def writing(dest: Path) -> Iterator[None]:
    """Hold ``dest``'s writer lock (``.<name>.writing.lock`` beside it) for the block.

    Two runs writing one output (the same stage twice at once, a sweep's points on one
    dataset) would race in the directory replace; the second gets one line instead. Once the
    lock is held, the temporaries a killed earlier writer left are removed
    (`_drop_stale_temporaries`). The holder unlinks the lock file when it leaves (no file stays
    behind), so a run that opened the file just before is left holding a lock on an unlinked
    file: it checks that the path is still its file and otherwise locks again, so the lock
    stays exclusive.

    Raises:
        ConcurrentRunError: another process holds the lock.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: not guarded
        yield
        return
    lock = dest.with_name(f".{dest.name}.writing.lock")
    dest.parent.mkdir(parents=True, exist_ok=True)
    # the lock is made, checked and removed in the folder as it is now (by descriptor), so a
    # link on the way to it that is swapped while the block runs changes nothing
    with _folder(dest) as parent:
        while True:
            try:
                fd = os.open(lock.name, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0),
                             0o666 & ~_UMASK, dir_fd=parent)
            except OSError:
                kind = _kind_at(parent, lock.name)
                if kind is None:
                    raise
                raise ConcurrentRunError(
                    f"{lock}: the writer lock of {dest.name} is {kind}, which no run makes (a "
                    f"run's lock is a plain file it removes); remove it (rm "
                    f"{'-r ' * (kind == 'a folder')}'{lock}') and run again") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise ConcurrentRunError(
                    f"another run is writing {dest} now (it holds {lock}): wait for it to "
                    "finish, or give this run other paths (paths.data / paths.results)") from None
            if _same_file(fd, parent, lock.name):
                break
            # the holder released and unlinked the file this fd opened: a lock on it excludes
            # nobody (a third run may hold the new file's), so take the lock again on the name's
            os.close(fd)
        try:
            _drop_stale_temporaries(dest)
            yield
        finally:
            with contextlib.suppress(OSError):
                if _same_file(fd, parent, lock.name):
                    os.unlink(lock.name, dir_fd=parent)
            os.close(fd)


def _kind_at(parent: int, name: str) -> str | None:
    """``"a link"`` or ``"a folder"`` when ``name`` in the folder open as ``parent`` is one."""
    try:
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return None
    return ("a link" if stat.S_ISLNK(st.st_mode) else "a folder" if stat.S_ISDIR(st.st_mode)
            else None)


def _same_file(fd: int, parent: int, name: str) -> bool:
    """Whether ``name`` (not followed) in the folder open as ``parent`` is still the file
    ``fd`` opened."""
    try:
        held, named = os.fstat(fd), os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino)


def _drop_stale_temporaries(dest: Path) -> None:
    """Remove what a killed writer of ``dest`` left beside it: temporary folders and files
    (``.<name>.*.tmp`` and ``.<name>.*.tmp<suffix>``, as [`atomic_dir`][] and
    [`atomic_path`][] name them; DuckDB's work database lies inside such a folder). Only the
    holder of ``dest``'s writer lock writes them, so once it is held they are stale. Links are
    removed themselves, never followed; a pending commit journal's folders are kept (its
    [`finish_commit`][] moves them)."""
    if _journal(dest).exists():
        return
    import re

    # tempfile's names: 8 characters of [a-z0-9_] (so ``.x.y.<8>.tmp``, another output's, is
    # not one of ``x``'s)
    ours = re.compile(rf"\.{re.escape(dest.name)}\.[a-z0-9_]{{8}}\.tmp(\.[^/]*)?")
    with contextlib.suppress(OSError):
        for found in list(dest.parent.iterdir()):
            if ours.fullmatch(found.name):
                with contextlib.suppress(OSError):
                    remove_path(found)


@contextlib.contextmanager
def atomic_dir(dest: Path | str) -> Iterator[Path]:
    """Yield a temporary directory; on success it replaces ``dest`` as a whole.

    The old ``dest`` (if any) is removed only after the new content is complete; the writer
    lock ([`writing`][]) is held throughout, so a second run on ``dest`` fails at once.
    """
    dest = Path(dest)
    with writing(dest):
        tmp = _temp_dir_beside(dest)
        # the folder holding dest as it is now: the final renames and the clean-up act there
        # by descriptor, so a link on the way that is swapped while the stage runs (to point
        # at someone else's folder) moves nothing there
        with _folder(dest) as parent:
            try:
                if not os.path.samestat(os.stat(tmp, follow_symlinks=False),
                                        os.stat(tmp.name, dir_fd=parent, follow_symlinks=False)):
                    raise OSError(f"{dest.parent} changed while {tmp.name} was made in it: a "
                                  "link on the way to it was swapped; nothing was written")
                yield tmp
                _replace_at(parent, tmp.name, dest.name)
            finally:
                _remove_at(parent, tmp.name)


def _temp_dir_beside(dest: Path) -> Path:
    """A new empty directory next to ``dest`` (same filesystem: the final rename is atomic)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
    os.chmod(tmp, 0o777 & ~_UMASK)
    return tmp


def _journal(dest: Path) -> Path:
    """The journal of a multi-directory commit whose first directory is ``dest``."""
    return dest.with_name(f".{dest.name}.commit.json")


@contextlib.contextmanager
def _folder(path: Path) -> Iterator[int]:
    """A descriptor on ``path``'s folder as it is now (links on the way resolved once)."""
    parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield parent
    finally:
        os.close(parent)


def remove_path(path: Path) -> None:
    """Remove ``path`` whatever it is; a link is removed itself, never what it points to."""
    if not path.parent.is_dir():
        return
    with _folder(path) as parent:
        _remove_at(parent, path.name)


def _exists_at(parent: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _remove_at(parent: int, name: str) -> None:
    """[`remove_path`][] of ``name`` in the folder open as ``parent`` (a link is removed
    itself)."""
    try:
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(name, dir_fd=parent)
    else:
        os.unlink(name, dir_fd=parent)


def _replace_at(parent: int, tmp: str, dest: str) -> None:
    """[`_replace_dir`][] by descriptor: ``tmp`` becomes ``dest`` in the folder open as
    ``parent`` (the old ``dest``, a link included, moved aside and removed after)."""
    if _exists_at(parent, dest):
        old = f".{dest}.old"
        _remove_at(parent, old)
        os.replace(dest, old, src_dir_fd=parent, dst_dir_fd=parent)
        os.replace(tmp, dest, src_dir_fd=parent, dst_dir_fd=parent)
        _remove_at(parent, old)
    else:
        os.replace(tmp, dest, src_dir_fd=parent, dst_dir_fd=parent)


def _replace_dir(tmp: Path, dest: Path) -> None:
    """Put directory ``tmp`` (beside ``dest``) at ``dest``: [`_replace_at`][] in their folder.

    A link at ``dest`` or at its ``.old`` sibling is replaced or removed as a link: the folder it
    points to is never touched (the callers' path guard has refused links out of their root).
    """
    with _folder(dest) as parent:
        _replace_at(parent, tmp.name, dest.name)


class JournalError(UserError, ValueError):
    """A commit journal that this project did not write (or that names other folders)."""


_MARK = ".workbench-commit"
"""A file in each temporary folder of a multi-directory commit holding the journal's token."""


def _journal_pairs(journal: Path, dest: Path, others: Sequence[Path] = ()
                   ) -> list[tuple[Path, Path]]:
    """The ``(temporary, destination)`` pairs of ``journal``, each checked to be one that
    [`atomic_dirs`][] wrote: the first destination is ``dest`` (the journal lies beside it),
    every other one of ``others`` (the commit's folders, which the caller names: a journal
    cannot add one), each at most once; each temporary is a folder (not a link) beside its
    destination, named as `_temp_dir_beside` names it, and, where it still exists, holds the
    journal's random token. A planted journal can then name no folder but a commit's own: it
    can neither move nor delete anything else.

    Raises:
        JournalError: one line naming the journal and what is wrong, and the fix.
    """
    fix = f"delete {journal} (it is not the journal of an interrupted run) and run again"
    try:
        recorded = json.loads(journal.read_text())
        token = str(recorded["token"])
        pairs = [(Path(tmp), Path(target)) for tmp, target in recorded["pairs"]]
    except (OSError, ValueError, TypeError, KeyError) as err:
        raise JournalError(f"{journal}: not a commit journal ({type(err).__name__}: {err}); "
                           f"{fix}") from None
    if not pairs or pairs[0][1].absolute() != dest.absolute():
        raise JournalError(f"{journal}: its first folder is not {dest}; {fix}")
    allowed = {p.absolute() for p in others}
    named = [target.absolute() for _, target in pairs[1:]]
    if len(set(named)) != len(named) or not set(named) <= allowed:
        stray = sorted(str(t) for t in set(named) - allowed) or ["a folder twice"]
        raise JournalError(f"{journal}: names {', '.join(stray)}, not a folder of this commit "
                           f"({', '.join(str(p) for p in [dest, *others])}); {fix}")
    for tmp, target in pairs:
        beside = tmp.parent == target.parent and tmp.name.startswith(f".{target.name}.") \
            and tmp.name.endswith(".tmp") and not tmp.is_symlink()
        if not beside or (tmp.exists() and not _holds_token(tmp, token)):
            raise JournalError(f"{journal}: {tmp} is not a temporary folder of this commit "
                               f"of {target}; {fix}")
    return pairs


def _holds_token(folder: Path, token: str) -> bool:
    mark = folder / _MARK
    try:
        return folder.is_dir() and not mark.is_symlink() and mark.read_text() == token
    except OSError:
        return False


def finish_commit(dest: Path | str, *others: Path | str) -> bool:
    """Complete a multi-directory commit of [`atomic_dirs`][] that was interrupted.

    Args:
        dest: the first directory of the commit.
        others: its other directories (a journal naming any folder else is refused).

    Returns:
        Whether an interrupted commit was found (and rolled forward).

    Raises:
        JournalError: the journal is not one [`atomic_dirs`][] wrote (checked pair by pair
            before anything moves).
    """
    dest = Path(dest)
    journal = _journal(dest)
    if journal.is_symlink():
        raise JournalError(f"{journal} is a link, not a commit journal; delete it and run again")
    if not journal.exists():
        return False
    for tmp, target in _journal_pairs(journal, dest, [Path(p) for p in others]):
        if tmp.exists():
            _replace_dir(tmp, target)
            (target / _MARK).unlink(missing_ok=True)
    journal.unlink()
    return True


@contextlib.contextmanager
def atomic_dirs(*dests: Path | str) -> Iterator[list[Path]]:
    """Like [`atomic_dir`][] for several directories that must change together.

    The new contents are built in temporary directories; on success a journal naming every
    ``(temporary, destination)`` pair and a random token is written (atomically; each temporary
    holds the token too, so a journal planted by someone else names nothing it may move), the
    directories are renamed into place, and the journal is removed. A process killed between
    two renames leaves the journal: [`finish_commit`][] (called here first, and by readers)
    completes the renames, so readers never see one directory new and another old.
    """
    import secrets

    paths = [Path(d) for d in dests]
    journal = _journal(paths[0])
    finish_commit(*paths)
    token = secrets.token_hex(16)
    with contextlib.ExitStack() as stack:
        for d in paths:
            stack.enter_context(writing(d))
        tmps = [_temp_dir_beside(d) for d in paths]
        for tmp in tmps:
            # once the journal exists the temporaries belong to it (finish_commit moves them)
            def drop(t: Path = tmp) -> None:
                if t.exists() and not journal.exists():
                    shutil.rmtree(t)

            stack.callback(drop)
        yield tmps
        for tmp in tmps:  # written last: the caller's files are all there
            (tmp / _MARK).write_text(token)
        write_text(journal, json.dumps(
            {"token": token, "pairs": [[str(t), str(d)] for t, d in zip(tmps, paths)]}))
        finish_commit(*paths)


class DiskFullError(UserError, OSError):
    """The disk filled up while writing: the message names the path, the space left and the
    config key that moves the output elsewhere."""


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc``, or an exception it was raised from, is "no space left on device"."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if _NO_SPACE.lower() in str(current).lower():
            return True
        current = current.__cause__ or current.__context__
    return False


def free_mb(path: Path | str) -> int:
    """MB free on the filesystem of ``path`` (of its nearest existing parent)."""
    probe = Path(path).absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return shutil.disk_usage(probe).free >> 20


def physical_memory() -> int | None:
    """This machine's physical memory in bytes (None where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return None


@contextlib.contextmanager
def disk_full_reported(dest: Path | str, key: str) -> Iterator[None]:
    """Raise [`DiskFullError`][] for a full disk inside the block, naming ``dest`` and ``key``.

    Put it outside the block's [`atomic_dir`][] / [`atomic_path`][], so the space is measured
    after their temporaries are removed (what the user has to work with).

    Args:
        dest: what the block writes (a file or a directory).
        key: the config key whose directory holds ``dest`` (``paths.data``).
    """
    try:
        yield
    except Exception as exc:
        if isinstance(exc, DiskFullError) or not is_disk_full(exc):
            raise
        raise DiskFullError(f"disk full while writing {dest} ({free_mb(dest):,} MB free under "
                            f"{key}): free space or set {key} elsewhere") from exc
