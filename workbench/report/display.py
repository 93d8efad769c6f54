"""Showing a report item inline, in the notebook cell that makes it.

Every figure, table, note and claim a notebook adds to its
[`Section`][workbench.report.sections.Section] goes to two places: the report's files
(``reports/<nb>/``, byte-deterministic) and the cell's output, so a reader of the notebook
(JupyterLab, or an executed copy) sees what the report shows, cell by cell:

    section.figure(fig, ...) --save_figure--> <out_dir>/<name>.png --same bytes--> image output
    section.table(frame, ...) ------------->  <out_dir>/<name>.csv  ------------> HTML table
    section.note(text) / section.claim(...) -----------------------------------> Markdown

The figure shown is the saved PNG itself (not a second rendering), so the two never differ.
Outside a notebook kernel (a plain ``python`` process, a test) nothing is displayed.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

__all__ = ["in_kernel", "image", "table", "markdown"]


def in_kernel() -> bool:
    """Whether this process is a Jupyter kernel (JupyterLab, papermill, nbclient)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with ipykernel
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def image(path: Path) -> None:
    """Show the PNG at ``path`` as the cell's image output."""
    if in_kernel():
        from IPython.display import Image, display

        display(Image(data=Path(path).read_bytes(), format="png"))


def table(frame: pd.DataFrame, caption: str = "", floatfmt: str = ".4g") -> None:
    """Show ``frame`` as an HTML table under a bold ``caption``."""
    if in_kernel():
        from IPython.display import HTML, display

        if caption:
            markdown(f"**{caption}**")
        numbers = {c: f"{{:{floatfmt}}}" for c in frame.columns
                   if pd.api.types.is_float_dtype(frame[c])}
        display(HTML(frame.style.format(numbers, na_rep="-").hide(axis="index").to_html()))


def markdown(text: str) -> None:
    """Show ``text`` rendered as Markdown."""
    if in_kernel():
        from IPython.display import Markdown, display

        display(Markdown(text))
