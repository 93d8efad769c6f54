"""Atomic outputs: one directory, and several directories committed together under a journal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.utils import io


def _fill(directory: Path, text: str) -> None:
    (directory / "f.txt").write_text(text)


def test_atomic_dirs_replace_both_or_neither(tmp_path: Path) -> None:
    a, b = tmp_path / "data" / "parts", tmp_path / "results" / "dedup"
    with io.atomic_dirs(a, b) as (ta, tb):
        _fill(ta, "a1")
        _fill(tb, "b1")
    assert (a / "f.txt").read_text() == "a1" and (b / "f.txt").read_text() == "b1"
    with pytest.raises(RuntimeError), io.atomic_dirs(a, b) as (ta, tb):
        _fill(ta, "a2")
        raise RuntimeError("the stage failed")
    assert (a / "f.txt").read_text() == "a1" and (b / "f.txt").read_text() == "b1"
    assert sorted(p.name for p in a.parent.iterdir()) == ["parts"]  # no temporaries left


def test_a_commit_killed_between_renames_is_completed_by_the_next_reader(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = tmp_path / "parts", tmp_path / "dedup"
    with io.atomic_dirs(a, b) as (ta, tb):
        _fill(ta, "old")
        _fill(tb, "old")
    calls = []
    real = io._replace_dir

    def dies_after_first(tmp: Path, dest: Path) -> None:
        calls.append(dest)
        if len(calls) == 2:
            raise KeyboardInterrupt  # kill -9 between the two renames
        real(tmp, dest)

    monkeypatch.setattr(io, "_replace_dir", dies_after_first)
    with pytest.raises(KeyboardInterrupt), io.atomic_dirs(a, b) as (ta, tb):
        _fill(ta, "new")
        _fill(tb, "new")
    monkeypatch.setattr(io, "_replace_dir", real)
    assert (a / "f.txt").read_text() == "new" and (b / "f.txt").read_text() == "old"  # torn
    journal = a.with_name(".parts.commit.json")
    assert len(json.loads(journal.read_text())) == 2
    assert io.finish_commit(a, b) is True
    assert (a / "f.txt").read_text() == "new" and (b / "f.txt").read_text() == "new"
    assert not journal.exists() and io.finish_commit(a, b) is False
