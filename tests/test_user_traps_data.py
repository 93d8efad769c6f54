"""The data-side traps a user met: truncated gzip input, a too small memory limit, a full disk,
the Criteo CSV sample libraries ship, a train set of one label class, a download onto a folder.

Each test runs the command (or the call it makes) as the user did and checks the message: one
line naming the problem and its fix, a non-zero exit, no traceback, nothing half-written.
"""

from __future__ import annotations

import errno
import gzip
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers.downloads import remote, tar_gz
from helpers.traps import criteo_lines, failed_with, local, run, stage
from workbench.config import load
from workbench.data import pipeline, streaming
from workbench.data.config import DatasetConfig
from workbench.data.download import DownloadError, extract_members, fetch
from workbench.data.formats import describe_file, parse
from workbench.data.preprocess import RowGroupWriter
from workbench.data.schema import MalformedInputError
from workbench.stages import cli
from workbench.utils.io import DiskFullError

# end to end (each runs the command line or a module as a user does): not in make test-fast
pytestmark = pytest.mark.slow


def leftovers(tmp: Path) -> list[str]:
    """Whatever a failed preprocess left under ``data/processed`` (temporaries included)."""
    processed = tmp / "data" / "processed"
    return sorted(p.name for p in processed.iterdir()) if processed.exists() else []


def named(*args: str) -> tuple[str, ...]:
    """The user's own dataset, named as in the probe: ``dataset.name=own``."""
    return (*args, "dataset.name=own")


# ------------------------------------------------------------------------- 1. a truncated .gz


@pytest.mark.parametrize("engine", ["streaming", "memory"])
def test_a_truncated_gzip_input_names_the_file_and_where_it_ends(tmp_path: Path,
                                                                 engine: str) -> None:
    whole = gzip.compress(("\n".join(criteo_lines(3000)) + "\n").encode(), mtime=0)
    cut = whole[: len(whole) // 2]
    args = named(*local(tmp_path, "day_0.tsv.gz", cut, "criteo_tsv"))
    proc = stage(tmp_path, "prepare", *args, f"dataset.engine={engine}")
    path = tmp_path / "own" / "day_0.tsv.gz"
    assert proc.returncode == 2
    failed_with(proc, f"UnreadableInputError: {path}: gzip stream ends early (truncated at byte "
                      f"{len(cut)}?) — re-download or re-compress it")
    assert leftovers(tmp_path) == []


def test_a_corrupt_gzip_input_is_named_too(tmp_path: Path) -> None:
    whole = gzip.compress(("\n".join(criteo_lines(3000)) + "\n").encode(), mtime=0)
    broken = whole[:200] + bytes(100) + whole[300:]
    args = named(*local(tmp_path, "day_0.gz", broken, "criteo_tsv"))
    last = failed_with(stage(tmp_path, "prepare", *args),
                       f"UnreadableInputError: {tmp_path / 'own' / 'day_0.gz'}: not valid gzip "
                       "data (")
    assert last.endswith("— re-download or re-compress it")
    assert leftovers(tmp_path) == []


# ----------------------------------------------------------------- 2. a too small memory limit


def test_a_too_small_memory_limit_names_the_key_and_a_value_to_try(tmp_path: Path) -> None:
    args = named(*local(tmp_path, "day_0.tsv", "\n".join(criteo_lines(3000)) + "\n",
                                  "criteo_tsv"))
    proc = stage(tmp_path, "prepare", *args, "dataset.memory_limit_mb=64")
    assert proc.returncode == 2
    last = failed_with(proc, "ConfigError: dataset.memory_limit_mb = 64: too small to preprocess "
                             "own (DuckDB ran out of memory while ",
                       "set dataset.memory_limit_mb=128 or more (allowed: an integer >= 64)")
    assert "MiB used" in last
    assert leftovers(tmp_path) == []


# ------------------------------------------------------------------------------ 3. a full disk


def _prepared(tmp: Path) -> tuple[DatasetConfig, Path]:
    """The user's own Criteo file, downloaded (its manifest written), ready to preprocess."""
    args = named(*local(tmp, "day_0.tsv", "\n".join(criteo_lines(3000)) + "\n",
                             "criteo_tsv"))
    ds = load(list(args)).dataset
    pipeline.download(ds, tmp / "data", seed=0)
    return ds, tmp / "data"


def _enospc(*_args: object, **_kwargs: object) -> None:
    raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space "
                                "left on device")


