"""make check's comparison: a recomputed claims table against the committed one."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from workbench.claims import check

COLUMNS = ["key", "mean", "ci_low", "ci_high", "seeds", "state"]


def _table(path: Path, rows: list[tuple]) -> Path:
    pd.DataFrame(rows, columns=COLUMNS).to_csv(path, index=False)
    return path


def test_inside_outside_and_state_changes(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    committed = _table(tmp_path / "old.csv", [
        ("a", 2.0, 1.8, 2.2, 3, "reproduced"),          # wall clock, an interval
        ("b", 1.5, 1.5, 1.5, 1, "direction only"),      # deterministic: width 0
        ("c", 0.3, 0.3, 0.3, 1, "reproduced"),
        ("d", None, None, None, 0, "not comparable")])  # nothing to compare
    current = _table(tmp_path / "new.csv", [
        ("a", 2.15, 2.0, 2.3, 3, "reproduced"),
        ("b", 1.5 * (1 + 1e-9), 1.5, 1.5, 1, "direction only"),
        ("c", 0.31, 0.31, 0.31, 1, "direction only"),
        ("d", None, None, None, 0, "not comparable")])
    table = check.compare(check.read(committed), check.read(current)).set_index("key")
    assert table.loc["a", "inside"] and table.loc["b", "inside"]  # b equal to 1e-6
    assert not table.loc["c", "inside"] and table.loc["c", "changed"]
    assert pd.isna(table.loc["d", "inside"]) and not table.loc["d", "changed"]
    assert check.main(["--committed", str(committed), "--current", str(current)]) == 1
    out = capsys.readouterr().out
    assert "reproduced -> direction only" in out and "NO" in out
    assert "4 claims: 2 inside their committed interval, 1 outside, 1 with nothing to " \
           "compare; 2 value(s) differ from the committed, 0 could not be measured; 1 state(s) " \
           "changed." in out
    assert table.loc["b", "same_value"] and not table.loc["a", "same_value"]


def test_unchanged_states_exit_zero(tmp_path: Path) -> None:
    rows = [("a", 2.0, 1.8, 2.2, 3, "reproduced")]
    old, new = _table(tmp_path / "o.csv", rows), _table(tmp_path / "n.csv", rows)
    assert check.main(["--committed", str(old), "--current", str(new)]) == 0


def test_missing_or_old_tables_are_one_line_errors(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    new = _table(tmp_path / "n.csv", [("a", 2.0, 1.8, 2.2, 3, "reproduced")])
    assert check.main(["--committed", str(tmp_path / "nope.csv"), "--current", str(new)]) == 2
    assert "no claims table there" in capsys.readouterr().err
    old = tmp_path / "old.csv"
    pd.DataFrame({"paper": ["HET"], "state": ["reproduced"]}).to_csv(old, index=False)
    assert check.main(["--committed", str(old), "--current", str(new)]) == 2
    err = capsys.readouterr().err
    assert "predates the register" in err and err.count("\n") == 1


def test_a_results_folder_from_elsewhere_is_judged_claim_by_claim(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``workbench check --results DIR``: a folder holding one stage's results judges that
    stage's claims and names, per claim, the file the others miss; bad folders get one line."""
    import shutil

    from workbench.cli import main as cli
    from workbench.utils.paths import REPO_ROOT

    folder = tmp_path / "theirs"
    shutil.copytree(REPO_ROOT / "results" / "hotline", folder / "hotline")
    with pytest.raises(SystemExit) as stop:
        cli(["check", "--results", str(folder)])
    assert stop.value.code == 0  # nothing changed state: the missing are reported, not judged
    out = capsys.readouterr().out
    hotline = next(line for line in out.splitlines() if line.startswith("hotline.speedup "))
    assert "  =  " in hotline and "modelled" in hotline
    recd = out.splitlines()[out.splitlines().index(
        next(line for line in out.splitlines() if line.startswith("recd.storage "))) + 1]
    assert "dedup" in recd and "not found" in recd
    assert "could not be measured" in out.splitlines()[-1]
    for bad, says in ((tmp_path / "nope", "no such folder"),
                      (tmp_path, "none of the claims' stage folders")):
        if bad == tmp_path:
            (tmp_path / "stray").mkdir()
            shutil.rmtree(folder)
        assert check.main(["--results", str(bad)]) == 2
        assert says in capsys.readouterr().err
    empty = tmp_path / "empty"  # a stage folder with nothing in it: no claim checked, not 0
    (empty / "esd").mkdir(parents=True)
    assert check.main(["--results", str(empty)]) == 2
    assert "nothing in " in capsys.readouterr().err
    assert check.main(["--results", str(empty), "--claim", "esd.cost"]) == 2
    assert "could be measured for 'esd.cost'" in capsys.readouterr().err


