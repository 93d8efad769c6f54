"""Figures read where they are shown: text size at the shown width, legends off the data, one
palette for the systems (workbench.report.plotting, workbench.report.palette)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest

from workbench.claims import register as reg
from workbench.report import palette, plotting
from workbench.report.plotting import (
    MAX_WIDTH_IN,
    MIN_FONT_PX,
    SAVE_DPI,
    SHOWN_WIDTH_PX,
    legend_below,
    panels,
    png_size,
    readability,
    save_figure,
    set_theme,
)
from workbench.report.sections import Section
from workbench.utils.paths import REPO_ROOT

REPORTS = REPO_ROOT / "reports"


@pytest.fixture(autouse=True)
def _theme() -> None:
    set_theme()


def _measure(fig: plt.Figure, path: Path) -> plotting.Readability:
    save_figure(fig, path, close=False)
    try:
        return readability(fig, path)
    finally:
        plt.close(fig)


def _lines(ax: plt.Axes) -> None:
    x = np.linspace(0, 1, 40)
    ax.plot(x, x, label="rising")
    ax.plot(x, 1 - x, label="falling")
    ax.axhline(0.5, color="k", ls=":", label="paper [P]")


def test_wide_figure_with_small_text_is_flagged(tmp_path: Path) -> None:
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    for ax in axes:
        _lines(ax)
    axes[0].set_title("six points", fontsize=6)
    r = _measure(fig, tmp_path / "wide.png")
    assert r.width_px > SHOWN_WIDTH_PX and r.smallest_pt == 6
    assert r.smallest_px == pytest.approx(6 * SAVE_DPI / 72 * SHOWN_WIDTH_PX / r.width_px)
    assert r.smallest_px < MIN_FONT_PX
    assert any("six points" in p and "narrower" in p for p in r.problems())


def test_theme_text_reads_at_the_widest_allowed_figure(tmp_path: Path) -> None:
    fig, axes = panels(5, (3.0, 2.6))  # wrapped into rows within MAX_WIDTH_IN
    assert len(axes) == 5 and fig.get_size_inches()[0] <= MAX_WIDTH_IN
    for ax in axes:
        _lines(ax)
    legend_below(fig)
    r = _measure(fig, tmp_path / "panels.png")
    assert r.problems() == [], r.problems()
    assert r.smallest_px >= MIN_FONT_PX


@pytest.mark.parametrize(("loc", "covers"), [("center", "line 'rising'"),
                                             ("lower right", "markers 'point'"),
                                             ("upper center", "covers bar")])
def test_a_legend_on_the_data_is_found(tmp_path: Path, loc: str, covers: str) -> None:
    fig, ax = plt.subplots(figsize=(5, 3.5))
    _lines(ax)
    ax.scatter([0.95], [0.05], label="point")
    ax.bar([0.5], [1.0], width=0.08, label="bar")
    ax.legend(loc=loc)
    overlaps = _measure(fig, tmp_path / "on.png").legend_overlaps
    assert overlaps and covers in overlaps[0], overlaps


def test_a_legend_below_the_axes_covers_nothing(tmp_path: Path) -> None:
    fig, (a, b) = plt.subplots(1, 2, figsize=(8, 3))
    _lines(a)
    _lines(b)
    a.legend(loc="center")  # removed: one legend below the figure, each label once
    legend_below(fig)
    assert fig.legends[0].get_texts()[0].get_text() == "rising"
    assert [t.get_text() for t in fig.legends[0].get_texts()].count("rising") == 1
    assert a.get_legend() is None
    assert _measure(fig, tmp_path / "below.png").legend_overlaps == ()


def test_legend_below_keeps_a_label_two_panels_draw_differently(tmp_path: Path) -> None:
    fig, (a, b) = plt.subplots(1, 2, figsize=(8, 3))
    a.axhline(1, color="k", ls=":", label="paper [P]")
    b.plot([0, 1], [0, 1], color="C2", marker="o", label="paper [P]")
    a.bar([0.5], [1.0], width=0.1, color="C3", label="ours")  # a container's colour
    b.bar([0.5], [1.0], width=0.1, color="C4", label="ours")
    b.set_title("Table 2")
    _lines(a)
    _lines(b)  # the same look in both panels: one entry
    legend_below(fig)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels.count("rising") == 1
    assert "paper [P]" in labels and "paper [P] (Table 2)" in labels
    assert "ours" in labels and "ours (Table 2)" in labels
    plt.close(fig)


def test_section_records_readability_and_says_what_is_hard_to_read(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    sec = Section("demo", "Demo", tmp_path / "demo")
    fig, ax = plt.subplots(figsize=(16, 3))
    _lines(ax)
    ax.legend(loc="center", fontsize=5)
    sec.figure(fig, "crowded", "Crowded", setting="toy", reads=())
    record = sec.items[-1]["readability"]
    assert (record["width_px"], record["height_px"]) == png_size(tmp_path / "demo" / "crowded.png")
    assert record["smallest_pt"] == 5 and record["smallest_px"] < MIN_FONT_PX
    assert record["legend_overlaps"]
    assert "figure crowded: text" in caplog.text and "the legend covers" in caplog.text


def _figure_items() -> list[tuple[Path, dict]]:
    return [(path.parent, item) for path in sorted(REPORTS.glob("*/section.json"))
            for item in json.loads(path.read_text())["items"] if item["kind"] == "figure"]


def test_every_committed_figure_reads_at_its_shown_width() -> None:
    items = _figure_items()
    assert len(items) > 30
    recorded = {(folder, item["file"]) for folder, item in items}
    unmeasured = [p for p in REPORTS.glob("*/*.png") if p.parent.name != "verdict_maps"
                  and (p.parent, p.name) not in recorded]
    assert not unmeasured, f"figures no section measured: {unmeasured}"
    hard = []
    for folder, item in items:
        r = item["readability"]
        # the record is the PNG's: not a stale one
        assert (r["width_px"], r["height_px"]) == png_size(folder / item["file"]), item["file"]
        shown = r["smallest_pt"] * SAVE_DPI / 72 * min(1.0, SHOWN_WIDTH_PX / r["width_px"])
        if shown < MIN_FONT_PX or r["legend_overlaps"]:
            hard.append(f"{folder.name}/{item['file']}: {shown:.1f} px, {r['legend_overlaps']}")
    assert not hard, hard


def test_verdict_maps_read_at_their_shown_width(tmp_path: Path) -> None:
    from workbench.report import verdict_map

    claims = [c for path in sorted(REPORTS.glob("*/section.json"))
              for c in json.loads(path.read_text()).get("claims", [])]
    register = reg.load()
    papers = list(dict.fromkeys(c["paper"] for c in claims))
    assert papers
    for paper in papers:
        r = _measure(verdict_map.figure(claims, register, paper), tmp_path / f"{paper}.png")
        assert not r.problems(), f"{paper}: {r.problems()}"


def test_each_family_of_systems_has_distinct_colours() -> None:
    for family, colours in palette.FAMILIES.items():
        for (a, ca), (b, cb) in itertools.combinations(colours.items(), 2):
            assert palette.delta_e(ca, cb) >= palette.MIN_DELTA_E, (family, a, b)
        for name, colour in colours.items():  # none that vanishes on white
            assert palette.delta_e(colour, "#FFFFFF") >= palette.MIN_DELTA_E, (family, name)
    names = [n for colours in palette.FAMILIES.values() for n in colours]
    assert len(names) == len(set(names)), "a system name in two families"


def test_colors_keep_a_systems_colour_and_give_new_names_unused_ones() -> None:
    assert palette.delta_e("#000000", "#FFFFFF") == pytest.approx(100, abs=0.1)
    got = palette.colors(["Hybrid, no cache", "my run", "Cache s=100", "my other run"])
    assert got["Hybrid, no cache"] == palette.COLORS["Hybrid, no cache"]
    assert got["Cache s=100"] == palette.COLORS["Cache s=100"]
    assert len(set(got.values())) == 4  # the new names take colours nobody here has
    assert palette.colors(["Cache s=100"]) == {"Cache s=100": got["Cache s=100"]}
