"""Download, verify and unpack the raw files of a registered dataset.

Behaviour of :func:`fetch` (one :class:`~workbench.data.registry.RemoteFile` into a directory):

* **Already there**: when ``<dest_dir>/<name>`` exists and verifies it is used as is and the network
  is not touched. "Verifies" means: the published checksum matches (md5 and/or sha256) when one is
  known, else the size matches when it is known, else the file merely exists. This is also how a
  user supplies a file by hand (datasets behind a login, machines without network): put it there.
  A successful checksum is remembered in a small stamp file (``.<name>.verified.json``, keyed by
  size and mtime) so a multi-GB archive is not re-hashed on every run.
* **Download**: bytes stream (1 MiB chunks, stdlib ``urllib``) into ``<dest_dir>/<name>.part``
  while md5/sha256 are computed incrementally. Mirrors are tried in order; a mirror that cannot be
  reached (DNS failure, refused connection, timeout, HTTP error) is skipped quickly (every socket
  operation is bounded by ``timeout``).
* **Resume**: if a ``.part`` exists the request carries ``Range: bytes=N-``. A ``206`` answer is
  appended (the existing part is hashed first); a server that ignores ``Range`` and answers ``200``
  makes the download restart from byte 0. A transfer that ends early (connection closed before
  ``Content-Length`` bytes, reset, timeout mid-body) keeps the ``.part`` and raises
  :class:`DownloadError`; running again resumes where it stopped.
* **Verification and atomic placement**: when the transfer is complete its size and checksum are
  checked, and only then is the ``.part`` moved to the final name with ``os.replace`` (atomic on
  POSIX): no partial or unverified file ever carries the final name. A wrong checksum deletes the
  ``.part`` and raises :class:`ChecksumError`.
* **Offline**: ``offline=True`` or ``WORKBENCH_OFFLINE=1`` forbids network access; a missing file
  raises :class:`DownloadError` at once, naming the absolute path to place it at.

:func:`extract_members` unpacks named members of a ``.tar(.gz)``/``.zip`` (each through a temporary
file and ``os.replace``, skipping members already extracted, refusing path traversal and links).
:func:`acquire` ties it together for a :class:`~workbench.data.registry.DatasetSource` and returns
the paths a parser should read.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import logging
import os
import re
import shutil
import socket
import stat
import tarfile
import time
import urllib.error
import urllib.request
import zipfile
import zlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import IO, Any

from workbench.data.registry import DatasetSource, RemoteFile
from workbench.utils.errors import UserError, WorkbenchError
from workbench.utils.io import atomic_path, is_disk_full, write_json

try:  # POSIX only; on other systems concurrent downloads of one file are not guarded
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

CHUNK = 1 << 20
#: A transfer slower than MIN_RATE bytes/s over RATE_WINDOW_S seconds is stopped (resumable).
MIN_RATE = 1024.0
RATE_WINDOW_S = 60.0
"""Bytes per read/write/hash step."""

OFFLINE_ENV = "WORKBENCH_OFFLINE"
"""Environment variable: set to ``1`` to forbid all network access."""

USER_AGENT = "workbench-data-download/1.0 (+python-urllib)"

_TRUE = {"1", "true", "yes", "on"}


class DownloadError(UserError, RuntimeError):
    """A raw file could not be obtained; the message says why and how to place it by hand."""


class ChecksumError(DownloadError):
    """A file's size or digest does not match the published value."""


class ExtractError(DownloadError):
    """An archive member could not be extracted (missing, unsafe name, corrupt archive)."""


class _MirrorFailed(WorkbenchError):
    """This URL did not deliver (before any byte was kept); try the next mirror."""


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def is_offline(offline: bool = False) -> bool:
    """Whether network access is forbidden (``offline`` or ``WORKBENCH_OFFLINE`` set to 1/true)."""
    return offline or os.environ.get(OFFLINE_ENV, "").strip().lower() in _TRUE


