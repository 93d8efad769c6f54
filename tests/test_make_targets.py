"""``make claim``, ``make check-ci`` and a Ctrl-C in ``make repro``, run as a reviewer runs
them, on the ci profile.

``make claim KEY=...`` runs in a copy of the built ci project (``tests/conftest.py``'s
``ci_project``) through the Makefile itself (``make -o params``: on the project's ci params,
with this virtualenv): a key measured by a foreach group recomputes the group's items and
judges the claim; a key no stage measures and a key with shell syntax run nothing. ``make
check-ci``'s own folder handling (:mod:`workbench.ci_project`) refuses what it must not
replace; CI runs the whole ``make check-ci`` after the suite (``.ci/run``). A Ctrl-C sent to
``make repro``'s process group while a stage runs leaves ``git status`` clean.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from workbench import ci_project as ci_build
from workbench.utils.errors import UserError
from workbench.utils.paths import REPO_ROOT

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def project(ci_project: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the built ci project (read only there) to run make in."""
    root = tmp_path_factory.mktemp("claim") / "project"
    shutil.copytree(ci_project, root, symlinks=True)
    return root


def _make(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(ci_build.make_command(*args), cwd=root, env=ci_build.tool_env(),
                          capture_output=True, text=True, timeout=1800)


def _mtimes(root: Path, folder: str) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns
            for p in sorted((root / folder).rglob("*")) if p.is_file()}


def test_make_claim_recomputes_a_foreach_group_and_judges_the_claim(project: Path) -> None:
    """recd.storage is measured by ``dedup``, a foreach group: every ``dedup@<ds>`` reruns
    (forced) and the claim is judged against the project's committed table."""
    before = _mtimes(project, "results/dedup")
    proc = _make(project, "claim", "KEY=recd.storage")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout + proc.stderr
    ran = {line.split()[2] for line in out.splitlines() if line.startswith("repro: done ")}
    datasets = {p.name for p in (project / "results" / "dedup").iterdir() if p.is_dir()}
    assert {f"dedup@{ds}" for ds in datasets} <= ran, out
    assert not any(name.startswith(("esd", "het_", "flexshard", "notebook")) for name in ran)
    after = _mtimes(project, "results/dedup")
    assert after.keys() == before.keys() and all(after[k] != before[k] for k in after), \
        "every dedup output is rewritten"
    judged = [line for line in out.splitlines() if line.startswith("recd.storage")]
    assert judged and "yes" in judged[0], out  # deterministic: inside its interval, equal


def test_make_claim_without_stages_or_with_shell_syntax_runs_nothing(project: Path) -> None:
    lock = (project / "dvc.lock").read_bytes()
    proc = _make(project, "claim", "KEY=het.table1_tf_parallax")
    assert proc.returncode != 0
    assert "measured by no stage" in proc.stderr and "repro: started" not in proc.stdout
    proc = _make(project, "claim", "KEY=recd.storage; touch pwned")
    assert proc.returncode != 0 and "is no claim of the register" in proc.stderr
    assert not (project / "pwned").exists() and (project / "dvc.lock").read_bytes() == lock
    proc = _make(project, "claim")
    assert proc.returncode != 0 and "usage: make claim KEY=" in proc.stdout


def test_check_ci_replaces_only_its_own_folder(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    (mine / "keep.txt").parent.mkdir()
    (mine / "keep.txt").write_text("a user's file")
    with pytest.raises(UserError, match="not made by make check-ci"):
        ci_build.prepare(mine, REPO_ROOT, None)
    assert (mine / "keep.txt").read_text() == "a user's file"
    with pytest.raises(UserError, match="holds this project"):
        ci_build.prepare(REPO_ROOT.parent, REPO_ROOT, None)
    with pytest.raises(UserError, match="no built ci project there"):
        ci_build.prepare(tmp_path / "new", REPO_ROOT, tmp_path)
    assert not (tmp_path / "new").exists()  # refused before anything is made
    # its own folder (marked) is replaced: a copy of the sources with the ci profile's params
    root = ci_build.prepare(tmp_path / "new", REPO_ROOT, None)
    assert (root / "Makefile").is_file() and (root / ".git").is_dir()
    assert "name: ci" in (root / "params.yaml").read_text()
    (root / "stale").write_text("x")
    assert not (ci_build.prepare(tmp_path / "new", REPO_ROOT, None) / "stale").exists()


def test_ctrl_c_in_make_repro_mid_stage_leaves_git_status_clean(project: Path) -> None:
    """Issue 68: DVC deletes a stage's outputs before its command; a Ctrl-C (SIGINT to the
    foreground process group, as a terminal sends it) while the stage runs must leave every
    committed file as it was, ``dvc.lock`` included."""
    import yaml

    params = yaml.safe_load((project / "params.yaml").read_text())
    params["experiments"]["dataset_stats"]["rank_points"] += 1  # stale: its stages rerun
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "params.yaml", "dvc.yaml", "dvc.lock", "results", "reports"],
                   cwd=project, check=True)
    subprocess.run([*git, "commit", "-qm", "committed"], cwd=project, check=True)
    proc = subprocess.Popen(ci_build.make_command("repro"), cwd=project,
                            env=ci_build.tool_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    seen = []
    assert proc.stdout is not None
    deadline = time.monotonic() + 300
    for line in proc.stdout:
        seen.append(line)
        if line.startswith("Running stage 'dataset_stats@") or time.monotonic() > deadline:
            break
    time.sleep(1.0)  # the stage's command is running: DVC has deleted its outputs
    os.killpg(proc.pid, signal.SIGINT)
    rest, _ = proc.communicate(timeout=180)
    out = "".join(seen) + rest
    assert proc.returncode != 0, out
    assert "Running stage 'dataset_stats@" in out, out
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                            cwd=project, capture_output=True, text=True, check=True).stdout
    assert status == "", f"{status}\n{out}"
    assert "outputs from before the run are back" in out, out
