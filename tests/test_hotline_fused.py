"""Hotline's accelerator-path machinery: the micro-batch plan, the fused gather and update, the
prefetched split and the captured micro-batch step, each against a plain reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hotline_toy import BATCH, FLOPS, HW, ROW_BYTES, ROWS, SPEC, _cpu_run, _train, toy_data
from workbench.cluster.accelerator_time import step_seconds, step_timeline
from workbench.cluster.tiered_store import TieredEmbeddingStore
from workbench.training.capture import CAPTURES, Capture, MicroBatchStep, bucket
from workbench.training.hotline import TieredTrainer
from workbench.training.hotline_epoch import Schedule, train_scheme
from workbench.training.microbatch_plan import plan_minibatch, subset_unique


# -- the plan --------------------------------------------------------------------------------------
@st.composite
def batches(draw):
    rows = draw(st.integers(1, 30))
    b, f = draw(st.integers(1, 12)), draw(st.integers(1, 4))
    keys = np.array(draw(st.lists(st.integers(0, rows - 1), min_size=b * f, max_size=b * f)),
                    dtype=np.int64).reshape(b, f)
    hot = np.array(draw(st.lists(st.booleans(), min_size=rows, max_size=rows)))
    return keys, hot


@settings(max_examples=150, deadline=None)
@given(batches())
def test_plan_equals_a_sort_per_micro_batch(case) -> None:
    keys, hot = case
    slot = np.where(hot, np.cumsum(hot) - 1, -1).astype(np.int64)
    plan = plan_minibatch(keys, slot, int(hot.sum()), version=3)
    popular = hot[keys].all(axis=1)
    assert plan.pop_idx.tolist() == np.flatnonzero(popular).tolist()
    assert plan.np_idx.tolist() == np.flatnonzero(~popular).tolist()
    for sel, uniq, inv in ((popular, plan.uniq_p, plan.inv_p), (~popular, plan.uniq_n,
                                                                 plan.inv_n)):
        u, i = np.unique(keys[sel], return_inverse=True)
        assert uniq.tolist() == u.tolist()
        assert inv.tolist() == i.reshape(keys[sel].shape).tolist()
    assert plan.slots_p.tolist() == slot[plan.uniq_p.numpy()].tolist()
    cold = plan.uniq_n.numpy()[~hot[plan.uniq_n.numpy()]]
    assert plan.cold_keys.tolist() == cold.tolist()
    # sources: the slot of a hot key, H + its rank among the cold keys for a cold one
    expected = [slot[k] if hot[k] else hot.sum() + cold.tolist().index(k)
                for k in plan.uniq_n.tolist()]
    assert plan.sources_n.tolist() == expected and plan.version == 3


def test_subset_unique_example() -> None:
    uniq, inv = np.unique(np.array([[5, 2], [9, 5], [2, 2]]), return_inverse=True)
    keys, sub, used = subset_unique(uniq, inv.reshape(3, 2), np.array([1, 2]))
    assert keys.tolist() == [2, 5, 9] and sub.tolist() == [[2, 1], [0, 0]]
    assert used.tolist() == [True, True, True]
    keys, sub, used = subset_unique(uniq, inv.reshape(3, 2), np.array([2]))
    assert keys.tolist() == [2] and sub.tolist() == [[0, 0]] and used.tolist() == [True, 0, 0]


# -- the fused gather and update -------------------------------------------------------------------
def test_fused_gather_and_update_equal_the_separate_ones() -> None:
    rng = np.random.default_rng(0)
    table = rng.normal(size=(20, 3)).astype(np.float32)
    hot = np.array([2, 7, 11])
    a, b = TieredEmbeddingStore(table, hot), TieredEmbeddingStore(table, hot)
    keys = torch.tensor([1, 2, 5, 11, 13])  # hot 2 and 11, cold 1, 5, 13
    cold = torch.tensor([1, 5, 13])
    b.reserve_staging(2)
    b.reserve_staging(3)  # grows: the hot tier survives the move
    assert torch.equal(b.hot, a.hot)
    b.stage(b.gather_host(cold))
    sources = torch.tensor([3, 0, 4, 2, 5])  # cold at H + rank, hot at their slots
    rows = b.gather_fused(sources)
    assert torch.equal(rows, torch.from_numpy(table)[keys])
    delta = torch.from_numpy(rng.normal(size=(5, 3)).astype(np.float32))
    # the separate path: hot rows in place, cold deltas added on the host
    a.update_hot(a.slots(torch.tensor([2, 11])), delta[[1, 3]])
    a.update_host(cold, delta[[0, 2, 4]])
    b.update_fused(sources, delta)
    b.write_host(cold, b.download(b.staged(3)))
    assert np.array_equal(a.table(), b.table())  # bitwise: the same float32 additions
    with pytest.raises(ValueError, match="reserve_staging"):
        b.stage(torch.zeros((b.staged(10**6).shape[0] + 1, 3)))  # past the area


def _reference_step(trainer: TieredTrainer, dense, keys, labels) -> None:
    """Hotline's step as it was before the plan and the fused gather: a sort per micro-batch,
    separate hot and cold gathers, separate updates (sequential)."""
    store, total = trainer.store, len(labels)
    keys_t = torch.from_numpy(keys)
    popular = store.is_hot(keys_t).all(dim=1).numpy()
    d, y = torch.from_numpy(dense), torch.from_numpy(labels)
    updates, cold_update = [], None
    for sel in (popular, ~popular):
        if not sel.any():
            continue
        idx = torch.from_numpy(np.flatnonzero(sel))
        uniq, inv = np.unique(keys[sel], return_inverse=True)
        uniq_t = torch.from_numpy(uniq)
        hot = store.is_hot(uniq_t)
        rows = torch.empty((len(uniq), store.dim))
        rows[hot] = store.gather_hot(store.slots(uniq_t[hot]))
        rows[~hot] = store.upload(store.gather_host(uniq_t[~hot]))
        delta, _ = trainer.micro(rows, torch.from_numpy(inv.reshape(-1, keys.shape[1])),
                                 d[idx], y[idx], total)
        updates.append((store.slots(uniq_t[hot]), delta[hot]))
        if (~hot).any():
            cold_update = (uniq_t[~hot], delta[~hot])
    trainer._dense_step()
    for slots, delta in updates:
        store.update_hot(slots, delta)
    if cold_update is not None:
        store.update_host(cold_update[0], store.download(cold_update[1]))


def test_hotline_step_is_bitwise_the_unfused_reference() -> None:
    train, _, table, hot = toy_data()
    new, ref = TieredTrainer(SPEC, table, hot), TieredTrainer(SPEC, table, hot)
    try:
        steps = len(train) // BATCH
        for t in range(steps):
            sl, nxt = slice(t * BATCH, (t + 1) * BATCH), slice((t + 1) * BATCH, (t + 2) * BATCH)
            args = (train.dense[sl], train.keys[sl], train.labels[sl])
            # the next keys are planned during the step; on the last step, other keys than the
            # ones stepped next (the plan must not be used for the wrong mini-batch)
            record = new.step_hotline(*args, train.keys[nxt] if t < steps - 1 else
                                      train.keys[:BATCH] + 1)
            waited = {s.phase for s in record.spans} & {"classify", "wait for classify"}
            assert waited == {"classify" if t == 0 else "wait for classify"}
            assert 0 < record.popular < BATCH  # both micro-batches ran
            _reference_step(ref, *args)
        assert np.array_equal(new.store.table(), ref.store.table())
        for p, q in zip(new.model.parameters(), ref.model.parameters(), strict=True):
            assert torch.equal(p, q)
        assert np.abs(new.store.table() - table).max() > 1e-3  # training moved the rows
    finally:
        new.close()
        ref.close()


def test_a_plan_made_before_a_reprofile_is_made_again() -> None:
    # online re-profiling every 2 mini-batches: the plan prefetched during the re-profiled step
    # is stale; the step after it classifies on the critical path (as the first step, which
    # had no previous one), the others only wait. Planned in line (overlap=False), so the plan
    # is always made before the re-profile: a planner thread scheduled after it (a loaded
    # machine) makes a current plan, which the step rightly uses
    steps = _train("hotline", np.zeros(0, dtype=np.int64), online_every=2,
                   budget_bytes=24 * 4 * 8, overlap=False)[3]
    phases = [{s.phase for s in step.spans} & {"classify", "wait for classify"}
              for step in steps]
    assert phases == [{"classify"}, {"wait for classify"}] * 3
    assert all(step.plan_s > 0 for step in steps)
    # and the prefetched run is the sequential one, bitwise
    sequential = _cpu_run("hotline", "hot", overlap=False)
    overlapped = _cpu_run("hotline", "hot")
    assert np.array_equal(sequential[0], overlapped[0])


# -- the captured micro-batch step -----------------------------------------------------------------
def test_bucket() -> None:
    assert [bucket(n, 16) for n in (0, 1, 16, 17, 64, 65)] == [16, 16, 16, 32, 64, 128]


def test_cuda_graphs_need_cuda_and_names_the_choices() -> None:
    assert set(CAPTURES) == {"eager", "compile", "cuda_graphs"}
    with pytest.raises(ValueError, match="needs a CUDA device"):
        MicroBatchStep(torch.nn.Linear(1, 1), CAPTURES["cuda_graphs"], torch.device("cpu"), 0.1)


def test_a_captured_padded_step_equals_the_eager_one() -> None:
    # torch.compile's graph capture (backend aot_eager: the autograd graph without code
    # generation, quick) on padded shapes: the same model to float32 rounding
    train, test, table, hot = toy_data()
    runs = {}
    for name, capture in (("eager", CAPTURES["eager"]),
                          ("captured", Capture("aot", backend="aot_eager"))):
        trainer = TieredTrainer(SPEC, table, hot, capture=capture)
        try:
            train_scheme("hotline", trainer, train, test, Schedule(BATCH, 3))
            runs[name] = (trainer.store.table(), [p.detach().clone()
                                                  for p in trainer.model.parameters()],
                          trainer.micro.shapes)
        finally:
            trainer.close()
    shapes = runs["captured"][2]
    assert shapes and all(b & (b - 1) == 0 and u & (u - 1) == 0 for b, u in shapes)
    assert len(shapes) < 2 * (len(train) // BATCH)  # far fewer graphs than micro-batches
    np.testing.assert_allclose(runs["captured"][0], runs["eager"][0], rtol=0, atol=1e-6)
    for p, q in zip(runs["captured"][1], runs["eager"][1], strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=1e-6)
    assert np.abs(runs["eager"][0] - table).max() > 1e-3
    assert ROWS == table.shape[0]


# -- the time model's host split -------------------------------------------------------------------
def test_the_modelled_split_runs_beside_the_step_and_bounds_it() -> None:
    from dataclasses import replace


    c = {"samples": 1000, "popular": 500, "unique_all": 900, "unique_popular": 300,
         "unique_np_hot": 200, "unique_np_cold": 400, "lookups": 26_000}
    base = step_seconds("hotline", HW, ROW_BYTES, FLOPS, **c)
    assert HW.host_split_ns_per_lookup == 0.0  # the configured servers: no split on the step
    cheap = replace(HW, host_split_ns_per_lookup=base * 1e9 / c["lookups"] / 2)
    slow = replace(HW, host_split_ns_per_lookup=base * 1e9 / c["lookups"] * 2)
    assert step_seconds("hotline", cheap, ROW_BYTES, FLOPS, **c) == pytest.approx(base)
    assert step_seconds("hotline", slow, ROW_BYTES, FLOPS, **c) == pytest.approx(2 * base)
    phases = [p for p in step_timeline("hotline", slow, ROW_BYTES, FLOPS, **c)
              if p[0] == "planner"]
    assert phases == [("planner", "classify next", 0.0, pytest.approx(2 * base))]
    for kind in ("hybrid", "hot"):  # only Hotline splits its mini-batches
        assert (step_seconds(kind, slow, ROW_BYTES, FLOPS, **c)
                == step_seconds(kind, HW, ROW_BYTES, FLOPS, **c))


def test_the_stage_refuses_cuda_graphs_without_cuda() -> None:
    from workbench.experiments.config import HotlineConfig
    from workbench.experiments.hotline import _device
    from workbench.utils.validation import ConfigError

    assert _device(HotlineConfig(capture="compile")) == "cpu"
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match=r"capture = 'cuda_graphs' needs a CUDA device"):
            _device(HotlineConfig(capture="cuda_graphs", device="auto"))


def _captured_against_eager(capture: Capture, device: str) -> float:
    """Max |difference| of the table and dense parameters: Hotline with ``capture`` against
    the eager CPU run, one epoch of the toy data."""
    train, test, table, hot = toy_data()
    out = []
    for cap, dev in ((CAPTURES["eager"], "cpu"), (capture, device)):
        trainer = TieredTrainer(SPEC, table, hot, capture=cap, device=dev)
        try:
            train_scheme("hotline", trainer, train, test, Schedule(BATCH, 3))
            out.append([trainer.store.table(), *[p.detach().cpu().numpy()
                                                 for p in trainer.model.parameters()]])
        finally:
            trainer.close()
    return max(float(np.abs(a - b).max()) for a, b in zip(*out, strict=True))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_graphs_step_equals_the_eager_cpu_one() -> None:
    assert _captured_against_eager(CAPTURES["cuda_graphs"], "cuda") < 1e-4