def _progress_enabled(progress: bool) -> bool:
    env = os.environ.get("TQDM_DISABLE", "").strip().lower()
    return progress and env in ("", "0", "false", "no", "off")


def _progress_bar(enabled: bool, total: int | None, initial: int, desc: str) -> Any:
    """A ``tqdm.auto`` byte progress bar (a no-op object when disabled or tqdm is missing)."""
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency, but do not fail on it
        enabled = False
    if not enabled:
        return _NoBar()
    return tqdm(total=total, initial=initial, unit="B", unit_scale=True, unit_divisor=1024,
                desc=desc, leave=False)


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


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
    """Incremental md5/sha256 of the digests a :class:`RemoteFile` publishes; for a ``.gz`` file
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
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            hasher.update(chunk)
    return hasher.hexdigests()


def _stamp_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.verified.json")


def _write_stamp(path: Path, digests: dict[str, str]) -> None:
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
    """Raise :class:`ChecksumError` unless ``path`` verifies against ``file``
    (see :func:`check_file`)."""
    problem = check_file(path, file)
    if problem is not None:
        raise ChecksumError(f"{file.name}: {Path(path).absolute()} does not verify: {problem}")


def _describe_expected(file: RemoteFile) -> str:
    bits = [f"{k} {v}" for k, v in _expected_digests(file).items()]
    if file.size is not None:
        bits.append(f"{file.size:,} bytes")
    return f" ({', '.join(bits)})" if bits else ""


def _manual_message(file: RemoteFile, final: Path, why: str, hint: str) -> str:
    msg = (f"could not obtain {file.name}: {why}\n"
           f"Place the file by hand at {final}{_describe_expected(file)} and run again.")
    if hint:
        msg += f"\n{hint}"
    return msg


def _reason(exc: BaseException) -> str:
    """A short human-readable reason for a network failure."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        inner = exc.reason
        if isinstance(inner, BaseException):
            return _reason(inner)
        return str(inner)
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return "timed out"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return f"name resolution failed ({exc})"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")
_CONTENT_RANGE_UNSAT = re.compile(r"bytes\s+\*/(\d+)")


@contextlib.contextmanager
def _locked_part(part: Path) -> Iterator[IO[bytes]]:
    """Open (create) ``part`` for append+read, holding an exclusive non-blocking lock."""
    fh = open(part, "a+b")
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise DownloadError(
                    f"{part} is being written by another process; wait for it to finish"
                ) from None
        yield fh
    finally:
        fh.close()


# --------------------------------------------------------------------------------------------
# fetch
# --------------------------------------------------------------------------------------------


