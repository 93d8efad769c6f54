"""Interrupts, kills and sweeps of the data stages (issue 46): Ctrl-C and SIGTERM unwind a
stage with nothing left behind and no interpreter abort; what a SIGKILL leaves is removed by the
next writer of the same output; the points of a sweep of ``prepare`` keep their own data.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from helpers.downloads import criteo_tsv
from workbench.data.streaming import TableLayout, encode_streaming
from workbench.utils.io import atomic_dir, atomic_path, writing
from workbench.utils.paths import REPO_ROOT

# end to end (each runs the command line or a module as a user does): not in make test-fast
pytestmark = pytest.mark.slow

LAYOUT = TableLayout(dense=("I1",), categorical=("C1",))


def _blocks(n: int, then=None):
    """``n`` blocks of 1,000 rows; ``then(i)`` is called before block ``i``."""
    rng = np.random.default_rng(0)
    for i in range(n):
        if then is not None:
            then(i)
        yield {"label": (rng.random(1000) < 0.3).astype(np.float32),
               "I1": rng.integers(0, 50, 1000).astype(np.float64),
               "C1": np.array([f"t{k}" for k in rng.integers(0, 300, 1000)], dtype=object)}


def _interrupt(i: int) -> None:
    if i == 3:
        raise KeyboardInterrupt


def test_ctrl_c_while_parsing_leaves_no_work_database(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(KeyboardInterrupt):
        encode_streaming(_blocks(8, _interrupt), LAYOUT, out, test_fraction=0.2)
    assert list(out.iterdir()) == []  # DuckDB's scratch folder is gone, nothing half-written


def test_the_blocks_are_all_loaded_in_order(tmp_path: Path) -> None:
    """The stream a signal can end early still loads every row, in stored order, when none comes."""
    import pyarrow.parquet as pq

    out = tmp_path / "out"
    out.mkdir()
    result = encode_streaming(_blocks(7), LAYOUT, out, test_fraction=0.25)
    assert result.rows == {"train": 5250, "test": 1750}
    expected = np.concatenate([b["label"] for b in _blocks(7)])
    got = np.concatenate([pq.read_table(out / f"{s}.parquet")["label"].to_numpy()
                          for s in ("train", "test")])
    np.testing.assert_array_equal(got, expected)
    assert sorted(p.name for p in out.iterdir()) == ["test.parquet", "train.parquet"]


_SIGNALLED = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    sys.path.insert(0, {tests!r})
    from test_user_traps_interrupts import LAYOUT, _blocks
    from workbench.data.streaming import encode_streaming
    from workbench.utils.signals import exit_on_signals

    def kill(i):
        if i == 3:
            os.kill(os.getpid(), signal.{sig})

    # Ctrl-C reaches a process whose SIGINT is not ignored; a test run started in the
    # background (a non-interactive shell's `&`) hands SIG_IGN down, and Python then installs
    # no handler: the SIGINT would do nothing (the flake of issue 68: exit 0, empty stderr)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    out = Path(sys.argv[1])
    with exit_on_signals():
        encode_streaming(_blocks(40, kill), LAYOUT, out, test_fraction=0.2)
""")


@pytest.mark.parametrize(("sig", "status"), [("SIGINT", -signal.SIGINT), ("SIGTERM", 143)])
def test_a_signal_while_streaming_exits_cleanly(tmp_path: Path, sig: str, status: int) -> None:
    """DuckDB pulls the blocks from a Python iterator on its own threads: Ctrl-C raised there
    aborted the interpreter as it exited (status 134, "PyGILState_Release"). The signal is now
    deferred until DuckDB returns and raised again in the main thread."""
    out = tmp_path / "out"
    out.mkdir()
    done = subprocess.run([sys.executable, "-c", _SIGNALLED.format(
        tests=str(Path(__file__).parent), sig=sig), str(out)], capture_output=True, text=True,
        timeout=300, cwd=REPO_ROOT)
    assert done.returncode == status, done.stderr[-2000:]  # SIGINT: dies of it, as Python does
    assert "Fatal Python error" not in done.stderr
    assert list(out.iterdir()) == []


def test_a_killed_writers_temporaries_go_with_the_next_writer(tmp_path: Path) -> None:
    """SIGKILL runs no cleanup: the next writer of the same output removes what it left (a
    temporary folder with DuckDB's database in it, a notebook's temporary copy), and nothing of
    another output whose name starts alike."""
    processed = tmp_path / "processed"
    stale_dir = processed / ".bigc.ab12cd_9.tmp"
    (stale_dir / ".duckdb-x1y2z3").mkdir(parents=True)
    (stale_dir / ".duckdb-x1y2z3" / "work.duckdb").write_bytes(b"\0" * 1024)
    stale_file = processed / ".nb.ipynb.zz99zz99.tmp.ipynb"
    stale_file.write_text("{}")
    other = processed / ".bigc.v2.ab12cd_9.tmp"  # bigc.v2's, not bigc's
    other.mkdir()
    victim = tmp_path / "precious"
    victim.mkdir()
    (processed / ".bigc.qq11qq11.tmp").symlink_to(victim)  # a link: removed, not followed
    with atomic_dir(processed / "bigc") as tmp:
        (tmp / "meta.json").write_text("{}")
    with writing(processed / "nb.ipynb"), atomic_path(processed / "nb.ipynb") as tmp:
        tmp.write_text("{}")
    names = sorted(p.name for p in processed.iterdir())
    assert names == [".bigc.v2.ab12cd_9.tmp", "bigc", "nb.ipynb"]
    assert victim.is_dir()


