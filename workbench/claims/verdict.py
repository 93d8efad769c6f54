"""Verdicts: whether a measured value reproduces a paper's claim, in direction and in magnitude.

Every claim row carries one of [`STATES`][], decided by a pure function for its kind of claim.
Each returns a [`Verdict`][]: the state and the rule that decided it, in words, with the
numbers (e.g. ``"direction only: 2.81x is 0.34x of the paper's 8.2x; band 0.5x-2x"``).

Formal rule, applied in this order (``e`` is the measured effect, ``e*`` the paper's):

    measured missing (None, NaN, inf)             -> not comparable  ("not measured: ...")
    |e| <= max(tolerance, noise)                  -> tie             (the rule names which)
    sign(e) != sign(e*)                           -> contradicted
    magnitude within the band around e*           -> reproduced
    otherwise                                     -> direction only

The kinds, with their effect, direction and default band:

* [`factor`][] (speedups, ratios): the direction is the side of 1x the paper's factor is on;
  reproduced when the measured *gain* ``factor - 1`` lies within ``[0.5, 2]`` of the paper's gain
  (of its range, ratio to the nearest end). One rule for every factor, continuous in the
  paper's value: the smallest passing factor is ``1 + 0.5 (paper - 1)`` (1.50x for 2.0x, 1.505x
  for 2.01x, 4.6x for 8.2x), so there is no switch between two rules at 2x. Factors below 1x
  are compared as their inverses. Tie: within ``1x +- tie_tolerance`` (default 1%).
* [`percent`][] (shares and reductions in [0, 1]): the direction is the side of a
  ``baseline`` (0 for a reduction; the uniform share for a skew; 50% for "dominates");
  reproduced within 10 percentage points of the paper's value (of its range).
* [`less`][] (A below B at every point, rates in [0, 1]; gaps in points): contradicted if A is
  above B beyond the tolerance anywhere, tie if within it everywhere; reproduced when every gap
  lies in ``[0.5 lo, 2 hi]`` of the paper's gap range ``(lo, hi)``.
* [`close`][] (A stays close to B): reproduced if ``max |A - B|`` is within the tolerance,
  contradicted otherwise (the claim has no direction).
* [`decline`][] (a series falls from its first to its last point, e.g. final AUC against the
  staleness bound): the effect is the drop in points; reproduced when it is within 0.5x-2x of
  the paper's drop and the series never rises by more than ``slack`` points on the way.
* [`not_comparable`][] (the setting lacks what the claim needs) and [`not_built`][] (the
  mechanism is not built yet).

[`DEFINITIONS`][] states each rule in full, [`SUMMARIES`][] in a short phrase (the report's
index counts the states with it).

Measured values may be one number or an [`Estimate`][] (the mean of several seeds with its
95% interval, [`Estimate.of`][]). With an interval every test uses the whole interval:

    the interval meets the no-effect zone (1x +- tie; baseline +- tie) -> tie
    the interval lies wholly on the wrong side                          -> contradicted
    the interval lies wholly inside the band                            -> reproduced
    otherwise                                                           -> direction only
                       (its text says "on the band's edge" when the interval straddles it)

A single value is an interval of width 0, so the rule above is the same rule without seeds.

A claim whose value comes only from a time model (the register's ``evidence: modelled``) is
``modelled`` whatever the rule gives ([`modelled`][]): the rule's outcome on the model stays in
its text, never the state ``reproduced``.

Paper values are validated (a factor range on one side of 1x, a percent range off its baseline)
and a bad one raises ``ValueError``: that is a mistake in the notebook, not in the measurement.
A bad measurement never raises.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from workbench.claims.measurement import Estimate
from workbench.claims.measurement import series as _series

STATES = ("reproduced", "direction only", "tie", "modelled", "contradicted", "not comparable",
          "not built")
REPRODUCED, DIRECTION_ONLY, TIE, MODELLED, CONTRADICTED, NOT_COMPARABLE, NOT_BUILT = STATES

FACTOR_BAND = (0.5, 2.0)  # measured / paper, for factors and for gaps and drops
FACTOR_TIE = 0.01  # a factor within 1x +- 1% is no effect
PERCENT_POINTS = 10.0  # a share or reduction within 10 points of the paper's

DEFINITIONS: tuple[tuple[str, str], ...] = (
    (REPRODUCED, "direction right and magnitude within the band of the paper's value, for the "
                 "whole 95% interval when the claim ran several seeds: a factor (speedup, "
                 "ratio) whose gain (factor - 1) is within 0.5x-2x of the paper's gain, one "
                 "rule continuous in the paper's value; a share or reduction within 10 "
                 "percentage points; a gap or a drop within 0.5x-2x of the paper's"),
    (DIRECTION_ONLY, "the sign is right, the magnitude is outside the band"),
    (TIE, "the difference is within the measured noise or a stated tolerance (the rule says "
          "which), or the 95% interval over seeds holds no effect: the run cannot tell the "
          "two sides apart"),
    (MODELLED, "the value comes only from a time model of hardware the workbench does not run "
               "(no measurement of the mechanism running backs it): never reproduced; the rule "
               "text says what the model gives"),
    (CONTRADICTED, "the direction is wrong (for the whole interval over seeds)"),
    (NOT_COMPARABLE, "the setting lacks what the claim needs, or the value was not measured "
                     "(the rule says what)"),
    (NOT_BUILT, "the mechanism is not built in the workbench yet"),
)

# One short phrase per state, for tables that count them (the report's index).
SUMMARIES: dict[str, str] = {
    REPRODUCED: "right direction, magnitude within the band",
    DIRECTION_ONLY: "right direction, magnitude outside the band",
    TIE: "no difference beyond the noise or tolerance",
    MODELLED: "a time model's value, not measured: never reproduced",
    CONTRADICTED: "wrong direction",
    NOT_COMPARABLE: "the setting cannot measure the claim",
    NOT_BUILT: "the mechanism is not built yet",
}

Paper = float | tuple[float, float]
_EPS = 1e-9  # relative slack at band edges, so that 4.1 / 8.2 counts as exactly 0.5
#: said after ``direction only`` when the 95% interval straddles the band's edge: the seeds or
#: rounds cannot tell ``reproduced`` from ``direction only``
_ON_EDGE = " (on the band's edge: the interval straddles it)"


@dataclass(frozen=True)
class Verdict:
    """The state of one claim row and the rule that decided it.

    Attributes:
        state: one of [`STATES`][].
        rule: the rule in words with the numbers, starting with the state.
    """

    state: str
    rule: str

    def __post_init__(self) -> None:
        if self.state not in STATES:
            raise ValueError(f"unknown verdict state {self.state!r}; expected one of {STATES}")


Measured = float | Sequence[float] | Estimate | None


def not_comparable(reason: str) -> Verdict:
    """The setting lacks what the claim needs; ``reason`` says what."""
    return Verdict(NOT_COMPARABLE, f"not comparable: {reason}")


def modelled(on_model: Verdict) -> Verdict:
    """The verdict of a claim measured only on a time model: ``modelled``, with what the rule
    gives on the model (a ``not comparable`` or ``not built`` verdict stays as it is)."""
    if on_model.state in (NOT_COMPARABLE, NOT_BUILT):
        return on_model
    return Verdict(MODELLED, f"modelled, not measured: on the time model, {on_model.rule}")


def not_built(what: str) -> Verdict:
    """The mechanism is not built yet; ``what`` names it."""
    return Verdict(NOT_BUILT, f"not built: {what}")


def _unmeasured(missing: str) -> Verdict:
    return Verdict(NOT_COMPARABLE, f"not measured: {missing}")


def _finite(value: object) -> float | None:
    """``value`` as a float, or None if it is None, NaN, infinite or not a number."""
    if value is None:
        return None
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def _range(paper: Paper, what: str) -> tuple[float, float]:
    ends: tuple[Any, ...] = ((paper, paper) if np.isscalar(paper)
                             else tuple(cast("tuple[float, float]", paper)))
    lo, hi = ends
    lo, hi = float(lo), float(hi)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
        raise ValueError(f"{what} must be a finite number or a (low, high) range, got {paper!r}")
    return lo, hi


def _check_band(band: tuple[float, float]) -> None:
    if not 0 < band[0] <= 1 <= band[1]:
        raise ValueError(f"band must satisfy 0 < low <= 1 <= high, got {band}")


def _tie_bound(tolerance: float, noise: float | None,
               fmt: Callable[[float], str]) -> tuple[float, str]:
    """The tie threshold (the larger of tolerance and noise) and where it comes from, in words."""
    noise = _finite(noise)
    if noise is not None and abs(noise) > tolerance:
        return abs(noise), f"within the measured noise {fmt(abs(noise))}"
    return tolerance, f"within the stated tolerance {fmt(tolerance)}"


def _points(v: float) -> str:
    return f"{v:.3g} points"


def _num(v: float) -> str:
    return f"{v:.3g}"


def _x(v: float) -> str:
    """A paper's factor as written (8.2x, 4.46x)."""
    return f"{v:.4g}x"


