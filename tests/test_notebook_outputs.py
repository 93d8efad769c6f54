"""What a reader sees in the executed notebooks (``reports/notebooks/*.ipynb``, as committed): no
cell shows a raw object repr (``Claim(paper=..., ...)``, thousands of characters) as its
``Out[n]``; a cell's last expression is a figure, a table or nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from workbench.utils.paths import REPO_ROOT

EXECUTED = sorted((REPO_ROOT / "reports" / "notebooks").glob("*.ipynb"))
#: ``Name(`` at the start of a plain-text result: a dataclass's or an object's repr.
REPR = re.compile(r"^[A-Za-z_][\w.]*\(")


def test_there_are_executed_notebooks() -> None:
    assert len(EXECUTED) >= 5, EXECUTED


@pytest.mark.parametrize("path", EXECUTED, ids=lambda p: p.stem)
def test_no_cell_shows_an_object_repr(path: Path) -> None:
    shown = []
    for n, cell in enumerate(json.loads(path.read_text())["cells"]):
        for out in cell.get("outputs", []):
            if out.get("output_type") != "execute_result":
                continue
            data = out.get("data", {})
            text = "".join(data.get("text/plain", ""))
            if set(data) == {"text/plain"} and REPR.match(text):
                shown.append(f"cell {n}: {text[:80]}...")
    assert not shown, f"{path.name} shows object reprs (end the cell with a statement): {shown}"
