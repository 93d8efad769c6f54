"""What a fetched file must be, and the errors of getting it: digests, sizes, stamps.

A [`RemoteFile`][workbench.data.source.RemoteFile] publishes an md5 and/or sha256 and a size;
[`check_file`][] checks a local file against them (a digest, else the size, else existence),
remembering a successful digest in a stamp (``.<name>.verified.json``, keyed by size and mtime)
so a multi-GB archive is not re-hashed on every run. `_Hasher` hashes bytes as they
stream (a download, a mirror's copy, a derived file) and, for a ``.gz`` file without a published
digest, checks that they form complete gzip data. The error family of the data's acquisition
([`DownloadError`][], [`ChecksumError`][], [`ExtractError`][]) lives here, below the
downloader and the archive reader that raise it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import stat
import zlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from workbench.data.source import RemoteFile
from workbench.utils.errors import UserError
from workbench.utils.io import write_json

log = logging.getLogger(__name__)

CHUNK = 1 << 20
"""Bytes per read/write/hash step."""


class DownloadError(UserError, RuntimeError):
    """A raw file could not be obtained; the message says why and how to place it by hand.

    Attributes:
        tried: each URL tried, with why it failed (``"<url> (<reason>)"``).
    """

    def __init__(self, message: str, tried: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.tried = tuple(tried)


class ChecksumError(DownloadError):
    """A file's size or digest does not match the published value."""


class ExtractError(DownloadError):
    """An archive member could not be extracted (missing, unsafe name, corrupt archive)."""


class _GzipStream:
    """Whether bytes fed in order form complete gzip data: the magic, then members that each
    reach their end (a body cut short ends inside a member). Used when no checksum is published."""

    def __init__(self) -> None:
        self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self._head = b""
        self.error: str | None = None

    def update(self, data: bytes | memoryview) -> None:
        if self.error is not None:
            return
        data = bytes(data)
        if len(self._head) < 2:
            self._head += data[:2 - len(self._head)]
            if len(self._head) == 2 and self._head != b"\x1f\x8b":
                self.error = f"not gzip data (it starts with {self._head!r}, not the gzip magic)"
                return
        try:
            while data:
                self._z.decompress(data, 0)
                data = self._z.unused_data  # the next member of a multi-member file
                if data:
                    self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
                # discard output: only the structure is checked
        except zlib.error as err:
            self.error = f"not valid gzip data ({err})"

    def problem(self) -> str | None:
        """What is wrong with the data fed so far, taken as the whole file (None: nothing)."""
        if self.error is None and not self._z.eof:
            return "the gzip data ends early (the body was cut short)"
        return self.error


class _Hasher:
    """Incremental md5/sha256 of the digests a [`RemoteFile`][] publishes; for a ``.gz`` file
    without a published digest, a check that the bytes are complete gzip data instead."""

    def __init__(self, file: RemoteFile) -> None:
        self._h: dict[str, Any] = {}
        if file.md5 is not None:
            self._h["md5"] = hashlib.md5(usedforsecurity=False)
        if file.sha256 is not None:
            self._h["sha256"] = hashlib.sha256()
        self.gzip = _GzipStream() if not self._h and file.name.endswith(".gz") else None

    def update(self, data: bytes | memoryview) -> None:
        for h in self._h.values():
            h.update(data)
        if self.gzip is not None:
            self.gzip.update(data)

    def update_from(self, fh: IO[bytes], limit: int) -> None:
        """Hash the first ``limit`` bytes of ``fh`` (from its start)."""
        if (not self._h and self.gzip is None) or limit <= 0:
            return
        fh.seek(0)
        left = limit
        while left > 0:
            chunk = fh.read(min(CHUNK, left))
            if not chunk:
                break
            self.update(chunk)
            left -= len(chunk)
        fh.seek(0, os.SEEK_END)

    def hexdigests(self) -> dict[str, str]:
        return {k: h.hexdigest() for k, h in self._h.items()}


def _expected_digests(file: RemoteFile) -> dict[str, str]:
    out = {}
    if file.md5 is not None:
        out["md5"] = file.md5
    if file.sha256 is not None:
        out["sha256"] = file.sha256
    return out


def _digest_mismatch(file: RemoteFile, actual: dict[str, str]) -> str | None:
    """Describe the first digest that differs from the published one, or ``None``."""
    for algo, expected in _expected_digests(file).items():
        if actual.get(algo) != expected:
            return f"{algo} mismatch: expected {expected}, got {actual.get(algo)}"
    return None


