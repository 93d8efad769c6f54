"""The notebooks' exploration sections: the Explorer itself, each notebook's builder on the ci
pipeline's data, and a papermill parameter reaching the live run."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from workbench import explorers
from workbench.config import load
from workbench.report import palette
from workbench.report.explore import Explorer, dropdown, slider
from workbench.report.plotting import readability


def _artists(ax) -> list[np.ndarray]:
    """What the axes draws: every line's x and y data, every bar's position and size."""
    out = [np.asarray(line.get_xydata(), dtype=float) for line in ax.get_lines()]
    out += [np.array([p.get_x(), p.get_y(), p.get_width(), p.get_height()])
            for p in ax.patches]
    return out


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and np.allclose(x, y, equal_nan=True)
                                    for x, y in zip(a, b))


# -- the Explorer ---------------------------------------------------------------------------------
@pytest.fixture
def toy() -> tuple[Explorer, list[dict]]:
    calls: list[dict] = []

    def run(scale: float, kind: str) -> pd.DataFrame:
        calls.append({"scale": scale, "kind": kind})
        return pd.DataFrame({"x": [1.0, 2.0, 3.0], "y": [scale, 2 * scale, 3 * scale],
                             "kind": kind})

    def plot(frame: pd.DataFrame, ax) -> None:
        if frame["kind"].iloc[0] == "line":
            ax.plot(frame["x"], frame["y"])
        else:
            ax.bar(frame["x"], frame["y"])

    explorer = Explorer(run, plot, {"scale": slider(1.0, 0.5, 4.0, 0.5, "scale"),
                                    "kind": dropdown("line", ["line", "bar"], "kind")},
                        title="toy")
    return explorer, calls


def test_explorer_runs_once_at_the_widgets_values(toy) -> None:
    explorer, calls = toy
    assert calls == [{"scale": 1.0, "kind": "line"}]
    assert explorer.values == {"scale": 1.0, "kind": "line"}
    assert list(explorer.data["y"]) == [1.0, 2.0, 3.0]
    (line,) = explorer.ax.get_lines()
    assert list(line.get_ydata()) == [1.0, 2.0, 3.0]
    assert "scale = 1" in explorer.status.value and "kind = line" in explorer.status.value


def test_update_reruns_and_redraws(toy) -> None:
    explorer, calls = toy
    before = _artists(explorer.ax)
    frame = explorer.update(scale=2.0)
    assert frame is explorer.data and list(frame["y"]) == [2.0, 4.0, 6.0]
    assert explorer.controls["scale"].value == 2.0  # the widget follows
    assert explorer.values == {"scale": 2.0, "kind": "line"}
    (line,) = explorer.ax.get_lines()  # redrawn on a cleared axes: one line, new data
    assert list(line.get_ydata()) == [2.0, 4.0, 6.0]
    assert not _same(before, _artists(explorer.ax))
    assert "scale = 2" in explorer.status.value
    explorer.update(kind="bar")
    assert not explorer.ax.get_lines()
    assert [p.get_height() for p in explorer.ax.patches] == [2.0, 4.0, 6.0]
    assert calls[-1] == {"scale": 2.0, "kind": "bar"} and len(calls) == 3


def test_moving_a_widget_reruns(toy) -> None:
    explorer, calls = toy
    explorer.controls["scale"].value = 3.0  # as the browser would
    assert calls[-1] == {"scale": 3.0, "kind": "line"}
    assert list(explorer.data["y"]) == [3.0, 6.0, 9.0]
    explorer.update(scale=3.5, kind="bar")  # two knobs at once: one run, not one per knob
    assert len(calls) == 3 and calls[-1] == {"scale": 3.5, "kind": "bar"}


def test_unknown_knob_raises_and_changes_nothing(toy) -> None:
    explorer, calls = toy
    with pytest.raises(KeyError, match="unknown knob"):
        explorer.update(scale=2.0, cache="lru")
    assert len(calls) == 1 and explorer.controls["scale"].value == 1.0


@pytest.mark.parametrize(("values", "message"), [
    ({"scale": 5.0}, "explorer 'toy': scale = 5.0: outside this knob's range [0.5, 4]"),
    ({"scale": 0.1, "kind": "line"}, "scale = 0.1: outside this knob's range [0.5, 4]"),
    ({"scale": "big"}, "scale = 'big': outside this knob's range"),
    ({"kind": "pie"}, "kind = 'pie': not one of ['line', 'bar']"),
])
def test_a_value_its_widget_would_clip_is_refused(toy, values: dict, message: str) -> None:
    """Before, ``update(cache_ratio=5)`` ran at the slider's end, 1.0, without a word."""
    from workbench.report.explore import KnobRangeError

    explorer, calls = toy
    with pytest.raises(KnobRangeError) as info:
        explorer.update(**values)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert len(calls) == 1 and explorer.controls["scale"].value == 1.0
    explorer.update(scale=4.0)  # the ends themselves are in range
    assert calls[-1]["scale"] == 4.0


