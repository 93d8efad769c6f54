"""The documentation: README.md fits a screen and its links resolve; the site builds strictly.

README.md is the front page (what, the papers' status, the two commands, the layout); the rest is
the mkdocs site in docs/ (``make docs``). Every relative link of the README must name a file or
folder of the repository, and ``mkdocs build --strict`` (broken links, missing pages, docstring
warnings of the generated API reference) must pass; the built site, served from 127.0.0.1 with
every other host refused, draws the pipeline's DAG in chromium.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: The front page stays one screen of text, not a manual.
MAX_README_BYTES = 25_000
MAX_README_LINES = 200

# [text](target) and ![alt](target); a target ends at whitespace or the closing parenthesis.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def _relative_targets(markdown: str) -> list[str]:
    """The README's link targets that are paths in the repository (no URL, no bare anchor)."""
    markdown = re.sub(r"```.*?```", "", markdown, flags=re.S)  # code blocks hold no links
    targets = []
    for target in LINK.findall(markdown):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
            continue  # http:, https:, mailto:, ... or an anchor of the README itself
        targets.append(target.split("#", 1)[0])
    return targets


def test_readme_links_resolve_to_files_of_the_repository() -> None:
    targets = _relative_targets(README.read_text(encoding="utf-8"))
    assert targets, "README.md links to no page: the docs are unreachable from the front page"
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert not missing, f"README.md links to paths that are not in the repository: {missing}"


def test_readme_fits_a_screen() -> None:
    text = README.read_text(encoding="utf-8")
    size = len(text.encode("utf-8"))
    assert size < MAX_README_BYTES, f"README.md is {size} bytes (limit {MAX_README_BYTES})"
    lines = len(text.splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines (limit {MAX_README_LINES})"
    from helpers.layout import near_cap

    near_cap({"README.md": lines}, MAX_README_LINES, "README (lines)")


def test_readme_links_the_screenshot() -> None:
    assert "docs/images/esd_run_all.png" in _relative_targets(README.read_text(encoding="utf-8"))


@pytest.mark.slow
def test_mkdocs_build_is_strict_clean_and_works_offline(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed: install the dev extra (pip install -e '.[dev]')")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
         "-d", str(tmp_path / "site")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    log = result.stdout + result.stderr
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{log[-4000:]}"
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "reference" / "workbench" / "index.html").is_file(), \
        "the API reference was not generated"
    # the API reference renders its docstrings: no reST role, no literal-block marker, no
    # cross-reference left unresolved as text
    site = tmp_path / "site"
    leftovers = {}
    role = re.compile(r":(?:class|func|mod|meth|data|attr|exc|obj):(?:`|<code>)|"
                      r"\[<code>[^<]*</code>\]\[|\[`[^`]*`\]\[|={5,} +={5,}")  # or a reST table
    for page in (site / "reference").rglob("*.html"):
        found = role.findall(page.read_text())
        if found:
            leftovers[str(page.relative_to(site))] = found[:3]
    assert not leftovers, f"literal roles or unresolved references in the site: {leftovers}"
    # a package's page is its own docstring (not a module's page written over it), its
    # modules' table rendered as a table
    report = (site / "reference" / "workbench" / "report" / "index.html").read_text()
    assert "Layer 9, report" in report and "<li><code>palette</code>" in report
    assert "<table>" in (site / "reference" / "workbench" / "cluster" / "index.html").read_text()
    assert "verdict_maps" in (site / "reference" / "workbench" / "report" / "index_module" /
                       "index.html").read_text()
    # the paper pages show their key figures as images the site holds
    het = (site / "papers" / "het" / "index.html").read_text()
    assert '<img alt="' in het and 'src="../../figures/het_train/' in het
    # the report is on the site: every section's page with its figures, linked from the paper
    # pages at the figure that shows a claim
    for section in (ROOT / "reports").glob("*/README.md"):
        page = site / "report" / section.parent.name / "index.html"
        assert page.is_file(), page
        for png in re.findall(r"!\[[^\]]*\]\(([\w.-]+\.png)\)", section.read_text()):
            assert (page.parent / png).is_file(), (page, png)
    assert 'href="../../report/het_train/#fig-' in het
    _pipeline_dag_draws_offline(site)


def _pipeline_dag_draws_offline(site: Path) -> None:
    """The pipeline page served from 127.0.0.1 in chromium with every other host refused: its
    Mermaid DAG is drawn (Material draws it into a closed shadow root: a ``div.mermaid`` a
    screen tall, the source text gone) and nothing asked for another host. With the vendored
    script refused too, the page shows the raw source instead: what the check tells apart."""
    import functools
    import http.server
    import threading

    from helpers.browser import CHROMIUM, playwright

    sync_playwright = playwright()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    refused: list[str] = []

    def drawn(page, block_vendored: bool) -> dict:  # noqa: ANN001 - playwright's Page
        def local_only(route) -> None:  # noqa: ANN001 - playwright's Route
            url = route.request.url
            if url.startswith(base) and not (block_vendored and "mermaid-" in url):
                route.continue_()
            else:
                refused.append(url)
                route.abort()

        page.route("**/*", local_only)
        page.goto(base + "pipeline/")
        # Material draws the diagram after the page's load (no fixed wait: however long it
        # takes); refused its script, it never draws, and the source stays from the start
        if block_vendored:
            page.wait_for_load_state("load")
        else:
            page.wait_for_selector("div.mermaid", state="attached", timeout=60_000)
        return page.evaluate(
            "() => ({source: document.querySelector('article').innerText.includes("
            "'flowchart LR'), heights: Array.from(document.querySelectorAll('div.mermaid'))"
            ".map(e => e.getBoundingClientRect().height)})")

    try:
        with sync_playwright() as p:
            chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True)
            try:
                shown = drawn(chromium.new_page(), block_vendored=False)
                assert not refused, f"the site asked for other hosts: {refused[:5]}"
                assert not shown["source"] and len(shown["heights"]) == 1 and \
                    shown["heights"][0] > 300, shown
                raw = drawn(chromium.new_page(), block_vendored=True)
                assert raw == {"source": True, "heights": []}, raw  # the source, undrawn
                _figures_read_where_the_site_shows_them(chromium, base)
            finally:
                chromium.close()
    finally:
        server.shutdown()
        server.server_close()