def fetch(
    file: RemoteFile,
    dest_dir: Path | str,
    *,
    progress: bool = True,
    timeout: float = 30.0,
    offline: bool = False,
    hint: str = "",
    min_rate: float = MIN_RATE,
    rate_window_s: float = RATE_WINDOW_S,
) -> Path:
    """Make ``dest_dir/file.name`` present and verified, downloading it if needed.

    Without a published checksum, what can be checked is: the declared length (a body shorter
    than ``Content-Length`` is incomplete), the content (an HTML page or a transfer encoding
    other than identity is refused) and, for a ``.gz`` file, that the bytes are complete gzip
    data (a body cut short with no ``Content-Length`` ends inside the gzip stream).

    Args:
        file: the file to obtain (mirrors, checksums, size).
        dest_dir: directory to place it in (created if needed).
        progress: show a ``tqdm`` progress bar (also disabled by the ``TQDM_DISABLE`` env var).
        timeout: seconds allowed for connecting and for each socket read.
        min_rate: a transfer slower than this many bytes/s over ``rate_window_s`` stops (the
            ``.part`` is kept for resuming); 0 = no minimum.
        rate_window_s: the window of the minimum rate, seconds.
        offline: never use the network (also set by ``WORKBENCH_OFFLINE=1``).
        hint: extra text for the error message, e.g. the source's ``manual_hint``.

    Returns:
        The absolute path of the verified file.

    Raises:
        DownloadError: offline and missing; every mirror failed (the message lists each URL and
            its reason and the path to place the file at by hand); transfer incomplete (the
            ``.part`` is kept, run again to resume).
        ChecksumError: the downloaded (or present) file's size/digest does not match.
    """
    dest_dir = Path(dest_dir).absolute()
    final = dest_dir / file.name
    offline = is_offline(offline)
    part = dest_dir / f"{file.name}.part"
    for path, what in ((dest_dir, "the download directory"), (final, file.name),
                       (part, f"the partial download of {file.name}")):
        _check_not_in_the_way(path, what, dir_wanted=path == dest_dir)

    if final.exists():
        problem = check_file(final, file)
        if problem is None:
            log.debug("%s present and verified", final)
            return final
        if offline or not file.urls:
            raise ChecksumError(
                f"{final} is present but does not verify ({problem}). "
                "Replace it with the right file"
                f"{_describe_expected(file)}" + ("" if offline else " or delete it and run again")
                + (f".\n{hint}" if hint else ".")
            )
        log.warning("%s is present but does not verify (%s); downloading it again", final, problem)

    if offline:
        raise DownloadError(_manual_message(
            file, final,
            f"offline mode (offline=True or {OFFLINE_ENV}=1), the network is not used.", hint))
    if not file.urls:
        raise DownloadError(_manual_message(file, final, "it has no download URL.", hint))

    dest_dir.mkdir(parents=True, exist_ok=True)
    failures: list[str] = []
    with _locked_part(part) as fh:
        fh.seek(0, os.SEEK_END)
        have = fh.tell()
        if file.size is not None and have > file.size:
            log.warning("%s is larger than %s should be; discarding it", part, file.name)
            fh.truncate(0)
            have = 0
        if file.size is not None and have == file.size and have > 0:
            log.info("%s is complete from an earlier run; verifying it", part)
            hasher = _Hasher(file)
            hasher.update_from(fh, have)
            return _finish(fh, part, final, file, hasher, have, "an earlier run")

        for url in file.urls:
            try:
                hasher, size = _transfer(fh, part, url, file, timeout, progress,
                                         (min_rate, rate_window_s))
            except _MirrorFailed as e:
                log.warning("%s: %s", url, e)
                failures.append(f"  {url}: {e}")
                continue
            return _finish(fh, part, final, file, hasher, size, url)

        fh.seek(0, os.SEEK_END)
        empty = fh.tell() == 0
    if empty:
        with contextlib.suppress(OSError):
            part.unlink()
    raise DownloadError(_manual_message(
        file, final, "every download URL failed:\n" + "\n".join(failures), hint))


