"""The format registry of workbench.data.formats: every registered format parses a sample of its
layout (the real samples where /work/shared/data has one, tiny files in the real layouts
otherwise), the row formats stream the same rows, and the package has no import circle."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest

import workbench.data.formats as formats_package
from conftest import shared_data_dir
from workbench.data.formats import (
    FORMATS,
    PARSERS,
    ROW_FORMATS,
    SESSION_LOG_FORMATS,
    parse,
    row_format_for,
)
from workbench.data.schema import ParseReport, RawTable

PACKAGE = Path(formats_package.__file__).parent
PREFIX = "workbench.data.formats"
MAX_ROWS = 300


def write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def shared(*parts: str) -> Path:
    path = shared_data_dir().joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path}: not present (set WORKBENCH_SHARED_DATA)")
    return path


# ---------------------------------------------------------------------------------- samples

CRITEO_HEADER = ",".join(["label", *[f"I{i}" for i in range(1, 14)],
                          *[f"C{i}" for i in range(1, 27)]])


def _criteo_csv(tmp: Path) -> Path:
    rows = [",".join([str(k % 2), *[str(i + k) for i in range(13)],
                      *[f"{i + k:08x}" for i in range(26)]]) for k in range(4)]
    return write(tmp / "criteo.csv", [CRITEO_HEADER, *rows])


def _movielens_1m(tmp: Path) -> Path:
    d = tmp / "ml-1m"
    write(d / "ratings.dat", ["1::1193::5::978300760", "1::661::3::978302109",
                              "2::1193::4::978298413"])
    write(d / "users.dat", ["1::F::1::10::48067", "2::M::56::16::70072"])
    write(d / "movies.dat", ["1193::One Flew Over the Cuckoo's Nest (1975)::Drama",
                             "661::James and the Giant Peach (1996)::Animation|Children's"])
    return d


def _movielens_csv(tmp: Path) -> Path:
    d = tmp / "ml-csv"
    write(d / "ratings.csv", ["userId,movieId,rating,timestamp", "1,2,3.5,1112486027",
                              "1,29,4.0,1112484676", "2,2,4.5,1112480000"])
    write(d / "movies.csv", ["movieId,title,genres", "2,Jumanji (1995),Adventure|Children",
                             '29,"City of Lost Children, The (1995)",(no genres listed)'])
    return d


def _session_clicks(tmp: Path) -> list[Path]:
    clicks = write(tmp / "yoochoose-clicks.dat", [
        "1,2014-04-07T10:51:09.277Z,214536502,0", "1,2014-04-07T10:54:09.868Z,214536500,0",
        "2,2014-04-07T13:56:37.614Z,214662742,S"])
    buys = write(tmp / "yoochoose-buys.dat", ["2,2014-04-07T14:01:00.000Z,214662742,1046,2"])
    return [clicks, buys]


#: Format -> what it reads (from a temporary directory): the real sample or a tiny file.
SAMPLES: dict[str, Callable[[Path], Path | list[Path]]] = {
    "criteo_tsv": lambda tmp: shared("criteo_kaggle", "wide_resdnn_train.tsv"),
    "criteo_csv": _criteo_csv,
    "avazu_csv": lambda tmp: shared("avazu", "avazu_train_head1000.csv"),
    "movielens_100k": lambda tmp: shared("movielens_100k"),
    "movielens_1m": _movielens_1m,
    "movielens_20m": _movielens_csv,
    "movielens_csv": _movielens_csv,
    "taobao_user_behavior": lambda tmp: shared("taobao_user_behavior", "UserBehavior_head.csv"),
    "session_clicks": _session_clicks,
    "diginetica_views": lambda tmp: shared("diginetica", "sample_train-item-views.csv"),
}


def test_every_format_has_a_sample_and_the_views_agree() -> None:
    assert set(SAMPLES) == set(FORMATS) == set(PARSERS)
    assert set(ROW_FORMATS) | set(SESSION_LOG_FORMATS) == {
        n for n, f in FORMATS.items() if f.row_format is not None or f.builder is not None}
    for name, fmt in FORMATS.items():
        assert fmt.name == name and fmt.expects
        assert fmt.row_format is None or fmt.builder is None
        assert fmt.row_format is None or fmt.row_format.name == name


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_registered_format_parses_its_sample(name: str, tmp_path: Path) -> None:
    sample = SAMPLES[name](tmp_path)
    table = parse(name, sample, max_rows=MAX_ROWS)
    assert isinstance(table, RawTable)
    assert 0 < table.report.rows <= MAX_ROWS and len(table.frame) == table.report.rows
    assert table.report.malformed == 0
    if name in ROW_FORMATS or name in SESSION_LOG_FORMATS:  # streams the same rows
        report = ParseReport()
        fmt, files = row_format_for(name, sample, report=report)
        assert fmt.name == name
        streamed = sum(len(next(iter(block.values())))
                       for block in fmt.batches(files, report, max_rows=MAX_ROWS))
        assert streamed == table.report.rows


# ------------------------------------------------------------------------------ import graph


def _module_name(path: Path) -> str:
    return PREFIX if path.name == "__init__.py" else f"{PREFIX}.{path.stem}"


def _format_imports(path: Path) -> set[str]:
    """The modules of ``workbench.data.formats`` that ``path`` imports (anywhere in the file)."""
    submodules = {p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith(PREFIX)}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this package
                module = ".".join([PREFIX, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            if module == PREFIX:
                found |= {f"{PREFIX}.{a.name}" if a.name in submodules else PREFIX
                          for a in node.names}
            elif module.startswith(PREFIX + "."):
                found.add(module)
    return found


def _graph() -> dict[str, set[str]]:
    return {_module_name(p): _format_imports(p) - {_module_name(p)}
            for p in sorted(PACKAGE.glob("*.py"))}


def test_the_engine_imports_no_format_module() -> None:
    graph = _graph()
    assert graph[f"{PREFIX}.delimited"] == set()  # the reader imports nothing of the package
    assert graph[f"{PREFIX}.engine"] == {f"{PREFIX}.delimited"}


def test_the_formats_package_has_no_import_circle() -> None:
    graph = _graph()
    for name, imported in graph.items():  # only the package face imports the package
        assert name == PREFIX or PREFIX not in imported, f"{name} imports the package {PREFIX}"
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, "import circle: " + " -> ".join([*path, name])
        if name in done:
            return
        for nxt in graph.get(name, ()):
            visit(nxt, (*path, name))
        done.add(name)

    for name in graph:
        visit(name, ())
