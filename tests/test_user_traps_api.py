"""The traps a user met in the Python API, the notebooks' parameters, the explorers, the replay
commands and the sweeps.

Each test makes the call or runs the command as the user did and checks the one line it answers
with (the parameter, its value and its allowed range), that no traceback is shown, and that
nothing was lost or half-written.
"""

from __future__ import annotations

import ast
import inspect
import json
import logging
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers.traps import failed_with, run
from workbench import api, explorers
from workbench.arguments import ArgumentError
from workbench.utils.errors import UserError, one_line
from workbench.utils.paths import NOTEBOOK_DIR

# end to end (each runs the command line or a module as a user does): not in make test-fast
pytestmark = pytest.mark.slow

KEYS = np.random.default_rng(0).integers(0, 1000, (2048, 4))


def _one_line(err: pytest.ExceptionInfo) -> str:
    """The line a notebook shows for the error (IPython's ``_render_traceback_``)."""
    assert isinstance(err.value, UserError)
    (line,) = err.value._render_traceback_()
    assert line == one_line(err.value) and "\n" not in line
    return line


# -------------------------------------------------------------------------- api parameters

@pytest.fixture(scope="module")
def cfg():
    return api.config()


def toy_data(rows: int = 1000) -> api.Data:
    train = pd.DataFrame({"label": np.zeros(len(KEYS))})
    return api.Data("toy", train, train, None, rows)


