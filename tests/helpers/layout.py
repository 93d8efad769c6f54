"""Size caps that warn before they bind: a cap is not a budget."""

from __future__ import annotations

import warnings

WARN_SHARE = 0.8  # a size this share of its cap or more is reported


def near_cap(sizes: dict[str, int], cap: int, name: str) -> None:
    """Warn (pytest's warnings summary) for every size at 80% of its cap or more: a cap is not
    a budget, so what nears it is split before it has to be."""
    near = {k: n for k, n in sizes.items() if WARN_SHARE * cap <= n <= cap}
    if near:
        warnings.warn(f"{name} at {WARN_SHARE:.0%}+ of its cap {cap}: {near}; split them",
                      stacklevel=2)
