"""The ``hetu`` recipe against Hetu's formulas, computed by hand in numpy.

One iteration of the trainer on a toy batch, W = 2 workers of 3 samples, is held to the step
that Hetu's ``examples/ctr`` takes (``workbench/models/recipe.py`` gives the formulas, file and
line): every worker's loss is ``reduce_mean`` over its own samples; the dense gradient is the
NCCL **sum** of the workers' under SGD; a row moves by ``-lr / b_w`` times its sample's loss
gradient, per occurrence, and by ``/ W`` more on a parameter-server path with Hetu 149095d's
division. The forward and the backward here are written out layer by layer (no autograd), from
the model's own initial weights.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.cluster.config import CacheConfig, ClusterConfig
from workbench.models import recipe as recipe_module
from workbench.models.config import ModelConfig
from workbench.models.ctr import build_model, dense_parameter_count
from workbench.models.recipe import hetu_units
from workbench.training import trainer as trainer_module
from workbench.training.components import ClusterSetup, ModelSpec, SystemSpec
from workbench.training.metrics import auc_score, batched_auc
from workbench.training.trainer import Split, Trainer
from workbench.utils.validation import ConfigError

F, D, N_DENSE, ROWS, B, W = 3, 4, 2, 11, 6, 2
LR = 0.05


def _batch(seed: int = 0) -> Split:
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, ROWS, size=(B, F))
    keys[1, 0] = keys[4, 2] = keys[0, 1]  # one key read by both workers and twice by worker 0
    return Split(dense=rng.normal(size=(B, N_DENSE)).astype(np.float32), keys=keys,
                 labels=np.array([1, 0, 1, 0, 0, 1], np.float32))


def _config(divide: bool = False) -> ModelConfig:
    return ModelConfig(name="wdl", embedding_dim=D, deep_mlp=[5, 5, 5], batch_size=B, lr_dense=LR,
                       lr_sparse=LR, optimizer="sgd", init_scale=0.3, recipe="hetu",
                       divide_by_workers=divide)


def _trainer(kind: str, divide: bool, bound: int = 0) -> Trainer:
    return Trainer(ModelSpec(_config(divide), N_DENSE, F, ROWS), SystemSpec(kind, kind, bound),
                   ClusterSetup(ClusterConfig(workers=W, compute="flops"),
                                CacheConfig(policy="lru", ratio=0.5)), seed=7)


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0)


def _hand_step(weights: list[np.ndarray], table: np.ndarray, split: Split, lr_dense: float,
               lr_sparse: float) -> tuple[list[np.ndarray], np.ndarray]:
    """Hetu's WDL step (``wdl_criteo.py``) on the contiguous dispatch, by hand.

    ``weights`` are Hetu's ``[in, out]`` matrices W1, W2, W3, W4; returns them and the table
    after one iteration.
    """
    w1, w2, w3, w4 = weights
    e = table[split.keys]                                  # [B, F, D]
    h1 = split.dense @ w1
    a1 = _relu(h1)
    h2 = a1 @ w2
    a2 = _relu(h2)
    y3 = a2 @ w3                                           # no ReLU after W3
    x = np.concatenate([e.reshape(B, -1), y3], axis=1)     # concat(sparse, y3)
    z = x @ w4[:, 0]
    owner = np.repeat(np.arange(W), B // W)                # contiguous slices of the batch
    per_worker = np.bincount(owner)[owner]
    # d/dz of sum_w mean_{i in w} BCE(sigmoid(z_i), y_i)
    gz = (1.0 / (1.0 + np.exp(-z)) - split.labels) / per_worker
    dw4 = x.T @ gz[:, None]
    g_y3 = gz[:, None] * w4[F * D:, 0][None, :]
    dw3 = a2.T @ g_y3
    g_h2 = (g_y3 @ w3.T) * (h2 > 0)
    dw2 = a1.T @ g_h2
    g_h1 = (g_h2 @ w2.T) * (h1 > 0)
    dw1 = split.dense.T @ g_h1
    new = [w - lr_dense * g for w, g in zip(weights, (dw1, dw2, dw3, dw4))]
    g_e = gz[:, None, None] * w4[:F * D, 0].reshape(1, F, D)   # d objective / d e_{i,f}
    after = table.copy()
    np.add.at(after, split.keys.ravel(), -lr_sparse * g_e.reshape(-1, D))
    return new, after


def _weights(model: torch.nn.Module) -> list[np.ndarray]:
    """Hetu's [in, out] matrices of a HetuWDL (torch holds [out, in])."""
    layers = [m for m in model.deep if isinstance(m, torch.nn.Linear)] + [model.head]
    return [layer.weight.detach().numpy().T.astype(np.float64) for layer in layers]


