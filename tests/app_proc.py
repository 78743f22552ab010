"""The web app as a real process on a loopback port, for the tests that drive it from outside."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.conftest import stop_process

REPO = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 180.0
APP_PY = (str(REPO / "app.py"),)
"""`python app.py`: the thin launcher."""
CLI_SERVE = ("-m", "assistant.cli", "serve")
"""`assistant serve`, as the console script runs it."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def app_env(data_dir: Path, engine_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSISTANT_")}
    env.update(ASSISTANT_DATA_DIR=str(data_dir), ASSISTANT_ENGINE_URL=engine_url, **extra)
    env["PYTHONPATH"] = str(REPO)
    return env


@dataclass
class App:
    url: str
    proc: subprocess.Popen
    data_dir: Path
    log: Path


@contextlib.contextmanager
def run_app(
    data_dir: Path, engine_url: str, *args: str, entry: tuple[str, ...] = APP_PY, **env: str
) -> Iterator[App]:
    """The app (`entry`) on a free port until the page answers; stopped by its PID (SIGTERM)."""
    port = free_port()
    log = data_dir / "app.log"
    data_dir.mkdir(parents=True, exist_ok=True)
    # appended: an app restarted on the same data dir keeps the first run's output readable
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, *entry, "--port", str(port), *args],
            cwd=data_dir,
            env=app_env(data_dir, engine_url, **env),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    app = App(f"http://127.0.0.1:{port}/", proc, data_dir, log)
    try:
        _wait_until_up(app)
        yield app
    finally:
        stop_process(proc)


def _wait_until_up(app: App) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if app.proc.poll() is not None:
            raise RuntimeError(f"the app exited ({app.proc.returncode}): {app.log.read_text()}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(app.url, timeout=2).status_code == 200:
                return
        time.sleep(0.5)
    raise RuntimeError(f"the app did not come up: {app.log.read_text()[-3000:]}")
