"""Feature transforms on KJT rows vs on IKJT unique rows (RecD preprocessing on unique values)."""

from __future__ import annotations

import bisect
import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.sparse.dedup import to_ikjt
from workbench.sparse.jagged_tensor import InverseKeyedJaggedTensor, JaggedTensor, KeyedJaggedTensor
from workbench.sparse.transforms import (
    Bucketize,
    FeatureTransforms,
    HashIds,
    Remap,
    Truncate,
    from_spec,
)

EXAMPLE = {
    "b": [[3, 4, 5], [4, 5, 6], [3, 4, 5]],
    "c": [[7, 8], [7, 8], [10]],
    "d": [[9], [9], [11]],
}
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def jt_of(lists: list[list[int]]) -> JaggedTensor:
    return JaggedTensor(np.array([v for row in lists for v in row], dtype=np.int64),
                        np.array([len(row) for row in lists], dtype=np.int64))


# -- literal per-element reference implementations ------------------------------------------------


def splitmix64_ref(x: int) -> int:
    """splitmix64 on one Python int, written out independently of the module under test."""
    x = (x + 0x9E3779B97F4A7C15) % 2**64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) % 2**64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) % 2**64
    return x ^ (x >> 31)


def hash_ref(v: int, num_buckets: int, salt: int) -> int:
    return splitmix64_ref((v % 2**64) ^ splitmix64_ref(salt)) % num_buckets


def apply_ref(step: object, row: list[int]) -> list[int]:
    """One transform on one list, element by element in Python."""
    if isinstance(step, Truncate):
        m = step.max_length
        return (row[len(row) - m:] if step.keep == "last" else row[:m]) if m < len(row) else row
    if isinstance(step, Remap):
        table = step.table.tolist()
        return [table[v] if 0 <= v < len(table) else step.default for v in row]
    if isinstance(step, HashIds):
        return [hash_ref(v, step.num_buckets, step.salt) for v in row]
    if isinstance(step, Bucketize):
        return [bisect.bisect_right(step.boundaries, v) for v in row]  # exact int/float compare
    raise AssertionError(step)


# -- the transforms, hand-worked ------------------------------------------------------------------


def test_truncate() -> None:
    jt = jt_of([[1, 2, 3], [], [4]])
    assert Truncate(2)(jt).to_list() == [[2, 3], [], [4]]
    assert Truncate(2, keep="first")(jt).to_list() == [[1, 2], [], [4]]
    assert Truncate(0)(jt).to_list() == [[], [], []]
    assert Truncate(1)(jt).to_list() == [[3], [], [4]]
    assert Truncate(3)(jt) == jt and Truncate(10**6)(jt) == jt
    assert Truncate(2)(jt_of([])).to_list() == []
    assert jt.to_list() == [[1, 2, 3], [], [4]]  # input untouched


def test_bucketize() -> None:
    b = Bucketize((18, 25, 35))
    out = b(jt_of([[0, 17, 18, 24], [], [25, 34, 35, 99, -5]]))
    assert out.to_list() == [[0, 0, 1, 1], [], [2, 2, 3, 3, 0]]
    assert out.values().dtype == np.int64
    assert Bucketize([18, 25, 35]).boundaries == (18, 25, 35) and Bucketize([18, 25, 35]) == b
    # float and mixed boundaries
    assert Bucketize((1.5, 2.5))(jt_of([[1, 2, 3]])).to_list() == [[0, 1, 2]]
    assert Bucketize((0, 0.5, 1))(jt_of([[-1, 0, 1, 2]])).to_list() == [[0, 1, 3, 3]]
    assert Bucketize((-0.5,))(jt_of([[-1, 0]])).to_list() == [[0, 1]]
    # +-inf and boundaries outside int64
    ends = jt_of([[INT64_MIN, -5, 0, 5, INT64_MAX]])
    assert Bucketize((-math.inf, 0, math.inf))(ends).to_list() == [[1, 1, 2, 2, 2]]
    assert Bucketize((-(2**70), 2**70))(ends).to_list() == [[1, 1, 1, 1, 1]]
    assert Bucketize((INT64_MAX,))(ends).to_list() == [[0, 0, 0, 0, 1]]
    # exact comparison: 2**53 + 3 rounds to 2**53 + 4 in float64, but is below that boundary
    big = jt_of([[2**53 + 3, 2**53 + 4]])
    assert Bucketize((2.0**53 + 4,))(big).to_list() == [[0, 1]]


