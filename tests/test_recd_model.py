"""RecD model path: per-group compute on IKJT unique rows equals the plain KJT path."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.models.recd import FeatureSpec, RecDModel, SequenceTower
from workbench.sparse.dedup import to_ikjt
from workbench.sparse.jagged_tensor import JaggedTensor, KeyedJaggedTensor
from workbench.training.recd_trainer import RecDTrainer

D = 8
ROWS = 50
MAX_LEN = 6
GROUPS = [["user_id", "age", "hist_item_id"], ["item_id"], ["category_id"]]
FEATURES = [
    FeatureSpec("user_id", ROWS, "pooled"),
    FeatureSpec("age", 10, "pooled"),
    FeatureSpec("hist_item_id", ROWS, "sequence", table="item_id"),
    FeatureSpec("item_id", ROWS, "pooled"),
    FeatureSpec("category_id", 20, "pooled"),
]
FWD = {"rtol": 1e-5, "atol": 1e-6}
GRAD = {"rtol": 1e-4, "atol": 1e-6}


def make_model(n_dense: int = 4, seed: int = 0, sparse_gradients: bool = True) -> RecDModel:
    return RecDModel(n_dense, FEATURES, GROUPS, D, [16], [16, 8], seq_heads=2,
                     seq_max_length=MAX_LEN, seed=seed, sparse_gradients=sparse_gradients)


def make_batch(rng: np.random.Generator, n_sessions: int, per_session: int, n_dense: int = 4,
               max_hist: int = 10) -> tuple[torch.Tensor | None, KeyedJaggedTensor, np.ndarray]:
    """Sessions: each user row (user_id, age, history) repeated ``per_session`` times, shuffled.

    Histories may be empty and may exceed ``MAX_LEN`` (truncation).
    """
    users = rng.integers(0, ROWS, n_sessions)
    ages = rng.integers(0, 10, n_sessions)
    hists = [rng.integers(0, ROWS, rng.integers(0, max_hist + 1)).tolist()
             for _ in range(n_sessions)]
    session = rng.permutation(np.repeat(np.arange(n_sessions), per_session))
    batch = session.size
    lists = {
        "user_id": [[int(users[s])] for s in session],
        "age": [[int(ages[s])] for s in session],
        "hist_item_id": [hists[s] for s in session],
        "item_id": [[int(i)] for i in rng.integers(0, ROWS, batch)],
        "category_id": [rng.integers(0, 20, rng.integers(0, 3)).tolist() for _ in range(batch)],
    }
    kjt = KeyedJaggedTensor.from_dict(lists)
    dense = torch.from_numpy(rng.standard_normal((batch, n_dense)).astype(np.float32)) \
        if n_dense else None
    labels = rng.integers(0, 2, batch).astype(np.float32)
    return dense, kjt, labels


def grads(model: RecDModel, dense: torch.Tensor | None, sparse: object,
          labels: np.ndarray) -> dict[str, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    loss = torch.nn.functional.binary_cross_entropy_with_logits(
        model(dense, sparse), torch.from_numpy(labels))
    loss.backward()
    return {n: p.grad.to_dense() for n, p in model.named_parameters()}  # tables: sparse grads


# -- equivalence KJT vs IKJT ----------------------------------------------------------------------


@pytest.mark.parametrize("n_dense", [4, 0])
def test_forward_ikjt_equals_kjt(n_dense: int) -> None:
    rng = np.random.default_rng(1)
    model = make_model(n_dense)
    dense, kjt, _ = make_batch(rng, n_sessions=5, per_session=8, n_dense=n_dense, max_hist=12)
    ikjt = to_ikjt(kjt, GROUPS)
    assert ikjt.num_unique(GROUPS[0]) == 5 < kjt.batch_size
    out_kjt = model(dense, kjt)
    out_ikjt = model(dense, ikjt)
    assert out_kjt.shape == (40,)
    torch.testing.assert_close(out_ikjt, out_kjt, **FWD)
    torch.testing.assert_close(model(dense, model.dedup(kjt)), out_kjt, **FWD)


def test_forward_equal_with_empty_and_long_histories() -> None:
    model = make_model()
    lists = {
        "user_id": [[1], [1], [2], [3], [2], [3], [1]],
        "age": [[4], [4], [5], [6], [5], [6], [4]],
        "hist_item_id": [[], [], list(range(1, 15)), [7], list(range(1, 15)), [7], []],
        "item_id": [[1], [2], [3], [4], [5], [6], [7]],
        "category_id": [[1, 2], [], [3], [4], [5], [], [7]],
    }
    kjt = KeyedJaggedTensor.from_dict(lists)
    dense = torch.randn(7, 4)
    ikjt = to_ikjt(kjt, GROUPS)
    assert ikjt.num_unique(GROUPS[0]) == 3
    out = model(dense, ikjt)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, model(dense, kjt), **FWD)


def test_gradients_equal() -> None:
    rng = np.random.default_rng(2)
    model = make_model()
    dense, kjt, labels = make_batch(rng, n_sessions=6, per_session=6, max_hist=10)
    g_kjt = grads(model, dense, kjt, labels)
    g_ikjt = grads(model, dense, to_ikjt(kjt, GROUPS), labels)
    assert g_kjt.keys() == g_ikjt.keys()
    assert "tables.item_id" in g_kjt and "tables.hist_item_id" not in g_kjt
    for name in g_kjt:
        torch.testing.assert_close(g_ikjt[name], g_kjt[name], **GRAD, msg=name)
    # the sequence tower and the shared table actually received gradient
    assert g_kjt["towers.hist_item_id.attention.in_proj_weight"].abs().sum() > 0
    assert g_kjt["towers.hist_item_id.positions"].abs().sum() > 0


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n_sessions=st.integers(1, 6),
       per_session=st.integers(1, 6), max_hist=st.integers(0, 9), n_dense=st.sampled_from([0, 3]))
def test_property_ikjt_matches_kjt(seed: int, n_sessions: int, per_session: int, max_hist: int,
                                   n_dense: int) -> None:
    rng = np.random.default_rng(seed)
    model = make_model(n_dense, seed=seed % 1000)
    dense, kjt, labels = make_batch(rng, n_sessions, per_session, n_dense, max_hist)
    ikjt = to_ikjt(kjt, GROUPS)
    torch.testing.assert_close(model(dense, ikjt), model(dense, kjt), **FWD)
    g_kjt = grads(model, dense, kjt, labels)
    g_ikjt = grads(model, dense, ikjt, labels)
    for name in g_kjt:
        torch.testing.assert_close(g_ikjt[name], g_kjt[name], **GRAD, msg=name)


@pytest.mark.parametrize("optimizer", ["adagrad", "sgd"])
def test_trainer_steps_equal(optimizer: str) -> None:
    rng = np.random.default_rng(3)
    batches = [make_batch(rng, n_sessions=4, per_session=8) for _ in range(3)]
    model_kjt, model_ikjt = make_model(seed=7), make_model(seed=7)
    for p, q in zip(model_kjt.parameters(), model_ikjt.parameters()):
        assert torch.equal(p, q)
    t_kjt = RecDTrainer(model_kjt, lr=0.05, optimizer=optimizer)
    t_ikjt = RecDTrainer(model_ikjt, lr=0.05, optimizer=optimizer)
    for dense, kjt, labels in batches:
        loss_kjt = t_kjt.step(dense, kjt, labels)
        loss_ikjt = t_ikjt.step(dense, to_ikjt(kjt, GROUPS), labels)
        assert loss_ikjt == pytest.approx(loss_kjt, rel=1e-5)
    for (name, p), q in zip(model_kjt.named_parameters(), model_ikjt.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5, msg=name)
    dense, kjt, _ = batches[0]
    np.testing.assert_allclose(t_ikjt.predict(dense, to_ikjt(kjt, GROUPS)),
                               t_kjt.predict(dense, kjt), rtol=1e-5, atol=1e-6)


# -- sparse (row-indexed) vs dense table gradients -------------------------------------------------


def test_table_gradients_are_sparse_and_equal_dense() -> None:
    rng = np.random.default_rng(8)
    dense, kjt, labels = make_batch(rng, n_sessions=4, per_session=5, max_hist=MAX_LEN)
    for sparse in (kjt, to_ikjt(kjt, GROUPS)):
        g_dense = grads(make_model(sparse_gradients=False), dense, sparse, labels)
        model = make_model(sparse_gradients=True)
        grads(model, dense, sparse, labels)
        for name, table in model.tables.items():
            assert table.grad.is_sparse, name
            assert table.grad.coalesce().indices().shape[1] < table.shape[0]  # rows read only
            torch.testing.assert_close(table.grad.to_dense(), g_dense[f"tables.{name}"],
                                       rtol=1e-5, atol=1e-7, msg=name)
        # item_id's table is shared with the history tower: both features' rows arrive
        rows = set(model.tables["item_id"].grad.coalesce().indices()[0].tolist())
        assert set(kjt["item_id"].values().tolist()) <= rows
        assert set(kjt["hist_item_id"].values().tolist()) - set(kjt["item_id"].values()) \
            <= rows
        assert not any(p.grad.is_sparse for n, p in model.named_parameters()
                       if not n.startswith("tables."))
    model = make_model(sparse_gradients=False)
    grads(model, dense, kjt, labels)
    assert not any(t.grad.is_sparse for t in model.tables.values())


@pytest.mark.parametrize("layout", ["kjt", "ikjt"])
@pytest.mark.parametrize("optimizer", ["adagrad", "sgd"])
def test_sparse_and_dense_gradients_train_alike(optimizer: str, layout: str) -> None:
    # a shared table (hist_item_id reads item_id's) and a sequence tower included
    rng = np.random.default_rng(9)
    batches = [make_batch(rng, n_sessions=4, per_session=6) for _ in range(4)]
    models = {sp: make_model(seed=11, sparse_gradients=sp) for sp in (True, False)}
    trainers = {sp: RecDTrainer(m, lr=0.05, optimizer=optimizer) for sp, m in models.items()}
    for dense, kjt, labels in batches:
        sparse = kjt if layout == "kjt" else to_ikjt(kjt, GROUPS)
        loss = {sp: t.step(dense, sparse, labels) for sp, t in trainers.items()}
        assert loss[True] == pytest.approx(loss[False], rel=1e-6)
        assert models[True].tables["item_id"].grad.is_sparse
        assert not models[False].tables["item_id"].grad.is_sparse
    for (name, p), q in zip(models[True].named_parameters(), models[False].parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6, msg=name)


def test_predict_is_sigmoid_of_forward_in_eval_mode() -> None:
    rng = np.random.default_rng(4)
    model = make_model()
    dense, kjt, _ = make_batch(rng, 3, 4)
    trainer = RecDTrainer(model, lr=0.1)
    probs = trainer.predict(dense, to_ikjt(kjt, GROUPS))
    assert model.training  # restored
    assert probs.shape == (12,) and probs.dtype == np.float32
    np.testing.assert_allclose(probs, torch.sigmoid(model(dense, kjt)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)


def test_model_learns_synthetic_task() -> None:
    # label = 1 iff the item was in the user's history: needs the sequence tower and item_id
    rng = np.random.default_rng(5)
    dense, kjt, _ = make_batch(rng, n_sessions=8, per_session=8, max_hist=5)
    hist, items = kjt["hist_item_id"].to_list(), kjt["item_id"].to_list()
    for s in range(0, kjt.batch_size, 2):  # make half of the items come from the history
        if hist[s]:
            items[s] = [hist[s][0]]
    lists = kjt.to_dict()
    lists["item_id"] = items
    kjt = KeyedJaggedTensor.from_dict(lists)
    labels = np.array([float(i[0] in h) for i, h in zip(items, hist)], dtype=np.float32)
    ikjt = to_ikjt(kjt, GROUPS)
    trainer = RecDTrainer(make_model(seed=1), lr=0.05)
    losses = [trainer.step(dense, ikjt, labels) for _ in range(60)]
    assert losses[-1] < 0.5 * losses[0]


# -- work accounting ------------------------------------------------------------------------------


def test_work_counts_fewer_rows_and_values_for_ikjt() -> None:
    model = make_model()
    kjt = KeyedJaggedTensor.from_dict({
        "user_id": [[1], [1], [1], [2]],
        "age": [[3], [3], [3], [4]],
        "hist_item_id": [list(range(10)), list(range(10)), list(range(10)), [5]],
        "item_id": [[1], [2], [1], [3]],
        "category_id": [[1], [1], [], [2, 3]],
    })
    w_kjt = model.work(kjt)
    w_ikjt = model.work(to_ikjt(kjt, GROUPS))
    assert w_kjt["batch_size"] == w_ikjt["batch_size"] == 4
    assert w_kjt["rows"] == 12
    assert w_ikjt["rows"] == 2 + 3 + 3
    assert w_kjt["values"] == kjt.num_values() == 4 + 4 + 31 + 4 + 4
    assert w_ikjt["values"] == 2 + 2 + 11 + 3 + 3
    assert w_kjt["sequence_rows"] == 4 and w_ikjt["sequence_rows"] == 2
    assert w_kjt["sequence_positions"] == 3 * MAX_LEN + 1
    assert w_ikjt["sequence_positions"] == MAX_LEN + 1
    assert w_ikjt["groups"][0] == {"keys": GROUPS[0], "rows": 2, "values": 15}
    assert w_kjt["groups"][0]["rows"] == 4


# -- sequence tower -------------------------------------------------------------------------------


def test_sequence_tower_rows_independent_truncated_and_empty_zero() -> None:
    torch.manual_seed(0)
    tower = SequenceTower(D, 2, max_length=4)
    table = torch.randn(ROWS, D)
    lists = [[1, 2, 3], [], [9, 8, 7, 6, 5, 4, 3], [5], [], [10, 11, 12, 13]]
    jt = JaggedTensor(np.array([v for row in lists for v in row]),
                      np.array([len(r) for r in lists]))
    full = tower(jt, table)
    assert torch.isfinite(full).all()
    assert torch.equal(full[1], torch.zeros(D)) and torch.equal(full[4], torch.zeros(D))
    for subset in ([0], [2, 3], [5, 0, 1], [3]):
        sub = [lists[i] for i in subset]
        sub_jt = JaggedTensor(np.array([v for row in sub for v in row], dtype=np.int64),
                              np.array([len(r) for r in sub]))
        torch.testing.assert_close(tower(sub_jt, table), full[subset], rtol=1e-5, atol=1e-5)
    # truncation keeps the last max_length items
    last = JaggedTensor(np.array([6, 5, 4, 3]), np.array([4]))
    torch.testing.assert_close(tower(last, table)[0], full[2], rtol=1e-5, atol=1e-5)
    # no per-row state: eval mode / no_grad gives the same (MHA kept off its fast path)
    tower.eval()
    with torch.no_grad():
        torch.testing.assert_close(tower(jt, table), full.detach(), rtol=1e-5, atol=1e-6)


def test_sequence_tower_validates() -> None:
    with pytest.raises(ValueError, match="divide"):
        SequenceTower(8, 3, 5)
    with pytest.raises(ValueError, match="max_length"):
        SequenceTower(8, 2, 0)
    tower = SequenceTower(8, 2, 5)
    with pytest.raises(IndexError, match="out of range"):
        tower(JaggedTensor(np.array([50]), np.array([1])), torch.randn(50, 8))
    with pytest.raises(ValueError, match="table has shape"):
        tower(JaggedTensor(np.array([1]), np.array([1])), torch.randn(50, 4))


# -- construction and errors ----------------------------------------------------------------------


def test_seed_is_deterministic_and_leaves_global_rng() -> None:
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = make_model(seed=11)
    after = torch.rand(1)
    assert torch.equal(before, after)
    b = make_model(seed=11)
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)
    assert set(a.tables) == {"user_id", "age", "item_id", "category_id"}
    assert set(a.towers) == {"hist_item_id"}


def test_feature_spec_validates() -> None:
    with pytest.raises(ValueError, match="num_rows"):
        FeatureSpec("a", 0, "pooled")
    with pytest.raises(ValueError, match="kind"):
        FeatureSpec("a", 5, "dense")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty"):
        FeatureSpec("", 5, "pooled")
    with pytest.raises(ValueError, match="table"):
        FeatureSpec("a", 5, "pooled", table="")
    spec = FeatureSpec("a", 5, "pooled")
    assert spec.table_name == "a" and spec.owns_table
    with pytest.raises(AttributeError):
        spec.num_rows = 3  # type: ignore[misc]


@pytest.mark.parametrize("groups, match", [
    ([["user_id", "age", "hist_item_id"], ["item_id"]],
     r"\['category_id'\] are in no dedup group"),
    ([["user_id", "age", "hist_item_id", "item_id"], ["item_id"], ["category_id"]],
     "'item_id' appears in groups 0 and"),
    ([["user_id", "age", "hist_item_id"], ["item_id"], ["category_id", "price"]],
     "unknown key 'price'"),
    ([["user_id", "age", "hist_item_id"], ["item_id"], ["category_id"], []], "empty"),
])
def test_groups_must_partition_features(groups: list[list[str]], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        RecDModel(4, FEATURES, groups, D, [16], [8])


def test_shared_table_must_exist() -> None:
    features = [*FEATURES[:2], FeatureSpec("hist_item_id", ROWS, "sequence", table="items"),
                *FEATURES[3:]]
    with pytest.raises(ValueError, match="shares table 'items'.*no such feature"):
        RecDModel(4, features, GROUPS, D, [16], [8])
    features[2] = FeatureSpec("hist_item_id", 30, "sequence", table="item_id")
    with pytest.raises(ValueError, match="num_rows = 30"):
        RecDModel(4, features, GROUPS, D, [16], [8])


def test_other_construction_errors() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        RecDModel(4, [*FEATURES, FEATURES[0]], GROUPS, D, [16], [8])
    with pytest.raises(ValueError, match="at least 2 features"):
        RecDModel(0, FEATURES[:1], [["user_id"]], D, [], [8])
    with pytest.raises(ValueError, match="seq_heads"):
        RecDModel(4, FEATURES, GROUPS, D, [16], [8], seq_heads=3)


def test_forward_input_errors() -> None:
    model = make_model()
    rng = np.random.default_rng(6)
    dense, kjt, _ = make_batch(rng, 2, 2)
    lists = kjt.to_dict()
    extra = KeyedJaggedTensor.from_dict({**lists, "price": [[1]] * 4})
    with pytest.raises(ValueError, match=r"unknown keys \['price'\]"):
        model(dense, extra)
    del lists["age"]
    with pytest.raises(ValueError, match=r"missing features \['age'\]"):
        model(dense, KeyedJaggedTensor.from_dict(lists))
    with pytest.raises(ValueError, match="dense has shape"):
        model(dense[:3], kjt)
    with pytest.raises(ValueError, match="dense is None"):
        model(None, kjt)
    split = to_ikjt(kjt, [["user_id", "age"], ["hist_item_id"], ["item_id"], ["category_id"]])
    with pytest.raises(ValueError, match="spans the IKJT dedup groups"):
        model(dense, split)
    with pytest.raises(TypeError, match="KeyedJaggedTensor"):
        model(dense, {"user_id": [[1]]})  # type: ignore[arg-type]
    # a coarser IKJT grouping (whole model groups inside one dedup group) is fine
    coarse = to_ikjt(kjt, [["user_id", "age", "hist_item_id", "item_id"], ["category_id"]])
    torch.testing.assert_close(model(dense, coarse), model(dense, kjt), **FWD)
    with pytest.raises(ValueError, match="optimizer"):
        RecDTrainer(model, 0.1, optimizer="adam")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="lr"):
        RecDTrainer(model, 0.0)
