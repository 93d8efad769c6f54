"""Alternating best-of timing."""

from __future__ import annotations

import pytest

from workbench.utils.timing import best_seconds


def test_best_seconds_alternates_and_keeps_the_best() -> None:
    calls: list[str] = []
    runs = {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}
    seconds = best_seconds(runs, repeats=3, warmup=True)
    assert calls == ["a", "b"] * 4  # one untimed warm-up round, then 3 alternating rounds
    assert set(seconds) == {"a", "b"} and all(0 <= s < 1 for s in seconds.values())
    with pytest.raises(ValueError, match="repeats = 0"):
        best_seconds(runs, repeats=0)