def test_remap() -> None:
    table = np.array([5, 6, 7])
    remap = Remap(table)
    assert remap(jt_of([[2, 3, -1], [0], []])).to_list() == [[7, 0, 0], [5], []]
    assert Remap(table, default=-1)(jt_of([[1, 3, INT64_MAX, INT64_MIN]])).to_list() \
        == [[6, -1, -1, -1]]
    assert Remap([])(jt_of([[0, 1]])).to_list() == [[0, 0]]
    assert Remap([10, 11])(jt_of([[1, 0]])).to_list() == [[11, 10]]
    # the table is copied and read-only; instances compare and hash by identity
    table[0] = 99
    assert remap(jt_of([[0]])).to_list() == [[5]]
    with pytest.raises(ValueError, match="read-only"):
        remap.table[0] = 1
    assert remap != Remap([5, 6, 7])  # identity equality (eq=False)
    assert len({remap, Remap([5, 6, 7])}) == 2
    assert repr(remap) == "Remap(table=<int64[3]>, default=0)"


def test_splitmix64_reference_anchor() -> None:
    # the first output of the reference splitmix64 generator seeded with 0
    assert splitmix64_ref(0) == 0xE220A8397B1DCDAF


@pytest.mark.parametrize("salt", [0, 1, 12345, 2**64 - 1])
@pytest.mark.parametrize("num_buckets", [1, 7, 1000, INT64_MAX])
def test_hash_ids_matches_reference(salt: int, num_buckets: int) -> None:
    ids = [0, 1, 2, 3, 42, -1, -2, 10**12, INT64_MAX, INT64_MIN]
    out = HashIds(num_buckets, salt)(jt_of([ids[:4], [], ids[4:]]))
    assert out.lengths().tolist() == [4, 0, 6]
    assert out.values().dtype == np.int64
    assert out.values().tolist() == [hash_ref(v, num_buckets, salt) for v in ids]
    assert ((out.values() >= 0) & (out.values() < num_buckets)).all()


def test_hash_ids_deterministic_in_range_and_salted() -> None:
    jt = jt_of([list(range(-500, 500)), [7, 7, 7]])
    h = HashIds(100)
    a, b = h(jt), HashIds(100)(jt)
    assert a == b and h == HashIds(100, salt=0) and hash(h) == hash(HashIds(100))
    assert a.to_list()[1] == [a.to_list()[1][0]] * 3
    assert a.values().min() >= 0 and a.values().max() < 100
    assert len(np.unique(a.values())) > 90  # 1000 ids spread over the 100 buckets
    assert HashIds(1)(jt).values().tolist() == [0] * 1003
    s1, s2 = HashIds(2**62, salt=1)(jt), HashIds(2**62, salt=2)(jt)
    assert not np.array_equal(s1.values(), s2.values())
    assert (s1.values() != s2.values()).mean() > 0.99
    assert HashIds(np.int64(5), np.uint64(3)) == HashIds(5, 3)


