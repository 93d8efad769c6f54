"""The house is easy to walk: every package's docstring names every module in it, no module is
over 900 lines, and no two modules import each other (directly or round a longer circle)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import workbench
from helpers.layout import near_cap

PACKAGE = Path(workbench.__file__).parent
MAX_LINES = 900


def _packages() -> list[Path]:
    return sorted(p.parent for p in PACKAGE.rglob("__init__.py"))


def _members(package: Path) -> list[str]:
    modules = [p.stem for p in package.glob("*.py") if p.name != "__init__.py"]
    subpackages = [p.parent.name for p in package.glob("*/__init__.py")]
    return sorted(modules + subpackages)


def test_every_package_docstring_names_every_module() -> None:
    missing = []
    for package in _packages():
        doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
        for name in _members(package):
            if name == "__main__":
                continue
            if not re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", doc):
                missing.append(f"{package.relative_to(PACKAGE.parent)}: {name}")
    assert not missing, "package docstrings do not name: " + ", ".join(missing)


def test_module_docstrings_open_with_a_short_summary() -> None:
    """The reference reads top down: a summary of at most three lines, then the formal model,
    lists and Markdown tables (a reST table renders as one run-on paragraph)."""
    long, rest_tables = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        summary = doc.split("\n\n")[0].splitlines()
        if len(summary) > 3:
            long.append(f"{path.relative_to(PACKAGE)}: {len(summary)} lines")
        if re.search(r"^ *={5,} +={5,}", doc, re.M):
            rest_tables.append(str(path.relative_to(PACKAGE)))
    assert not long, f"module summaries over three lines: {long}"
    assert not rest_tables, f"reST tables (write a Markdown table or a list): {rest_tables}"


def test_no_module_is_over_900_lines() -> None:
    sizes = {str(p.relative_to(PACKAGE.parent)): len(p.read_text().splitlines())
             for p in PACKAGE.rglob("*.py")}
    long = {k: n for k, n in sizes.items() if n > MAX_LINES}
    assert not long, long
    near_cap(sizes, MAX_LINES, "modules (lines)")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _graph() -> dict[str, set[str]]:
    """Every workbench module -> the workbench modules it imports (anywhere in the file)."""
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in paths else base
                           for a in node.names]
            edges |= {t for t in targets if t in paths and t != name}
        graph[name] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle() -> None:
    # a package's __init__ re-exporting its modules is not a circle of the modules themselves
    graph = {m: {t for t in ts if not m.startswith(t + ".")} for m, ts in _graph().items()}
    assert not _cycles(graph)


def test_the_circle_finder_finds_a_circle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
