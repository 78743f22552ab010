"""`assistant bench qos --scale`: how many deep jobs one app carries before chat suffers.

On the simulated engine (slots to spare, so the engine itself never queues chat), for deep jobs
in flight 4, 16 and 64 and deep streams of 50 and 600 tokens a second each: chat time to first
token idle and with the deep lane saturated, the way jobs ran before (on the app's own loop,
a chunk per token) and as they run now (a worker process, 16-token chunks), with the app's
event-loop lag in each condition. The engine's own limits show too: the simulator is one Python
process, and 64 streams of 600 tokens a second ask it for 38,400 tokens a second.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from assistant.devtools.launcher import simulated_engine
from assistant.devtools.qosbench import _chat_ttft, _jobs_served, _measure
from assistant.settings import Settings

IN_FLIGHT = (4, 16, 64)
RATES = (50, 600)
"""Tokens per second per deep stream: a large model on a GPU, and a small fast one."""
MODES = {"before": ("loop", 1), "after": ("process", 16)}
"""Where jobs run and the deep lane's tokens per chunk."""


async def _row(rt: Any, rounds: int, deep: int, worker: str) -> dict[str, Any]:
    sampling = asyncio.create_task(rt.loop_lag.run())
    try:
        await _chat_ttft(rt, "Hello!", None)
        start = time.monotonic()
        idle = (await _measure(rt, rounds, 0.2)).summary()
        idle["loop_lag"] = rt.loop_lag.summary(start)
        jobs = [rt.jobs.submit("bench", f"Write a long essay, part {i}.") for i in range(deep)]
        async with _jobs_served(rt, worker):
            while rt.scheduler.depth()["deep_running"] < deep:
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)
            start = time.monotonic()
            busy: list[bool] = []
            saturated = (await _measure(rt, rounds, 0.2, busy)).summary()
            saturated["loop_lag"] = rt.loop_lag.summary(start)
            saturated["samples_with_deep_running"] = sum(busy)
        for job in jobs:  # what the table needs is measured; the rest of the work is not
            rt.jobs.cancel(job.id)
        return {"idle": idle, "saturated": saturated}
    finally:
        sampling.cancel()
        await asyncio.gather(sampling, return_exceptions=True)


def bench_qos_scale(settings: Settings, rounds: int | None) -> dict:
    from assistant.runtime import Runtime

    rounds = rounds or 16
    rows = []
    for rate in RATES:
        for deep in IN_FLIGHT:
            # each job outlasts the samples: reasoning for about 40 s at the stream's rate
            flags = (
                "--slots", str(deep + 8), "--token-ms", f"{1000 / rate:.3f}",
                "--reasoning-tokens", str(40 * rate), "--answer-words", "20",
                "--prefill-ms", "30", "--kind", "vllm",
            )  # fmt: skip
            with simulated_engine(*flags) as url:
                for mode, (worker, interval) in MODES.items():
                    with TemporaryDirectory() as tmp:
                        s = replace(
                            settings,
                            engine_url=url,
                            engine_kind="vllm",
                            data_dir=Path(tmp),
                            max_jobs_per_user=10_000,
                            deep_max_in_flight=deep,
                            deep=replace(settings.deep, stream_interval=interval),
                        )
                        with Runtime(s) as rt:
                            got = asyncio.run(_row(rt, rounds, deep, worker))
                    rows.append({"tokens_per_s": rate, "deep_in_flight": deep, "mode": mode} | got)
    return {"bench": "qos-scale", "rounds": rounds, "modes": MODES, "rows": rows}
