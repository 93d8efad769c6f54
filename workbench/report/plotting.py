"""One seaborn theme for every figure, and byte-deterministic figure files.

Every notebook calls [`set_theme`][] first and saves through [`save_figure`][], which strips
the metadata that would change on every run (PNG ``Software``, PDF ``CreationDate``), so a second
``dvc repro`` sees identical outputs and reruns nothing downstream.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

from workbench.utils.io import atomic_path  # noqa: E402

PALETTE = "colorblind"


def set_theme() -> None:
    """Apply the workbench theme (paper context, ticks, colour-blind palette, fixed DPI).

    The theme's constrained layout makes seaborn's grids warn that they switch to a tight one
    (harmless, and noise with an absolute path in every notebook): that warning is silenced.
    """
    warnings.filterwarnings("ignore", message="The figure layout has changed to tight",
                            category=UserWarning)
    sns.set_theme(context="paper", style="ticks", palette=PALETTE, rc={
        "figure.dpi": 110,
        "savefig.dpi": 150,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "legend.frameon": False,
        "svg.hashsalt": "workbench",
        "figure.constrained_layout.use": True,
    })


def save_figure(fig: matplotlib.figure.Figure, path: Path | str) -> Path:
    """Save ``fig`` deterministically (format from the suffix: .png, .pdf, .svg) and close it."""
    path = Path(path)
    metadata = {".png": {"Software": None}, ".pdf": {"CreationDate": None, "Producer": None},
                ".svg": {"Date": None}}.get(path.suffix, {})
    with atomic_path(path, suffix=path.suffix) as tmp:
        fig.savefig(tmp, format=path.suffix.lstrip("."), metadata=metadata, bbox_inches="tight")
    plt.close(fig)
    return path