@pytest.mark.parametrize(("kind", "divide", "sparse_scale", "dense_scale"), [
    ("hybrid", False, 1.0, 1.0),
    ("hybrid", True, 1 / W, 1.0),      # rows through the PS: / W; dense through AllReduce
    ("cache", True, 1 / W, 1.0),       # HET's cache path is the PS path
    ("allreduce", True, 1.0, 1.0),     # rows all-gathered, local SGD: no division
    ("ps", True, 1 / W, 1 / W),        # dense through the PS too (its first step is not stale)
    ("ps", False, 1.0, 1.0),
])
def test_one_iteration_is_hetus_step(kind: str, divide: bool, sparse_scale: float,
                                     dense_scale: float) -> None:
    split = _batch()
    tr = _trainer(kind, divide)
    before = _weights(tr.model)
    table = tr.store.table().astype(np.float64)
    want_w, want_table = _hand_step(before, table, split, LR * dense_scale, LR * sparse_scale)
    tr.step(split, 0)
    for got, want in zip(_weights(tr.model), want_w):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(tr.store.table(), want_table, rtol=1e-5, atol=1e-7)
    # and the rows really moved by the step: the formula is not trivially met
    assert np.abs(tr.store.table() - table).max() > 1e-4


def test_the_workbench_recipe_moves_a_row_by_the_per_sample_gradient() -> None:
    """Our choice, for contrast: a row moves by ``lr x dl_i/de`` (b_w times Hetu's)."""
    split = _batch()
    cfg = ModelConfig(name="wdl", embedding_dim=D, deep_mlp=[5, 5], batch_size=B, lr_dense=LR,
                      lr_sparse=LR, optimizer="sgd")
    tr = Trainer(ModelSpec(cfg, N_DENSE, F, ROWS), SystemSpec("h", "hybrid"),
                 ClusterSetup(ClusterConfig(workers=W, compute="flops")), seed=7)
    table = tr.store.table().astype(np.float64)
    head = tr.model.head.weight.detach().numpy()[0]         # WDL: concat(deep, flatten(e))
    deep = tr.model.deep(torch.from_numpy(split.dense)).detach().numpy()
    e = table[split.keys].reshape(B, -1)
    z = np.concatenate([deep, e], axis=1) @ head + tr.model.head.bias.item()
    g_e = (1.0 / (1.0 + np.exp(-z)) - split.labels)[:, None] * head[-F * D:][None, :]
    want = table.copy()
    np.add.at(want, split.keys.ravel(), -LR * g_e.reshape(-1, D))
    tr.step(split, 0)
    np.testing.assert_allclose(tr.store.table(), want, rtol=1e-5, atol=1e-7)


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 8), st.integers(1, 512), st.floats(1e-4, 1.0), st.booleans())
def test_hetu_units(workers: int, per_worker: int, lr: float, divide: bool) -> None:
    """A workbench rate's move equals the hetu rate it converts to: lr = r / b_w (hetu)."""
    converted = hetu_units("workbench", lr, per_worker, workers)
    assert converted / per_worker == pytest.approx(lr)            # same move per occurrence
    hetu = hetu_units("hetu", lr, per_worker, workers, divide)
    assert hetu == pytest.approx(lr / workers if divide else lr)


def test_the_models_are_hetus_shape_and_draw() -> None:
    """HET's WDL has 137.98K dense parameters at D = 128 (no biases); every weight is drawn
    from N(0, init_scale^2); no bias but DCN's cross layers'; the towers end without ReLU."""
    wdl = ModelConfig(name="wdl", embedding_dim=128, recipe="hetu", optimizer="sgd",
                      init_scale=0.01)
    torch.manual_seed(0)
    model = build_model(wdl, 13, 26)
    assert dense_parameter_count(model) == 137_984
    assert not isinstance(list(model.deep)[-1], torch.nn.ReLU)
    draws = torch.cat([p.detach().flatten() for p in model.parameters()]).numpy()
    assert abs(draws.std() - 0.01) < 2e-4 and abs(draws.mean()) < 2e-4
    for name, deep in (("deepfm", [256, 256]), ("dcn", [256, 256, 256])):
        cfg = ModelConfig(name=name, embedding_dim=16, recipe="hetu", optimizer="sgd",
                          deep_mlp=deep)
        built = build_model(cfg, 13, 26)
        biases = [n for n, _ in built.named_parameters() if n.endswith("bias")]
        assert biases == (["cross.bias"] if name == "dcn" else [])
        assert not isinstance(list(built.deep)[-1], torch.nn.ReLU)
        assert built(torch.randn(3, 13), torch.randn(3, 26, cfg.row_width)).shape == (3,)
    assert ModelConfig(name="deepfm", recipe="hetu", optimizer="sgd").row_width == 17


