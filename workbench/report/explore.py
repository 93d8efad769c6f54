"""A notebook's exploration section: widgets driving a small live run, its plot redrawn in place.

Every notebook ends with one (or a few) of these, below the pipeline's results and clearly apart
from them: the figures above read ``results/``; an explorer runs a small variant through
:mod:`workbench.api` in seconds::

    knobs (sliders, dropdowns) --on change--> run(**knobs) -> DataFrame --> plot(frame, ax)
                                                    |                          |
                                               explorer.data            explorer.figure
                                                              (a display updated in place)

Under papermill (no browser, no widget events) the constructor's first run with the default
values is all that happens: the cell still executes, and its figure is in the executed notebook.
In JupyterLab (``make lab``) moving a widget reruns and redraws. Tests call :meth:`Explorer.update`
with values, as a widget event would, and read :attr:`Explorer.data` and the figure's artists.
"""

from __future__ import annotations

from typing import Any, Callable

import matplotlib.pyplot as plt
import pandas as pd

__all__ = ["Explorer", "slider", "log_slider", "int_slider", "dropdown"]


def slider(value: float, lo: float, hi: float, step: float, label: str | None = None):
    """A float slider (ipywidgets ``FloatSlider``)."""
    import ipywidgets as w

    return w.FloatSlider(value=value, min=lo, max=hi, step=step, description=label or "",
                         continuous_update=False, style={"description_width": "initial"})


def log_slider(value: float, lo_exp: float, hi_exp: float, step: float = 0.25,
               label: str | None = None):
    """A slider over ``10 ** [lo_exp, hi_exp]`` (ipywidgets ``FloatLogSlider``)."""
    import ipywidgets as w

    return w.FloatLogSlider(value=value, base=10, min=lo_exp, max=hi_exp, step=step,
                            description=label or "", continuous_update=False,
                            style={"description_width": "initial"})


def int_slider(value: int, lo: int, hi: int, step: int = 1, label: str | None = None):
    """An integer slider (ipywidgets ``IntSlider``)."""
    import ipywidgets as w

    return w.IntSlider(value=value, min=lo, max=hi, step=step, description=label or "",
                       continuous_update=False, style={"description_width": "initial"})


def dropdown(value: Any, options: list, label: str | None = None):
    """A dropdown over ``options`` (ipywidgets ``Dropdown``)."""
    import ipywidgets as w

    return w.Dropdown(value=value, options=list(options), description=label or "",
                      style={"description_width": "initial"})


class Explorer:
    """Widgets that rerun ``run`` and redraw ``plot`` whenever one of them changes.

    Args:
        run: ``run(**values) -> DataFrame``: the live run (seconds), one keyword per control.
        plot: ``plot(frame, ax)``: draws the run's frame on a cleared axes.
        controls: knob name -> widget (see :func:`slider`, :func:`dropdown`, ...); the
            widgets' initial values are the first run's.
        title: shown above the widgets.
        figsize: the figure's size in inches.

    Attributes:
        data: the last run's frame.
        values: the knob values it ran with.
        figure: the figure (one axes), redrawn in place on every run.
    """

    def __init__(self, run: Callable[..., pd.DataFrame],
                 plot: Callable[[pd.DataFrame, plt.Axes], None], controls: dict[str, Any],
                 title: str = "", figsize: tuple[float, float] = (6.0, 3.4)) -> None:
        import ipywidgets as w

        self._run, self._plot, self.controls, self.title = run, plot, dict(controls), title
        # tight, not the theme's constrained layout (tight_layout below would warn on every run)
        self.figure, self.ax = plt.subplots(figsize=figsize, layout="tight")
        plt.close(self.figure)  # shown through a display handle, not by the inline backend
        # The plot is a display with an id, updated in place (update_display_data), not an
        # ipywidgets Output: nbclient (papermill) could wait forever on an Output's capture.
        self._handle = None
        self.png = b""
        self.status = w.HTML()
        self.data = pd.DataFrame()
        self.values: dict[str, Any] = {}
        self._updating = False
        for name, control in self.controls.items():
            control.observe(lambda change, n=name: self._on_change(n, change), names="value")
        self.update()

    def _on_change(self, name: str, change: dict) -> None:
        if not self._updating:
            self.update(**{name: change["new"]})

    def update(self, **values: Any) -> pd.DataFrame:
        """Set the named knobs (the others keep their widgets' values), rerun, redraw.

        This is the widgets' callback; call it directly to script an exploration.

        Raises:
            KeyError: a knob this explorer does not have.
        """
        unknown = set(values) - set(self.controls)
        if unknown:
            raise KeyError(f"unknown knob(s) {sorted(unknown)}: this explorer has "
                           f"{sorted(self.controls)}")
        self._updating = True
        try:
            for name, value in values.items():
                self.controls[name].value = value
        finally:
            self._updating = False
        self.values = {name: control.value for name, control in self.controls.items()}
        self.status.value = "<i>running…</i>"
        self.data = self._run(**self.values)
        self.ax.clear()
        self._plot(self.data, self.ax)
        self.figure.tight_layout()
        self.status.value = "<i>" + ", ".join(f"{k} = {v:g}" if isinstance(v, float)
                                              else f"{k} = {v}"
                                              for k, v in self.values.items()) + "</i>"
        import io

        from IPython.display import Image

        png = io.BytesIO()  # a PNG: under the Agg backend (set_theme) a figure displays as text
        self.figure.savefig(png, format="png")
        self.png = png.getvalue()
        if self._handle is not None:  # shown already: redraw in place
            self._handle.update(Image(self.png))
        return self.data

    def widget(self):
        """The explorer's controls as one widget: title, controls, status line (the plot is
        displayed below it by :meth:`_ipython_display_`)."""
        import ipywidgets as w

        header = [w.HTML(f"<b>{self.title}</b>")] if self.title else []
        return w.VBox([*header, w.HBox(list(self.controls.values()),
                                       layout=w.Layout(flex_flow="row wrap")),
                       self.status])

    def _ipython_display_(self) -> None:
        from IPython.display import Image, display

        display(self.widget())
        self._handle = display(Image(self.png), display_id=True)
