"""The package layout stays layered: no module imports a package of a higher layer.

Every ``import`` / ``from ... import`` in ``workbench/`` (at module level or inside a function,
relative imports resolved) is read with :mod:`ast`; the layer of both ends comes from
:data:`workbench.LAYERS`.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

import workbench
from workbench import LAYERS

PACKAGE = Path(workbench.__file__).parent


def _unit(module: str) -> str | None:
    """The top-level unit (``data``, ``config``, ...) of a dotted ``workbench...`` name."""
    parts = module.split(".")
    if parts[0] != "workbench" or len(parts) < 2:
        return None
    return parts[1]


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """``(line, imported module)`` of every import in the file, relative ones resolved."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module == "workbench":  # from workbench import data, ... -> each name
                found += [(node.lineno, f"workbench.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, module))
    return found


def _violations() -> list[str]:
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        unit = _unit(_module_name(path))
        if unit is None:  # workbench/__init__.py
            continue
        for line, module in _imports(path):
            target = _unit(module)
            if target is None or target == unit:
                continue
            if LAYERS[target] >= LAYERS[unit]:
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {unit} (layer "
                           f"{LAYERS[unit]}) imports {module} (layer {LAYERS[target]})")
    return bad


def test_every_top_level_unit_has_a_layer() -> None:
    units = {p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    units |= {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert units == set(LAYERS), "workbench.LAYERS must list every top-level package and module"


def test_no_module_imports_a_higher_or_sibling_layer() -> None:
    assert _violations() == []


def _fake_package(root: Path, files: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``workbench`` tree under ``root`` with ``files`` (path -> source); the checker reads it."""
    fake = root / "workbench"
    for rel, text in {"__init__.py": "", **files}.items():
        (fake / rel).parent.mkdir(parents=True, exist_ok=True)
        (fake / rel).write_text(text)
        init = (fake / rel).parent / "__init__.py"
        if not init.exists():
            init.write_text("")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)


def test_the_checker_catches_an_upward_import(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A data module importing the trainer (lazily, in a function) is reported with its line."""
    _fake_package(tmp_path, {
        "data/bad.py": "import numpy\n\n\ndef f():\n    from ..training import trainer\n"
                       "    return trainer\n",
        "data/ok.py": "from workbench.utils import io\nfrom . import bad\n"}, monkeypatch)
    assert _violations() == ["workbench/data/bad.py:5: data (layer 1) imports "
                             "workbench.training (layer 5)"]


def test_sibling_layers_may_not_import_each_other(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_package(tmp_path, {"sparse/x.py": "from workbench.dispatch.base import assign\n"},
                  monkeypatch)
    assert _violations() == ["workbench/sparse/x.py:1: sparse (layer 3) imports "
                             "workbench.dispatch.base (layer 3)"]


#: The experiments package's shared floor: schemas, the run context, fitting to the data. Every
#: other module of the package is one stage, and a stage never imports another (what several
#: stages use lives in the layer that owns it: training.clock, cluster.construction, ...).
EXPERIMENTS_FLOOR = {"config", "context", "sizing"}


def test_no_experiment_stage_imports_another() -> None:
    experiments = PACKAGE / "experiments"
    stages = {p.stem for p in experiments.glob("*.py")} - EXPERIMENTS_FLOOR - {"__init__"}
    bad = [f"experiments/{path.name}:{line}: imports {module}"
           for path in sorted(experiments.glob("*.py")) if path.stem in stages
           for line, module in _imports(path)
           if module.startswith("workbench.experiments.")
           and module.split(".")[2] in stages - {path.stem}]
    assert not bad, "\n".join(bad)


def test_benchmarks_use_public_names_only() -> None:
    """A benchmark times the package's public functions, never a module's private ones."""
    bad = []
    for path in sorted((PACKAGE.parent / "benchmarks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("workbench"):
                bad += [f"{path.name}:{node.lineno}: {node.module}.{a.name}"
                        for a in node.names if a.name.startswith("_")]
    assert not bad, bad


def _doc_layers() -> dict[str, int]:
    """Every unit the package docstring's layer table names, with its layer number."""
    doc = workbench.__doc__ or ""
    table = doc[doc.index(":\n\n") + 3:doc.index("\n\nEach package")]
    found: dict[str, int] = {}
    layer = None
    for line in table.splitlines():
        head = line[:27]
        if head[:5].strip().isdigit():
            layer = int(head[:5])
        for unit in re.findall(r"[a-z_]+", head[5:]):
            if unit != "conf":
                found[unit] = layer
    return found


def test_the_layer_tables_are_workbench_layers() -> None:
    """One layer table: the package docstring's is LAYERS, docs/design.md shows the same block,
    and its module table puts every package at its layer."""
    assert _doc_layers() == LAYERS
    doc = workbench.__doc__ or ""
    block = doc[doc.index(":\n\n") + 3:doc.index("\n\nEach package")].replace("``", "`")
    design = (PACKAGE.parent / "docs" / "design.md").read_text()
    assert f"```\n{block}\n```" in design
    rows = re.findall(r"^\| (\d+) \| ([^|]+) \|", design, re.M)
    seen = {}
    for layer, cell in rows:
        for unit in re.findall(r"`([a-z_]+)(?:/|\.py)`", cell):
            seen[unit] = int(layer)
    assert seen == LAYERS


def test_no_test_file_imports_another() -> None:
    """A test file imports support modules (``conftest``, ``hotline_toy``, ...) and the package,
    never another test file: each runs alone and in any order."""
    tests = Path(__file__).parent
    names = {p.stem for p in tests.glob("test_*.py")}
    bad = []
    for path in sorted(tests.glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                found = [node.module or ""]
            else:
                continue
            bad += [f"{path.name}:{node.lineno} imports {m}" for m in found
                    if m.split(".")[0] in names or m.startswith("tests.test_")]
    assert not bad, bad


#: What judges or measures a claim: the register's judgements, the rules, the record's
#: re-judging and the measures. Only ``workbench.claims`` calls them.
_JUDGING = {"judge", "judge_points", "row_verdict", "estimate", "reading", "holds", "holds_one",
            "rejudge", "measure", "measure_all", "factor", "percent", "less", "modelled",
            "not_comparable", "not_built"}
_CLAIM_MODULES = {"register", "verdict", "record", "check", "counting", "measurement"}


def _calls(path: Path) -> list[tuple[int, str]]:
    """``(line, name)`` of every call of a bare or dotted name in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            func = node.func
            name = (func.attr if isinstance(func, ast.Attribute)
                    else func.id if isinstance(func, ast.Name) else "")
            found.append((node.lineno, name))
    return found


def test_the_claim_lives_in_claims_and_report_only_renders() -> None:
    """Issue 70: ``workbench.claims`` is the claim's one home: the register, the rules, the
    record, the check, the counting and the measures are its modules, and no module of
    ``workbench.report`` judges or measures a claim (it renders what the record holds)."""
    claims = {p.stem for p in (PACKAGE / "claims").glob("*.py")}
    report = {p.stem for p in (PACKAGE / "report").glob("*.py")}
    assert _CLAIM_MODULES <= claims
    assert not _CLAIM_MODULES & report
    judged = [f"{path.relative_to(PACKAGE.parent)}:{line}: {name}()"
              for path in sorted((PACKAGE / "report").glob("*.py"))
              for line, name in _calls(path) if name in _JUDGING]
    assert not judged, "report judges or measures claims: " + "; ".join(judged)