def _mx(v: float) -> str:
    """A measured factor, two decimals (1.00x, 2.81x, 16.41x)."""
    return f"{v:.2f}x"


def _ratio(pos: float, band: tuple[float, float]) -> str:
    """``pos`` with enough digits that a value just outside the band does not print as its edge."""
    for digits in range(2, 7):
        text = f"{pos:.{digits}f}"
        if float(text) not in band or pos in band:
            return text + "x"
    return f"{pos!r}x"


def _pct(v: float) -> str:
    return f"{100 * v:.4g}%"


def _span(lo: float, hi: float, fmt: Callable[[float], str]) -> str:
    return fmt(lo) if lo == hi else f"{fmt(lo).rstrip('x%')}-{fmt(hi)}"


def _in_band(position: float, band: tuple[float, float]) -> bool:
    return band[0] * (1 - _EPS) <= position <= band[1] * (1 + _EPS)


def _position(value: float, lo: float, hi: float) -> float:
    """``value`` over the nearest end of ``[lo, hi]`` (1 inside the range)."""
    return value / lo if value < lo else value / hi if value > hi else 1.0


def factor(measured: Measured, paper: Paper, *, band: tuple[float, float] = FACTOR_BAND,
           tie_tolerance: float = FACTOR_TIE, noise: float | None = None,
           missing: str = "no finite measured value") -> Verdict:
    """A speedup or ratio against the paper's (a number or a ``(low, high)`` range).

    Args:
        measured: the measured factor (> 0), its samples over seeds, or their [`Estimate`][];
            None or NaN gives ``not comparable``.
        paper: the paper's factor or range; it sets the direction (above or below 1x).
        band: bounds on measured gain / paper gain (``factor - 1``) for ``reproduced``.
        tie_tolerance: relative distance from 1x counted as no effect (0.01: 0.99x-1.01x).
        noise: the measured relative noise of the factor, if known; the tie bound is the larger.
        missing: why a missing measurement is missing (shown after ``not measured:``).

    Raises:
        ValueError: the paper's factor is not positive, or its range straddles 1x.
    """
    lo, hi = _range(paper, "paper factor")
    _check_band(band)
    if lo <= 0 or not (lo > 1 or hi < 1):
        raise ValueError(f"a paper factor must be positive and on one side of 1x, got {paper!r}")
    ptext = _span(lo, hi, _x)
    est = Estimate.of(measured)
    if est is None:
        return _unmeasured(missing)
    if est.lo <= 0:
        return not_comparable(f"a factor must be positive, measured {est.lo:g}")
    up = lo > 1
    shown = est.text(_mx)
    # orient so that the paper's factor is above 1x
    m_lo, m_hi, lo_o, hi_o = ((est.lo, est.hi, lo, hi) if up
                              else (1 / est.hi, 1 / est.lo, 1 / hi, 1 / lo))
    bound, which = _tie_bound(tie_tolerance, noise, lambda v: f"+-{100 * v:.3g}% of 1x")
    slack = 1 + bound * (1 + _EPS)
    if m_lo <= slack and m_hi >= 1 / slack:
        where = "meets the no-effect zone: " if est.lo != est.hi else ""
        return Verdict(TIE, f"tie: {shown} {where}{which}; paper {ptext}")
    if m_hi < 1:
        return Verdict(CONTRADICTED, f"contradicted: {shown} is {'below' if up else 'above'} "
                                     f"1x, the paper's {ptext} is {'above' if up else 'below'}")
    inverse = "" if up else " (factors below 1x compared as inverses)"
    g_lo, g_hi = lo_o - 1, hi_o - 1
    pos = [_position(m - 1, g_lo, g_hi) for m in (m_lo, m_hi)]
    inside = [_in_band(q, band) for q in pos]
    state = REPRODUCED if all(inside) else DIRECTION_ONLY
    edges = (1 + band[0] * g_lo, 1 + band[1] * g_hi)
    edges_text = "-".join(_mx(e if up else 1 / e) for e in (edges if up else edges[::-1]))
    at = (_ratio(pos[0], band) if pos[0] == pos[1]
          else f"{_ratio(pos[0], band)}-{_ratio(pos[1], band)}")
    return Verdict(state, f"{state}{_ON_EDGE if any(inside) and not all(inside) else ''}: "
                          f"{shown}; its gain is {at} the paper's "
                          f"(+{_span(g_lo, g_hi, _num)} for {ptext}){inverse}; band "
                          f"{_x(band[0])}-{_x(band[1])} on the gain: {edges_text}")