def test_a_log_slider_knob_is_checked_in_its_values() -> None:
    from workbench.report.explore import KnobRangeError, log_slider

    explorer = Explorer(lambda ratio: pd.DataFrame({"x": [ratio]}),
                        lambda frame, ax: ax.plot(frame["x"]),
                        {"ratio": log_slider(0.1, -3, 0, label="ratio")})
    with pytest.raises(KnobRangeError, match=r"ratio = 5: outside this knob's range \[0.001, 1\]"):
        explorer.update(ratio=5)
    assert explorer.update(ratio=0.001)["x"].iloc[0] == pytest.approx(0.001)


def test_widget_builds(toy) -> None:
    import ipywidgets as w

    explorer, _ = toy
    box = explorer.widget()
    assert isinstance(box, w.VBox)
    title, controls, status = box.children
    assert "toy" in title.value
    slider_box, kind = controls.children
    assert list(slider_box.children) == [explorer.controls["scale"], explorer.entries["scale"]]
    assert kind is explorer.controls["kind"] and "kind" not in explorer.entries
    assert status is explorer.status
    assert explorer.png.startswith(b"\x89PNG")  # the plot, shown below the controls
    assert explorer.ran_with() == "toy: scale = 1, kind = line"


def test_a_value_typed_outside_a_sliders_range_is_refused_not_clamped(toy) -> None:
    explorer, calls = toy
    scale, entry = explorer.controls["scale"], explorer.entries["scale"]
    assert not scale.readout  # its own readout would clamp what is typed there
    entry.value = -5.0  # typed, as a person does
    assert len(calls) == 1 and scale.value == 1.0 and entry.value == 1.0
    assert "scale = -5.0: outside this knob&#x27;s range [0.5, 4]" in explorer.status.value
    assert explorer.error.startswith("KnobRangeError: explorer 'toy': scale = -5.0")
    assert "not run: scale stays 1" in explorer.status.value
    entry.value = 2.5  # inside: the slider takes it and the explorer reruns
    assert scale.value == 2.5 and calls[-1] == {"scale": 2.5, "kind": "line"}
    assert explorer.ran_with() == "toy: scale = 2.5, kind = line"
    scale.value = 3.0  # the slider moved: its box follows, and that is not a typed value
    assert entry.value == 3.0 and calls[-1]["scale"] == 3.0 and len(calls) == 3


def test_widget_error_shows_one_line_and_explorer_stays_usable(toy) -> None:
    explorer, calls = toy
    explorer._run_ok = explorer._run

    def failing(scale: float, kind: str) -> pd.DataFrame:
        if scale > 3.0:
            raise ValueError("scale above 3 is not allowed\nsecond line of detail")
        return explorer._run_ok(scale=scale, kind=kind)

    explorer._run = failing
    drawn = explorer.png
    explorer.controls["scale"].value = 3.5  # as the browser would: no exception escapes
    assert explorer.error == "ValueError: scale above 3 is not allowed"
    assert "scale above 3 is not allowed" in explorer.status.value
    assert "second line" not in explorer.status.value
    assert explorer.png == drawn and explorer.values["scale"] == 1.0  # the last good plot stays
    explorer.controls["scale"].value = 2.0  # still usable
    assert explorer.error == "" and explorer.values["scale"] == 2.0
    assert "scale = 2" in explorer.status.value


