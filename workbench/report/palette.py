"""One colour per system, the same in every figure that draws it.

A system keeps its colour across the report: HET's baselines and cache bounds in Fig. 6, 7 and 9
and the long runs, ESD's dispatchers in every sweep and training curve, Hotline's schemes,
FlexShard's plans in every sweep. Within a family ([`FAMILIES`][]) every two colours differ by
at least [`MIN_DELTA_E`][] in CIELAB (CIE76 colour difference, [`delta_e`][]): no two systems of one
figure share a hue family (the oranges of a ten-colour cycle), and none is so light it vanishes
on white. The colours are Paul Tol's colour-blind-safe "bright" and "vibrant" schemes; black and
grey stay free for the paper's values and reference lines.

    colors(["Hybrid, no cache", "Cache s=100", "my run"])
      -> {"Hybrid, no cache": "#EE6677", "Cache s=100": "#228833", "my run": <first spare>}

A name no family knows (a run you add) takes the first [`SPARE`][] colour the call has not used.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

FAMILIES: dict[str, dict[str, str]] = {
    "HET": {
        "Single process (reference)": "#555555",
        "PS (ASP), no cache": "#4477AA",
        "Hybrid, no cache": "#EE6677",
        "AllReduce (sparse AllGather)": "#CCBB44",
        "Cache s=0": "#66CCEE",
        "Cache s=10": "#AA3377",
        "Cache s=100": "#228833",
        "Cache s=10000": "#EE7733",
        "Cache s=inf": "#332288",
    },
    "ESD": {
        "random": "#555555",
        "contiguous": "#66CCEE",
        "laia": "#CCBB44",
        "esd_greedy": "#AA3377",
        "esd_heuristic": "#4477AA",
        "esd_exact": "#EE7733",
        "hybriddis": "#228833",
    },
    "Hotline": {
        "CPU-GPU hybrid": "#4477AA",
        "Hotline": "#228833",
        "Hotline (online)": "#66CCEE",
        "FAE": "#EE7733",
        "Accelerator-only": "#555555",
    },
    "FlexShard": {
        "rw": "#4477AA",
        "tw": "#66CCEE",
        "cw": "#CCBB44",
        "twrw": "#AA3377",
        "hot_dp": "#EE7733",
        "flexshard": "#228833",
        "torchrec": "#332288",
        "torchrec_hbm": "#555555",
    },
}
#: Colours for names no family knows, in the order they are handed out.
SPARE = ["#4477AA", "#EE6677", "#228833", "#CCBB44", "#66CCEE", "#AA3377", "#EE7733",
         "#332288", "#555555"]
#: The least CIE76 difference between two colours of one family (about 2.3 is just noticeable;
#: 30 reads as a different colour on a thin line).
MIN_DELTA_E = 30.0

COLORS: dict[str, str] = {name: colour for family in FAMILIES.values()
                          for name, colour in family.items()}


def colors(names: Iterable[str]) -> dict[str, str]:
    """The colour of each name: its family's, else the first spare one not yet used here."""
    names = list(dict.fromkeys(str(n) for n in names))
    out = {n: COLORS[n] for n in names if n in COLORS}
    spare = [c for c in SPARE if c not in out.values()]
    for i, name in enumerate(n for n in names if n not in out):
        out[name] = spare[i % len(spare)] if spare else SPARE[i % len(SPARE)]
    return {n: out[n] for n in names}


def lab(colour: str) -> np.ndarray:
    """CIELAB (D65) of a ``#RRGGBB`` colour."""
    rgb = np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)]) / 255.0
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722],
                    [0.0193, 0.1192, 0.9505]]) @ linear / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def delta_e(a: str, b: str) -> float:
    """The CIE76 difference of two ``#RRGGBB`` colours (Euclidean distance in CIELAB)."""
    return float(np.linalg.norm(lab(a) - lab(b)))