def percent(measured: Measured, paper: Paper, *, points: float = PERCENT_POINTS,
            baseline: float = 0.0, tie_tolerance: float = 0.0, noise: float | None = None,
            missing: str = "no finite measured value") -> Verdict:
    """A share or reduction (fractions in [0, 1]) against the paper's, within ``points``.

    Args:
        measured: the measured fraction (a reduction may be negative: an increase), its samples
            over seeds, or their [`Estimate`][].
        paper: the paper's fraction or ``(low, high)`` range.
        points: the band half-width in percentage points.
        baseline: the no-effect value whose side sets the direction (0 for a reduction, the
            uniform share for a skew claim, 0.5 for "dominates").
        tie_tolerance: distance from the baseline counted as no effect, in points.
        noise: the measured noise in points, if known; the tie bound is the larger.
        missing: why a missing measurement is missing.

    Raises:
        ValueError: the paper's range is outside [0, 1] or contains the baseline.
    """
    lo, hi = _range(paper, "paper share")
    if not (0 <= lo and hi <= 1) or lo <= baseline <= hi:
        raise ValueError(f"a paper share must lie in [0, 1] on one side of the baseline "
                         f"{baseline:g}, got {paper!r}")
    ptext = _span(lo, hi, _pct)
    est = Estimate.of(measured)
    if est is None:
        return _unmeasured(missing)
    shown = est.text(_pct)
    up = lo > baseline
    bound, which = _tie_bound(tie_tolerance, noise, _points)
    b = bound / 100 * (1 + _EPS)
    if est.lo <= baseline + b and est.hi >= baseline - b:
        return Verdict(TIE, f"tie: {shown} is {which} of the {_pct(baseline)} baseline; "
                            f"paper {ptext}")
    if (est.hi < baseline) if up else (est.lo > baseline):
        side = ("above", "below") if up else ("below", "above")
        return Verdict(CONTRADICTED, f"contradicted: {shown} is not {side[0]} the "
                                     f"{_pct(baseline)} baseline; the paper's {ptext} is")

    def distance(m: float) -> float:
        return 100 * (lo - m if m < lo else m - hi if m > hi else 0.0)

    far = max(distance(est.lo), distance(est.hi))
    state = REPRODUCED if far <= points * (1 + _EPS) else DIRECTION_ONLY
    near = 0.0 if est.lo <= hi and est.hi >= lo else min(distance(est.lo), distance(est.hi))
    edge = _ON_EDGE if state == DIRECTION_ONLY and near <= points * (1 + _EPS) else ""
    return Verdict(state, f"{state}{edge}: {shown} is {far:.3g} points from the paper's "
                          f"{ptext} at most; band +-{points:g} points")


