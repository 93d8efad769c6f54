"""Copy the report's figures that show a claim into the site (``figures/<section>/<file>``).

Run by the ``gen-files`` plugin on every ``mkdocs build`` (see ``mkdocs.yml``). The paper pages
show them through their generated ``claims:figures <paper>`` part
(``workbench/report/fragments.py``), which names the same files: a figure a section no longer
draws leaves the site with it.
"""

import json
from pathlib import Path

import mkdocs_gen_files

ROOT = Path(__file__).resolve().parents[1]

for section in sorted((ROOT / "reports").glob("*/section.json")):
    for item in json.loads(section.read_text())["items"]:
        if item["kind"] == "figure" and item.get("claims"):
            source = section.parent / item["file"]
            with mkdocs_gen_files.open(f"figures/{section.parent.name}/{item['file']}",
                                       "wb") as out:
                out.write(source.read_bytes())
