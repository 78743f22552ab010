"""The web app as a real process on a loopback port, for the tests that drive it from outside."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from assistant.devtools.launcher import running
from assistant.engine.embedded import free_port

REPO = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 180.0
APP_PY = (str(REPO / "app.py"),)
"""`python app.py`: the thin launcher."""
CLI_SERVE = ("-m", "assistant.cli", "serve")
"""`assistant serve`, as the console script runs it."""


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
    data_dir.mkdir(parents=True, exist_ok=True)
    # its temp directory beside the data directory, not in /tmp: a test that kills the app and
    # never starts it again would leave it there (a next start removes it; see leftovers)
    temp = data_dir.with_name(data_dir.name + "-tmp")
    temp.mkdir(exist_ok=True)
    env.setdefault("TMPDIR", str(temp))
    url = f"http://127.0.0.1:{port}/"
    # the log is appended: an app restarted on the same data dir keeps the first run's output
    with running(
        [sys.executable, *entry, "--port", str(port), *args],
        url=url,
        timeout_s=START_TIMEOUT_S,
        env=app_env(data_dir, engine_url, **env),
        cwd=data_dir,
        log=data_dir / "app.log",
        grace_s=20,
    ) as p:
        yield App(url, p.proc, data_dir, data_dir / "app.log")