def less(a: float | Sequence[float], b: float | Sequence[float], *,
         paper_gap: tuple[float, float] | float, tie_tolerance: float = 0.5,
         noise: float | None = None, band: tuple[float, float] = FACTOR_BAND,
         labels: Sequence[str] | None = None, names: tuple[str, str] = ("A", "B"),
         missing: str = "no finite measured values") -> Verdict:
    """``A < B`` at every point (rates in [0, 1]), e.g. LFU's miss rate below LRU's.

    Args:
        a: A at each point (a number or a sequence).
        b: B at the same points.
        paper_gap: the paper's ``B - A`` in points, a number or ``(low, high)`` over its points.
        tie_tolerance: a gap within this many points is no difference.
        noise: the measured noise in points, if known; the tie bound is the larger.
        band: each gap must lie in ``[band[0] low, band[1] high]`` points for ``reproduced``.
        labels: names of the points (default 1, 2, ...).
        names: the names of A and B in the rule text.
        missing: why missing measurements are missing.

    Raises:
        ValueError: a and b differ in length, or the paper's gap is not positive.
    """
    plo, phi = _range(paper_gap, "paper gap")
    _check_band(band)
    if plo <= 0:
        raise ValueError(f"the paper's gap B - A must be positive points, got {paper_gap!r}")
    av, bv = _series(a), _series(b)
    if av is None or bv is None:
        return _unmeasured(missing)
    if av.shape != bv.shape:
        raise ValueError(f"a and b differ in length: {av.size} and {bv.size}")
    labels = [str(i + 1) for i in range(av.size)] if labels is None else list(labels)
    gap = 100 * (bv - av)
    bound, which = _tie_bound(tie_tolerance, noise, _points)
    bound += _EPS  # points computed as 100 * (b - a) carry rounding
    na, nb = names
    paper_text = f"paper: {na} lower by {_span(plo, phi, _num)} points"
    if (gap < -bound).any():
        where = ", ".join(f"{lab}: {-g:+.3g}" for lab, g in zip(labels, gap) if g < -bound)
        return Verdict(CONTRADICTED, f"contradicted: {na} above {nb} by more than "
                                     f"{_num(bound)} points at {where}; {paper_text}")
    if (np.abs(gap) <= bound).all():
        return Verdict(TIE, f"tie: {na} - {nb} is {which} at every point (largest "
                            f"|gap| {np.abs(gap).max():.3g}); {paper_text}")
    beyond = int((gap > bound).sum())
    state = (REPRODUCED if all(_in_band(g / plo if g < plo else g / phi if g > phi else 1.0,
                                        band) for g in gap) else DIRECTION_ONLY)
    return Verdict(state, f"{state}: {na} lower by {gap.min():.3g}-{gap.max():.3g} points "
                          f"({beyond} of {gap.size} points beyond the {_num(bound)}-point tie "
                          f"bound); {paper_text}; band {_num(band[0] * plo)}-"
                          f"{_num(band[1] * phi)} points ({_x(band[0])}-{_x(band[1])} of the "
                          "paper's gap)")


