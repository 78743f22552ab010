"""The event loop's own lag, measured: how late a timer wakes up.

Every callback, stream chunk and page event of the web process shares one asyncio loop; when it
is busy, a chat turn's first token waits in line although the engine sent it in time. A sleeper
task asks to wake every `every_s` and records how late it woke: the time something else held
the loop. Cheap (a wake-up four times a second), so it always runs; the figures go to the
`assistant_event_loop_lag_seconds` histogram, the dashboard and the benches.

On a busy machine a late wake-up is also the operating system's doing: the loop's thread was
ready but another process had the CPU. So each sample also gives how long the process's own
work held the loop (`assistant_event_loop_held_seconds`): the lag less the time the thread
spent waiting for a CPU in that sample (Linux's `/proc/thread-self/schedstat`). A callback
that computes, or a thread that keeps the GIL, still counts in full; where the count is not
available the held figure is the lag.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

from assistant.stats import summary

EVERY_S = 0.25
"""How often the loop is sampled: often enough to catch a stall of a few hundred ms, cheap
enough for the idle budget (four wake-ups a second)."""
BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class LoopLag:
    """Samples the running loop's lag; `observe` (a Prometheus histogram's) gets each sample
    in seconds, and the most recent samples stay for summaries."""

    def __init__(
        self, observe: Any = None, held: Any = None, every_s: float = EVERY_S, keep: int = 2400
    ):
        self.observe = observe
        self.held = held
        """Gets each sample's lag less the loop thread's wait for a CPU (s)."""
        self.every_s = every_s
        self.recent: deque[tuple[float, float]] = deque(maxlen=keep)
        """(monotonic time, lag in s): ten minutes at the default rate."""

    async def run(self) -> None:
        """Sample until cancelled."""
        loop = asyncio.get_running_loop()
        while True:
            start, waited = loop.time(), cpu_wait_s()
            await asyncio.sleep(self.every_s)
            lag = max(0.0, loop.time() - start - self.every_s)
            self.recent.append((time.monotonic(), lag))
            if self.observe is not None:
                self.observe(lag)
            if self.held is not None:
                self.held(max(0.0, lag - (cpu_wait_s() - waited)))

    def since(self, start: float) -> list[float]:
        """Lag samples (ms) taken since monotonic time `start`."""
        return [lag * 1000 for at, lag in self.recent if at >= start]

    def summary(self, start: float = 0.0) -> dict[str, Any]:
        """{"n", "p50_ms", "p95_ms", "max_ms"} of the samples since `start`."""
        samples = self.since(start)
        return summary(samples, 2) | {"max_ms": round(max(samples), 2) if samples else None}


SCHEDSTAT = "/proc/thread-self/schedstat"


def cpu_wait_s() -> float:
    """How long the calling thread has waited, ready to run, for a CPU (s): the second field of
    its schedstat (ns on a run queue); 0.0 where the system does not say."""
    try:
        with open(SCHEDSTAT, "rb") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0