def _local_dataset(tmp_path: Path) -> list[str]:
    raw = tmp_path / "own"
    raw.mkdir(exist_ok=True)
    (raw / "day.tsv").write_bytes(criteo_tsv(400))
    return ["dataset=local", f"dataset.path={raw}", "dataset.files=[day.tsv]",
            "dataset.name=own"]


def test_a_sweep_of_prepare_keeps_every_points_data(tmp_path: Path) -> None:
    """Each point of a data stage writes its own ``<job dir>/data``: the project's ``data/`` is
    not touched, and the second point does not replace the first one's dataset."""
    import json

    from workbench.config import compose
    from workbench.sweep import run_point

    shared = tmp_path / "data"
    cards = []
    for job, min_count in enumerate((1, 2)):
        cfg = compose(["profile=ci", "+stage=prepare", *_local_dataset(tmp_path),
                       f"dataset.min_count={min_count}", f"paths.data={shared}",
                       f"paths.results={tmp_path / 'results'}"])
        out = run_point(cfg, tmp_path / "sweep" / str(job))
        assert out == tmp_path / "sweep" / str(job) / "data" / "processed" / "own"
        cards.append(json.loads((out / "meta.json").read_text())["cardinalities"]["C1"])
    assert cards[0] > cards[1]  # min_count 2 drops the tokens seen once
    assert not (shared / "processed").exists()


def test_a_sweep_point_copies_the_projects_downloads(tmp_path: Path) -> None:
    """A registry dataset's point takes the files the project has already downloaded as its
    first mirror (no network, verified as copied)."""
    from omegaconf import OmegaConf

    from workbench.config import compose
    from workbench.sweep import _own_data

    cfg = compose(["profile=ci", "+stage=preprocess", "dataset=criteo_sample",
                   f"paths.data={tmp_path / 'data'}"])
    plain = OmegaConf.create({k: v for k, v in OmegaConf.to_container(cfg).items()
                              if k not in ("stage", "stage_dataset")})
    from workbench.config import validate

    stage = _own_data(plain, validate(plain), "preprocess", None, tmp_path / "job")
    assert stage == "prepare"  # the point's data has no raw files before its download
    assert plain.paths.data == str(tmp_path / "job" / "data")
    assert plain.paths.mirrors[0] == str(tmp_path / "data" / "downloads" / "criteo_sample")


def test_sigterm_of_a_stage_prints_one_line(tmp_path: Path) -> None:
    """The stages' entry point: SIGTERM unwinds (exit 143) with one line, not a traceback."""
    code = textwrap.dedent("""
        import os, signal, sys
        from workbench.stages import cli
        def run(argv, prog):
            os.kill(os.getpid(), signal.SIGTERM)
        cli.run = run
        cli.main([])
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=REPO_ROOT, env={**os.environ})
    assert done.returncode == 128 + signal.SIGTERM
    assert done.stderr.strip().startswith("stopped by SIGTERM") and "Traceback" not in done.stderr


def test_a_dedup_point_partitions_its_own_copy(tmp_path: Path) -> None:
    """A sweep of ``dedup`` replaced ``data/partitions/<dataset>`` at each point: a point now
    partitions a copy of the processed dataset in its own data root."""
    from omegaconf import OmegaConf

    from workbench.config import compose, validate
    from workbench.sweep import _own_data

    shared = tmp_path / "data"
    (shared / "processed" / "synthetic_sessions").mkdir(parents=True)
    (shared / "processed" / "synthetic_sessions" / "meta.json").write_text("{}")
    cfg = compose(["profile=ci", "+stage=dedup", f"paths.data={shared}"])
    plain = OmegaConf.create({k: v for k, v in OmegaConf.to_container(cfg).items()
                              if k not in ("stage", "stage_dataset")})
    assert _own_data(plain, validate(plain), "dedup", "synthetic_sessions",
                     tmp_path / "job") == "dedup"
    assert plain.paths.data == str(tmp_path / "job" / "data")
    assert (tmp_path / "job" / "data" / "processed" / "synthetic_sessions" / "meta.json").is_file()


@pytest.mark.parametrize("wrapped", ["set_name", "hydra", "config"])
def test_a_ctrl_c_wrapped_by_a_library_is_still_an_interrupt(
        wrapped: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """A Ctrl-C in a stage's first seconds arrives wrapped: Python's ``__set_name__`` makes it a
    RuntimeError, Hydra's compose a config error ("bad override ...: " with an empty reason).
    Either ends as the interrupt: one line, exit 130."""
    from hydra.errors import HydraException

    from workbench import config
    from workbench.stages import cli
    from workbench.utils.validation import ConfigError

    def interrupted(*_a: object, **_k: object) -> None:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as ki:
            if wrapped == "set_name":
                raise RuntimeError("Error calling __set_name__ on '_Field' instance") from ki
            if wrapped == "hydra":
                raise HydraException("") from ki
            raise ConfigError("bad override or config group: ") from ki

    if wrapped == "hydra":  # the real compose, its Hydra call interrupted
        monkeypatch.setattr("hydra.compose", interrupted)
        with pytest.raises(KeyboardInterrupt):
            config.compose(["seed=1"])
    monkeypatch.setattr(cli, "run", interrupted)
    with pytest.raises(SystemExit) as stop:
        cli.main(["het-train"])
    assert stop.value.code == 130
    err = capsys.readouterr().err.strip()
    assert err.startswith("interrupted: the stage stopped") and "\n" not in err
