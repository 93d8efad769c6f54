"""Generate the API reference: one page per module of ``workbench/``, found by walking the tree.

Run by the ``gen-files`` plugin on every ``mkdocs build`` (see ``mkdocs.yml``). Nothing here names
a module: a package or module added, moved or removed under ``workbench/`` appears in (or leaves)
the reference and its navigation by itself. Each page is one ``::: workbench.<module>`` directive
rendered by mkdocstrings from the module's Google-style docstrings.
"""

from pathlib import Path

import mkdocs_gen_files

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "workbench"

nav = mkdocs_gen_files.Nav()

for path in sorted(PACKAGE.rglob("*.py")):
    module = path.relative_to(ROOT).with_suffix("")
    parts = tuple(module.parts)
    if any(part.startswith("_") and part != "__init__" for part in parts):
        continue  # private modules (and __main__) stay out of the reference
    if not all((ROOT / Path(*parts[:i]) / "__init__.py").is_file() for i in range(1, len(parts))):
        continue  # a folder without __init__.py is not (yet) an importable package
    if parts[-1] == "__init__":
        parts = parts[:-1]
        doc_path = Path(*parts, "index.md")
    elif parts[-1] == "index":  # index.md is its package's page: workbench.report.index
        doc_path = Path(*parts[:-1], "index_module.md")
    else:
        doc_path = Path(*parts).with_suffix(".md")
    nav[parts] = doc_path.as_posix()
    with mkdocs_gen_files.open(Path("reference", doc_path), "w") as page:
        page.write(f"::: {'.'.join(parts)}\n")  # the module's own heading titles the page

with mkdocs_gen_files.open("reference/SUMMARY.md", "w") as summary:
    summary.writelines(nav.build_literate_nav())