def file_digests(path: Path | str, file: RemoteFile) -> dict[str, str]:
    """Compute the digests ``file`` publishes (md5 and/or sha256) of ``path``, streaming."""
    hasher = _Hasher(file)
    for chunk in _read_chunks(Path(path)):
        hasher.update(chunk)
    return hasher.hexdigests()


def _stamp_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.verified.json")


def _write_stamp(path: Path, digests: dict[str, str]) -> None:
    """Record ``path``'s verified ``digests`` (a stamp left by an earlier file is dropped)."""
    with contextlib.suppress(OSError):
        _stamp_path(path).unlink()
    if not digests:
        return
    try:
        st = path.stat()
        write_json(_stamp_path(path), {"size": st.st_size, "mtime_ns": st.st_mtime_ns, **digests})
    except OSError as e:  # a read-only raw directory must not break anything
        log.debug("could not write verification stamp for %s: %s", path, e)


def _stamp_ok(path: Path, file: RemoteFile, st: os.stat_result) -> bool:
    try:
        data = json.loads(_stamp_path(path).read_text())
    except (OSError, ValueError):
        return False
    if data.get("size") != st.st_size or data.get("mtime_ns") != st.st_mtime_ns:
        return False
    return all(data.get(k) == v for k, v in _expected_digests(file).items())


def check_file(path: Path | str, file: RemoteFile) -> str | None:
    """Check a local file against ``file``'s published checksum, else size, else existence.

    Args:
        path: the local file.
        file: what it should be.

    Returns:
        ``None`` when the file verifies, else a short description of the problem.
    """
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        return "missing"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if file.size is not None and st.st_size != file.size:
        return f"size {st.st_size} bytes, expected {file.size}"
    if not file.has_checksum:
        return None
    if _stamp_ok(path, file, st):
        return None
    log.info("verifying checksum of %s (%d bytes)", path, st.st_size)
    digests = file_digests(path, file)
    problem = _digest_mismatch(file, digests)
    if problem is None:
        _write_stamp(path, digests)
    return problem


def verify_file(path: Path | str, file: RemoteFile) -> None:
    """Raise [`ChecksumError`][] unless ``path`` verifies against ``file``
    (see [`check_file`][])."""
    problem = check_file(path, file)
    if problem is not None:
        raise ChecksumError(f"{file.name}: {Path(path).absolute()} does not verify: {problem}")


def _describe_expected(file: RemoteFile) -> str:
    bits = [f"{k} {v}" for k, v in _expected_digests(file).items()]
    if file.size is not None:
        bits.append(f"{file.size:,} bytes")
    return f" ({', '.join(bits)})" if bits else ""


def _copy_hashed(chunks: Iterable[bytes], dest: Path, file: RemoteFile) -> tuple[_Hasher, int]:
    """Write ``chunks`` to ``dest`` while hashing them as ``file`` publishes; flush to disk."""
    hasher = _Hasher(file)
    size = 0
    with open(dest, "wb") as out:
        for chunk in chunks:
            out.write(chunk)
            hasher.update(chunk)
            size += len(chunk)
        out.flush()
        os.fsync(out.fileno())
    return hasher, size


def _problem(file: RemoteFile, hasher: _Hasher, size: int) -> str | None:
    """What differs between bytes hashed by ``hasher`` and ``file`` (None: they verify)."""
    if file.size is not None and size != file.size:
        return f"size {size} bytes, expected {file.size}"
    return _digest_mismatch(file, hasher.hexdigests())


def _read_chunks(path: Path, limit: int | None = None) -> Iterator[bytes]:
    """The bytes of ``path`` (its first ``limit`` bytes), CHUNK at a time."""
    left = limit
    with open(path, "rb") as fh:
        while left is None or left > 0:
            chunk = fh.read(CHUNK if left is None else min(CHUNK, left))
            if not chunk:
                return
            if left is not None:
                left -= len(chunk)
            yield chunk


def check_not_in_the_way(path: Path, what: str, dir_wanted: bool) -> None:
    """Raise [`DownloadError`][] when ``path`` exists as the wrong kind (a directory where
    a file goes, or the reverse): the download could not be placed there."""
    if not path.exists():
        return
    if dir_wanted and not path.is_dir():
        raise DownloadError(f"{path} is a file, but {what} goes there: move or delete it and "
                            "run again")
    if not dir_wanted and not path.is_file():
        kind = "a directory" if path.is_dir() else "not a regular file"
        raise DownloadError(f"{path} is {kind}, but {what} goes there: move or delete it and "
                            "run again (or place the file there by hand)")
