"""Small archives and Criteo rows, remote file records, and a local HTTP server fixture."""

from __future__ import annotations

import contextlib
import hashlib
import io
import random
import re
import tarfile
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler

from workbench.data.source import RemoteFile


def criteo_tsv(rows: int, seed: int = 0) -> bytes:
    """Criteo Kaggle train.txt lines: label, I1..I13 (ints, may be empty), C1..C26 (8-hex
    hashes)."""
    rng = random.Random(seed)
    lines = []
    for _ in range(rows):
        label = str(int(rng.random() < 0.25))
        dense = ["" if rng.random() < 0.1 else str(rng.randint(-1, 500)) for _ in range(13)]
        cats = ["" if rng.random() < 0.05 else f"{rng.getrandbits(32):08x}" for _ in range(26)]
        lines.append("\t".join([label, *dense, *cats]))
    return ("\n".join(lines) + "\n").encode()


def tar_gz(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def zip_bytes(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def remote(name: str, body: bytes, *urls: str, size: bool = True, md5: bool = True,
           sha256: bool = False) -> RemoteFile:
    return RemoteFile(
        name=name,
        urls=tuple(urls),
        md5=hashlib.md5(body).hexdigest() if md5 else None,
        sha256=hashlib.sha256(body).hexdigest() if sha256 else None,
        size=len(body) if size else None,
    )


class FileServer:
    """State of the fixture server: routes and a log of every request it received."""

    def __init__(self) -> None:
        self.routes: dict[str, dict] = {}
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.base = ""

    def add(self, path: str, body: bytes, mode: str = "good", cut: int = 0,
            headers: dict[str, str] | None = None) -> str:
        """Serve ``body`` at ``path``.

        mode: ``good``; ``truncate`` (announce the full length, send ``cut`` bytes, close);
        ``stall`` (send ``cut`` bytes, then nothing for 2 s); ``ignore_range`` (always 200, full
        body); ``unsized_cut`` (no Content-Length, send ``cut`` bytes, close); ``trickle`` (one byte
        every 0.1 s). ``headers`` replace or add response headers (e.g. Content-Type).
        """
        self.routes[path] = {"body": body, "mode": mode, "cut": cut, "headers": headers or {}}
        return self.base + path

    def set_mode(self, path: str, mode: str, cut: int = 0) -> None:
        self.routes[path].update(mode=mode, cut=cut)

    def for_path(self, path: str) -> list[dict]:
        with self.lock:
            return [r for r in self.requests if r["path"] == path]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # one request per connection; closing ends the body

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass

    def do_GET(self) -> None:  # noqa: N802
        state: FileServer = self.server.state  # type: ignore[attr-defined]
        rec = {"path": self.path, "range": self.headers.get("Range"), "status": None, "sent": 0}
        with state.lock:
            state.requests.append(rec)
        route = state.routes.get(self.path)
        if route is None:
            rec["status"] = 404
            self.send_error(404, "Not Found")
            return
        body, mode = route["body"], route["mode"]
        start = 0
        rng = rec["range"]
        if rng and mode != "ignore_range":
            m = re.fullmatch(r"bytes=(\d+)-", rng)
            assert m, rng
            start = int(m.group(1))
            if start >= len(body):
                rec["status"] = 416
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(body)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            rec["status"] = 206
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            rec["status"] = 200
            self.send_response(200)
        headers = {"Content-Type": "application/octet-stream",
                   "Content-Length": str(len(body) - start), **route.get("headers", {})}
        if mode == "unsized_cut":
            del headers["Content-Length"]
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        payload = body[start:]
        if mode in ("truncate", "stall", "unsized_cut"):
            payload = payload[: route["cut"]]
        rec["sent"] = len(payload)  # recorded before writing: the client may finish first
        if mode == "trickle":
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up
                for i in range(len(payload)):
                    self.wfile.write(payload[i:i + 1])
                    self.wfile.flush()
                    time.sleep(0.1)
            return
        self.wfile.write(payload)
        self.wfile.flush()
        if mode == "stall":  # keep the connection open, send nothing more
            time.sleep(2)
