"""Start a process we own, wait until it answers, and stop it by its PID.

One helper for every such process: the simulated engine, the app under a benchmark or a test,
the embedded engine. Readiness is either a `READY port=N` line on stdout (the simulated engine
prints one) or an HTTP URL that answers 200.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx

from assistant.lifeline import die_with_parent


@dataclass
class Process:
    """A started process and where it answers."""

    proc: subprocess.Popen
    url: str = ""
    log: Path | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self, chars: int = 4000) -> str:
        """The end of what it wrote (its log), for error messages."""
        if self.log is None or not self.log.exists():
            return ""
        return self.log.read_text(errors="replace")[-chars:]


def stop(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after `grace_s`; its process group when it leads one."""
    if proc.poll() is not None:
        return
    group = _leads_group(proc.pid)
    _signal(proc.pid, signal.SIGTERM, group)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        _signal(proc.pid, signal.SIGKILL, group)
        proc.wait(timeout=10)


def wait_http(p: Process, timeout_s: float, url: str | None = None) -> None:
    """Until `url` (default: the process's) answers 200; RuntimeError if it exits first."""
    target = url or p.url
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if p.proc.poll() is not None:
            raise RuntimeError(f"the process exited ({p.proc.returncode}): {p.output()}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(target, timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{target} did not answer within {timeout_s:.0f}s: {p.output()}")


@contextlib.contextmanager
def running(
    cmd: list[str],
    *,
    url: str | None = None,
    ready_line: bool = False,
    timeout_s: float = 60.0,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    log: Path | None = None,
    grace_s: float = 10.0,
) -> Iterator[Process]:
    """Run `cmd` until the block ends. Ready when `url` answers, or (`ready_line`) when it
    prints `READY port=N` (then `Process.url` is `http://127.0.0.1:N/v1`)."""
    with contextlib.ExitStack() as stack:
        if log is None:
            handle: IO[bytes] = stack.enter_context(tempfile.NamedTemporaryFile(suffix=".log"))
            log = Path(handle.name)
        else:
            log.parent.mkdir(parents=True, exist_ok=True)
        # stderr (and stdout, unless we read it) to a file: a pipe nobody reads would fill up
        # and block the child
        with log.open("ab") as out:
            proc = subprocess.Popen(
                cmd,
                stdout=subprocess.PIPE if ready_line else out,
                stderr=out,
                env=env,
                cwd=cwd,
                text=ready_line,
                # a benchmark or test that is killed leaves no app (or engine) behind: SIGTERM,
                # so the app still stops its own children. This thread waits in the block below
                # for the process's whole life, so the signal comes only when the caller dies
                preexec_fn=die_with_parent(signal.SIGTERM),
            )
        p = Process(proc, url or "", log)
        try:
            if ready_line:
                port = _ready_port(proc, timeout_s)
                if port is None:
                    raise RuntimeError(f"{cmd[-1]} did not become ready: {p.output()}")
                p.url = f"http://127.0.0.1:{port}/v1"
            elif url:
                wait_http(p, timeout_s)
            yield p
        finally:
            stop(proc, grace_s)


def _ready_port(proc: subprocess.Popen, timeout_s: float) -> int | None:
    lines: queue.Queue[str | None] = queue.Queue()
    # stdout is drained on a thread so a readline cannot block past the timeout, and for the
    # rest of the process's life so it never blocks on a full pipe
    threading.Thread(target=_drain, args=(proc.stdout, lines), daemon=True).start()
    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            return None
        if line is None:
            return None  # it exited before it was ready
        if line.startswith("READY port="):
            return int(line.split("=", 1)[1])
    return None


def _drain(stream: Any, lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def _leads_group(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid
    except ProcessLookupError:
        return False


def _signal(pid: int, sig: signal.Signals, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError):
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)


@contextlib.contextmanager
def simulated_engine(*args: str, timeout_s: float = 30.0) -> Iterator[str]:
    """The simulated engine as its own process (its event loop apart from ours); yields its
    base URL (`http://127.0.0.1:PORT/v1`)."""
    cmd = [sys.executable, "-m", "assistant.devtools.simengine", "--port", "0", *args]
    with running(cmd, ready_line=True, timeout_s=timeout_s) as p:
        yield p.url