@pytest.mark.parametrize(("make", "match"), [
    (lambda: HashIds(0), r"num_buckets must be an integer in \[1, 2\*\*63 - 1\], got 0"),
    (lambda: HashIds(2**63), r"num_buckets must be an integer in \[1, 2\*\*63 - 1\]"),
    (lambda: HashIds(10.0), r"num_buckets must be an integer .* got 10\.0"),
    (lambda: HashIds(True), r"num_buckets must be an integer"),
    (lambda: HashIds(10, salt=-1), r"salt must be an integer in \[0, 2\*\*64 - 1\], got -1"),
    (lambda: HashIds(10, salt=2**64), r"salt must be an integer in \[0, 2\*\*64 - 1\]"),
    (lambda: Remap([[1, 2]]), r"table must be a 1-D sequence of integers"),
    (lambda: Remap([1.5]), r"table must be a 1-D sequence of integers .* dtype float64"),
    (lambda: Remap(5), r"table must be a 1-D sequence of integers"),
    (lambda: Remap(np.array([2**63], dtype=np.uint64)), r"table must hold integers in \[-2\*\*63"),
    (lambda: Remap([1], default=2**63), r"default must be an integer in \[-2\*\*63, 2\*\*63 - 1\]"),
    (lambda: Bucketize(()), r"boundaries must be a non-empty, strictly increasing .* empty"),
    (lambda: Bucketize((1, 1)), (r"strictly increasing, but boundaries\[1\] = 1 <= "
                                 r"boundaries\[0\] = 1")),
    (lambda: Bucketize((2, 1.5)), r"strictly increasing, but boundaries\[1\] = 1\.5"),
    (lambda: Bucketize((0, math.nan)), r"boundaries\[1\] is NaN"),
    (lambda: Bucketize((0, "1")), r"boundaries\[1\] must be an int or float, got '1'"),
    (lambda: Bucketize(3), r"boundaries must be a non-empty, strictly increasing sequence"),
    (lambda: Bucketize("123"), r"boundaries must be a non-empty, strictly increasing sequence"),
    (lambda: Truncate(-1), r"max_length must be an integer in \[0, 2\*\*63 - 1\], got -1"),
    (lambda: Truncate(2, keep="middle"), (r"keep must be one of \['first', 'last'\], "
                                          r"got 'middle'")),
])
def test_transform_validation(make: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make()  # type: ignore[operator]


def test_transforms_are_frozen() -> None:
    for t in (HashIds(3), Remap([1]), Bucketize((1,)), Truncate(1)):
        with pytest.raises(dataclasses.FrozenInstanceError):
            t.salt = 1  # type: ignore[misc, union-attr]
    assert len({HashIds(3), HashIds(3), Truncate(1), Truncate(1), Bucketize((1,))}) == 3


# -- FeatureTransforms ----------------------------------------------------------------------------


@pytest.fixture
def example_kjt() -> KeyedJaggedTensor:
    return KeyedJaggedTensor.from_dict(EXAMPLE)


def test_feature_transforms_worked_example(example_kjt: KeyedJaggedTensor) -> None:
    ft = FeatureTransforms({"d": [Remap([0] * 9 + [1, 0, 2])], "b": [Truncate(2), HashIds(97)]})
    out = ft.apply_kjt(example_kjt)
    assert out.keys() == ["b", "c", "d"]
    h = [hash_ref(v, 97, 0) for v in (4, 5, 6)]
    assert out.to_dict() == {"b": [[h[0], h[1]], [h[1], h[2]], [h[0], h[1]]],
                             "c": EXAMPLE["c"], "d": [[1], [1], [2]]}
    ikjt = to_ikjt(example_kjt, [["b"], ["c", "d"]])
    dd = ft.apply_ikjt(ikjt)
    assert isinstance(dd, InverseKeyedJaggedTensor)
    assert dd.keys() == ikjt.keys() and dd.groups == ikjt.groups
    assert dd["b"].to_list() == [[h[0], h[1]], [h[1], h[2]]]  # the 2 unique rows only
    assert dd["c"] == ikjt["c"] and dd["d"].to_list() == [[1], [2]]
    for g in ikjt.groups:
        assert dd.inverse_lookup(g) is ikjt.inverse_lookup(g)
    assert dd.expand() == out
    # work: b 9 -> 6 values, d 3 -> 2 values (c has no transforms)
    assert ft.values_processed_kjt(example_kjt) == 12
    assert ft.values_processed_ikjt(ikjt) == 8
    assert example_kjt.to_dict() == EXAMPLE  # input untouched


def test_feature_transforms_noop_and_empty_chain(example_kjt: KeyedJaggedTensor) -> None:
    ft = FeatureTransforms({"c": []})
    assert ft.apply_kjt(example_kjt) == example_kjt
    assert ft.values_processed_kjt(example_kjt) == 0
    assert FeatureTransforms({}).apply_ikjt(to_ikjt(example_kjt, [["b", "c", "d"]])).expand() \
        == example_kjt
    assert ft.per_key == {"c": ()}
    assert "FeatureTransforms" in repr(FeatureTransforms({"b": [HashIds(3)]}))


def test_unknown_keys_raise_key_error(example_kjt: KeyedJaggedTensor) -> None:
    ft = FeatureTransforms({"b": [HashIds(3)], "zz": [Truncate(1)]})
    ikjt = to_ikjt(example_kjt, [["b"], ["c"], ["d"]])
    match = r"unknown key\(s\) \['zz'\]; the batch has keys \['b', 'c', 'd'\]"
    for call in (lambda: ft.apply_kjt(example_kjt), lambda: ft.apply_ikjt(ikjt),
                 lambda: ft.values_processed_kjt(example_kjt),
                 lambda: ft.values_processed_ikjt(ikjt)):
        with pytest.raises(KeyError, match=match):
            call()


def test_non_rowwise_transform_rejected(example_kjt: KeyedJaggedTensor) -> None:
    def drop_last_list(jt: JaggedTensor) -> JaggedTensor:
        n = int(jt.lengths()[-1])
        return JaggedTensor(jt.values()[:jt.values().size - n], jt.lengths()[:-1])

    with pytest.raises(ValueError, match=r"transform c\[1\] .* must map 3 lists to 3 lists .* "
                                         r"got 2 lists"):
        FeatureTransforms({"c": [Truncate(1), drop_last_list]}).apply_kjt(example_kjt)
    with pytest.raises(ValueError, match=r"got list"):
        FeatureTransforms({"c": [lambda jt: jt.to_list()]}).apply_kjt(example_kjt)


def test_feature_transforms_constructor_errors() -> None:
    with pytest.raises(TypeError, match="keys must be strings"):
        FeatureTransforms({1: [HashIds(3)]})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match=r"write \[step\] for one"):
        FeatureTransforms({"b": HashIds(3)})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match=r"transform b\[1\] is not callable"):
        FeatureTransforms({"b": [HashIds(3), 5]})  # type: ignore[list-item]


