"""Real `vllm serve` processes on loopback, for the real-vLLM test tier and `bench qos --vllm`.

vLLM runs from its own environment (`scripts/setup_vllm.sh` makes `.venv-vllm`; the app's
environment never gets torch), on the CPU, serving the tiny scripted model of
`assistant.devtools.tiny_model`. Every scratch file (vLLM's cache, torch's temp files) goes to a
directory of the caller's, not the home directory or the system temp directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from assistant.devtools.cpus import parse_cpu_list, pin_to
from assistant.engine.embedded import stop_group
from assistant.lifeline import die_with_parent

ROOT = Path(__file__).resolve().parents[2]
MODEL_SOURCE = Path(__file__).with_name("tiny_model.py")
START_TIMEOUT_S = 600.0
"""vLLM for CPU starts in about a minute alone; a shared, busy machine takes several."""
MAX_MODEL_LEN = 32768

FLAGS = {
    "plain": [],
    "priority": ["--scheduling-policy", "priority"],
    "tools": ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"],
    "all": [
        "--scheduling-policy",
        "priority",
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "hermes",
    ],
}
"""The flag combinations users run (each with --reasoning-parser qwen3, prefix caching on)."""


class VllmMissing(RuntimeError):
    """vLLM for CPU is not installed (run scripts/setup_vllm.sh)."""


class VllmStartFailed(RuntimeError):
    """`vllm serve` exited or did not answer in time (its log's tail in the message)."""


def vllm_python() -> Path:
    path = Path(os.environ.get("ASSISTANT_VLLM_PYTHON", ROOT / ".venv-vllm" / "bin" / "python"))
    if not path.exists():
        raise VllmMissing(f"no vLLM environment at {path}: run scripts/setup_vllm.sh")
    return path


def tiny_model(cache: Path | None = None) -> Path:
    """The scripted model's directory, built once per version of its builder."""
    digest = hashlib.sha256(MODEL_SOURCE.read_bytes()).hexdigest()[:12]
    base = cache or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    out = base / "assistant-tiny-model" / digest
    if not (out / "config.json").exists():
        tmp = out.with_name(out.name + f".tmp{os.getpid()}")
        subprocess.run([str(vllm_python()), str(MODEL_SOURCE), str(tmp)], check=True)
        with contextlib.suppress(OSError):
            tmp.rename(out)  # another process may have built it meanwhile
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class VllmServer:
    """A running `vllm serve`: its base URL (with /v1), process and log."""

    url: str
    proc: subprocess.Popen
    log_path: Path
    flags: list[str]

    @property
    def root(self) -> str:
        return self.url.removesuffix("/v1")

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@contextlib.contextmanager
def run_vllm(
    scratch: Path,
    flags: list[str] | tuple[str, ...] = (),
    *,
    max_num_seqs: int = 8,
    reasoning_parser: str | None = "qwen3",
    extra: list[str] | tuple[str, ...] = (),
    max_model_len: int = MAX_MODEL_LEN,
    cpus: frozenset[int] | None = None,
    start_timeout_s: float = START_TIMEOUT_S,
) -> Iterator[VllmServer]:
    """Start `vllm serve` on the tiny model with `flags`; stop it (and its workers) after.
    `cpus`: the cores it (and every process it starts) may run on; None: wherever this one may.
    Raises VllmStartFailed when it exits or does not answer within `start_timeout_s`."""
    python = vllm_python()
    model = tiny_model()
    scratch.mkdir(parents=True, exist_ok=True)
    port = free_port()
    cmd = [
        str(python.with_name("vllm")),
        "serve",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--served-model-name",
        "tiny",
        "--max-model-len",
        str(max_model_len),
        "--max-num-seqs",
        str(max_num_seqs),
        "--enforce-eager",  # torch.compile doubles the start-up for a model this small
        "--uvicorn-log-level",
        "warning",
        *(["--reasoning-parser", reasoning_parser] if reasoning_parser else []),
        *flags,
        *extra,
    ]
    env = os.environ | {
        "VLLM_TARGET_DEVICE": "cpu",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_CACHE_ROOT": str(scratch / "vllm-cache"),
        "TMPDIR": str(scratch),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        # torch's pools: one thread on shared cores, so the app still gets CPU; one per core
        # on cores of its own
        "OMP_NUM_THREADS": str(len(cpus) if cpus else 1),
        "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    }
    env.pop("VIRTUAL_ENV", None)
    log_path = scratch / f"vllm-{port}.log"
    armed = die_with_parent(signal.SIGTERM)
    pin = pin_to(cpus)

    def prepare() -> None:
        armed()
        if pin is not None:
            pin()  # before exec: vLLM's engine core and its workers inherit it

    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            # a killed test run must not leave a 3 GB server behind
            preexec_fn=prepare,
        )
    server = VllmServer(f"http://127.0.0.1:{port}/v1", proc, log_path, list(flags))
    try:
        _wait_ready(server, start_timeout_s)
        yield server
    finally:
        # vLLM runs its engine core as a child; it can take a while to let go of its memory
        stop_group(proc, grace_s=30.0)


def _wait_ready(server: VllmServer, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise VllmStartFailed(
                f"vllm serve exited with code {server.proc.returncode}:\n{server.log_tail()}"
            )
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(server.url + "/models", timeout=2.0).status_code == 200:
                return
        time.sleep(1.0)
    raise VllmStartFailed(f"vllm serve did not start in {timeout_s:.0f} s:\n{server.log_tail()}")


def main(argv: list[str] | None = None) -> None:
    """`python -m assistant.devtools.vllm_server [plain|priority|tools|all] [--max-num-seqs N]`:
    serve the tiny model until interrupted (prints the base URL)."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m assistant.devtools.vllm_server")
    p.add_argument("flags", nargs="?", default="plain", choices=sorted(FLAGS))
    p.add_argument("--max-num-seqs", type=int, default=8)
    p.add_argument("--scratch", type=Path, default=Path("data/vllm-scratch"))
    p.add_argument("--cpus", type=parse_cpu_list, default=None, help="its cores, e.g. 1 or 2-3")
    args = p.parse_args(argv)
    # SIGTERM must unwind through run_vllm's cleanup, or vLLM's processes outlive this one
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with run_vllm(
        args.scratch, FLAGS[args.flags], max_num_seqs=args.max_num_seqs, cpus=args.cpus
    ) as server:
        print(f"READY {server.url}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while server.proc.poll() is None:
                time.sleep(1.0)
    sys.exit(0)


if __name__ == "__main__":
    main()
