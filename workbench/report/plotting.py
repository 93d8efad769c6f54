"""One seaborn theme for every figure, figures readable where they are shown, and
byte-deterministic figure files.

Every notebook calls [`set_theme`][] first and saves through [`save_figure`][], which strips
the metadata that would change on every run (PNG ``Software``, PDF ``CreationDate``), so a second
``dvc repro`` sees identical outputs and reruns nothing downstream.

Readability ([`readability`][]): a PNG of width ``W`` px is shown in a JupyterLab output cell or
on a rendered report page at most [`SHOWN_WIDTH_PX`][] wide, so a text of ``p`` points
(``p * SAVE_DPI / 72`` px in the file) is shown

    p * SAVE_DPI / 72 * min(1, SHOWN_WIDTH_PX / W)   px,

which must be at least [`MIN_FONT_PX`][]. With the theme's smallest text ([`THEME_MIN_PT`][])
that bounds a figure's width to [`MAX_WIDTH_IN`][] inches; [`panels`][] wraps a row of panels
into rows within it. A legend must not cover what an axes draws (lines, markers, bars, bands,
reference lines): [`legend_overlaps`][] finds every such overlap in display coordinates.
"""

from __future__ import annotations

import math
import struct
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

from workbench.utils.io import atomic_path  # noqa: E402

PALETTE = "colorblind"
SAVE_DPI = 150
#: The width (CSS px at 100% zoom) a figure is shown at: a JupyterLab output cell or a rendered
#: report page on a laptop screen are about 800-900 px wide; a wider PNG is scaled down to it.
SHOWN_WIDTH_PX = 800
#: The smallest font size, in px as shown, a figure may carry.
MIN_FONT_PX = 9.0
#: The theme's smallest text (tick labels, legends), in points.
THEME_MIN_PT = 9.5
#: The widest figure (inches, as saved) whose theme text is shown at least MIN_FONT_PX, less 5%
#: for what a tight bounding box adds (outside legends, titles).
MAX_WIDTH_IN = round(0.95 * SHOWN_WIDTH_PX * THEME_MIN_PT / (72 * MIN_FONT_PX), 1)


def set_theme() -> None:
    """Apply the workbench theme (paper context, ticks, colour-blind palette, fixed DPI).

    The theme's constrained layout makes seaborn's grids warn that they switch to a tight one
    (harmless, and noise with an absolute path in every notebook): that warning is silenced.
    """
    warnings.filterwarnings("ignore", message="The figure layout has changed to tight",
                            category=UserWarning)
    sns.set_theme(context="paper", style="ticks", palette=PALETTE, rc={
        "font.size": 10, "axes.labelsize": 10, "axes.titlesize": 10.5,
        "xtick.labelsize": THEME_MIN_PT, "ytick.labelsize": THEME_MIN_PT,
        "legend.fontsize": THEME_MIN_PT, "legend.title_fontsize": THEME_MIN_PT,
        "figure.dpi": 110,
        "savefig.dpi": SAVE_DPI,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "legend.frameon": False,
        "svg.hashsalt": "workbench",
        "figure.constrained_layout.use": True,
    })


def save_figure(fig: matplotlib.figure.Figure, path: Path | str, close: bool = True) -> Path:
    """Save ``fig`` deterministically (format from the suffix: .png, .pdf, .svg) and close it
    (unless ``close`` is False: [`readability`][] measures it after)."""
    path = Path(path)
    metadata = {".png": {"Software": None}, ".pdf": {"CreationDate": None, "Producer": None},
                ".svg": {"Date": None}}.get(path.suffix, {})
    with atomic_path(path, suffix=path.suffix) as tmp:
        fig.savefig(tmp, format=path.suffix.lstrip("."), metadata=metadata, bbox_inches="tight")
    if close:
        plt.close(fig)
    return path