CALLS = {
    "replay_cache ratio 5": (lambda cfg: api.replay_cache(KEYS, 1000, cache_ratio=5),
                             "api.replay_cache: cache_ratio = 5.0: must be a number > 0.0 and "
                             "<= 1.0 (as config key cache.ratio)"),
    "replay_cache ratio nan": (lambda cfg: api.replay_cache(KEYS, 1000, cache_ratio=math.nan),
                               "api.replay_cache: cache_ratio = nan: must be a finite number > 0.0"
                               " and <= 1.0 (as config key cache.ratio)"),
    "replay_cache workers 0": (lambda cfg: api.replay_cache(KEYS, 1000, workers=0),
                               "api.replay_cache: workers = 0: must be an integer >= 1 and <= "
                               "1024 (as config key experiments.het_cache.workers)"),
    "replay_cache numpy bound": (lambda cfg: api.replay_cache(KEYS, 1000, bound=np.int64(-1)),
                                 "api.replay_cache: bound = -1: must be an integer >= 0 (as "
                                 "config key cache.read_bound)"),
    "replay_cache key beyond rows": (lambda cfg: api.replay_cache(KEYS, 10),
                                     "api.replay_cache: keys hold 999, outside the table's rows "
                                     "0..9"),
    "dispatch workers 0": (lambda cfg: api.dispatch(toy_data(), ["random"], cfg, workers=0),
                           "api.dispatch: workers = 0: must be an integer >= 1 and <= 1024 (as "
                           "config key experiments.esd.workers)"),
    "dispatch spread nan": (lambda cfg: api.dispatch(toy_data(), ["random"], cfg,
                                                     bandwidth_spread=math.nan),
                            "api.dispatch: bandwidth_spread = nan: must be a finite number >= 1.0"),
    "dispatch unknown knob": (lambda cfg: api.dispatch(toy_data(), ["random"], cfg, wokers=4),
                              "api.dispatch: unknown keyword 'wokers': the keywords are the fields"
                              " of experiments.esd"),
    "dispatch unknown dispatcher": (lambda cfg: api.dispatch(toy_data(), ["fastest"], cfg),
                                    "api.dispatch: dispatchers = ['fastest']: must be a non-empty "
                                    "list of"),
    "train cache ratio 5": (lambda cfg: api.train(toy_data(), cfg, cache_ratio=5),
                            "api.train: cache_ratio = 5.0: must be a number > 0.0 and <= 1.0 (as "
                            "config key experiments.combined.cache_ratio)"),
    "train steps 0": (lambda cfg: api.train(toy_data(), cfg, steps=0),
                      "api.train: steps = 0: must be an integer >= 1"),
    "hot_tier profile rate 0": (lambda cfg: api.hot_tier(KEYS, 1000, [0.01], profile_rate=0),
                                "api.hot_tier: profile_rate = 0.0: must be a number > 0.0 and <= "
                                "1.0 (as config key experiments.hotline.profile_rate)"),
    "access_skew fraction nan": (lambda cfg: api.access_skew(KEYS, 1000, [0.1, math.nan]),
                                 "api.access_skew: fractions[1] = nan: must be a finite number > "
                                 "0.0 and <= 1.0"),
    "load 0 samples": (lambda cfg: api.load(cfg, train_samples=0),
                       "api.load: train_samples = 0: must be an integer >= 1"),
    "flexshard devices not whole nodes": (lambda cfg: api.flexshard(cfg, devices=3),
                                          "api.flexshard: devices = 3: must be whole nodes of "
                                          "topology.devices_per_node"),
    "ikjt batch 0": (lambda cfg: api.ikjt(pd.DataFrame({"a": [1]}), ["a"], [["a"]],
                                          batch_size=0),
                     "api.ikjt: batch_size = 0: must be an integer >= 1"),
    # huge numbers: refused before any allocation (they overflowed, or tried 7 EiB)
    "replay_cache rows 2**70": (lambda cfg: api.replay_cache(KEYS, 2**70),
                                f"api.replay_cache: rows = {2**70}: must be below 2**62"),
    "replay_cache bound 2**70": (lambda cfg: api.replay_cache(KEYS, 1000, bound=2**70),
                                 f"api.replay_cache: bound = {2**70}: must be below 2**62"),
    "replay_cache epochs 1e9": (lambda cfg: api.replay_cache(KEYS, 1000, epochs=10**9),
                                "api.replay_cache: epochs = 1000000000: must be an integer >= 1 "
                                "and <= 1048576"),
    "replay_cache rows 1e18": (lambda cfg: api.replay_cache(KEYS, 10**18),
                               "api.replay_cache: rows = 1,000,000,000,000,000,000: the table's "
                               "per-row arrays would take at least"),
    "access_skew rows 1e18": (lambda cfg: api.access_skew(KEYS, 10**18, [0.1]),
                              "api.access_skew: rows = 1,000,000,000,000,000,000: the table's"),
    "hot_tier rows 1e18": (lambda cfg: api.hot_tier(KEYS, 10**18, [0.1]),
                           "api.hot_tier: rows = 1,000,000,000,000,000,000: the table's"),
    "cluster rows 1e18": (lambda cfg: api.cluster(cfg, 10**18),
                          "api.cluster: rows = 1,000,000,000,000,000,000: the table's"),
    "train bound 2**70": (lambda cfg: api.train(toy_data(), cfg, steps=1, bound=2**70),
                          f"api.train: bound = {2**70}: must be below 2**62"),
    "timedelta keys": (lambda cfg: api.access_skew(KEYS.astype("m8[s]"), 1000, [0.1]),
                       "api.access_skew: keys of shape (2048, 4) and dtype timedelta64[s]: must "
                       "be integer keys"),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_an_api_call_checks_its_numbers_before_any_work(cfg, name: str) -> None:
    call, message = CALLS[name]
    with pytest.raises(ArgumentError) as err:
        call(cfg)
    assert _one_line(err).startswith(f"ArgumentError: {message}")


def test_a_replay_whose_caches_never_fill_warns(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="workbench.api"):
        cold = api.replay_cache(KEYS, 1000, cache_ratio=1.0, workers=2, per_worker=64)
    assert math.isnan(cold["miss_rate"].iloc[0])
    (record,) = caplog.records
    assert "the caches never filled (1,000 lines per worker" in record.getMessage()
    assert "cold-start measurement" in record.getMessage()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="workbench.api"):
        warm = api.replay_cache(KEYS, 1000, cache_ratio=0.01, workers=2, per_worker=64)
    assert not math.isnan(warm["miss_rate"].iloc[0]) and not caplog.records


# ------------------------------------------------------------------ notebooks and explorers

def test_a_notebook_parameter_out_of_range_stops_the_first_cell(tmp_path: Path) -> None:
    """``papermill het.ipynb out.ipynb -p cache_ratio 5``: one line, no traceback, no copy."""
    import papermill as pm

    from workbench.report.notebook import execute

    executed = tmp_path / "het.ipynb"
    with pytest.raises(pm.PapermillExecutionError) as err:
        execute("het", executed, {"cache_ratio": 5})
    assert err.value.ename == "NotebookError"
    assert err.value.traceback == [
        "NotebookError: notebook 'het': parameter cache_ratio = 5.0: must be a number > 0.0 and "
        "<= 1.0 (as config key experiments.het_cache.cache_ratio); set it in the parameters cell "
        "or with papermill -p, or None for the configuration's value"]
    assert not executed.exists()


