"""One file over HTTP into its ``.part``, resumed, rate-bounded, verified and placed atomically.

[`download_part`][] tries the URLs of a file in order (``Range`` resume of an existing
``.part``, a restart from byte 0 when the server ignores it) under an exclusive lock on the
``.part``; [`workbench.data.download`][] says when it is called and what comes before it
(the folder, the mirrors, the upstreams). A URL that delivers nothing usable raises
[`UrlFailed`][] and the next is tried; a transfer that stops early keeps the ``.part`` and raises
[`DownloadError`][workbench.data.verify.DownloadError]; a complete one is verified and moved to
its final name with ``os.replace`` ([`workbench.data.verify`][] holds the digests and stamps).
"""

from __future__ import annotations

import contextlib
import http.client
import logging
import os
import re
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from workbench.data.source import RemoteFile
from workbench.data.verify import (
    CHUNK,
    ChecksumError,
    DownloadError,
    _Hasher,
    _problem,
    _write_stamp,
)
from workbench.utils.errors import WorkbenchError
from workbench.utils.io import is_disk_full

__all__ = ["USER_AGENT", "UrlFailed", "UrlsFailed", "download_part", "network_reason", "open_url"]

try:  # POSIX only; on other systems concurrent downloads of one file are not guarded
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("workbench.data.download")


USER_AGENT = "workbench-data-download/1.0 (+python-urllib)"


class UrlFailed(WorkbenchError):
    """This URL did not deliver (before any byte was kept); try the next mirror."""


class UrlsFailed(WorkbenchError):
    """Every URL of a list failed before delivering; ``tried`` says how each did."""

    def __init__(self, tried: list[str]) -> None:
        super().__init__("; ".join(tried))
        self.tried = tried


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


def network_reason(exc: BaseException) -> str:
    """A short human-readable reason for a network failure."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        inner = exc.reason
        if isinstance(inner, BaseException):
            return network_reason(inner)
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


def download_part(file: RemoteFile, urls: Sequence[str], part: Path, final: Path, timeout: float,
                  progress: bool, rate: tuple[float, float]) -> Path:
    """Fetch ``file`` from ``urls`` (as fetched) into ``part`` (resuming); verify; place it.

    Raises:
        UrlsFailed: no URL delivered (an empty ``.part`` is removed).
        DownloadError: a transfer stopped early (the ``.part`` is kept for resuming).
        ChecksumError: the complete download does not verify (it is deleted).
    """
    tried: list[str] = []
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

        for url in urls:
            try:
                hasher, size = _transfer(fh, part, url, file, timeout, progress, rate)
            except UrlFailed as e:
                log.warning("%s: %s", url, e)
                tried.append(f"{url} ({e})")
                continue
            return _finish(fh, part, final, file, hasher, size, url)

        fh.seek(0, os.SEEK_END)
        empty = fh.tell() == 0
    if empty:
        with contextlib.suppress(OSError):
            part.unlink()
    raise UrlsFailed(tried)


def _finish(fh: IO[bytes], part: Path, final: Path, file: RemoteFile, hasher: _Hasher,
            size: int, origin: str) -> Path:
    """Verify the complete ``.part`` and move it into place (or delete it and raise)."""
    problem = _problem(file, hasher, size)
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
    digests = hasher.hexdigests()
    _write_stamp(final, digests)
    log.info("%s: %d bytes verified%s", final, size,
             " (" + ", ".join(f"{k} {v}" for k, v in digests.items()) + ")" if digests else "")
    return final


def open_url(url: str, have: int, timeout: float) -> http.client.HTTPResponse:
    headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
    if have:
        headers["Range"] = f"bytes={have}-"
    req = urllib.request.Request(url, headers=headers)
    return urllib.request.urlopen(req, timeout=timeout)  # noqa: S310 - URLs come from the registry


def _transfer(fh: IO[bytes], part: Path, url: str, file: RemoteFile, timeout: float,
              progress: bool, rate: tuple[float, float] = (0.0, 60.0)) -> tuple[_Hasher, int]:
    """Download ``url`` into the open ``.part`` (resuming); return the hasher and final size.

    Raises:
        UrlFailed: nothing usable came from this URL.
        DownloadError: the transfer stopped early (the ``.part`` is kept for resuming).
    """
    for _attempt in range(2):  # the second attempt is a restart from byte 0
        fh.seek(0, os.SEEK_END)
        have = fh.tell()
        try:
            resp = open_url(url, have, timeout)
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
            raise UrlFailed(network_reason(e)) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as e:
            raise UrlFailed(network_reason(e)) from None

        with resp:
            status = resp.status
            encoding = resp.headers.get("Content-Encoding", "identity").strip().lower()
            if encoding not in ("", "identity"):
                raise UrlFailed(f"sent Content-Encoding {encoding} although identity was "
                                    "asked: the bytes would not be the file")
            ctype = resp.headers.get("Content-Type", "").lower()
            if ctype.startswith("text/html") and not file.name.endswith((".html", ".htm")):
                raise UrlFailed("serves an HTML page (Content-Type text/html), not the "
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
                raise UrlFailed(f"unexpected HTTP status {status}")

            if total is not None and file.size is not None and total != file.size:
                raise UrlFailed(f"serves {total} bytes, expected {file.size}")

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
    raise UrlFailed("could not restart the download")  # pragma: no cover


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
        error = network_reason(e)
    finally:
        bar.close()
        fh.flush()
    return received, error