def test_one_claims_stages_and_a_misspelt_key(capsys: pytest.CaptureFixture) -> None:
    """``make claim KEY=...`` reruns the stages ``--stages --claim KEY`` prints."""
    from workbench.repro import load_pipeline, to_run
    from workbench.utils.paths import REPO_ROOT

    assert check.main(["--stages", "--claim", "recd.storage"]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == ["dedup"]
    # what it prints, the runner accepts: the group's items and what they depend on
    picked = [s.name for s in to_run(load_pipeline(REPO_ROOT), force=True, changed=None,
                                     targets=printed)]
    assert picked and all(n.split("@")[0] in ("download", "preprocess", "dedup")
                          for n in picked) and any(n.startswith("dedup@") for n in picked)
    for key in ("het.fig8_lfu_lru", "het.fig7a_comm.wdl", "esd.cost"):  # every measured kind
        assert check.main(["--stages", "--claim", key]) == 0
        assert to_run(load_pipeline(REPO_ROOT), force=True, changed=None,
                      targets=capsys.readouterr().out.split())
    # a claim no stage measures: an error, not an empty list (`make claim` would rerun all)
    assert check.main(["--stages", "--claim", "het.table1_tf_parallax"]) == 2
    assert "measured by no stage" in capsys.readouterr().err
    assert check.main(["--stages", "--claim", "recd.strage"]) == 2
    assert "did you mean 'recd.storage'" in capsys.readouterr().err


def test_the_runner_takes_a_claim_and_refuses_what_it_cannot_run(
        capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """``make claim`` / ``make check`` hand the key to ``python -m workbench.repro --claim``
    (never to a shell): a stage-less or unknown key runs nothing and says why in one line; a
    measured key forces its stages, then judges the claim."""
    from workbench import repro
    from workbench.utils.paths import REPO_ROOT

    monkeypatch.chdir(REPO_ROOT)
    ran: list[list[str]] = []

    class Recorder:
        def __init__(self, chosen, jobs, *, force, root):  # type: ignore[no-untyped-def]
            ran.append([s.name for s in chosen])
            assert force

        def run(self) -> int:
            return 0

    judged: list[list[str]] = []
    monkeypatch.setattr(repro, "Scheduler", Recorder)
    monkeypatch.setattr(check, "main", lambda argv: judged.append(argv) or 0)
    assert repro.main(["--claim", "het.table1_tf_parallax"]) == 2
    assert "measured by no stage" in capsys.readouterr().err and not ran
    assert repro.main(["--claim", "recd.storage; touch pwned"]) == 2
    assert "is no claim of the register" in capsys.readouterr().err and not ran
    assert repro.main(["--claim", "recd.storage", "esd"]) == 2
    assert "not both" in capsys.readouterr().err and not ran
    assert repro.main(["--claim", "recd.storage"]) == 0
    assert any(n.startswith("dedup@") for n in ran[0])
    assert judged == [["--results", str(REPO_ROOT / "results"), "--claim", "recd.storage"]]
    assert repro.main(["--claims"]) == 0
    assert {n.split("@")[0] for n in ran[1]} >= {"esd", "het_epoch", "flexshard", "dedup"}
    assert "export KEY" in (REPO_ROOT / "Makefile").read_text()
