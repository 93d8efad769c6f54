"""Verdict maps: per paper, the state of every claim at every point of its assumed parameters.

One figure per paper (``reports/verdict_maps/<paper>.png``), one row per (claim, assumed
parameter), one cell per swept value, coloured by the state the register's rule gives at that
point and carrying the value measured there with the side of the paper's value it falls on
([`workbench.report.register.reading`][]: ``^`` overshoots, ``v`` falls short, ``=`` within
the paper's range); the committed value's cell is outlined (a point the measure marks
``committed``, where the committed value is measured rather than set, e.g. the calibrated
per-row software cost):

    het.fig7a_comm.wdl  | dense-sync mode   [after_backward 2.70x v][overlapped 2.70x v]...
    het.fig7a_comm.wdl  | per-row cost (us) [0.5 2.6x v][1 ...]...
    hotline.speedup     | host rate (GB/s)  [0.25 ...]...
                          colour = state; black outline = committed setting

A claim without assumed parameters gets one cell: its committed state and value.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from workbench.report import register as reg
from workbench.report.verdict import MODELLED, STATES

STATE_COLOURS = {"reproduced": "#4c9a5b", "direction only": "#e3b448", "tie": "#9aa5b1",
                 "modelled": "#b39ddb", "contradicted": "#c8553d", "not comparable": "#d9d9d9",
                 "not built": "#ffffff"}


def _is_committed(assumption: reg.Assumption, value: Any) -> bool:
    if assumption.numeric:
        try:
            return abs(float(value) - float(assumption.committed)) <= 1e-9 * max(
                1.0, abs(float(assumption.committed)))
        except (TypeError, ValueError):
            return False
    return str(value) == str(assumption.committed)


#: The mark after a cell's value: the side of the paper's value it falls on.
SIDE_MARKS = {reg.OVER: "^", reg.UNDER: "v", reg.AT: "=", "": ""}


def _cell_text(setting: str, entry: reg.Entry, payload: Mapping[str, Any]) -> str:
    """``"after_backward\n2.70x v"``: the setting, then the value and its side."""
    value, side = reg.reading(entry, payload)
    return f"{setting}\n{value} {SIDE_MARKS[side]}".rstrip()


def rows_of(claims: list[dict[str, Any]], register: reg.Register, paper: str
            ) -> list[tuple[str, list[tuple[str, str, bool]]]]:
    """The map's rows for ``paper``: (label, [(cell text, state, committed?)]); a cell's text is
    the swept value, then the value measured there and its side of the paper's
    ([`SIDE_MARKS`][])."""
    out = []
    for c in claims:
        if c["paper"] != paper:
            continue
        entry = register[c["key"]]
        points_by = c.get("conditions") or {}
        measurement = c.get("measurement") or {}
        if not entry.assumed:
            out.append((f"{c['key']}", [(_cell_text("committed", entry, measurement),
                                         c["state"], True)]))
            continue
        for a in entry.assumed:
            points = points_by.get(a.name)
            unit = f" ({a.unit})" if a.unit else ""
            label = f"{c['key']} | {a.name}{unit}"
            if not points:
                out.append((label, [(_cell_text("not swept", entry, measurement), c["state"],
                                     True)]))
                continue
            cells = [(_cell_text(reg.format_value(p["value"]), entry, p),
                      MODELLED if entry.modelled else reg.judge(entry, p).state,
                      bool(p.get("committed")) or _is_committed(a, p["value"]))
                     for p in reg.sorted_points(a, points)]
            out.append((label, cells))
    return out


def draw(claims: list[dict[str, Any]], register: reg.Register, paper: str, path: Path) -> Path:
    """Draw ``paper``'s verdict map into ``path`` (PNG)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    from workbench.report.plotting import save_figure

    rows = rows_of(claims, register, paper)
    width = max(len(cells) for _, cells in rows)
    fig, ax = plt.subplots(figsize=(3.2 + 1.05 * width, 0.9 + 0.46 * len(rows)))
    for i, (_, cells) in enumerate(rows):
        for j, (text, state, committed) in enumerate(cells):
            ax.add_patch(Rectangle((j, i), 0.96, 0.9, facecolor=STATE_COLOURS[state],
                                   edgecolor="black" if committed else "white",
                                   linewidth=1.6 if committed else 0.5))
            ax.text(j + 0.48, i + 0.45, text, ha="center", va="center", fontsize=6,
                    linespacing=1.1)
    ax.set_xlim(0, width)
    ax.set_ylim(len(rows), 0)
    ax.set_yticks([i + 0.45 for i in range(len(rows))], [label for label, _ in rows],
                  fontsize=7)
    ax.set_xticks([])
    ax.set_xlabel("swept value of the assumed parameter and the value measured there (outlined: "
                  "the committed setting; ^ beyond the paper's value, v short of it, = within "
                  "its range)", fontsize=7)
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
