"""The event loop's lag, and how long the process's own work held it (issue 48, item 6): a
busy machine makes the loop late without anything in the app holding it, so the attack tests'
check of a stalled loop reads the held figure, not the lag."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from assistant import loop_lag
from assistant.loop_lag import LoopLag, cpu_wait_s
from tests.waiting import until

EVERY_S = 0.1
HOLD_S = 0.5
"""How long each test's callback keeps the loop: past a sample's wake-up by 0.4 s."""


async def _first_sample(sampler: LoopLag, blocking: Callable[[float], None]) -> None:
    """The sampler's first sample, with `blocking(HOLD_S)` run on the loop while it waits."""
    task = asyncio.create_task(sampler.run())
    await asyncio.sleep(0)  # one step: the sampler's first wait has begun
    blocking(HOLD_S)
    try:
        await until(lambda: sampler.recent, 30, "the sampler's first sample")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def _spin(seconds: float) -> None:
    """Compute for `seconds` of this thread's CPU time (on a busy machine, longer)."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


async def test_a_callback_that_computes_holds_the_loop_in_full():
    lags: list[float] = []
    held: list[float] = []
    await _first_sample(LoopLag(lags.append, held.append, every_s=EVERY_S), _spin)
    # its CPU time alone is 0.4 s past the wake-up, whatever else the machine does
    assert lags[0] >= 0.35 and held[0] >= 0.35


async def test_a_callback_that_blocks_counts_as_held_too():
    # a call that blocks (or a thread holding the GIL) leaves the loop's thread asleep, not
    # waiting for a CPU: the app's own stall
    lags: list[float] = []
    held: list[float] = []
    await _first_sample(LoopLag(lags.append, held.append, every_s=EVERY_S), time.sleep)
    assert held[0] >= 0.35


async def test_time_the_loops_thread_waited_for_a_cpu_is_not_the_apps(monkeypatch):
    # as if the operating system gave the CPU to other processes for as long as the loop was
    # held (the thread's real waits still count, so a busy machine does not fail this test)
    waited = [0.0]

    def descheduled(seconds: float) -> None:
        time.sleep(seconds)
        waited[0] += seconds

    monkeypatch.setattr(loop_lag, "cpu_wait_s", lambda: cpu_wait_s() + waited[0])
    lags: list[float] = []
    held: list[float] = []
    await _first_sample(LoopLag(lags.append, held.append, every_s=EVERY_S), descheduled)
    assert lags[0] >= 0.35 and held[0] < 0.1


def test_the_threads_wait_for_a_cpu_is_read_where_the_system_says_it():
    first = cpu_wait_s()
    _spin(0.05)
    assert cpu_wait_s() >= first >= 0.0
