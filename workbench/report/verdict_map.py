"""Verdict maps: per paper, the state of every claim at every point of its assumed parameters.

One figure per paper (``reports/verdict_maps/<paper>.png``), one row per (claim, assumed
parameter), one cell per swept value, coloured by the state the register's rule gives at that
point and carrying the value measured there with the side of the paper's value it falls on
([`workbench.claims.register.reading`][]: ``^`` overshoots, ``v`` falls short, ``=`` within
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

from workbench.claims import register as reg
from workbench.claims.record import JUDGED
from workbench.claims.verdict import MODELLED, STATES

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


def _cell_text(setting: str, payload: Mapping[str, Any]) -> str:
    """``"after_backward\n2.70x v"``: the setting, then the value and its side (as the
    record read them, [`workbench.claims.record.JUDGED`][])."""
    judged = payload.get(JUDGED) or {"reading": "-", "side": ""}
    return f"{setting}\n{judged['reading']} {SIDE_MARKS[judged['side']]}".rstrip()


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
            out.append((f"{c['key']}", [(_cell_text("committed", measurement),
                                         c["state"], True)]))
            continue
        for a in entry.assumed:
            points = points_by.get(a.name)
            unit = f" ({a.unit})" if a.unit else ""
            label = f"{c['key']} | {a.name}{unit}"
            if not points:
                out.append((label, [(_cell_text("not swept", measurement), c["state"],
                                     True)]))
                continue
            cells = [(_cell_text(reg.format_value(p["value"]), p),
                      MODELLED if entry.modelled else p[JUDGED]["state"],
                      bool(p.get("committed")) or _is_committed(a, p["value"]))
                     for p in reg.sorted_points(a, points)]
            out.append((label, cells))
    return out


#: The most cells on one line of a map (a longer sweep goes on over further lines), so the map
#: is shown at its full width (workbench.report.plotting.MAX_WIDTH_IN).
MAX_CELLS = 7
#: The longest swept value kept on one line of a cell.
CELL_CHARS = 14


def _wrap(text: str) -> str:
    """``text`` with a swept value longer than [`CELL_CHARS`][] broken after each ``/``."""
    setting, _, rest = text.partition("\n")
    if len(setting) > CELL_CHARS:
        setting = setting.replace("/", "/\n")
    return f"{setting}\n{rest}" if rest else setting


def draw(claims: list[dict[str, Any]], register: reg.Register, paper: str, path: Path) -> Path:
    """Draw ``paper``'s verdict map into ``path`` (PNG)."""
    from workbench.report.plotting import save_figure

    return save_figure(figure(claims, register, paper), path)


def figure(claims: list[dict[str, Any]], register: reg.Register, paper: str) -> Any:
    """``paper``'s verdict map, a matplotlib figure (laid out to read at the report's width)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    from workbench.report.plotting import THEME_MIN_PT

    rows = rows_of(claims, register, paper)
    # a row of more cells than fit the shown width goes on over further lines (label on the
    # first); labels on two lines: the claim, then the parameter
    lines = [(label.replace(" | ", "\n") if k == 0 else "", cells[k:k + MAX_CELLS])
             for label, cells in rows for k in range(0, max(1, len(cells)), MAX_CELLS)]
    # a long swept value ("concurrent/separate") breaks after its "/" to stay within its cell
    lines = [(label, [(_wrap(text), state, committed) for text, state, committed in cells])
             for label, cells in lines]
    width = max(len(cells) for _, cells in lines)
    text_lines = max(text.count("\n") + 1 for _, cells in lines for text, _, _ in cells)
    fig, ax = plt.subplots(figsize=(2.4 + 1.1 * width, 1.3 + (0.1 + 0.2 * text_lines) * len(lines)))
    for i, (_, cells) in enumerate(lines):
        for j, (text, state, committed) in enumerate(cells):
            ax.add_patch(Rectangle((j, i), 0.96, 0.9, facecolor=STATE_COLOURS[state],
                                   edgecolor="black" if committed else "white",
                                   linewidth=1.6 if committed else 0.5))
            ax.text(j + 0.48, i + 0.45, text, ha="center", va="center", linespacing=1.1,
                    fontsize=THEME_MIN_PT)
    ax.set_xlim(0, width)
    ax.set_ylim(len(lines), 0)
    ax.set_yticks([i + 0.45 for i in range(len(lines))], [label for label, _ in lines])
    ax.tick_params(axis="y", length=0)
    ax.grid(False)
    ax.set_xticks([])
    ax.set_xlabel("each cell: the assumed parameter's swept value, the value measured there\n"
                  "(outlined: the committed setting; ^ beyond the paper's value, v short of it, "
                  "= within its range)")
    for spine in ax.spines.values():
        spine.set_visible(False)
    used = [s for s in STATES if any(s == st for _, cells in rows for _, st, _ in cells)]
    fig.legend(handles=[Patch(facecolor=STATE_COLOURS[s], label=s) for s in used],
               loc="outside lower center", ncol=len(used), frameon=False)
    ax.set_title(f"{paper}: verdict against each assumed parameter\n({register.label()})")
    return fig


def draw_all(claims: list[dict[str, Any]], register: reg.Register, out: Path) -> list[Path]:
    """One map per paper with claims, in ``out``; returns the files written."""
    papers = list(dict.fromkeys(c["paper"] for c in claims))
    return [draw(claims, register, paper, Path(out) / f"{paper}.png") for paper in papers]