def _figures_read_where_the_site_shows_them(chromium, base: str) -> None:  # noqa: ANN001
    """On a laptop's screen (1280 x 800), every figure of the paper pages and the report's
    section pages is shown wide enough for its smallest text (the section's readability record)
    to read at ``MIN_FONT_PX`` or more: the pages of figures hide their table of contents."""
    from workbench.report.plotting import MIN_FONT_PX, SAVE_DPI

    smallest = {(path.parent.name, item["file"]): item["readability"]["smallest_pt"]
                for path in (ROOT / "reports").glob("*/section.json")
                for item in json.loads(path.read_text())["items"] if item["kind"] == "figure"}
    pages = [f"papers/{p.stem}/" for p in (ROOT / "docs" / "papers").glob("*.md")] + \
        [f"report/{p.parent.name}/" for p in (ROOT / "reports").glob("*/section.json")]
    page = chromium.new_page(viewport={"width": 1280, "height": 800})
    seen, small = 0, []
    for url in pages:
        page.goto(base + url)
        page.wait_for_load_state("load")
        for img in page.evaluate(
                "() => Array.from(document.querySelectorAll('article img')).map(i => ({"
                "src: i.currentSrc, natural: i.naturalWidth,"
                "shown: i.getBoundingClientRect().width}))"):
            parts = img["src"].split("/")
            key = (parts[-2], parts[-1])
            if key not in smallest:
                continue
            seen += 1
            assert img["natural"] > 0, (url, img)  # loaded
            px = smallest[key] * SAVE_DPI / 72 * min(1.0, img["shown"] / img["natural"])
            if px < MIN_FONT_PX:
                small.append(f"{url} {key[1]}: {px:.1f} px at {img['shown']:.0f} px wide")
    assert seen > 30 and not small, (seen, small)
