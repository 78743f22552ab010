"""A speech server that fails on purpose, on loopback in a thread: the mode is the first part
of the path (`http://127.0.0.1:PORT/MODE/v1`), so one server serves every kind of failure.

Modes: `slow` (answers after `SLOW_S`), `junk` (200 with an HTML page), `nojson` (200 JSON
without a text), `error` (HTTP 500), `wavonly` (speech: 400 for `pcm`, a WAV otherwise),
`record` (keeps the request whole in `captured`: (content type, body); answers a text).
Every request is recorded (`requests`: (mode, path, response_format)).
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from assistant.speech.audio import wav_bytes

SLOW_S = 3.0
RATE = 16000


def tone_wav(seconds: float = 0.5) -> bytes:
    t = np.arange(int(RATE * seconds)) / RATE
    return wav_bytes((np.sin(2 * np.pi * 220 * t) * 8000).astype("<i2"), RATE)


class FaultServer(ThreadingHTTPServer):
    daemon_threads = True
    requests: list[tuple[str, str, str]]
    captured: list[tuple[str, bytes]]


class Handler(BaseHTTPRequestHandler):
    server: FaultServer

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        mode, _, rest = self.path.strip("/").partition("/")
        fmt = ""
        if rest.endswith("audio/speech"):
            fmt = json.loads(body).get("response_format", "")
        else:
            found = re.search(rb'name="response_format"\r\n\r\n(\w+)', body)
            fmt = found.group(1).decode() if found else ""
        self.server.requests.append((mode, rest, fmt))
        if mode == "record":
            self.server.captured.append((self.headers.get("content-type", ""), body))
            return self._send(200, b'{"text": "recorded"}', "application/json")
        if mode == "slow":
            time.sleep(SLOW_S)
            return self._send(200, b'{"text": "late"}', "application/json")
        if mode == "junk":
            return self._send(200, b"<html><body>Welcome to nginx!</body></html>", "text/html")
        if mode == "nojson":
            return self._send(200, b'{"result": "ok"}', "application/json")
        if mode == "error":
            return self._send(500, b'{"error": {"message": "model crashed"}}', "application/json")
        if mode == "wavonly" and rest.endswith("audio/speech"):
            if fmt == "pcm":
                error = b'{"error": {"message": "unsupported response_format pcm"}}'
                return self._send(400, error, "application/json")
            return self._send(200, tone_wav(), "audio/wav")
        return self._send(404, b"{}", "application/json")

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(OSError):  # the client gave up (the slow mode's deadline)
            self.wfile.write(body)


@contextlib.contextmanager
def fault_server() -> Iterator[tuple[str, FaultServer]]:
    """(base `http://127.0.0.1:PORT`, server) until the block ends."""
    server = FaultServer(("127.0.0.1", 0), Handler)
    server.requests, server.captured = [], []
    with serving(server) as base:
        yield base, server


class Relay(ThreadingHTTPServer):
    daemon_threads = True
    upstream: str
    paths: list[str]


class RelayHandler(BaseHTTPRequestHandler):
    """Passes each POST on to the upstream server and its answer back, counting the paths."""

    server: Relay

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        import httpx

        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        self.server.paths.append(self.path)
        headers = {"content-type": self.headers.get("content-type", "")}
        r = httpx.post(self.server.upstream + self.path, content=body, headers=headers,
                       timeout=120)  # fmt: skip
        self.send_response(r.status_code)
        for name in ("content-type", "x-sample-rate"):
            if name in r.headers:
                self.send_header(name, r.headers[name])
        self.send_header("content-length", str(len(r.content)))
        self.end_headers()
        with contextlib.suppress(OSError):
            self.wfile.write(r.content)


@contextlib.contextmanager
def relay(upstream: str) -> Iterator[tuple[str, Relay]]:
    """A counting relay to `upstream` (`http://host:port`): (its base URL, the relay)."""
    server = Relay(("127.0.0.1", 0), RelayHandler)
    server.upstream, server.paths = upstream.rstrip("/"), []
    with serving(server) as base:
        yield base, server


@contextlib.contextmanager
def serving(server: ThreadingHTTPServer) -> Iterator[str]:
    """`server` answering on a thread of its own until the block ends: its base URL."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
