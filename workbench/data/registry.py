"""Registry of the real datasets the workbench can read: where to get them and how to check them.

Each :class:`DatasetSource` names the raw files of one dataset (:class:`RemoteFile`: download
mirrors tried in order, published checksums, exact size when known), the archive members to
extract, the raw format its parser expects, its licence/terms and, for datasets behind a login
(Kaggle, Tianchi), a hint telling the user how to place the files by hand.

The facts (URLs, md5/sha256, sizes, member names) come from the datasets' own publishers (their
download pages and release notes). Downloading and verification live in
:mod:`workbench.data.download`; this module has no side effects.

Example::

    from workbench.data.registry import get_source, criteo_1tb_files
    src = get_source("movielens_100k")
    days = criteo_1tb_files([0, 1])          # a subset of the 24 Criteo 1TB days
"""

from __future__ import annotations

import re
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from workbench.utils.errors import UserError

FORMATS = (
    "criteo_tsv",
    "avazu_csv",
    "movielens_100k",
    "movielens_1m",
    "movielens_20m",
    "taobao_user_behavior",
)
"""Raw formats a parser exists (or will exist) for."""

CRITEO_1TB_DAYS = 24
"""Criteo 1TB click logs: one file per day, ``day_0.gz`` .. ``day_23.gz``."""

