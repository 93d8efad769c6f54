"""The CTR models (``workbench.models``: ``ctr`` and ``layers``) against brute-force formulas and
hand-worked counts.

Each operator (DLRM's dot interaction, DeepFM's FM term, DCN's cross layer) is recomputed here
with explicit Python loops; FLOP and parameter counts are written out by hand for a tiny DLRM;
every model must learn a separable synthetic problem.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from workbench.models.config import ModelConfig
from workbench.models.ctr import (
    DCN,
    DLRM,
    WDL,
    DeepFM,
    build_model,
    dense_parameter_count,
    flops_per_sample,
)
from workbench.models.layers import MLP, CrossNet, DotInteraction, FactorizationMachine

NAMES = ["dlrm", "wdl", "deepfm", "dcn"]
CLASSES = {"dlrm": DLRM, "wdl": WDL, "deepfm": DeepFM, "dcn": DCN}


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny tensors: intra-op threads only add synchronisation (and, on a busy machine, stalls of
    seconds); one thread also keeps the float reduction order, hence the losses, reproducible."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _cfg(name: str, dim: int = 4, **overrides) -> ModelConfig:
    """A tiny configuration (the defaults are laptop-sized, far too big for unit tests)."""
    sizes = dict(bottom_mlp=[8, 6], top_mlp=[8], deep_mlp=[8, 6], cross_layers=2)
    sizes.update(overrides)
    return ModelConfig(name=name, embedding_dim=dim, **sizes)


def _inputs(batch: int, n_dense: int, n_sparse: int, dim: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    dense = torch.randn(batch, n_dense, generator=g)
    emb = torch.randn(batch, n_sparse, dim, generator=g)
    return dense, emb.requires_grad_(True)


# --------------------------------------------------------------------------------------------
# Shapes and gradients
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("n_dense, n_sparse", [(3, 4), (0, 4), (3, 1), (0, 1)])
def test_shape_and_gradients(name: str, n_dense: int, n_sparse: int) -> None:
    if name == "dlrm" and n_dense == 0 and n_sparse == 1:
        pytest.skip("no interaction pairs: rejected, see test_dlrm_needs_a_pair")
    torch.manual_seed(0)
    dim = 4
    model = build_model(_cfg(name, dim), n_dense, n_sparse)
    assert isinstance(model, CLASSES[name])
    dense, emb = _inputs(5, n_dense, n_sparse, dim)
    out = model(dense, emb)
    assert out.shape == (5,)
    F.binary_cross_entropy_with_logits(out, torch.tensor([0., 1., 1., 0., 1.])).backward()
    assert emb.grad is not None and emb.grad.shape == emb.shape
    assert emb.grad.abs().sum() > 0
    for pname, p in model.named_parameters():
        assert p.grad is not None, pname
        assert torch.isfinite(p.grad).all(), pname
        assert p.grad.abs().sum() > 0, pname


@pytest.mark.parametrize("name", NAMES)
def test_dense_none_when_no_dense_features(name: str) -> None:
    torch.manual_seed(0)
    model = build_model(_cfg(name), 0, 3)
    dense, emb = _inputs(2, 0, 3, 4)
    torch.testing.assert_close(model(None, emb), model(dense, emb))


@pytest.mark.parametrize("name", NAMES)
def test_bad_input_shapes_are_rejected(name: str) -> None:
    model = build_model(_cfg(name), 3, 2)
    dense, emb = _inputs(2, 3, 2, 4)
    with pytest.raises(ValueError, match="emb has shape"):
        model(dense, emb[:, :1])
    with pytest.raises(ValueError, match="emb has shape"):
        model(dense, emb[:, :, :3])
    with pytest.raises(ValueError, match="dense has shape"):
        model(dense[:, :2], emb)
    with pytest.raises(ValueError, match="dense is None"):
        model(None, emb)


def test_dlrm_needs_a_pair() -> None:
    with pytest.raises(ValueError, match="n_sparse >= 2"):
        build_model(_cfg("dlrm"), 0, 1)


@pytest.mark.parametrize("name", NAMES)
def test_init_is_deterministic_given_the_seed(name: str) -> None:
    torch.manual_seed(7)
    a = build_model(_cfg(name), 3, 2).state_dict()
    torch.manual_seed(7)
    b = build_model(_cfg(name), 3, 2).state_dict()
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0)


# --------------------------------------------------------------------------------------------
# Operators against brute force
# --------------------------------------------------------------------------------------------

def _dot(u: torch.Tensor, v: torch.Tensor) -> float:
    return sum(float(u[k]) * float(v[k]) for k in range(len(u)))


@pytest.mark.parametrize("n_dense", [2, 0])
@torch.no_grad()
def test_dlrm_interaction_brute_force(n_dense: int) -> None:
    """Columns in row-major order of the strictly upper triangle over (z, e_1, ..., e_F):
    (0,1), (0,2), (0,3), (1,2), (1,3), (2,3) for F = 3 with a dense vector z (index 0)."""
    torch.manual_seed(0)
    n_sparse, dim = 3, 2
    model = DLRM(n_dense, n_sparse, dim, [5], [4]).double()
    g = torch.Generator().manual_seed(1)
    dense = torch.randn(2, n_dense, generator=g, dtype=torch.float64)
    emb = torch.randn(2, n_sparse, dim, generator=g, dtype=torch.float64)
    for b in range(2):
        if n_dense:
            z = model.dense_arch(dense[b:b + 1])[0]
            vectors = [z] + [emb[b, f] for f in range(n_sparse)]
        else:
            vectors = [emb[b, f] for f in range(n_sparse)]
        n = len(vectors)
        expected_pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
        assert model.interaction_arch.pairs == expected_pairs
        brute = torch.tensor([_dot(vectors[i], vectors[j]) for i, j in expected_pairs],
                             dtype=torch.float64)
        got = model.interaction_arch(torch.stack(vectors).unsqueeze(0))[0]
        torch.testing.assert_close(got, brute)
        # The whole forward: top MLP over concat(z, interactions) (interactions only if no z).
        top_in = torch.cat([vectors[0], brute]) if n_dense else brute
        torch.testing.assert_close(model(dense[b:b + 1], emb[b:b + 1])[0],
                                   model.over_arch(top_in.unsqueeze(0))[0, 0])
    if n_dense:
        assert model.interaction_arch.pairs == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]


def test_dot_interaction_example() -> None:
    v = torch.arange(6.0).reshape(1, 3, 2)                 # rows (0,1), (2,3), (4,5)
    torch.testing.assert_close(DotInteraction(3)(v), torch.tensor([[3., 5., 23.]]))


def test_fm_brute_force() -> None:
    g = torch.Generator().manual_seed(2)
    emb = torch.randn(3, 4, 5, generator=g, dtype=torch.float64)
    fm = FactorizationMachine()(emb)
    for b in range(3):
        brute = sum(_dot(emb[b, f], emb[b, h]) for f in range(4) for h in range(f + 1, 4))
        assert float(fm[b]) == pytest.approx(brute, rel=1e-12, abs=1e-12)


def test_deepfm_is_the_sum_of_its_parts() -> None:
    torch.manual_seed(0)
    model = DeepFM(2, 3, 4, [6])
    dense, emb = _inputs(4, 2, 3, 4)
    x0 = torch.cat([dense, emb.flatten(1)], dim=1)
    expected = model.first_order(x0)[:, 0] + FactorizationMachine()(emb) + model.deep(x0)[:, 0]
    torch.testing.assert_close(model(dense, emb), expected)


def test_wdl_is_hets_deep_over_dense_plus_linear_head() -> None:
    torch.manual_seed(0)
    model = WDL(2, 3, 4, [6])
    dense, emb = _inputs(4, 2, 3, 4)
    deep = torch.relu(model.deep[0](dense))
    expected = model.head(torch.cat([deep, emb.flatten(1)], dim=1))[:, 0]
    torch.testing.assert_close(model(dense, emb), expected)
    # HET's WDL at D = 128 (Appendix Table 3: 137.98K dense parameters):
    # weights 13*256 + 2*256*256 + (256 + 26*128) = 137,984, + head bias 1 = 137,985;
    # our hidden layers also carry 3 x 256 biases.
    het = WDL(13, 26, 128, [256, 256, 256])
    assert dense_parameter_count(het) == 137_985 + 3 * 256


def test_dcn_cross_layer_explicit_loops() -> None:
    torch.manual_seed(0)
    width, layers = 5, 3
    cross = CrossNet(width, layers).double()
    with torch.no_grad():
        cross.bias.normal_()                               # zeros by default: make it matter
    g = torch.Generator().manual_seed(3)
    x0 = torch.randn(2, width, generator=g, dtype=torch.float64)
    got = cross(x0)
    w, bias = cross.weight.detach(), cross.bias.detach()
    for b in range(2):
        x = [float(x0[b, k]) for k in range(width)]
        for layer in range(layers):
            s = sum(x[k] * float(w[layer, k]) for k in range(width))          # x_l . w_l
            x = [float(x0[b, k]) * s + float(bias[layer, k]) + x[k] for k in range(width)]
        assert got[b].tolist() == pytest.approx(x, rel=1e-12, abs=1e-12)


def test_dcn_head_over_cross_and_deep() -> None:
    torch.manual_seed(0)
    model = DCN(2, 3, 4, [6], 2)
    dense, emb = _inputs(4, 2, 3, 4)
    x0 = torch.cat([dense, emb.flatten(1)], dim=1)
    expected = model.head(torch.cat([model.cross(x0), model.deep(x0)], dim=1))[:, 0]
    torch.testing.assert_close(model(dense, emb), expected)
    # No deep layers: h = x0; no cross layers: x_L = x0.
    bare = DCN(2, 3, 4, [], 0)
    torch.testing.assert_close(bare(dense, emb), bare.head(torch.cat([x0, x0], dim=1))[:, 0])


def test_mlp_layout() -> None:
    mlp = MLP(3, [4, 2], last_activation=True)
    assert [type(m) for m in mlp] == [nn.Linear, nn.ReLU, nn.Linear, nn.ReLU]
    assert (mlp.in_features, mlp.out_features) == (3, 2)
    assert [type(m) for m in MLP(3, [4, 1])] == [nn.Linear, nn.ReLU, nn.Linear]
    assert MLP(3, []).out_features == 3


# --------------------------------------------------------------------------------------------
# Construction and accounting
# --------------------------------------------------------------------------------------------

def test_build_model_rejects_unknown_name_and_no_features() -> None:
    bad = dataclasses.replace(ModelConfig(), name="transformer")
    with pytest.raises(ValueError, match="'transformer': unknown.*dcn, deepfm, dlrm, wdl"):
        build_model(bad, 13, 26)
    with pytest.raises(ValueError, match="n_sparse = 0"):
        build_model(ModelConfig(), 13, 0)


def test_default_dlrm_matches_facebookresearch_criteo_layout() -> None:
    """bottom 13-512-256-64-16, top (16 + 27*26/2 = 367)-512-256-1."""
    model = build_model(ModelConfig(name="dlrm"), 13, 26)

    def sizes(mlp: nn.Module) -> list[tuple[int, int]]:
        return [(m.in_features, m.out_features) for m in mlp if isinstance(m, nn.Linear)]

    assert sizes(model.dense_arch) == [(13, 512), (512, 256), (256, 64), (64, 16)]
    assert sizes(model.over_arch) == [(367, 512), (512, 256), (256, 1)]


def _tiny_dlrm() -> DLRM:
    return DLRM(n_dense=2, n_sparse=3, embedding_dim=4, bottom_mlp=[8], top_mlp=[6])


def test_flops_tiny_dlrm_by_hand() -> None:
    # bottom 2 -> 8 -> 4:       2*2*8 + 2*8*4        = 32 + 64 = 96
    # interaction n = 3 + 1:    n(n-1)/2 = 6 pairs * 2*D = 6 * 8 = 48
    # top (4 + 6 = 10) -> 6 -> 1: 2*10*6 + 2*6*1     = 120 + 12 = 132
    assert flops_per_sample(_tiny_dlrm(), 2, 3, 4) == 96 + 48 + 132 == 276
    # No dense: interaction of F = 3 vectors (3 pairs * 8 = 24), top 3 -> 6 -> 1 (36 + 12).
    assert flops_per_sample(DLRM(0, 3, 4, [8], [6]), 0, 3, 4) == 24 + 36 + 12


def test_flops_operator_terms_by_hand() -> None:
    # DeepFM n_dense=2, F=3, D=4 (x0 width 14), deep [6]:
    #   first order 2*14*1 = 28; deep 2*14*6 + 2*6*1 = 168 + 12 = 180; FM 3*F*D + 3*D = 36 + 12.
    assert flops_per_sample(DeepFM(2, 3, 4, [6]), 2, 3, 4) == 28 + 180 + 48
    # WDL: deep 2 -> 6 (2*2*6 = 24); head (6 + 12) -> 1 (2*18 = 36).
    assert flops_per_sample(WDL(2, 3, 4, [6]), 2, 3, 4) == 24 + 36
    # DCN, 2 cross layers: 4*14 each = 112; deep 2*14*6 = 168 (ReLU output, no logit layer);
    # head (14 + 6) -> 1 = 40.
    assert flops_per_sample(DCN(2, 3, 4, [6], 2), 2, 3, 4) == 112 + 168 + 40


@pytest.mark.parametrize("name", NAMES)
def test_linear_flops_agree_with_torch_flop_counter(name: str) -> None:
    """torch's counter sees the Linear layers as addmm (2*in*out per sample, no bias), plus
    DLRM's full Gram matrix bmm (n*n*2D, where the operator count keeps the n(n-1)/2 pairs)."""
    model = build_model(_cfg(name), 3, 4)
    dense, emb = _inputs(1, 3, 4, 4)
    with FlopCounterMode(display=False) as counter:
        model(dense, emb)
    counts = {str(op): n for op, n in counter.get_flop_counts()["Global"].items()}
    ours = flops_per_sample(model, 3, 4, 4)
    assert counts["aten.addmm"] == ours - model.operator_flops()
    if name == "dlrm":
        n = 5
        assert counts["aten.bmm"] == n * n * 2 * 4
        assert model.operator_flops() == n * (n - 1) // 2 * 2 * 4


