"""The package outside its checkout: the project-root rule, the ``workbench`` console command, and a
regular (non-editable) ``pip install`` that runs stages in an empty working directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import workbench
from workbench import cli
from workbench.utils.paths import REPO_ROOT, ROOT_ENV, project_root

CHECKOUT = Path(workbench.__file__).resolve().parents[1]


def test_project_root_rule(tmp_path: Path) -> None:
    package = tmp_path / "checkout" / "workbench"
    package.mkdir(parents=True)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    # not a checkout (e.g. site-packages): the working directory
    assert project_root({}, package, cwd) == cwd.resolve()
    (package.parent / "pyproject.toml").write_text("")
    assert project_root({}, package, cwd) == cwd.resolve(), "a checkout also holds dvc.yaml"
    # a source checkout: the package's parent, wherever the command starts
    (package.parent / "dvc.yaml").write_text("")
    assert project_root({}, package, cwd) == package.parent
    assert project_root({ROOT_ENV: ""}, package, cwd) == package.parent, "empty = unset"
    # the environment variable wins; a relative one is relative to the working directory
    assert project_root({ROOT_ENV: str(tmp_path / "r")}, package, cwd) == tmp_path / "r"
    assert project_root({ROOT_ENV: "rel"}, package, cwd) == cwd.resolve() / "rel"


def test_this_checkout_is_the_root_unless_the_variable_says_otherwise(tmp_path: Path) -> None:
    if not os.environ.get(ROOT_ENV):
        assert (CHECKOUT / "dvc.yaml").is_file()
        assert REPO_ROOT == CHECKOUT
    code = ("from workbench.utils import paths as p; "
            "print(p.REPO_ROOT, p.PARAMS_FILE, p.SCRATCH_DIR, p.CONF_DIR, sep='\\n')")
    env = {**os.environ, ROOT_ENV: str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=CHECKOUT, check=True,
                         capture_output=True, text=True).stdout.split("\n")
    assert out[:3] == [str(tmp_path.resolve()), str(tmp_path.resolve() / "params.yaml"),
                       str(tmp_path.resolve() / "scratch")]
    assert Path(out[3]) == CHECKOUT / "workbench" / "conf", "the config tree is package data"


def test_console_command_help_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"workbench {workbench.__version__}"
    with pytest.raises(SystemExit) as done:
        cli.main(["--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    for command in ("stage", "replay", "config", "sweep"):
        assert any(line.split()[:1] == [command] for line in text.splitlines()), command
    with pytest.raises(SystemExit) as done:
        cli.main(["no-such-command"])
    assert done.value.code == 2
    with pytest.raises(SystemExit) as done:
        cli.main([])
    assert done.value.code == 2


def test_console_command_forwards_its_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    import workbench.config
    import workbench.replay
    import workbench.stages
    import workbench.sweep

    seen: list[tuple[str, list[str] | None, list[str]]] = []
    for module in (workbench.stages, workbench.replay, workbench.config):
        monkeypatch.setattr(module, "main", lambda argv=None, name=module.__name__, **_:
                            seen.append((name, argv, list(sys.argv))))
    monkeypatch.setattr(workbench.sweep, "main",
                        lambda: seen.append(("workbench.sweep", None, list(sys.argv))))
    argv = list(sys.argv)
    cli.main(["stage", "prepare", "--dataset", "synthetic", "profile=ci"])
    cli.main(["replay", "cache", "--help"])
    cli.main(["config", "dump", "-o", "p.yaml"])
    cli.main(["sweep", "--multirun", "+stage=esd", "seed=1,2"])
    assert sys.argv == argv, "sys.argv is restored"
    assert seen == [
        ("workbench.stages", ["prepare", "--dataset", "synthetic", "profile=ci"],
         ["workbench stage", "prepare", "--dataset", "synthetic", "profile=ci"]),
        ("workbench.replay", ["cache", "--help"], ["workbench replay", "cache", "--help"]),
        ("workbench.config", ["dump", "-o", "p.yaml"],
         ["workbench config", "dump", "-o", "p.yaml"]),
        ("workbench.sweep", None, ["workbench sweep", "--multirun", "+stage=esd", "seed=1,2"]),
    ]


def _files(root: Path) -> dict[str, tuple[int, int]]:
    """``relative path -> (size, mtime)`` of the files under ``root`` (bytecode caches left out)."""
    if not root.is_dir():
        return {}
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def _is_this_workbench(name: str) -> bool:
    """Entries of site-packages that make this environment's ``workbench`` importable."""
    return name.startswith(("workbench", "__editable__")) or name == "workbench.pth"


@pytest.mark.slow
def test_pip_install_runs_stages_in_the_working_directory(tmp_path: Path) -> None:
    # the sources, copied: building in place would write build/ and *.egg-info into the checkout
    src = tmp_path / "src"
    shutil.copytree(CHECKOUT / "workbench", src / "workbench",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(CHECKOUT / name, src / name)

    # a fresh virtualenv that sees this one's dependencies (no download) but not its workbench:
    # a link to every entry of this site-packages except workbench's, added as a site directory
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = Path(subprocess.run([python, "-c", "import sysconfig; "
                                   "print(sysconfig.get_paths()['purelib'])"], check=True,
                                  capture_output=True, text=True).stdout.strip())
    deps = tmp_path / "deps"
    deps.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not _is_this_workbench(entry.name):
            (deps / entry.name).symlink_to(entry)
    (purelib / "_deps.pth").write_text(f"import site; site.addsitedir({str(deps)!r})\n")

    env = {k: v for k, v in os.environ.items()
           if k not in (ROOT_ENV, "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", PIP_NO_INDEX="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1")

    def run(*cmd: str | Path, cwd: Path) -> str:
        done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, f"{cmd}: {done.stdout}\n{done.stderr}"
        return done.stdout + done.stderr

    probe = "import workbench; print(workbench.__file__)"
    assert "ModuleNotFoundError" in subprocess.run([python, "-c", probe], cwd=tmp_path, env=env,
                                                   capture_output=True, text=True).stderr
    run(python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", src,
        cwd=tmp_path)
    package = purelib / "workbench"
    assert (package / "conf" / "config.yaml").is_file()
    assert (package / "conf" / "profile" / "ci.yaml").is_file()
    assert (package / "py.typed").is_file()
    installed = _files(purelib)

    work = tmp_path / "work"  # an empty working directory, neither the checkout nor the venv
    work.mkdir()
    out = run(python, "-c", probe + "; from workbench.utils import paths; print(paths.REPO_ROOT)",
              cwd=work).split()
    assert Path(out[0]).resolve() == (package / "__init__.py").resolve(), "the installed copy"
    assert Path(out[1]) == work.resolve()

    watched = [CHECKOUT / "data" / "raw" / "synthetic",
               CHECKOUT / "data" / "processed" / "synthetic",
               CHECKOUT / "results" / "dataset_stats" / "synthetic"]
    before = [_files(p) for p in watched]
    assert run("workbench", "--version", cwd=work).strip() == f"workbench {workbench.__version__}"
    overrides = ("profile=ci", "dataset=synthetic")
    run("workbench", "stage", "prepare", *overrides, cwd=work)
    run("workbench", "stage", "dataset-stats", *overrides, cwd=work)

    assert _files(work / "data" / "processed" / "synthetic")
    assert _files(work / "results" / "dataset_stats" / "synthetic")
    assert {p.name for p in work.iterdir()} <= {"data", "results", "reports", "scratch"}
    assert _files(purelib) == installed, "nothing written into site-packages"
    assert [_files(p) for p in watched] == before, "nothing written into the checkout"
