"""``make metrics``: the report's claims metrics as short tables, and their diff against a git
revision that says "no change" when there is none (``workbench.claims.metrics_view``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.claims import metrics_view
from workbench.utils.errors import UserError
from workbench.utils.paths import REPO_ROOT

COMMITTED = REPO_ROOT / "reports" / "claims_metrics.json"


def test_the_counts_and_every_claim_in_short_lines() -> None:
    record = metrics_view.read(COMMITTED)
    text = metrics_view.show(record)
    lines = text.splitlines()
    total = sum(record["counts"].values())
    assert lines[0] == f"register v{record['register_version']}: {total} measurements"
    for state, count in record["counts"].items():
        assert any(line.split() == [*state.split("_"), str(count)] for line in lines), state
    for key, claim in record["claims"].items():
        row = next(line for line in lines if line.startswith(key + " "))
        assert claim["state"] in row
    assert max(map(len, lines)) < 120  # not one row of every field


def test_a_diff_names_what_changed_or_says_no_change(tmp_path: Path) -> None:
    before = metrics_view.read(COMMITTED)
    assert metrics_view.diff(before, before, "HEAD") == \
        "no change: the claims metrics equal those at HEAD"
    after = json.loads(json.dumps(before))
    key = sorted(after["claims"])[0]
    old_state = after["claims"][key]["state"]
    after["claims"][key]["state"] = "contradicted"
    after["claims"][key]["mean"] = 9.5
    after["counts"]["contradicted"] = after["counts"].get("contradicted", 0) + 1
    text = metrics_view.diff(before, after, "HEAD~1")
    row = next(line for line in text.splitlines() if line.startswith(key + " "))
    assert old_state in row and "contradicted: 9.5" in row
    assert "contradicted" in text.split(key)[0]  # the counts table first
    assert sum(line.startswith(tuple(after["claims"])) for line in text.splitlines()) == 1


def test_bad_input_is_one_line_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"no claims metrics; the report stage writes them"):
        metrics_view.read(tmp_path / "none.json")
    (tmp_path / "x.json").write_text('{"a": 1}')
    with pytest.raises(UserError, match=r"not the report's claims metrics"):
        metrics_view.read(tmp_path / "x.json")
    with pytest.raises(UserError, match=r"REV=no-such-rev: git has no reports/claims_metrics"):
        metrics_view.at_revision("no-such-rev")


def test_make_metrics_through_the_makefile() -> None:
    """The Makefile's recipe as a reader runs it (without installing: ``-o install``)."""
    venv = f"VENV={Path(sys.executable).parent.parent}"
    shown = subprocess.run(["make", "--no-print-directory", "-o", "install", "metrics", venv],
                           cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("register v")
    same = subprocess.run(["make", "--no-print-directory", "-o", "install", "metrics", venv,
                           "REV=HEAD"], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=120)
    committed = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", str(COMMITTED)],
                               cwd=REPO_ROOT).returncode == 0
    assert same.returncode == 0, same.stderr
    if committed:  # the working tree's file is the committed one
        assert same.stdout.strip() == "no change: the claims metrics equal those at HEAD"
    bad = subprocess.run(["make", "--no-print-directory", "-o", "install", "metrics", venv,
                          "REV=no-such-rev"], cwd=REPO_ROOT, capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode != 0
    assert "metrics: UserError: REV=no-such-rev: git has no" in bad.stderr
