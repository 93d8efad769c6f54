"""Download, verify and unpack the raw files of a registered dataset.

Behaviour of [`fetch`][] (one [`RemoteFile`][workbench.data.source.RemoteFile] into a directory),
in this order (a pooch-like registry: name, sha256, URLs; local copies first, then the network):

    dest/<name> verifies ----------------------------------------------> use it
    a mirror folder holds <name> -> hash it while copying into dest ---> place it | refuse it
    each URL (rewritten by WORKBENCH_SOURCE_BASE) -> .part -> verify --> place it
    each upstream: fetch its bytes (same steps) -> derive -> verify --> place it
    nothing worked -> DownloadError naming every folder and URL tried

* **Already there**: when ``<dest_dir>/<name>`` exists and verifies it is used as is and the network
  is not touched. "Verifies" means: the published checksum matches (md5 and/or sha256) when one is
  known, else the size matches when it is known, else the file merely exists. This is also how a
  user supplies a file by hand (datasets behind a login, machines without network): put it there.
  A successful checksum is remembered in a small stamp file (``.<name>.verified.json``, keyed by
  size and mtime) so a multi-GB archive is not re-hashed on every run.
* **Download** ([`workbench.data.transfer`][]): bytes stream (1 MiB chunks, stdlib ``urllib``)
  into ``<dest_dir>/<name>.part`` while md5/sha256 are computed incrementally. Mirrors are tried
  in order; a mirror that cannot be reached (DNS failure, refused connection, timeout, HTTP
  error) is skipped quickly (every socket operation is bounded by ``timeout``).
* **Resume**: if a ``.part`` exists the request carries ``Range: bytes=N-``. A ``206`` answer is
  appended (the existing part is hashed first); a server that ignores ``Range`` and answers ``200``
  makes the download restart from byte 0. A transfer that ends early (connection closed before
  ``Content-Length`` bytes, reset, timeout mid-body) keeps the ``.part`` and raises
  [`DownloadError`][]; running again resumes where it stopped.
* **Verification and atomic placement**: when the transfer is complete its size and checksum are
  checked, and only then is the ``.part`` moved to the final name with ``os.replace`` (atomic on
  POSIX): no partial or unverified file ever carries the final name. A wrong checksum deletes the
  ``.part`` and raises [`ChecksumError`][].
* **Mirrors**: folders holding already-downloaded files (``paths.mirrors``, with this
  project's ``../shared/data`` in it for CI, and ``WORKBENCH_MIRRORS`` for a user's own copy),
  looked up by name before any URL, offline too. A mirror's file is hashed while it is copied
  (never used in place: the dataset's manifest names the download folder wherever the bytes
  came from); one whose size or digest differs is refused ([`ChecksumError`][] naming the
  file, the expected and the actual digest) and nothing is placed.
* **Derived files**: a file whose [`Upstream`][workbench.data.source.Upstream] serves other bytes
  (a file with a cut last line, an archive) fetches them into ``.upstream/`` beside it
  (verified like any file, kept so that several files of one archive fetch it once), derives the
  file from them and verifies the result before placing it.
* **Where the network is**: ``WORKBENCH_SOURCE_BASE=http://host:port`` rewrites every URL
  ``scheme://host/path`` to ``<base>/host/path`` (a local copy of the sources laid out by host;
  the tests' stand-in for the internet, or a site's caching proxy).
* **Offline**: ``offline=True`` or ``WORKBENCH_OFFLINE=1`` forbids network access; a missing file
  raises [`DownloadError`][] at once, naming the absolute path to place it at.

[`extract_members`][workbench.data.archive.extract_members] unpacks named members of a
``.tar(.gz)``/``.zip`` (each through a temporary file and ``os.replace``, skipping members already
extracted, refusing path traversal and links); digests, stamps and the error family are in
[`workbench.data.verify`][]. [`acquire`][] ties it together for a
[`DatasetSource`][workbench.data.source.DatasetSource] and returns the paths a parser should read.
"""

from __future__ import annotations

import logging
import os
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from workbench.data.archive import extract_members
from workbench.data.registry import MIRRORS_ENV
from workbench.data.source import (
    DatasetSource,
    DropPartialLastLine,
    RemoteFile,
    Upstream,
    ZipMember,
)
from workbench.data.transfer import UrlsFailed, download_part
from workbench.data.verify import (
    CHUNK,
    ChecksumError,
    DownloadError,
    ExtractError,
    _copy_hashed,
    _describe_expected,
    _problem,
    _read_chunks,
    _write_stamp,
    check_file,
    check_not_in_the_way,
    file_digests,
    verify_file,
)
from workbench.utils.io import atomic_path
from workbench.utils.paths import resolve

