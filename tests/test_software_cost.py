"""The PS wire protocol, the shard's hash map, the cost fit and the measurement
(workbench.cluster.ps_protocol, shard_table, software_cost). No assertion depends on a timing."""

from __future__ import annotations

import json
import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.cluster.ps_protocol import (
    HEADER_BYTES,
    MAGIC,
    PULL_REQUEST,
    apply_push,
    decode_pull,
    encode_pull,
    encode_push,
    serve_pull,
)
from workbench.cluster.shard_table import ShardTable, _home
from workbench.cluster.software_cost import SoftwareCosts, fit_linear, measure

INT64 = st.integers(-(2**63), 2**63 - 1)


def _table(keys: list[int], dim: int, seed: int, capacity: int | None = None) -> ShardTable:
    """A shard of ``keys`` with small-integer rows and versions 0..20 (exact in float32)."""
    rng = np.random.default_rng(seed)
    values = rng.integers(-50, 50, size=(len(keys), dim)).astype(np.float32)
    versions = rng.integers(0, 21, size=len(keys))
    if not keys:
        return ShardTable(dim, capacity or 1)
    return ShardTable.from_rows(np.array(keys, dtype=np.int64), values, versions, capacity)


@given(stored=st.lists(INT64, unique=True, max_size=40),
       absent=st.lists(INT64, unique=True, max_size=10),
       dim=st.integers(1, 9), bound=st.integers(0, 5), seed=st.integers(0, 2**32 - 1),
       data=st.data())
@settings(max_examples=150, deadline=None)
def test_pull_returns_exactly_the_missing_and_stale_rows(stored, absent, dim, bound, seed,
                                                         data) -> None:
    table = _table(stored, dim, seed)
    absent = [k for k in absent if k not in set(stored)]
    request = data.draw(st.permutations(stored + absent))
    request = request[:data.draw(st.integers(0, len(request)))]
    have = data.draw(st.lists(st.integers(-3, 25), min_size=len(request), max_size=len(request)))
    keys = np.array(request, dtype=np.int64)
    versions = np.array(have, dtype=np.int64)
    before = (table.values.copy(), table.versions.copy(), len(table))

    message = encode_pull(keys, versions, dim, bound)
    assert len(message) == HEADER_BYTES + 16 * len(keys)  # 8 + 8 bytes per key
    response = serve_pull(bytes(message), table)  # any bytes-like message decodes
    got_keys, got_versions, got_rows = decode_pull(memoryview(response), dim)

    server_values, server_versions = table.get(keys)
    take = (versions < 0) | (server_versions - versions > bound)
    np.testing.assert_array_equal(got_keys, keys[take])
    np.testing.assert_array_equal(got_versions, server_versions[take])
    np.testing.assert_array_equal(got_rows, server_values[take])
    assert got_rows.shape == (int(take.sum()), dim) and got_rows.dtype == np.float32
    # serving is read-only: an absent key reads as the zero row at version 0, not inserted
    np.testing.assert_array_equal(table.values, before[0])
    np.testing.assert_array_equal(table.versions, before[1])
    assert len(table) == before[2]
    for k in absent:
        if k in request:
            i = request.index(k)
            assert (server_values[i] == 0).all() and server_versions[i] == 0


@given(stored=st.lists(st.integers(-1000, 1000), unique=True, max_size=30),
       pushed=st.lists(st.integers(-1000, 1000), max_size=60),
       dim=st.integers(1, 8), seed=st.integers(0, 2**32 - 1))
@settings(max_examples=150, deadline=None)
def test_push_applies_like_np_add_at(stored, pushed, dim, seed) -> None:
    """Duplicates accumulate in order and absent keys are inserted: bitwise like np.add.at."""
    rng = np.random.default_rng(seed)
    table = _table(stored, dim, seed, capacity=len(stored) + len(pushed) + 1)
    universe = np.array(sorted(set(stored) | set(pushed)), dtype=np.int64)
    ref_values, ref_versions = table.get(universe)

    keys = np.array(pushed, dtype=np.int64)
    counts = rng.integers(0, 5, size=len(keys))
    rows = rng.standard_normal((len(keys), dim)).astype(np.float32)
    message = encode_push(keys, counts, rows)
    assert len(message) == HEADER_BYTES + (16 + 4 * dim) * len(keys)
    apply_push(message, table)

    where = np.searchsorted(universe, keys)
    np.add.at(ref_values, where, rows)
    np.add.at(ref_versions, where, counts)
    values, versions = table.get(universe)
    np.testing.assert_array_equal(values, ref_values)
    np.testing.assert_array_equal(versions, ref_versions)
    assert len(table) == len(universe)


@given(batches=st.lists(st.lists(INT64, max_size=30), max_size=5),
       queries=st.lists(INT64, max_size=30), capacity_extra=st.integers(0, 3))
