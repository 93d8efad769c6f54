"""The real samples' registry: pinned public sources, mirrors first, derived files, refusals.

A local HTTP server on 127.0.0.1 stands in for the internet (``tests/public_sources.py``):
``WORKBENCH_SOURCE_BASE`` rewrites every registered URL ``https://host/path`` onto
``<server>/host/path``, and the server holds the samples' bytes laid out that way (taken from
this repository's CI copy of the samples, Taobao's upstream rebuilt from it and the 25 bytes of
its truncated last line). No test here reaches beyond the loopback.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from urllib.parse import urlparse

import pytest

from conftest import shared_data_dir
from helpers.downloads import zip_bytes
from helpers.public_sources import TAOBAO_TAIL, mirror_file, serve, served_path, sources_tree
from workbench.data import download, transfer
from workbench.data.download import (
    SOURCE_BASE_ENV,
    UPSTREAM_DIR,
    ChecksumError,
    DownloadError,
    acquire,
    check_file,
    fetch,
    mirror_folders,
    source_url,
)
from workbench.data.registry import MIRRORS_ENV, SAMPLES, TAOBAO_SAMPLE, github_raw
from workbench.data.source import (
    DatasetSource,
    DropPartialLastLine,
    RemoteFile,
    Upstream,
    ZipMember,
)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


needs_samples = pytest.mark.skipif(not shared_data_dir().is_dir(),
                                   reason=f"no CI copy of the samples at {shared_data_dir()}")


@pytest.fixture
def internet(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """The samples' public sources served on 127.0.0.1, ``WORKBENCH_SOURCE_BASE`` set to it;
    yields the served tree (tests may corrupt a file in it)."""
    if not shared_data_dir().is_dir():
        pytest.skip(f"no CI copy of the samples at {shared_data_dir()}")
    tree = sources_tree(tmp_path_factory.mktemp("internet"))
    base, httpd = serve(tree)
    monkeypatch.setenv(SOURCE_BASE_ENV, base)
    monkeypatch.delenv(MIRRORS_ENV, raising=False)
    monkeypatch.delenv("WORKBENCH_OFFLINE", raising=False)
    try:
        yield tree
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> str:
    """Every URL rewritten onto a closed loopback port (connection refused at once)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    monkeypatch.setenv(SOURCE_BASE_ENV, base)
    monkeypatch.delenv(MIRRORS_ENV, raising=False)
    return base


def leftovers(folder: Path) -> list[str]:
    """Temporary or partial files under ``folder`` (nothing half-written may stay)."""
    return sorted(p.name for p in folder.rglob("*") if p.name.endswith((".tmp", ".part")))


# ----------------------------------------------------------------------------------- registry


def test_every_sample_file_is_pinned_and_verifiable() -> None:
    for source in SAMPLES:
        assert source.files and source.manual_hint and MIRRORS_ENV in source.manual_hint
        for f in source.files:
            assert f.sha256 and f.size, f.name
            assert f.all_urls, f"{source.name}/{f.name} has no URL"
            for url in f.urls:  # a repository's file at a full commit: its bytes never change
                assert url.startswith("https://raw.githubusercontent.com/"), url
                assert len(urlparse(url).path.split("/")[3]) == 40, url
            for up in f.upstreams:
                assert up.size > 0 and len(up.sha256) == 64


def test_a_commit_must_be_pinned() -> None:
    with pytest.raises(ValueError, match="full 40-hex commit"):
        github_raw("owner/repo", "main", "data/x.csv")


@needs_samples
def test_the_ci_copy_of_every_sample_verifies_against_the_registry() -> None:
    for source in SAMPLES:
        for f in source.files:
            assert check_file(mirror_file(source, f.name), f) is None, f.name


def test_source_base_rewrites_urls_by_host(monkeypatch: pytest.MonkeyPatch) -> None:
    url = "https://raw.githubusercontent.com/a/b/" + "0" * 40 + "/x.csv"
    monkeypatch.delenv(SOURCE_BASE_ENV, raising=False)
    assert source_url(url) == url
    monkeypatch.setenv(SOURCE_BASE_ENV, "http://127.0.0.1:8000/")
    assert source_url(url) == "http://127.0.0.1:8000/raw.githubusercontent.com/a/b/" + \
        "0" * 40 + "/x.csv"


def test_mirror_folders_env_first_then_config_existing_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mine, ci = tmp_path / "mine", tmp_path / "ci"
    mine.mkdir()
    ci.mkdir()
    monkeypatch.setenv(MIRRORS_ENV, os.pathsep.join([str(mine), str(tmp_path / "gone"), ""]))
    assert mirror_folders([str(ci / ".." / "ci"), str(tmp_path / "absent")]) == [mine, ci]
    monkeypatch.delenv(MIRRORS_ENV)
    assert mirror_folders([str(tmp_path / "absent")]) == []


