"""Readable logs: one format for every entry point, with the process role in it."""

from __future__ import annotations

import logging
import os


def setup(level: str = "INFO", role: str = "main") -> None:
    """Configure root logging once: ``12:00:01 INFO  [download] workbench.data: message``.

    Args:
        level: log level name.
        role: what this process is (stage name, ``ps``, ``worker3``); shown in every line.
    """
    logging.basicConfig(
        level=getattr(logging, level),
        format=f"%(asctime)s %(levelname)-5s [{role}] %(name)s: %(message)s",
        datefmt="%H:%M:%S", force=True)
    if os.environ.get("CI"):
        os.environ.setdefault("TQDM_DISABLE", "1")