def test_flops_rejects_mismatched_sizes() -> None:
    with pytest.raises(ValueError, match="was built for"):
        flops_per_sample(_tiny_dlrm(), 2, 4, 4)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(name=st.sampled_from(NAMES), which=st.sampled_from(["bottom_mlp", "top_mlp", "deep_mlp"]),
       widths=st.lists(st.integers(1, 12), min_size=1, max_size=3),
       layer=st.integers(0, 2), extra=st.integers(1, 5))
def test_flops_monotone_in_widths(name: str, which: str, widths: list[int], layer: int,
                                  extra: int) -> None:
    layer %= len(widths)
    wider = list(widths)
    wider[layer] += extra
    base = flops_per_sample(build_model(_cfg(name, **{which: widths}), 3, 4), 3, 4, 4)
    more = flops_per_sample(build_model(_cfg(name, **{which: wider}), 3, 4), 3, 4, 4)
    uses = {"dlrm": ("bottom_mlp", "top_mlp")}.get(name, ("deep_mlp",))
    if which in uses:
        assert more > base
    else:
        assert more == base


@pytest.mark.parametrize("name", NAMES)
def test_flops_monotone_in_embedding_dim_and_cross_layers(name: str) -> None:
    counts = [flops_per_sample(build_model(_cfg(name, dim), 3, 4), 3, 4, dim)
              for dim in (2, 4, 8)]
    assert counts[0] < counts[1] < counts[2]
    layers = [flops_per_sample(build_model(_cfg(name, cross_layers=c), 3, 4), 3, 4, 4)
              for c in (0, 1, 3)]
    assert layers[0] < layers[1] < layers[2] if name == "dcn" else len(set(layers)) == 1