# ------------------------------------------------------------------------ from the "internet"


def test_every_sample_is_fetched_verified_and_derived_from_its_sources(
        internet: Path, tmp_path: Path) -> None:
    for source in SAMPLES:
        out = tmp_path / source.name
        paths = acquire(source, out, progress=False)
        assert [p.name for p in paths] == [f.name for f in source.files]
        for f, p in zip(source.files, paths):
            assert p.read_bytes() == mirror_file(source, f.name).read_bytes(), f.name
        assert leftovers(out) == []
    upstream = tmp_path / TAOBAO_SAMPLE.name / download.UPSTREAM_DIR / "UserBehavior.csv"
    assert upstream.read_bytes().endswith(b"\n" + TAOBAO_TAIL)  # kept, verified, for reruns


def test_a_corrupted_download_is_refused_and_not_kept(internet: Path, tmp_path: Path) -> None:
    source = SAMPLES[1]  # avazu: one file
    served = served_path(internet, source.files[0].urls[0])
    data = bytearray(served.read_bytes())
    data[100] ^= 1  # same size, one bit flipped
    served.write_bytes(bytes(data))
    with pytest.raises(ChecksumError, match="is corrupt: sha256 mismatch") as info:
        acquire(source, tmp_path, progress=False)
    assert "\n" not in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing placed, no .part


def test_a_corrupted_upstream_is_refused_before_deriving(internet: Path, tmp_path: Path) -> None:
    up = TAOBAO_SAMPLE.files[0].upstreams[0]
    served = served_path(internet, up.urls[0])
    served.write_bytes(served.read_bytes()[:-3] + b"buy")
    with pytest.raises(ChecksumError, match="UserBehavior.csv downloaded from .* is corrupt"):
        acquire(TAOBAO_SAMPLE, tmp_path, progress=False)
    assert not (tmp_path / "UserBehavior_head.csv").exists() and leftovers(tmp_path) == []


# ---------------------------------------------------------------------------------- mirrors


@needs_samples
def test_a_mirror_is_used_before_any_url(tmp_path: Path, no_network: str) -> None:
    for source in SAMPLES:
        paths = acquire(source, tmp_path / source.name, progress=False,
                        mirrors=[shared_data_dir()])
        for f, p in zip(source.files, paths):
            assert check_file(p, f) is None
            assert not p.is_symlink()  # a copy: the manifest names data/, wherever bytes came from


@needs_samples
def test_a_corrupted_mirror_file_is_refused_in_one_line(tmp_path: Path, no_network: str) -> None:
    source = SAMPLES[0]
    mirror = tmp_path / "mirror"
    (mirror / source.mirror_dir).mkdir(parents=True)
    for f in source.files:
        (mirror / source.mirror_dir / f.name).write_bytes(mirror_file(source, f.name).read_bytes())
    bad = mirror / source.mirror_dir / source.files[1].name
    data = bytearray(bad.read_bytes())
    data[-2] ^= 1
    bad.write_bytes(bytes(data))
    out = tmp_path / "downloads"
    with pytest.raises(ChecksumError) as info:
        acquire(source, out, progress=False, mirrors=[mirror])
    message = str(info.value)
    assert "\n" not in message and str(bad) in message
    assert f"expected {source.files[1].sha256}, got {_sha(bytes(data))}" in message
    assert not (out / source.files[1].name).exists() and leftovers(out) == []


def test_a_user_mirror_by_name_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       no_network: str) -> None:
    body = b"1,2,3\n"
    f = RemoteFile("x.csv", ("https://example.org/x.csv",), sha256=_sha(body), size=len(body))
    source = DatasetSource("own", "own", "criteo_tsv", (f,), mirror_dir="sub")
    flat = tmp_path / "flat"  # a folder holding the file itself, not in <mirror_dir>/
    flat.mkdir()
    (flat / "x.csv").write_bytes(body)
    monkeypatch.setenv(MIRRORS_ENV, str(flat))
    assert acquire(source, tmp_path / "out", progress=False,
                   mirrors=mirror_folders())[0].read_bytes() == body


# ------------------------------------------------------------------------- derived files