def _duckdb_enospc(*_args: object, **_kwargs: object) -> None:
    import duckdb

    raise duckdb.IOException('IO Error: Could not write file "work.duckdb": No space left on '
                             "device")


@pytest.mark.parametrize(("target", "raiser"), [
    ((RowGroupWriter, "_flush"), _enospc),  # pyarrow writing a split
    ((streaming, "_encode_in_duckdb"), _duckdb_enospc),  # DuckDB's words, no errno
])
def test_a_full_disk_is_one_line_naming_the_path_and_the_space_left(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: tuple[object, str],
        raiser: object) -> None:
    ds, data = _prepared(tmp_path)
    monkeypatch.setattr(*target, raiser)
    with pytest.raises(DiskFullError) as err:
        pipeline.preprocess(ds, data, seed=0)
    message = str(err.value)
    assert message.startswith(f"disk full while writing {data / 'processed' / 'own'} (")
    assert message.endswith(" MB free under paths.data): free space or set paths.data elsewhere")
    assert leftovers(tmp_path) == []


def _can_mount() -> bool:
    return os.geteuid() == 0 and shutil.which("mount") is not None


@pytest.mark.skipif(not _can_mount(), reason="mounting a small tmpfs needs root")
def test_a_full_disk_under_the_real_stage(tmp_path: Path) -> None:
    """A 64 KiB tmpfs as ``paths.data``: the manifest fits, the preprocess does not."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)],
                      capture_output=True).returncode != 0:
        pytest.skip("mount -t tmpfs is not permitted here")
    try:
        args = named(*local(tmp_path, "day_0.tsv",
                                      "\n".join(criteo_lines(3000)) + "\n", "criteo_tsv"))
        proc = run("workbench.stages", "prepare", *args, f"paths.data={disk / 'data'}",
                   f"paths.results={tmp_path / 'results'}", "profile.progress=false")
        assert proc.returncode == 2
        failed_with(proc, f"DiskFullError: disk full while writing {disk / 'data/processed/own'} (",
                    "MB free under paths.data): free space or set paths.data elsewhere")
        assert sorted(p.name for p in (disk / "data" / "processed").iterdir()) == []
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_the_command_line_says_a_full_disk_of_any_stage_in_one_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli, "run", _enospc)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["het-cache"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "DiskFullError: disk full: [Errno 28] Error writing bytes to file. Detail: [errno 28] No "
        "space left on device; free space or set paths.data / paths.results elsewhere"]


# ------------------------------------------------------ 4. the Criteo CSV that libraries ship

HEADER = ("label," + ",".join(f"I{i}" for i in range(1, 14)) + ","
          + ",".join(f"C{i}" for i in range(1, 27)))
#: The first line of DeepCTR's examples/criteo_sample.txt: pandas wrote I1..I13 as floats.
FIRST = ("0,,3,260.0,,17668.0,,,33.0,,,,0.0,,05db9164,08d6d899,9143c832,f56b7dd5,25c83c98,"
         "7e0ccccf,df5c2d18,0b153874,a73ee510,8f48ce11,a7b606c4,ae1bb660,eae197fd,b28479f6,"
         "bfef54b3,bad5ee18,e5ba7672,87c6f83c,,,0429f84b,,3a171ecb,c0d61a5c,,")


def criteo_sample(rows: int = 20) -> str:
    """A ``criteo_sample.txt`` as DeepCTR ships it: the header, I2 as an integer (-1 allowed),
    the other integer features as floats (``260.0``), empty cells for missing values."""
    rng = np.random.default_rng(3)
    lines = [HEADER, FIRST]
    for r in range(1, rows):
        dense = ["" if rng.random() < 0.3 else
                 str(int(rng.integers(-1, 300))) if j == 1 else f"{float(rng.integers(0, 9000))}"
                 for j in range(13)]
        cats = ["" if rng.random() < 0.1 else f"{int(v):08x}" for v in rng.integers(0, 2**32, 26)]
        lines.append(",".join([str(int(r % 4 == 1)), *dense, *cats]))
    return "\n".join(lines) + "\n"


def test_the_criteo_sample_libraries_ship_is_read_as_criteo_csv(tmp_path: Path) -> None:
    args = named(*local(tmp_path, "criteo_sample.txt", criteo_sample(), "criteo_csv"))
    proc = stage(tmp_path, "prepare", *args)
    assert proc.returncode == 0, proc.stderr
    train = pd.read_parquet(tmp_path / "data" / "processed" / "own" / "train.parquet")
    assert len(train) == 18  # 20 rows, none malformed, the last 10% are the test split
    assert train.loc[0, "I3"] == pytest.approx(np.log1p(260.0))
    assert train.loc[0, "I1"] == 0.0 and train.loc[0, "I5"] == pytest.approx(np.log1p(17668.0))


def test_an_integer_feature_with_a_fraction_stays_malformed_at_its_line(tmp_path: Path) -> None:
    lines = criteo_sample().splitlines()
    cells = lines[5].split(",")
    cells[5] = "2.5"  # I5
    lines[5] = ",".join(cells)
    lines[6] = lines[6].replace(",260.0,", ",1e3,")  # exponent notation of an integer is fine
    path = tmp_path / "criteo_sample.txt"
    path.write_text("\n".join(lines) + "\n")
    table = parse("criteo_csv", [path])
    assert table.report.rows == 19 and table.report.examples == [
        f"{path}:6: non-integer '2.5' in integer column I5"]
    with pytest.raises(MalformedInputError, match=rf"^{path}:6: non-integer '2.5'"):
        parse("criteo_csv", [path], strict=True)


def test_the_sniff_names_criteo_csv_when_the_sample_is_given_as_tsv(tmp_path: Path) -> None:
    args = named(*local(tmp_path, "criteo_sample.txt", criteo_sample(), "criteo_tsv"))
    failed_with(stage(tmp_path, "prepare", *args), "MalformedInputError",
                "criteo_sample.txt looks like a header line, then 40 comma-separated fields per "
                "line, like criteo_csv")
    assert "like criteo_csv" in describe_file(tmp_path / "own" / "criteo_sample.txt")


def _advised(proc: subprocess.CompletedProcess, stage_name: str) -> list[str]:
    """The command a one-line error advises, as ``argv`` (``python`` -> this interpreter)."""
    last = failed_with(proc, "MissingInputError")
    command = shlex.split(last[last.index("python -m workbench.stages "):].rstrip(")"))
    assert command[:4] == ["python", "-m", "workbench.stages", stage_name], command
    return [sys.executable, *command[1:]]


def test_the_advice_of_every_data_message_is_a_command_that_works(tmp_path: Path) -> None:
    """Each stage's advice, pasted as printed, runs; then the stage runs."""
    args = named(*local(tmp_path, "criteo_sample.txt", criteo_sample(), "criteo_csv"))
    where = (f"paths.data={tmp_path / 'data'}", f"paths.results={tmp_path / 'results'}",
             "profile.progress=false")
    # preprocess before download: the advice is the download command
    download = _advised(stage(tmp_path, "preprocess", *args), "download")
    assert subprocess.run(download, capture_output=True, text=True).returncode == 0
    assert stage(tmp_path, "preprocess", *args).returncode == 0
    # a later stage before preprocess (here: the processed split removed)
    for child in (tmp_path / "data" / "processed" / "own").iterdir():
        child.unlink()
    prepare = _advised(stage(tmp_path, "dataset-stats", *args), "prepare")
    assert "dataset.path=" in " ".join(prepare) and "--dataset" not in prepare
    done = subprocess.run(prepare, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert run("workbench.stages", "dataset-stats", *args, *where).returncode == 0


# ------------------------------------------------------------- 5. a train set of one class


@pytest.mark.parametrize("engine", ["streaming", "memory"])
def test_a_train_split_of_one_label_class_is_refused(tmp_path: Path, engine: str) -> None:
    """Criteo's test set with a constant 0 where the label goes: AUC would be nan everywhere."""
    lines = ["0" + line[1:] for line in criteo_lines(300)]
    args = named(*local(tmp_path, "test.txt", "\n".join(lines) + "\n", "criteo_tsv"))
    proc = stage(tmp_path, "prepare", *args, f"dataset.engine={engine}")
    assert proc.returncode == 2
    failed_with(proc, f"SingleClassError: dataset own: every train row of "
                      f"{tmp_path / 'own' / 'test.txt'} has label 0, one class: AUC is undefined")
    assert leftovers(tmp_path) == []


def test_a_test_fraction_that_leaves_one_class_is_blamed(tmp_path: Path) -> None:
    """``test_fraction=0.9999999`` leaves one train row: the message names the fraction, not the
    labels (the file holds both classes)."""
    lines = criteo_lines(300)
    args = named(*local(tmp_path, "day.txt", "\n".join(lines) + "\n", "criteo_tsv"))
    proc = stage(tmp_path, "prepare", *args, "dataset.test_fraction=0.9999999")
    failed_with(proc, "SingleClassError: dataset.test_fraction = 0.9999999 leaves 1 of 300 rows "
                      "of own for training, all of one label class (the test split has both)",
                "lower dataset.test_fraction")
    assert leftovers(tmp_path) == []


def test_the_kaggle_test_file_without_labels_is_recognised(tmp_path: Path) -> None:
    lines = [line.split("\t", 1)[1] for line in criteo_lines(50)]  # 39 fields, no label
    args = named(*local(tmp_path, "test.txt", "\n".join(lines) + "\n", "criteo_tsv"))
    failed_with(stage(tmp_path, "prepare", *args), "MalformedInputError",
                "test.txt looks like 39 tab-separated fields per line, like the Criteo Kaggle "
                "test.txt (a test set without labels")


# ------------------------------------------------------------ 6. a download onto a directory


def test_a_download_whose_final_path_is_a_directory_names_it(server, tmp_path: Path  # noqa: F811
                                                             ) -> None:
    body = gzip.compress(b"\n".join(line.encode() for line in criteo_lines(100)), mtime=0)
    f = remote("day_0.gz", body, server.add("/day_0.gz", body))
    final = tmp_path / "raw" / "day_0.gz"
    (final / "mine").mkdir(parents=True)
    with pytest.raises(DownloadError) as err:
        fetch(f, tmp_path / "raw", progress=False)
    assert str(err.value) == (f"{final} is a directory, but day_0.gz goes there: move or delete "
                              "it and run again (or place the file there by hand)")
    assert server.requests == [] and (final / "mine").is_dir()  # nothing fetched, nothing lost


def test_an_archive_member_whose_path_is_a_directory_names_it(tmp_path: Path) -> None:
    archive = tmp_path / "dac.tar.gz"
    archive.write_bytes(tar_gz({"train.txt": "\n".join(criteo_lines(10)).encode()}))
    (tmp_path / "raw" / "train.txt").mkdir(parents=True)
    with pytest.raises(DownloadError, match=r"train\.txt is a directory, but member train\.txt "
                                            r"of dac\.tar\.gz goes there: move or delete it"):
        extract_members(archive, ["train.txt"], tmp_path / "raw")


@pytest.mark.parametrize(("files", "says"), [
    (["u.data", "u.item"], "MovieLens needs u.data, u.user, u.item; u.user (the users' age, "
                           "gender, occupation and zip code) is not among u.data, u.item: add it "
                           "to dataset.files"),
    (["u.data"], "u.user and u.item (the users' age, gender, occupation and zip code; the "
                 "movies' titles and genres) are not among u.data: add them"),
])
def test_a_movielens_file_left_out_is_named(tmp_path: Path, files: list[str], says: str) -> None:
    """It said ``u.user not found in .../u.data, .../u.item`` with a traceback."""
    from workbench.data.formats.movielens import parse_movielens_100k
    from workbench.utils.errors import MissingInputError

    (tmp_path / "u.data").write_text("1\t1\t5\t881250949\n")
    (tmp_path / "u.item").write_text("1|Toy Story (1995)|01-Jan-1995||url|0|0|0|1|1|1|0|0|0|0|0"
                                     "|0|0|0|0|0|0|0|0\n")
    with pytest.raises(MissingInputError) as info:
        parse_movielens_100k([tmp_path / f for f in files])
    assert says in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("gz", [False, True])
def test_a_line_longer_than_a_block_is_named_by_number(tmp_path: Path, gz: bool) -> None:
    """A 64 MB line said only "straddling object ... (try to increase block size?)"; the
    message now names the line, its size, and how to remove it."""
    from workbench.data.formats.criteo import parse_criteo_tsv

    lines = criteo_lines(30)
    lines[11] = "1\t" + "x" * 5000  # line 12: 5 KB against 1 KB blocks
    text = ("\n".join(lines) + "\n").encode()
    path = tmp_path / ("day.tsv.gz" if gz else "day.tsv")
    path.write_bytes(gzip.compress(text) if gz else text)
    with pytest.raises(MalformedInputError) as info:
        parse_criteo_tsv([path], block_size=1024)
    remove = (f"gzip -dc {path} | sed '12d' | gzip > {path}.fixed && mv {path}.fixed {path}"
              if gz else f"sed -i '12d' {path}")
    assert str(info.value) == (
        f"{path}: line 12 is 4.9 KB long, more than a parse block (1.0 KB): a sample's line is "
        "a few KB, so the file is damaged there (or not in this format); remove or repair that "
        f"line (e.g. {remove}) and run again")
    subprocess.run(remove, shell=True, check=True)  # the advice, followed
    assert len(parse_criteo_tsv([path], block_size=1024).frame) == 29


@pytest.mark.parametrize("fmt", ["avazu_csv", "criteo_csv"])
def test_a_byte_order_mark_is_read_past_in_every_header(tmp_path: Path, fmt: str) -> None:
    """Excel's "CSV UTF-8" starts with a BOM: stripped for Criteo and Taobao, it was refused
    for Avazu as a header mismatch."""
    from workbench.data.formats.avazu import parse_avazu_csv
    from workbench.data.formats.criteo import parse_criteo_csv

    parser = parse_avazu_csv if fmt == "avazu_csv" else parse_criteo_csv
    if fmt == "avazu_csv":
        header = ("id,click,hour,C1,banner_pos,site_id,site_domain,site_category,app_id,"
                  "app_domain,app_category,device_id,device_ip,device_model,device_type,"
                  "device_conn_type,C14,C15,C16,C17,C18,C19,C20,C21")
        rows = [f"{i},{i % 2},14102100,1005,0,s{i},d,c,a,ad,ac,dev,ip{i},m,1,0,15706,320,50,"
                "1722,0,35,-1,79" for i in range(20)]
    else:
        header = ",".join(["label", *(f"I{i}" for i in range(1, 14)),
                           *(f"C{i}" for i in range(1, 27))])
        rows = [",".join(line.split("\t")) for line in criteo_lines(20)]
    text = "\n".join([header, *rows]) + "\n"
    (tmp_path / "plain.csv").write_text(text)
    (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbf" + text.encode())
    plain = parser([tmp_path / "plain.csv"]).frame
    pd.testing.assert_frame_equal(parser([tmp_path / "bom.csv"]).frame, plain)
    assert len(plain) == 20


@pytest.mark.parametrize("engine", ["streaming", "memory"])
def test_duplicated_lines_across_the_split_are_counted_and_the_fix_works(
        tmp_path: Path, engine: str) -> None:
    """Issue 68: a file holding lines twice put the second copies in the test split with no
    word; now both engines count the test rows equal to a train row, and the fix the warning
    gives (drop repeated lines, keeping the order) leaves none."""
    lines = criteo_lines(1000)
    args = local(tmp_path, "train.txt", "\n".join(lines + lines[:100]) + "\n", "criteo_tsv")
    proc = stage(tmp_path, "prepare", *args, f"dataset.engine={engine}")
    assert proc.returncode == 0, proc.stderr
    assert "100 of the 110 test rows (90.9%) equal a train row in every column" in proc.stderr
    fix = proc.stderr.split("keeping the order: ")[1].split(")")[0]
    assert fix == "awk '!seen[$0]++' in > out"
    src = tmp_path / "own" / "train.txt"
    deduped = subprocess.run(["awk", "!seen[$0]++", str(src)], capture_output=True, text=True,
                             check=True).stdout
    src.write_text(deduped)
    proc = stage(tmp_path, "prepare", *args, f"dataset.engine={engine}")
    assert proc.returncode == 0 and "equal a train row" not in proc.stderr, proc.stderr
