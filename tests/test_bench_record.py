"""``make bench``'s committed record (``benchmarks/record.py``): gathered from the run's JSONs,
one verdict row per ``meets_*`` field, and docs/benchmarks.md showing the newest record."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import record  # noqa: E402


def test_a_run_is_gathered_into_one_record_and_the_page_follows_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    results = tmp_path / "results"
    results.mkdir()
    monkeypatch.setattr(record, "RESULTS", results)
    old = results / "stale.json"
    old.write_text(json.dumps({"meets_target": True}))
    os.utime(old, (1, 1))  # written before this run: left out
    (results / "cache_replay.json").write_text(json.dumps(
        {"meets_target": False, "meets_target_48": True, "target_floor_fraction": 0.4,
         "targeted": "x", "results": [1]}))
    (results / "ikjt_conversion.json").write_text(json.dumps({"runs": 3}))
    with pytest.raises(SystemExit, match="no benchmark wrote"):
        record.gather(since=4e9)
    assert record.main(["--since", "100", "--seconds", "90"]) == 0
    written = [p for p in results.iterdir() if record.RECORD_NAME.match(p.name)]
    assert len(written) == 1 and written[0].name.endswith("c.json")
    rec = json.loads(written[0].read_text())
    assert sorted(rec["benchmarks"]) == ["cache_replay", "ikjt_conversion"]
    assert [(r["verdict"], r["met"]) for r in rec["targets"]] == [
        ("meets_target", False), ("meets_target_48", True)]
    assert rec["targets"][0]["targets"] == {"target_floor_fraction": 0.4, "targeted": "x"}
    docs = tmp_path / "benchmarks.md"
    docs.write_text(f"# B\n\n{record.START}\nold\n{record.END}\n\nrest\n")
    monkeypatch.setattr(record, "DOCS", docs)
    assert record.main(["--check"]) == 1
    assert record.main(["--docs"]) == 0 and record.main(["--check"]) == 0
    text = docs.read_text()
    assert "| `cache_replay` | `meets_target` | **no** | target_floor_fraction = 0.4" in text
    assert text.endswith("\n\nrest\n") and "old" not in text


def test_the_slug_names_the_cpu_and_cores() -> None:
    assert record.slug({"cpu": "AMD EPYC 7B13 64-Core Processor", "cores": 2}) == \
        "amd-epyc-7b13-64-2c"
    assert record.slug({"cpu": "Intel(R) Xeon(R) CPU @ 2.20GHz", "cores": 2}) == "intel-xeon-2c"


def test_the_committed_page_shows_the_newest_committed_record() -> None:
    if record.newest() is None:
        pytest.fail("no committed benchmark record in benchmarks/results/: run make bench")
    assert record.main(["--check"]) == 0
