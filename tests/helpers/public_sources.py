"""The samples' public sources stood in for on 127.0.0.1 (for the download and clone tests).

``WORKBENCH_SOURCE_BASE=<base>`` makes the downloader fetch ``https://host/path`` from
``<base>/host/path``; :func:`sources_tree` lays every registered URL of the samples out that way
from this repository's CI copy of them, and :func:`serve` serves a folder on 127.0.0.1.
"""

from __future__ import annotations

import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

from conftest import shared_data_dir
from workbench.data.registry import SAMPLES
from workbench.data.source import DatasetSource, DropPartialLastLine

#: The last, truncated line of the upstream UserBehavior.csv that the Taobao sample drops
#: (the upstream's sha256 in the registry checks that the rebuilt upstream is the real one).
TAOBAO_TAIL = b"100370,1968385,1875258,pv"


def mirror_file(source: DatasetSource, name: str) -> Path:
    """File ``name`` of ``source`` in the CI copy of the samples."""
    return shared_data_dir() / source.mirror_dir / name


def served_path(root: Path, url: str) -> Path:
    """Where :func:`sources_tree` under ``root`` keeps the bytes of ``url``."""
    parsed = urlparse(url)
    return root / parsed.netloc / parsed.path.lstrip("/")


def sources_tree(root: Path) -> Path:
    """Every registered URL of every sample laid out by host under ``root`` (what
    ``WORKBENCH_SOURCE_BASE`` maps the URLs onto), built from the CI copy of the samples."""
    for source in SAMPLES:
        for f in source.files:
            body = mirror_file(source, f.name).read_bytes()
            served = {url: body for url in f.urls}
            for up in f.upstreams:
                if isinstance(up.derive, DropPartialLastLine):
                    served.update({url: body + TAOBAO_TAIL for url in up.urls})
            for url, data in served.items():
                path = served_path(root, url)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
    return root


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def serve(directory: Path) -> tuple[str, ThreadingHTTPServer]:
    """A static file server on 127.0.0.1 for ``directory``: its base URL and the server (call
    ``shutdown()`` and ``server_close()`` when done)."""
    handler = lambda *a, **k: _Quiet(*a, directory=str(directory), **k)  # noqa: E731
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    return f"http://127.0.0.1:{httpd.server_address[1]}", httpd