@pytest.mark.parametrize(("name", "knobs", "says"), [
    ("esd", {"bandwidth_spread": math.nan}, "parameter bandwidth_spread = nan: must be a finite "
     "number >= 1.0 (as config key experiments.esd.bandwidth_spread)"),
    ("hotline", {"profile_rate": 2}, "parameter profile_rate = 2.0: must be a number > 0.0 and "
     "<= 1.0"),
    ("het", {"policy": "fifo"}, "parameter policy = 'fifo': must be one of 'lru', 'lfu'"),
    ("het", {"cache_size": 0.1}, "has no parameter 'cache_size': its explorer's parameters are "
     "['policy', 'cache_ratio', 'bound']"),
])
def test_notebook_parameters_are_checked_in_notebook_config(name: str, knobs: dict,
                                                            says: str) -> None:
    from workbench.explorers import notebook_config
    from workbench.report.notebook import NotebookError

    with pytest.raises(NotebookError) as err:
        notebook_config(name, "no-such-params.yaml", None, **knobs)  # before the params file
    assert says in _one_line(err)


def _parameters(name: str) -> list[str]:
    """The names the parameters cell of ``notebooks/<name>.py`` assigns."""
    source = (NOTEBOOK_DIR / f"{name}.py").read_text()
    cell = source.split('# %% tags=["parameters"]\n', 1)[1].split("\n# %%", 1)[0]
    return [t.id for node in ast.parse(cell).body if isinstance(node, ast.Assign)
            for t in node.targets if isinstance(t, ast.Name)]


@pytest.mark.parametrize("name", sorted(explorers.BUILDERS))
def test_every_notebook_parameter_reaches_its_check(name: str) -> None:
    """A knob added to a parameters cell but not to notebook_config would go unchecked."""
    knobs = [p for p in _parameters(name) if p not in ("params_file", "out_dir", "dataset")]
    builder = inspect.signature(explorers.BUILDERS[name]).parameters
    assert knobs and set(knobs) <= set(builder), (name, knobs)
    call = (NOTEBOOK_DIR / f"{name}.py").read_text().split(f'notebook_config("{name}"', 1)[1]
    call = call[: call.index(")")]
    assert all(f"{k}={k}" in call for k in knobs), (name, call)
    numeric = {k for k in knobs if k in explorers.KNOBS[name]}
    assert numeric, name


def test_an_unknown_explorer_lists_the_known_ones(cfg) -> None:
    with pytest.raises(ArgumentError) as err:
        explorers.show("nosuch", cfg)
    assert _one_line(err) == (
        "ArgumentError: explorers.show: no explorer named 'nosuch': the known explorers are "
        f"{', '.join(explorers.BUILDERS)} (one per notebook)")


@pytest.mark.parametrize(("name", "knobs", "says"), [
    ("het", {"cache_ratio": 5}, "explorers.het: cache_ratio = 5.0: must be a number > 0.0"),
    ("esd", {"per_worker": 0}, "explorers.esd: per_worker = 0: must be an integer >= 1"),
    ("combined", {"steps": 0}, "explorers.combined: steps = 0: must be an integer >= 1"),
    ("distributed", {"latency_ms": 0.0}, "explorers.distributed: latency_ms = 0.0: must be a "
     "number > 0.0"),
])
def test_an_explorer_checks_its_knobs_before_loading_data(cfg, name: str, knobs: dict,
                                                          says: str) -> None:
    with pytest.raises(ArgumentError) as err:
        explorers.BUILDERS[name](cfg, **knobs)
    assert says in _one_line(err)


# ------------------------------------------------------------------------- replay commands

@pytest.fixture
def traces(tmp_path: Path) -> Path:
    fmt = np.lib.format
    with (tmp_path / "claims_7pib.npy").open("wb") as fh:  # a header promising 8 PiB
        fmt.write_array_header_1_0(fh, {"descr": "<i8", "fortran_order": False,
                                        "shape": (2**47, 8, 1)})
        fh.write(np.arange(24, dtype="<i8").tobytes())
    np.save(tmp_path / "u64.npy", np.array([[[1, 2**63 + 5, 3]]] * 2, dtype=np.uint64))
    np.save(tmp_path / "steps.npy", np.random.default_rng(0).integers(0, 300, (3, 2, 50)))
    np.save(tmp_path / "samples.npy", np.random.default_rng(0).integers(0, 1000, (500, 4)))
    return tmp_path