def panels(n: int, panel: tuple[float, float] = (4.0, 3.2), *, max_cols: int | None = None,
           **subplot_kw: Any) -> tuple[matplotlib.figure.Figure, list[Any]]:
    """A figure of ``n`` panels of ``panel`` inches each, wrapped into as many rows as keep it
    within [`MAX_WIDTH_IN`][] (and ``max_cols`` columns); the axes in reading order."""
    cols = max(1, min(n, max_cols or n, int(MAX_WIDTH_IN // panel[0])))
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(panel[0] * cols, panel[1] * rows),
                             squeeze=False, **subplot_kw)
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.remove()
    return fig, flat[:n]


def _look(handle: Any) -> str:
    """The colour a legend handle shows ("" for an invisible one: seaborn's group titles)."""
    from matplotlib.colors import to_hex
    from matplotlib.container import Container

    if isinstance(handle, Container):  # bars, error bars: their first artist
        children = handle.get_children()
        if not children:
            return ""
        handle = children[0]
    if not handle.get_visible():
        return ""
    for getter in ("get_color", "get_facecolor"):
        try:
            colour = getattr(handle, getter)()
        except (AttributeError, TypeError, ValueError):
            continue
        if not isinstance(colour, str) and np.ndim(colour) == 2:  # a collection's: the first
            colour = tuple(colour[0]) if len(colour) else "none"
        try:
            return to_hex(colour, keep_alpha=True)
        except (ValueError, TypeError):
            continue
    return ""


def legend_below(fig: matplotlib.figure.Figure, axes: Any = None, *,
                 ncol: int | None = None) -> None:
    """One legend under the figure, outside every axes: the entries of ``axes`` (default: all;
    one per label, first seen first); the axes' own legends removed. A
    label two panels draw in different colours is kept twice, the second with its panel's
    title.

    The figure must use the constrained layout (the theme's), which makes room for it."""
    handles: dict[str, Any] = {}
    where: dict[str, Any] = {}
    for ax in (fig.axes if axes is None else list(np.atleast_1d(axes))):
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if not label or label.startswith("_"):
                continue
            if label in handles and _look(handles[label]) != _look(handle):
                # one label, two colours: in one panel both stay (a group title and a level of
                # the same name); across panels the second names its panel
                label = (label + " " if where[label] is ax
                         else f"{label} ({ax.get_title() or 'another panel'})")
            handles.setdefault(label, handle)
            where.setdefault(label, ax)
        own = ax.get_legend()
        if own is not None:
            own.remove()
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="outside lower center",
                   ncol=ncol or min(len(handles), 4))


def png_size(path: Path | str) -> tuple[int, int]:
    """(width, height) in px of the PNG at ``path``, read from its header."""
    head = Path(path).read_bytes()[:24]
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG file")
    width, height = struct.unpack(">II", head[16:24])
    return width, height


@dataclass(frozen=True)
class Readability:
    """How a saved figure reads at the width it is shown at.

    Attributes:
        width_px: the PNG's width.
        height_px: its height.
        smallest_pt: the smallest font size of a visible, non-empty text.
        smallest_text: that text (the first found).
        legend_overlaps: one line per legend covering something an axes draws.
    """

    width_px: int
    height_px: int
    smallest_pt: float
    smallest_text: str
    legend_overlaps: tuple[str, ...] = ()

    @property
    def scale(self) -> float:
        """The factor the PNG is shown at (1 when it fits [`SHOWN_WIDTH_PX`][])."""
        return min(1.0, SHOWN_WIDTH_PX / self.width_px)

    @property
    def smallest_px(self) -> float:
        """The smallest text's size in px as shown."""
        return self.smallest_pt * SAVE_DPI / 72 * self.scale

    def problems(self) -> list[str]:
        """What makes the figure hard to read (empty: nothing)."""
        out = []
        if self.smallest_px < MIN_FONT_PX:
            out.append(f"text {self.smallest_text!r} is {self.smallest_px:.1f} px when the "
                       f"{self.width_px}-px PNG is shown {SHOWN_WIDTH_PX} px wide (minimum "
                       f"{MIN_FONT_PX:g}): make the figure narrower than {MAX_WIDTH_IN} in "
                       f"(plotting.panels wraps panels into rows) or its text larger")
        out += list(self.legend_overlaps)
        return out

    def record(self) -> dict[str, Any]:
        """The JSON record a section keeps for the figure."""
        finite = math.isfinite(self.smallest_pt)  # False: the figure has no text
        return {"width_px": self.width_px, "height_px": self.height_px,
                "smallest_pt": round(self.smallest_pt, 2) if finite else None,
                "smallest_text": self.smallest_text,
                "smallest_px": round(self.smallest_px, 2) if finite else None,
                "legend_overlaps": list(self.legend_overlaps)}


def _texts(fig: matplotlib.figure.Figure) -> list[Any]:
    from matplotlib.text import Text

    return [t for t in fig.findobj(Text)
            if t.get_visible() and t.get_text().strip() and t.get_figure() is not None]


def _legends(fig: matplotlib.figure.Figure) -> list[Any]:
    found = list(fig.legends)
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is not None and legend.get_visible():
            found.append(legend)
    return found


def _drawn_in(ax: Any, box: Any, renderer: Any) -> list[str]:
    """The labels (or kinds) of what ``ax`` draws inside the display box ``box``."""
    from matplotlib.collections import LineCollection, PathCollection

    def inside(points: Any) -> bool:
        pts = np.asarray(points, dtype=float).reshape(-1, 2)
        return bool(np.any((pts[:, 0] > box.x0) & (pts[:, 0] < box.x1)
                           & (pts[:, 1] > box.y0) & (pts[:, 1] < box.y1)))

    def name(artist: Any, kind: str) -> str:
        label = str(artist.get_label() or "")
        return f"{kind} {label!r}" if label and not label.startswith("_") else kind

    hits = []
    for line in ax.get_lines():
        if not line.get_visible():
            continue
        path = line.get_transform().transform_path(line.get_path())
        drawn = line.get_linestyle() not in ("None", "", " ", "none")
        if (drawn and path.intersects_bbox(box, filled=False)) or (
                line.get_marker() not in ("None", "", " ", None) and inside(path.vertices)):
            hits.append(name(line, "line"))
    for coll in ax.collections:
        if not coll.get_visible():
            continue
        if isinstance(coll, PathCollection):  # scatter markers
            if inside(coll.get_offset_transform().transform(coll.get_offsets())):
                hits.append(name(coll, "markers"))
            continue
        filled = not isinstance(coll, LineCollection)
        transform = coll.get_transform()
        if any(transform.transform_path(p).intersects_bbox(box, filled=filled)
               for p in coll.get_paths()):
            hits.append(name(coll, "band" if filled else "lines"))
    for patch in ax.patches:
        if patch.get_visible() and patch.get_window_extent(renderer).overlaps(box):
            hits.append(name(patch, "bar"))
    return list(dict.fromkeys(hits))


def legend_overlaps(fig: matplotlib.figure.Figure) -> list[str]:
    """One line per legend covering what an axes draws (``fig`` drawn at its own dpi first)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.transforms import Bbox

    if not isinstance(fig.canvas, FigureCanvasAgg):  # a closed figure's base canvas
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]  # Agg
    out = []
    for legend in _legends(fig):
        box = legend.get_window_extent(renderer)
        box = Bbox.from_extents(box.x0 + 1, box.y0 + 1, box.x1 - 1, box.y1 - 1)
        for i, ax in enumerate(fig.axes):
            clip = Bbox.intersection(box, ax.bbox)
            if clip is None or clip.width <= 0 or clip.height <= 0:
                continue
            hits = _drawn_in(ax, clip, renderer)
            if hits:
                where = ax.get_title() or f"panel {i + 1}"
                title = legend.get_title().get_text()
                out.append(f"the legend{f' {title!r}' if title else ''} covers "
                           f"{', '.join(hits[:3])}{' ...' if len(hits) > 3 else ''} in {where!r}: "
                           "place it outside the axes (loc='outside ...' on fig.legend, or "
                           "bbox_to_anchor) or where nothing is drawn")
    return out


def readability(fig: matplotlib.figure.Figure, png: Path | str) -> Readability:
    """Measure ``fig``, saved as ``png``: the PNG's size, its smallest text, legend overlaps."""
    width, height = png_size(png)
    texts = _texts(fig)
    smallest = min(texts, key=lambda t: t.get_fontsize(), default=None)
    return Readability(width_px=width, height_px=height,
                       smallest_pt=float(smallest.get_fontsize()) if smallest else math.inf,
                       smallest_text=smallest.get_text().strip()[:40] if smallest else "",
                       legend_overlaps=tuple(legend_overlaps(fig)))
