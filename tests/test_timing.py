"""Alternating best-of timing."""

from __future__ import annotations

import pytest

from workbench.utils.timing import best_seconds, spread


def test_best_seconds_alternates_and_keeps_the_best() -> None:
    calls: list[str] = []
    runs = {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}
    seconds = best_seconds(runs, repeats=3, warmup=True)
    assert calls == ["a", "b"] * 4  # one untimed warm-up round, then 3 alternating rounds
    assert set(seconds) == {"a", "b"} and all(0 <= s < 1 for s in seconds.values())
    with pytest.raises(ValueError, match="repeats = 0"):
        best_seconds(runs, repeats=0)


def test_spread_gives_the_tail_beside_the_median() -> None:
    s = spread([1.0] * 19 + [21.0])  # one slow batch in twenty
    assert s["median"] == 1.0 and s["mean"] == pytest.approx(2.0)
    assert s["p95"] == pytest.approx(2.0)  # between the 19th (1) and 20th (21) order statistic
    assert (s["min"], s["max"], s["n"]) == (1.0, 21.0, 20)
    with pytest.raises(ValueError, match="no samples"):
        spread([])