@pytest.mark.parametrize(("args", "says"), [
    ("cache --trace {t}/claims_7pib.npy --out {t}/out.json",
     "claims_7pib.npy: the .npy header claims shape (140737488355328, 8, 1) of int64 "
     "(9,007,199,254,740,992 bytes of data) but the file holds 192 bytes after it"),
    ("cache --trace {t}/u64.npy --out {t}/out.json",
     "u64.npy: key 9223372036854775813 at [step 0, worker 0, position 1] is above "
     "9223372036854775807"),
    ("cache --trace {t}/steps.npy --dim 100000000000 --out {t}/out.json",
     "replay cache: --dim = 100000000000: must be an integer >= 1 and <= 65536"),
    ("dispatch --trace {t}/samples.npy --dispatcher random --workers 2 --per-worker 4 "
     "--cache-rows 10 --batches 0 --out {t}/out.json", "replay dispatch: --batches = 0: must be "
     "an integer >= 1"),
    ("dispatch --trace {t}/samples.npy --dispatcher random --workers 2 --per-worker 4 "
     "--cache-rows 10 --batches 100000000000000 --out {t}/out.json",
     "--batches 100000000000000: the output lists 800,000,000,000,000 sample indices"),
])
def test_replay_refuses_an_untrustworthy_trace_or_unbounded_option(traces: Path, args: str,
                                                                   says: str) -> None:
    proc = run("workbench.replay", *args.format(t=traces).split())
    assert proc.returncode == 2
    failed_with(proc, "TraceError", says)
    assert not (traces / "out.json").exists()


@pytest.mark.parametrize(("args", "cold"), [
    ("cache --trace {t}/steps.npy --cache-rows 1000", True),
    ("cache --trace {t}/steps.npy --cache-rows 10", False),
    ("dispatch --trace {t}/samples.npy --dispatcher random --workers 2 --per-worker 4 "
     "--cache-rows 10000 --batches 3", True),
])
def test_replay_warns_when_the_caches_never_fill(traces: Path, args: str, cold: bool) -> None:
    proc = run("workbench.replay", *args.format(t=traces).split(), "--out",
               str(traces / "out.json"))
    assert proc.returncode == 0, proc.stderr
    warned = [line for line in proc.stderr.splitlines() if "never filled" in line]
    assert len(warned) == int(cold), proc.stderr
    if cold:
        assert "every worker's cache never filled" in warned[0]
        assert "cold-start measurement" in warned[0]
    assert json.loads((traces / "out.json").read_text())["config"]


# -------------------------------------------------------------------------------- sweeps

def test_a_sweep_reports_every_failed_point_and_keeps_the_others(tmp_path: Path) -> None:
    """Point 0 fails in its stage, 1 and 3 fail validation, 2 succeeds: three lines, one each."""
    sweep = tmp_path / "sweep"
    proc = run("workbench.sweep", "--multirun", "+stage=download", "profile=ci",
               f"paths.data={tmp_path / 'data'}", f"hydra.sweep.dir={sweep}",
               "+stage_dataset=nosuch,synthetic", "seed=0,-1")
    last = failed_with(proc, "#3 ", "ConfigError: seed = -1: must be an integer >= 0")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    summary = lines[lines.index("sweep: 3 point(s) failed (the other points' outputs are kept "
                                "in their job directories):"):]
    assert [line.split(":", 1)[0].split()[0] for line in summary[1:]] == ["#0", "#1", "#3"]
    assert "+stage_dataset=nosuch seed=0: ConfigError: --dataset 'nosuch' is not configured" \
        in summary[1]
    assert "seed=-1: ConfigError: seed = -1" in summary[2] and summary[3] == last
    # point 2's, in its own data root (a data stage's points never share data/)
    assert (sweep / "2" / "data" / "raw" / "synthetic" / "manifest.json").is_file()
    assert not (tmp_path / "data" / "raw").exists()
    assert not (sweep / "2" / "failed.json").exists()
    assert not (sweep / "3" / "params.yaml").exists()  # refused before anything was written