__all__ = [  # the data layer's acquisition API (the errors and checks live in verify.py)
    "MIN_RATE", "OFFLINE_ENV", "RATE_WINDOW_S", "SOURCE_BASE_ENV", "UPSTREAM_DIR",
    "ChecksumError", "DownloadError", "ExtractError", "acquire", "check_file", "extract_members",
    "fetch", "file_digests", "is_offline", "mirror_folders", "source_url", "verify_file",
]


log = logging.getLogger(__name__)

#: A transfer slower than MIN_RATE bytes/s over RATE_WINDOW_S seconds is stopped (resumable).
MIN_RATE = 1024.0
RATE_WINDOW_S = 60.0

OFFLINE_ENV = "WORKBENCH_OFFLINE"
"""Environment variable: set to ``1`` to forbid all network access."""

SOURCE_BASE_ENV = "WORKBENCH_SOURCE_BASE"
"""Environment variable: a base URL that every download URL is rewritten onto
([`source_url`][])."""

_TRUE = {"1", "true", "yes", "on"}


UPSTREAM_DIR = ".upstream"
"""Where, inside a download folder, the upstream bytes of derived files are kept."""


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def is_offline(offline: bool = False) -> bool:
    """Whether network access is forbidden (``offline`` or ``WORKBENCH_OFFLINE`` set to 1/true)."""
    return offline or os.environ.get(OFFLINE_ENV, "").strip().lower() in _TRUE


def source_url(url: str) -> str:
    """``url`` as it is fetched: ``scheme://host/path`` becomes ``<base>/host/path`` when
    ``WORKBENCH_SOURCE_BASE`` names a base, else ``url`` itself."""
    base = os.environ.get(SOURCE_BASE_ENV, "").strip()
    if not base:
        return url
    _, sep, rest = url.partition("://")
    return f"{base.rstrip('/')}/{rest if sep else url}"


def mirror_folders(configured: Sequence[str] = ()) -> list[Path]:
    """The mirror folders to look in, in order: ``WORKBENCH_MIRRORS`` (``os.pathsep``-separated),
    then ``configured`` (``paths.mirrors``; relative paths are relative to the project root).
    Folders that do not exist are left out (a clone without ``../shared`` has none)."""
    named = [Path(p.strip()).absolute()  # typed in a shell: relative to its directory
             for p in os.environ.get(MIRRORS_ENV, "").split(os.pathsep) if p.strip()]
    out: list[Path] = []
    for entry in [*named, *(resolve(p) for p in configured)]:
        folder = Path(os.path.normpath(entry))
        if folder.is_dir() and folder not in out:
            out.append(folder)
    return out


def _manual_message(file: RemoteFile, final: Path, why: str, hint: str) -> str:
    msg = (f"could not obtain {file.name}: {why}\n"
           f"Place the file by hand at {final}{_describe_expected(file)} and run again.")
    if hint:
        msg += f"\n{hint}"
    return msg


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
    mirrors: Sequence[Path] = (),
) -> Path:
    """Make ``dest_dir/file.name`` present and verified: in place, from a mirror, downloaded,
    or derived from its upstream's bytes (module docstring).

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
        mirrors: folders that may hold the file by name, tried before any URL (offline too).

    Returns:
        The absolute path of the verified file.

    Raises:
        DownloadError: offline and missing; every mirror failed (the message lists each URL and
            its reason and the path to place the file at by hand); transfer incomplete (the
            ``.part`` is kept, run again to resume).
        ChecksumError: the downloaded (or present, mirrored or derived) file's size/digest does
            not match.
    """
    dest_dir = Path(dest_dir).absolute()
    final = dest_dir / file.name
    offline = is_offline(offline)
    part = dest_dir / f"{file.name}.part"
    for path, what in ((dest_dir, "the download directory"), (final, file.name),
                       (part, f"the partial download of {file.name}")):
        check_not_in_the_way(path, what, dir_wanted=path == dest_dir)

    if final.exists():
        problem = check_file(final, file)
        if problem is None:
            log.debug("%s present and verified", final)
            return final
        if (offline or not file.all_urls) and not mirrors:
            raise ChecksumError(
                f"{final} is present but does not verify ({problem}). "
                "Replace it with the right file"
                f"{_describe_expected(file)}" + ("" if offline else " or delete it and run again")
                + (f".\n{hint}" if hint else ".")
            )
        log.warning("%s is present but does not verify (%s); fetching it again", final, problem)

    copied = _from_mirror(file, final, mirrors) or _from_upstream_at_hand(file, dest_dir, mirrors)
    if copied is not None:
        return copied
    if offline:
        raise DownloadError(_manual_message(
            file, final,
            f"offline mode (offline=True or {OFFLINE_ENV}=1), the network is not used.", hint))
    if not file.all_urls:
        raise DownloadError(_manual_message(file, final, "it has no download URL.", hint))

    dest_dir.mkdir(parents=True, exist_ok=True)
    tried: list[str] = []
    if file.urls:
        try:
            return download_part(file, [source_url(u) for u in file.urls], part, final, timeout,
                                 progress, (min_rate, rate_window_s))
        except UrlsFailed as failed:
            tried += failed.tried
    for upstream in file.upstreams:
        try:
            source = fetch(upstream.file, dest_dir / UPSTREAM_DIR, progress=progress,
                           timeout=timeout, min_rate=min_rate, rate_window_s=rate_window_s)
        except ChecksumError:
            raise
        except DownloadError as err:
            tried += err.tried or [f"{source_url(u)} ({err})" for u in upstream.urls]
            continue
        return _derive(upstream, source, final, file)
    raise DownloadError(_manual_message(
        file, final, "every download URL failed:\n" + "\n".join(f"  {t}" for t in tried),
        hint), tried)