def test_empty_batch() -> None:
    kjt = KeyedJaggedTensor(["a", "b"], np.array([], dtype=np.int64), np.array([], dtype=np.int64))
    ft = FeatureTransforms({"a": [Truncate(1), HashIds(5), Remap([1]), Bucketize((0,))]})
    ikjt = to_ikjt(kjt, [["a", "b"]])
    assert ft.apply_kjt(kjt) == kjt
    assert ft.apply_ikjt(ikjt).expand() == kjt
    assert ft.values_processed_kjt(kjt) == ft.values_processed_ikjt(ikjt) == 0


# -- the property: transforming unique rows == transforming every row -----------------------------

ids = st.one_of(st.integers(-3, 12), st.sampled_from([INT64_MIN, INT64_MAX, 2**53 + 3]))


@st.composite
def transform_op(draw: st.DrawFn, op: str) -> object:
    if op == "truncate":
        return Truncate(draw(st.integers(0, 4)), draw(st.sampled_from(["last", "first"])))
    if op == "remap":
        return Remap(draw(st.lists(st.integers(-5, 20), max_size=8)), draw(st.integers(-1, 3)))
    if op == "hash":
        return HashIds(draw(st.integers(1, 50)), draw(st.integers(0, 2**64 - 1)))
    bounds = draw(st.lists(st.one_of(st.integers(-5, 30), st.floats(-10, 40), ids,
                                     st.sampled_from([-math.inf, math.inf, 2.0**53 + 4])),
                           min_size=1, max_size=5, unique=True))
    bounds = sorted(set(bounds))
    bounds = [b for i, b in enumerate(bounds) if i == 0 or b > bounds[i - 1]]  # 1 == 1.0
    return Bucketize(tuple(bounds))


@st.composite
def batch_groups_transforms(
        draw: st.DrawFn) -> tuple[KeyedJaggedTensor, list[list[str]], FeatureTransforms]:
    n_keys = draw(st.integers(1, 4))
    batch = draw(st.integers(0, 12))
    keys = [f"k{i}" for i in range(n_keys)]
    data = {}
    for key in keys:  # a few distinct rows picked many times: duplicates are common
        pool = draw(st.lists(st.lists(ids, max_size=5), min_size=1, max_size=3))
        picks = draw(st.lists(st.integers(0, len(pool) - 1), min_size=batch, max_size=batch))
        data[key] = [pool[i] for i in picks]
    labels = draw(st.lists(st.integers(0, n_keys - 1), min_size=n_keys, max_size=n_keys))
    groups: dict[int, list[str]] = {}
    for key, label in zip(draw(st.permutations(keys)), labels):
        groups.setdefault(label, []).append(key)
    per_key = {}
    for key in draw(st.lists(st.sampled_from(keys), unique=True)):
        ops = draw(st.permutations(["truncate", "remap", "hash", "bucketize"]))
        per_key[key] = [draw(transform_op(op)) for op in ops]  # every op, in a random order
    kjt = KeyedJaggedTensor(keys, np.array([v for k in keys for row in data[k] for v in row],
                                           dtype=np.int64),
                            np.array([len(row) for k in keys for row in data[k]], dtype=np.int64))
    return kjt, list(groups.values()), FeatureTransforms(per_key)


@settings(max_examples=150, deadline=None)
@given(batch_groups_transforms())
def test_unique_rows_equal_every_row(
        case: tuple[KeyedJaggedTensor, list[list[str]], FeatureTransforms]) -> None:
    kjt, groups, ft = case
    expected = ft.apply_kjt(kjt)
    # apply_kjt against the per-element Python reference
    reference = {}
    for key, rows in kjt.to_dict().items():
        for step in ft.per_key.get(key, ()):
            rows = [apply_ref(step, row) for row in rows]
        reference[key] = rows
    assert expected.to_dict() == reference
    ikjt = to_ikjt(kjt, groups)
    dd = ft.apply_ikjt(ikjt)
    assert dd.expand() == expected
    assert dd.groups == ikjt.groups
    assert all(dd.inverse_lookup(g) is ikjt.inverse_lookup(g) for g in ikjt.groups)
    assert ft.values_processed_ikjt(ikjt) <= ft.values_processed_kjt(kjt)
    assert ft.values_processed_kjt(ikjt.expand()) == ft.values_processed_kjt(kjt)


