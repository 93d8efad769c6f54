"""A notebook's exploration section: widgets driving a small live run, its plot redrawn in place.

Every notebook ends with one (or a few) of these, below the pipeline's results and clearly apart
from them: the figures above read ``results/``; an explorer runs a small variant through
[`workbench.api`][] in seconds:

    knobs (sliders, dropdowns) --on change--> run(**knobs) -> DataFrame --> plot(frame, ax)
                                                    |                          |
                                               explorer.data            explorer.figure
                                                              (a display updated in place)

Under papermill (no browser, no widget events) the constructor's first run with the default
values is all that happens: the cell still executes, and its figure is in the executed notebook.
In JupyterLab (``make lab``) moving a widget reruns and redraws, in a background thread so the
kernel stays responsive:

    widget change --> pending = latest values --(worker idle?)--> worker thread:
                      (a newer change replaces        run(**pending) while the status line
                       a pending one: no backlog)     ticks "running... 2.5 s"; a result that a
                                                      newer change superseded is not drawn;
                                                      an error shows as one red line, the last
                                                      plot stays and the explorer stays usable

Tests call [`Explorer.update`][] with values (synchronous, as scripts do) and read
[`Explorer.data`][] and the figure's artists; [`Explorer.request`][] and [`Explorer.wait`][]
drive the background path.
"""

from __future__ import annotations

import html
import threading
import time
from collections.abc import Callable
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd

from workbench.report.display import in_kernel
from workbench.report.plotting import legend_below
from workbench.utils.errors import UserError

__all__ = ["Explorer", "KnobRangeError", "slider", "log_slider", "int_slider", "dropdown"]


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


class KnobRangeError(UserError, ValueError):
    """A value given to [`Explorer.update`][] that its widget cannot hold (a slider would
    clip it silently and the run would be at the clipped value)."""


def _check_in_widget(title: str, name: str, control: Any, value: Any) -> None:
    """Raise [`KnobRangeError`][] unless ``control`` can hold ``value`` unchanged."""
    import ipywidgets as w

    where = f"explorer {title!r}" if title else "explorer"
    if isinstance(control, (w.Dropdown, w.ToggleButtons, w.Select)):
        options = [o[1] if isinstance(o, tuple) else o for o in control.options]
        if value not in options:
            raise KnobRangeError(f"{where}: {name} = {value!r}: not one of {options}")
        return
    lo, hi = getattr(control, "min", None), getattr(control, "max", None)
    if lo is None or hi is None:
        return
    if isinstance(control, w.FloatLogSlider):
        lo, hi = control.base ** lo, control.base ** hi
    try:
        inside = lo <= float(value) <= hi
    except (TypeError, ValueError):
        inside = False
    if not inside:
        raise KnobRangeError(f"{where}: {name} = {value!r}: outside this knob's range "
                             f"[{lo:g}, {hi:g}] (its slider would clip it); give a value "
                             "within it")


