"""Tests for workbench.data.registry (no network)."""

from __future__ import annotations

import dataclasses
import re
from urllib.parse import urlparse

import pytest

from workbench.data import registry
from workbench.data.registry import (
    SOURCES,
    UnknownSourceError,
    criteo_1tb_files,
    get_source,
    source_names,
)
from workbench.data.source import FORMATS, DatasetSource, Extract, RemoteFile

EXPECTED_SOURCES = {
    "criteo_kaggle",
    "criteo_1tb",
    "avazu",
    "movielens_100k",
    "movielens_1m",
    "movielens_20m",
    "taobao_user_behavior",
    # the real samples: public files at pinned commits (tests/test_sample_sources.py)
    "criteo_sample",
    "avazu_sample",
    "movielens_100k_sample",
    "taobao_sample",
}
SAMPLE_NAMES = {"criteo_sample", "avazu_sample", "movielens_100k_sample", "taobao_sample"}


def test_all_expected_sources_registered():
    assert set(SOURCES) == EXPECTED_SOURCES
    assert source_names() == sorted(EXPECTED_SOURCES)
    for name, src in SOURCES.items():
        assert src.name == name
        assert get_source(name) is src


@pytest.mark.parametrize("name", sorted(EXPECTED_SOURCES))
def test_source_is_well_formed(name):
    src = get_source(name)
    assert src.format in FORMATS
    assert src.title and src.licence and src.manual_hint
    assert urlparse(src.homepage).scheme == "https"
    assert src.files, "every source names at least one file"
    for f in src.files:
        assert isinstance(f, RemoteFile)
        if src.manual_only:
            assert f.name in src.manual_hint or "unzip" in src.manual_hint
        else:
            assert f.all_urls, f"{name}/{f.name} has no URL and the source is not manual_only"
        for url in f.all_urls:
            parsed = urlparse(url)
            assert parsed.scheme in ("http", "https") and parsed.netloc, url
            # the samples keep this project's names for upstream files named otherwise
            assert url.endswith(f.name) or name in {"criteo_kaggle", *SAMPLE_NAMES}, url
        if f.md5 is not None:
            assert re.fullmatch(r"[0-9a-f]{32}", f.md5)
        if f.sha256 is not None:
            assert re.fullmatch(r"[0-9a-f]{64}", f.sha256)
    archives = {f.name for f in src.files}
    for ex in src.extract:
        assert ex.archive in archives and ex.members


def test_manual_only_sources():
    manual = {s.name for s in SOURCES.values() if s.manual_only}
    assert manual == {"avazu", "taobao_user_behavior"}
    avazu = get_source("avazu")
    assert [f.name for f in avazu.files] == ["train.gz"]
    assert "kaggle.com/c/avazu-ctr-prediction" in avazu.manual_hint
    taobao = get_source("taobao_user_behavior")
    assert [f.name for f in taobao.files] == ["UserBehavior.csv"]
    assert "tianchi.aliyun.com/dataset/649" in taobao.manual_hint


def test_criteo_kaggle_facts():
    src = get_source("criteo_kaggle")
    (dac,) = src.files
    assert dac.name == "dac.tar.gz"
    assert dac.md5 == "df9b1b3766d9ff91d5ca3eb3d23bed27"
    assert dac.size == 4_576_820_670
    assert len(dac.urls) == 4
    assert dac.urls[0] == "http://go.criteo.net/criteo-research-kaggle-display-advertising-challenge-dataset.tar.gz"
    assert src.members_for("dac.tar.gz") == ("train.txt",)
    assert src.format == "criteo_tsv"


def test_movielens_facts():
    base = "https://files.grouplens.org/datasets/movielens/"
    expected = {
        "movielens_100k": ("ml-100k.zip", "0e33842e24a9c977be4e0107933c0723",
                           ("ml-100k/u.data", "ml-100k/u.user", "ml-100k/u.item")),
        "movielens_1m": ("ml-1m.zip", "c4d9eecfca2ab87c1945afe126590906",
                         ("ml-1m/ratings.dat", "ml-1m/users.dat", "ml-1m/movies.dat")),
        "movielens_20m": ("ml-20m.zip", "cd245b17a1ae2cc31bb14903e1204af3",
                          ("ml-20m/ratings.csv", "ml-20m/movies.csv")),
    }
    for name, (fname, md5, members) in expected.items():
        src = get_source(name)
        (f,) = src.files
        assert f.name == fname and f.urls == (base + fname,) and f.md5 == md5
        assert f.sha256 is not None
        assert src.members_for(fname) == members
        assert src.format == name
    assert get_source("movielens_100k").files[0].size == 4_924_029


def test_criteo_1tb_files():
    files = criteo_1tb_files([0, 23, 0])
    assert [f.name for f in files] == ["day_0.gz", "day_23.gz"]
    assert files[0].urls[0] == "https://storage.googleapis.com/criteo-cail-datasets/day_0.gz"
    src = get_source("criteo_1tb")
    assert [f.name for f in src.files] == [f"day_{d}.gz" for d in range(24)]
    assert src.extract == ()  # read as gzip streams
    assert src.members_for("day_0.gz") == ()


@pytest.mark.parametrize("bad", [[-1], [24], [100], ["3"], [1.5], [True]])
def test_criteo_1tb_day_range(bad):
    with pytest.raises(ValueError, match=r"0\.\.23"):
        criteo_1tb_files(bad)


def test_criteo_1tb_needs_a_day():
    with pytest.raises(ValueError, match="at least one day"):
        criteo_1tb_files([])


def test_get_source_unknown_lists_names():
    with pytest.raises(UnknownSourceError) as info:
        get_source("criteo")
    assert isinstance(info.value, KeyError) and isinstance(info.value, ValueError)
    msg = str(info.value)
    assert "'criteo'" in msg
    for name in EXPECTED_SOURCES:
        assert name in msg


def test_remote_file_validation():
    with pytest.raises(ValueError, match="md5"):
        RemoteFile("a.zip", ("https://x/a.zip",), md5="abc")
    with pytest.raises(ValueError, match="sha256"):
        RemoteFile("a.zip", ("https://x/a.zip",), sha256="0" * 63)
    with pytest.raises(ValueError, match="plain file name"):
        RemoteFile("../a.zip")
    with pytest.raises(TypeError):
        RemoteFile("a.zip", "https://x/a.zip")  # type: ignore[arg-type]
    f = RemoteFile("a.zip", ["https://x/a.zip"], md5="A" * 32)  # type: ignore[arg-type]
    assert f.urls == ("https://x/a.zip",) and f.md5 == "a" * 32 and f.has_checksum
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.name = "b.zip"  # type: ignore[misc]


def test_dataset_source_validation():
    f = RemoteFile("a.zip", ("https://x/a.zip",))
    with pytest.raises(ValueError, match="unknown format"):
        DatasetSource("x", "X", "parquet", (f,))
    with pytest.raises(ValueError, match="not one of its files"):
        DatasetSource("x", "X", "criteo_tsv", (f,), extract=(Extract("b.zip", ("m",)),))
    assert registry.CRITEO_1TB_DAYS == 24
