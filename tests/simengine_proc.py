"""Start the simulated engine as a real separate process, for tests that need HTTP misbehaviour.

    with run_simengine("--slots", "1", "--token-ms", "2") as base_url:
        client = AsyncOpenAI(base_url=base_url, api_key="x")   # base_url ends with /v1

The process is stopped by its PID (SIGTERM, then SIGKILL) when the block ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import httpx

from assistant.devtools.launcher import simulated_engine

READY_TIMEOUT_S = 30.0


@contextlib.contextmanager
def run_simengine(*args: str, timeout: float = READY_TIMEOUT_S) -> Iterator[str]:
    """Run the simulated engine with ARGS; yield `http://127.0.0.1:PORT/v1`."""
    with simulated_engine(*args, timeout_s=timeout) as url:
        yield url


def root_url(base_url: str) -> str:
    """`http://host:port/v1` -> `http://host:port` (for /metrics, /health and /sim/*)."""
    return base_url.removesuffix("/v1")


def sim_requests(base_url: str) -> list[dict[str, Any]]:
    """Every request body the engine received: `[{"received_at", "body", "headers"}, ...]`."""
    return httpx.get(root_url(base_url) + "/sim/requests", timeout=5).json()


def sim_reset(base_url: str) -> None:
    """Forget recorded requests, fault counters, prefix cache and metric counters."""
    httpx.post(root_url(base_url) + "/sim/reset", timeout=5).raise_for_status()