def _slow_toy(gate: threading.Event) -> tuple[Explorer, list[float]]:
    started: list[float] = []

    def run(scale: float) -> pd.DataFrame:
        started.append(scale)
        gate.wait(10)
        return pd.DataFrame({"x": [1.0, 2.0], "y": [scale, scale]})

    return Explorer(run, lambda f, ax: ax.plot(f["x"], f["y"]),
                    {"scale": slider(1.0, 0.5, 4.0, 0.5, "scale")}, background=True), started


def test_background_changes_supersede_the_queued_ones() -> None:
    gate = threading.Event()
    gate.set()
    explorer, started = _slow_toy(gate)  # the first run, synchronous
    gate.clear()
    explorer.TICK = 0.01
    explorer.controls["scale"].value = 1.5  # a press: the worker starts a run and blocks
    deadline = time.monotonic() + 5
    while len(started) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    for value in (2.0, 2.5, 3.0):  # three more presses while that run is still working
        explorer.controls["scale"].value = value
    while "running" not in explorer.status.value and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "newer change is waiting" in explorer.status.value or "running" in \
        explorer.status.value
    assert "running" in explorer.status.value  # progress while it works
    gate.set()
    assert explorer.wait(10)
    # the run already started finishes; of the three queued changes only the last runs
    assert started == [1.0, 1.5, 3.0]
    assert explorer.values == {"scale": 3.0} and list(explorer.data["y"]) == [3.0, 3.0]
    assert "scale = 3" in explorer.status.value


def test_background_error_keeps_the_explorer_usable() -> None:
    import threading

    gate = threading.Event()
    gate.set()
    explorer, started = _slow_toy(gate)
    good = explorer.png
    explorer._run = lambda scale: (_ for _ in ()).throw(RuntimeError("the run failed"))
    explorer.request(scale=2.0)
    assert explorer.wait(10)
    assert explorer.error == "RuntimeError: the run failed" and "the run failed" in \
        explorer.status.value
    assert explorer.png == good
    explorer._run = lambda scale: pd.DataFrame({"x": [1.0, 2.0], "y": [scale, 0.0]})
    explorer.request(scale=2.5)
    assert explorer.wait(10)
    assert explorer.error == "" and explorer.values == {"scale": 2.5}


# -- each notebook's explorer on the ci pipeline's data ----------------------------------------
# notebook -> (initial values, an update, a column of the frame the update must change)
CASES = {
    "datasets": ({"samples": 4096, "top_fraction": 0.05}, {"samples": 1024}, "lookup_share"),
    "het": ({"policy": "lfu", "bound": 10}, {"bound": 0}, "rows_moved_per_key"),
    # on the ci profile the dense AllReduce hides the cache's effect on time: bytes show it
    "het_train": ({"bound": 100, "cache_ratio": 0.1}, {"bound": 0}, "bytes"),
    "esd": ({"bandwidth_spread": 10.0}, {"bandwidth_spread": 100.0}, "transfer_s_per_batch"),
    "recd": ({"batch_size": 128}, {"batch_size": 32}, "dedup_factor"),
    "hotline": ({"hot_fraction": 0.05}, {"profile_rate": 1.0}, "popular_fraction"),
    "flexshard": ({"devices": 8}, {"devices": 16}, "savings_vs_rw_ms"),
    "distributed": ({"bandwidth_gbps": 0.1}, {"bandwidth_gbps": 1.0}, "comm_ms"),
    "combined": ({"mechanisms": "het"}, {"mechanisms": "esd,het,hotline"}, "bytes"),
}


#: the explorers whose colours are the systems (the column naming them); distributed's colours
#: are the parts of an iteration
SYSTEM_COLOURED = {"esd": "dispatcher", "het_train": "system", "combined": "system"}


