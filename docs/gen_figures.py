"""Put the report into the site: its pages under ``report/`` and its figures under ``figures/``.

Run by the ``gen-files`` plugin on every ``mkdocs build`` (see ``mkdocs.yml``):

* ``figures/<section>/<file>``: the report's figures that show a claim. The paper pages show
  them through their generated ``claims:figures <paper>`` part
  (``workbench/report/fragments.py``), which names the same files: a figure a section no longer
  draws leaves the site with it.
* ``report/index.md`` (``reports/README.md``: the verdicts, every claim, provenance) and
  ``report/<section>/index.md`` (``reports/<section>/README.md``) with every figure and table
  file the page links, so the paper pages link each claim's report section and its figures
  show on the site. A link that leaves the report (a notebook's source, ``params.yaml``, the
  register) becomes its path as code text: the site holds the report, not the repository.
"""

import json
import re
from pathlib import Path

import mkdocs_gen_files

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "reports"
#: ``[text](target)`` and ``![alt](target)``, a target without spaces or parentheses.
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")

for section in sorted(REPORTS.glob("*/section.json")):
    for item in json.loads(section.read_text())["items"]:
        if item["kind"] == "figure" and item.get("claims"):
            source = section.parent / item["file"]
            with mkdocs_gen_files.open(f"figures/{section.parent.name}/{item['file']}",
                                       "wb") as out:
                out.write(source.read_bytes())


def _page(text: str, folder: Path) -> tuple[str, set[Path]]:
    """``text`` (a report page in ``folder``) with its links made the site's, and the report's
    files it links. The site mirrors ``reports/`` under ``report/`` (a ``README.md`` is its
    folder's ``index.md``), so a link inside the report keeps its relative path."""
    files: set[Path] = set()
    reports = REPORTS.resolve()

    def link(match: re.Match[str]) -> str:
        bang, label, target = match.groups()
        path, hash_, anchor = target.partition("#")
        if not path or re.match(r"^[a-z]+:", path):  # an anchor of the page, or a URL
            return match.group(0)
        here = (folder / path).resolve()
        if here.is_relative_to(reports) and here.is_file():
            if here.name == "README.md":
                return f"{bang}[{label}]({path[:-len('README.md')]}index.md{hash_}{anchor})"
            files.add(here)
            return match.group(0)
        shown = here.relative_to(ROOT.resolve()) if here.is_relative_to(ROOT.resolve()) else path
        return f"`{shown}`" if label.strip("`") == str(shown) else f"{label} (`{shown}`)"

    return LINK.sub(link, text), files


SECTION_PAGES = sorted(REPORTS.glob("*/README.md"))
#: A page of figures hides the table of contents: its column is then wide enough (about 930 px
#: on a laptop's screen, not 688) for a figure's text to read at the size the report shows it
#: (``workbench.report.plotting``; ``tests/test_docs.py`` measures it in chromium).
WIDE = "---\nhide:\n  - toc\n---\n\n"
for page in [REPORTS / "README.md", *SECTION_PAGES]:
    if not page.is_file():
        continue
    text, files = _page(page.read_text(), page.parent)
    where = Path("report") / page.parent.relative_to(REPORTS)
    with mkdocs_gen_files.open((where / "index.md").as_posix(), "w") as out:
        out.write(WIDE + text if page in SECTION_PAGES else text)
    for file in sorted(files):
        with mkdocs_gen_files.open((Path("report") / file.relative_to(REPORTS.resolve()))
                                   .as_posix(), "wb") as out:
            out.write(file.read_bytes())

# the report's navigation (mkdocs.yml's "The report: report/", read by literate-nav)
with mkdocs_gen_files.open("report/SUMMARY.md", "w") as nav:
    nav.write("* [Verdicts and claims](index.md)\n")
    for page in SECTION_PAGES:
        title = next((line[2:].strip() for line in page.read_text().splitlines()
                      if line.startswith("# ")), page.parent.name)
        nav.write(f"* [{title}]({page.parent.name}/index.md)\n")
    if (REPORTS / "costs.md").is_file():
        nav.write("* [What each claim costs](costs.md)\n")