def close(a: float | Sequence[float], b: float | Sequence[float], *, tolerance: float,
          names: tuple[str, str] = ("A", "B"),
          missing: str = "no finite measured values") -> Verdict:
    """``A`` stays close to ``B`` (rates in [0, 1]): ``max |A - B|`` within ``tolerance`` points.

    Raises:
        ValueError: a and b differ in length.
    """
    av, bv = _series(a), _series(b)
    if av is None or bv is None:
        return _unmeasured(missing)
    if av.shape != bv.shape:
        raise ValueError(f"a and b differ in length: {av.size} and {bv.size}")
    gap = float(100 * np.abs(av - bv).max())
    na, nb = names
    if gap <= tolerance * (1 + _EPS):
        return Verdict(REPRODUCED, f"reproduced: max |{na} - {nb}| = {gap:.3g} points, within "
                                   f"the stated tolerance {tolerance:g} points")
    return Verdict(CONTRADICTED, f"contradicted: max |{na} - {nb}| = {gap:.3g} points exceeds "
                                 f"the stated tolerance {tolerance:g} points")


def decline(measured: Sequence[float], paper: Sequence[float], *, slack: float = 0.1,
            tie_tolerance: float = 0.5, band: tuple[float, float] = FACTOR_BAND,
            shape_points: float = 1.0, labels: Sequence[str] | None = None,
            missing: str = "no finite measured values") -> Verdict:
    """A series (fractions, e.g. AUC) that falls from its first to its last point.

    Args:
        measured: the measured series, first to last, or one series per seed (rows): the
            shape is judged on their mean, the drop on its 95% interval over seeds.
        paper: the paper's series at the same points (it must fall).
        slack: a rise between neighbours of at most this many points is not a rise.
        tie_tolerance: a total drop within this many points is no effect.
        band: measured drop / paper drop bounds for ``reproduced``.
        shape_points: ``reproduced`` also needs the drop from the first point to every
            intermediate point within this many points of the paper's drop there (the shape,
            e.g. "sharply only when unbounded"), not only the end-to-end drop.
        labels: names of the points (default 1, 2, ...), used for the first, last and rises.
        missing: why missing measurements are missing.

    Raises:
        ValueError: the series differ in length or have fewer than two points, or the paper's
            series does not fall.
    """
    pv = _series(paper)
    if pv is None or pv.size < 2 or pv[0] <= pv[-1]:
        raise ValueError(f"the paper's series must have two or more points and fall, got "
                         f"{paper!r}")
    _check_band(band)
    try:
        grid = np.atleast_2d(np.asarray(measured, dtype=float))
    except (TypeError, ValueError):
        return _unmeasured(missing)
    if grid.size == 0 or not np.isfinite(grid).all():
        return _unmeasured(missing)
    mv = grid.mean(axis=0)
    if mv.shape != pv.shape:
        raise ValueError(f"measured and paper series differ in length: {mv.size} and {pv.size}")
    labels = [str(i + 1) for i in range(mv.size)] if labels is None else list(labels)
    drops = Estimate.of(100 * (grid[:, 0] - grid[:, -1]))
    assert drops is not None  # finite by the check above
    drop, pdrop = drops.mean, 100 * (pv[0] - pv[-1])
    shown = drops.text(lambda v: f"{v:.3g} points")
    span = f"from {labels[0]} to {labels[-1]}"
    paper_text = f"the paper's drop {pdrop:.3g} points"
    if drops.lo <= tie_tolerance + _EPS and drops.hi >= -tie_tolerance - _EPS:
        return Verdict(TIE, f"tie: the drop {span} is {shown}, within the stated tolerance "
                            f"{tie_tolerance:g} points of none; {paper_text}")
    if drops.hi < 0:
        return Verdict(CONTRADICTED, f"contradicted: the series rises {-drop:.3g} points {span}; "
                                     f"{paper_text}")
    rises = [labels[i + 1] for i, d in enumerate(100 * np.diff(mv)) if d > slack]
    off = [(labels[i], 100 * (mv[0] - mv[i]), 100 * (pv[0] - pv[i])) for i in range(1, mv.size - 1)
           if abs(100 * ((mv[0] - mv[i]) - (pv[0] - pv[i]))) > shape_points + _EPS]
    ratio = drop / pdrop
    in_band = _in_band(drops.lo / pdrop, band) and _in_band(drops.hi / pdrop, band)
    state = REPRODUCED if in_band and not rises and not off else DIRECTION_ONLY
    rise_text = (f"; rises by more than {slack:g} points at {', '.join(rises)}" if rises
                 else f"; never rises by more than {slack:g} points")
    shape_text = ("; the drop to " + ", ".join(f"{lab} is {d:.3g} points against the paper's "
                                                f"{p:.3g}" for lab, d, p in off)
                  + f" (more than {shape_points:g} point(s) apart)" if off else
                  f"; every intermediate drop within {shape_points:g} point(s) of the paper's")
    return Verdict(state, f"{state}: drops {shown} {span}, {_ratio(ratio, band)} of "
                          f"{paper_text}{rise_text}{shape_text}; band {_x(band[0])}-"
                          f"{_x(band[1])} of the paper's drop")
