"""The one way tests wait for something: a condition polled until it holds, or a clear failure.

wait_until(lambda: job_state() == "done", 60, "the job to finish")
await until(lambda: worker.busy, 5, "the worker to claim the job")
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float, what: str, every: float = 0.05) -> T:
    """Poll `condition` until it returns something true; returns it. AssertionError after
    `timeout` seconds, naming `what` was awaited."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


async def until(condition: Callable[[], T], limit_s: float, what: str, every: float = 0.02) -> T:
    """`wait_until` for a test running on the event loop: other tasks run while it waits."""
    deadline = time.monotonic() + limit_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {limit_s:.0f}s waiting for {what}")
        await asyncio.sleep(every)
