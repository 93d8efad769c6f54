"""Claim counts and values in the README and the docs come from reports/claims.csv: the marked
parts are generated (workbench/report/fragments.py) and the prose around them quotes none."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from workbench.report import fragments
from workbench.utils.paths import REPO_ROOT

COUNT = re.compile(r"\b\d+ (?:claims?|reproduced|direction only|ties?|contradicted|"
                   r"not comparable)\b")


def test_every_generated_part_agrees_with_the_claims_table() -> None:
    assert fragments.stale() == [], "run python -m workbench.report.fragments"


def test_a_changed_claims_table_makes_them_stale() -> None:
    claims = pd.read_csv(REPO_ROOT / "reports" / "claims.csv")
    changed = claims.copy()
    first = changed.index[changed["state"] == "reproduced"][0]
    changed.loc[first, "state"] = "contradicted"
    bad = fragments.stale(claims=changed)
    assert "README.md: claims:counts" in bad and "docs/index.md: claims:papers" in bad
    paper = claims.loc[first, "paper"]
    assert any(b.startswith("docs/papers/") and b.endswith(f"claims:summary {paper}")
               for b in bad)
    changed = claims.copy()
    changed.loc[0, "measured"] = "99.9%"
    assert fragments.stale(claims=changed) == ["docs/papers/het.md: claims:table HET"]


@pytest.mark.parametrize("page", fragments.PAGES)
def test_no_claim_count_is_quoted_by_hand(page: str) -> None:
    prose = fragments.MARK.sub("", (REPO_ROOT / page).read_text())
    assert not COUNT.findall(prose), f"{page} quotes {COUNT.findall(prose)} outside its " \
        "generated parts (<!-- claims:... -->): generate it, or leave it out"


def test_an_unknown_part_is_named() -> None:
    with pytest.raises(ValueError, match=r"claims:table Nope: not a paper"):
        fragments.render("table", "Nope", pd.DataFrame(), "README.md")