def test_hetu_deepfm_first_order_column_is_a_table_of_width_one() -> None:
    """The last column of a DeepFM row is Hetu's ``Embedding1``: it enters the logit as a sum."""
    cfg = ModelConfig(name="deepfm", embedding_dim=4, deep_mlp=[8], recipe="hetu",
                      optimizer="sgd")
    model = build_model(cfg, 2, 3)
    emb = torch.randn(5, 3, 5)
    shifted = emb.clone()
    shifted[:, 1, 4] += 0.25
    delta = model(torch.zeros(5, 2), shifted) - model(torch.zeros(5, 2), emb)
    torch.testing.assert_close(delta, torch.full((5,), 0.25))


def test_hetu_runs_through_fit_with_hetus_auc() -> None:
    rng = np.random.default_rng(1)
    n = 6 * 40
    keys = rng.integers(0, ROWS, size=(n, F))
    labels = (keys[:, 0] % 2).astype(np.float32)
    split = Split(rng.normal(size=(n, N_DENSE)).astype(np.float32), keys, labels)
    tr = _trainer("cache", divide=False, bound=1)
    metrics = tr.fit(split, split, eval_every=20)
    assert {"test_auc", "test_auc_pooled"} <= set(metrics.columns)
    logits = tr.predict(split)
    assert metrics["test_auc"].iloc[-1] == batched_auc(labels, logits, 128)
    assert metrics["test_auc_pooled"].iloc[-1] == auc_score(labels, logits)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 5), st.integers(2, 40), st.integers(0, 2**31 - 1))
