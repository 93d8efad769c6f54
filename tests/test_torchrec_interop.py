"""TorchRec interop: the install check, KJT and IKJT round trips through TorchRec's own
KeyedJaggedTensor, and an IKJT through TorchRec's EmbeddingBagCollection.

``make test`` installs TorchRec (``make torchrec``), and in CI (``CI=true``) the tests require the
full package: a missing or mismatched install fails there instead of skipping. Elsewhere they
skip without TorchRec (the message gives the install command); where TorchRec is installed but
its package does not load, the KJT tests load TorchRec's KJT module alone (pure torch when offsets
are given) and test against its class.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.sparse import torchrec_interop as tri
from workbench.sparse.dedup import to_ikjt
from workbench.sparse.jagged_tensor import KeyedJaggedTensor
from workbench.utils import torchrec as wtr


def _kjt_module_alone() -> Any:
    spec = importlib.util.find_spec("torchrec")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"TorchRec is not installed: {wtr.INSTALL}")
    root = Path(next(iter(spec.submodule_search_locations)))
    saved = {n: sys.modules.get(n) for n in ("torchrec", "torchrec.sparse", "torchrec.pt2")}
    try:
        for name, sub in (("torchrec", ""), ("torchrec.sparse", "sparse"),
                          ("torchrec.pt2", "pt2")):
            package = types.ModuleType(name)
            package.__path__ = [str(root / sub)]
            sys.modules[name] = package
        return importlib.import_module("torchrec.sparse.jagged_tensor")
    finally:  # the loaded module keeps its own references; the empty parents go
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


_CI = os.environ.get("CI", "").lower() == "true"
_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def torchrec_package() -> Any:
    """The full ``torchrec`` package, checked by `check_install` (CI: required, else skip)."""
    try:
        wtr.check_install()
    except wtr.TorchRecUnavailable as err:
        if _CI:
            pytest.fail(f"CI runs the interop tests against the full package: {err}")
        pytest.skip(str(err))
    return importlib.import_module("torchrec")


@pytest.fixture(scope="module")
def trkjt() -> type:
    """TorchRec's KeyedJaggedTensor class (the package's, or its module's alone)."""
    if _CI:  # the full package, never the one-module fallback
        wtr.check_install()
    try:
        return tri.torchrec_kjt_class()
    except wtr.TorchRecUnavailable as err:
        if "not installed" in str(err):
            pytest.skip(str(err))
    return _kjt_module_alone().KeyedJaggedTensor  # type: ignore[no-any-return]


lists = st.lists(st.lists(st.integers(0, 2**40), max_size=4), min_size=1, max_size=6)


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), lists, min_size=1),
       st.booleans())
def test_a_kjt_round_trip_through_torchrec_is_identical(trkjt: type, data: dict, weighted: bool
                                                        ) -> None:
    batch = min(len(v) for v in data.values())
    kjt = KeyedJaggedTensor.from_dict({k: v[:batch] for k, v in data.items()})
    weights = (np.arange(kjt.num_values(), dtype=np.float32) / 7 if weighted else None)
    theirs = tri.to_torchrec(kjt, weights, kjt_class=trkjt)
    assert isinstance(theirs, trkjt) and theirs.keys() == kjt.keys()
    assert theirs.stride() == kjt.batch_size
    assert torch.equal(theirs.values(), torch.from_numpy(kjt.values()))
    assert torch.equal(theirs.lengths(), torch.from_numpy(kjt.lengths()))
    assert torch.equal(theirs.offsets(), torch.from_numpy(kjt.offsets()))
    back = tri.from_torchrec(theirs)
    assert back.kjt == kjt and back.kjt.to_dict() == kjt.to_dict()
    if weighted:
        assert back.weights is not None and np.array_equal(back.weights, weights)
    else:
        assert back.weights is None