def test_every_notebook_with_an_explorer_has_a_case() -> None:
    assert set(CASES) == set(explorers.BUILDERS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_notebook_explorer_reruns_on_ci_data(name: str, ci_pipeline: Path,
                                             tmp_path: Path) -> None:
    initial, change, column = CASES[name]
    explorer = explorers.BUILDERS[name](load(params=ci_pipeline), **initial)
    assert {k: explorer.values[k] for k in initial} == initial
    assert 2 <= len(explorer.controls) <= 4
    before, drawn = explorer.data, _artists(explorer.ax)
    assert len(before) and drawn, "the first run draws something"
    after = explorer.update(**change)
    assert {k: explorer.values[k] for k in change} == change
    old, new = before[column].to_numpy(float), after[column].to_numpy(float)
    assert old.shape != new.shape or not np.allclose(old, new, equal_nan=True)
    assert not _same(drawn, _artists(explorer.ax)), "the plot is redrawn with the new data"
    # the plot reads in its cell as the report's figures do (tests/test_readability.py)
    (tmp_path / "plot.png").write_bytes(explorer.png)
    problems = readability(explorer.figure, tmp_path / "plot.png").problems()
    assert not problems, problems
    # a system's colour is the report's (workbench/report/palette.py), where colour is the system
    from matplotlib.colors import to_hex
    key = SYSTEM_COLOURED.get(name)
    if key:
        drawn_colours = {to_hex(p.get_facecolor()) for p in explorer.ax.patches} | {
            to_hex(line.get_color()) for line in explorer.ax.get_lines()}
        wanted = {to_hex(c) for c in palette.colors(after[key]).values()}
        assert wanted <= drawn_colours, (wanted, drawn_colours)


@pytest.mark.parametrize("name", sorted(CASES))
def test_missing_data_prints_a_note(name: str, ci_params: Path,
                                    capsys: pytest.CaptureFixture) -> None:
    assert explorers.show(name, load(params=ci_params)) is None  # nothing preprocessed there
    assert "Explore section skipped" in capsys.readouterr().out


def test_papermill_parameter_sets_the_initial_value(ci_pipeline: Path, tmp_path: Path) -> None:
    from workbench.report.notebook import execute

    executed = execute("esd", tmp_path / "esd.ipynb", {
        "params_file": str(ci_pipeline), "out_dir": str(tmp_path / "esd"),
        "bandwidth_spread": 100.0})
    nb = json.loads(executed.read_text())
    last = [c for c in nb["cells"] if c["cell_type"] == "code"][-1]
    assert "explorers.show" in "".join(last["source"])
    shown = "".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                    for o in last["outputs"])
    assert "bandwidth_spread = 100," in shown  # the "ran with" line under the plot
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {})
               for o in last["outputs"])
    # the explorer's figure: a PNG in the cell's outputs (a display updated in place)
    assert any("image/png" in o.get("data", {}) for o in last["outputs"])


def test_an_explorer_fits_its_iterations_to_a_small_dataset() -> None:
    """Five Explore sections failed on small own data with an ``api.load(...)`` hint that named
    no notebook parameter: they now run the iterations the data holds, and say so."""
    from workbench.explorers.parts import TooLittleData, _fit

    assert _fit("own", 8192, 512, 16) == (16, "")
    assert _fit("own", 6480, 512, 16) == (12, " (all 6,144 of own's train samples)")
    with pytest.raises(TooLittleData, match="tiny has 540 train samples, fewer than one "
                                            "iteration's 1,024"):
        _fit("tiny", 540, 1024, 16)


def test_show_skips_a_section_its_data_cannot_fill(monkeypatch, capsys) -> None:
    from workbench.explorers import BUILDERS, TooLittleData, show

    def builder(cfg, **initial):
        raise TooLittleData("tiny has 540 train samples, fewer than one iteration's 1,024")

    monkeypatch.setitem(BUILDERS, "het", builder)
    assert show("het", None) is None
    assert capsys.readouterr().out == ("Explore section skipped: tiny has 540 train samples, "
                                       "fewer than one iteration's 1,024\n")
