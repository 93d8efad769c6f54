"""TorchRec interop: KJT and IKJT round trips through TorchRec's own KeyedJaggedTensor.

Skips without TorchRec (the message gives the install command). torchrec 1.9.2, the newest on
the index, imports fbgemm_gpu from its package ``__init__``, and fbgemm_gpu 1.9.0's operators do
not load against the pinned torch 2.13 (undefined symbols). TorchRec's KJT module itself is pure
torch when offsets are given, so where the package does not load the tests load that one module
from the installed TorchRec (its parent packages left empty) and test against its class.
"""

from __future__ import annotations

import importlib.util
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
from workbench.sparse.jagged_tensor import KeyedJaggedTensor, to_ikjt


def _kjt_module_alone() -> Any:
    spec = importlib.util.find_spec("torchrec")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"TorchRec is not installed: {tri.INSTALL}")
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


@pytest.fixture(scope="module")
def trkjt() -> type:
    """TorchRec's KeyedJaggedTensor class (the package's, or its module's alone)."""
    try:
        return tri.torchrec_kjt_class()
    except tri.TorchRecUnavailable as err:
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
    with pytest.raises(tri.TorchRecUnavailable, match=r"pip install 'workbench\[torchrec\]'"):
        tri.torchrec_kjt_class()
