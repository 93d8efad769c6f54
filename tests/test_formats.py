"""Tests for the session-log formats (YOOCHOOSE clicks, DIGINETICA views) and ``movielens_csv``:
parses of small files in the real layouts, labels from the purchases files, malformed rows and
files in the wrong format."""

from __future__ import annotations

import gzip
import logging
import re
import typing
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from workbench.data.config import DatasetConfig
from workbench.data.formats import (
    EXPECTS,
    PARSERS,
    ROW_FORMATS,
    RowFormat,
    describe_file,
    parse,
    parse_movielens_20m,
    row_format_for,
)
from workbench.data.formats.session_logs import (
    parse_diginetica_views,
    parse_session_clicks,
    session_clicks_format,
)
from workbench.data.pipeline import DIRECTORY_FORMATS
from workbench.data.schema import MalformedInputError, ParseReport


def write(path: Path, lines: list[str], *, gz: bool = False) -> Path:
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def line_of(example: str) -> int:
    return int(example.split(":")[1])


def seconds(iso: str) -> int:
    return int(pd.Timestamp(iso).timestamp() // 1)


# --------------------------------------------------------------------------------- YOOCHOOSE

CLICKS = [
    "1,2014-04-07T10:51:09.277Z,214536502,0",
    "1,2014-04-07T10:54:09.868Z,214536500,0",
    "1,2014-04-07T10:54:46.998Z,214536506,0",
    "1,2014-04-07T10:57:00.306Z,214577561,0",
    "2,2014-04-07T13:56:37.614Z,214662742,0",
    "2,2014-04-07T13:57:19.373Z,214662742,0",
    "2,2014-04-07T13:58:37.446Z,214825110,0",
    "2,2014-04-07T13:59:50.710Z,214757390,0",
    "2,2014-04-07T14:00:38.247Z,214757407,0",
    "420374,2014-04-06T18:44:58.395Z,214537888,S",
    "420374,2014-04-06T18:43:21.102Z,214537850,2053124245",  # earlier than the line above
    "420374,2014-04-06T18:43:21.900Z,214537888,S",  # same second as the line above
    "1,2014-04-07T10:49:00.000Z,214536506,3",  # session 1 again, earliest of its clicks
]
BUYS = [
    "420374,2014-04-06T18:44:58.314Z,214537888,12462,1",
    "420374,2014-04-06T18:44:58.325Z,214537850,10471,1",
    "2,2014-04-07T14:01:00.000Z,214662742,1046,2",
    "999,2014-04-07T14:01:00.000Z,214536502,1046,1",  # a session without clicks here
]


def test_session_clicks_columns_labels_order_history(tmp_path: Path) -> None:
    clicks = write(tmp_path / "yoochoose-clicks.dat", CLICKS)
    buys = write(tmp_path / "yoochoose-buys.dat", BUYS)
    t = parse("session_clicks", [clicks, buys], history_length=2)
    f = t.frame
    assert list(f.columns) == ["label", "item_id", "category", "session", "timestamp",
                               "hist_item_id"]
    assert t.categorical == ["item_id", "category"] and t.dense == [] and t.user_side == []
    assert t.has_session and t.has_timestamp and t.sequences == {"hist_item_id": "item_id"}
    assert f["label"].dtype == np.float32
    assert f["item_id"].dtype == np.int64 and f["session"].dtype == np.int64
    assert f["timestamp"].dtype == np.int64
    assert pd.api.types.is_string_dtype(f["category"])
    assert t.report.rows == 13 and t.report.malformed == 0
    assert t.report.files == [str(clicks), str(buys)]
    # Stably sorted by (session, timestamp in seconds): ties keep the file order.
    assert f["session"].tolist() == [1] * 5 + [2] * 5 + [420374] * 3
    assert f["item_id"].tolist()[:5] == [214536506, 214536502, 214536500, 214536506, 214577561]
    assert f["item_id"].tolist()[10:] == [214537850, 214537888, 214537888]
    assert f["category"].tolist()[10:] == ["2053124245", "S", "S"]
    assert f["timestamp"].tolist()[:2] == [seconds("2014-04-07T10:49:00Z"), 1396867869]
    assert (np.diff(f["timestamp"].to_numpy()[:5]) >= 0).all()
    # label = 1 for every click of a (session, item) pair the buys file holds.
    bought = {(420374, 214537888), (420374, 214537850), (2, 214662742)}
    expected = [float((s, i) in bought) for s, i in zip(f["session"], f["item_id"], strict=True)]
    assert f["label"].tolist() == expected and sum(expected) == 5
    assert [list(h) for h in f["hist_item_id"]][:4] == [
        [], [214536506], [214536506, 214536502], [214536502, 214536500]]
    assert list(f["hist_item_id"][5]) == []  # session 2 starts afresh


def test_session_clicks_stream_in_blocks_like_one_parse(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    lines = [f"{s},2014-04-0{1 + s % 9}T10:{m:02d}:09.{m:03d}Z,{214536000 + i},{c}"
             for s, m, i, c in zip(np.repeat(np.arange(1, 41), 5), rng.integers(0, 60, 200),
                                   rng.integers(0, 30, 200), rng.choice(["0", "S", "7"], 200),
                                   strict=True)]
    clicks = write(tmp_path / "clicks.dat.gz", lines, gz=True)
    buys = write(tmp_path / "buys.dat", [f"{s},2014-04-08T00:00:00.000Z,{214536000 + i},1,1"
                                         for s, i in ((3, 5), (7, 11), (40, 29), (12, 0))])
    whole = parse_session_clicks([clicks, buys])
    blocks = parse_session_clicks([clicks, buys], block_size=512)
    pd.testing.assert_frame_equal(whole.frame, blocks.frame)
    fmt, files = session_clicks_format([clicks, buys])
    assert files == [clicks]
    batches = list(fmt.batches(files, ParseReport(), block_size=512))
    assert len(batches) > 3 and all(list(b) == fmt.columns for b in batches)
    assert sum(b["label"].sum() for b in batches) == whole.frame["label"].sum()


def test_session_clicks_without_buys_warn_and_label_zero(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    clicks = write(tmp_path / "yoochoose-clicks.dat", CLICKS)
    with caplog.at_level(logging.WARNING, logger="workbench.data.formats.session_logs"):
        t = parse("session_clicks", [clicks])
    assert (t.frame["label"] == 0.0).all() and len(t.frame) == 13
    assert "only serves the stages that need no labels (het-cache, dedup, recd, flexshard)" \
        in caplog.text


def _reported(t, path: Path, parse, reasons: dict[int, str]) -> None:
    """The report's examples are ``reasons`` at their lines, in line order, and a strict parse
    fails at the first of them with its reason."""
    assert [line_of(e) for e in t.report.examples] == list(reasons)
    for example, reason in zip(t.report.examples, reasons.values()):
        assert reason in example
    first = next(iter(reasons))
    match = rf"^{re.escape(str(path))}:{first}: {re.escape(reasons[first])}"
    with pytest.raises(MalformedInputError, match=match):
        parse(path, strict=True)


def test_session_clicks_malformed_rows(tmp_path: Path) -> None:
    lines = [
        "1,2014-04-07T10:51:09.277Z,214536502,0",
        "1,2014-04-07T10:54:09.868Z,214536500",  # line 2: 3 fields
        "1,2014-04-07 10:54:46.998,214536506,0",  # line 3: not ISO-8601 UTC
        "2,2014-02-30T13:56:37.614Z,214662742,0",  # line 4: no 30 February
        "2,2014-04-07T13:57:19.373Z,2146627x2,0",  # line 5: item id not an integer
        "x,2014-04-07T13:58:37.446Z,214825110,0",  # line 6: session id not an integer
        "3,2014-04-02T13:17:46.940Z,214757390,S",
    ]
    path = write(tmp_path / "clicks.dat", lines)
    t = parse_session_clicks(path)
    assert t.frame["session"].tolist() == [1, 3] and t.report.malformed == 5
    assert all(e.startswith(f"{path}:") for e in t.report.examples)
    _reported(t, path, parse_session_clicks, {
        2: "expected 4 fields, got 3",
        3: "unparsable timestamp '2014-04-07 10:54:46.998'",
        4: "unparsable timestamp '2014-02-30T13:56:37.614Z'",
        5: "non-integer '2146627x2' in integer column item_id",
        6: "non-integer 'x' in integer column session_id"})


def test_session_clicks_given_another_format_fails_clearly(tmp_path: Path) -> None:
    criteo = write(tmp_path / "train.txt", ["\t".join(["0", *map(str, range(13)),
                                                       *[f"{i:08x}" for i in range(26)]])] * 3)
    with pytest.raises(MalformedInputError) as exc:
        parse("session_clicks", [criteo])
    msg = str(exc.value)
    assert msg.startswith(f"{criteo}:1: no good rows in 3 read with format 'session_clicks'")
    assert "session_clicks expects YOOCHOOSE clicks" in msg and "like criteo_tsv" in msg
    # A buys file that is not one (here: clicks), and buys files alone.
    clicks = write(tmp_path / "clicks.dat", CLICKS)
    not_buys = write(tmp_path / "more-buys.dat", CLICKS)
    with pytest.raises(MalformedInputError,
                       match=rf"^{re.escape(str(not_buys))}:1: expected 5 fields.*purchases "
                             "file of format session_clicks.*like session_clicks"):
        parse("session_clicks", [clicks, not_buys])
    buys = write(tmp_path / "yoochoose-buys.dat", BUYS)
    with pytest.raises(MalformedInputError, match="format session_clicks needs the clicks"):
        parse("session_clicks", [buys])


def test_describe_file_recognises_yoochoose(tmp_path: Path) -> None:
    assert describe_file(write(tmp_path / "c.dat", CLICKS)).endswith("like session_clicks "
                                                                     "(YOOCHOOSE clicks)")
    assert "YOOCHOOSE buys file" in describe_file(write(tmp_path / "b.dat", BUYS))


# -------------------------------------------------------------------------------- DIGINETICA

VIEWS_HEADER = "session_id;user_id;item_id;timeframe;eventdate"
PURCHASES_HEADER = "sessionId;userId;timeframe;eventdate;ordernumber;itemId"


def test_diginetica_real_sample_with_purchases(shared: Path, tmp_path: Path) -> None:
    sample = shared / "diginetica" / "sample_train-item-views.csv"
    raw = pd.read_csv(sample, sep=";", keep_default_na=False, dtype={"user_id": str})
    picked = raw.drop_duplicates("session_id").head(40)  # first item of 40 sessions
    purchases = write(tmp_path / "train-purchases.csv", [PURCHASES_HEADER] + [
        f"{s};NA;{1000 + k};2016-05-09;{k + 1};{i}"
        for k, (s, i) in enumerate(zip(picked["session_id"], picked["item_id"], strict=True))])
    t = parse("diginetica_views", [sample, purchases], history_length=3)
    f = t.frame
    assert list(f.columns) == ["label", "user_id", "item_id", "session", "timestamp",
                               "hist_item_id"]
    assert t.categorical == ["user_id", "item_id"] and t.user_side == ["user_id"]
    assert t.report.rows == len(raw) == 12391 and t.report.malformed == 0
    assert f["label"].dtype == np.float32 and f["item_id"].dtype == np.int64
    assert f["session"].dtype == np.int64 and f["timestamp"].dtype == np.int64
    assert f["user_id"].isna().sum() == (raw["user_id"] == "NA").sum() > 0
    assert set(f["user_id"].dropna()) == set(raw.loc[raw["user_id"] != "NA", "user_id"])
    # timestamp = eventdate (UTC) + timeframe // 1000; sorted by (session, timestamp).
    days = pd.to_datetime(raw["eventdate"], utc=True) - pd.Timestamp("1970-01-01", tz="UTC")
    expected_ts = days // pd.Timedelta(seconds=1) + raw["timeframe"] // 1000
    assert sorted(f["timestamp"]) == sorted(expected_ts)
    keys = f[["session", "timestamp"]].to_numpy()
    assert (np.diff(keys[:, 0]) >= 0).all()
    same = np.diff(keys[:, 0]) == 0
    assert (np.diff(keys[:, 1])[same] >= 0).all()
    first = f.iloc[0]  # session 1's earliest view: item 9654, timeframe 75848 on 2016-05-09
    assert (first["session"], first["item_id"], first["timestamp"]) == (
        1, 9654, seconds("2016-05-09") + 75)
    bought = set(zip(picked["session_id"], picked["item_id"], strict=True))
    labels = [float(k in bought) for k in zip(f["session"], f["item_id"], strict=True)]
    assert f["label"].tolist() == labels and sum(labels) >= 40
    assert list(f["hist_item_id"][3]) == f["item_id"].tolist()[:3]


def test_diginetica_malformed_rows(tmp_path: Path) -> None:
    lines = [
        VIEWS_HEADER,
        "1;NA;81766;526309;2016-05-09",
        "1;NA;31331;1031018;2016-05-09",
        "2;NA;32118;abc;2016-05-09",  # line 4: timeframe not an integer
        "2;NA;9654;75848;2016-02-30",  # line 5: no 30 February
        "3;5;12;75848",  # line 6: 4 fields
        "3;5;x1;75848;2016-05-09",  # line 7: item id not an integer
        "3;5;13;-5;2016-05-09",  # line 8: negative timeframe
        "3;5;14;1000;2016-05-10",
    ]
    path = write(tmp_path / "train-item-views.csv", lines)
    t = parse_diginetica_views(path)
    f = t.frame
    assert f["item_id"].tolist() == [81766, 31331, 14] and t.report.malformed == 5
    assert f["user_id"].isna().tolist() == [True, True, False] and f["user_id"][2] == "5"
    assert f["timestamp"].tolist()[2] == seconds("2016-05-10") + 1
    _reported(t, path, parse_diginetica_views, {
        4: "non-integer 'abc' in integer column timeframe",
        5: "unparsable eventdate '2016-02-30'",
        6: "expected 5 fields, got 4",
        7: "non-integer 'x1' in integer column item_id",
        8: "negative timeframe -5"})


def test_diginetica_given_another_format_fails_clearly(tmp_path: Path) -> None:
    clicks = write(tmp_path / "yoochoose-clicks.dat", CLICKS)
    with pytest.raises(MalformedInputError) as exc:
        parse("diginetica_views", [clicks])
    msg = str(exc.value)
    assert msg.startswith(f"{clicks}:1: format diginetica_views expects the "
                          f"train-item-views.csv header '{VIEWS_HEADER}'")
    assert "like session_clicks" in msg
    views = write(tmp_path / "views.csv", [VIEWS_HEADER, "1;NA;81766;526309;2016-05-09"])
    bad = write(tmp_path / "train-purchases.csv", [VIEWS_HEADER, "1;NA;81766;526309;2016-05-09"])
    with pytest.raises(MalformedInputError, match=rf"^{re.escape(str(bad))}:1: format "
                                                  "diginetica_views expects the "
                                                  "train-purchases.csv header"):
        parse("diginetica_views", [views, bad])


def test_describe_file_recognises_diginetica(tmp_path: Path) -> None:
    views = write(tmp_path / "v.csv", [VIEWS_HEADER, "1;NA;81766;526309;2016-05-09"])
    assert describe_file(views).endswith("like diginetica_views")
    buys = write(tmp_path / "p.csv", [PURCHASES_HEADER, "150;NA;1;2016-05-09;1;13200"])
    assert "DIGINETICA train-purchases.csv" in describe_file(buys)


# ------------------------------------------------------------------------------ MovieLens CSV

RATINGS = [
    "userId,movieId,rating,timestamp",
    "1,1,4.0,964982703",
    "1,3,4.0,964981247",
    "1,6,4.0,964982224",
    "1,47,5.0,964983815",
    "1,50,5.0,964982931",
    "2,11,3.5,1445714835",
    "2,114335,2.5,1445715000",
]
MOVIES = [
    "movieId,title,genres",
    "1,Toy Story (1995),Adventure|Animation|Children|Comedy|Fantasy",
    "3,Grumpier Old Men (1995),Comedy|Romance",
    "6,Heat (1995),Action|Crime|Thriller",
    '11,"American President, The (1995)",Comedy|Drama|Romance',
    "47,Seven (a.k.a. Se7en) (1995),Mystery|Thriller",
    '50,"Usual Suspects, The (1995)",Crime|Mystery|Thriller',
    "114335,La cravate (1957),(no genres listed)",
]


def test_movielens_csv_directory(tmp_path: Path) -> None:
    write(tmp_path / "ratings.csv", RATINGS)
    write(tmp_path / "movies.csv", MOVIES)
    assert PARSERS["movielens_csv"] is parse_movielens_20m
    assert DIRECTORY_FORMATS["movielens_csv"] == ["ratings.csv", "movies.csv"]
    t = parse("movielens_csv", tmp_path, history_length=2)
    f = t.frame
    assert t.categorical == ["user_id", "item_id", "genre", "year"]
    assert t.user_side == ["user_id"] and t.report.rows == 7 and t.report.malformed == 0
    assert f["item_id"].tolist() == [3, 6, 1, 50, 47, 11, 114335]  # by (user, timestamp)
    assert f["label"].tolist() == [1.0] * 5 + [0.0, 0.0]
    assert f["genre"].tolist()[:3] == ["Comedy", "Action", "Adventure"]
    assert f["genre"][5] == "Comedy" and pd.isna(f["genre"][6])  # quoted title, no genres
    assert f["year"].tolist()[5:] == ["1995", "1957"]
    assert [list(h) for h in f["hist_item_id"]][4:] == [[1, 50], [], [11]]


def test_movielens_csv_given_another_format_fails_clearly(tmp_path: Path) -> None:
    write(tmp_path / "ratings.csv", ["1::1193::5::978300760", "1::661::3::978302109"])
    write(tmp_path / "movies.csv", MOVIES)
    with pytest.raises(MalformedInputError) as exc:
        parse("movielens_csv", tmp_path)
    msg = str(exc.value)
    assert msg.startswith(f"{tmp_path / 'ratings.csv'}:1: expected the header")
    assert "format 'movielens_csv' expects a directory with ratings.csv" in msg
    assert "MovieLens 25M, 32M, latest and latest-small" in msg


# --------------------------------------------------------------------------------- registries


def test_registries_and_row_format_for(tmp_path: Path) -> None:
    formats = set(typing.get_args(typing.get_type_hints(DatasetConfig)["format"])) - {"parquet"}
    assert formats <= set(PARSERS) and set(PARSERS) <= set(EXPECTS)
    clicks = write(tmp_path / "clicks.dat", CLICKS)
    buys = write(tmp_path / "yoochoose-buys.dat", BUYS)
    report = ParseReport()
    fmt, files = row_format_for("session_clicks", [clicks, buys], report=report)
    assert isinstance(fmt, RowFormat) and fmt.name == "session_clicks" and files == [clicks]
    assert report.files == [str(buys)]
    assert fmt.order_by == ("session", "timestamp") and fmt.history_item == "item_id"
    labels = np.concatenate([b["label"] for b in fmt.batches(files, report)])
    assert labels.sum() == 5
    views = write(tmp_path / "train-item-views.csv", [VIEWS_HEADER, "1;NA;81766;526309;2016-05-09"])
    fmt, files = row_format_for("diginetica_views", [views])
    assert fmt.name == "diginetica_views" and files == [views] and fmt.user_side == ("user_id",)
    assert row_format_for("criteo_tsv", str(clicks)) == (ROW_FORMATS["criteo_tsv"], [clicks])
    with pytest.raises(ValueError, match="'movielens_csv' is not a row format"):
        row_format_for("movielens_csv", tmp_path)