def test_an_ikjt_converts_expanded_or_kept_deduplicated(trkjt: type) -> None:
    kjt = KeyedJaggedTensor.from_dict({"b": [[3, 4, 5], [4, 5, 6], [3, 4, 5]],
                                       "c": [[7, 8], [7, 8], [10]], "d": [[9], [9], [11]],
                                       "e": [[1], [2], [3]]})
    groups = [["b"], ["c", "d"], ["e"]]
    ikjt = to_ikjt(kjt, groups)
    expanded = tri.to_torchrec(ikjt.expand(), kjt_class=trkjt)
    assert tri.from_torchrec(expanded).kjt == kjt
    kept = tri.ikjt_to_torchrec(ikjt, kjt_class=trkjt)
    assert kept.variable_stride_per_key()
    assert kept.stride_per_key_per_rank() == [[2], [2], [2], [3]]
    keys, inverse = kept.inverse_indices()
    assert keys == ["b", "c", "d", "e"]
    assert inverse.tolist() == [[0, 1, 0], [0, 0, 1], [0, 0, 1], [0, 1, 2]]
    assert kept.values().numel() == ikjt.num_values() < kjt.num_values()
    same = tri.ikjt_from_torchrec(kept, groups)
    assert same.groups == ikjt.groups and same.expand() == kjt
    for k in kjt.keys():
        assert np.array_equal(same.values(k), ikjt.values(k))
        assert np.array_equal(same.inverse_lookup(k), ikjt.inverse_lookup(k))
    inferred = tri.ikjt_from_torchrec(kept)  # the keys sharing an inverse row are one group
    assert inferred.groups == (("b",), ("c", "d"), ("e",)) and inferred.expand() == kjt
    with pytest.raises(ValueError, match="no single batch size"):
        tri.from_torchrec(kept)
    with pytest.raises(ValueError, match="not deduplicated"):
        tri.ikjt_from_torchrec(expanded)
    with pytest.raises(ValueError, match="different inverse_indices rows"):
        tri.ikjt_from_torchrec(kept, [["b", "c", "d"], ["e"]])
    with pytest.raises(ValueError, match="one per value"):
        tri.to_torchrec(kjt, np.ones(3), kjt_class=trkjt)