@settings(max_examples=150, deadline=None)
def test_hash_map_agrees_with_a_dict(batches, queries, capacity_extra) -> None:
    distinct = len({k for batch in batches for k in batch})
    table = ShardTable(dim=2, capacity=distinct + capacity_extra + 1)
    reference: dict[int, int] = {}
    for batch in batches:
        slots = table.insert(np.array(batch, dtype=np.int64))
        for k in batch:
            reference.setdefault(k, len(reference))
        assert slots.tolist() == [reference[k] for k in batch]
    probe = queries + [k for batch in batches for k in batch]
    assert table.lookup(np.array(probe, dtype=np.int64)).tolist() == \
        [reference.get(k, -1) for k in probe]
    assert table.keys().tolist() == list(reference)
    assert len(table) == len(reference)


def test_hash_map_with_keys_that_all_collide_and_wrap_around() -> None:
    """Every key has the last cell as its home: one probe chain wrapping past the end."""
    capacity = 32
    table = ShardTable(dim=3, capacity=capacity)
    cells = len(table.index)
    pool = np.random.default_rng(1).integers(-(2**63), 2**63 - 1, size=400_000, dtype=np.int64)
    pool = np.unique(pool)
    same = pool[_home(pool, cells - 1) == cells - 1]
    assert len(same) >= capacity + 5
    keys, others = same[:capacity], same[capacity:]
    dict_ref = {int(k): i for i, k in enumerate(keys[:capacity // 2])}
    table.insert(keys[:capacity // 2])
    assert table.lookup(keys).tolist() == [dict_ref.get(int(k), -1) for k in keys]
    table.insert(keys)
    assert table.lookup(keys).tolist() == list(range(capacity))
    assert (table.lookup(others) == -1).all()
    assert (table.index[:capacity // 2] >= 0).all()  # the chain wrapped to the front

    with pytest.raises(ValueError, match="shard full"):
        table.insert(others[:1])
    push = encode_push(np.r_[keys[:1], others[:1]], [1, 1], np.ones((2, 3)))
    with pytest.raises(ValueError, match="shard full"):
        apply_push(push, table)
    values, versions = table.get(keys[:1])
    assert (values == 0).all() and versions[0] == 0  # nothing applied


def test_messages_built_in_reused_buffers_equal_fresh_ones() -> None:
    table = _table([1, 2, 3, 4], 4, 0, capacity=8)
    keys, versions = np.array([4, 2, 9]), np.array([-1, 0, -1])
    big = bytearray(1000)
    request = encode_pull(keys, versions, 4, 1, out=big)
    assert bytes(request) == bytes(encode_pull(keys, versions, 4, 1))
    response = serve_pull(request, table, out=np.zeros(1000, np.uint8))
    assert bytes(response) == bytes(serve_pull(bytes(request), table))
    rows = np.arange(12, dtype=np.float32).reshape(3, 4)
    push = encode_push(keys, [1, 2, 3], rows, out=big)
    assert bytes(push) == bytes(encode_push(keys, [1, 2, 3], rows))
    apply_push(push, table)
    np.testing.assert_array_equal(table.get([9])[0], rows[2:])
    with pytest.raises(ValueError,
                       match="out: need a writable buffer of >= 128 bytes, got 10 bytes"):
        encode_push(keys, [1, 2, 3], rows, out=bytearray(10))
    with pytest.raises(ValueError, match="read-only"):
        encode_pull(keys, versions, 4, out=bytes(1000))


def test_from_rows_rejects_duplicate_keys() -> None:
    with pytest.raises(ValueError, match="distinct"):
        ShardTable.from_rows(np.array([3, 3]), np.zeros((2, 4)))


def _header(kind=PULL_REQUEST, rows=1, dim=4, bound=0, magic=MAGIC) -> bytes:
    return struct.pack("<4sIqqq", magic, kind, rows, dim, bound)


PULL = encode_pull(np.array([1, 2]), np.array([0, -1]), 4, bound=1)
PUSH = encode_push(np.array([1, 2]), np.array([1, 1]), np.ones((2, 4), np.float32))


@pytest.mark.parametrize("message, match", [
    (PULL[:10], "truncated: 10 bytes, the header alone"),
    (PULL[:-1], "truncated"),
    (PULL + b"\0", "trailing bytes"),
    (b"XXXX" + PULL[4:], "bad magic"),
    (PUSH, "kind 3 \\(push\\) where a pull request"),
    (encode_pull(np.array([1]), np.array([0]), 8), "D = 8 in the message, 4 expected"),
    (_header(bound=-1) + bytes(16), "bound -1"),
    (_header(rows=-2), "row count -2"),
    (_header(dim=0) + bytes(16), "D = 0"),
    (_header(kind=9) + bytes(16), "kind 9 \\(unknown\\)"),
])
def test_a_malformed_pull_request_raises(message: bytes, match: str) -> None:
    table = _table([1, 2, 3], 4, 0)
    with pytest.raises(ValueError, match=match):
        serve_pull(message, table)


def test_malformed_responses_and_pushes_raise() -> None:
    table = _table([1, 2, 3], 4, 0)
    response = serve_pull(PULL, table)
    with pytest.raises(ValueError, match="kind 1 \\(pull request\\) where a pull response"):
        decode_pull(PULL)
    with pytest.raises(ValueError, match="pull response truncated"):
        decode_pull(response[:-4])
    with pytest.raises(ValueError, match="D = 4 in the message, 8 expected"):
        decode_pull(response, dim=8)
    with pytest.raises(ValueError, match="push has trailing bytes"):
        apply_push(PUSH + b"\0" * 4, table)
    with pytest.raises(ValueError, match="where a push"):
        apply_push(PULL, table)
    with pytest.raises(ValueError, match="D = 4 in the message, 2 expected"):
        apply_push(PUSH, _table([1], 2, 0))
    before = table.values.copy()
    with pytest.raises(ValueError, match="push truncated"):
        apply_push(PUSH[:-1], table)
    np.testing.assert_array_equal(table.values, before)


def test_encoders_validate_their_arguments() -> None:
    with pytest.raises(ValueError, match="versions: 1 entries, expected 2"):
        encode_pull([1, 2], [0], 4)
    with pytest.raises(ValueError, match="keys: must be a 1-D integer array"):
        encode_pull(np.array([1.5]), [0], 4)
    with pytest.raises(ValueError, match="bound"):
        encode_pull([1], [0], 4, bound=-1)
    with pytest.raises(ValueError, match="rows shape"):
        encode_push([1, 2], [1, 1], np.ones((3, 4)))
    with pytest.raises(ValueError, match="counts"):
        encode_push([1, 2], [1], np.ones((2, 4)))


@given(per_message=st.just(0.0) | st.floats(1e-9, 1e-3),
       per_row=st.just(0.0) | st.floats(1e-12, 1e-6),
       rows=st.lists(st.integers(0, 10_000), min_size=2, max_size=8, unique=True),
       relative=st.booleans())
@settings(max_examples=200, deadline=None)
def test_fit_recovers_synthetic_costs(per_message, per_row, rows, relative) -> None:
    seconds = [per_message + per_row * n for n in rows]
    if relative and min(seconds) <= 0:
        return
    a, b = fit_linear(rows, seconds, relative=relative)
    assert a == pytest.approx(per_message, rel=1e-6, abs=1e-15)
    assert b == pytest.approx(per_row, rel=1e-6, abs=1e-15)


def test_fit_clips_a_negative_intercept_and_refits_through_the_origin() -> None:
    rows = np.array([10.0, 20.0, 100.0, 1000.0])
    seconds = -5e-7 + 1e-7 * rows  # all > 0, on a line with a negative intercept
    for relative in (True, False):
        a, b = fit_linear(rows, seconds, relative=relative)
        assert a == 0.0 and b > 0
        w2 = 1 / seconds**2 if relative else np.ones(4)
        assert b == pytest.approx((w2 * rows * seconds).sum() / (w2 * rows**2).sum())
    a, b = fit_linear([1, 2, 3], [3.0, 2.0, 1.0])  # a falling line: flat fit
    assert b == 0.0 and a > 0


def test_fit_rejects_degenerate_input() -> None:
    with pytest.raises(ValueError, match="two distinct"):
        fit_linear([5, 5], [1.0, 2.0])
    with pytest.raises(ValueError, match="> 0"):
        fit_linear([1, 2], [0.0, 1.0])
    with pytest.raises(ValueError, match="shapes"):
        fit_linear([1, 2], [1.0])


def test_a_tiny_measurement_gives_finite_non_negative_costs() -> None:
    costs = measure(dim=8, sizes=(1, 16), repeats=2, table_rows=500, seed=3)
    assert isinstance(costs, SoftwareCosts)
    fitted = [costs.client_message_s, costs.client_row_s, costs.server_message_s,
              costs.server_row_s]
    assert all(math.isfinite(c) and c >= 0 for c in fitted)
    assert costs.dim == 8 and costs.sizes == (1, 16)
    assert len(costs.client_seconds) == len(costs.server_seconds) == 2
    assert all(t > 0 for t in costs.client_seconds + costs.server_seconds)
    # per message over the exchange's 2 messages, per row over its 3 x n rows handled
    rows = [3 * n for n in costs.sizes]
    assert fit_linear(rows, costs.client_seconds) == pytest.approx(
        (2 * costs.client_message_s, costs.client_row_s))
    assert fit_linear(rows, costs.server_seconds) == pytest.approx(
        (2 * costs.server_message_s, costs.server_row_s))
    d = json.loads(json.dumps(costs.to_dict()))
    assert d["sizes"] == [1, 16] and d["dim"] == 8
    fresh = measure(dim=8, sizes=(1, 16), repeats=1, table_rows=500, fresh_buffers=True)
    assert all(math.isfinite(t) and t > 0 for t in fresh.client_seconds + fresh.server_seconds)
    with pytest.raises(ValueError, match="sizes"):
        measure(dim=8, sizes=(4, 4), repeats=1, table_rows=100)
