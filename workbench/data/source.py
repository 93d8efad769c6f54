"""What a dataset source is: its files (where to fetch each, its checksums and size, how a file
is derived from an upstream's bytes), the archive members to extract, its raw format and terms.

    DatasetSource(name, title, format, files=(RemoteFile(name, urls, md5/sha256, size,
                  upstream=Upstream(url, sha256, size, derivation)), ...), extract=(Extract, ...))

The catalogue of the real datasets and samples is [`workbench.data.registry`][]; downloading
and verification live in [`workbench.data.download`][]. This module has no side effects.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FORMATS = (
    "criteo_tsv",
    "avazu_csv",
    "movielens_100k",
    "movielens_1m",
    "movielens_20m",
    "taobao_user_behavior",
)
"""Raw formats a parser exists (or will exist) for."""

_HEX32 = re.compile(r"^[0-9a-f]{32}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class DropPartialLastLine:
    """The file is the upstream's bytes up to and including its last newline (the upstream
    ends in a line cut short)."""


@dataclass(frozen=True)
class ZipMember:
    """The file is one member of the upstream zip archive.

    Attributes:
        member: the member's path inside the archive (e.g. ``ml-100k/u.data``).
    """

    member: str


Derivation = DropPartialLastLine | ZipMember
"""How a stored file is made from the bytes its upstream serves (a deterministic function)."""


@dataclass(frozen=True)
class Upstream:
    """Where a file can also be had when a URL serves other bytes it is derived from.

    Attributes:
        name: the upstream file's own name (kept, verified, under ``.upstream/`` of the
            dataset's download folder, so several files derived from it fetch it once).
        urls: its URLs, tried in order.
        sha256: its sha256 (checked before deriving).
        size: its exact size in bytes.
        derive: how the file is made from it.
    """

    name: str
    urls: tuple[str, ...]
    sha256: str
    size: int
    derive: Derivation

    def __post_init__(self) -> None:
        object.__setattr__(self, "urls", tuple(self.urls))
        if not _HEX64.match(self.sha256):
            raise ValueError(f"{self.name}: upstream sha256 must be 64 hex digits")

    @property
    def file(self) -> RemoteFile:
        """The upstream bytes as a file to fetch (its URLs, digest and size)."""
        return RemoteFile(self.name, self.urls, sha256=self.sha256, size=self.size)


@dataclass(frozen=True)
class RemoteFile:
    """One raw file of a dataset.

    Attributes:
        name: file name on disk (inside the dataset's raw directory).
        urls: download mirrors, tried in order; empty for files that must be placed by hand.
        md5: published (or well-attested) md5 hex digest, or ``None``.
        sha256: sha256 hex digest, or ``None``.
        size: exact size in bytes, or ``None`` when not known exactly.
        note: provenance of the checksum/size, caveats.
        upstreams: other sources of the file, derived from other bytes (tried after ``urls``).
    """

    name: str
    urls: tuple[str, ...] = ()
    md5: str | None = None
    sha256: str | None = None
    size: int | None = None
    note: str = ""
    upstreams: tuple[Upstream, ...] = ()

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name or "\\" in self.name or self.name in (".", ".."):
            raise ValueError(f"RemoteFile.name must be a plain file name, got {self.name!r}")
        if isinstance(self.urls, str):
            raise TypeError("RemoteFile.urls must be a tuple of URLs, got the string "
                            f"{self.urls!r}")
        object.__setattr__(self, "urls", tuple(self.urls))
        object.__setattr__(self, "upstreams", tuple(self.upstreams))
        if self.upstreams and self.sha256 is None:
            raise ValueError(f"{self.name}: a file derived from an upstream needs its sha256")
        if self.md5 is not None:
            object.__setattr__(self, "md5", self.md5.lower())
            if not _HEX32.match(self.md5):
                raise ValueError(f"{self.name}: md5 must be 32 hex digits, got {self.md5!r}")
        if self.sha256 is not None:
            object.__setattr__(self, "sha256", self.sha256.lower())
            if not _HEX64.match(self.sha256):
                raise ValueError(f"{self.name}: sha256 must be 64 hex digits, got {self.sha256!r}")
        if self.size is not None and self.size < 0:
            raise ValueError(f"{self.name}: size must be >= 0, got {self.size}")

    @property
    def has_checksum(self) -> bool:
        """Whether a digest (md5 or sha256) is known for this file."""
        return self.md5 is not None or self.sha256 is not None

    @property
    def all_urls(self) -> tuple[str, ...]:
        """Every URL the file can come from: its own, then its upstreams'."""
        return self.urls + tuple(u for up in self.upstreams for u in up.urls)


@dataclass(frozen=True)
class Extract:
    """Archive members to extract from one downloaded archive.

    Attributes:
        archive: the [`RemoteFile.name`][] of the archive
            (``.tar.gz``/``.tgz``/``.tar``/``.zip``).
        members: member paths inside the archive; each is extracted to ``<raw_dir>/<member>``.
    """

    archive: str
    members: tuple[str, ...]

    def __post_init__(self) -> None:
        if isinstance(self.members, str):
            raise TypeError(f"Extract.members must be a tuple, got the string {self.members!r}")
        object.__setattr__(self, "members", tuple(self.members))


@dataclass(frozen=True)
class DatasetSource:
    """A real dataset: its raw files, how to unpack them and the terms it comes under.

    Attributes:
        name: registry key (e.g. ``"movielens_100k"``).
        title: human-readable name.
        format: the raw format (one of [`FORMATS`][]); picks the parser.
        files: the raw files (for Criteo 1TB: all 24 days; pick a subset with
            [`criteo_1tb_files`][workbench.data.registry.criteo_1tb_files]).
        manual_only: the files cannot be downloaded automatically (login/terms acceptance); the
            user places them by hand in the raw directory.
        manual_hint: how to obtain the files by hand and where to put them.
        licence: licence / terms of use, in short.
        homepage: landing page of the dataset.
        extract: archive members to extract after download; files not named as an archive here
            are read as they are (e.g. Criteo 1TB ``day_N.gz`` gzip streams).
        mirror_dir: the folder a local mirror keeps the files in (``<mirror>/<mirror_dir>/
            <name>``; empty: the source's name). The real samples use the layout of this
            project's sample folder (``criteo_kaggle/wide_resdnn_train.tsv``).
    """

    name: str
    title: str
    format: str
    files: tuple[RemoteFile, ...]
    manual_only: bool = False
    manual_hint: str = ""
    licence: str = ""
    homepage: str = ""
    extract: tuple[Extract, ...] = ()
    mirror_dir: str = ""

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ValueError(f"{self.name}: unknown format {self.format!r}; "
                             f"known: {', '.join(FORMATS)}")
        object.__setattr__(self, "files", tuple(self.files))
        object.__setattr__(self, "extract", tuple(self.extract))
        names = {f.name for f in self.files}
        for ex in self.extract:
            if ex.archive not in names:
                raise ValueError(f"{self.name}: extract names {ex.archive!r}, not one of its files")
        if not self.mirror_dir:
            object.__setattr__(self, "mirror_dir", self.name)

    def members_for(self, archive_name: str) -> tuple[str, ...]:
        """Members to extract from the archive named ``archive_name`` (empty: use the file as
        is)."""
        for ex in self.extract:
            if ex.archive == archive_name:
                return ex.members
        return ()