class Explorer:
    """Widgets that rerun ``run`` and redraw ``plot`` whenever one of them changes.

    Args:
        run: ``run(**values) -> DataFrame``: the live run (seconds), one keyword per control.
        plot: ``plot(frame, ax)``: draws the run's frame on a cleared axes.
        controls: knob name -> widget (see [`slider`][], [`dropdown`][], ...); the
            widgets' initial values are the first run's.
        title: shown above the widgets.
        figsize: the figure's size in inches.
        background: run widget changes in a background thread (latest change wins); None:
            when in a notebook kernel (JupyterLab), not in a plain process (tests, scripts).

    Attributes:
        data: the last drawn run's frame.
        values: the knob values it ran with.
        figure: the figure (one axes), redrawn in place on every run.
        error: the last widget-driven run's error as one line ("" when it succeeded).
    """

    #: seconds between two ticks of the status line while a run works
    TICK = 0.5

    def __init__(self, run: Callable[..., pd.DataFrame],
                 plot: Callable[[pd.DataFrame, plt.Axes], None], controls: dict[str, Any],
                 title: str = "", figsize: tuple[float, float] = (6.0, 3.4),
                 background: bool | None = None) -> None:
        import ipywidgets as w

        self._run, self._plot, self.controls, self.title = run, plot, dict(controls), title
        self.background = in_kernel() if background is None else background
        # the theme's constrained layout: it makes room for the legend under the axes
        self.figure, self.ax = plt.subplots(figsize=figsize, layout="constrained")
        plt.close(self.figure)  # shown through a display handle, not by the inline backend
        # The plot is a display with an id, updated in place (update_display_data), not an
        # ipywidgets Output: nbclient (papermill) could wait forever on an Output's capture.
        self._handle = None
        self.png = b""
        self.status = w.HTML()
        self.data = pd.DataFrame()
        self.values: dict[str, Any] = {}
        self.error = ""
        self._updating = False
        self._lock = threading.Lock()
        self._pending: dict[str, Any] | None = None
        self._worker: threading.Thread | None = None
        self._line = None  # the "ran with" line under the plot, updated on every draw
        self._syncing = False
        #: a text box beside every slider: a value typed there is checked against the slider's
        #: range and refused with a one-line error (a slider's own readout would clamp it)
        self.entries: dict[str, Any] = {}
        for name, control in self.controls.items():
            control.observe(lambda change, n=name: self._on_change(n, change), names="value")
            if isinstance(control, (w.FloatSlider, w.FloatLogSlider, w.IntSlider)):
                control.readout = False
                box = w.IntText if isinstance(control, w.IntSlider) else w.FloatText
                entry = box(value=control.value, layout=w.Layout(width="8em"))
                entry.observe(lambda change, n=name: self._on_entry(n, change), names="value")
                control.observe(lambda change, e=entry: self._sync(e, change["new"]),
                                names="value")
                self.entries[name] = entry
        self.update()

    def _sync(self, entry: Any, value: Any) -> None:
        """Show the slider's value in its text box (without treating it as typed)."""
        self._syncing = True
        try:
            entry.value = value
        finally:
            self._syncing = False

    def _on_entry(self, name: str, change: dict) -> None:
        """A value typed beside slider ``name``: outside its range it is refused (the status
        says why, the box shows the slider's value again, nothing runs); else the slider takes
        it, which reruns."""
        if self._syncing:
            return
        control = self.controls[name]
        try:
            _check_in_widget(self.title, name, control, change["new"])
        except KnobRangeError as err:
            self.error = f"{type(err).__name__}: {err}"
            self.status.value = (f'<span style="color:#b00020">&#9888; {html.escape(str(err))}'
                                 f"</span> <i>(not run: {name} stays {control.value:g})</i>")
            self._sync(self.entries[name], control.value)
            return
        control.value = change["new"]

    def ran_with(self) -> str:
        """``"<title>: knob = value, ..."``: the values of the run the plot shows."""
        values = ", ".join(f"{k} = {v:g}" if isinstance(v, float) else f"{k} = {v}"
                           for k, v in self.values.items())
        return f"{self.title}: {values}" if self.title else values

    def _on_change(self, name: str, change: dict) -> None:
        if self._updating:
            return
        if self.background:
            self.request(**{name: change["new"]})
        else:
            self._guarded(lambda: self.update(**{name: change["new"]}))

    def _guarded(self, action: Callable[[], Any]) -> None:
        """Run ``action``; an error becomes the status line (the last plot stays)."""
        try:
            action()
            self.error = ""
        except Exception as err:  # shown to the person at the widgets, not lost in a log
            message = str(err).strip().splitlines()
            self.error = f"{type(err).__name__}: {message[0] if message else ''}"
            self.status.value = (f'<span style="color:#b00020">&#9888; {html.escape(self.error)}'
                                 "</span> <i>(the plot shows the last good run; change a "
                                 "value to retry)</i>")

    def _set_controls(self, values: dict[str, Any]) -> None:
        unknown = set(values) - set(self.controls)
        if unknown:
            raise KeyError(f"unknown knob(s) {sorted(unknown)}: this explorer has "
                           f"{sorted(self.controls)}")
        for name, value in values.items():  # a widget would clip the value without a word
            _check_in_widget(self.title, name, self.controls[name], value)
        self._updating = True
        try:
            for name, value in values.items():
                self.controls[name].value = value
        finally:
            self._updating = False

    def update(self, **values: Any) -> pd.DataFrame:
        """Set the named knobs (the others keep their widgets' values), rerun, redraw; in this
        thread, now. This is how a script drives an exploration.

        Raises:
            KeyError: a knob this explorer does not have.
            KnobRangeError: a value its widget cannot hold (outside the slider's range, not
                among the dropdown's options).
        """
        self._set_controls(values)
        current = {name: control.value for name, control in self.controls.items()}
        self.status.value = "<i>running…</i>"
        self._draw(current, self._run(**current))
        return self.data

    def request(self, **values: Any) -> None:
        """Ask for a rerun at these knob values in the background: the latest request wins (a
        pending one is replaced, a running one finishes but is not drawn)."""
        self._set_controls(values)
        with self._lock:
            self._pending = {name: control.value for name, control in self.controls.items()}
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._work, daemon=True,
                                                name=f"explorer {self.title}")
                self._worker.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the background runs to finish; whether they did within ``timeout``."""
        worker = self._worker
        if worker is not None:
            worker.join(timeout)
            return not worker.is_alive()
        return True

    def _work(self) -> None:
        """The background worker: run the latest request until none is pending."""
        while True:
            with self._lock:
                current, self._pending = self._pending, None
                if current is None:
                    self._worker = None
                    return
            done = threading.Event()
            ticker = threading.Thread(target=self._tick, args=(done, time.monotonic()),
                                      daemon=True)
            ticker.start()
            try:
                result: list[pd.DataFrame] = []
                # _guarded calls the lambda at once, in this iteration
                self._guarded(lambda: result.append(self._run(**current)))  # noqa: B023
            finally:
                done.set()
                ticker.join()
            with self._lock:
                superseded = self._pending is not None
            if result and not superseded:
                self._guarded(lambda: self._draw(current, result[0]))  # noqa: B023

    def _tick(self, done: threading.Event, start: float) -> None:
        """Keep the status line saying how long the current run has worked."""
        while not done.wait(self.TICK):
            with self._lock:
                waiting = " — a newer change is waiting" if self._pending else ""
            self.status.value = (f"<i>&#8987; running… {time.monotonic() - start:.1f} s"
                                 f"{waiting}</i>")

    def _draw(self, values: dict[str, Any], frame: pd.DataFrame) -> None:
        """Plot ``frame`` (the run at ``values``) and update the shown image and status."""
        self.ax.clear()
        for legend in list(self.figure.legends):  # the last run's
            legend.remove()
        self._plot(frame, self.ax)
        legend_below(self.figure, self.ax, ncol=2)  # off the data, at the theme's size
        self.data, self.values = frame, values
        self.status.value = "<i>" + html.escape(self.ran_with().partition(": ")[2]
                                                if self.title else self.ran_with()) + "</i>"
        import io

        from IPython.display import Image

        png = io.BytesIO()  # a PNG: under the Agg backend (set_theme) a figure displays as text
        self.figure.savefig(png, format="png")
        self.png = png.getvalue()
        if self._handle is not None:  # shown already: redraw in place
            self._handle.update(Image(self.png))
        if self._line is not None:
            self._line.update({"text/plain": self.ran_with()}, raw=True)

    def widget(self):
        """The explorer's controls as one widget: title, controls, status line (the plot is
        displayed below it by `_ipython_display_`)."""
        import ipywidgets as w

        header = [w.HTML(f"<b>{self.title}</b>")] if self.title else []
        knobs = [w.HBox([control, self.entries[name]]) if name in self.entries else control
                 for name, control in self.controls.items()]
        return w.VBox([*header, w.HBox(knobs, layout=w.Layout(flex_flow="row wrap")),
                       self.status])

    def _ipython_display_(self) -> None:
        from IPython.display import Image, display

        display(self.widget())
        self._handle = display(Image(self.png), display_id=True)
        # what the plot shows, as text (a saved notebook shows no widget), never stale: it is
        # updated with the plot
        self._line = display({"text/plain": self.ran_with()}, raw=True, display_id=True)