def _from_mirror(file: RemoteFile, final: Path, folders: Sequence[Path]) -> Path | None:
    """Copy ``file`` from the first mirror folder holding it to ``final``, verified while copied.

    Returns:
        ``final``, or ``None`` when no folder holds a file of that name.

    Raises:
        ChecksumError: the mirror's file does not verify (one line: the file, the expected and
            the actual digest or size); nothing is placed.
    """
    for folder in folders:
        candidate = folder / file.name
        if not candidate.is_file():
            continue
        def refusal(problem: str, bad: Path = candidate) -> str:
            return (f"mirror file {bad} refused: {problem}; replace it with the registered file "
                    "or take it out of the mirror folder")

        return _place_verified(_read_chunks(candidate), final, file,
                               f"copied from the mirror {candidate}", refusal)
    return None


def _from_upstream_at_hand(file: RemoteFile, dest_dir: Path,
                           mirrors: Sequence[Path]) -> Path | None:
    """``file`` derived from an upstream already at hand, without the network: kept in
    ``dest_dir/.upstream/`` by an earlier run, or in a mirror folder under the upstream's own
    name (the file a user downloads from the upstream URL the hint names).

    Returns:
        The derived, verified file; ``None`` when no upstream is at hand.

    Raises:
        ChecksumError: an upstream at hand does not verify (nothing is derived from it).
    """
    for upstream in file.upstreams:
        try:
            source = fetch(upstream.file, dest_dir / UPSTREAM_DIR, offline=True, mirrors=mirrors)
        except DownloadError:
            continue
        return _derive(upstream, source, dest_dir / file.name, file)
    return None


def _place_verified(chunks: Iterable[bytes], final: Path, file: RemoteFile, origin: str,
                    refusal: Callable[[str], str]) -> Path:
    """Write ``chunks`` to ``final`` through a temporary file, hashed as written; place it only
    if it verifies against ``file``, else raise [`ChecksumError`][] (``refusal(problem)``)
    with nothing placed."""
    with atomic_path(final) as tmp:
        hasher, size = _copy_hashed(chunks, tmp, file)
        problem = _problem(file, hasher, size)
        if problem is not None:
            raise ChecksumError(refusal(problem))
    _write_stamp(final, hasher.hexdigests())
    log.info("%s: %s and verified", final, origin)
    return final


def _derived_chunks(upstream: Upstream, source: Path) -> Iterator[bytes]:
    """The bytes of the file ``upstream.derive`` makes from the upstream bytes at ``source``."""
    derive = upstream.derive
    if isinstance(derive, DropPartialLastLine):
        size = source.stat().st_size
        end = size
        with open(source, "rb") as fh:  # the last newline, scanning back a chunk at a time
            while end > 0:
                start = max(0, end - CHUNK)
                fh.seek(start)
                found = fh.read(end - start).rfind(b"\n")
                if found >= 0:
                    end = start + found + 1
                    break
                end = start
        yield from _read_chunks(source, end)
    elif isinstance(derive, ZipMember):
        try:
            with zipfile.ZipFile(source) as zf, zf.open(derive.member) as member:
                while chunk := member.read(CHUNK):
                    yield chunk
        except KeyError:
            raise ExtractError(f"{source}: the archive has no member {derive.member}") from None
        except (zipfile.BadZipFile, zlib.error, EOFError) as e:
            raise ExtractError(f"cannot read {derive.member} from {source}: {e}") from e
    else:  # pragma: no cover - Derivation is a closed union
        raise TypeError(f"unknown derivation {derive!r}")


