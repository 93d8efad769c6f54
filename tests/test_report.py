"""Report sections, deterministic figures and the claims table."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from workbench.report.plotting import save_figure, set_theme
from workbench.report.sections import Claim, Section, build


def _figure() -> plt.Figure:
    set_theme()
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], [3, 1, 2])
    return fig


def test_figures_are_byte_deterministic(tmp_path: Path) -> None:
    a = save_figure(_figure(), tmp_path / "a.png").read_bytes()
    b = save_figure(_figure(), tmp_path / "b.png").read_bytes()
    assert a == b
    pdf1 = save_figure(_figure(), tmp_path / "a.pdf").read_bytes()
    pdf2 = save_figure(_figure(), tmp_path / "b.pdf").read_bytes()
    assert pdf1 == pdf2


def test_section_roundtrip_and_report(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    sec = Section("demo", "Demo section", reports / "demo", intro="Our formalisation.")
    sec.figure(_figure(), "curve", "A curve", setting="toy")
    sec.table(pd.DataFrame({"x": [1, 2], "y": [0.5, 0.25]}), "tab", "A table")
    sec.claim(Claim("HET", "less traffic", "88% [P]", "80.0%", "toy", False, "small"))
    sec.claim(Claim("ESD", "n/a claim", "1.74x [A]", "-", "toy", None))
    sec.save()
    params = tmp_path / "params.yaml"
    params.write_text("seed: 0\n")
    text = build(reports, ["demo"], params, tmp_path)
    assert "| HET" in text and "| no " in text and "| n/a " in text
    assert "![A curve](demo/curve.png)" in text and "*Setting:* toy" in text
    assert "Our formalisation." in text and "seed: 0" in text
    saved = json.loads((reports / "demo" / "section.json").read_text())
    assert saved["claims"][0]["paper_value"] == "88% [P]"


def test_missing_section_names_the_stage(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="notebook stage for 'absent'"):
        build(tmp_path, ["absent"], tmp_path / "p.yaml", tmp_path)


def test_pipes_inside_cells_are_escaped(tmp_path: Path) -> None:
    sec = Section("demo", "Demo", tmp_path / "demo")
    sec.claim(Claim("HET", "gap", "close [P]", "max |a - b| = 0", "toy", True))
    sec.table(pd.DataFrame({"x": ["p|q"]}), "t", "T")
    sec.save()
    (tmp_path / "p.yaml").write_text("seed: 0\n")
    text = build(tmp_path, ["demo"], tmp_path / "p.yaml", tmp_path)
    assert "max \\|a - b\\| = 0" in text and "p\\|q" in text