def test_without_torchrec_the_error_gives_the_install_command(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torchrec", None)  # import torchrec fails: not found
    monkeypatch.delitem(sys.modules, "torchrec.sparse", raising=False)
    monkeypatch.delitem(sys.modules, "torchrec.sparse.jagged_tensor", raising=False)
    with pytest.raises(wtr.TorchRecUnavailable, match=r"make torchrec \(or: pip install "
                       r"'workbench\[torchrec\]' && pip install --no-deps 'torchrec==1\.8\.0'"):
        tri.torchrec_kjt_class()


def test_the_install_pins_the_pair_of_fbgemms_own_table() -> None:
    """pyproject's extra names the CPU build whose release number is torchrec's, and no CUDA one."""
    text = (_ROOT / "pyproject.toml").read_text()
    extra = re.search(r"^torchrec = \[(.*?)\]", text, re.S | re.M)
    assert extra is not None
    pins = dict(re.findall(r'"([a-z-]+)==([0-9.]+)"', extra.group(1)))
    assert "fbgemm-gpu" not in pins and "torchrec" not in pins  # torchrec: --no-deps, after it
    assert pins["fbgemm-gpu-cpu"] == wtr.TORCHREC.split("==")[1]
    torch_pin = re.search(r'"torch==([0-9.]+)"', text)
    assert torch_pin is not None and torch_pin.group(1).startswith("2.13")
    made = subprocess.run([sys.executable, "-m", "workbench.utils.torchrec", "--pin"],
                          capture_output=True, text=True, check=True, cwd=_ROOT)
    assert made.stdout.strip() == wtr.TORCHREC  # what make torchrec installs
    assert "workbench.utils.torchrec --pin" in (_ROOT / "Makefile").read_text()


def test_the_check_passes_on_the_installed_pair(torchrec_package: Any) -> None:
    found = wtr.check_install()
    assert found.variant == "cpu" and found.table_torch == "2.13"
    assert found.torch.startswith("2.13") and found.fbgemm.startswith("1.8")
    assert found.torchrec.startswith("1.8")
    assert "pairs fbgemm 1.8 with torch 2.13" in found.line()


def test_the_check_names_a_wrong_install_and_its_fix(torchrec_package: Any,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    fbgemm_gpu = importlib.import_module("fbgemm_gpu")
    with monkeypatch.context() as m:
        m.setattr(fbgemm_gpu, "__variant__", "cuda")
        with pytest.raises(wtr.TorchRecUnavailable, match="the cuda build, not cpu: pip "
                           "uninstall -y fbgemm-gpu fbgemm-gpu-cpu, then make torchrec"):
            wtr.check_install()
    with monkeypatch.context() as m:
        m.setattr(fbgemm_gpu, "_fbgemm_torch_compat_table", {"1.8": "2.12"})
        with pytest.raises(wtr.TorchRecUnavailable, match="pairs with torch 2.12 in its "
                           "compatibility table, this is torch 2.13"):
            wtr.check_install()
    real = wtr._distribution
    with monkeypatch.context() as m:
        m.setattr(wtr, "_distribution", lambda n: "1.9.0" if n == "fbgemm-gpu" else real(n))
        with pytest.raises(wtr.TorchRecUnavailable, match="the CUDA build fbgemm-gpu 1.9.0 is "
                           "installed"):
            wtr.check_install()
    with monkeypatch.context() as m:
        m.setattr(wtr, "_distribution", lambda n: "1.9.2" if n == "torchrec" else real(n))
        with pytest.raises(wtr.TorchRecUnavailable, match="torchrec 1.9.2 does not match "
                           "fbgemm_gpu 1.8"):
            wtr.check_install()
    with monkeypatch.context() as m:
        m.setattr(wtr, "_distribution", lambda n: None if n == "torchrec" else real(n))
        with pytest.raises(wtr.TorchRecUnavailable, match="TorchRec is not installed: make "
                           "torchrec"):
            wtr.check_install()


def test_an_ikjt_through_torchrecs_embedding_bag_collection_equals_the_kjt(
        torchrec_package: Any) -> None:
    """RecD's IKJT, kept deduplicated as TorchRec's variable-batch KJT, pools through TorchRec's
    own EmbeddingBagCollection to exactly the expanded KJT's output, and to the workbench's
    dedup_pooled_lookup on the same weights."""
    from workbench.sparse.lookup import dedup_pooled_lookup

    rng = np.random.default_rng(7)
    batch, rows = 64, 50
    keys, groups = ["u", "h", "i"], [["u", "h"], ["i"]]
    users = rng.integers(0, 8, batch)  # 8 sessions: the user features repeat within one
    data = {"u": [[int(u)] for u in users],
            "h": [[int(u * 3 + j) % rows for j in range(1 + u % 4)] for u in users],
            "i": [[int(x)] for x in rng.integers(0, rows, batch)]}
    kjt = KeyedJaggedTensor.from_dict(data)
    ikjt = to_ikjt(kjt, groups)
    assert ikjt.num_values() < kjt.num_values()
    tr = torchrec_package
    ebc = tr.EmbeddingBagCollection(tables=[
        tr.EmbeddingBagConfig(name=f"t_{k}", embedding_dim=8, num_embeddings=rows,
                              feature_names=[k]) for k in keys], device=torch.device("cpu"))
    expanded = ebc(tri.to_torchrec(ikjt.expand())).to_dict()
    kept = ebc(tri.ikjt_to_torchrec(ikjt)).to_dict()
    for k in keys:
        assert kept[k].shape == (batch, 8)
        assert torch.equal(kept[k], expanded[k])
        weight = ebc.embedding_bags[f"t_{k}"].weight
        ours = dedup_pooled_lookup(weight, ikjt, k)
        assert torch.allclose(ours, kept[k], rtol=0, atol=1e-6)


def test_recd_on_torchrecs_path_trains_the_same_model_on_both_inputs(
        torchrec_package: Any) -> None:
    """Issue 67: RecD's model on TorchRec's own EmbeddingBagCollection gives the same logits
    and the same training losses on TorchRec's KJT and on the IKJT as its variable-batch KJT,
    with TorchRec's dense table gradients and with sparse ones."""
    from workbench.models.torchrec_dlrm import TorchRecDLRM
    from workbench.training.recd_trainer import RecDTrainer

    rng = np.random.default_rng(3)
    batch, rows = 32, 40
    users = rng.integers(0, 6, batch)
    data = {"user": [[int(u)] for u in users],
            "hist": [[int(u * 5 + j) % rows for j in range(1 + u % 3)] for u in users],
            "item": [[int(x)] for x in rng.integers(0, rows, batch)]}
    kjt = KeyedJaggedTensor.from_dict(data)
    ikjt = to_ikjt(kjt, [["user", "hist"], ["item"]])
    dense = torch.from_numpy(rng.normal(size=(batch, 3)).astype(np.float32))
    labels = torch.from_numpy((rng.random(batch) < 0.3).astype(np.float32))
    for sparse in (False, True):
        a, b = (TorchRecDLRM(3, ["user", "item", "hist"], {"user": 6, "item": rows},
                             {"hist": "item"}, 8, [16], [16], seed=0, sparse_gradients=sparse)
                for _ in range(2))
        assert torch.allclose(a(dense, a.batch(kjt)), b(dense, b.batch(ikjt)), atol=1e-6)
        grads = a.ebc.embedding_bags["item"].weight
        ta, tb = RecDTrainer(a, 0.05), RecDTrainer(b, 0.05)
        for _ in range(3):
            assert ta.step(dense, a.batch(kjt), labels) == pytest.approx(
                tb.step(dense, b.batch(ikjt), labels), abs=1e-6)
        assert grads.grad is None or grads.grad.is_sparse == sparse


def test_recd_on_the_fused_tbe_trains_as_torchrecs_ebc_on_every_input(
        torchrec_package: Any) -> None:
    """Issue 67: RecD's model on fbgemm's fused TBE (TorchRec's fused kernel, SGD inside the
    backward) starts from the EBC path's parameters and takes the same SGD steps as the EBC
    with sparse gradients under plain SGD, on the KJT and on the IKJT through both of its
    calls (variable batch, padded): equal losses, logits and tables."""
    from workbench.models.torchrec_dlrm import FusedTBEDLRM, TorchRecDLRM
    from workbench.training.recd_trainer import RecDTrainer

    rng = np.random.default_rng(5)
    batch, rows, lr = 48, 30, 0.1
    users = rng.integers(0, 7, batch)
    data = {"user": [[int(u)] for u in users],
            "hist": [[int(u * 4 + j) % rows for j in range(u % 4)] for u in users],
            "item": [[int(x)] for x in rng.integers(0, rows, batch)]}
    kjt = KeyedJaggedTensor.from_dict(data)
    ikjt = to_ikjt(kjt, [["hist", "user"], ["item"]])  # another key order than the model's
    dense = torch.from_numpy(rng.normal(size=(batch, 3)).astype(np.float32))
    labels = torch.from_numpy((rng.random(batch) < 0.4).astype(np.float32))
    shape = (3, ["user", "item", "hist"], {"user": 7, "item": rows}, {"hist": "item"}, 8,
             [16], [16])
    ebc = TorchRecDLRM(*shape, seed=1, sparse_gradients=True)
    fused = {(call, inputs): FusedTBEDLRM(*shape, seed=1, lr=lr, ikjt_call=call)
             for call in ("variable batch", "padded") for inputs in ("kjt", "ikjt")}
    reference = ebc(dense, ebc.batch(kjt))
    for (_, inputs), model in fused.items():
        x = model.batch(kjt if inputs == "kjt" else ikjt)
        assert torch.allclose(model(dense, x), reference, atol=1e-6)
    trainers = {key: RecDTrainer(m, lr, optimizer="sgd") for key, m in fused.items()}
    base = RecDTrainer(ebc, lr, optimizer="sgd")
    for _ in range(3):
        expected = base.step(dense, ebc.batch(kjt), labels)
        for (_, inputs), trainer in trainers.items():
            x = trainer.model.batch(kjt if inputs == "kjt" else ikjt)
            assert trainer.step(dense, x, labels) == pytest.approx(expected, abs=1e-6)
    tables = [ebc.ebc.embedding_bags[t].weight.detach() for t in ("user", "item")]
    for model in fused.values():
        for ours, theirs in zip(model.tbe.split_embedding_weights(), tables, strict=True):
            assert torch.allclose(ours, theirs, atol=1e-6)
    # the tables are the TBE's: an Adagrad over the model keeps state for the dense part only
    model = next(iter(fused.values()))
    owned = {id(p) for g in RecDTrainer(model, lr).optimizer.param_groups for p in g["params"]}
    assert owned == {id(p) for p in model.dlrm.parameters()}
    assert not owned & {id(p) for p in model.tbe.parameters()}
    with pytest.raises(ValueError, match="ikjt_call"):
        FusedTBEDLRM(*shape, seed=1, lr=lr, ikjt_call="vbe")  # type: ignore[arg-type]


def test_fbgemms_configuration_lines_stay_out_of_the_stage_log(
        torchrec_package: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """A stage's log keeps fbgemm_gpu's warnings but not the ~20 INFO lines it writes on the
    root logger for every TBE built (the recd stage builds dozens)."""
    import logging

    from workbench.models.torchrec_dlrm import FusedTBEDLRM
    from workbench.utils import logs

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        logs.setup("INFO", role="recd")
        logging.getLogger("workbench.test").info("ours stays")
        FusedTBEDLRM(0, ["a", "b"], {"a": 5, "b": 3}, {}, 4, [], [4], seed=0, lr=0.1)
        record = logging.LogRecord("root", logging.WARNING, "/x/fbgemm_gpu/y.py", 1, "kept",
                                   None, None)
        root.handle(record)
        err = capsys.readouterr().err
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    assert "ours stays" in err and "kept" in err
    assert "TBE=" not in err, err[:2000]
