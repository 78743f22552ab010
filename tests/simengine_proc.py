"""Start the simulated engine as a real separate process, for tests that need HTTP misbehaviour.

    with run_simengine("--slots", "1", "--token-ms", "2") as base_url:
        client = AsyncOpenAI(base_url=base_url, api_key="x")   # base_url ends with /v1

The process is stopped by its PID (SIGTERM, then SIGKILL) when the block ends.
"""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx

READY_TIMEOUT_S = 30.0


@contextlib.contextmanager
def run_simengine(*args: str, timeout: float = READY_TIMEOUT_S) -> Iterator[str]:
    """Run `python -m assistant.simengine --port 0 ARGS...`; yield `http://127.0.0.1:PORT/v1`."""
    cmd = [sys.executable, "-m", "assistant.simengine", "--port", "0", *args]
    # stderr goes to a file, not a pipe nobody reads (a full pipe would block the engine).
    with tempfile.TemporaryFile() as errfile:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=errfile, text=True, env=_env_with_repo()
        )
        lines: queue.Queue[str | None] = queue.Queue()
        # Drain stdout on a thread so a readline cannot block past the READY timeout.
        threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True).start()
        try:
            port = _wait_ready(lines, timeout)
            if port is None:
                errfile.seek(0)
                tail = errfile.read().decode(errors="replace")[-2000:]
                raise RuntimeError(f"simengine did not become ready in {timeout}s: {tail}")
            yield f"http://127.0.0.1:{port}/v1"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


def root_url(base_url: str) -> str:
    """`http://host:port/v1` -> `http://host:port` (for /metrics, /health and /sim/*)."""
    return base_url.removesuffix("/v1")


def sim_requests(base_url: str) -> list[dict[str, Any]]:
    """Every request body the engine received: `[{"received_at", "body", "headers"}, ...]`."""
    return httpx.get(root_url(base_url) + "/sim/requests", timeout=5).json()


def sim_reset(base_url: str) -> None:
    """Forget recorded requests, fault counters, prefix cache and metric counters."""
    httpx.post(root_url(base_url) + "/sim/reset", timeout=5).raise_for_status()


def _env_with_repo() -> dict[str, str]:
    # The child must import this checkout's `assistant` even when it is not installed.
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (repo, env.get("PYTHONPATH")) if p)
    return env


def _pump(stream: Any, lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def _wait_ready(lines: queue.Queue[str | None], timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            return None
        if line is None:  # the process exited before it was ready
            return None
        if line.startswith("READY port="):
            return int(line.split("=", 1)[1])
    return None
