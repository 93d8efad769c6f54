"""Hotline: the two-tier store, the time model, the micro-batch trainer against its baselines."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import keys_and_hot
from hotline_toy import (
    ATOL,
    BATCH,
    DENSE,
    DIM,
    FLOPS,
    HW,
    ROW_BYTES,
    ROWS,
    SPEC,
    STEPS,
    _cpu_run,
    _train,
    toy_data,
)
from workbench.cluster.accelerator_time import step_seconds, step_timeline, sync_seconds
from workbench.cluster.tiered_store import TieredEmbeddingStore
from workbench.data.popularity import hot_mask, popular_mask
from workbench.training.hotline import LANES, MicroBatchCounts, TieredTrainer, microbatch_counts
from workbench.training.hotline_epoch import Schedule, fae_schedule, train_scheme


def _assert_same(a, b, atol: float = ATOL) -> None:
    np.testing.assert_allclose(a[0], b[0], rtol=0, atol=atol)
    assert len(a[1]) == len(b[1])
    for p, q in zip(a[1], b[1], strict=True):
        np.testing.assert_allclose(p, q, rtol=0, atol=atol)


def _max_diff(a, b) -> float:
    return max([float(np.abs(a[0] - b[0]).max())]
               + [float(np.abs(p - q).max()) for p, q in zip(a[1], b[1], strict=True)])


# -- the two-tier store ----------------------------------------------------------------------------
def _table(rows: int, dim: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(rows, dim)).astype(np.float32)


def _check_placement(store: TieredEmbeddingStore, hot: set[int]) -> None:
    """is_hot, slots, hot_keys and the accelerator tier agree with the hot set ``hot``."""
    keys = torch.arange(store.rows)
    assert store.is_hot(keys).tolist() == [k in hot for k in range(store.rows)]
    assert store.hot_keys.tolist() == sorted(hot)
    slots = store.slots(keys).cpu()
    for k in range(store.rows):
        if k in hot:
            assert store.hot_keys[slots[k]].item() == k
        else:
            assert slots[k].item() == -1
    assert tuple(store.hot.shape) == (len(hot), store.dim)
    assert store.hot_bytes == len(hot) * store.dim * 4
    if hot:
        hot_slots = store.slots(torch.tensor(sorted(hot)))
        np.testing.assert_array_equal(store.gather_hot(hot_slots).cpu().numpy(),
                                      store.table()[sorted(hot)])


def test_store_starts_as_the_table_and_copies_it() -> None:
    table = _table(10, 3)
    original = table.copy()
    store = TieredEmbeddingStore(table, np.array([7, 2, 2, 5]))
    table[:] = 0.0  # the store holds a copy
    np.testing.assert_array_equal(store.table(), original)
    np.testing.assert_array_equal(store.host.numpy(), original)
    _check_placement(store, {2, 5, 7})
    # the accelerator tier is a separate tensor, not a view of the host tier
    assert store.hot.data_ptr() != store.host.data_ptr()
    empty = TieredEmbeddingStore(original, np.zeros(0, dtype=np.int64))
    np.testing.assert_array_equal(empty.table(), original)
    _check_placement(empty, set())
    with pytest.raises(ValueError):
        TieredEmbeddingStore(original, np.array([10]))
    with pytest.raises(ValueError):
        TieredEmbeddingStore(original, np.array([-1]))
    with pytest.raises(ValueError):
        TieredEmbeddingStore(original[0], np.zeros(0, dtype=np.int64))


def test_store_updates_merge_into_the_table() -> None:
    table = _table(8, 2)
    store = TieredEmbeddingStore(table, np.array([1, 4, 6]))
    ref = table.copy()
    hot_k = torch.tensor([4, 1, 4])                     # a duplicate slot adds twice
    d_hot = torch.tensor([[1.0, 2.0], [3.0, 4.0], [0.5, 0.25]])
    store.update_hot(store.slots(hot_k), d_hot)
    np.add.at(ref, hot_k.numpy(), d_hot.numpy())
    cold_k = torch.tensor([0, 7, 0])
    d_cold = torch.tensor([[-1.0, 1.0], [2.0, 2.0], [0.125, 0.0]])
    store.update_host(cold_k, d_cold)
    np.add.at(ref, cold_k.numpy(), d_cold.numpy())
    np.testing.assert_allclose(store.table(), ref, rtol=0, atol=1e-6)
    # hot updates stay in the accelerator tier until synced: the host copy is the old row
    np.testing.assert_array_equal(store.host.numpy()[[1, 4]], table[[1, 4]])
    assert store.sync_to_host() == 3
    np.testing.assert_array_equal(store.host.numpy()[[1, 4, 6]], store.hot.numpy())
    np.testing.assert_allclose(store.host.numpy(), ref, rtol=0, atol=1e-6)
    np.testing.assert_allclose(store.table(), ref, rtol=0, atol=1e-6)


def test_set_hot_moves_rows_without_losing_updates() -> None:
    table = _table(6, 2)
    store = TieredEmbeddingStore(table, np.array([3]))
    delta = torch.tensor([[10.0, -10.0]])
    store.update_hot(store.slots(torch.tensor([3])), delta)
    expected = table.copy()
    expected[3] += delta.numpy()[0]
    # 3 becomes cold: its update is written back to the host tier
    assert store.set_hot(np.array([5, 0])) == 1 + 2  # written back + loaded
    _check_placement(store, {0, 5})
    np.testing.assert_allclose(store.table(), expected, rtol=0, atol=1e-6)
    np.testing.assert_allclose(store.host.numpy()[3], expected[3], rtol=0, atol=1e-6)
    # a cold update to 3, then 3 hot again: the accelerator tier loads the updated row
    store.update_host(torch.tensor([3]), delta)
    expected[3] += delta.numpy()[0]
    store.update_hot(store.slots(torch.tensor([5])), delta)
    expected[5] += delta.numpy()[0]
    assert store.set_hot(np.array([3])) == 2 + 1
    _check_placement(store, {3})
    np.testing.assert_allclose(store.hot.numpy()[0], expected[3], rtol=0, atol=1e-6)
    np.testing.assert_allclose(store.table(), expected, rtol=0, atol=1e-6)
    with pytest.raises(ValueError):
        store.set_hot(np.array([6]))


def test_sync_to_hot_reloads_from_the_host_copy() -> None:
    # FAE's normal phase updates the host copy of hot keys; the next hot phase reloads them
    table = _table(5, 2)
    store = TieredEmbeddingStore(table, np.array([1, 2]))
    store.update_host(torch.tensor([2]), torch.tensor([[1.0, 1.0]]))
    np.testing.assert_array_equal(store.table(), table)  # the accelerator tier wins for 2
    assert store.sync_to_hot() == 2
    expected = table.copy()
    expected[2] += 1.0
    np.testing.assert_allclose(store.table(), expected, rtol=0, atol=1e-6)
    np.testing.assert_allclose(store.hot.numpy(), expected[[1, 2]], rtol=0, atol=1e-6)
    rows = store.gather_host(torch.tensor([2, 0]))
    np.testing.assert_allclose(store.upload(rows).numpy(), expected[[2, 0]], rtol=0, atol=1e-6)


@st.composite
def store_programs(draw):
    rows = draw(st.integers(1, 10))
    dim = draw(st.integers(1, 3))
    keys = st.lists(st.integers(0, rows - 1), max_size=6)
    hot = draw(keys)
    ops = draw(st.lists(st.tuples(st.sampled_from(["hot", "host", "set_hot", "to_host"]),
                                  keys, st.integers(0, 2**31)), max_size=8))
    return rows, dim, hot, ops


@given(store_programs())
@settings(max_examples=120, deadline=None)
def test_store_equals_a_numpy_table_under_any_updates_and_moves(program) -> None:
    rows, dim, hot, ops = program
    table = _table(rows, dim)
    store = TieredEmbeddingStore(table, np.array(hot, dtype=np.int64))
    ref, current = table.copy(), set(hot)
    for op, keys, seed in ops:
        rng = np.random.default_rng(seed)
        if op in ("hot", "host"):
            sel = [k for k in keys if (k in current) == (op == "hot")]
            if not sel:
                continue
            delta = rng.normal(size=(len(sel), dim)).astype(np.float32)
            key_t, delta_t = torch.tensor(sel), torch.from_numpy(delta)
            if op == "hot":
                store.update_hot(store.slots(key_t), delta_t)
            else:
                store.update_host(key_t, delta_t)
            np.add.at(ref, sel, delta)
        elif op == "set_hot":
            assert store.set_hot(np.array(keys, dtype=np.int64)) == len(current) + len(set(keys))
            current = set(keys)
        else:
            assert store.sync_to_host() == len(current)
            np.testing.assert_array_equal(store.host.numpy()[sorted(current)],
                                          store.hot.numpy())
        np.testing.assert_allclose(store.table(), ref, rtol=0, atol=1e-5)
        _check_placement(store, current)


# -- micro-batch sizes -----------------------------------------------------------------------------
@given(keys_and_hot(min_samples=1))
@settings(max_examples=300, deadline=None)
def test_microbatch_counts_match_brute_force(case) -> None:
    keys, is_hot = case
    got = microbatch_counts(keys, is_hot)
    samples = keys.tolist()
    popular = [row for row in samples if all(is_hot[k] for k in row)]
    other = [row for row in samples if not all(is_hot[k] for k in row)]
    np_keys = {k for row in other for k in row}
    b, f = keys.shape
    assert got.samples == b and got.popular == len(popular)
    assert got.unique_all == len({k for row in samples for k in row})
    assert got.unique_popular == len({k for row in popular for k in row})
    assert got.unique_np_hot == len({k for k in np_keys if is_hot[k]})
    assert got.unique_np_cold == len({k for k in np_keys if not is_hot[k]})
    assert got.lookups_all == b * f
    assert got.lookups_popular == sum(len(row) for row in popular)
    assert got.lookups_np_hot == sum(1 for row in other for k in row if is_hot[k])
    assert got.lookups_np_cold == sum(1 for row in other for k in row if not is_hot[k])
    assert got.lookups_popular + got.lookups_np_hot + got.lookups_np_cold == b * f
    for unit, prefix in (("unique", "unique"), ("lookups", "lookups")):
        inputs = got.model_inputs(unit)
        assert inputs == {"samples": b, "popular": len(popular),
                          "unique_all": getattr(got, f"{prefix}_all"),
                          "unique_popular": getattr(got, f"{prefix}_popular"),
                          "unique_np_hot": getattr(got, f"{prefix}_np_hot"),
                          "unique_np_cold": getattr(got, f"{prefix}_np_cold"),
                          "lookups": b * f}


def test_microbatch_counts_example_and_bad_unit() -> None:
    is_hot = np.array([True, True, False, True])
    keys = np.array([[0, 1], [1, 3], [0, 2], [2, 2]])
    got = microbatch_counts(keys, is_hot)
    assert got == MicroBatchCounts(samples=4, popular=2, unique_all=4, unique_popular=3,
                                   unique_np_hot=1, unique_np_cold=1, lookups_all=8,
                                   lookups_popular=4, lookups_np_hot=1, lookups_np_cold=3)
    assert got.model_inputs("lookups")["unique_np_cold"] == 3
    assert got.model_inputs("unique")["unique_np_cold"] == 1
    with pytest.raises(ValueError):
        got.model_inputs("rows")


# -- FAE's schedule --------------------------------------------------------------------------------
@given(st.lists(st.booleans(), max_size=60), st.integers(1, 6), st.integers(1, 6))
@settings(max_examples=300, deadline=None)
def test_fae_schedule_covers_each_sample_once_in_interleaved_rounds(flags, batch, phase) -> None:
    popular = np.array(flags, dtype=bool)
    plan = fae_schedule(popular, batch, phase)
    everything = np.concatenate([idx for _, idx in plan]) if plan else np.zeros(0, int)
    assert sorted(everything.tolist()) == list(range(len(flags)))    # each sample exactly once
    per_kind = {"hot": [], "normal": []}
    for kind, idx in plan:
        assert kind in per_kind and 1 <= len(idx) <= batch
        assert popular[idx].all() if kind == "hot" else not popular[idx].any()
        per_kind[kind].append(idx)
    for kind, mask in (("hot", popular), ("normal", ~popular)):
        got = per_kind[kind]
        # the kind's samples in their order, cut into full batches (a last short one)
        joined = np.concatenate(got).tolist() if got else []
        assert joined == np.flatnonzero(mask).tolist()
        assert all(len(idx) == batch for idx in got[:-1])
    # rounds: each kind has at most one run per round, and when each has at least a batch per
    # round, every round runs a hot phase then a normal phase
    n_hot, n_normal = len(per_kind["hot"]), len(per_kind["normal"])
    rounds = max(1, -(-(n_hot + n_normal) // phase))
    kinds = [kind for kind, _ in plan]
    runs = [k for i, k in enumerate(kinds) if i == 0 or kinds[i - 1] != k]
    assert runs.count("hot") <= rounds and runs.count("normal") <= rounds
    if n_hot >= rounds and n_normal >= rounds:
        assert runs == ["hot", "normal"] * rounds
        # both kinds finish together: each round runs an equal share of each kind
        lengths = [len(list(g)) for _, g in itertools.groupby(kinds)]
        for _kind, total, share in (("hot", n_hot, lengths[0::2]),
                                    ("normal", n_normal, lengths[1::2])):
            assert sum(share) == total
            assert all(total // rounds <= n <= -(-total // rounds) for n in share)


def test_fae_schedule_example_and_bad_arguments() -> None:
    popular = np.array([True] * 8 + [False] * 8)
    plan = fae_schedule(popular, 2, 2)  # 4 hot + 4 normal batches, 4 rounds
    assert [k for k, _ in plan] == ["hot", "normal"] * 4
    assert [idx.tolist() for _, idx in plan[:2]] == [[0, 1], [8, 9]]
    plan = fae_schedule(popular, 2, 8)  # one round: all hot, then all normal
    assert [k for k, _ in plan] == ["hot"] * 4 + ["normal"] * 4
    with pytest.raises(ValueError):
        fae_schedule(popular, 0, 2)
    with pytest.raises(ValueError):
        fae_schedule(popular, 2, 0)


# -- the time model --------------------------------------------------------------------------------


# the model's rates written out by hand for HW (seconds)
def _accel(u: int) -> float:
    return u * 64 / 200e9


def _host(u: int) -> float:
    return u * 64 / 8e9


def _link(u: int) -> float:
    return 5e-6 + u * 64 / 16e9 if u > 0 else 0.0


def _compute(n: int) -> float:
    return 100e-6 + n * 2e6 / (10e12 * 0.5) if n > 0 else 0.0


@st.composite
def step_sizes(draw):
    samples = draw(st.integers(1, 5000))
    popular = draw(st.integers(0, samples))
    u_pop = draw(st.integers(1 if popular else 0, 50_000))
    u_hot = draw(st.integers(0, 50_000))
    u_cold = draw(st.integers(1 if popular < samples else 0, 200_000)) if popular < samples else 0
    u_hot = u_hot if popular < samples else 0
    return {"samples": samples, "popular": popular, "unique_all": u_pop + u_hot + u_cold,
            "unique_popular": u_pop, "unique_np_hot": u_hot, "unique_np_cold": u_cold}


def _check_lanes(phases) -> None:
    assert phases
    for lane, _, start, end in phases:
        assert lane in LANES and end > start >= 0.0
    for lane in LANES:  # one thing at a time on each lane
        spans = sorted((s, e) for ln, _, s, e in phases if ln == lane)
        assert all(a[1] <= b[0] + 1e-15 for a, b in zip(spans, spans[1:]))


@given(step_sizes())
@settings(max_examples=200, deadline=None)
def test_time_model_matches_hand_computed_schedules(c) -> None:
    b, bp = c["samples"], c["popular"]
    u, up, unh, unc = (c["unique_all"], c["unique_popular"], c["unique_np_hot"],
                       c["unique_np_cold"])
    hybrid = 2 * _host(u) + 2 * _link(u) + _compute(b) + DENSE
    assert step_seconds("hybrid", HW, ROW_BYTES, FLOPS, **c) == pytest.approx(hybrid, rel=1e-12)
    hot = 2 * _accel(u) + _compute(b) + DENSE
    assert step_seconds("hot", HW, ROW_BYTES, FLOPS, **c) == pytest.approx(hot, rel=1e-12)
    popular_end = _accel(up) + _compute(bp)
    cold_end = _host(unc) + _link(unc)
    join = max(popular_end, cold_end)
    hotline = (join + _accel(unh) + _compute(b - bp) + DENSE + _accel(up + unh) + _link(unc)
               + _host(unc))
    assert step_seconds("hotline", HW, ROW_BYTES, FLOPS, **c) == pytest.approx(hotline,
                                                                              rel=1e-12)
    for kind in ("hybrid", "hot", "hotline"):
        phases = step_timeline(kind, HW, ROW_BYTES, FLOPS, **c)
        _check_lanes(phases)
        assert max(e for *_, e in phases) == step_seconds(kind, HW, ROW_BYTES, FLOPS, **c)
    # hotline's overlap: the popular path and the cold gather + upload both start at 0; the
    # non-popular micro-batch starts at the later of their ends
    phases = {p: (s, e) for _, p, s, e in step_timeline("hotline", HW, ROW_BYTES, FLOPS, **c)}
    if bp:
        assert phases["compute popular"][1] == pytest.approx(popular_end, rel=1e-12)
        assert phases["gather hot (popular)"][0] == 0.0
    if bp < b:
        assert phases["gather non-popular"][0] == 0.0
        assert phases["upload non-popular"][1] == pytest.approx(cold_end, rel=1e-12)
        assert phases["compute non-popular"][0] == pytest.approx(join + _accel(unh), rel=1e-12)


def test_hotline_waits_for_the_later_of_popular_and_cold_paths() -> None:
    base = {"samples": 1000, "unique_all": 0, "unique_np_hot": 0}
    # a long popular micro-batch hides the gather ...
    c = dict(base, popular=900, unique_popular=100, unique_np_cold=10)
    phases = {p: (s, e) for _, p, s, e in step_timeline("hotline", HW, ROW_BYTES, FLOPS, **c)}
    assert phases["compute popular"][1] > phases["upload non-popular"][1]
    assert phases["compute non-popular"][0] == phases["compute popular"][1]
    # ... a large cold gather does not hide behind a short popular micro-batch
    c = dict(base, popular=10, unique_popular=10, unique_np_cold=1_000_000)
    phases = {p: (s, e) for _, p, s, e in step_timeline("hotline", HW, ROW_BYTES, FLOPS, **c)}
    assert phases["upload non-popular"][1] > phases["compute popular"][1]
    assert phases["compute non-popular"][0] == phases["upload non-popular"][1]


@given(st.integers(1, 5000), st.integers(1, 100_000))
@settings(max_examples=50, deadline=None)
def test_all_popular_without_cold_rows_is_the_accelerator_path(samples, unique) -> None:
    c = {"samples": samples, "popular": samples, "unique_all": unique, "unique_popular": unique,
         "unique_np_hot": 0, "unique_np_cold": 0}
    hotline = step_seconds("hotline", HW, ROW_BYTES, FLOPS, **c)
    assert hotline == pytest.approx(step_seconds("hot", HW, ROW_BYTES, FLOPS, **c), rel=1e-12)
    assert hotline == pytest.approx(_accel(unique) + _compute(samples) + DENSE + _accel(unique),
                                    rel=1e-12)
    lanes = {lane for lane, *_ in step_timeline("hotline", HW, ROW_BYTES, FLOPS, **c)}
    assert lanes == {"accelerator"}  # nothing crosses the link


def test_sync_seconds_and_bad_kind() -> None:
    assert sync_seconds(HW, ROW_BYTES, 0) == 0.0
    assert sync_seconds(HW, ROW_BYTES, 1000) == pytest.approx(_link(1000), rel=1e-12)
    c = {"samples": 4, "popular": 2, "unique_all": 8, "unique_popular": 3, "unique_np_hot": 1,
         "unique_np_cold": 4}
    with pytest.raises(ValueError):
        step_timeline("fae", HW, ROW_BYTES, FLOPS, **c)
    with pytest.raises(ValueError):
        step_seconds("hybrid-ish", HW, ROW_BYTES, FLOPS, **c)


# -- the trainer: parity of the schemes ------------------------------------------------------------
def test_data_has_popular_and_non_popular_samples() -> None:
    train, _, _, hot = toy_data()
    popular = popular_mask(train.keys, hot_mask(hot, ROWS))
    assert 0.1 < popular.mean() < 0.9


def test_hotline_equals_hybrid() -> None:
    hybrid = _cpu_run("hybrid", "none")
    hotline = _cpu_run("hotline", "hot")
    steps = hotline[3]
    assert len(steps) == STEPS and all(s.kind == "hotline" for s in steps)
    # both micro-batches ran (popular and non-popular samples in one mini-batch)
    assert any(0 < s.popular < s.samples for s in steps)
    assert all(s.counts.popular == s.popular for s in steps)
    assert all(s.popular == 0 and s.counts.popular == 0 for s in hybrid[3])
    _assert_same(hotline, hybrid)
    # every mini-batch read the same rows and parameters: the same training loss
    np.testing.assert_allclose([s.loss for s in steps], [s.loss for s in hybrid[3]],
                               rtol=1e-6, atol=0)
    # training moved the rows well beyond the tolerance, so parity is not vacuous
    assert np.abs(hybrid[0] - toy_data()[2]).max() > 100 * ATOL
    np.testing.assert_allclose(hotline[2]["auc"], hybrid[2]["auc"], rtol=0, atol=1e-6)
    # another initialisation is a different model: the comparison can fail
    other = _cpu_run("hybrid", "none", seed=1)
    assert _max_diff(other, hybrid) > 100 * ATOL
    assert np.abs(other[0] - hybrid[0]).max() > 100 * ATOL


def test_accel_only_equals_hybrid() -> None:
    hybrid = _cpu_run("hybrid", "none")
    accel = _cpu_run("accel_only", "all")
    assert all(s.kind == "hot" and s.popular == s.samples for s in accel[3])
    _assert_same(accel, hybrid)
    other = _cpu_run("accel_only", "all", seed=1)
    assert _max_diff(other, accel) > 100 * ATOL


def test_hotline_overlap_does_not_change_the_result() -> None:
    overlapped = _cpu_run("hotline", "hot")
    sequential = _cpu_run("hotline", "hot", overlap=False)
    assert np.array_equal(overlapped[0], sequential[0])
    for p, q in zip(overlapped[1], sequential[1], strict=True):
        assert np.array_equal(p, q)
    phases = {s.phase for step in overlapped[3] for s in step.spans}
    assert {"gather non-popular", "upload non-popular", "compute popular",
            "compute non-popular", "write-back"} <= phases


def test_online_reprofiling_equals_hybrid() -> None:
    # start with an empty hot set and re-profile every 2 mini-batches: set_hot moves rows
    # between the tiers mid-training without losing their updates
    hybrid = _cpu_run("hybrid", "none")
    online = _train("hotline", np.zeros(0, dtype=np.int64), online_every=2,
                    budget_bytes=24 * 4 * DIM)
    synced = [s.synced_rows for s in online[3]]
    assert all(synced[i] > 0 for i in (1, 3, 5)) and synced[0] == 0
    assert any(0 < s.popular < s.samples for s in online[3])
    _assert_same(online, hybrid)


def test_step_records_are_consistent() -> None:
    for scheme, hot in (("hybrid", "none"), ("hotline", "hot"), ("accel_only", "all")):
        metrics, steps = _cpu_run(scheme, hot)[2:4]
        assert metrics["step"].tolist() == [0, 3, STEPS]
        assert metrics["samples"].tolist() == [0, 3 * BATCH, STEPS * BATCH]
        assert metrics["wall_s"].is_monotonic_increasing
        for s in steps:
            assert s.samples == BATCH and s.wall_s > 0 and np.isfinite(s.loss)
            assert s.spans and all(sp.lane in LANES and sp.end >= sp.start for sp in s.spans)


def test_step_hot_rejects_cold_keys() -> None:
    train, _, table, hot = toy_data()
    trainer = TieredTrainer(SPEC, table, hot, seed=0)
    try:
        popular = popular_mask(train.keys, hot_mask(hot, ROWS))
        idx = np.flatnonzero(~popular)[:8]
        before = trainer.store.table().copy()
        with pytest.raises(ValueError, match="outside the accelerator tier"):
            trainer.step_hot(train.dense[idx], train.keys[idx], train.labels[idx])
        np.testing.assert_array_equal(trainer.store.table(), before)  # nothing was applied
        idx = np.flatnonzero(popular)[:8]
        record = trainer.step_hot(train.dense[idx], train.keys[idx], train.labels[idx])
        assert record.kind == "hot" and record.popular == len(idx)
        assert not np.array_equal(trainer.store.table(), before)
    finally:
        trainer.close()


def test_fae_trains_in_phases() -> None:
    train, _, _, hot = toy_data()
    is_hot = hot_mask(hot, ROWS)
    fae = _train("fae", hot, is_hot=is_hot, fae_phase_batches=2)
    metrics, steps = fae[2], fae[3]
    assert np.isfinite(metrics["auc"]).all() and np.isfinite(metrics["logloss"]).all()
    assert metrics["samples"].iloc[-1] == len(train)
    kinds = [s.kind for s in steps]
    assert {"hot", "hybrid"} <= set(kinds)
    assert sum(s.samples for s in steps if s.kind == "hot") == int(
        popular_mask(train.keys, is_hot).sum())
    assert all(s.popular == s.samples for s in steps if s.kind == "hot")
    # the phase switches move the hot rows between the tiers and are recorded
    assert any(s.synced_rows > 0 for s in steps)
    switches = [i for i in range(len(kinds)) if i == 0 or kinds[i] != kinds[i - 1]]
    assert all(steps[i].synced_rows == len(hot) for i in switches if i or kinds[0] == "hot")
    assert all(steps[i].synced_rows == 0 for i in range(len(kinds)) if i not in switches)
    # other order of the samples: another model than the hybrid baseline ...
    hybrid = _cpu_run("hybrid", "none")
    assert _max_diff(fae, hybrid) > 10 * ATOL
    # ... but the model of hybrid steps over FAE's mini-batches in FAE's order: the phase syncs
    # lose no update of either tier
    _, _, table, _ = toy_data()
    reference = TieredTrainer(SPEC, table, np.zeros(0, dtype=np.int64), seed=0)
    try:
        plan = fae_schedule(popular_mask(train.keys, is_hot), BATCH, 2)
        assert [k for k, _ in plan] == [{"hybrid": "normal"}.get(k, k) for k in kinds]
        for _, idx in plan:
            reference.step_hybrid(train.dense[idx], train.keys[idx], train.labels[idx])
        ref = (reference.store.table(),
               [p.detach().numpy().copy() for p in reference.model.parameters()])
    finally:
        reference.close()
    _assert_same(fae, ref)


def test_train_scheme_rejects_bad_arguments() -> None:
    train, test, table, hot = toy_data()
    trainer = TieredTrainer(SPEC, table, hot, seed=0)
    try:
        with pytest.raises(ValueError):
            train_scheme("gpu_only", trainer, train, test, Schedule(BATCH, 3))
        with pytest.raises(ValueError):
            train_scheme("fae", trainer, train, test, Schedule(BATCH, 3))
        with pytest.raises(ValueError, match="table of 3 rows"):
            TieredTrainer(SPEC, table[:3], hot, seed=0)
    finally:
        trainer.close()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
class TestCuda:
    """The same parity with the accelerator tier in device memory."""

    def test_hotline_on_cuda_equals_hybrid(self) -> None:
        _, _, _, hot = toy_data()
        hybrid = _train("hybrid", np.zeros(0, dtype=np.int64), device="cuda")
        hotline = _train("hotline", hot, device="cuda")
        info = hotline[4]
        assert info["hot_device"] == "cuda" and info["host_pinned"]
        assert info["param_device"] == "cuda"
        assert any(0 < s.popular < s.samples for s in hotline[3])
        # CUDA's index_add_ (atomics) and kernels add in another order than the CPU: 1e-4
        _assert_same(hotline, hybrid, atol=1e-4)
        # and the same model as on the CPU, to the same tolerance
        _assert_same(hybrid, _cpu_run("hybrid", "none"), atol=1e-4)

    def test_store_tiers_on_cuda(self) -> None:
        table = _table(20, 4)
        store = TieredEmbeddingStore(table, np.array([3, 7, 11]), device="cuda")
        assert store.hot.device.type == "cuda" and store.host.is_pinned()
        assert store.gather_host(torch.tensor([1, 2])).is_pinned()
        slots = store.slots(torch.tensor([7, 11]))
        assert slots.device.type == "cuda"
        store.update_hot(slots, torch.ones(2, 4, device="cuda"))
        expected = table.copy()
        expected[[7, 11]] += 1.0
        np.testing.assert_allclose(store.table(), expected, rtol=0, atol=1e-6)
        store.set_hot(np.array([0]))
        np.testing.assert_allclose(store.table(), expected, rtol=0, atol=1e-6)
        np.testing.assert_allclose(store.host.numpy(), expected, rtol=0, atol=1e-6)

    def test_every_scheme_on_cuda_equals_the_cpu(self) -> None:
        # Hotline without overlap, accelerator-only, online re-profiling (set_hot between steps)
        # and FAE (phase syncs between the tiers) on the GPU: the CPU trainer's model
        _, _, _, hot = toy_data()
        reference = _cpu_run("hybrid", "none")
        for scheme, keys, overlap in (("hotline", hot, False),
                                      ("accel_only", np.arange(ROWS), True)):
            _assert_same(_train(scheme, keys, device="cuda", overlap=overlap), reference,
                         atol=1e-4)
        online = _train("hotline", np.zeros(0, dtype=np.int64), device="cuda", online_every=2,
                        budget_bytes=24 * 4 * DIM)
        assert any(s.synced_rows > 0 for s in online[3])
        _assert_same(online, reference, atol=1e-4)
        is_hot = hot_mask(hot, ROWS)
        fae = _train("fae", hot, device="cuda", is_hot=is_hot, fae_phase_batches=2)
        _assert_same(fae, _train("fae", hot, is_hot=is_hot, fae_phase_batches=2), atol=1e-4)

    def test_cuda_spans_time_the_device_work(self) -> None:
        # the cold rows' upload runs on the side stream: its span is timed there with CUDA
        # events (not the host's enqueue), and every span lies within the step's wall time
        _, _, _, hot = toy_data()
        steps = _train("hotline", hot, device="cuda")[3]
        for step in steps:
            uploads = [s for s in step.spans if s.phase == "upload non-popular"]
            assert len(uploads) == 1 and uploads[0].lane == "link"
            assert uploads[0].end > uploads[0].start
            assert all(0 <= s.start <= s.end <= step.wall_s + 1e-3 for s in step.spans)
        assert {s.phase for s in steps[-1].spans} >= {"compute popular", "compute non-popular",
                                                      "gather non-popular", "dense update"}