def test_dense_parameter_count() -> None:
    model = _tiny_dlrm()
    # bottom (2*8 + 8) + (8*4 + 4) = 24 + 36; top (10*6 + 6) + (6*1 + 1) = 66 + 7.
    assert dense_parameter_count(model) == 60 + 73
    for name in NAMES:
        model = build_model(_cfg(name), 3, 4)
        assert dense_parameter_count(model) == sum(p.numel() for p in model.parameters())
    # DCN's cross layers: w_l and b_l, 2 * d per layer (d = 3 + 4*4 = 19).
    assert dense_parameter_count(build_model(_cfg("dcn", cross_layers=3), 3, 4)) \
        - dense_parameter_count(build_model(_cfg("dcn", cross_layers=0), 3, 4)) == 3 * 2 * 19


# --------------------------------------------------------------------------------------------
# Learnability
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_learns_a_separable_problem(name: str) -> None:
    """label = [w . flatten(emb) > 0] for a fixed w; 200 full-batch Adam steps halve the loss.

    Three dense features of noise are given to every model: DLRM sees the embeddings only through
    dot products, and needs its bottom-MLP vector z to express a function linear in emb.
    """
    g = torch.Generator().manual_seed(0)
    n, n_sparse, dim = 512, 4, 4
    emb = torch.randn(n, n_sparse, dim, generator=g)
    dense = torch.randn(n, 3, generator=g)
    w = torch.randn(n_sparse * dim, generator=g)
    labels = (emb.flatten(1) @ w > 0).float()
    torch.manual_seed(0)
    model = build_model(_cfg(name, dim, bottom_mlp=[16], top_mlp=[16], deep_mlp=[16, 16]),
                        3, n_sparse)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(200):
        loss = F.binary_cross_entropy_with_logits(model(dense, emb), labels)
        losses.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert losses[-1] < 0.5 * losses[0], (losses[0], losses[-1])
