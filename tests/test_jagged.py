"""KeyedJaggedTensor / InverseKeyedJaggedTensor (RecD)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.sparse import dedup as jagged
from workbench.sparse.dedup import to_ikjt
from workbench.sparse.jagged_tensor import InverseKeyedJaggedTensor, JaggedTensor, KeyedJaggedTensor
from workbench.sparse.lookup import dedup_pooled_lookup, pooled_lookup

EXAMPLE = {
    "b": [[3, 4, 5], [4, 5, 6], [3, 4, 5]],
    "c": [[7, 8], [7, 8], [10]],
    "d": [[9], [9], [11]],
}


@pytest.fixture
def example_kjt() -> KeyedJaggedTensor:
    return KeyedJaggedTensor.from_dict(EXAMPLE)


# -- KJT basics -----------------------------------------------------------------------------------


def test_kjt_layout_is_key_major(example_kjt: KeyedJaggedTensor) -> None:
    assert example_kjt.keys() == ["b", "c", "d"]
    assert example_kjt.batch_size == example_kjt.stride() == 3
    assert example_kjt.lengths().tolist() == [3, 3, 3, 2, 2, 1, 1, 1, 1]
    assert example_kjt.values().tolist() == [3, 4, 5, 4, 5, 6, 3, 4, 5, 7, 8, 7, 8, 10, 9, 9, 11]
    assert example_kjt.offsets().tolist() == [0, 3, 6, 9, 11, 13, 14, 15, 16, 17]
    assert example_kjt.values().dtype == np.int64
    assert example_kjt.length_per_key() == [9, 5, 3]
    assert example_kjt.num_values() == 17
    c = example_kjt["c"]
    assert isinstance(c, JaggedTensor)
    assert c.values().tolist() == [7, 8, 7, 8, 10]
    assert c.lengths().tolist() == [2, 2, 1]
    assert c.offsets().tolist() == [0, 2, 4, 5]
    assert example_kjt.to_dict() == EXAMPLE
    assert KeyedJaggedTensor.from_jt_dict({k: example_kjt[k] for k in "bcd"}) == example_kjt


def test_kjt_validation_errors() -> None:
    with pytest.raises(ValueError, match="lengths sum to 3 but there are 2 values"):
        KeyedJaggedTensor(["a"], np.array([1, 2]), np.array([1, 2]))
    with pytest.raises(ValueError, match="not a multiple"):
        KeyedJaggedTensor(["a", "b"], np.array([1, 2, 3]), np.array([1, 1, 1]))
    with pytest.raises(ValueError, match="non-negative"):
        KeyedJaggedTensor(["a"], np.array([1]), np.array([2, -1]))
    with pytest.raises(ValueError, match="duplicate keys"):
        KeyedJaggedTensor(["a", "a"], np.array([], dtype=np.int64), np.array([0, 0]))
    with pytest.raises(ValueError, match="at least one key"):
        KeyedJaggedTensor([], np.array([], dtype=np.int64), np.array([], dtype=np.int64))
    with pytest.raises(TypeError, match="integers"):
        KeyedJaggedTensor(["a"], np.array([1.5]), np.array([1]))
    with pytest.raises(ValueError, match="different batch sizes"):
        KeyedJaggedTensor.from_dict({"a": [[1]], "b": [[1], [2]]})
    with pytest.raises(ValueError, match="lengths sum"):
        JaggedTensor(np.array([1, 2, 3]), np.array([1]))
    with pytest.raises(KeyError, match="unknown key"):
        KeyedJaggedTensor.from_dict({"a": [[1]]})["z"]


# -- the module docstring's worked example, field by field -----------------------------------------


@pytest.mark.parametrize("method", ["hash", "sort"])
def test_worked_example(example_kjt: KeyedJaggedTensor, method: str) -> None:
    ikjt = to_ikjt(example_kjt, [["b"], ["c", "d"]], method=method)
    assert ikjt.keys() == ["b", "c", "d"]
    assert ikjt.groups == (("b",), ("c", "d"))
    assert ikjt.batch_size == 3
    # group (b)
    assert ikjt.values("b").tolist() == [3, 4, 5, 4, 5, 6]
    assert ikjt.lengths("b").tolist() == [3, 3]
    assert ikjt.offsets("b")[:-1].tolist() == [0, 3]  # DESIGN's "offsets [0,3]" (list starts)
    assert ikjt.inverse_lookup("b").tolist() == [0, 1, 0]
    # group (c, d): one shared inverse lookup
    assert ikjt.values("c").tolist() == [7, 8, 10]
    assert ikjt.lengths("c").tolist() == [2, 1]
    assert ikjt.values("d").tolist() == [9, 11]
    assert ikjt.lengths("d").tolist() == [1, 1]
    assert ikjt.inverse_lookup(["c", "d"]).tolist() == [0, 0, 1]
    assert ikjt.inverse_lookup("c") is ikjt.inverse_lookup("d")
    assert ikjt.group_of("d") == ("c", "d")
    assert ikjt["c"].to_list() == [[7, 8], [10]]
    # counts
    assert ikjt.num_unique("b") == 2 and ikjt.num_unique(["d", "c"]) == 2
    assert ikjt.dedup_factor("b") == pytest.approx(1.5)
    assert ikjt.dedup_factor(["c", "d"]) == pytest.approx(1.5)
    assert ikjt.num_values() == 6 + 3 + 2
    # and back
    assert ikjt.expand() == example_kjt


def test_singleton_groups_dedup_independently(example_kjt: KeyedJaggedTensor) -> None:
    ikjt = to_ikjt(example_kjt, [["b"], ["c"], ["d"]])
    assert ikjt.inverse_lookup("c").tolist() == [0, 0, 1]
    assert ikjt.inverse_lookup("d").tolist() == [0, 0, 1]
    # grouping b with c: rows ([3,4,5],[7,8]), ([4,5,6],[7,8]), ([3,4,5],[10]): all unique
    ikjt = to_ikjt(example_kjt, [["b", "c"], ["d"]])
    assert ikjt.inverse_lookup("b").tolist() == [0, 1, 2]
    assert ikjt.dedup_factor("c") == 1.0
    assert ikjt.expand() == example_kjt


def test_group_validation_errors(example_kjt: KeyedJaggedTensor) -> None:
    with pytest.raises(ValueError, match=r"keys \['d'\] are in no dedup group"):
        to_ikjt(example_kjt, [["b"], ["c"]])
    with pytest.raises(ValueError, match="'c' appears in groups 1 and group 2"):
        to_ikjt(example_kjt, [["b"], ["c", "d"], ["c"]])
    with pytest.raises(ValueError, match="'c' appears twice in group 1"):
        to_ikjt(example_kjt, [["b"], ["c", "c", "d"]])
    with pytest.raises(ValueError, match="unknown key 'z'"):
        to_ikjt(example_kjt, [["b", "z"], ["c", "d"]])
    with pytest.raises(ValueError, match="group 1 is empty"):
        to_ikjt(example_kjt, [["b", "c", "d"], []])
    with pytest.raises(TypeError, match="group of one"):
        to_ikjt(example_kjt, ["b", ["c", "d"]])
    with pytest.raises(ValueError, match="method"):
        to_ikjt(example_kjt, [["b"], ["c", "d"]], method="bogus")  # type: ignore[arg-type]
    ikjt = to_ikjt(example_kjt, [["b"], ["c", "d"]])
    with pytest.raises(KeyError, match="not a dedup group"):
        ikjt.dedup_factor(["b", "c"])


def test_ikjt_constructor_validation() -> None:
    ok = dict(keys=["a"], groups=[["a"]], values={"a": np.array([1])},
              lengths={"a": np.array([1])}, inverse_lookups=[np.array([0, 0])])
    assert InverseKeyedJaggedTensor(**ok).expand().to_dict() == {"a": [[1], [1]]}
    with pytest.raises(ValueError, match="out of range"):
        InverseKeyedJaggedTensor(**{**ok, "inverse_lookups": [np.array([0, 1])]})
    with pytest.raises(ValueError, match="lengths sum"):
        InverseKeyedJaggedTensor(**{**ok, "values": {"a": np.array([1, 2])}})
    with pytest.raises(ValueError, match="inverse lookups for"):
        InverseKeyedJaggedTensor(**{**ok, "inverse_lookups": []})


def test_hash_collision_falls_back_to_exact(example_kjt: KeyedJaggedTensor,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # every list hashes to the same value: the exact check must catch the false merge
    monkeypatch.setattr(jagged, "_list_hashes",
                        lambda values, lengths, salt: np.zeros(lengths.size, dtype=np.uint64))
    ikjt = to_ikjt(example_kjt, [["b"], ["c", "d"]], method="hash")
    assert ikjt.inverse_lookup("b").tolist() == [0, 1, 0]
    assert ikjt.inverse_lookup("c").tolist() == [0, 0, 1]
    assert ikjt.expand() == example_kjt


def test_prefix_and_padding_are_not_merged() -> None:
    # [1] vs [1, 0] vs [] vs [0]: zero padding must not make them equal; nor must moving a
    # value across the key boundary of a group ([1],[2,3]) vs ([1,2],[3])
    kjt = KeyedJaggedTensor.from_dict({"a": [[1], [1, 0], [], [0], [1], [1, 2], [1]],
                                       "b": [[5], [5], [5], [5], [2, 3], [3], [2, 3]]})
    for method in ("hash", "sort"):
        ikjt = to_ikjt(kjt, [["a"], ["b"]], method=method)
        assert ikjt.inverse_lookup("a").tolist() == [0, 1, 2, 3, 0, 4, 0]
        ikjt = to_ikjt(kjt, [["a", "b"]], method=method)
        assert ikjt.inverse_lookup("a").tolist() == [0, 1, 2, 3, 4, 5, 4]
        assert ikjt.expand() == kjt


def test_extreme_ids() -> None:
    big = np.iinfo(np.int64).max
    kjt = KeyedJaggedTensor.from_dict({"a": [[-1, big], [-1, big], [big, -1], [-1], [-1]]})
    for method in ("hash", "sort"):
        ikjt = to_ikjt(kjt, [["a"]], method=method)
        assert ikjt.inverse_lookup("a").tolist() == [0, 0, 1, 2, 2]
        assert ikjt.expand() == kjt


def test_empty_batch() -> None:
    kjt = KeyedJaggedTensor(["a", "b"], np.array([], dtype=np.int64), np.array([], dtype=np.int64))
    assert kjt.batch_size == 0
    for method in ("hash", "sort"):
        ikjt = to_ikjt(kjt, [["a", "b"]], method=method)
        assert ikjt.num_values() == 0 and ikjt.dedup_factor("a") == 1.0
        assert ikjt.expand() == kjt


# -- property tests -------------------------------------------------------------------------------


@st.composite
def kjt_and_groups(draw: st.DrawFn) -> tuple[KeyedJaggedTensor, list[list[str]]]:
    n_keys = draw(st.integers(1, 4))
    batch = draw(st.integers(1, 12))
    keys = [f"k{i}" for i in range(n_keys)]
    lists = st.lists(st.integers(0, 2), min_size=0, max_size=4)
    # draw a few distinct rows and pick among them so duplicates are common
    data = {}
    for key in keys:
        pool = draw(st.lists(lists, min_size=1, max_size=3))
        picks = draw(st.lists(st.integers(0, len(pool) - 1), min_size=batch, max_size=batch))
        data[key] = [pool[i] for i in picks]
    labels = draw(st.lists(st.integers(0, n_keys - 1), min_size=n_keys, max_size=n_keys))
    perm = draw(st.permutations(keys))
    groups: dict[int, list[str]] = {}
    for key, label in zip(perm, labels):
        groups.setdefault(label, []).append(key)
    return KeyedJaggedTensor.from_dict(data), list(groups.values())


@settings(max_examples=200, deadline=None)
@given(kjt_and_groups(), st.sampled_from(["hash", "sort"]))
def test_roundtrip_and_inverse_semantics(case: tuple[KeyedJaggedTensor, list[list[str]]],
                                         method: str) -> None:
    kjt, groups = case
    ikjt = to_ikjt(kjt, groups, method=method)
    assert ikjt.expand() == kjt
    assert to_ikjt(kjt, groups, method="sort" if method == "hash" else "hash").groups \
        == ikjt.groups
    lists = kjt.to_dict()
    batch = kjt.batch_size
    total_unique_values = 0
    for group in groups:
        inv = ikjt.inverse_lookup(group)
        assert inv.shape == (batch,)
        rows = [tuple(tuple(lists[k][s]) for k in group) for s in range(batch)]
        for s in range(batch):
            for t in range(batch):
                assert (inv[s] == inv[t]) == (rows[s] == rows[t])
        # first-occurrence numbering: first appearances are 0, 1, 2, ...
        _, first = np.unique(inv, return_index=True)
        assert inv[np.sort(first)].tolist() == list(range(ikjt.num_unique(group)))
        # unique rows stored are exactly the distinct rows in first-occurrence order
        distinct = list(dict.fromkeys(rows))
        for j, key in enumerate(group):
            assert ikjt[key].to_list() == [list(row[j]) for row in distinct]
            total_unique_values += ikjt.values(key).size
        assert ikjt.dedup_factor(group) >= 1.0
        assert ikjt.dedup_factor(group) == pytest.approx(batch / len(distinct))
    assert ikjt.num_values() == total_unique_values <= kjt.num_values()


@settings(max_examples=100, deadline=None)
@given(kjt_and_groups())
def test_hash_and_sort_agree(case: tuple[KeyedJaggedTensor, list[list[str]]]) -> None:
    kjt, groups = case
    a, b = to_ikjt(kjt, groups, method="hash"), to_ikjt(kjt, groups, method="sort")
    for key in kjt.keys():
        assert a[key] == b[key]
        assert np.array_equal(a.inverse_lookup(key), b.inverse_lookup(key))


# -- pooled lookups -------------------------------------------------------------------------------


def _session_kjt(rng: np.random.Generator, batch: int, rows: int) -> KeyedJaggedTensor:
    """Random batch whose user keys repeat in runs (duplicates) and item key is unique."""
    runs = rng.integers(1, 5, size=batch)
    owner = np.repeat(np.arange(batch), runs)[:batch]
    user_rows = [rng.integers(0, rows, size=rng.integers(0, 5)).tolist() for _ in range(batch)]
    ctx_rows = [rng.integers(0, rows, size=rng.integers(0, 3)).tolist() for _ in range(batch)]
    return KeyedJaggedTensor.from_dict({
        "user_hist": [user_rows[o] for o in owner],
        "user_ctx": [ctx_rows[o] for o in owner],
        "item": [rng.integers(0, rows, size=rng.integers(1, 3)).tolist() for _ in range(batch)],
    })


@pytest.mark.parametrize("sparse", [True, False])
@pytest.mark.parametrize("mode", ["sum", "mean"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dedup_pooled_lookup_matches_expanded(mode: str, seed: int, sparse: bool) -> None:
    rng = np.random.default_rng(seed)
    rows, dim, batch = 30, 5, 40
    kjt = _session_kjt(rng, batch, rows)
    ikjt = to_ikjt(kjt, [["user_hist", "user_ctx"], ["item"]])
    assert ikjt.dedup_factor("user_hist") > 1.0
    weights = torch.from_numpy(rng.standard_normal((rows, dim)))
    upstream = torch.from_numpy(rng.standard_normal((batch, dim)))
    for key in kjt.keys():
        t_ref = weights.clone().requires_grad_(True)
        ref = pooled_lookup(t_ref, kjt[key], mode, sparse=False)  # dense reference
        (ref * upstream).sum().backward()
        t_dd = weights.clone().requires_grad_(True)
        out = dedup_pooled_lookup(t_dd, ikjt, key, mode, sparse=sparse)
        (out * upstream).sum().backward()
        assert out.shape == (batch, dim) and out.dtype == torch.float64
        assert torch.equal(out, ref)  # same bags, same order: bit-identical forward
        assert t_dd.grad.is_sparse == sparse and not t_ref.grad.is_sparse
        torch.testing.assert_close(t_dd.grad.to_dense(), t_ref.grad, rtol=0, atol=1e-12)


def test_pooled_lookup_sparse_gradient_is_row_indexed() -> None:
    table = torch.zeros(1000, 3, requires_grad=True)
    jt = JaggedTensor(np.array([7, 7, 999, 0]), np.array([2, 0, 2]))
    pooled_lookup(table, jt).sum().backward()  # sparse by default
    grad = table.grad.coalesce()
    assert table.grad.is_sparse and grad.indices().tolist() == [[0, 7, 999]]
    assert grad.values().tolist() == [[1.0] * 3, [2.0] * 3, [1.0] * 3]


def test_pooled_lookup_values() -> None:
    table = torch.arange(12, dtype=torch.float64).reshape(6, 2)
    jt = JaggedTensor(np.array([0, 1, 5, 2]), np.array([2, 0, 1, 1]))
    assert pooled_lookup(table, jt, "sum").tolist() == [[2, 4], [0, 0], [10, 11], [4, 5]]
    assert pooled_lookup(table, jt, "mean").tolist() == [[1, 2], [0, 0], [10, 11], [4, 5]]
    with pytest.raises(IndexError):
        pooled_lookup(table, JaggedTensor(np.array([6]), np.array([1])))
    with pytest.raises(ValueError, match="mode"):
        pooled_lookup(table, jt, "max")  # type: ignore[arg-type]


# -- plain keys and request-keyed dedup ---------------------------------------------------------


def test_plain_keys_keep_every_row(example_kjt: KeyedJaggedTensor) -> None:
    ikjt = to_ikjt(example_kjt, [["c", "d"]], plain=["b"])
    assert ikjt.groups == (("c", "d"), ("b",))
    assert ikjt.inverse_lookup("b").tolist() == [0, 1, 2]
    assert ikjt["b"] == example_kjt["b"]
    assert ikjt.inverse_lookup("c").tolist() == [0, 0, 1]
    assert ikjt.expand() == example_kjt
    with pytest.raises(ValueError, match="key .b. appears in groups 0 and group 2"):
        to_ikjt(example_kjt, [["b"], ["c", "d"]], plain=["b"])


def test_request_rows_first_occurrence() -> None:
    unique, inverse = jagged.request_rows(np.array([7, 3, 7, 9, 3]))
    assert unique.tolist() == [0, 1, 3]
    assert inverse.tolist() == [0, 1, 0, 2, 1]


@given(st.lists(st.integers(0, 4), min_size=1, max_size=40), st.integers(0, 3))
@settings(max_examples=80, deadline=None)
def test_to_ikjt_by_request_expands_exactly(requests: list[int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    per_request = {r: rng.integers(0, 6, rng.integers(0, 4)).tolist() for r in set(requests)}
    kjt = KeyedJaggedTensor.from_dict({
        "hist": [per_request[r] for r in requests],
        "user": [[r % 2] for r in requests],
        "item": [[int(x)] for x in rng.integers(0, 9, len(requests))]})
    ikjt = jagged.to_ikjt_by_request(kjt, [["hist", "user"]], np.array(requests),
                                     plain=["item"], verify=True)
    assert ikjt.expand() == kjt
    assert ikjt.num_unique("hist") == len(set(requests))
    # never more deduplicated than content dedup, which may also merge equal rows of
    # different requests
    assert ikjt.num_unique("hist") >= to_ikjt(kjt, [["hist", "user"]],
                                              plain=["item"]).num_unique("hist")


def test_to_ikjt_by_request_verify_rejects_non_request_features() -> None:
    kjt = KeyedJaggedTensor.from_dict({"hist": [[1], [2]], "item": [[3], [3]]})
    with pytest.raises(ValueError, match="differs between samples of one request"):
        jagged.to_ikjt_by_request(kjt, [["hist"]], np.array([5, 5]), plain=["item"],
                                  verify=True)
    with pytest.raises(ValueError, match="1 request ids for a batch of 2"):
        jagged.to_ikjt_by_request(kjt, [["hist"]], np.array([5]), plain=["item"])
