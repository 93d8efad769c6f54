"""The notebooks in JupyterLab, driven through a real browser as a person uses them.

A JupyterLab server starts headless on 127.0.0.1 over a workspace laid out like the repository
(``pyproject.toml`` with its jupytext settings, ``notebooks/<nb>.ipynb`` converted from the
tracked ``notebooks/<nb>.py`` as ``make notebooks`` does); Debian's chromium, driven by
playwright, opens each notebook from the file browser, runs *Run > Run All Cells* and reads the
page: no error output, at least one inline image per figure the notebook wrote plus the
explorer's, and the explorers answering widget changes (a redraw; a visible one-line error for a
bad value). The one edit a user makes is the parameters cell: the ci pipeline's params file (the
small data the rest of the suite computes) and an output folder outside the repository.

Needs chromium (``apt-get install chromium``) and playwright (the ``dev`` extras); skips with
that message otherwise. ``WORKBENCH_BROWSER_OUT=<dir>`` keeps the screenshots (the README's) and
the timings (``timings.json``: Run All and explorer update seconds per notebook) there.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.browser import CHROMIUM, playwright
from workbench.utils.paths import NOTEBOOK_DIR, REPO_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.browser]

#: seconds: generous, the suite runs on a slow, busy machine (nothing here is a speed check)
RUN_ALL_TIMEOUT = float(os.environ.get("WORKBENCH_BROWSER_TIMEOUT", 600))
UPDATE_TIMEOUT = 300


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _lab_notebook(name: str, workspace: Path, params: Path, out_dir: Path) -> Path:
    """``notebooks/<name>.ipynb`` in ``workspace`` as ``make notebooks`` converts it, with the
    parameters cell pointing at ``params`` and ``out_dir`` (the user's one edit)."""
    import jupytext

    nb = jupytext.read(NOTEBOOK_DIR / f"{name}.py")
    nb.metadata.get("jupytext", {}).pop("formats", None)  # as `jupytext --to ipynb` writes it
    (cell,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert 'params_file = "params.yaml"' in cell.source and "out_dir = None" in cell.source
    cell.source = (cell.source
                   .replace('params_file = "params.yaml"', f"params_file = {str(params)!r}")
                   .replace("out_dir = None", f"out_dir = {str(out_dir)!r}"))
    path = workspace / "notebooks" / f"{name}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    jupytext.write(nb, path)
    return path


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, ci_pipeline: Path) -> Iterator[dict]:
    """A JupyterLab server on 127.0.0.1 over a fresh workspace; yields its url and folders."""
    playwright()
    root = tmp_path_factory.mktemp("lab")
    workspace = root / "workspace"
    workspace.mkdir()
    shutil.copy(REPO_ROOT / "pyproject.toml", workspace / "pyproject.toml")
    for name in ("esd", "het", "combined"):
        _lab_notebook(name, workspace, ci_pipeline, root / "out" / name)
    # every cell rendered (the default windowing renders only what is in view), the notebook's
    # own kernel started without asking (the dialog's "Always start the preferred kernel": on a
    # loaded machine a slow kernel start brought the Select Kernel dialog back after every
    # click), and no news prompt over the page: user settings, as Settings > Settings Editor
    # would write them
    settings = root / "settings" / "@jupyterlab"
    (settings / "notebook-extension").mkdir(parents=True)
    (settings / "notebook-extension" / "tracker.jupyterlab-settings").write_text(
        json.dumps({"windowingMode": "none", "autoStartDefaultKernel": True}))
    (settings / "apputils-extension").mkdir(parents=True)
    (settings / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(root / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(root / "workspaces"),
               JUPYTER_RUNTIME_DIR=str(root / "runtime"), JUPYTER_CONFIG_DIR=str(root / "config"),
               TQDM_DISABLE="1")
    log = open(root / "server.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={workspace}",
         "--allow-root", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=5)
                break
            except OSError as err:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("JupyterLab did not start: "
                                       + (root / "server.log").read_text()[-2000:]) from err
                time.sleep(0.5)
        keep = os.environ.get("WORKBENCH_BROWSER_OUT")
        out = Path(keep) if keep else root / "browser"
        out.mkdir(parents=True, exist_ok=True)
        yield {"url": f"{url}/lab?token={token}", "workspace": workspace, "out": out,
               "results": root / "out", "timings": {}}
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@pytest.fixture(scope="module")
def browser(lab: dict) -> Iterator:
    sync_playwright = playwright()
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()
            if lab["timings"]:
                (lab["out"] / "timings.json").write_text(json.dumps(lab["timings"], indent=1))


def _accept_dialog(page, within: float = 90.0) -> list[str]:
    """Answer every dialog JupyterLab opens over the notebook, as a person would before going
    on: accept a kernel selection (a busy machine starts the kernel slowly), but never a kernel
    restart (that would cancel the cells Run All queued). Returns the dialogs' texts.

    A dialog that stays open for ``within`` seconds fails the test with its text (and a
    screenshot in the output folder).
    """
    seen: list[str] = []
    deadline = time.monotonic() + within
    while True:
        dialog = page.locator(".jp-Dialog")
        if not (dialog.count() and dialog.first.is_visible()):
            return seen
        text = " ".join(dialog.first.inner_text().split())[:300]
        if not seen or seen[-1] != text:
            seen.append(text)
        if time.monotonic() > deadline:
            raise AssertionError(f"a JupyterLab dialog stayed open {within:.0f} s: {seen}")
        restart = "restart" in text.lower()
        button = dialog.first.locator(".jp-Dialog-button.jp-mod-reject" if restart
                                      else ".jp-Dialog-button.jp-mod-accept")
        try:
            if button.count() and button.first.is_enabled():
                button.first.click(timeout=5_000)
                dialog.first.wait_for(state="hidden", timeout=10_000)
        except Exception:  # the dialog closed or re-rendered under the click: look again
            pass
        page.wait_for_timeout(500)


_STATE = """() => {
    const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')];
    const failed = document.querySelector('.jp-OutputArea-output[data-mime-type='
        + '"application/vnd.jupyter.stderr"]');
    const busy = prompts.some(p => p.textContent.includes('*'));
    if ((failed && !busy) || (prompts.length > 0
            && prompts.every(p => /\\[\\d+\\]/.test(p.textContent)))) return 'done';
    return busy ? 'busy' : 'stalled';
}"""


def _run_all(page) -> None:
    """Click into the notebook, then Run > Run All Cells."""
    page.locator(".jp-Notebook .jp-Cell .jp-InputPrompt").first.click()
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()


def _open_and_run_all(browser, lab: dict, name: str):
    """Open ``notebooks/<name>.ipynb`` from the file browser, Run All, wait until every code
    cell has run; returns the page and the seconds Run All took."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(lab["url"] + "&reset")  # a fresh workspace: the file browser at the root
    folder = page.locator(".jp-DirListing-item[data-isdir='true']", has_text="notebooks")
    folder.wait_for(timeout=120_000)
    folder.dblclick()
    item = page.locator(".jp-DirListing-item", has_text=f"{name}.ipynb")
    item.wait_for(timeout=60_000)
    item.dblclick()
    page.locator(".jp-Notebook .jp-CodeCell").first.wait_for(timeout=120_000)
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']",
                           timeout=120_000)
    start = time.monotonic()
    for attempt in range(3):
        try:
            _accept_dialog(page)
        except AssertionError:
            page.screenshot(path=str(lab["out"] / f"{name}_dialog.png"), full_page=True)
            raise
        # click into the notebook first, as a person does: the Run menu acts on the focused
        # panel (after a double-click in the file browser the focus can stay there); a Run All
        # given while the kernel is still connecting can do nothing: then a person clicks again
        try:
            _run_all(page)
            page.wait_for_function("""() => [...document.querySelectorAll(
                '.jp-CodeCell .jp-InputPrompt')].some(
                    p => /\\[(\\*|\\d+)\\]/.test(p.textContent))""", timeout=60_000, polling=250)
            break
        except Exception:
            if attempt == 2:
                raise
    # every code cell's prompt holds its execution count ("[*]" while queued or running), or a
    # cell failed (Run All stops there: the rest keep "[ ]"). A queue that vanished (nothing
    # busy, nothing failed, cells not run: the kernel was replaced under load) gets Run All again.
    deadline = time.monotonic() + RUN_ALL_TIMEOUT
    stalled_since, reruns, dialogs = None, 0, []
    while True:
        dialogs += _accept_dialog(page)
        state = page.evaluate(_STATE)
        if state == "done":
            break
        now = time.monotonic()
        if now > deadline:
            page.screenshot(path=str(lab["out"] / f"{name}_timeout.png"), full_page=True)
            raise AssertionError(f"{name}: Run All did not finish in {RUN_ALL_TIMEOUT:.0f} s "
                                 f"({state}; {reruns} repeated Run All; dialogs: {dialogs})")
        if state == "stalled":
            stalled_since = stalled_since or now
            if now - stalled_since > 20 and reruns < 3:
                _run_all(page)
                reruns, stalled_since = reruns + 1, None
        else:
            stalled_since = None
        page.wait_for_timeout(500)
    return page, time.monotonic() - start


def _check_outputs(page, lab: dict, name: str) -> None:
    """No error output; at least one inline image per figure written, plus the explorer's."""
    errors = page.locator(".jp-OutputArea-output[data-mime-type="
                          "'application/vnd.jupyter.stderr']", has_text="Traceback")
    shown_errors = [errors.nth(i).inner_text()[:500] for i in range(errors.count())]
    assert not shown_errors, f"{name}: error output in the notebook: {shown_errors}"
    assert page.locator(".jp-RenderedText", has_text="Error:").count() == 0
    section = json.loads((lab["results"] / name / "section.json").read_text())
    figures = sum(item["kind"] == "figure" for item in section["items"])
    images = page.locator(".jp-OutputArea-output img").count()
    assert figures >= 1 and images >= figures + 1, (
        f"{name}: {images} images shown inline for {figures} figures and the explorer")
    tables = sum(item["kind"] == "table" for item in section["items"])
    assert page.locator(".jp-OutputArea-output table").count() >= tables


def _explorer_image(page) -> str:
    """The ``src`` of the explorer's plot: the last image of the last code cell."""
    return page.locator(".jp-CodeCell").last.locator(".jp-OutputArea-output img").last \
        .get_attribute("src")


def _wait_redrawn(page, before: str) -> float:
    start = time.monotonic()
    page.wait_for_function(
        """(before) => {
            const cells = document.querySelectorAll('.jp-CodeCell');
            const imgs = cells[cells.length - 1].querySelectorAll('.jp-OutputArea-output img');
            return imgs.length && imgs[imgs.length - 1].getAttribute('src') !== before;
        }""", arg=before, timeout=UPDATE_TIMEOUT * 1000, polling=250)
    return time.monotonic() - start


def _pick(page, label: str) -> tuple[str, float]:
    """Choose another option in the explorer's dropdown ``label``, as a person does; returns
    the option and the seconds until the plot is redrawn."""
    before = _explorer_image(page)
    select = page.locator(".widget-dropdown", has_text=label).last.locator("select")
    current = select.input_value()
    options = [o for o in select.locator("option").all_inner_texts() if o.strip() != current]
    select.select_option(label=options[0])
    return options[0].strip(), _wait_redrawn(page, before)


@pytest.mark.parametrize("name, dropdown, knob", [("esd", "samples / worker", "per_worker"),
                                                   ("het", "policy", "policy")])
def test_run_all_then_a_dropdown_redraws_the_explorer(browser, lab: dict, name: str,
                                                      dropdown: str, knob: str) -> None:
    page, run_all = _open_and_run_all(browser, lab, name)
    try:
        _check_outputs(page, lab, name)
        page.locator(".jp-OutputArea-output img").first.scroll_into_view_if_needed()
        page.screenshot(path=str(lab["out"] / f"{name}_run_all.png"))  # a report figure, inline
        option, seconds = _pick(page, dropdown)
        assert f"{knob} = {option}" in page.locator(".widget-html").last.inner_text()
        page.locator(".jp-CodeCell").last.scroll_into_view_if_needed()
        page.screenshot(path=str(lab["out"] / f"{name}_widget_change.png"))
        lab["timings"][name] = {"run_all_s": round(run_all, 1), "update_s": round(seconds, 1)}
    finally:
        page.close()


def test_combined_shows_a_bad_value_as_an_error_and_recovers(browser, lab: dict) -> None:
    page, run_all = _open_and_run_all(browser, lab, "combined")
    try:
        _check_outputs(page, lab, "combined")
        markdown = page.locator(".jp-RenderedMarkdown", has_text="All together").first
        assert markdown.locator("strong").count() >= 1  # rendered, not literal **...**
        label = page.locator("label", has_text="mechanisms")
        box = page.locator(".widget-inline-hbox", has=label).last.locator("input")
        before = _explorer_image(page)
        box.fill("esd,bogus")
        box.press("Enter")
        error = page.locator(".widget-html", has_text="bogus").last
        error.wait_for(state="visible", timeout=UPDATE_TIMEOUT * 1000)
        assert "⚠" in error.inner_text() and "\n" not in error.inner_text().strip()
        assert _explorer_image(page) == before  # the last good plot stays
        box.fill("esd")
        box.press("Enter")
        seconds = _wait_redrawn(page, before)
        assert "mechanisms = esd" in page.locator(".widget-html").last.inner_text()
        lab["timings"]["combined"] = {"run_all_s": round(run_all, 1),
                                      "update_s": round(seconds, 1)}
    finally:
        page.close()