# -- from_spec ------------------------------------------------------------------------------------

SPEC = {
    "item_id": [{"op": "hash", "num_buckets": 1000}],
    "hist_item_id": [{"op": "truncate", "max_length": 20},
                     {"op": "hash", "num_buckets": 1000, "salt": 1}],
    "age": [{"op": "bucketize", "boundaries": [18, 25, 35]}],
    "cat": [{"op": "remap", "table": [3, 1, 2], "default": 0},
            {"op": "truncate", "max_length": 1, "keep": "first"}],
}


def test_from_spec_builds_chains() -> None:
    ft = from_spec(SPEC)
    per_key = ft.per_key
    assert list(per_key) == ["item_id", "hist_item_id", "age", "cat"]
    assert per_key["item_id"] == (HashIds(1000),)
    assert per_key["hist_item_id"] == (Truncate(20), HashIds(1000, salt=1))
    assert per_key["age"] == (Bucketize((18, 25, 35)),)
    remap, trunc = per_key["cat"]
    assert isinstance(remap, Remap) and remap.table.tolist() == [3, 1, 2]
    assert trunc == Truncate(1, keep="first")
    kjt = KeyedJaggedTensor.from_dict({"item_id": [[1], [2]], "hist_item_id": [[], [5] * 30],
                                       "age": [[17], [40]], "cat": [[2, 0], [7]]})
    out = ft.apply_kjt(kjt).to_dict()
    assert out["age"] == [[0], [3]] and out["cat"] == [[2], [0]]
    assert [len(r) for r in out["hist_item_id"]] == [0, 20]
    assert out["item_id"] == [[hash_ref(1, 1000, 0)], [hash_ref(2, 1000, 0)]]
    assert from_spec({}).per_key == {}


@pytest.mark.parametrize(("spec", "match"), [
    ({"item_id": [{"op": "foo"}]},
     (r"^transforms\.item_id\[0\]\.op = 'foo': must be one of "
      r"\['bucketize', 'hash', 'remap', 'truncate'\]$")),
    ({"item_id": [{"op": 3}]}, r"transforms\.item_id\[0\]\.op = 3: must be one of"),
    ({"item_id": [{"num_buckets": 3}]},
     r"transforms\.item_id\[0\]\.op: missing; must be one of \['bucketize', 'hash'"),
    ({"a": [{"op": "truncate", "max_length": 2}, {"op": "hash"}]},
     (r"transforms\.a\[1\]\.num_buckets: missing argument of op 'hash'; its arguments are "
      r"\['num_buckets', 'salt'\] \(required: \['num_buckets'\]\)")),
    ({"a": [{"op": "hash", "num_buckets": 3, "buckets": 3}]},
     (r"transforms\.a\[0\]\.buckets: unknown argument of op 'hash'; its arguments are "
      r"\['num_buckets', 'salt'\]")),
    ({"a": [{"op": "truncate", "max_length": 2, "keep": "all"}]},
     r"transforms\.a\[0\] \(op 'truncate'\): keep must be one of \['first', 'last'\]"),
    ({"a": [{"op": "hash", "num_buckets": 0}]},
     r"transforms\.a\[0\] \(op 'hash'\): num_buckets must be an integer in \[1, 2\*\*63 - 1\]"),
    ({"a": [{"op": "bucketize", "boundaries": [3, 2]}]},
     r"transforms\.a\[0\] \(op 'bucketize'\): boundaries must be strictly increasing"),
    ({"a": [{"op": "remap", "table": "abc"}]},
     r"transforms\.a\[0\] \(op 'remap'\): table must be a 1-D sequence of integers"),
    ({"a": [{"op": "remap"}]}, r"transforms\.a\[0\]\.table: missing argument of op 'remap'"),
    ({"a": ["hash"]}, r"transforms\.a\[0\]: must be a mapping with an 'op' entry"),
    ({"a": {"op": "hash", "num_buckets": 3}}, r"transforms\.a: must be a list of steps"),
    ({"a": "hash"}, r"transforms\.a: must be a list of steps"),
    ({"": []}, r"transforms: keys must be non-empty strings"),
    ([("a", [])], r"transforms: must be a mapping"),
])
def test_from_spec_errors(spec: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        from_spec(spec)  # type: ignore[arg-type]
