"""Tests for workbench.data.download against a real HTTP server on 127.0.0.1 (no external network).

The fixture server serves small files in the real raw formats (a Criteo-format TSV packed as
``dac.tar.gz`` with member ``train.txt``, an ml-100k-style zip, gzip day files) and can simulate a
truncated response, a server that ignores ``Range``, a missing file, a hanging server and a server
that is down.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import random
import socket
import tarfile
from pathlib import Path

import pytest

from helpers.downloads import FileServer, criteo_tsv, remote, tar_gz, zip_bytes
from workbench.data import download
from workbench.data.download import (
    ChecksumError,
    DownloadError,
    ExtractError,
    acquire,
    extract_members,
    fetch,
)
from workbench.data.registry import criteo_1tb_files, get_source
from workbench.data.source import RemoteFile

# ------------------------------------------------------------------------------------------------
# test data in the real formats
# ------------------------------------------------------------------------------------------------


ML100K_MEMBERS = {
    "ml-100k/u.data": b"196\t242\t3\t881250949\n186\t302\t3\t891717742\n22\t377\t1\t878887116\n",
    "ml-100k/u.user": b"1|24|M|technician|85711\n2|53|F|other|94043\n",
    "ml-100k/u.item": "1|Toy Story (1995)|01-Jan-1995||http://x|0|0|0|1|1|1|0|0|0|0|0|0|0|0|0|0|0|0|0\n"
    "2|Caf\xe9 (1995)|01-Jan-1995||http://y|0|1|1|0|0|0|0|0|0|0|0|0|0|0|0|0|1|0|0\n".encode("latin-1"),
    "ml-100k/README": b"MovieLens 100K (test copy)\n",
}


# ------------------------------------------------------------------------------------------------
# the local HTTP server
# ------------------------------------------------------------------------------------------------


@pytest.fixture
def dead_url():
    """A URL on a local port where nothing listens (connection refused)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/data/file.bin"


