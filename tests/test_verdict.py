"""Verdict rules on hand-made cases: every state, band edges, ranges, inverted factors, NaN."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workbench.claims import verdict as v
from workbench.claims.verdict import (
    CONTRADICTED,
    DIRECTION_ONLY,
    NOT_BUILT,
    NOT_COMPARABLE,
    REPRODUCED,
    TIE,
    Verdict,
)


def test_states_in_report_order() -> None:
    assert v.STATES == ("reproduced", "direction only", "tie", "modelled", "contradicted",
                        "not comparable", "not built")
    assert [state for state, _ in v.DEFINITIONS] == list(v.STATES)
    assert list(v.SUMMARIES) == list(v.STATES)  # one short phrase each, for the index
    assert all(0 < len(text) <= 60 and "|" not in text for text in v.SUMMARIES.values())
    with pytest.raises(ValueError, match="unknown verdict state"):
        Verdict("holds", "")


# --- factor ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("measured", "paper", "state"), [
    (8.2, 8.2, REPRODUCED),
    (4.6, 8.2, REPRODUCED),        # gain 3.6 = 0.5 x 7.2: the band edge counts
    (15.4, 8.2, REPRODUCED),       # gain 14.4 = 2 x 7.2
    (4.59, 8.2, DIRECTION_ONLY),
    (15.41, 8.2, DIRECTION_ONLY),
    (2.81, 8.2, DIRECTION_ONLY),
    (0.8, 8.2, CONTRADICTED),
    (1.005, 8.2, TIE),             # within the default 1% of 1x
    (0.995, 8.2, TIE),
    (1.02, 8.2, DIRECTION_ONLY),
])
def test_factor_states(measured: float, paper: float, state: str) -> None:
    assert v.factor(measured, paper).state == state


def test_factor_rule_text_names_the_numbers() -> None:
    rule = v.factor(2.81, 8.2).rule
    assert rule == ("direction only: 2.81x; its gain is 0.25x the paper's (+7.2 for 8.2x); "
                    "band 0.5x-2x on the gain: 4.60x-15.40x")
    # a value just outside the band never prints as the band edge
    assert "2.001x" in v.factor(15.41, 8.2).rule


def test_factor_range_uses_the_nearest_end() -> None:
    inside = v.factor(4.8, (4.4, 5.1))
    assert inside.state == REPRODUCED and "1.00x the paper's (+3.4-4.1 for 4.4-5.1x)" in inside.rule
    assert v.factor(2.7, (4.4, 5.1)).state == REPRODUCED      # gain 1.7 = 0.5 x 3.4
    assert v.factor(2.69, (4.4, 5.1)).state == DIRECTION_ONLY
    assert v.factor(9.2, (4.4, 5.1)).state == REPRODUCED     # gain 8.2 = 2 x 4.1
    assert v.factor(9.3, (4.4, 5.1)).state == DIRECTION_ONLY


def test_small_paper_factor_uses_the_gain() -> None:
    weak = v.factor(1.06, 1.74)
    assert weak.state == DIRECTION_ONLY and "on the gain" in weak.rule
    assert v.factor(1.37, 1.74).state == REPRODUCED   # gain 0.37 = 0.5 x 0.74
    assert v.factor(1.36, 1.74).state == DIRECTION_ONLY
    assert v.factor(2.48, 1.74).state == REPRODUCED   # gain 1.48 = 2 x 0.74
    assert v.factor(2.5, 1.74).state == DIRECTION_ONLY


def smallest_passing(paper: float) -> float:
    """The smallest measured factor that reproduces ``paper`` (bisection on the verdict)."""
    lo, hi = 1.0, paper
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if v.factor(mid, paper).state == REPRODUCED else (mid, hi)
    return hi


def test_factor_rule_is_continuous_in_the_paper_value() -> None:
    # one rule for every factor: the smallest passing value is 1 + 0.5 (paper - 1), with no
    # jump anywhere, in particular not at 2x (the old switch between two rules)
    papers = np.linspace(1.2, 12.0, 109)
    edges = np.array([smallest_passing(p) for p in papers])
    np.testing.assert_allclose(edges, 1 + 0.5 * (papers - 1), rtol=1e-6)
    assert np.abs(np.diff(edges)).max() < 0.06  # steps of 0.1 in the paper value
    around_two = [smallest_passing(p) for p in (1.99, 2.0, 2.01)]
    assert around_two == pytest.approx([1.495, 1.5, 1.505], rel=1e-6)


@pytest.mark.parametrize("paper", [2.0, 2.01, 2.5, 3.0, 5.14])
def test_a_small_factor_never_reproduces_a_large_one(paper: float) -> None:
    assert v.factor(1.02, paper).state == DIRECTION_ONLY
    assert v.factor([1.0, 1.02, 1.04], paper).state != REPRODUCED


def test_estimate_over_seeds() -> None:
    est = v.Estimate.of([2.0, 2.2, 2.4])
    assert est is not None and est.n == 3 and est.mean == pytest.approx(2.2)
    assert est.hi - est.mean == pytest.approx(4.302653 * 0.2 / math.sqrt(3), rel=1e-5)
    assert v.Estimate.of([1.5]) == v.Estimate(1.5, 1.5, 1.5, 1)
    assert v.Estimate.of([1.5, 1.5]) == v.Estimate(1.5, 1.5, 1.5, 2)
    assert v.Estimate.of([1.0, float("nan")]) is None
    assert "95% CI" in est.text(lambda x: f"{x:.2f}x") and "n = 3" in est.text(str)


def test_factor_interval_decides() -> None:
    # the mean is inside the band (gain 0.9 vs 1.2) but the interval reaches below 1.6x
    wide = v.factor([1.5, 1.7, 1.9, 2.1, 2.3], 2.2)
    assert wide.state == DIRECTION_ONLY and "95% CI" in wide.rule
    assert wide.rule.startswith("direction only (on the band's edge")  # the rounds can't tell
    assert v.factor([1.85, 1.9, 1.95], 2.2).state == REPRODUCED
    far = v.factor([1.05, 1.06, 1.07], 2.2)  # wholly outside the band: no edge
    assert far.state == DIRECTION_ONLY and "edge" not in far.rule
    # an interval that holds 1x is a tie, even with a mean well above it
    assert v.factor([0.9, 1.5, 2.1], 2.2).state == TIE
    assert v.factor([0.6, 0.7, 0.8], 2.2).state == CONTRADICTED
    # percent: the whole interval within 10 points
    straddles = v.percent([0.30, 0.36, 0.42], 0.3676)
    assert straddles.state == DIRECTION_ONLY and "on the band's edge" in straddles.rule
    assert "edge" not in v.percent([0.05, 0.06, 0.07], 0.3676).rule
    assert v.percent([0.34, 0.36, 0.38], 0.3676).state == REPRODUCED
    assert v.percent([-0.02, 0.01, 0.04], 0.3676).state == TIE


def test_decline_over_seeds() -> None:
    paper = [0.7964, 0.7962, 0.7884, 0.7461]
    seeds = [[0.7814, 0.7814, 0.7812, 0.7168], [0.7820, 0.7818, 0.7815, 0.7180],
             [0.7810, 0.7811, 0.7809, 0.7150]]
    out = v.decline(seeds, paper)
    assert out.state == REPRODUCED and "n = 3" in out.rule
    noisy = [[0.78, 0.78, 0.78, 0.79], [0.78, 0.78, 0.78, 0.70], [0.78, 0.78, 0.78, 0.77]]
    assert v.decline(noisy, paper).state == TIE


def test_factor_below_one_is_compared_as_inverse() -> None:
    assert v.factor(0.4, 0.25).state == REPRODUCED        # 2.5x vs 4x: gain 1.5 = 0.5 x 3
    assert v.factor(0.5, 0.25).state == DIRECTION_ONLY    # 2x vs 4x
    assert v.factor(1 / 7, 0.25).state == REPRODUCED      # 7x vs 4x: gain 6 = 2 x 3
    assert v.factor(0.125, 0.25).state == DIRECTION_ONLY  # 8x vs 4x
    assert v.factor(1.5, 0.25).state == CONTRADICTED
    assert "is above 1x" in v.factor(1.5, 0.25).rule
    assert v.factor(0.995, 0.25).state == TIE


def test_factor_tie_names_noise_or_tolerance() -> None:
    stated = v.factor(1.03, 2.49, tie_tolerance=0.05)
    assert stated.state == TIE and "stated tolerance" in stated.rule
    noisy = v.factor(1.03, 2.49, noise=0.04)
    assert noisy.state == TIE and "measured noise" in noisy.rule
    assert v.factor(1.06, 2.49, noise=0.04).state == DIRECTION_ONLY
    assert v.factor(1.03, 2.49, noise=float("nan")).state == DIRECTION_ONLY  # NaN noise ignored


@pytest.mark.parametrize("measured", [None, float("nan"), math.inf, "n/a"])
def test_factor_missing_is_not_comparable(measured: object) -> None:
    out = v.factor(measured, 5.14, missing="Cache s=100 never reached the target AUC")
    assert out == Verdict(NOT_COMPARABLE,
                          "not measured: Cache s=100 never reached the target AUC")


def test_factor_nonpositive_measured_is_not_comparable() -> None:
    out = v.factor(-2.0, 5.0)
    assert out.state == NOT_COMPARABLE and "positive" in out.rule


@pytest.mark.parametrize("paper", [1.0, 0.0, -2.0, (0.8, 1.2), (5.0, 4.0), float("nan")])
def test_factor_rejects_bad_paper_values(paper: object) -> None:
    with pytest.raises(ValueError):
        v.factor(2.0, paper)  # type: ignore[arg-type]


def test_factor_rejects_bad_band() -> None:
    with pytest.raises(ValueError, match="band"):
        v.factor(2.0, 3.0, band=(1.5, 2.0))


# --- percent --------------------------------------------------------------------------------

@pytest.mark.parametrize(("measured", "paper", "kwargs", "state"), [
    (0.3676, 0.3676, {}, REPRODUCED),
    (0.2676, 0.3676, {}, REPRODUCED),          # exactly 10 points below
    (0.4676, 0.3676, {}, REPRODUCED),          # exactly 10 points above
    (0.2675, 0.3676, {}, DIRECTION_ONLY),
    (-0.05, 0.3676, {}, CONTRADICTED),         # the cost went up
    (0.0, 0.3676, {}, TIE),                    # exactly the baseline
    (0.004, 0.3676, {"tie_tolerance": 0.5}, TIE),
    (0.004, 0.3676, {"noise": 1.0}, TIE),
    (0.755, 0.9, {"baseline": 0.1}, DIRECTION_ONLY),
    (0.962, 0.9, {"baseline": 0.1}, REPRODUCED),
    (0.05, 0.9, {"baseline": 0.1}, CONTRADICTED),
    (0.674, 0.76, {"baseline": 0.5}, REPRODUCED),
    (0.45, 0.76, {"baseline": 0.5}, CONTRADICTED),
    (0.80, (0.85, 0.95), {}, REPRODUCED),      # 5 points below the range
    (0.97, (0.85, 0.95), {}, REPRODUCED),
    (0.70, (0.85, 0.95), {"points": 5}, DIRECTION_ONLY),
])
def test_percent_states(measured: float, paper: object, kwargs: dict, state: str) -> None:
    assert v.percent(measured, paper, **kwargs).state == state  # type: ignore[arg-type]


def test_percent_rule_text() -> None:
    assert v.percent(0.755, 0.9, baseline=0.1).rule == (
        "direction only: 75.5% is 14.5 points from the paper's 90% at most; band +-10 points")
    assert "measured noise 1 points" in v.percent(0.004, 0.3676, noise=1.0).rule
    assert v.percent(None, 0.9).rule == "not measured: no finite measured value"


@pytest.mark.parametrize(("paper", "baseline"), [(1.2, 0.0), (0.0, 0.0), ((0.05, 0.2), 0.1),
                                                 (-0.1, 0.0)])
def test_percent_rejects_bad_paper_values(paper: object, baseline: float) -> None:
    with pytest.raises(ValueError):
        v.percent(0.5, paper, baseline=baseline)  # type: ignore[arg-type]


# --- less -----------------------------------------------------------------------------------

def test_less_states() -> None:
    lru = np.array([0.40, 0.29, 0.14, 0.05])
    names = ("LFU", "LRU")
    assert v.less(lru - 0.02, lru, paper_gap=(1, 8), names=names).state == REPRODUCED
    assert v.less(lru - 0.005, lru, paper_gap=(1, 8)).state == TIE   # tie bound inclusive
    assert v.less(lru - 0.005, lru, paper_gap=(1, 8), tie_tolerance=0.1).state == REPRODUCED
    assert v.less(lru - 0.0049, lru, paper_gap=(1, 8),
                  tie_tolerance=0.1).state == DIRECTION_ONLY   # under 0.5 x 1 point
    assert v.less(lru - 0.16, lru, paper_gap=(1, 8)).state == REPRODUCED    # 2 x 8 points
    big = v.less(lru - 0.2, lru, paper_gap=(1, 8), names=names)
    assert big.state == DIRECTION_ONLY and "LFU lower by 20-20 points" in big.rule
    tie = v.less(lru - 0.002, lru, paper_gap=(1, 8), names=names)
    assert tie.state == TIE and "stated tolerance 0.5 points" in tie.rule
    # one point a tie, the others lower: the claim's magnitude fails at that point
    mixed = v.less(lru - np.array([0.02, 0.02, 0.02, 0.001]), lru, paper_gap=(1, 8))
    assert mixed.state == DIRECTION_ONLY and "3 of 4 points" in mixed.rule
    wrong = v.less(lru + np.array([0, 0, 0.01, 0]), lru, paper_gap=(1, 8),
                   labels=["3%", "5%", "10%", "15%"], names=names)
    assert wrong.state == CONTRADICTED and "10%: +1" in wrong.rule
    assert v.less(0.30, 0.31, paper_gap=2.0, tie_tolerance=0.0).state == REPRODUCED


def test_less_missing_and_bad_input() -> None:
    assert v.less([0.1, np.nan], [0.2, 0.3], paper_gap=(1, 8)).state == NOT_COMPARABLE
    assert v.less([], [], paper_gap=(1, 8)).state == NOT_COMPARABLE
    with pytest.raises(ValueError, match="differ in length"):
        v.less([0.1, 0.2], [0.2], paper_gap=(1, 8))
    with pytest.raises(ValueError, match="positive"):
        v.less([0.1], [0.2], paper_gap=(-1, 8))


# --- close ----------------------------------------------------------------------------------

def test_close() -> None:
    lfu = np.array([0.39, 0.27, 0.12, 0.03])
    assert v.close(lfu + 0.02, lfu, tolerance=2).state == REPRODUCED      # edge counts
    far = v.close(lfu + np.array([0, 0.03, 0, 0]), lfu, tolerance=2, names=("LFUOpt", "LFU"))
    assert far.state == CONTRADICTED and "max |LFUOpt - LFU| = 3 points" in far.rule
    assert v.close([np.nan], [0.1], tolerance=2).state == NOT_COMPARABLE


# --- decline --------------------------------------------------------------------------------

PAPER_T2 = [0.7964, 0.7962, 0.7884, 0.7461]
LABELS = ["s=0", "s=100", "s=10k", "s=inf"]


def test_decline_states() -> None:
    ok = v.decline([0.7814, 0.7814, 0.7812, 0.7168], PAPER_T2, labels=LABELS)
    assert ok.state == REPRODUCED
    assert "drops 6.46 points from s=0 to s=inf" in ok.rule and "1.28x" in ok.rule
    small = v.decline([0.78, 0.78, 0.779, 0.77], PAPER_T2)          # 1 point vs 5.03
    assert small.state == DIRECTION_ONLY
    bumpy = v.decline([0.78, 0.785, 0.779, 0.75], PAPER_T2, labels=LABELS)
    assert bumpy.state == DIRECTION_ONLY and "rises by more than 0.1 points at s=100" in bumpy.rule
    assert v.decline([0.78, 0.7805, 0.78, 0.75], PAPER_T2).state == REPRODUCED  # within slack
    # the shape counts: a sharp drop already at s=100 is not "sharply only when unbounded"
    early = v.decline([0.7903, 0.7559, 0.7311, 0.7311], PAPER_T2, labels=LABELS)
    assert early.state == DIRECTION_ONLY
    assert "the drop to s=100 is 3.44 points against the paper's 0.02" in early.rule
    assert v.decline([0.7903, 0.7559, 0.7311, 0.7311], PAPER_T2,
                     shape_points=6.0).state == REPRODUCED
    assert v.decline([0.78, 0.78, 0.78, 0.778], PAPER_T2).state == TIE
    assert v.decline([0.78, 0.78, 0.78, 0.79], PAPER_T2).state == CONTRADICTED
    # the band edges: a drop of exactly half and exactly twice the paper's
    assert v.decline([0.8, 0.8 - 0.02515], PAPER_T2[::3]).state == REPRODUCED
    assert v.decline([0.8, 0.8 - 0.1006], PAPER_T2[::3]).state == REPRODUCED
    assert v.decline([0.8, 0.8 - 0.1007], PAPER_T2[::3]).state == DIRECTION_ONLY


def test_decline_missing_and_bad_input() -> None:
    out = v.decline([0.78, np.nan, 0.77, 0.7], PAPER_T2, missing="s=100 run failed")
    assert out == Verdict(NOT_COMPARABLE, "not measured: s=100 run failed")
    with pytest.raises(ValueError, match="fall"):
        v.decline([0.8, 0.7], [0.7, 0.8])
    with pytest.raises(ValueError, match="differ in length"):
        v.decline([0.8, 0.7], PAPER_T2)


# --- not comparable, not built --------------------------------------------------------------

def test_not_comparable_and_not_built() -> None:
    assert v.not_comparable("TF Parallax's overheads are not emulated") == Verdict(
        NOT_COMPARABLE, "not comparable: TF Parallax's overheads are not emulated")
    assert v.not_built("Hotline's pipeline") == Verdict(NOT_BUILT,
                                                        "not built: Hotline's pipeline")