_HEX32 = re.compile(r"^[0-9a-f]{32}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


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
    """

    name: str
    urls: tuple[str, ...] = ()
    md5: str | None = None
    sha256: str | None = None
    size: int | None = None
    note: str = ""

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name or "\\" in self.name or self.name in (".", ".."):
            raise ValueError(f"RemoteFile.name must be a plain file name, got {self.name!r}")
        if isinstance(self.urls, str):
            raise TypeError("RemoteFile.urls must be a tuple of URLs, got the string "
                            f"{self.urls!r}")
        object.__setattr__(self, "urls", tuple(self.urls))
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


@dataclass(frozen=True)
class Extract:
    """Archive members to extract from one downloaded archive.

    Attributes:
        archive: the :attr:`RemoteFile.name` of the archive
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
        format: the raw format (one of :data:`FORMATS`); picks the parser.
        files: the raw files (for Criteo 1TB: all 24 days; pick a subset with
            :func:`criteo_1tb_files`).
        manual_only: the files cannot be downloaded automatically (login/terms acceptance); the
            user places them by hand in the raw directory.
        manual_hint: how to obtain the files by hand and where to put them.
        licence: licence / terms of use, in short.
        homepage: landing page of the dataset.
        extract: archive members to extract after download; files not named as an archive here
            are read as they are (e.g. Criteo 1TB ``day_N.gz`` gzip streams).
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

    def members_for(self, archive_name: str) -> tuple[str, ...]:
        """Members to extract from the archive named ``archive_name`` (empty: use the file as
        is)."""
        for ex in self.extract:
            if ex.archive == archive_name:
                return ex.members
        return ()


# --------------------------------------------------------------------------------------------
# Criteo
# --------------------------------------------------------------------------------------------

_CRITEO_LICENCE = (
    "Criteo click-log data: CC BY-NC-SA 4.0 (non-commercial research use, with attribution to "
    "Criteo; share-alike). The Kaggle archive also carries the terms in its readme.txt."
)

CRITEO_KAGGLE = DatasetSource(
    name="criteo_kaggle",
    title="Criteo Kaggle Display Advertising Challenge (dac.tar.gz)",
    format="criteo_tsv",
    files=(
        RemoteFile(
            name="dac.tar.gz",
            urls=(
                "http://go.criteo.net/criteo-research-kaggle-display-advertising-challenge-dataset.tar.gz",
                "https://criteostorage.blob.core.windows.net/criteo-research-datasets/"
                "kaggle-display-advertising-challenge-dataset.tar.gz",
                "https://s3-eu-west-1.amazonaws.com/kaggle-display-advertising-challenge-dataset/dac.tar.gz",
                "https://s3-eu-west-1.amazonaws.com/criteo-labs/dac.tar.gz",
            ),
            md5="df9b1b3766d9ff91d5ca3eb3d23bed27",
            size=4_576_820_670,
            note="md5 computed by a third party from the official archive (public verification "
            "script); also known as "
            "criteo-research-kaggle-display-advertising-challenge-dataset.tar.gz. "
            "Contains train.txt (45,840,617 labelled rows, ~11 GB), test.txt (unlabelled), "
            "readme.txt.",
        ),
    ),
    manual_hint=(
        "Download dac.tar.gz (a.k.a. "
        "criteo-research-kaggle-display-advertising-challenge-dataset.tar.gz, "
        "4,576,820,670 bytes) from https://ailab.criteo.com/ressources/ and save it under the name "
        "dac.tar.gz."
    ),
    licence=_CRITEO_LICENCE,
    homepage="https://ailab.criteo.com/ressources/",
    extract=(Extract("dac.tar.gz", ("train.txt",)),),
)


def criteo_1tb_files(days: Iterable[int]) -> tuple[RemoteFile, ...]:
    """The raw ``day_N.gz`` files of the Criteo 1TB click logs for the given days.

    The files are gzip-compressed TSV (same 40 columns as Criteo Kaggle) and are read as gzip
    streams directly: nothing is extracted. No checksum or exact size is published for them.

    Args:
        days: day numbers in ``0..23`` (duplicates are dropped, order is kept).

    Returns:
        One :class:`RemoteFile` per day.

    Raises:
        ValueError: a day is not an integer in ``0..23``, or no day is given.
    """
    out: list[RemoteFile] = []
    seen: set[int] = set()
    for day in days:
        if isinstance(day, bool) or not isinstance(day, int) or not 0 <= day < CRITEO_1TB_DAYS:
            raise ValueError(
                f"Criteo 1TB day must be an integer in 0..{CRITEO_1TB_DAYS - 1} "
                f"(files day_0.gz .. day_{CRITEO_1TB_DAYS - 1}.gz), got {day!r}"
            )
        if day in seen:
            continue
        seen.add(day)
        out.append(
            RemoteFile(
                name=f"day_{day}.gz",
                urls=(
                    f"https://storage.googleapis.com/criteo-cail-datasets/day_{day}.gz",
                    f"http://azuremlsampleexperiments.blob.core.windows.net/criteo/day_{day}.gz",
                ),
                note="no checksum is published for the raw day files; reported ~14 GiB compressed "
                "each (unverified). Also on HuggingFace: criteo/CriteoClickLogs.",
            )
        )
    if not out:
        raise ValueError(f"criteo_1tb_files: give at least one day in 0..{CRITEO_1TB_DAYS - 1}")
    return tuple(out)


CRITEO_1TB = DatasetSource(
    name="criteo_1tb",
    title="Criteo 1TB Click Logs (24 days, day_0.gz .. day_23.gz)",
    format="criteo_tsv",
    files=criteo_1tb_files(range(CRITEO_1TB_DAYS)),
    manual_hint=(
        "Download day_N.gz from https://storage.googleapis.com/criteo-cail-datasets/day_N.gz "
        "(or https://huggingface.co/datasets/criteo/CriteoClickLogs) and keep the name day_N.gz; "
        "do not decompress."
    ),
    licence=_CRITEO_LICENCE,
    homepage="https://ailab.criteo.com/download-criteo-1tb-click-logs-dataset/",
)

# --------------------------------------------------------------------------------------------
# Avazu
# --------------------------------------------------------------------------------------------

AVAZU = DatasetSource(
    name="avazu",
    title="Avazu Click-Through Rate Prediction (Kaggle)",
    format="avazu_csv",
    files=(
        RemoteFile(
            name="train.gz",
            note="~1.04 GB gzip CSV with header, 40,428,967 rows (2014-10-21..30); "
            "no official checksum.",
        ),
    ),
    manual_only=True,
    manual_hint=(
        "Avazu needs a Kaggle login and acceptance of the competition rules. Open "
        "https://www.kaggle.com/c/avazu-ctr-prediction/data, accept the rules, download train.gz "
        "(or run `kaggle competitions download -c avazu-ctr-prediction -f train.gz`) and put it, "
        "still gzip-compressed and named train.gz, in the dataset's raw directory."
    ),
    licence="Kaggle competition rules of avazu-ctr-prediction (accepted on the competition page); "
    "non-commercial research use.",
    homepage="https://www.kaggle.com/c/avazu-ctr-prediction",
)

# --------------------------------------------------------------------------------------------
# MovieLens (GroupLens)
# --------------------------------------------------------------------------------------------

_GROUPLENS = "https://files.grouplens.org/datasets/movielens/"
_GROUPLENS_LICENCE = (
    "GroupLens MovieLens usage licence: research use; no commercial use without permission; "
    "acknowledge GroupLens in publications; redistribution only under the same terms "
    "(see the README inside the archive)."
)
_CHECKSUM_NOTE = ("md5 published by GroupLens (<name>.md5 sidecar); "
                  "sha256 computed by a third party.")

def _movielens(variant: str, title: str, md5: str, sha256: str, size: int | None,
               members: tuple[str, ...], size_note: str = "") -> DatasetSource:
    """A GroupLens MovieLens archive ``ml-<variant>.zip`` and the members its parser reads."""
    archive = f"ml-{variant}.zip"
    return DatasetSource(
        name=f"movielens_{variant}",
        title=title,
        format=f"movielens_{variant}",
        files=(RemoteFile(name=archive, urls=(_GROUPLENS + archive,), md5=md5, sha256=sha256,
                          size=size, note=_CHECKSUM_NOTE + size_note),),
        manual_hint=f"Download {_GROUPLENS}{archive} and put the zip (not extracted) in the raw "
                    "directory.",
        licence=_GROUPLENS_LICENCE,
        homepage=f"https://grouplens.org/datasets/movielens/{variant}/",
        extract=(Extract(archive, tuple(f"ml-{variant}/{m}" for m in members)),),
    )


MOVIELENS_100K = _movielens(
    "100k", "MovieLens 100K", md5="0e33842e24a9c977be4e0107933c0723",
    sha256="50d2a982c66986937beb9ffb3aa76efe955bf3d5c6b761f4e3a7cd717c6a3229", size=4_924_029,
    members=("u.data", "u.user", "u.item"))
MOVIELENS_1M = _movielens(
    "1m", "MovieLens 1M", md5="c4d9eecfca2ab87c1945afe126590906",
    sha256="a6898adb50b9ca05aa231689da44c217cb524e7ebd39d264c56e2832f2c54e20", size=None,
    members=("ratings.dat", "users.dat", "movies.dat"),
    size_note=" Size ~5.9 MB (exact size not recorded).")
MOVIELENS_20M = _movielens(
    "20m", "MovieLens 20M", md5="cd245b17a1ae2cc31bb14903e1204af3",
    sha256="96f243c338a8665f6bcc89c53edf6ee39162a846940de6b7c8c48aeada765ff3", size=None,
    members=("ratings.csv", "movies.csv"),
    size_note=" Size ~190 MB (exact size not recorded).")

# --------------------------------------------------------------------------------------------
# Taobao UserBehavior (Tianchi 649)
# --------------------------------------------------------------------------------------------

TAOBAO_USER_BEHAVIOR = DatasetSource(
    name="taobao_user_behavior",
    title="Taobao UserBehavior (Alibaba, Tianchi dataset 649)",
    format="taobao_user_behavior",
    files=(
        RemoteFile(
            name="UserBehavior.csv",
            note="~3.5 GB CSV without header: user_id,item_id,category_id,behavior_type,timestamp; "
            "100,150,807 rows; no published checksum.",
        ),
    ),
    manual_only=True,
    manual_hint=(
        "Taobao UserBehavior needs an Alibaba Tianchi login. "
        "Open https://tianchi.aliyun.com/dataset/649, "
        "accept the terms, download UserBehavior.csv.zip, unzip it and put UserBehavior.csv "
        "(uncompressed) in the dataset's raw directory."
    ),
    licence="Alibaba Tianchi dataset terms (accepted on the dataset page): research use only, "
    "cite the dataset; no redistribution.",
    homepage="https://tianchi.aliyun.com/dataset/649",
)

# --------------------------------------------------------------------------------------------

SOURCES: Mapping[str, DatasetSource] = types.MappingProxyType(
    {
        s.name: s
        for s in (
            CRITEO_KAGGLE,
            CRITEO_1TB,
            AVAZU,
            MOVIELENS_100K,
            MOVIELENS_1M,
            MOVIELENS_20M,
            TAOBAO_USER_BEHAVIOR,
        )
    }
)
"""All registered sources by name (read-only)."""


class UnknownSourceError(UserError, KeyError, ValueError):
    """No dataset source of that name (a ``KeyError`` and a ``ValueError``)."""

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0]) if self.args else ""


def source_names() -> list[str]:
    """Names of all registered sources, sorted."""
    return sorted(SOURCES)


def get_source(name: str) -> DatasetSource:
    """Return the registered source called ``name``.

    Raises:
        UnknownSourceError: (a ``KeyError`` and ``ValueError``) with the list of known names.
    """
    try:
        return SOURCES[name]
    except (KeyError, TypeError):
        raise UnknownSourceError(
            f"unknown dataset source {name!r}; known sources: {', '.join(source_names())}"
        ) from None
