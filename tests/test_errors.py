"""One error family: every exception class the workbench defines derives from WorkbenchError,
and a user error is shown as one line (command line and notebook alike)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import workbench
from workbench.utils.errors import MissingInputError, UserError, WorkbenchError, one_line
from workbench.utils.validation import ConfigError


def _modules():
    for info in pkgutil.walk_packages(workbench.__path__, "workbench."):
        if info.name.endswith("__main__"):
            continue
        yield importlib.import_module(info.name)


def test_every_workbench_exception_is_in_the_family() -> None:
    found = []
    for module in _modules():
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and issubclass(cls, BaseException):
                found.append(cls)
                assert issubclass(cls, WorkbenchError), f"{cls.__module__}.{cls.__qualname__}"
    assert len(found) >= 10  # the walk saw the package


def test_user_errors_render_as_one_line() -> None:
    err = ConfigError("experiments.esd.batches = -1: must be an integer >= 1")
    assert isinstance(err, UserError) and isinstance(err, ValueError)
    assert err._render_traceback_() == [one_line(err)] == [
        "ConfigError: experiments.esd.batches = -1: must be an integer >= 1"]
    missing = MissingInputError("data/processed/x/status.json not found")
    assert isinstance(missing, FileNotFoundError) and isinstance(missing, UserError)


def test_the_command_line_matches_no_error_by_name() -> None:
    import workbench.stages.cli as cli

    source = inspect.getsource(cli)
    assert "__name__ in" not in source and "except UserError" in source


@pytest.mark.parametrize("argv", [["het-cache", "--dataset", "no_such"],
                                  ["esd", "experiments.esd.batches=0"]])
def test_stage_user_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from workbench.stages import main

    with pytest.raises(SystemExit) as exit_:
        main(argv + ["profile=ci"])
    assert exit_.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ConfigError: ")
