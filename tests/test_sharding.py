"""The sharding layer (FlexShard and the plans it is compared with): placement, traffic, the
all-to-all time model, memory, the cut-point planner, and the experiment's plan builder, each
checked against a brute-force reading of the formal model in its module docstring."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from workbench.experiments.config import FlexShardConfig
from workbench.experiments.flexshard import _planned, build_plans
from workbench.sharding.config import TopologyConfig
from workbench.sharding.lookups import SequenceLookups
from workbench.sharding.planner import best_cut, candidate_cuts, estimate_probability, evaluate_cuts
from workbench.sharding.plans import (
    TIER_GLOBAL,
    TIER_NODE,
    TIER_SHARDED,
    Plan,
    column_wise,
    rank_order,
    row_wise,
    table_row_wise,
    table_wise,
    tiered,
    weighted_sequence,
)
from workbench.sharding.topology import Topology
from workbench.sharding.traffic import expected_traffic, memory, replay_traffic, traffic_summary


# -- strategies ------------------------------------------------------------------------------------
@st.composite
def topologies(draw: st.DrawFn, max_nodes: int = 3, max_g: int = 3,
               latency: bool = True) -> Topology:
    """A small two-level topology, often with slow nodes (bandwidths and latencies varied;
    ``latency=False``: no latencies)."""
    nodes = draw(st.integers(1, max_nodes))
    cfg = TopologyConfig(
        nodes=nodes, devices_per_node=draw(st.integers(1, max_g)),
        intra_gbps=draw(st.sampled_from([50.0, 300.0])),
        inter_gbps=draw(st.sampled_from([12.5, 25.0])),
        intra_latency_us=draw(st.sampled_from([0.0, 5.0] if latency else [0.0])),
        inter_latency_us=draw(st.sampled_from([0.0, 10.0, 40.0] if latency else [0.0])),
        slow_nodes=draw(st.integers(0, nodes)),
        slow_factor=draw(st.sampled_from([1.0, 0.5, 0.25, 0.1])))
    return Topology.from_config(cfg)


def counts(n: int, hi: int = 6) -> st.SearchStrategy[np.ndarray]:
    """``float[n]`` unnormalised probabilities: small integers, zeros included."""
    return st.lists(st.integers(0, hi), min_size=n, max_size=n).map(
        lambda v: np.array(v, dtype=float))


@st.composite
def dyadic_counts(draw: st.DrawFn, n: int, hi: int = 5) -> np.ndarray:
    """``float[n]`` small integers (zeros included) whose total is a power of two: normalised,
    every probability and every sum of them is exact in floating point, whatever the order of
    summation (the last row pads the total)."""
    head = draw(st.lists(st.integers(0, hi), min_size=n - 1, max_size=n - 1))
    total = 1 << max(0, int(np.ceil(np.log2(max(1, sum(head))))))
    last = total - sum(head) if total > sum(head) else total  # or double it when already full
    out = np.array(head + [last], dtype=float)
    assert (int(out.sum()) & (int(out.sum()) - 1)) == 0
    return out


@st.composite
def plans(draw: st.DrawFn, topo: Topology, n: int, probability: np.ndarray) -> Plan:
    """Any plan of an n-row table on ``topo``: the named builders (random parameters) or a raw
    random placement (every tier mixed, owners anywhere valid)."""
    p, g = topo.devices, topo.devices_per_node
    kind = draw(st.sampled_from(["tw", "rw", "cw", "twrw", "tiered", "raw"]))
    if kind == "tw":
        return table_wise(n, draw(st.integers(0, p - 1)))
    if kind == "rw":
        return row_wise(n, topo)
    if kind == "cw":
        return column_wise(n, draw(st.integers(1, 2 * p)), draw(st.integers(0, p - 1)), topo)
    if kind == "twrw":
        return table_row_wise(n, topo, draw(st.integers(0, topo.nodes - 1)))
    if kind == "tiered":
        t1 = draw(st.integers(0, n))
        t2 = draw(st.integers(0, n - t1))
        return tiered(probability, t1, t2, topo, weighted=draw(st.booleans()))
    tier = np.array(draw(st.lists(st.sampled_from([TIER_GLOBAL, TIER_NODE, TIER_SHARDED]),
                                  min_size=n, max_size=n)), dtype=np.int8)
    owner = np.array([-1 if t == TIER_GLOBAL else draw(st.integers(0, (g if t == TIER_NODE
                                                                          else p) - 1))
                      for t in tier], dtype=np.int64)
    return Plan("raw", tier, owner)


@st.composite
def instances(draw: st.DrawFn, max_rows: int = 12, max_nodes: int = 3, max_g: int = 3):
    """(topology, probability counts, plan)."""
    topo = draw(topologies(max_nodes, max_g))
    n = draw(st.integers(1, max_rows))
    probability = draw(counts(n))
    return topo, probability, draw(plans(topo, n, probability))


# -- brute force from the docstrings ---------------------------------------------------------------
def holders(plan: Plan, row: int, topo: Topology) -> list[int]:
    """The devices that store (part of) ``row``."""
    g = topo.devices_per_node
    if plan.column_devices is not None:
        return sorted(set(int(d) for d in plan.column_devices))
    tier, owner = int(plan.tier[row]), int(plan.owner[row])
    if tier == TIER_GLOBAL:
        return list(range(topo.devices))
    if tier == TIER_NODE:
        return [node * g + owner for node in range(topo.nodes)]
    return [owner]


def servers(plan: Plan, src: int, row: int, topo: Topology, row_bytes: float):
    """``[(device, bytes)]`` that serve one lookup of ``row`` by device ``src`` (plans.py)."""
    g = topo.devices_per_node
    if plan.column_devices is not None:
        k = len(plan.column_devices)
        return [(int(d), row_bytes / k) for d in plan.column_devices]
    tier, owner = int(plan.tier[row]), int(plan.owner[row])
    if tier == TIER_GLOBAL:
        return [(src, row_bytes)]
    if tier == TIER_NODE:
        return [((src // g) * g + owner, row_bytes)]
    return [(owner, row_bytes)]


def brute_replay(plan: Plan, src, rows, row_bytes: float, topo: Topology) -> np.ndarray:
    m = np.zeros((topo.devices, topo.devices))
    for s, r in zip(src, rows):
        for dest, b in servers(plan, int(s), int(r), topo, row_bytes):
            if dest != s:  # a lookup served locally moves nothing
                m[dest, s] += b
    return m


def brute_expected(plan: Plan, probability: np.ndarray, lookups: float, row_bytes: float,
                   topo: Topology) -> np.ndarray:
    """``M[e, d] = lambda x sum_r p_r x bytes served to d by e`` (p normalised)."""
    total = float(probability.sum())
    m = np.zeros((topo.devices, topo.devices))
    for d in range(topo.devices):
        for r, p_r in enumerate(probability):
            for e, b in servers(plan, d, r, topo, row_bytes):
                if e != d:
                    m[e, d] += lookups * b * (p_r / total if total > 0 else 0.0)
    return m


def explicit(plan: Plan, probability, lookups, row_bytes, topo) -> dict[str, float]:
    """A built plan evaluated by the traffic functions (the planner's reference)."""
    m = expected_traffic(plan, probability, lookups, row_bytes, topo)
    return {**traffic_summary(m, topo),
            "memory": float(memory(plan, m, row_bytes, topo)["total"].max())}


def topo_of(nodes=2, g=2, **kw) -> Topology:
    return Topology.from_config(TopologyConfig(nodes=nodes, devices_per_node=g, **kw))


# -- 1. placement and memory -----------------------------------------------------------------------
@given(instances(), st.integers(1, 64), st.data())
@settings(max_examples=200, deadline=None)
def test_every_row_is_placed_and_memory_adds_up(inst, row_bytes, data):
    topo, probability, plan = inst
    n, p, g = plan.rows, topo.devices, topo.devices_per_node
    stored = np.zeros(p)
    if plan.column_devices is not None:
        assert len(plan.column_devices) >= 1
        assert ((plan.column_devices >= 0) & (plan.column_devices < p)).all()
        stored[:] = np.bincount(plan.column_devices, minlength=p) * n / len(plan.column_devices)
        expected_total = n
    else:
        assert set(np.unique(plan.tier)) <= {TIER_GLOBAL, TIER_NODE, TIER_SHARDED}
        t0 = plan.tier == TIER_GLOBAL
        t1 = plan.tier == TIER_NODE
        t2 = plan.tier == TIER_SHARDED
        assert (plan.owner[t0] == -1).all()
        assert ((plan.owner[t1] >= 0) & (plan.owner[t1] < g)).all()
        assert ((plan.owner[t2] >= 0) & (plan.owner[t2] < p)).all()
        for r in range(n):
            held = holders(plan, r, topo)
            assert held, f"row {r} is on no device"
            stored[held] += 1
        expected_total = t0.sum() * p + t1.sum() * topo.nodes + t2.sum()
    rpd = plan.rows_per_device(topo)
    assert rpd.shape == (p,)
    np.testing.assert_allclose(rpd, stored, rtol=1e-12)
    assert rpd.sum() == pytest.approx(expected_total, rel=1e-12)

    # memory: weights + the all-to-all buffers (row + column sums, diagonal ignored)
    traffic = np.array(data.draw(st.lists(st.integers(0, 1000), min_size=p * p,
                                          max_size=p * p)), dtype=float).reshape(p, p)
    mem = memory(plan, traffic, row_bytes, topo)
    off = traffic * (1 - np.eye(p))
    np.testing.assert_allclose(mem["weights"], rpd * row_bytes, rtol=1e-12)
    np.testing.assert_allclose(mem["buffers"], off.sum(axis=0) + off.sum(axis=1), rtol=1e-12)
    np.testing.assert_allclose(mem["total"], mem["weights"] + mem["buffers"], rtol=1e-12)
    for d in range(p):  # by hand, one device at a time
        buf = sum(traffic[d, e] + traffic[e, d] for e in range(p) if e != d)
        assert mem["total"][d] == pytest.approx(stored[d] * row_bytes + buf, rel=1e-12)


@given(topologies(), counts(15), st.data())
@settings(max_examples=150, deadline=None)
def test_tiered_takes_the_hottest_rows_first(topo, probability, data):
    n = probability.size
    t1 = data.draw(st.integers(0, n))
    t2 = data.draw(st.integers(0, n - t1))
    weighted = data.draw(st.booleans())
    plan = tiered(probability, t1, t2, topo, weighted=weighted)
    assert (plan.t1, plan.t2, plan.rows) == (t1, t2, n)
    order = rank_order(probability)
    # descending probability, ties to the smaller id
    assert sorted(range(n), key=lambda r: (-probability[r], r)) == list(order)
    assert (plan.tier[order[:t1]] == TIER_GLOBAL).all()
    assert (plan.tier[order[t1:t1 + t2]] == TIER_NODE).all()
    assert (plan.tier[order[t1 + t2:]] == TIER_SHARDED).all()
    # tier 1's owner cycles over the local devices by rank
    ranks = np.arange(n)
    in_t1 = (ranks >= t1) & (ranks < t1 + t2)
    assert (plan.owner[order[in_t1]] == ranks[in_t1] % topo.devices_per_node).all()
    # tier 2's owners, with no replication: in proportion to the NICs (weighted) or equal (+-1)
    flat = tiered(probability, 0, 0, topo, weighted=weighted)
    w = topo.inter_bps if weighted else np.ones(topo.devices)
    held = np.bincount(flat.owner, minlength=topo.devices)
    assert (np.abs(held - n * w / w.sum()) < 1).all()


def test_tiered_rejects_bad_cuts():
    topo = topo_of()
    p = np.ones(5)
    for t1, t2 in [(-1, 0), (0, -1), (3, 3), (6, 0)]:
        with pytest.raises(ValueError):
            tiered(p, t1, t2, topo)
    tiered(p, 2, 3, topo)  # t1 + t2 == N is allowed


def test_builders_by_hand():
    topo = topo_of(nodes=2, g=2)
    np.testing.assert_array_equal(row_wise(6, topo).owner, [0, 0, 1, 1, 2, 2])
    np.testing.assert_array_equal(row_wise(5, topo).owner, [0, 0, 1, 1, 2])
    np.testing.assert_array_equal(table_row_wise(5, topo, node=1).owner, [2, 2, 2, 3, 3])
    np.testing.assert_array_equal(table_wise(3, 2).owner, [2, 2, 2])
    cw = column_wise(4, 3, first_device=3, topo=topo)
    np.testing.assert_array_equal(cw.column_devices, [3, 0, 1])
    np.testing.assert_allclose(cw.rows_per_device(topo), [4 / 3, 4 / 3, 0, 4 / 3])
    with pytest.raises(ValueError):
        cw.serving(np.array([0]), np.array([0]), topo)


# -- 2. weighted_sequence --------------------------------------------------------------------------
@given(st.lists(st.floats(0.05, 20.0), min_size=1, max_size=8), st.integers(0, 200))
@settings(max_examples=300, deadline=None)
def test_weighted_sequence_is_proportional_spread_and_deterministic(weights, n):
    w = np.array(weights)
    seq = weighted_sequence(w, n)
    assert seq.dtype == np.int64 and seq.shape == (n,)
    np.testing.assert_array_equal(seq, weighted_sequence(w, n))
    if n == 0:
        return
    assert ((seq >= 0) & (seq < w.size)).all()
    share = w / w.sum()
    held = np.bincount(seq, minlength=w.size)
    assert held.sum() == n
    assert (np.abs(held - n * share) < 1).all()
    # spread evenly (stride scheduling): every prefix stays near its share
    prefix = np.cumsum(np.eye(w.size, dtype=np.int64)[seq], axis=0)
    m = np.arange(1, n + 1)[:, None]
    assert (np.abs(prefix - m * share[None, :]) <= 2 + w.size / 2).all()


def test_weighted_sequence_by_hand():
    np.testing.assert_array_equal(weighted_sequence(np.array([3.0, 1.0]), 4), [0, 0, 1, 0])
    np.testing.assert_array_equal(weighted_sequence(np.ones(3), 7), [0, 1, 2, 0, 1, 2, 0])
    np.testing.assert_array_equal(weighted_sequence(np.array([1.0, 1.0, 2.0]), 8),
                                  [2, 0, 1, 2, 2, 0, 1, 2])


@given(st.lists(st.integers(1, 20), min_size=1, max_size=8), st.integers(0, 120))
@settings(max_examples=300, deadline=None)
def test_weighted_sequence_is_stride_scheduling(weights, n):
    """Exact rationals: largest remainders (ties to the smaller device; a remainder may round
    either way in floating point, so near-ties are not pinned down), then the slots at
    ``(j + 1/2) / c_d`` merged in order, ties to the smaller device."""
    total = sum(weights)
    share = [Fraction(n * w, total) for w in weights]
    got = weighted_sequence(np.array(weights, dtype=float), n)
    held = np.bincount(got, minlength=len(weights)).tolist()
    floor = [int(x) for x in share]
    assert all(h - f in (0, 1) for h, f in zip(held, floor)) and sum(held) == n
    rest = [x - f for x, f in zip(share, floor)]
    up = [d for d in range(len(weights)) if held[d] > floor[d]]
    down = [d for d in range(len(weights)) if held[d] == floor[d]]
    for d in up:
        for e in down:
            assert rest[d] >= rest[e] - Fraction(1, 10**9)
    slots = sorted((Fraction(2 * j + 1, 2 * c), d) for d, c in enumerate(held) for j in range(c))
    assert got.tolist() == [d for _, d in slots]


@pytest.mark.parametrize("n", [0, 5])
@pytest.mark.parametrize("weights", [[], [1.0, 0.0], [1.0, -2.0], [[1.0, 2.0]]])
def test_weighted_sequence_rejects_bad_weights(weights, n):
    with pytest.raises(ValueError, match="positive"):
        weighted_sequence(np.array(weights, dtype=float), n)


@pytest.mark.parametrize("weights", [[np.nan, 1.0], [np.inf, 1.0]])
def test_weighted_sequence_rejects_non_finite_weights(weights):
    with np.errstate(all="ignore"), pytest.raises(ValueError):
        weighted_sequence(np.array(weights), 5)


# -- 3. replay against brute force ----------------------------------------------------------------
@given(instances(), st.integers(1, 32), st.data())
@settings(max_examples=200, deadline=None)
def test_replay_equals_brute_force(inst, row_bytes, data):
    topo, _, plan = inst
    k = data.draw(st.integers(0, 40))
    src = np.array(data.draw(st.lists(st.integers(0, topo.devices - 1), min_size=k,
                                      max_size=k)), dtype=np.int64)
    rows = np.array(data.draw(st.lists(st.integers(0, plan.rows - 1), min_size=k,
                                       max_size=k)), dtype=np.int64)
    m = replay_traffic(plan, src, rows, row_bytes, topo)
    np.testing.assert_allclose(m, brute_replay(plan, src, rows, row_bytes, topo),
                               rtol=1e-12, atol=1e-9)
    assert (np.diag(m) == 0).all()
    if plan.column_devices is None:
        dest = plan.serving(src, rows, topo)
        assert [int(d) for d in dest] == [servers(plan, s, r, topo, 1)[0][0]
                                          for s, r in zip(src, rows)]


@given(st.lists(st.lists(st.integers(0, 9), max_size=4), min_size=1, max_size=9),
       st.integers(0, 6), st.integers(1, 4), st.integers(1, 3))
@settings(max_examples=300, deadline=None)
def test_sequence_lookups_iteration_is_slicing(lists, t, devices, per_device):
    lengths = np.array([len(x) for x in lists], dtype=np.int64)
    values = np.array([v for x in lists for v in x], dtype=np.int64)
    data = SequenceLookups(values, lengths, 10)
    src, rows = data.iteration(t, devices, per_device)
    want_src, want_rows = [], []
    for j in range(devices * per_device):
        sample = lists[(t * devices * per_device + j) % len(lists)]  # wraps around
        want_src += [j // per_device] * len(sample)
        want_rows += sample
    assert src.tolist() == want_src
    assert rows.tolist() == want_rows


# -- 4. expected traffic ---------------------------------------------------------------------------
@given(instances(max_rows=10), st.integers(1, 50), st.integers(1, 32))
@settings(max_examples=200, deadline=None)
def test_expected_traffic_equals_brute_force_expectation(inst, lookups, row_bytes):
    topo, probability, plan = inst
    assume(probability.sum() > 0)  # a distribution of the lookups
    m = expected_traffic(plan, probability, float(lookups), row_bytes, topo)
    np.testing.assert_allclose(m, brute_expected(plan, probability, lookups, row_bytes, topo),
                               rtol=1e-9, atol=1e-9)
    # the same as replaying a batch in which every device looks row r up c_r times
    # (the expectation over i.i.d. draws, exactly: lambda = sum c lookups per device)
    c = probability.astype(np.int64)
    rows = np.repeat(np.arange(c.size), c)
    src = np.repeat(np.arange(topo.devices), rows.size)
    replayed = replay_traffic(plan, src, np.tile(rows, topo.devices), row_bytes, topo)
    np.testing.assert_allclose(expected_traffic(plan, probability, float(c.sum()), row_bytes,
                                                topo), replayed, rtol=1e-9, atol=1e-9)


def test_expected_traffic_is_the_mean_of_iid_replays():
    """A Monte-Carlo check of the same identity on one plan of every kind (seeded)."""
    topo = topo_of(nodes=2, g=2, slow_nodes=1, slow_factor=0.5)
    p = np.array([5.0, 0.0, 3.0, 1.0, 1.0, 2.0, 0.0, 4.0])
    rng = np.random.default_rng(0)
    lookups, draws = 20, 4000
    for plan in (row_wise(8, topo), table_row_wise(8, topo, 1), column_wise(8, 3, 1, topo),
                 tiered(p, 1, 2, topo), tiered(p, 2, 0, topo, weighted=False)):
        total = np.zeros((4, 4))
        for _ in range(draws // 100):
            src = np.repeat(np.arange(4), lookups * 100)
            rows = rng.choice(8, size=src.size, p=p / p.sum())
            total += replay_traffic(plan, src, rows, 8, topo) / 100
        np.testing.assert_allclose(total / (draws // 100),
                                   expected_traffic(plan, p, lookups, 8, topo),
                                   rtol=0.05, atol=2.0)


# -- 5. topology -----------------------------------------------------------------------------------
def test_a2a_seconds_by_hand():
    topo = topo_of(nodes=2, g=2, intra_gbps=100, inter_gbps=10, intra_latency_us=2,
                   inter_latency_us=7, slow_nodes=1, slow_factor=0.5)
    np.testing.assert_allclose(topo.inter_bps, [10e9, 10e9, 5e9, 5e9])
    assert topo.intra_bps == 100e9
    assert topo.intra_latency_s == pytest.approx(2e-6)
    assert topo.inter_latency_s == pytest.approx(7e-6)
    mb = 1e6
    m = np.array([[9, 100, 40, 0],      # the diagonal is ignored
                  [0, 0, 0, 0],
                  [0, 0, 0, 0],
                  [20, 0, 0, 9]], dtype=float) * mb
    parts = topo.split(m)
    np.testing.assert_allclose(parts["intra_send"], [100 * mb, 0, 0, 0])
    np.testing.assert_allclose(parts["intra_recv"], [0, 100 * mb, 0, 0])
    np.testing.assert_allclose(parts["inter_send"], [40 * mb, 0, 0, 20 * mb])
    np.testing.assert_allclose(parts["inter_recv"], [20 * mb, 0, 40 * mb, 0])
    t = topo.device_seconds(parts)
    np.testing.assert_allclose(t, [7e-6 + 40e6 / 10e9,      # d0: its NIC, not NVLink
                                   2e-6 + 100e6 / 100e9,    # d1: NVLink only
                                   7e-6 + 40e6 / 5e9,       # d2: the slow node's NIC
                                   7e-6 + 20e6 / 5e9], rtol=1e-12)
    assert topo.a2a_seconds(m) == pytest.approx(7e-6 + 8e-3, rel=1e-12)
    summary = traffic_summary(m, topo)
    assert summary["bytes"] == pytest.approx(160 * mb)
    assert summary["inter_bytes"] == pytest.approx(60 * mb)
    assert summary["seconds"] == pytest.approx(2 * (7e-6 + 8e-3), rel=1e-12)
    # without the slow node, device 0 and 2 tie
    fast = topo_of(nodes=2, g=2, intra_gbps=100, inter_gbps=10, intra_latency_us=2,
                   inter_latency_us=7)
    assert fast.a2a_seconds(m) == pytest.approx(7e-6 + 4e-3, rel=1e-12)


def test_latency_only_with_traffic():
    topo = topo_of(nodes=2, g=2, intra_gbps=100, inter_gbps=10, intra_latency_us=2,
                   inter_latency_us=7)
    assert topo.a2a_seconds(np.zeros((4, 4))) == 0.0
    assert topo.a2a_seconds(np.eye(4) * 1e9) == 0.0  # only the (ignored) diagonal
    one_intra = np.zeros((4, 4))
    one_intra[1, 0] = 1.0
    t = topo.device_seconds(topo.split(one_intra))
    np.testing.assert_allclose(t, [2e-6 + 1 / 100e9, 2e-6 + 1 / 100e9, 0, 0], rtol=1e-12)
    one_inter = np.zeros((4, 4))
    one_inter[3, 0] = 1.0
    t = topo.device_seconds(topo.split(one_inter))
    np.testing.assert_allclose(t, [7e-6 + 1 / 10e9, 0, 0, 7e-6 + 1 / 10e9], rtol=1e-12)
    assert traffic_summary(np.zeros((4, 4)), topo) == {"bytes": 0.0, "inter_bytes": 0.0,
                                                       "seconds": 0.0}


@given(topologies(), st.data())
@settings(max_examples=100, deadline=None)
def test_a2a_seconds_is_the_slowest_device_by_loops(topo, data):
    p, g = topo.devices, topo.devices_per_node
    m = np.array(data.draw(st.lists(st.sampled_from([0, 0, 1, 1000, 10**6]), min_size=p * p,
                                    max_size=p * p)), dtype=float).reshape(p, p)
    worst = 0.0
    for d in range(p):
        same = [e for e in range(p) if e // g == d // g and e != d]
        other = [e for e in range(p) if e // g != d // g]
        intra = max(sum(m[d, e] for e in same), sum(m[e, d] for e in same))
        inter = max(sum(m[d, e] for e in other), sum(m[e, d] for e in other))
        t_intra = topo.intra_latency_s + intra / topo.intra_bps if intra > 0 else 0.0
        t_inter = topo.inter_latency_s + inter / topo.inter_bps[d] if inter > 0 else 0.0
        worst = max(worst, t_intra, t_inter)
    assert topo.a2a_seconds(m) == pytest.approx(worst, rel=1e-12)


def test_from_config_overrides():
    cfg = TopologyConfig(nodes=2, devices_per_node=2, inter_gbps=10, intra_gbps=100,
                         intra_latency_us=3, inter_latency_us=11, slow_nodes=1, slow_factor=0.5)
    base = Topology.from_config(cfg)
    assert (base.nodes, base.devices_per_node, base.devices) == (2, 2, 4)
    np.testing.assert_allclose(base.inter_bps, [10e9, 10e9, 5e9, 5e9])
    assert base.intra_bps == 100e9
    assert (base.intra_latency_s, base.inter_latency_s) == pytest.approx((3e-6, 11e-6))
    more = Topology.from_config(cfg, nodes=3)
    assert (more.nodes, more.devices) == (3, 6)
    np.testing.assert_allclose(more.inter_bps, [10e9] * 4 + [5e9] * 2)  # the last node slow
    skew = Topology.from_config(cfg, slow_factor=0.25)
    np.testing.assert_allclose(skew.inter_bps, [10e9, 10e9, 2.5e9, 2.5e9])
    both = Topology.from_config(cfg, nodes=4, slow_factor=0.1)
    np.testing.assert_allclose(both.inter_bps, [10e9] * 6 + [1e9] * 2)
    one = Topology.from_config(cfg, nodes=1)  # slow_nodes is capped at the node count
    np.testing.assert_allclose(one.inter_bps, [5e9, 5e9])
    no_slow = Topology.from_config(TopologyConfig(nodes=3, devices_per_node=1, inter_gbps=10),
                                   slow_factor=0.5)
    np.testing.assert_allclose(no_slow.inter_bps, [10e9] * 3)
    # per-node speeds, on top of which the slow factor applies
    per_node = TopologyConfig(nodes=2, devices_per_node=1, inter_gbps=10, node_speed=[1.0, 0.8],
                              slow_nodes=1, slow_factor=0.5)
    np.testing.assert_allclose(Topology.from_config(per_node).inter_bps, [10e9, 4e9])
    np.testing.assert_allclose(Topology.from_config(per_node, slow_factor=0.25).inter_bps,
                               [10e9, 2e9])
    assert cfg.nodes == 2 and cfg.slow_factor == 0.5  # the config itself is unchanged
    np.testing.assert_array_equal(base.node_of(np.arange(4)), [0, 0, 1, 1])
    np.testing.assert_array_equal(base.same_node(), [[1, 1, 0, 0], [1, 1, 0, 0],
                                                     [0, 0, 1, 1], [0, 0, 1, 1]])


# -- 6. the planner equals the built plans ---------------------------------------------------------
def test_candidate_cuts():
    np.testing.assert_array_equal(candidate_cuts(5, 6), np.arange(6))
    np.testing.assert_array_equal(candidate_cuts(0, 2), [0])
    cuts = candidate_cuts(1000, 10, extra=[7, 5000, -3])
    assert cuts[0] == 0 and cuts[-1] == 1000 and 7 in cuts
    assert (np.diff(cuts) > 0).all() and len(cuts) <= 10 + 3 + 2


def _check_against_built_plans(topo, probability, lookups, row_bytes, weighted, node_tier):
    n = probability.size
    cuts = candidate_cuts(n, n + 1 + lookups % 3)  # count > n: every cut
    np.testing.assert_array_equal(cuts, np.arange(n + 1))
    s = evaluate_cuts(probability, topo, float(lookups), row_bytes, cuts, node_tier=node_tier,
                      weighted=weighted, chunk=3)
    pairs = sorted(zip(s.t1.tolist(), s.t2.tolist()))
    want = [(a, b - a) for a in range(n + 1) for b in range(a, n + 1 if node_tier else a + 1)]
    assert pairs == sorted(want)  # every pair exactly once
    for k in range(s.t1.size):
        plan = tiered(probability, int(s.t1[k]), int(s.t2[k]), topo, weighted=weighted)
        ref = explicit(plan, probability, float(lookups), row_bytes, topo)
        assert s.seconds[k] == pytest.approx(ref["seconds"], rel=1e-9, abs=1e-18)
        assert s.memory[k] == pytest.approx(ref["memory"], rel=1e-9)
        assert s.inter_bytes[k] == pytest.approx(ref["inter_bytes"], rel=1e-9, abs=1e-9)


@given(topologies(), st.integers(1, 25).flatmap(dyadic_counts), st.integers(1, 64),
       st.sampled_from([4, 12, 256]), st.booleans(), st.booleans())
@settings(max_examples=25, deadline=None)
def test_evaluate_cuts_equals_built_plans(topo, probability, lookups, row_bytes, weighted,
                                          node_tier):
    """Exhaustive cuts, latencies included. The probabilities are dyadic: the closed form's
    prefix-sum differences are exact (no rounding residual can arise), so time, memory and
    inter-node bytes must agree pair by pair."""
    _check_against_built_plans(topo, probability, lookups, row_bytes, weighted, node_tier)


@given(topologies(), st.integers(1, 25).flatmap(counts), st.integers(1, 64),
       st.sampled_from([4, 12, 256]), st.booleans(), st.booleans())
@settings(max_examples=25, deadline=None)
def test_evaluate_cuts_equals_built_plans_any_probability(topo, probability, lookups, row_bytes,
                                                          weighted, node_tier):
    """Any integer counts (rounded probabilities), latencies included: the closed form agrees to
    rounding, and an empty term is an exact zero (no spurious latency)."""
    _check_against_built_plans(topo, probability, lookups, row_bytes, weighted, node_tier)


def test_evaluate_cuts_on_a_grid_with_no_sharded_rows():
    """Regression: with a non-exhaustive grid, S_d was once ``total - prefix`` (two summation
    orders), ~1e-17 instead of 0, so every pair without tier-2 rows (t1 + t2 = N, including the
    whole table replicated) paid 2 x the inter-node latency while the built plan has none."""
    topo = topo_of(nodes=2, g=1)
    p = np.array([0.7, 0.2, 0.1, 0.1, 0.1])
    s = evaluate_cuts(p, topo, 1.0, 4, np.array([0, 1, 5]), weighted=False)
    for k in np.flatnonzero(s.t1 + s.t2 == p.size):
        ref = explicit(tiered(p, int(s.t1[k]), int(s.t2[k]), topo, weighted=False), p, 1.0, 4,
                       topo)
        assert ref["seconds"] == 0.0 and ref["inter_bytes"] == 0.0  # all replicated
        assert s.seconds[k] == pytest.approx(ref["seconds"], abs=1e-12)


def test_evaluate_cuts_on_one_node_has_no_inter_node_time():
    """Regression: on one node nothing crosses nodes, but inter_recv was once ``S - S_node``
    (two summation orders), ~1e-17 instead of 0, charging 2 x the inter-node latency (found by
    hypothesis with G = 3; G = 8 showed it on ~8% of the pairs)."""
    topo = topo_of(nodes=1, g=3, intra_gbps=50, intra_latency_us=0, inter_latency_us=10)
    p = np.array([1.0, 2.0, 4.0, 4.0])
    s = evaluate_cuts(p, topo, 1.0, 4, candidate_cuts(p.size, p.size + 1), weighted=False,
                      node_tier=False)
    assert (s.inter_bytes == 0).all()
    for k in range(s.t1.size):
        ref = explicit(tiered(p, int(s.t1[k]), int(s.t2[k]), topo, weighted=False), p, 1.0, 4,
                       topo)
        assert ref["inter_bytes"] == 0.0
        assert s.seconds[k] == pytest.approx(ref["seconds"], rel=1e-9, abs=1e-18)


# -- 7. best_cut is the brute-force argmin ---------------------------------------------------------
@st.composite
def dyadic_instances(draw: st.DrawFn):
    """(topology, probabilities with a power-of-two total): every byte count is exact, so equal
    times are equal floats and ties are real ties."""
    return draw(topologies(max_nodes=3, max_g=2)), draw(st.integers(1, 10).flatmap(dyadic_counts))


@given(dyadic_instances(), st.integers(1, 16), st.sampled_from([4, 8, 32]), st.booleans(),
       st.booleans(), st.data())
@settings(max_examples=60, deadline=None)
def test_best_cut_is_the_brute_force_argmin(inst, lookups, row_bytes, weighted, node_tier, data):
    topo, probability = inst
    n = probability.size
    brute = {}
    for t1 in range(n + 1):
        for t2 in range(n - t1 + 1 if node_tier else 1):
            plan = tiered(probability, t1, t2, topo, weighted=weighted)
            brute[t1, t2] = explicit(plan, probability, float(lookups), row_bytes, topo)
    mems = sorted({v["memory"] for v in brute.values()})
    options = [None, *mems, *[(a + b) / 2 for a, b in zip(mems, mems[1:])], mems[-1] * 2]
    limit = data.draw(st.sampled_from(options))
    s = evaluate_cuts(probability, topo, float(lookups), row_bytes, candidate_cuts(n, n + 1),
                      node_tier=node_tier, weighted=weighted)
    k = best_cut(s, limit)
    fits = [key for key, v in brute.items() if limit is None or v["memory"] <= limit]
    want = min(fits, key=lambda key: (brute[key]["seconds"], key[0], key[1]))
    assert (int(s.t1[k]), int(s.t2[k])) == want
    assert s.seconds[k] == brute[want]["seconds"]
    with pytest.raises(ValueError, match="memory limit"):
        best_cut(s, mems[0] * (1 - 1e-6))


def test_best_cut_ties_go_to_the_fewest_replicated_rows():
    """Zero-probability rows cost nothing wherever they are: every cut among them ties."""
    topo = topo_of(nodes=2, g=2)
    p = np.array([0.0, 4.0, 0.0, 0.0])
    s = evaluate_cuts(p, topo, 8.0, 16, candidate_cuts(4, 5))
    k = best_cut(s)
    assert s.seconds[k] == 0.0 and (s.t1[k], s.t2[k]) == (1, 0)  # only the hot row replicated
    assert (s.seconds[(s.t1 >= 1)] == 0.0).all()


# -- 8. FlexShard within RW's memory and time -----------------------------------------------------
@given(topologies(), st.integers(1, 30).flatmap(lambda n: counts(n, 20)),
       st.integers(2, 12), st.integers(1, 40), st.sampled_from([8, 64, 256]))
@settings(max_examples=60, deadline=None)
def test_flexshard_never_worse_than_rw(topo, raw, candidates, lookups, row_bytes):
    assume(raw.sum() > 0)
    probability = raw / raw.sum()
    exp = FlexShardConfig(candidate_cuts=candidates, memory_limit="rw")
    built = build_plans(exp, probability, topo, float(lookups), row_bytes)
    rw = explicit(row_wise(probability.size, topo), probability, lookups, row_bytes, topo)
    assert built["limit"] == built["rw_memory"] == pytest.approx(rw["memory"], rel=1e-12)
    assert set(built["plans"]) == set(exp.plans)
    for name in ("hot_dp", "flexshard"):
        plan = built["plans"][name]
        assert plan.name == name
        got = explicit(plan, probability, lookups, row_bytes, topo)
        assert got["memory"] <= rw["memory"] * (1 + 1e-9)
        assert got["seconds"] <= rw["seconds"] * (1 + 1e-9)
    assert (built["plans"]["hot_dp"].tier != TIER_NODE).all()
    assert built["plans"]["hot_dp"].t2 == 0
    # the plan is the fastest fitting pair over its searches (flexshard: tier-2 owners weighted
    # and not, the first on a tie), or RW's placement when none fits or none beats RW
    cuts = candidate_cuts(probability.size, candidates)
    for name, variants in {"flexshard": [(True, True), (False, True)],
                           "hot_dp": [(False, False)]}.items():
        picks = []
        for weighted, node_tier in variants:
            s = evaluate_cuts(probability, topo, float(lookups), row_bytes, cuts,
                              weighted=weighted, node_tier=node_tier)
            fits = np.flatnonzero(s.memory <= built["limit"] * (1 + 1e-12))
            if fits.size:
                k = min(fits, key=lambda i: (s.seconds[i], s.t1[i], s.t2[i]))
                picks.append((s.seconds[k], int(s.t1[k]), int(s.t2[k]), weighted))
        plan = built["plans"][name]
        if not picks or min(picks)[0] >= rw["seconds"]:
            want = row_wise(probability.size, topo)
        else:
            best = min(picks, key=lambda x: x[0])  # the first fastest
            want = tiered(probability, best[1], best[2], topo, weighted=best[3])
        assert (plan.t1, plan.t2) == (want.t1, want.t2)
        np.testing.assert_array_equal(plan.tier, want.tier)
        np.testing.assert_array_equal(plan.owner, want.owner)


def test_flexshard_falls_back_to_rw_when_no_cut_fits():
    """An instance (found by search) where every pair of cut points needs more memory than RW's
    contiguous blocks: both tiered plans are RW's placement."""
    topo = topo_of(nodes=2, g=2)
    p = np.array([5, 4, 3, 6, 4, 5, 4, 8, 1, 6, 6, 1.0])
    p /= p.sum()
    built = build_plans(FlexShardConfig(candidate_cuts=100), p, topo, 4.0, 16)
    for name, s in built["searches"].items():
        assert (s.memory > built["limit"]).all(), name
    rw = row_wise(p.size, topo)
    for name in ("hot_dp", "flexshard"):
        plan = built["plans"][name]
        assert plan.name == name and (plan.t1, plan.t2) == (0, 0)
        np.testing.assert_array_equal(plan.tier, rw.tier)
        np.testing.assert_array_equal(plan.owner, rw.owner)
    # without the limit it does replicate
    free = build_plans(FlexShardConfig(candidate_cuts=100, memory_limit="none"), p, topo, 4.0,
                       16)
    assert free["limit"] is None and free["plans"]["flexshard"].t1 + free["plans"][
        "flexshard"].t2 > 0


def test_flexshard_takes_the_faster_of_weighted_and_equal_owners():
    """An instance (found by search) where, within RW's memory, tier-2 owners in equal shares
    beat owners weighted by the slow node's bandwidth: FlexShard takes the faster."""
    topo = topo_of(nodes=2, g=3, slow_nodes=1, slow_factor=0.5)
    p = np.array([1.0, 5, 5, 6, 0, 4, 0, 6, 2, 2, 6])
    p /= p.sum()
    built = build_plans(FlexShardConfig(candidate_cuts=100), p, topo, 2.0, 256)
    cuts = candidate_cuts(p.size, 100)
    best = {}
    for w in (True, False):
        s = evaluate_cuts(p, topo, 2.0, 256, cuts, weighted=w)
        k = best_cut(s, built["limit"])
        best[w] = (s.seconds[k], int(s.t1[k]), int(s.t2[k]))
    assert best[False][0] < best[True][0]
    plan = built["plans"]["flexshard"]
    want = tiered(p, best[False][1], best[False][2], topo, weighted=False)
    assert (plan.t1, plan.t2) == (want.t1, want.t2)
    np.testing.assert_array_equal(plan.owner, want.owner)
    got = explicit(plan, p, 2.0, 256, topo)
    assert got["seconds"] == pytest.approx(best[False][0], rel=1e-9)
    assert got["memory"] <= built["limit"] * (1 + 1e-9)


def test_planned_falls_back_to_rw():
    topo = topo_of(nodes=2, g=2, slow_nodes=1, slow_factor=0.25)
    p = np.array([9.0, 1, 1, 1, 0, 3, 2, 0])
    rw = row_wise(p.size, topo)
    cuts = candidate_cuts(p.size, 100)
    searches = [(evaluate_cuts(p, topo, 10.0, 32, cuts, weighted=w), w) for w in (True, False)]
    lowest = min(s.memory.min() for s, _ in searches)
    for limit, rw_seconds in [(lowest * 0.5, 1.0), (None, 0.0)]:  # nothing fits / none faster
        plan = _planned("flexshard", searches, p, topo, limit, rw_seconds, rw,
                        order=rank_order(p))
        assert plan.name == "flexshard" and (plan.t1, plan.t2) == (0, 0)
        np.testing.assert_array_equal(plan.tier, rw.tier)
        np.testing.assert_array_equal(plan.owner, rw.owner)
    plan = _planned("flexshard", searches, p, topo, None, 1.0, rw, order=rank_order(p))
    picks = [(best_cut(s), s, w) for s, w in searches]
    k, s, w = picks[int(np.argmin([s.seconds[k] for k, s, _ in picks]))]  # the first fastest
    assert plan.t1 + plan.t2 > 0 and (plan.t1, plan.t2) == (int(s.t1[k]), int(s.t2[k]))
    want = tiered(p, plan.t1, plan.t2, topo, weighted=w)
    np.testing.assert_array_equal(plan.tier, want.tier)
    np.testing.assert_array_equal(plan.owner, want.owner)


def test_build_plans_other_plans():
    topo = topo_of(nodes=2, g=2)
    p = np.array([1.0, 2, 3, 4, 5, 6, 7, 8])
    exp = FlexShardConfig(candidate_cuts=4, cw_shards=2, embedding_dim=8)
    built = build_plans(exp, p / p.sum(), topo, 4.0, 32)["plans"]
    np.testing.assert_array_equal(built["tw"].owner, table_wise(8, 0).owner)
    np.testing.assert_array_equal(built["rw"].owner, row_wise(8, topo).owner)
    np.testing.assert_array_equal(built["cw"].column_devices, [0, 1])
    np.testing.assert_array_equal(built["twrw"].owner, table_row_wise(8, topo, 0).owner)
    only = build_plans(FlexShardConfig(plans=["rw", "flexshard"], candidate_cuts=4),
                       p / p.sum(), topo, 4.0, 32)["plans"]
    assert list(only) == ["rw", "flexshard"]


# -- 9. estimate_probability -----------------------------------------------------------------------
@given(st.lists(st.integers(0, 5), min_size=1, max_size=30))
@settings(max_examples=300, deadline=None)
def test_estimate_probability(raw):
    c = np.array(raw, dtype=np.int64)
    assume(c.sum() > 0)
    total = c.sum()
    freq = estimate_probability(c, "frequency")
    gt = estimate_probability(c, "good_turing")
    assert freq.sum() == pytest.approx(1.0, rel=1e-12)
    assert gt.sum() == pytest.approx(1.0, rel=1e-12)
    np.testing.assert_allclose(freq, c / total, rtol=1e-12)
    assert (freq[c == 0] == 0).all()
    unseen = c == 0
    if not unseen.any():
        np.testing.assert_allclose(gt, freq, rtol=1e-12)
        return
    m = (c == 1).sum() / total
    np.testing.assert_allclose(gt[unseen], m / unseen.sum(), rtol=1e-12)
    np.testing.assert_allclose(gt[~unseen], (1 - m) * c[~unseen] / total, rtol=1e-12)
    assert (gt >= 0).all()


def test_estimate_probability_by_hand():
    gt = estimate_probability(np.array([3, 1, 0, 0, 1]))  # n = 5 lookups, n1 = 2
    np.testing.assert_allclose(gt, [0.6 * 3 / 5, 0.6 / 5, 0.2, 0.2, 0.6 / 5])
    # unseen rows but none seen once: no missing mass
    np.testing.assert_allclose(estimate_probability(np.array([2, 0, 2])), [0.5, 0, 0.5])
    counts = np.array([3, 1, 0])
    estimate_probability(counts)
    np.testing.assert_array_equal(counts, [3, 1, 0])  # the input is not modified


@pytest.mark.parametrize("estimator", ["good_turing", "frequency"])
@pytest.mark.parametrize("profile", [[], [0], [0, 0, 0]])
def test_estimate_probability_rejects_an_empty_profile(estimator, profile):
    with pytest.raises(ValueError, match="no lookups"):
        estimate_probability(np.array(profile, dtype=np.int64), estimator)
