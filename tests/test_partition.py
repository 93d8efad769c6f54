"""RecD data generation: sessions, history snapshot, layouts, partitions, batch dedup."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.data import partition as part
from workbench.data.schema import DatasetMeta
from workbench.sparse import reader
from workbench.sparse.dedup import to_ikjt, to_ikjt_by_request
from workbench.sparse.jagged_tensor import KeyedJaggedTensor


def _meta(**kw) -> DatasetMeta:
    base = dict(name="toy", source="local", rows={"train": 0}, dense=[], categorical=["u", "i"],
                cardinalities={"u": 10, "i": 10}, user_side=["u"],
                sequences={"hist": "i"}, has_session=True, has_timestamp=True)
    base.update(kw)
    return DatasetMeta(**base)


def _table(users, ts, items, hists) -> pa.Table:
    return pa.table({"label": pa.array(np.zeros(len(users), np.float32)),
                     "u": pa.array(users, pa.int32()), "i": pa.array(items, pa.int32()),
                     "session": pa.array(users, pa.int64()),
                     "timestamp": pa.array(ts, pa.int64()),
                     "hist": pa.array(hists, pa.large_list(pa.int64()))})


# rows sorted by (user, time), as our parsers store them
TOY = _table(users=[1, 1, 1, 2, 2, 3],
             ts=[0, 10, 5000, 3, 20, 7],
             items=[4, 5, 6, 7, 8, 9],
             hists=[[], [4], [4, 5], [], [7], []])


def test_session_keys_split_users_at_gaps() -> None:
    # user 1: t=0, 10 | 5000 (gap 4990 > 1800); user 2: one session; user 3: one
    assert part.session_keys(TOY, _meta(), 1800).tolist() == [0, 0, 1, 2, 2, 3]
    assert part.session_keys(TOY, _meta(), None).tolist() == [0, 0, 0, 1, 1, 2]
    untimed = _meta(has_timestamp=False)
    assert part.session_keys(TOY, untimed, 1800).tolist() == [0, 0, 0, 1, 1, 2]


def test_session_keys_need_a_session_column() -> None:
    with pytest.raises(part.NoSessionsError, match="has no session/user column"):
        part.session_keys(TOY, _meta(has_session=False), 1800)


def test_history_snapshot_is_the_sessions_first_history() -> None:
    table, sessions = part.prepare_table(TOY, _meta(), 1800, "snapshot")
    assert table.column("hist").to_pylist() == [[], [], [4, 5], [], [], []]
    assert table.column(part.REQUEST).to_pylist() == sessions.tolist() == [0, 0, 1, 2, 2, 3]
    per_sample, _ = part.prepare_table(TOY, _meta(), 1800, "per_sample")
    assert per_sample.column("hist").to_pylist() == TOY.column("hist").to_pylist()
    with pytest.raises(ValueError, match="history = 'x'"):
        part.prepare_table(TOY, _meta(), 1800, "x")


def test_log_order_is_by_timestamp() -> None:
    assert part.log_order(TOY, _meta()).tolist() == [0, 3, 5, 1, 4, 2]
    assert part.log_order(TOY, _meta(has_timestamp=False)).tolist() == list(range(6))


@given(st.integers(1, 400), st.integers(1, 64), st.integers(0, 3), st.integers(1, 50))
@settings(max_examples=60, deadline=None)
def test_layouts_permute_rows_within_windows(rows: int, window: int, seed: int,
                                             n_sessions: int) -> None:
    rng = np.random.default_rng(seed)
    sessions = rng.integers(0, n_sessions, rows)
    log_rows = rng.permutation(rows)
    for layout in part.LAYOUTS:
        order = part.layout_order(log_rows, sessions, window, layout, seed)
        assert sorted(order.tolist()) == list(range(rows))
        for start in range(0, rows, window):  # the same rows in each window
            assert set(order[start:start + window]) == set(log_rows[start:start + window])
        if layout == "clustered":  # sessions contiguous inside each window, log order kept
            for start in range(0, rows, window):
                w = order[start:start + window]
                s = sessions[w]
                assert np.all(np.diff(s) >= 0)
                pos = np.argsort(log_rows)[w]
                for key in np.unique(s):
                    assert np.all(np.diff(pos[s == key]) > 0)
    shuffled = part.layout_order(log_rows, sessions, window, "shuffled", seed)
    assert np.array_equal(shuffled, part.layout_order(log_rows, sessions, window, "shuffled",
                                                      seed))


def test_layout_order_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="layout = 'sorted'"):
        part.layout_order(np.arange(3), np.zeros(3, np.int64), 2, "sorted", 0)
    with pytest.raises(ValueError, match="window = 0"):
        part.layout_order(np.arange(3), np.zeros(3, np.int64), 0, "clustered", 0)


def test_partitions_round_trip_and_are_deterministic(tmp_path) -> None:
    table, sessions = part.prepare_table(TOY, _meta(), 1800, "snapshot")
    order = part.layout_order(part.log_order(table, _meta()), sessions, 4, "clustered", 0)
    written = part.write_partitions(table, order, 4, tmp_path / "a")
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["part-00000.parquet",
                                                                   "part-00001.parquet"]
    back = part.read_partitions(tmp_path / "a")
    assert back.to_pylist() == table.take(pa.array(order)).to_pylist()
    total, per_column = part.storage_bytes(table, order, 4)
    assert total == written
    assert set(per_column) == set(table.column_names) and 0 < sum(per_column.values()) < total
    part.write_partitions(table, order, 4, tmp_path / "b")
    for name in ("part-00000.parquet", "part-00001.parquet"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    with pytest.raises(FileNotFoundError, match="run the dedup stage"):
        part.read_partitions(tmp_path / "missing")


def test_table_to_kjt_and_reader_ikjt() -> None:
    table, _ = part.prepare_table(TOY, _meta(), 1800, "snapshot")
    kjt = reader.table_to_kjt(table, ["u", "i", "hist"])
    assert kjt == KeyedJaggedTensor.from_dict({"u": [[1], [1], [1], [2], [2], [3]],
                                               "i": [[4], [5], [6], [7], [8], [9]],
                                               "hist": [[], [], [4, 5], [], [], []]})
    ikjt = reader.table_to_ikjt(table, ["u", "i", "hist"], [["u", "hist"]], ["i"])
    assert ikjt.inverse_lookup("u").tolist() == [0, 0, 1, 2, 2, 3]
    assert ikjt["hist"].to_list() == [[], [4, 5], [], []]
    assert ikjt.expand() == kjt
    requests = table.column(part.REQUEST).to_numpy()
    by_kjt = to_ikjt_by_request(kjt, [["u", "hist"]], requests, plain=["i"], verify=True)
    assert by_kjt.expand() == kjt and by_kjt["hist"] == ikjt["hist"]


def test_the_session_layout_stores_a_session_once_and_reads_back_as_the_ikjt(tmp_path) -> None:
    """Issue 50: RecD's data generation writes the features constant within a session once per
    session; read back, the sessions file is the IKJT's unique rows and session_row its
    inverse lookup, the same IKJT the request-keyed reader builds from the clustered rows."""
    table, sessions = part.prepare_table(TOY, _meta(), 1800, "snapshot")
    order = part.layout_order(part.log_order(table, _meta()), sessions, 4, "clustered", 0)
    constant = part.constant_columns(table, sessions, ["u", "hist", "i"])
    assert constant == ["u", "hist"]  # the item changes within a session: stays per sample
    keys, groups, plain = ["u", "i", "hist"], [["u", "hist"]], ["i"]
    written = part.write_session_partitions(table, order, 4, sessions, constant, tmp_path / "s")
    total, per_column = part.session_storage_bytes(table, order, 4, sessions, constant)
    assert written == total and per_column[part.SESSION_ROW] > 0
    for p, start in enumerate(range(0, order.size, 4)):
        rows = order[start:start + 4]
        once, each = part.read_session_partition(tmp_path / "s", p)
        assert once.num_rows == len(set(sessions[rows].tolist())) and each.num_rows == rows.size
        assert "hist" not in each.column_names and "i" in each.column_names
        got = reader.session_ikjt(once, each, keys, groups, plain)
        want = reader.table_to_ikjt(table.take(pa.array(rows)), keys, groups, plain)
        assert got.expand() == want.expand() == reader.table_to_kjt(
            table.take(pa.array(rows)), keys)
        assert got.inverse_lookup("u").tolist() == want.inverse_lookup("u").tolist()
    with pytest.raises(ValueError, match="'i' is not in the sessions file"):
        reader.session_ikjt(once, each, keys, [["u", "i"]], ["hist"])
    with pytest.raises(FileNotFoundError, match="run the dedup stage"):
        part.read_session_partition(tmp_path / "s", 99)
    per_sample, s2 = part.prepare_table(TOY, _meta(), 1800, "per_sample")
    assert part.constant_columns(per_sample, s2, ["u", "hist"]) == ["u"]  # histories grow


def test_dedup_groups_auto_and_configured() -> None:
    meta = _meta()
    assert reader.dedup_groups(meta, None) == ([["u", "hist"]], ["i"])
    assert reader.dedup_groups(meta, [["i"]]) == ([["i"]], ["u", "hist"])
    with pytest.raises(ValueError, match=r"dedup_groups\[0\] names 'zz'"):
        reader.dedup_groups(meta, [["zz"]])
    with pytest.raises(ValueError, match="'u' is in two groups"):
        reader.dedup_groups(meta, [["u"], ["u", "i"]])


def test_nothing_to_deduplicate_is_one_line() -> None:
    """YOOCHOOSE's clicks (item and category, no user side, no history): the recd notebook
    ended in an ``IndexError`` on the empty group list; dedup now stops with the two fixes."""
    from workbench.utils.validation import ConfigError

    meta = _meta(categorical=["item_id", "category"], user_side=[], sequences={},
                 cardinalities={"item_id": 10, "category": 3})
    with pytest.raises(ConfigError, match=r"dataset toy has no user-side or sequence feature.*"
                       r"dataset.history_length=20.*experiments.recd.dedup_groups \(e.g. "
                       r"\[\[item_id\]\]"):
        reader.dedup_groups(meta, None)
    assert reader.dedup_groups(meta, [["item_id"]]) == ([["item_id"]], ["category"])


@given(st.integers(2, 120), st.integers(1, 12), st.sampled_from([1, 3, 8, 32]),
       st.integers(0, 5))
@settings(max_examples=40, deadline=None)
def test_dedup_table_equals_per_batch_brute_force(rows: int, n_sessions: int, batch: int,
                                                  seed: int) -> None:
    rng = np.random.default_rng(seed)
    sessions = np.sort(rng.integers(0, n_sessions, rows))
    user = sessions % 3  # a user-side id shared by several sessions
    hist_len = rng.integers(0, 4, n_sessions)
    hists = [rng.integers(0, 5, hist_len[s]).tolist() for s in range(n_sessions)]
    kjt = KeyedJaggedTensor.from_dict({"u": [[u] for u in user],
                                       "i": [[x] for x in rng.integers(0, 4, rows)],
                                       "hist": [hists[s] for s in sessions]})
    groups = [["u", "hist"]]
    orders = {("clustered", 7): np.arange(rows), ("shuffled", 7): rng.permutation(rows)}
    frame = reader.dedup_table(kjt, groups, orders, [batch])
    for (layout, _), order in orders.items():
        rows_u = vals_u = vals_all = uvals_all = 0
        for start in range(0, rows, batch):
            idx = order[start:start + batch]
            sub = KeyedJaggedTensor.from_dict({k: [kjt[k].to_list()[j] for j in idx]
                                               for k in kjt.keys()})
            ikjt = to_ikjt(sub, groups, plain=["i"])
            rows_u += ikjt.num_unique("u")
            vals_u += ikjt["u"].values().size + ikjt["hist"].values().size
            vals_all += sub.num_values()
            uvals_all += ikjt.num_values()
        got = frame[(frame.layout == layout)].set_index("group")
        assert got.loc["u+hist", "unique_rows"] == rows_u
        assert got.loc["u+hist", "unique_values"] == vals_u
        assert got.loc["all", "values"] == vals_all
        assert got.loc["all", "unique_values"] == uvals_all
        assert got.loc["u+hist", "dedup_factor"] == pytest.approx(rows / rows_u)