def test_zip_members_derive_and_the_archive_is_fetched_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    members = {"d/a.txt": b"alpha\n", "d/b.txt": b"beta\n" * 100}
    archive = zip_bytes(members)
    (tmp_path / "www" / "host").mkdir(parents=True)
    (tmp_path / "www" / "host" / "d.zip").write_bytes(archive)
    base, httpd = serve(tmp_path / "www")
    monkeypatch.setenv(SOURCE_BASE_ENV, base)
    seen: list[str] = []
    original = transfer.open_url
    monkeypatch.setattr(transfer, "open_url",
                        lambda url, have, timeout: seen.append(url) or original(url, have, timeout))
    try:
        files = tuple(RemoteFile(name.split("/")[1], sha256=_sha(body), size=len(body),
                                 upstreams=(Upstream("d.zip", ("https://host/d.zip",),
                                                     _sha(archive), len(archive),
                                                     ZipMember(name)),))
                      for name, body in members.items())
        paths = acquire(DatasetSource("z", "z", "criteo_tsv", files), tmp_path / "out",
                        progress=False)
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert [p.read_bytes() for p in paths] == list(members.values())
    assert seen == [f"{base}/host/d.zip"]  # once, for both members


def test_a_derived_file_that_does_not_verify_is_not_kept(tmp_path: Path) -> None:
    upstream_bytes = b"a,b\nc,d\ncut"
    store = tmp_path / "out" / download.UPSTREAM_DIR
    store.mkdir(parents=True)
    (store / "up.csv").write_bytes(upstream_bytes)  # already fetched and verified
    wrong = RemoteFile("f.csv", sha256="0" * 64, size=8,
                       upstreams=(Upstream("up.csv", ("https://host/up.csv",),
                                           _sha(upstream_bytes), len(upstream_bytes),
                                           DropPartialLastLine()),))
    with pytest.raises(ChecksumError, match="derived from .* does not verify: sha256 mismatch"):
        fetch(wrong, tmp_path / "out", progress=False)
    assert not (tmp_path / "out" / "f.csv").exists() and leftovers(tmp_path / "out") == []
    right = RemoteFile("f.csv", sha256=_sha(b"a,b\nc,d\n"), size=8, upstreams=wrong.upstreams)
    assert fetch(right, tmp_path / "out", progress=False).read_bytes() == b"a,b\nc,d\n"


# ----------------------------------------------------------------------------- unavailable


def test_no_mirror_and_no_network_names_files_urls_and_the_fix(tmp_path: Path,
                                                                no_network: str) -> None:
    source = SAMPLES[0]
    with pytest.raises(DownloadError) as info:
        acquire(source, tmp_path / "out", progress=False, timeout=2)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{source.name}: could not fetch ")
    for f in source.files:
        assert f.name in message
        assert f"{source_url(f.urls[0])} (" in message  # the exact URL tried, and why
    assert "no mirror folder is set" in message and f"{MIRRORS_ENV}=" in message
    assert len(info.value.tried) == len(source.files)
    assert not (tmp_path / "out").exists() or leftovers(tmp_path / "out") == []


def test_every_samples_offline_hint_followed_literally_works(
        internet: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 68: offline, each sample's message says which URL to download elsewhere and under
    which name in a mirror folder; done literally (the bytes of that URL, unchanged, there), the
    next offline run takes them. Taobao's hint names the upstream (its file is derived: the
    upstream's cut last line dropped), which used to be refused when copied as the derived
    name, and a mirror was looked up only by the derived name."""
    import re

    mirror = tmp_path / "elsewhere"
    for source in SAMPLES:
        with pytest.raises(DownloadError) as info:
            acquire(source, tmp_path / source.name, progress=False, offline=True)
        steps = re.findall(r"(https://\S+) into a folder as (\S+?)[,;]", str(info.value))
        assert len(steps) == len(source.files), str(info.value)
        for url, name in steps:
            (mirror / name).parent.mkdir(parents=True, exist_ok=True)
            (mirror / name).write_bytes(served_path(internet, url).read_bytes())  # "download"
        monkeypatch.setenv(MIRRORS_ENV, str(mirror))
        paths = acquire(source, tmp_path / source.name, progress=False, offline=True,
                        mirrors=mirror_folders())
        monkeypatch.delenv(MIRRORS_ENV)
        for f, p in zip(source.files, paths):
            assert check_file(p, f) is None, p
    assert (tmp_path / TAOBAO_SAMPLE.name / UPSTREAM_DIR).is_dir()  # derived from the upstream


def test_offline_a_kept_upstream_is_derived_from(internet: Path, tmp_path: Path) -> None:
    """The online path keeps a derived file's upstream in ``.upstream/``; offline, with the
    derived file gone, it is derived again from the kept upstream, not refused."""
    out = tmp_path / "downloads"
    first = acquire(TAOBAO_SAMPLE, out, progress=False)
    kept = first[0].read_bytes()
    assert (out / UPSTREAM_DIR).is_dir()
    first[0].unlink()
    again = acquire(TAOBAO_SAMPLE, out, progress=False, offline=True)
    assert again[0].read_bytes() == kept
