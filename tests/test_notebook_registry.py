"""The notebook registry (workbench/report/notebook_registry.py) is the one list of notebooks:
the files, the pipeline's default, dvc.yaml's per-notebook dependencies, the explorers' knobs
and their table all follow it."""

from __future__ import annotations

import yaml

from workbench import explorers
from workbench.config import load
from workbench.report import notebook_registry as nbr
from workbench.report.notebook import NOTEBOOK_STAGES
from workbench.stages import STAGES
from workbench.utils.paths import NOTEBOOK_DIR, REPO_ROOT


def test_the_registry_lists_every_notebook_file_in_report_order() -> None:
    assert sorted(nbr.names()) == sorted(p.stem for p in NOTEBOOK_DIR.glob("*.py"))
    assert list(load().pipeline.notebooks) == nbr.names()  # the default, in report order
    for name in nbr.names():
        source = (NOTEBOOK_DIR / f"{name}.py").read_text()
        assert f'notebook_config("{name}", params_file, dataset' in source
        assert f'explorers.show("{name}",' in source or f"explorers.{name}(cfg" in source


def test_every_read_names_a_stage_and_a_config_key() -> None:
    cfg = load()
    for nb in nbr.NOTEBOOKS.values():
        for read in nb.reads:
            assert read.stage in STAGES, (nb.name, read.stage)
        for key in [r.key for r in nb.reads] + list(nb.also) + list(nb.params):
            value = cfg
            for part in key.split("."):
                value = getattr(value, part) if not isinstance(value, dict) else value[part]
        for folder in nb.results():
            assert (REPO_ROOT / folder).is_dir(), (nb.name, folder)
    assert NOTEBOOK_STAGES == {n: tuple((r.stage, r.key) for r in nb.reads)
                               for n, nb in nbr.NOTEBOOKS.items()}


def test_dvc_yaml_gives_each_notebook_its_own_inputs() -> None:
    stage = yaml.safe_load((REPO_ROOT / "dvc.yaml").read_text())["stages"]["notebook"]
    assert stage["foreach"] == nbr.dvc_items()
    deps = stage["do"]["deps"]
    assert [f"${{item.r{i}}}" for i in range(1, nbr.RESULT_SLOTS + 1)] == [
        d for d in deps if d.startswith("${item.r")]
    assert len([p for p in stage["do"]["params"] if p.startswith("${item.p")]) == nbr.PARAM_SLOTS
    assert "results" not in deps and "experiments" not in stage["do"]["params"]
    # het's claims are measured in workbench/claims/het.py: its notebooks depend on it alone
    assert nbr.dvc_items()["het_train"]["c1"] == "workbench/claims/het.py"
    assert nbr.dvc_items()["combined"]["c1"] == "workbench/claims/measurement.py"


def test_explorers_follow_the_registry() -> None:
    assert list(explorers.KNOBS) == list(explorers.BUILDERS) == nbr.names()
    assert nbr.explorer_table() in (REPO_ROOT / "docs" / "notebooks.md").read_text()
