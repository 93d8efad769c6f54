"""Verdict maps: per paper, the state of every claim at every point of its assumed parameters.

One figure per paper (``reports/verdict_maps/<paper>.png``), one row per (claim, assumed
parameter), one cell per swept value, coloured by the state the register's rule gives at that
point; the committed value's cell is outlined::

    het.fig7a_comm.wdl  | dense-sync mode   [after_backward][overlapped][ps]
    het.fig7a_comm.wdl  | per-row cost (us) [0.5][1][2][5][10][20]
    hotline.speedup     | host rate (GB/s)  [0.25][0.5][1][2][5][10]
                          colour = state; black outline = committed setting

A claim without assumed parameters gets one cell: its committed state.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.report import register as reg
from workbench.report.verdict import STATES

STATE_COLOURS = {"reproduced": "#4c9a5b", "direction only": "#e3b448", "tie": "#9aa5b1",
                 "contradicted": "#c8553d", "not comparable": "#d9d9d9",
                 "not built": "#ffffff"}


def _is_committed(assumption: reg.Assumption, value: Any) -> bool:
    if assumption.numeric:
        try:
            return abs(float(value) - float(assumption.committed)) <= 1e-9 * max(
                1.0, abs(float(assumption.committed)))
        except (TypeError, ValueError):
            return False
    return str(value) == str(assumption.committed)


def rows_of(claims: list[dict[str, Any]], register: reg.Register, paper: str
            ) -> list[tuple[str, list[tuple[str, str, bool]]]]:
    """The map's rows for ``paper``: (label, [(value text, state, committed?)])."""
    out = []
    for c in claims:
        if c["paper"] != paper:
            continue
        entry = register[c["key"]]
        points_by = c.get("conditions") or {}
        if not entry.assumed:
            out.append((f"{c['key']}", [("committed", c["state"], True)]))
            continue
        for a in entry.assumed:
            points = points_by.get(a.name)
            unit = f" ({a.unit})" if a.unit else ""
            label = f"{c['key']} | {a.name}{unit}"
            if not points:
                out.append((label, [("not swept", c["state"], True)]))
                continue
            cells = [(reg.format_value(v), s, _is_committed(a, v))
                     for v, s in reg.judge_points(entry, a, points)]
            out.append((label, cells))
    return out


def draw(claims: list[dict[str, Any]], register: reg.Register, paper: str, path: Path) -> Path:
    """Draw ``paper``'s verdict map into ``path`` (PNG)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    from workbench.report.plotting import save_figure

    rows = rows_of(claims, register, paper)
    width = max(len(cells) for _, cells in rows)
    fig, ax = plt.subplots(figsize=(3.2 + 1.05 * width, 0.9 + 0.36 * len(rows)))
    for i, (_, cells) in enumerate(rows):
        for j, (text, state, committed) in enumerate(cells):
            ax.add_patch(Rectangle((j, i), 0.96, 0.9, facecolor=STATE_COLOURS[state],
                                   edgecolor="black" if committed else "white",
                                   linewidth=1.6 if committed else 0.5))
            ax.text(j + 0.48, i + 0.45, text, ha="center", va="center", fontsize=6.5)
    ax.set_xlim(0, width)
    ax.set_ylim(len(rows), 0)
    ax.set_yticks([i + 0.45 for i in range(len(rows))], [label for label, _ in rows],
                  fontsize=7)
    ax.set_xticks([])
    ax.set_xlabel("swept value of the assumed parameter (outlined: the committed setting)",
                  fontsize=7)
    for spine in ax.spines.values():
        spine.set_visible(False)
    used = [s for s in STATES if any(s == st for _, cells in rows for _, st, _ in cells)]
    ax.legend(handles=[Patch(facecolor=STATE_COLOURS[s], label=s) for s in used],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=False)
    ax.set_title(f"{paper}: verdict against each assumed parameter ({register.label()})",
                 fontsize=8)
    return save_figure(fig, path)


def draw_all(claims: list[dict[str, Any]], register: reg.Register, out: Path) -> list[Path]:
    """One map per paper with claims, in ``out``; returns the files written."""
    papers = list(dict.fromkeys(c["paper"] for c in claims))
    return [draw(claims, register, paper, Path(out) / f"{paper}.png") for paper in papers]
