"""Tests for workbench.data.formats: real samples (when present), malformed rows, gzip, max_rows."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.data.formats import (
    PARSERS,
    parse,
    parse_avazu_csv,
    parse_criteo_tsv,
    parse_movielens_1m,
    parse_movielens_20m,
    parse_movielens_100k,
    parse_taobao_user_behavior,
)
from workbench.data.formats.criteo import CRITEO_CATEGORICAL, CRITEO_DENSE
from workbench.data.schema import MalformedInputError, RawTable

# ----------------------------------------------------------------------------------- helpers


def criteo_line(label: str = "0", dense: list[str] | None = None,
                cats: list[str] | None = None) -> str:
    dense = dense if dense is not None else [str(i) for i in range(13)]
    cats = cats if cats is not None else [f"{i:08x}" for i in range(26)]
    return "\t".join([label, *dense, *cats])


AVAZU_HEADER = ("id,click,hour,C1,banner_pos,site_id,site_domain,site_category,app_id,app_domain,"
                "app_category,device_id,device_ip,device_model,device_type,device_conn_type,C14,"
                "C15,C16,C17,C18,C19,C20,C21")


def avazu_line(id_: int = 1, click: str = "0", hour: str = "14102100") -> str:
    return (f"{id_},{click},{hour},1005,0,1fbe01fe,f3845767,28905ebd,ecad2386,7801e8d9,07d7df22,"
            "a99f214a,ddd2926e,44956a24,1,2,15706,320,50,1722,0,35,-1,79")


def write(path: Path, lines: list[str], *, gz: bool = False, encoding: str = "utf-8") -> Path:
    data = ("\n".join(lines) + "\n").encode(encoding)
    if gz:
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)
    return path


def line_of(example: str) -> int:
    return int(example.split(":")[1])


# ------------------------------------------------------------------------------ real samples


def test_criteo_real_sample(shared: Path) -> None:
    t = parse_criteo_tsv(shared / "criteo_kaggle" / "wide_resdnn_train.tsv")
    f = t.frame
    assert len(f) == 7200 and t.report.rows == 7200 and t.report.malformed == 0
    assert t.dense == CRITEO_DENSE and len(t.dense) == 13
    assert t.categorical == CRITEO_CATEGORICAL and len(t.categorical) == 26
    assert not t.has_session and not t.has_timestamp
    assert f["label"].dtype == np.float32 and set(f["label"].unique()) <= {0.0, 1.0}
    assert 0.21 <= f["label"].mean() <= 0.22
    assert f[t.dense].isna().to_numpy().any()
    assert (f[t.dense].min() < 0).any()  # negative counts are kept
    tokens = f["C1"].dropna()
    assert tokens.str.fullmatch(r"[0-9a-f]{8}").all()
    assert f[t.categorical].isna().to_numpy().any()
    # first line of the file: 0 1 1 5 0 1382 4 15 2 181 1 2 <empty> 2 68fd1e64 ...
    assert f.loc[0, "I5"] == 1382 and np.isnan(f.loc[0, "I12"]) and f.loc[0, "C1"] == "68fd1e64"


def test_criteo_multiple_files(shared: Path) -> None:
    d = shared / "criteo_kaggle"
    t = parse("criteo_tsv", [d / "wide_resdnn_train.tsv", d / "wide_resdnn_dev.tsv",
                             d / "wide_resdnn_test.tsv"])
    assert len(t.frame) == 8000 and len(t.report.files) == 3


def test_avazu_real_sample(shared: Path) -> None:
    t = parse_avazu_csv(shared / "avazu" / "avazu_train_head1000.csv")
    f = t.frame
    assert len(f) == 999 and t.dense == [] and t.has_timestamp
    assert "id" not in f.columns and "click" not in f.columns
    assert {"hour_of_day", "weekday", "site_id", "C21"} <= set(t.categorical)
    assert len(t.categorical) == 23
    # hour 14102100 = 2014-10-21 00:00 UTC, a Tuesday
    assert (f["timestamp"] == 1413849600).all()
    assert set(f["hour_of_day"]) == {"00"} and set(f["weekday"]) == {"1"}
    assert 0 < f["label"].mean() < 0.5


def test_movielens_100k_real(shared: Path) -> None:
    t = parse_movielens_100k(shared / "movielens_100k", history_length=5)
    f = t.frame
    assert len(f) == 100_000 and f["session"].nunique() == 943
    assert t.has_session and t.has_timestamp and t.dense == []
    assert t.user_side == ["user_id", "age", "gender", "occupation", "zip"]
    assert t.sequences == {"hist_item_id": "item_id"}
    assert f["session"].dtype == np.int64 and (f["session"] == f["user_id"]).all()
    keys = f[["user_id", "timestamp", "item_id"]].to_numpy()
    order = np.lexsort((keys[:, 2], keys[:, 1], keys[:, 0]))
    assert (order == np.arange(len(f))).all()
    assert (f.groupby("session")[t.user_side].nunique(dropna=False) == 1).all().all()
    # each user's rows are one block
    starts = np.flatnonzero(np.diff(f["session"].to_numpy()) != 0)
    assert len(starts) == 942
    raw = pd.read_csv(shared / "movielens_100k" / "u.data", sep="\t",
                      names=["u", "i", "r", "t"])
    assert f["label"].sum() == (raw["r"] >= 4).sum()
    # user 1: 24|M|technician|85711; hand-check the history against the raw file
    u1 = raw[raw["u"] == 1].sort_values(["t", "i"])
    rows = f[f["user_id"] == 1]
    assert rows[["age", "gender", "occupation", "zip"]].iloc[0].tolist() == \
        ["24", "M", "technician", "85711"]
    items = u1["i"].tolist()
    assert rows["item_id"].tolist() == items
    hist = rows["hist_item_id"].tolist()
    for k in range(len(items)):
        assert list(hist[k]) == items[max(0, k - 5):k]
    assert list(hist[0]) == []
    # Toy Story: genre Animation (first flag after 'unknown'), year 1995
    toy = f[f["item_id"] == 1].iloc[0]
    assert toy["genre"] == "Animation" and toy["year"] == "1995"


def test_taobao_real_sample(shared: Path) -> None:
    path = shared / "taobao_user_behavior" / "UserBehavior_head.csv"
    t = parse_taobao_user_behavior(path, history_length=3)
    f = t.frame
    assert len(f) == 84_475 and f["session"].nunique() == 815
    assert t.user_side == ["user_id"] and t.categorical == ["user_id", "item_id", "category_id"]
    raw = pd.read_csv(path, names=["u", "i", "c", "b", "t"])
    expected = raw.sort_values(["u", "t"], kind="stable").reset_index(drop=True)
    assert (f["item_id"].to_numpy() == expected["i"].to_numpy()).all()
    assert (f["label"].to_numpy() == expected["b"].isin(["buy", "cart", "fav"]).to_numpy()).all()
    first = f.groupby("session").head(1)
    assert all(len(h) == 0 for h in first["hist_item_id"])
    assert all(len(h) == 3 for h in f.groupby("session").nth(5)["hist_item_id"])


# ------------------------------------------------------------------------------- malformed rows


def _criteo_bad_file(tmp_path: Path, gz: bool = False) -> Path:
    lines = [criteo_line("1")] * 3
    lines.append("\t".join(criteo_line("0").split("\t")[:38]))  # line 4: 38 fields
    lines.append(criteo_line("0"))
    lines.append(criteo_line("0", dense=["1", "abc", *["2"] * 11]))  # line 6: abc in I2
    lines.append(criteo_line("2"))  # line 7: label 2
    lines.append(criteo_line("1", dense=["", "-3", *[""] * 11]))
    name = "bad.tsv.gz" if gz else "bad.tsv"
    return write(tmp_path / name, lines, gz=gz)


@pytest.mark.parametrize("gz", [False, True])
def test_criteo_malformed_counted(tmp_path: Path, gz: bool) -> None:
    path = _criteo_bad_file(tmp_path, gz)
    t = parse_criteo_tsv(path)
    r = t.report
    assert len(t.frame) == 5 and r.rows == 5 and r.malformed == 3
    assert [line_of(e) for e in r.examples] == [4, 6, 7]
    assert all(e.startswith(f"{path}:") for e in r.examples)
    assert "expected 40 fields, got 38" in r.examples[0]
    assert "'abc'" in r.examples[1] and "I2" in r.examples[1]
    assert "'2'" in r.examples[2]
    last = t.frame.iloc[-1]
    assert np.isnan(last["I1"]) and last["I2"] == -3.0 and t.frame["label"].tolist() == \
        [1, 1, 1, 0, 1]


def test_criteo_strict_raises_first(tmp_path: Path) -> None:
    path = _criteo_bad_file(tmp_path)
    with pytest.raises(MalformedInputError, match=r"bad\.tsv:4: expected 40 fields"):
        parse_criteo_tsv(path, strict=True)
    # a value error before a field-count error in the same block is reported first
    lines = [criteo_line(), criteo_line("x"), "too\tfew"]
    p2 = write(tmp_path / "order.tsv", lines)
    with pytest.raises(MalformedInputError) as exc:
        parse_criteo_tsv(p2, strict=True)
    assert str(exc.value).startswith(f"{p2}:2: ") and "'x'" in str(exc.value)


def test_criteo_blank_line_and_max_rows(tmp_path: Path) -> None:
    lines = [criteo_line("1"), "", criteo_line("0"), criteo_line("1"), "x\ty", criteo_line("0")]
    path = write(tmp_path / "b.tsv", lines)
    t = parse_criteo_tsv(path)
    assert len(t.frame) == 4 and t.report.malformed == 2
    assert [line_of(e) for e in t.report.examples] == [2, 5]
    t2 = parse_criteo_tsv(path, max_rows=3)
    assert t2.frame["label"].tolist() == [1, 0, 1] and t2.report.malformed == 1  # line 5 unread
    t3 = parse_criteo_tsv([path, path], max_rows=6)
    assert len(t3.frame) == 6 and t3.report.files == [str(path), str(path)]
    assert len(parse_criteo_tsv(path, max_rows=0).frame) == 0


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.tsv"
    path.write_bytes(b"")
    t = parse_criteo_tsv(path)
    assert len(t.frame) == 0 and list(t.frame.columns) == t.columns


def test_examples_capped_and_line_numbers_across_blocks(tmp_path: Path) -> None:
    lines = []
    bad_lines = []
    for i in range(1, 401):
        if i % 7 == 0:
            lines.append("1\t2\t3")
            bad_lines.append(i)
        elif i % 11 == 0:
            lines.append(criteo_line("7"))
            bad_lines.append(i)
        else:
            lines.append(criteo_line(str(i % 2), dense=[str(i)] * 13))
    path = write(tmp_path / "many.tsv", lines)
    t = parse_criteo_tsv(path, block_size=1 << 12)
    assert t.report.malformed == len(bad_lines)
    assert [line_of(e) for e in t.report.examples] == bad_lines[:10]
    good = [i for i in range(1, 401) if i not in bad_lines]
    assert t.frame["I1"].tolist() == good
    with pytest.raises(MalformedInputError, match=r"many\.tsv:7: "):
        parse_criteo_tsv(path, strict=True, block_size=1 << 12)


_token = st.one_of(st.just(""), st.integers(0, 2**32 - 1).map(lambda v: f"{v:08x}"))
_dense = st.one_of(st.just(""), st.integers(-10, 10**9).map(str))
_row = st.tuples(st.sampled_from(["0", "1"]), st.lists(_dense, min_size=13, max_size=13),
                 st.lists(_token, min_size=26, max_size=26))
_bad = st.sampled_from(["1\t2", criteo_line("3"), criteo_line("0", dense=["1.5"] * 13),
                        criteo_line() + "\textra"])


@settings(max_examples=25, deadline=None)
@given(rows=st.lists(st.one_of(_row, _bad), min_size=1, max_size=60),
       block=st.sampled_from([1 << 11, 1 << 20]))
def test_criteo_roundtrip_property(tmp_path_factory: pytest.TempPathFactory,
                                   rows: list, block: int) -> None:
    path = tmp_path_factory.mktemp("prop") / "p.tsv"
    lines = [r if isinstance(r, str) else criteo_line(r[0], r[1], r[2]) for r in rows]
    write(path, lines)
    t = parse_criteo_tsv(path, block_size=block)
    good = [r for r in rows if not isinstance(r, str)]
    bad_lines = [i + 1 for i, r in enumerate(rows) if isinstance(r, str)]
    assert t.report.malformed == len(bad_lines)
    assert [line_of(e) for e in t.report.examples] == bad_lines[:10]
    assert len(t.frame) == len(good)
    for (label, dense, cats), (_, got) in zip(good, t.frame.iterrows(), strict=True):
        assert got["label"] == float(label)
        for name, v in zip(CRITEO_DENSE, dense, strict=True):
            assert (np.isnan(got[name]) if v == "" else got[name] == float(v))
        for name, v in zip(CRITEO_CATEGORICAL, cats, strict=True):
            assert (pd.isna(got[name]) if v == "" else got[name] == v)


def test_avazu_malformed(tmp_path: Path) -> None:
    lines = [AVAZU_HEADER, avazu_line(1), avazu_line(2, hour="14102224"),  # line 3: hour 24
             avazu_line(3) + ",extra",  # line 4: 25 fields
             avazu_line(4, hour="abc"),  # line 5
             avazu_line(5, click="1", hour="14102513"), avazu_line(6, click="x")]  # line 7
    path = write(tmp_path / "a.csv", lines)
    t = parse_avazu_csv(path)
    assert len(t.frame) == 2 and t.report.malformed == 4
    assert [line_of(e) for e in t.report.examples] == [3, 4, 5, 7]
    assert "hour" in t.report.examples[0] and "got 25" in t.report.examples[1]
    row = t.frame.iloc[1]
    assert row["hour_of_day"] == "13" and row["weekday"] == "5"  # 2014-10-25 was a Saturday
    assert row["timestamp"] == int(pd.Timestamp("2014-10-25 13:00", tz="UTC").timestamp())
    with pytest.raises(MalformedInputError, match=r"a\.csv:3: bad hour '14102224'"):
        parse_avazu_csv(path, strict=True)
    gz = write(tmp_path / "a.csv.gz", lines, gz=True)
    assert len(parse_avazu_csv(gz).frame) == 2
    header_only = write(tmp_path / "h.csv", [AVAZU_HEADER])
    assert len(parse_avazu_csv(header_only).frame) == 0
    wrong = write(tmp_path / "w.csv", ["id,hour", "1,14102100"])
    with pytest.raises(MalformedInputError, match=r"w\.csv:1: expected the header"):
        parse_avazu_csv(wrong)


def _ml100k_dir(tmp_path: Path, ratings: list[str]) -> Path:
    d = tmp_path / "ml-100k"
    d.mkdir()
    write(d / "u.data", ratings)
    write(d / "u.user", ["1|24|M|technician|85711", "2|53|F|other|94043"])
    flags0 = ["0"] * 19
    flags_a = ["0"] * 19
    flags_a[3] = flags_a[5] = "1"
    write(d / "u.item", [
        "10|Café (1995)|01-Jan-1995||http://x|" + "|".join(flags_a),
        "20|Unknown||||" + "|".join(flags0),
    ], encoding="latin-1")
    return d


def test_movielens_100k_malformed_and_history(tmp_path: Path) -> None:
    t0 = 880_000_000  # MovieLens timestamps (a rating before 1995 is a damaged line)
    d = _ml100k_dir(tmp_path, [f"2\t10\t5\t{t0 + 300}", f"1\t20\t3\t{t0 + 200}",
                               f"1\t10\t6\t{t0 + 100}",  # line 3
                               f"1\t10\tx\t{t0 + 150}", f"1\t10\t4\t{t0 + 100}",
                               f"3\t20\t4\t{t0 + 50}"])
    t = parse_movielens_100k(d, history_length=2)
    f = t.frame
    assert t.report.malformed == 2 and [line_of(e) for e in t.report.examples] == [3, 4]
    assert "rating '6'" in t.report.examples[0]
    assert f["user_id"].tolist() == [1, 1, 2, 3]
    assert (f["timestamp"] - t0).tolist() == [100, 200, 300, 50]
    assert f["label"].tolist() == [1.0, 0.0, 1.0, 1.0]
    assert [list(h) for h in f["hist_item_id"]] == [[], [10], [], []]
    assert f["genre"].iloc[0] == "Animation" and pd.isna(f["genre"].iloc[1])  # no flag set
    assert f["year"].iloc[0] == "1995" and pd.isna(f["year"].iloc[1])
    assert pd.isna(f["gender"].iloc[3])  # user 3 has no u.user row
    with pytest.raises(MalformedInputError, match=r"u\.data:3: rating '6'"):
        parse_movielens_100k(d, strict=True)


def test_movielens_1m(tmp_path: Path) -> None:
    d = tmp_path / "ml-1m"
    d.mkdir()
    write(d / "ratings.dat", ["1::1193::5::978300760", "1::661::3::978302109",
                              "2::1193::4", "2::661::0::978300000", "2::1193::4::978298413"])
    write(d / "users.dat", ["1::F::1::10::48067", "2::M::56::16::70072"])
    write(d / "movies.dat", ["1193::One Flew Over the Cuckoo's Nest (1975)::Drama",
                             "661::James and the Giant Peach: Série (1996)::Animation|Children's"],
          encoding="latin-1")
    t = parse_movielens_1m(d, history_length=4)
    f = t.frame
    assert t.report.malformed == 2 and [line_of(e) for e in t.report.examples] == [3, 4]
    assert "expected 4 '::'-separated fields, got 3" in t.report.examples[0]
    assert f["item_id"].tolist() == [1193, 661, 1193]
    assert f["gender"].tolist() == ["F", "F", "M"] and f["zip"].tolist()[2] == "70072"
    assert f["genre"].tolist() == ["Drama", "Animation", "Drama"]
    assert f["year"].tolist() == ["1975", "1996", "1975"]
    assert [list(h) for h in f["hist_item_id"]] == [[], [1193], []]
    with pytest.raises(MalformedInputError, match=r"ratings\.dat:3: "):
        parse("movielens_1m", d, strict=True)


def test_movielens_20m(tmp_path: Path) -> None:
    d = tmp_path / "ml-20m"
    d.mkdir()
    write(d / "ratings.csv", ["userId,movieId,rating,timestamp", "1,2,3.5,1112486027",
                              "1,29,4.0,1112484676", "2,2,7.0,1", "2,29,4.5,1112480000"])
    write(d / "movies.csv", ["movieId,title,genres", "2,Jumanji (1995),Adventure|Children",
                             '29,"City of Lost Children, The (Cité des enfants perdus, La) '
                             '(1995)",(no genres listed)'])
    t = parse_movielens_20m(d)
    f = t.frame
    assert t.report.malformed == 1 and line_of(t.report.examples[0]) == 4
    assert t.user_side == ["user_id"] and "gender" not in f.columns
    assert f["item_id"].tolist() == [29, 2, 29] and f["label"].tolist() == [1.0, 0.0, 1.0]
    assert f["year"].tolist() == ["1995"] * 3
    assert pd.isna(f["genre"].iloc[0]) and f["genre"].iloc[1] == "Adventure"


def test_taobao_malformed_gzip(tmp_path: Path) -> None:
    lines = ["1,10,100,pv,5", "1,11,100,buy,3", "1,12,100,click,4",  # line 3
             "2,10,100,fav", "2,11,100,cart,1"]  # line 4: 4 fields
    path = write(tmp_path / "ub.csv.gz", lines, gz=True)
    t = parse_taobao_user_behavior(path, history_length=1)
    f = t.frame
    assert t.report.malformed == 2 and [line_of(e) for e in t.report.examples] == [3, 4]
    assert "unknown behavior_type 'click'" in t.report.examples[0]
    assert f["item_id"].tolist() == [11, 10, 11] and f["label"].tolist() == [1.0, 0.0, 1.0]
    assert [list(h) for h in f["hist_item_id"]] == [[], [11], []]
    with pytest.raises(MalformedInputError, match=r"ub\.csv\.gz:3: unknown behavior_type"):
        parse_taobao_user_behavior(path, strict=True)


def test_dispatcher() -> None:
    assert set(PARSERS) == {"criteo_tsv", "criteo_csv", "avazu_csv", "movielens_100k",
                            "movielens_1m", "movielens_20m", "movielens_csv",
                            "taobao_user_behavior", "session_clicks", "diginetica_views"}
    with pytest.raises(ValueError, match="known formats: avazu_csv, criteo_csv, criteo_tsv"):
        parse("parquet", "x")


def test_returns_rawtable(tmp_path: Path) -> None:
    path = write(tmp_path / "one.tsv", [criteo_line()])
    t = parse("criteo_tsv", path)
    assert isinstance(t, RawTable) and t.report.files == [str(path)]


def test_labels_in_float_notation_or_quotes_are_labels(tmp_path: Path) -> None:
    """Issue 68: a label column written as floats (``1.0``, as pandas writes it) or quoted
    (``"0"``) reads as the 0/1 it says; 2 or 0.5 stay malformed, at their lines."""
    lines = [AVAZU_HEADER, avazu_line(1, click="1.0"), avazu_line(2, click='"0"'),
             avazu_line(3, click="0.0"), avazu_line(4, click="1e0"),
             avazu_line(5, click="0.5"), avazu_line(6, click="2")]
    t = parse_avazu_csv(write(tmp_path / "a.csv", lines))
    assert t.frame["label"].tolist() == [1.0, 0.0, 0.0, 1.0]
    assert t.report.malformed == 2
    assert [line_of(e) for e in t.report.examples] == [6, 7]
    assert "label '0.5' not in {0,1}" in t.report.examples[0]


def test_movielens_csv_with_crlf_line_ends_reads_as_with_lf(tmp_path: Path) -> None:
    """Issue 68: a ``movielens_csv`` folder written with CRLF line ends (Windows) reads the same
    rows as with LF, none malformed (the report's lines count CRLF as one line end)."""
    ratings = ["userId,movieId,rating,timestamp", "1,1,4.0,964982703", "1,3,2.5,964981247",
               "2,1,3.5,964982224"]
    movies = ["movieId,title,genres", "1,Toy Story (1995),Adventure|Animation",
              '3,"Grumpier Old Men, The (1995)",Comedy|Romance']
    frames = {}
    for end in ("\n", "\r\n"):
        folder = tmp_path / ("crlf" if end == "\r\n" else "lf")
        folder.mkdir()
        (folder / "ratings.csv").write_bytes(end.join(ratings + [""]).encode())
        (folder / "movies.csv").write_bytes(end.join(movies + [""]).encode())
        table = parse_movielens_20m(folder)
        assert table.report.malformed == 0 and table.report.rows == 3
        frames[end] = table.frame
    pd.testing.assert_frame_equal(frames["\n"], frames["\r\n"])
