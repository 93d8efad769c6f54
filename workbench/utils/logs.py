"""Readable logs: one format for every entry point, with the process role in it.

fbgemm_gpu logs every table-batched embedding's whole configuration (about 20 lines per TBE
built) at INFO on the root logger; those records are dropped, its warnings and errors kept.
"""

from __future__ import annotations

import logging
import os

_FBGEMM = f"{os.sep}fbgemm_gpu{os.sep}"


def _not_fbgemm_info(record: logging.LogRecord) -> bool:
    """False for fbgemm_gpu's records at INFO or below."""
    return record.levelno > logging.INFO or _FBGEMM not in record.pathname


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
    for handler in logging.getLogger().handlers:
        handler.addFilter(_not_fbgemm_info)
    if os.environ.get("CI"):
        os.environ.setdefault("TQDM_DISABLE", "1")