def _check_not_in_the_way(path: Path, what: str, dir_wanted: bool) -> None:
    """Raise :class:`DownloadError` when ``path`` exists as the wrong kind (a directory where
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


def _finish(fh: IO[bytes], part: Path, final: Path, file: RemoteFile, hasher: _Hasher,
            size: int, origin: str) -> Path:
    """Verify the complete ``.part`` and move it into place (or delete it and raise)."""
    problem = None
    if file.size is not None and size != file.size:
        problem = f"size {size} bytes, expected {file.size}"
    digests = hasher.hexdigests()
    if problem is None:
        problem = _digest_mismatch(file, digests)
    if problem is None and hasher.gzip is not None:
        problem = hasher.gzip.problem()
    if problem is not None:
        with contextlib.suppress(OSError):
            part.unlink()
        raise ChecksumError(
            f"{file.name} downloaded from {origin} is corrupt: {problem}. "
            "The download was deleted; "
            f"run again to download it afresh, or place a good copy at {final}."
        )
    fh.flush()
    os.fsync(fh.fileno())
    os.replace(part, final)
    with contextlib.suppress(OSError):
        _stamp_path(final).unlink()
    _write_stamp(final, digests)
    log.info("%s: %d bytes verified%s", final, size,
             " (" + ", ".join(f"{k} {v}" for k, v in digests.items()) + ")" if digests else "")
    return final


def _open(url: str, have: int, timeout: float) -> http.client.HTTPResponse:
    headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
    if have:
        headers["Range"] = f"bytes={have}-"
    req = urllib.request.Request(url, headers=headers)
    return urllib.request.urlopen(req, timeout=timeout)  # noqa: S310 - URLs come from the registry


def _transfer(fh: IO[bytes], part: Path, url: str, file: RemoteFile, timeout: float,
              progress: bool, rate: tuple[float, float] = (0.0, 60.0)) -> tuple[_Hasher, int]:
    """Download ``url`` into the open ``.part`` (resuming); return the hasher and final size.

    Raises:
        _MirrorFailed: nothing usable came from this URL.
        DownloadError: the transfer stopped early (the ``.part`` is kept for resuming).
    """
    for _attempt in range(2):  # the second attempt is a restart from byte 0
        fh.seek(0, os.SEEK_END)
        have = fh.tell()
        try:
            resp = _open(url, have, timeout)
        except urllib.error.HTTPError as e:
            content_range = e.headers.get("Content-Range", "") if e.headers else ""
            e.close()
            if e.code == 416 and have:
                m = _CONTENT_RANGE_UNSAT.match(content_range)
                if m and int(m.group(1)) == have:  # the part is already the whole file
                    hasher = _Hasher(file)
                    hasher.update_from(fh, have)
                    return hasher, have
                log.info("%s: range not satisfiable for %s; restarting from 0", url, part.name)
                fh.truncate(0)
                continue
            raise _MirrorFailed(_reason(e)) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as e:
            raise _MirrorFailed(_reason(e)) from None

        with resp:
            status = resp.status
            encoding = resp.headers.get("Content-Encoding", "identity").strip().lower()
            if encoding not in ("", "identity"):
                raise _MirrorFailed(f"sent Content-Encoding {encoding} although identity was "
                                    "asked: the bytes would not be the file")
            ctype = resp.headers.get("Content-Type", "").lower()
            if ctype.startswith("text/html") and not file.name.endswith((".html", ".htm")):
                raise _MirrorFailed("serves an HTML page (Content-Type text/html), not the "
                                    "file: a login, error or landing page?")
            length_hdr = resp.headers.get("Content-Length")
            length = int(length_hdr) if length_hdr and length_hdr.isdigit() else None
            hasher = _Hasher(file)
            if status == 206 and have:
                m = _CONTENT_RANGE.match(resp.headers.get("Content-Range", ""))
                if not m or int(m.group(1)) != have:
                    log.warning("%s: unexpected Content-Range %r for a resume at %d; restarting",
                                url, resp.headers.get("Content-Range"), have)
                    fh.truncate(0)
                    continue
                total = int(m.group(3)) if m.group(3) != "*" else (
                    have + length if length is not None else None)
                log.info("resuming %s at byte %d from %s", file.name, have, url)
                hasher.update_from(fh, have)
            elif status in (200, 206):
                if have:
                    log.info("%s ignored the Range request; restarting %s from byte 0", url,
                             file.name)
                    fh.truncate(0)
                    have = 0
                total = length
            else:
                raise _MirrorFailed(f"unexpected HTTP status {status}")

            if total is not None and file.size is not None and total != file.size:
                raise _MirrorFailed(f"serves {total} bytes, expected {file.size}")

            received, error = _stream(resp, fh, hasher, total, have, file.name, progress,
                                      *rate)

        done = have + received
        expected = total if total is not None else file.size
        if error is not None or (expected is not None and done < expected):
            fh.flush()
            of = f" of {expected}" if expected is not None else ""
            why = f" ({error})" if error else " (the connection closed early)"
            raise DownloadError(
                f"download of {file.name} from {url} incomplete: {done}{of} bytes{why}. "
                f"The partial file {part} is kept; run again to resume."
            )
        return hasher, done
    # both attempts restarted
    raise _MirrorFailed("could not restart the download")  # pragma: no cover


def _stream(resp: http.client.HTTPResponse, fh: IO[bytes], hasher: _Hasher, total: int | None,
            have: int, desc: str, progress: bool, min_rate: float = 0.0,
            window_s: float = 60.0) -> tuple[int, str | None]:
    """Copy the body to ``fh`` in chunks; return bytes received and the error that stopped it
    (a socket error, or a rate below ``min_rate`` bytes/s over a window of ``window_s``)."""
    bar = _progress_bar(_progress_enabled(progress), total, have, desc)
    received = 0
    error = None
    window_t, window_bytes = time.monotonic(), 0
    try:
        while True:
            # read1: whatever has arrived (at most CHUNK), so a stall loses no received bytes
            chunk = resp.read1(CHUNK)
            if not chunk:
                break
            fh.write(chunk)
            hasher.update(chunk)
            received += len(chunk)
            bar.update(len(chunk))
            now = time.monotonic()
            if min_rate > 0 and now - window_t >= window_s:
                rate = (received - window_bytes) / (now - window_t)
                if rate < min_rate:
                    error = (f"stalled: {rate:,.0f} bytes/s over the last {now - window_t:.0f} s, "
                             f"below the minimum {min_rate:,.0f} (dataset.download_min_rate_kbps)")
                    break
                window_t, window_bytes = now, received
    except (OSError, http.client.HTTPException) as e:
        if is_disk_full(e):  # the .part is kept; there is no room to resume into
            raise
        error = _reason(e)
    finally:
        bar.close()
        fh.flush()
    return received, error


# --------------------------------------------------------------------------------------------
# extraction
# --------------------------------------------------------------------------------------------


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
        _check_not_in_the_way(target, f"member {member} of {archive.name}", dir_wanted=False)
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


# --------------------------------------------------------------------------------------------
# acquire
# --------------------------------------------------------------------------------------------


def acquire(
    source: DatasetSource,
    raw_dir: Path | str,
    *,
    files: Sequence[RemoteFile] | None = None,
    progress: bool = True,
    offline: bool = False,
    timeout: float = 30.0,
    min_rate: float = MIN_RATE,
) -> list[Path]:
    """Obtain a dataset's raw files in ``raw_dir`` and return the paths its parser should read.

    Args:
        source: the registered dataset.
        raw_dir: directory holding the raw files (downloads and extracted members go here).
        files: a subset of files to obtain instead of ``source.files`` (e.g.
            :func:`~workbench.data.registry.criteo_1tb_files` for some days).
        progress: show progress bars.
        offline: never use the network (also ``WORKBENCH_OFFLINE=1``).
        timeout: per-connection/read timeout in seconds.
        min_rate: bytes/s under which a transfer is stopped (see :func:`fetch`).

    Returns:
        For each file: its extracted members when the source names any (e.g.
        ``raw_dir/ml-100k/u.data``), else the file itself (e.g. ``raw_dir/day_0.gz``).

    Raises:
        DownloadError: a file could not be obtained; for a ``manual_only`` source, the expected
            files are not all present (the message gives the manual hint and exact paths).
        ChecksumError: a file does not verify.
        ExtractError: extraction failed.
    """
    raw_dir = Path(raw_dir).absolute()
    chosen = tuple(source.files if files is None else files)
    if source.manual_only:
        problems = []
        for f in chosen:
            path = raw_dir / f.name
            problem = check_file(path, f)
            if problem is not None:
                problems.append(f"  {path} ({problem})")
        if problems:
            raise DownloadError(
                f"{source.title} cannot be downloaded automatically; place its files by hand.\n"
                f"{source.manual_hint}\nExpected:\n" + "\n".join(problems)
            )
        paths = [raw_dir / f.name for f in chosen]
    else:
        paths = [fetch(f, raw_dir, progress=progress, timeout=timeout, offline=offline,
                       hint=source.manual_hint, min_rate=min_rate) for f in chosen]

    out: list[Path] = []
    for f, path in zip(chosen, paths):
        members = source.members_for(f.name)
        if members:
            out.extend(extract_members(path, members, raw_dir))
        else:
            out.append(path)
    return out
