"""Unpack named members of a downloaded archive (``.tar``, ``.tar.gz``, ``.zip``), safely.

[`extract_members`][] writes each member through a temporary file moved into place with
``os.replace``, refuses absolute names, ``..`` (path traversal) and links, skips members already
extracted with the right size, and keeps a manifest (``.<archive>.extracted.json``) so that a
later call returns without reading a multi-GB archive again. Errors are
[`ExtractError`][workbench.data.verify.ExtractError] (a download error: the message says what to
do).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import shutil
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath
from typing import IO, Any

from workbench.data.verify import CHUNK, ExtractError, check_not_in_the_way
from workbench.utils.io import atomic_path, write_json

log = logging.getLogger(__name__)


def _member_parts(name: str) -> tuple[str, ...]:
    """Split an archive member name, refusing absolute names and ``..`` (path traversal)."""
    norm = name.replace("\\", "/")
    if not norm or norm.startswith("/") or re.match(r"^[A-Za-z]:", norm):
        raise ExtractError(f"unsafe archive member name {name!r}: absolute paths are not allowed")
    parts = tuple(p for p in PurePosixPath(norm).parts if p not in ("", "."))
    if not parts or any(p == ".." for p in parts):
        raise ExtractError(f"unsafe archive member name {name!r}: path traversal is not allowed")
    return parts


def _normal_name(name: str) -> str | None:
    """Archive entry name in canonical form, or ``None`` for an unsafe/empty name."""
    try:
        return "/".join(_member_parts(name))
    except ExtractError:
        return None


def _target(dest_dir: Path, member: str) -> Path:
    parts = _member_parts(member)
    target = dest_dir.joinpath(*parts)
    root = dest_dir.resolve()
    resolved = target.resolve()
    if resolved != root and root not in resolved.parents:
        raise ExtractError(f"unsafe archive member {member!r}: it would be written outside "
                           f"{dest_dir}")
    return target


def _manifest_path(archive: Path, dest_dir: Path) -> Path:
    return dest_dir / f".{archive.name}.extracted.json"


def _manifest_ok(manifest: Path, archive: Path, targets: dict[str, Path]) -> bool:
    try:
        data = json.loads(manifest.read_text())
        st = archive.stat()
    except (OSError, ValueError):
        return False
    if data.get("archive_size") != st.st_size or data.get("archive_mtime_ns") != st.st_mtime_ns:
        return False
    sizes = data.get("members", {})
    for member, target in targets.items():
        try:
            if sizes.get(member) != target.stat().st_size:
                return False
        except OSError:
            return False
    return True


def _copy_member(src: IO[bytes], target: Path) -> None:
    with atomic_path(target) as tmp, open(tmp, "wb") as dst:
        shutil.copyfileobj(src, dst, CHUNK)


def _existing_size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _extract_zip(archive: Path, targets: dict[str, Path]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    with zipfile.ZipFile(archive) as zf:
        index = {}
        for entry in zf.infolist():
            norm = _normal_name(entry.filename)
            if norm is not None and not entry.is_dir():
                index[norm] = entry
        for member, target in targets.items():
            info = index.get(member)
            if info is None:
                raise ExtractError(_missing_members_message(archive, [member], list(index)))
            mode = info.external_attr >> 16
            if mode and stat.S_ISLNK(mode):
                raise ExtractError(f"{archive}: member {member!r} is a symbolic link; refusing it")
            if _existing_size(target) == info.file_size:
                log.debug("%s already extracted", target)
            else:
                log.info("extracting %s from %s", member, archive.name)
                with zf.open(info) as src:
                    _copy_member(src, target)
            sizes[member] = info.file_size
    return sizes


def _extract_tar(archive: Path, targets: dict[str, Path]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    seen: list[str] = []
    # Streaming mode: one sequential pass over the (possibly multi-GB, gzip) archive.
    with tarfile.open(archive, mode="r|*") as tf:
        for info in tf:
            norm = _normal_name(info.name)
            if norm is None:
                continue
            if len(seen) < 50:
                seen.append(norm)
            if norm not in targets or norm in sizes:
                continue
            if not info.isreg():
                raise ExtractError(f"{archive}: member {norm!r} is not a regular file "
                                   "(link or directory); refusing it")
            target = targets[norm]
            if _existing_size(target) == info.size:
                log.debug("%s already extracted", target)
            else:
                log.info("extracting %s from %s", norm, archive.name)
                src = tf.extractfile(info)
                assert src is not None  # regular file
                _copy_member(src, target)
            sizes[norm] = info.size
            if len(sizes) == len(targets):
                break
    missing = [m for m in targets if m not in sizes]
    if missing:
        raise ExtractError(_missing_members_message(archive, missing, seen))
    return sizes


def _missing_members_message(archive: Path, missing: Sequence[str],
                             available: Sequence[str]) -> str:
    shown = ", ".join(list(available)[:20]) or "none"
    return f"{archive}: member(s) {', '.join(missing)} not found; the archive has: {shown}"


def extract_members(archive: Path | str, members: Iterable[str],
                    dest_dir: Path | str) -> list[Path]:
    """Extract the named members of a ``.tar``/``.tar.gz``/``.zip`` archive into ``dest_dir``.

    Each member goes to ``dest_dir/<member path>`` through a temporary file moved into place with
    ``os.replace``. Members already present with the right size are skipped, and a manifest
    (``.<archive>.extracted.json``) lets a later call return without reading the archive at all.

    Args:
        archive: the archive (format detected from its content).
        members: member paths inside the archive (``./`` prefixes are ignored).
        dest_dir: where to extract (created if needed).

    Returns:
        The extracted paths, in the order of ``members``.

    Raises:
        ExtractError: a member name is absolute or contains ``..``, a member is missing or is a
            link, or the archive is not a readable tar/zip file.
    """
    archive = Path(archive)
    dest_dir = Path(dest_dir).absolute()
    if isinstance(members, str):
        members = (members,)
    wanted = ["/".join(_member_parts(m)) for m in members]
    dest_dir.mkdir(parents=True, exist_ok=True)
    targets = {m: _target(dest_dir, m) for m in wanted}
    if not targets:
        return []
    for member, target in targets.items():
        check_not_in_the_way(target, f"member {member} of {archive.name}", dir_wanted=False)
    manifest = _manifest_path(archive, dest_dir)
    if _manifest_ok(manifest, archive, targets):
        return [targets[m] for m in wanted]
    if not archive.is_file():
        raise ExtractError(f"archive {archive} not found")
    try:
        if zipfile.is_zipfile(archive):
            sizes = _extract_zip(archive, targets)
        else:
            sizes = _extract_tar(archive, targets)
    except ExtractError:
        raise
    except (tarfile.TarError, zipfile.BadZipFile, zlib.error, EOFError, OSError) as e:
        raise ExtractError(
            f"cannot extract from {archive}: {type(e).__name__}: {e}. "
            "The archive may be corrupt or "
            "truncated; delete it and run again."
        ) from e
    st = archive.stat()
    old: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        prev = json.loads(manifest.read_text())
        if (prev.get("archive_size") == st.st_size
                and prev.get("archive_mtime_ns") == st.st_mtime_ns):
            old = prev.get("members", {})
    write_json(manifest, {"archive": archive.name, "archive_size": st.st_size,
                          "archive_mtime_ns": st.st_mtime_ns, "members": {**old, **sizes}})
    return [targets[m] for m in wanted]
