"""Debian's chromium driven by playwright: where it is, and a skip that says how to get it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("WORKBENCH_CHROMIUM") or shutil.which("chromium")
HOW_TO_GET = ("needs Debian's chromium and playwright: `apt-get install chromium` and "
              "`pip install -e '.[dev]'` (.ci/run installs both)")


def playwright() -> Any:
    """playwright's ``sync_playwright``, or a skip naming what is missing."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip(f"playwright is not installed: {HOW_TO_GET}")
    if not CHROMIUM or not Path(CHROMIUM).exists():
        pytest.skip(f"chromium not found: {HOW_TO_GET}")
    return sync_playwright