def _derive(upstream: Upstream, source: Path, final: Path, file: RemoteFile) -> Path:
    """Make ``final`` from the verified upstream bytes at ``source`` and verify it."""
    how = type(upstream.derive).__name__
    return _place_verified(
        _derived_chunks(upstream, source), final, file, f"derived from {source.name} ({how})",
        lambda problem: f"{file.name} derived from {source} ({how}) does not verify: {problem}; "
                        "it was not kept (the registry's upstream entry is wrong)")


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
    mirrors: Sequence[Path] = (),
) -> list[Path]:
    """Obtain a dataset's raw files in ``raw_dir`` and return the paths its parser should read.

    Every file is tried (a mirror, then its URLs) before a failure is raised, so the error names
    all the files that could not be had, every folder looked in and every URL tried.

    Args:
        source: the registered dataset.
        raw_dir: directory holding the raw files (downloads and extracted members go here).
        files: a subset of files to obtain instead of ``source.files`` (e.g.
            [`criteo_1tb_files`][workbench.data.registry.criteo_1tb_files] for some days).
        progress: show progress bars.
        offline: never use the network (also ``WORKBENCH_OFFLINE=1``).
        timeout: per-connection/read timeout in seconds.
        min_rate: bytes/s under which a transfer is stopped (see [`fetch`][]).
        mirrors: mirror folders ([`mirror_folders`][]); a file is looked for in
            ``<mirror>/<source.mirror_dir>/`` and then in ``<mirror>/``.

    Returns:
        For each file: its extracted members when the source names any (e.g.
        ``raw_dir/ml-100k/u.data``), else the file itself (e.g. ``raw_dir/day_0.gz``).

    Raises:
        DownloadError: files could not be obtained (one line: which, the folders looked in, the
            URLs tried, how to provide them); for a ``manual_only`` source, the expected files
            are not all present (the message gives the manual hint and exact paths).
        ChecksumError: a file (present, mirrored, downloaded or derived) does not verify.
        ExtractError: extraction failed.
    """
    raw_dir = Path(raw_dir).absolute()
    chosen = tuple(source.files if files is None else files)
    folders = [f for m in mirrors for f in (m / source.mirror_dir, m)]
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
        paths, missing = [], []
        for f in chosen:
            try:
                paths.append(fetch(f, raw_dir, progress=progress, timeout=timeout,
                                   offline=offline, hint=source.manual_hint, min_rate=min_rate,
                                   mirrors=folders))
            except ChecksumError:
                raise
            except DownloadError as err:
                missing.append((f, err))
        if missing:
            raise DownloadError(_unavailable(source, missing, folders, raw_dir,
                                             is_offline(offline)),
                                [t for _, err in missing for t in err.tried])

    out: list[Path] = []
    for f, path in zip(chosen, paths):
        members = source.members_for(f.name)
        if members:
            out.extend(extract_members(path, members, raw_dir))
        else:
            out.append(path)
    return out


def _unavailable(source: DatasetSource, missing: Sequence[tuple[RemoteFile, DownloadError]],
                 folders: Sequence[Path], raw_dir: Path, offline: bool) -> str:
    """One line: which files of ``source`` could not be had, where they were looked for, every
    URL tried, and how to provide them."""
    names = ", ".join(f.name for f, _ in missing)
    looked = (f"no mirror folder holds them (looked in {', '.join(map(str, folders))})"
              if folders else "no mirror folder is set (paths.mirrors and "
              f"{MIRRORS_ENV} name none that exists)")
    if offline:
        network = f"the network was not used (offline: --offline or {OFFLINE_ENV}=1)"
    else:
        tried = list(dict.fromkeys(t for _, err in missing for t in err.tried))  # once each
        stopped = [str(err).splitlines()[0] for _, err in missing if not err.tried]
        network = "every URL failed: " + ", ".join(tried + stopped)
    hint = source.manual_hint.replace("\n", " ")
    return (f"{source.name}: could not fetch {names}: {looked}, and {network}. {hint} "
            f"Or place them by hand at {', '.join(str(raw_dir / f.name) for f, _ in missing)}, "
            "or run where those URLs can be reached.")