@pytest.fixture
def hanging_url():
    """A URL whose server accepts the TCP connection (backlog) but never answers."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    try:
        yield f"http://127.0.0.1:{s.getsockname()[1]}/slow.bin"
    finally:
        s.close()


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv("WORKBENCH_OFFLINE", raising=False)
    monkeypatch.setenv("TQDM_DISABLE", "1")


BLOB = random.Random(7).randbytes(300_000)  # several 64 KiB socket reads, crosses no 1 MiB chunk


def parts_in(d: Path) -> list[Path]:
    return sorted(d.glob("*.part"))


# ------------------------------------------------------------------------------------------------
# fetch
# ------------------------------------------------------------------------------------------------


def test_good_download_verified(server, tmp_path):
    body = tar_gz({"train.txt": criteo_tsv(200), "readme.txt": b"test\n"})
    f = remote("dac.tar.gz", body, server.add("/dac.tar.gz", body), sha256=True)
    out = fetch(f, tmp_path / "raw", progress=False)
    assert out == (tmp_path / "raw" / "dac.tar.gz").absolute()
    assert out.read_bytes() == body
    assert parts_in(out.parent) == []
    reqs = server.for_path("/dac.tar.gz")
    assert len(reqs) == 1 and reqs[0]["range"] is None and reqs[0]["sent"] == len(body)
    # a second call uses the verified file without the network
    assert fetch(f, tmp_path / "raw", progress=False) == out
    assert len(server.for_path("/dac.tar.gz")) == 1


def test_progress_bar_enabled(server, tmp_path, monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE")
    f = remote("blob.bin", BLOB, server.add("/blob.bin", BLOB))
    assert fetch(f, tmp_path, progress=True).read_bytes() == BLOB


def test_truncated_then_resume(server, tmp_path):
    cut = 123_457
    url = server.add("/blob.bin", BLOB, mode="truncate", cut=cut)
    f = remote("blob.bin", BLOB, url, sha256=True)
    with pytest.raises(DownloadError) as info:
        fetch(f, tmp_path, progress=False, timeout=5)
    assert not isinstance(info.value, ChecksumError)
    msg = str(info.value)
    assert "incomplete" in msg and f"{cut} of {len(BLOB)} bytes" in msg
    assert "run again to resume" in msg
    part = tmp_path / "blob.bin.part"
    assert part.read_bytes() == BLOB[:cut]
    assert not (tmp_path / "blob.bin").exists()  # no partial file under the final name

    server.set_mode("/blob.bin", "good")
    out = fetch(f, tmp_path, progress=False, timeout=5)
    assert out.read_bytes() == BLOB
    assert not part.exists()
    last = server.for_path("/blob.bin")[-1]
    assert last["range"] == f"bytes={cut}-"
    assert last["status"] == 206 and last["sent"] == len(BLOB) - cut


def test_stalled_transfer_times_out_and_keeps_part(server, tmp_path):
    url = server.add("/blob.bin", BLOB, mode="stall", cut=4096)
    f = remote("blob.bin", BLOB, url)
    with pytest.raises(DownloadError, match=f"incomplete: 4096 of {len(BLOB)} bytes.*timed out"):
        fetch(f, tmp_path, progress=False, timeout=0.5)
    assert (tmp_path / "blob.bin.part").stat().st_size == 4096
    server.set_mode("/blob.bin", "good")
    assert fetch(f, tmp_path, progress=False).read_bytes() == BLOB
    assert server.for_path("/blob.bin")[-1]["range"] == "bytes=4096-"


def test_truncated_without_known_size_or_checksum(server, tmp_path):
    url = server.add("/blob.bin", BLOB, mode="truncate", cut=1000)
    f = remote("blob.bin", BLOB, url, size=False, md5=False)
    with pytest.raises(DownloadError, match=f"1000 of {len(BLOB)} bytes"):
        fetch(f, tmp_path, progress=False)
    server.set_mode("/blob.bin", "good")
    assert fetch(f, tmp_path, progress=False).read_bytes() == BLOB
    assert server.for_path("/blob.bin")[-1]["sent"] == len(BLOB) - 1000


def test_server_ignores_range_restarts(server, tmp_path):
    cut = 50_000
    url = server.add("/blob.bin", BLOB, mode="truncate", cut=cut)
    f = remote("blob.bin", BLOB, url)
    with pytest.raises(DownloadError):
        fetch(f, tmp_path, progress=False)
    server.set_mode("/blob.bin", "ignore_range")
    out = fetch(f, tmp_path, progress=False)
    assert out.read_bytes() == BLOB  # not the prefix twice
    last = server.for_path("/blob.bin")[-1]
    assert last["range"] == f"bytes={cut}-" and last["status"] == 200 and last["sent"] == len(BLOB)
    assert parts_in(tmp_path) == []


def test_complete_part_is_finished_without_network(server, tmp_path):
    f = remote("blob.bin", BLOB, server.add("/blob.bin", BLOB))
    (tmp_path / "blob.bin.part").write_bytes(BLOB)
    assert fetch(f, tmp_path, progress=False).read_bytes() == BLOB
    assert server.requests == []


def test_range_not_satisfiable_means_complete(server, tmp_path):
    # size unknown: the client must ask; the server answers 416 bytes */N and the part is whole
    f = remote("blob.bin", BLOB, server.add("/blob.bin", BLOB), size=False)
    (tmp_path / "blob.bin.part").write_bytes(BLOB)
    assert fetch(f, tmp_path, progress=False).read_bytes() == BLOB
    assert [r["status"] for r in server.requests] == [416]


def test_wrong_checksum(server, tmp_path):
    f = dataclasses.replace(remote("blob.bin", BLOB, server.add("/blob.bin", BLOB)),
                            md5=hashlib.md5(b"something else").hexdigest())
    with pytest.raises(ChecksumError) as info:
        fetch(f, tmp_path, progress=False)
    msg = str(info.value)
    assert "blob.bin" in msg and f.md5 in msg and hashlib.md5(BLOB).hexdigest() in msg
    assert not (tmp_path / "blob.bin").exists()
    assert parts_in(tmp_path) == []


def test_wrong_sha256(server, tmp_path):
    f = dataclasses.replace(remote("blob.bin", BLOB, server.add("/blob.bin", BLOB), md5=False),
                            sha256="0" * 64)
    with pytest.raises(ChecksumError, match="sha256 mismatch"):
        fetch(f, tmp_path, progress=False)
    assert list(tmp_path.iterdir()) == []


def test_server_down(dead_url, tmp_path):
    f = remote("file.bin", BLOB, dead_url)
    with pytest.raises(DownloadError) as info:
        fetch(f, tmp_path / "raw", progress=False, timeout=2, hint="HINT: get it from the vendor")
    msg = str(info.value)
    assert dead_url in msg and "refused" in msg
    assert f"place the file by hand at {(tmp_path / 'raw' / 'file.bin').absolute()}" in msg.lower()
    assert "HINT: get it from the vendor" in msg
    assert not (tmp_path / "raw" / "file.bin").exists()
    assert parts_in(tmp_path / "raw") == []


def test_hanging_server_times_out(hanging_url, tmp_path):
    f = remote("slow.bin", BLOB, hanging_url)
    with pytest.raises(DownloadError, match="timed out") as info:  # the socket timeout, not a hang
        fetch(f, tmp_path, progress=False, timeout=0.5)
    assert hanging_url in str(info.value)


def test_all_mirrors_listed(server, dead_url, tmp_path):
    missing = server.base + "/missing.bin"  # not a route: 404
    f = remote("file.bin", BLOB, dead_url, missing)
    with pytest.raises(DownloadError) as info:
        fetch(f, tmp_path, progress=False, timeout=2)
    msg = str(info.value)
    assert dead_url in msg and missing in msg and "HTTP 404" in msg


def test_mirror_fallback(server, dead_url, tmp_path):
    good = server.add("/blob.bin", BLOB)
    f = remote("blob.bin", BLOB, dead_url, server.base + "/gone.bin", good)
    assert fetch(f, tmp_path, progress=False, timeout=2).read_bytes() == BLOB
    assert [r["path"] for r in server.requests] == ["/gone.bin", "/blob.bin"]


def test_mirror_with_wrong_size_is_skipped(server, tmp_path):
    other = server.add("/short.bin", BLOB[:1000])
    good = server.add("/blob.bin", BLOB)
    f = remote("blob.bin", BLOB, other, good)
    assert fetch(f, tmp_path, progress=False).read_bytes() == BLOB


def test_placed_by_hand_no_network(server, tmp_path, monkeypatch):
    f = remote("blob.bin", BLOB, server.add("/blob.bin", BLOB), sha256=True)
    (tmp_path / "blob.bin").write_bytes(BLOB)
    assert fetch(f, tmp_path, progress=False) == tmp_path / "blob.bin"
    assert len(server.requests) == 0
    # the verified checksum is remembered: a second call does not hash the file again
    monkeypatch.setattr(download, "file_digests", lambda *a: pytest.fail("re-hashed"))
    assert fetch(f, tmp_path, progress=False) == tmp_path / "blob.bin"
    assert len(server.requests) == 0


def test_placed_by_hand_size_only(server, tmp_path):
    f = remote("blob.bin", BLOB, server.add("/blob.bin", BLOB), md5=False)
    (tmp_path / "blob.bin").write_bytes(BLOB)
    fetch(f, tmp_path, progress=False, offline=True)
    assert server.requests == []


def test_bad_file_placed_by_hand(server, tmp_path):
    f = remote("blob.bin", BLOB, server.add("/blob.bin", BLOB))
    (tmp_path / "blob.bin").write_bytes(b"x" * len(BLOB))
    with pytest.raises(ChecksumError, match="md5 mismatch"):
        fetch(f, tmp_path, progress=False, offline=True)
    assert server.requests == []
    # online, the bad copy is replaced by a verified download
    assert fetch(f, tmp_path, progress=False).read_bytes() == BLOB
    assert len(server.requests) == 1


def test_offline_mode(server, tmp_path, monkeypatch):
    f = remote("blob.bin", BLOB, server.add("/blob.bin", BLOB))
    with pytest.raises(DownloadError) as info:
        fetch(f, tmp_path / "raw", progress=False, offline=True)
    assert str((tmp_path / "raw" / "blob.bin").absolute()) in str(info.value)
    assert "offline" in str(info.value)
    monkeypatch.setenv("WORKBENCH_OFFLINE", "1")
    with pytest.raises(DownloadError, match="offline"):
        fetch(f, tmp_path / "raw", progress=False)
    assert server.requests == []
    assert not (tmp_path / "raw").exists() or list((tmp_path / "raw").iterdir()) == []


def test_concurrent_download_is_refused(server, tmp_path):
    import fcntl

    f = remote("blob.bin", BLOB, server.add("/blob.bin", BLOB))
    with open(tmp_path / "blob.bin.part", "a+b") as other:
        fcntl.flock(other.fileno(), fcntl.LOCK_EX)
        with pytest.raises(DownloadError, match="another process"):
            fetch(f, tmp_path, progress=False)
    assert server.requests == []


# ------------------------------------------------------------------------------------------------
# extract_members
# ------------------------------------------------------------------------------------------------


def test_extract_tar_gz(tmp_path):
    tsv = criteo_tsv(100)
    archive = tmp_path / "dac.tar.gz"
    archive.write_bytes(tar_gz({"readme.txt": b"r\n", "./train.txt": tsv, "test.txt": b"t\n"}))
    out = extract_members(archive, ["train.txt"], tmp_path / "raw")
    assert out == [(tmp_path / "raw" / "train.txt").absolute()]
    assert out[0].read_bytes() == tsv
    assert all(len(line.split(b"\t")) == 40 for line in tsv.splitlines())
    assert not (tmp_path / "raw" / "test.txt").exists()
    assert [p.name for p in (tmp_path / "raw").iterdir()
            if not p.name.startswith(".")] == ["train.txt"]
    mtime = out[0].stat().st_mtime_ns
    assert extract_members(archive, ["train.txt"], tmp_path / "raw") == out
    assert out[0].stat().st_mtime_ns == mtime  # skipped: already extracted


def test_extract_zip_and_skip(tmp_path):
    archive = tmp_path / "ml-100k.zip"
    archive.write_bytes(zip_bytes(ML100K_MEMBERS))
    members = ["ml-100k/u.data", "ml-100k/u.user", "ml-100k/u.item"]
    out = extract_members(archive, members, tmp_path)
    assert out == [tmp_path / m for m in members]
    for m, p in zip(members, out):
        assert p.read_bytes() == ML100K_MEMBERS[m]
    # without the manifest, present members of the right size are skipped, a damaged one redone
    (tmp_path / ".ml-100k.zip.extracted.json").unlink()
    mtime = out[0].stat().st_mtime_ns
    out[1].write_bytes(b"short")
    assert extract_members(archive, members, tmp_path) == out
    assert out[0].stat().st_mtime_ns == mtime
    assert out[1].read_bytes() == ML100K_MEMBERS["ml-100k/u.user"]


def test_extract_missing_member(tmp_path):
    archive = tmp_path / "a.zip"
    archive.write_bytes(zip_bytes({"x/a.txt": b"a"}))
    with pytest.raises(ExtractError, match=r"x/b\.txt not found.*x/a\.txt"):
        extract_members(archive, ["x/b.txt"], tmp_path / "out")
    tgz = tmp_path / "a.tar.gz"
    tgz.write_bytes(tar_gz({"a.txt": b"a"}))
    with pytest.raises(ExtractError, match="b.txt not found"):
        extract_members(tgz, ["b.txt"], tmp_path / "out")


@pytest.mark.parametrize("name", ["../evil.txt", "a/../../evil.txt", "/tmp/evil.txt"])
def test_extract_rejects_path_traversal(tmp_path, name):
    evil = {name: b"pwned"}
    for archive, data in ((tmp_path / "e.tar.gz", tar_gz(evil)),
                          (tmp_path / "e.zip", zip_bytes(evil))):
        archive.write_bytes(data)
        with pytest.raises(ExtractError, match="unsafe"):
            extract_members(archive, [name], tmp_path / "out")
    assert not (tmp_path / "evil.txt").exists()
    assert not Path("/tmp/evil.txt").exists() or Path("/tmp/evil.txt").read_bytes() != b"pwned"


def test_extract_rejects_symlink_member(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        info = tarfile.TarInfo("train.txt")
        info.type = tarfile.SYMTYPE
        info.linkname = "/etc/passwd"
        tf.addfile(info)
    archive = tmp_path / "l.tar.gz"
    archive.write_bytes(buf.getvalue())
    with pytest.raises(ExtractError, match="not a regular file"):
        extract_members(archive, ["train.txt"], tmp_path / "out")
    assert not (tmp_path / "out" / "train.txt").exists()


def test_extract_corrupt_archive(tmp_path):
    archive = tmp_path / "dac.tar.gz"
    archive.write_bytes(tar_gz({"train.txt": criteo_tsv(500)})[:300])
    with pytest.raises(ExtractError, match="corrupt or truncated"):
        extract_members(archive, ["train.txt"], tmp_path / "out")
    assert not (tmp_path / "out" / "train.txt").exists()
    assert [p for p in (tmp_path / "out").iterdir()] == []  # no temporary file left


# ------------------------------------------------------------------------------------------------
# acquire
# ------------------------------------------------------------------------------------------------


def local_source(name: str, server: FileServer, bodies: dict[str, bytes]):
    """The registry source ``name`` with its files served by the local server (real URLs unused)."""
    src = get_source(name)
    files = tuple(remote(f.name, bodies[f.name], server.add(f"/{name}/{f.name}", bodies[f.name]),
                         sha256=True) for f in src.files)
    return dataclasses.replace(src, files=files)


def test_acquire_movielens_100k(server, tmp_path):
    src = local_source("movielens_100k", server, {"ml-100k.zip": zip_bytes(ML100K_MEMBERS)})
    paths = acquire(src, tmp_path / "raw", progress=False)
    assert paths == [tmp_path / "raw" / m
                     for m in ("ml-100k/u.data", "ml-100k/u.user", "ml-100k/u.item")]
    assert paths[0].read_bytes() == ML100K_MEMBERS["ml-100k/u.data"]
    assert not (tmp_path / "raw" / "ml-100k" / "README").exists()
    n = len(server.requests)
    assert acquire(src, tmp_path / "raw", progress=False) == paths
    assert len(server.requests) == n  # second run: no network, nothing re-extracted
    assert acquire(src, tmp_path / "raw", progress=False, offline=True) == paths


def test_acquire_criteo_kaggle(server, tmp_path):
    tsv = criteo_tsv(300)
    src = local_source("criteo_kaggle", server,
                       {"dac.tar.gz": tar_gz({"train.txt": tsv, "test.txt": b"",
                                              "readme.txt": b""})})
    assert acquire(src, tmp_path, progress=False) == [tmp_path / "train.txt"]
    assert (tmp_path / "train.txt").read_bytes() == tsv
    assert (tmp_path / "dac.tar.gz").exists() and parts_in(tmp_path) == []


def test_acquire_criteo_1tb_days(server, tmp_path):
    src = get_source("criteo_1tb")
    bodies = {f"day_{d}.gz": gzip.compress(criteo_tsv(50, seed=d)) for d in (0, 3)}
    files = tuple(remote(f.name, bodies[f.name], server.add(f"/{f.name}", bodies[f.name]),
                         md5=False, size=False)
                  for f in criteo_1tb_files([0, 3]))
    paths = acquire(src, tmp_path, files=files, progress=False)
    assert paths == [tmp_path / "day_0.gz", tmp_path / "day_3.gz"]
    with gzip.open(paths[1], "rt") as fh:
        assert len(fh.readline().rstrip("\n").split("\t")) == 40


def test_acquire_failure_carries_hint(dead_url, tmp_path):
    src = get_source("movielens_100k")
    f = dataclasses.replace(src.files[0], urls=(dead_url,))
    with pytest.raises(DownloadError) as info:
        acquire(dataclasses.replace(src, files=(f,)), tmp_path, progress=False, timeout=2)
    assert src.manual_hint in str(info.value) and str(tmp_path / "ml-100k.zip") in str(info.value)


@pytest.mark.parametrize("name,fname,word",
                         [("avazu", "train.gz", "Kaggle"),
                          ("taobao_user_behavior", "UserBehavior.csv", "Tianchi")])
def test_acquire_manual_only(server, tmp_path, name, fname, word):
    src = get_source(name)
    with pytest.raises(DownloadError) as info:
        acquire(src, tmp_path / "raw", progress=False)
    msg = str(info.value)
    assert str((tmp_path / "raw" / fname).absolute()) in msg and "missing" in msg and word in msg
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / fname).write_bytes(b"placed by hand")
    assert acquire(src, tmp_path / "raw", progress=False) == [tmp_path / "raw" / fname]
    assert server.requests == []


# ------------------------------------------------------------------------------------------------
# files without a published checksum: what can still be checked
# ------------------------------------------------------------------------------------------------


def _day_file(server: FileServer, mode: str, cut: int = 0, headers: dict | None = None,
              body: bytes | None = None) -> RemoteFile:
    """A Criteo-1TB-like ``day_0.gz``: no checksum and no size published."""
    body = gzip.compress(criteo_tsv(300), mtime=0) if body is None else body
    url = server.add("/day_0.gz", body, mode=mode, cut=cut, headers=headers)
    return RemoteFile(name="day_0.gz", urls=(url,))


def test_unsized_body_cut_short_is_not_placed(server: FileServer, tmp_path: Path) -> None:
    """No Content-Length, no checksum: the gzip stream ending early gives it away."""
    file = _day_file(server, "unsized_cut", cut=2000)
    with pytest.raises(ChecksumError, match="gzip data ends early"):
        fetch(file, tmp_path, progress=False)
    assert not (tmp_path / "day_0.gz").exists()


def test_complete_unsized_gzip_is_accepted(server: FileServer, tmp_path: Path) -> None:
    body = gzip.compress(criteo_tsv(300), mtime=0) + gzip.compress(b"more\n", mtime=0)
    file = _day_file(server, "unsized_cut", cut=10**9, body=body)  # multi-member, whole
    assert fetch(file, tmp_path, progress=False).read_bytes() == body


def test_html_page_is_refused(server: FileServer, tmp_path: Path) -> None:
    file = _day_file(server, "good", body=b"<html><body>Please log in</body></html>\n",
                     headers={"Content-Type": "text/html; charset=utf-8"})
    with pytest.raises(DownloadError, match="serves an HTML page"):
        fetch(file, tmp_path, progress=False)
    assert not (tmp_path / "day_0.gz").exists()


def test_html_page_without_content_type_fails_the_gzip_check(server: FileServer,
                                                              tmp_path: Path) -> None:
    file = _day_file(server, "good", body=b"<!DOCTYPE html><p>moved</p>" * 2)
    with pytest.raises(ChecksumError, match="not gzip data"):
        fetch(file, tmp_path, progress=False)


def test_content_encoding_other_than_identity_is_refused(server: FileServer,
                                                         tmp_path: Path) -> None:
    inner = gzip.compress(criteo_tsv(50), mtime=0)
    file = _day_file(server, "good", body=gzip.compress(inner, mtime=0),
                     headers={"Content-Encoding": "gzip"})
    with pytest.raises(DownloadError, match="Content-Encoding gzip"):
        fetch(file, tmp_path, progress=False)


def test_trickling_server_stops_at_the_minimum_rate(server: FileServer, tmp_path: Path) -> None:
    """One byte every 0.1 s never trips the 30 s socket timeout; the minimum rate stops it."""
    file = _day_file(server, "trickle")
    with pytest.raises(DownloadError, match=r"stalled: .* below the minimum 1,000"):
        fetch(file, tmp_path, progress=False, min_rate=1000.0, rate_window_s=0.5)
    assert (tmp_path / "day_0.gz.part").exists()  # kept: the next run resumes it
