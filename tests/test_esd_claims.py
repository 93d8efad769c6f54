"""ESD's claims (register v8) from hand-made results: the cost against each baseline in each
unit, and the speedup at a target relative to the final AUC and in steady state."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from workbench.claims import esd
from workbench.claims.measurement import Results
from workbench.config import load

ITERATIONS = np.arange(10, 201, 10)
WARM = 60  # the caches' warm-up (cost.csv's warmup_batches)


def _auc(it: np.ndarray, shift: float = 0.0) -> np.ndarray:
    return 0.5 + 0.29 * (1 - np.exp(-it / 40.0)) + shift


def _results(tmp_path) -> Results:
    cfg = load(["profile=ci", f"paths.results={tmp_path}"])
    res = Results(cfg)
    base = pd.DataFrame({
        "sweep": "base", "dispatcher": ["random", "laia", "hybriddis"],
        "transfer_s_per_batch": [4.0, 2.0, 1.5], "rows_per_batch": [1000.0, 800.0, 700.0],
        "warmup_batches": [35, 40, WARM], "spread": 10.0, "cache_ratio": 0.05, "workers": 8,
        "predictor": "fitted"})
    # HybridDis alone under each predictor (the fitted one is the base point's run)
    swept = pd.DataFrame({"sweep": "predictor", "dispatcher": "hybriddis",
                          "predictor": ["fitted", "fixed"], "transfer_s_per_batch": [1.5, 1.8],
                          "rows_per_batch": [700.0, 750.0], "warmup_batches": WARM,
                          "spread": 10.0, "cache_ratio": 0.05, "workers": 8})
    base = pd.concat([base, swept], ignore_index=True)
    curves = []
    for rep in range(3):
        laia_t = 2.0 * ITERATIONS
        # HybridDis: as slow as LAIA in the warm-up, then half LAIA's time per iteration
        hyb_t = np.where(ITERATIONS <= WARM, laia_t, 2.0 * WARM + 1.0 * (ITERATIONS - WARM))
        for name, t, shift in (("laia", laia_t, 0.0), ("hybriddis", hyb_t, 0.001 * rep)):
            curves.append(pd.DataFrame({"dispatcher": name, "iteration": ITERATIONS,
                                        "test_auc": _auc(ITERATIONS, shift), "time_s": t,
                                        "decision_s": 0.0, "replicate": rep, "seed": rep}))
    summary = {"dataset": "synthetic", "table_rows": 1000, "wire_dim": 512, "skipped": {},
               "train": {"target_auc": 0.77, "runs": [], "replicates": [],
                         "dense_mode": "after_backward"}}
    res.memo("esd", lambda: {"summary": summary, "cost": base, "modes": pd.DataFrame(),
                             "curves": pd.concat(curves, ignore_index=True)})
    return res


def _time_at(auc: np.ndarray, t: np.ndarray, target: float) -> float:
    return float(np.interp(target, np.r_[0.5, auc], np.r_[0.0, t]))


def test_the_speedup_is_read_at_the_pairs_final_auc_minus_delta(tmp_path) -> None:
    res = _results(tmp_path)
    assert esd.warmup_iterations(res) == WARM
    ratios, targets = esd.relative_speedups(res, 0.01)
    laia_t = 2.0 * ITERATIONS
    hyb_t = np.where(ITERATIONS <= WARM, laia_t, 2.0 * WARM + 1.0 * (ITERATIONS - WARM))
    for rep, (ratio, target) in enumerate(zip(ratios, targets, strict=True)):
        lower = min(_auc(ITERATIONS)[-1], _auc(ITERATIONS, 0.001 * rep)[-1])
        assert target == pytest.approx(lower - 0.01)
        expect = (_time_at(_auc(ITERATIONS), laia_t, target)
                  / _time_at(_auc(ITERATIONS, 0.001 * rep), hyb_t, target))
        assert ratio == pytest.approx(expect)
        assert 1.0 < ratio < 2.0  # past the warm-up, short of the steady 2x
    # the steady state: (t_last - t_at_warm-up) / iterations, LAIA 2 s, HybridDis 1 s
    assert esd.steady_speedups(res) == pytest.approx([2.0, 2.0, 2.0])
    low, high = esd.relative_speedups(res, 0.02)[0], esd.relative_speedups(res, 0.002)[0]
    assert all(a < b for a, b in zip(low, high, strict=True))  # later targets gain more


def test_the_cost_is_stated_against_each_baseline_in_each_unit(tmp_path) -> None:
    res = _results(tmp_path)

    class Entry:
        key, ours, paper_table = "esd.cost", {}, {}

    m = esd.cost(res, Entry())
    assert m.payload["values"] == [pytest.approx(0.25)]
    by = {name: {p["value"]: p["values"][0] for p in points}
          for name, points in m.conditions.items() if name in ("baseline", "unit")}
    assert by["baseline"] == {"laia": pytest.approx(0.25), "random": pytest.approx(0.625)}
    assert by["unit"] == {"weighted seconds": pytest.approx(0.25),
                          "rows moved": pytest.approx(0.125)}
    assert "vs random in rows moved: 30.0%" in m.note
    predictor = {p["value"]: p["values"][0] for p in m.conditions["HybridDis predictor"]}
    assert predictor == {"fitted": pytest.approx(0.25), "fixed": pytest.approx(0.1)}


def test_the_notebooks_table_holds_the_claims_values(tmp_path) -> None:
    res = _results(tmp_path)
    table = esd.replicate_table(res)
    timed = table[table["unit"] == esd.UNITS[0]]
    assert len(timed) == 3 * len(esd.TARGET_OFFSETS)
    committed = timed[timed["delta"] == esd.TARGET_OFFSET]["speedup"].tolist()
    assert committed == pytest.approx(esd.relative_speedups(res, esd.TARGET_OFFSET)[0])
    assert table[table["unit"] == esd.UNITS[1]]["speedup"].tolist() == pytest.approx([2.0] * 3)