def test_batched_auc_is_the_mean_of_per_batch_pair_counts(batches: int, batch: int,
                                                         seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = batches * batch + int(rng.integers(0, batch))          # a partial batch: dropped
    labels = rng.integers(0, 2, n)
    scores = rng.integers(0, 5, n).astype(float)              # ties
    per = []
    for b in range(batches):
        y, s = labels[b * batch:(b + 1) * batch], scores[b * batch:(b + 1) * batch]
        pos, neg = s[y == 1], s[y == 0]
        if len(pos) and len(neg):
            wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
            per.append(wins / (len(pos) * len(neg)))
    got = batched_auc(labels, scores, batch)
    assert (np.isnan(got) and not per) or got == pytest.approx(np.mean(per))


def test_the_recipe_is_checked() -> None:
    with pytest.raises(ConfigError, match="optimizer=sgd"):
        ModelConfig(name="wdl", recipe="hetu")
    with pytest.raises(ConfigError, match="defines wdl, deepfm, dcn only"):
        ModelConfig(name="dlrm", recipe="hetu", optimizer="sgd")
    with pytest.raises(ConfigError, match="set recipe=hetu"):
        ModelConfig(name="wdl", divide_by_workers=True)


def test_the_docstrings_say_what_the_code_does() -> None:
    """The trainer no longer calls its row step HET's; both name the recipe module, whose
    formulas this file checks; the recipe module's table names every recipe."""
    doc = inspect.getdoc(trainer_module) or ""
    assert "as HET's cache path does" not in doc
    assert "workbench.models.recipe" in doc and "lr_sparse / b_w" in doc
    table = inspect.getdoc(recipe_module) or ""
    assert re.search(r"\|\s*``workbench``.*\|\s*``hetu``", table)
    assert "sum_w mean_{i in w} l_i" in table and "-lr_sparse * (1/b_w) dl_i/de" in table
    # the docstring's HET-units example is what hetu_units computes
    assert "0.01 at ``b_w = 128`` is 1.28" in table
    assert hetu_units("workbench", 0.01, 128, 8) == pytest.approx(1.28)


HETU = Path(__file__).parent / "reference" / "hetu"

#: (commit, file, line, text on that line): what workbench/models/recipe.py cites.
CITATIONS = [
    ("a1cb1bc", "examples/ctr/models/wdl_criteo.py", 11, "learning_rate = 0.01"),
    ("a1cb1bc", "examples/ctr/models/wdl_criteo.py", 13, "stddev=0.01"),
    ("a1cb1bc", "examples/ctr/models/wdl_criteo.py", 31, "y3 = ht.matmul_op(relu2, W3)"),
    ("a1cb1bc", "examples/ctr/models/wdl_criteo.py", 33, "concat_op(sparse_input, y3"),
    ("a1cb1bc", "examples/ctr/models/wdl_criteo.py", 38, "reduce_mean_op(loss, [0])"),
    ("a1cb1bc", "examples/ctr/models/wdl_criteo.py", 39, "SGDOptimizer"),
    ("a1cb1bc", "examples/ctr/models/deepfm_criteo.py", 15, "[feature_dimension, 1]"),
    ("a1cb1bc", "examples/ctr/models/deepfm_criteo.py", 16, "FM_W = init.random_normal([13, 1]"),
    ("a1cb1bc", "examples/ctr/models/deepfm_criteo.py", 39,
     "array_reshape_op(sparse_2dim_input"),
    ("a1cb1bc", "examples/ctr/models/deepfm_criteo.py", 42, "W3 = init.random_normal([256, 1]"),
    ("a1cb1bc", "examples/ctr/models/dcn_criteo.py", 15, "bias = init.random_normal"),
    ("a1cb1bc", "examples/ctr/models/dcn_criteo.py", 32, "learning_rate = 0.003"),
    ("a1cb1bc", "examples/ctr/models/dcn_criteo.py", 39, "concat_op(sparse_input, dense_input"),
    ("a1cb1bc", "examples/ctr/models/dcn_criteo.py", 57, "y3 = ht.matmul_op(relu2, W3)"),
    ("a1cb1bc", "examples/ctr/run_hetu.py", 58, "roc_auc_score"),
    ("a1cb1bc", "examples/ctr/run_hetu.py", 60, "np.mean(test_auc)"),
    ("a1cb1bc", "examples/ctr/run_hetu.py", 62, "batch_size = 128"),
    ("a1cb1bc", "python/hetu/dataloader.py", 126, "drop_last=True"),
    ("a1cb1bc", "python/hetu/optimizer.py", 173, "allreduceCommunicate_op"),
    ("a1cb1bc", "python/hetu/optimizer.py", 178, "parameterServerCommunicate_op"),
    ("a1cb1bc", "python/hetu/gpu_ops/AllReduceCommunicate.py", 44, "ncclRedOp_t.ncclSum"),
    ("a1cb1bc", "python/hetu/gpu_ops/ParameterServerCommunicate.py", 25,
     "self.learning_rate = -optimizer[1][0]"),
    ("a1cb1bc", "python/hetu/gpu_ops/ParameterServerCommunicate.py", 60,
     "input_val.values.asnumpy() * self.learning_rate"),
    ("149095d", "python/hetu/gpu_ops/ParameterServerCommunicate.py", 24,
     "self.learning_rate = -optimizer[1][0] / \\"),
    ("149095d", "python/hetu/gpu_ops/ParameterServerCommunicate.py", 25,
     "int(os.environ['DMLC_NUM_WORKER'])"),
]


@pytest.mark.parametrize(("commit", "path", "line", "text"), CITATIONS,
                         ids=[f"{c[1].rsplit('/', 1)[-1]}:{c[2]}" for c in CITATIONS])
def test_every_cited_line_says_what_the_recipe_says_it_does(commit: str, path: str, line: int,
                                                             text: str) -> None:
    source = (HETU / commit / f"{path}.txt").read_text().splitlines()
    assert text in source[line - 1], f"{commit}:{path}:{line} is {source[line - 1]!r}"
    doc = inspect.getdoc(recipe_module) or ""
    name = path.rsplit("/", 1)[-1]
    assert name in doc, f"{name} is not cited by workbench/models/recipe.py"
    # the rest of each bullet that cites it
    cited = "".join(re.findall(rf"{re.escape(name)}``(.*?)(?=\n\* |\n\n|$)", doc, re.S))
    spans = [(int(a), int(b or a)) for group in re.findall(r"\(([^()]*)\)", cited)
             for a, b in re.findall(r"\b(\d+)(?:-(\d+))?\b", group)]
    assert any(a <= line <= b for a, b in spans), f"{name} line {line} is not cited: {spans}"
