"""A report page in a real browser: from a claim to its figure in one click.

``reports/het_train/README.md`` is rendered to HTML as a Markdown viewer does (Python-Markdown
with tables; the page's own ``<a id=...>`` anchors pass through), laid out at the width the
figures are measured for ([`SHOWN_WIDTH_PX`][workbench.report.plotting.SHOWN_WIDTH_PX]), and
opened in Debian's chromium over 127.0.0.1. The first claim card's figure link is clicked: the
page must scroll to that figure, with its image loaded and on screen. ``WORKBENCH_BROWSER_OUT``
keeps the screenshot.
"""

from __future__ import annotations

import functools
import http.server
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.browser import CHROMIUM, playwright
from workbench.report.plotting import SHOWN_WIDTH_PX
from workbench.utils.paths import REPO_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.browser]

PAGE = REPO_ROOT / "reports" / "het_train" / "README.md"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """The page rendered to ``tmp_path/page.html`` beside links to its figures, served."""
    import markdown

    body = markdown.markdown(PAGE.read_text(), extensions=["tables"])
    (tmp_path / "page.html").write_text(
        "<!doctype html><html><head><meta charset='utf-8'><style>"
        f"body{{max-width:{SHOWN_WIDTH_PX}px;margin:0 auto;font-family:sans-serif}}"
        "img{max-width:100%}</style></head><body>" + body + "</body></html>")
    for png in PAGE.parent.glob("*.png"):
        (tmp_path / png.name).symlink_to(png)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/page.html"
    finally:
        server.shutdown()
        server.server_close()


def test_a_claims_figure_link_lands_on_the_figure(served: str) -> None:
    sync_playwright = playwright()
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = chromium.new_page(viewport={"width": SHOWN_WIDTH_PX + 80, "height": 900})
            page.goto(served)
            link = page.locator("li:has-text('Shown in') a[href^='#fig-']").first
            target = link.get_attribute("href")[1:]
            assert page.evaluate("window.scrollY") == 0
            link.click()
            page.wait_for_function(f"location.hash === '#{target}'")
            # the anchor at the top of the window, its figure's image loaded and on screen
            at = page.evaluate(f"document.getElementById('{target}').getBoundingClientRect().top")
            assert abs(at) < 5, at
            image = page.locator(f"img[src='{target[len('fig-'):]}.png']")
            box = image.bounding_box()
            assert box is not None and 0 <= box["y"] < 900, box
            assert image.evaluate("img => img.complete && img.naturalWidth > 0")
            assert box["width"] <= SHOWN_WIDTH_PX  # shown at the width it is laid out for
            out = os.environ.get("WORKBENCH_BROWSER_OUT")
            if out:
                Path(out).mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(Path(out) / "report_claim_to_figure.png"))
        finally:
            chromium.close()
