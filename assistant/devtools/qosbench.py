"""`assistant bench qos`: chat time to first token (queue wait included: what the user
waits) idle, and with the deep lane saturated, with the lane scheduler on and off, on the
embedded engine and on a simulated FIFO engine with several slots and a realistic prefill
delay; plus how much longer the deep work took because chat preempted it.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from assistant.devtools.launcher import simulated_engine
from assistant.records import Message
from assistant.settings import Settings
from assistant.stats import percentile


@dataclass
class Condition:
    name: str
    ttft_ms: list[float]

    def summary(self) -> dict[str, float]:
        return {
            "p50_ms": round(percentile(self.ttft_ms, 0.5), 1),
            "p95_ms": round(percentile(self.ttft_ms, 0.95), 1),
            "n": len(self.ttft_ms),
        }


async def _chat_ttft(rt: Any, text: str) -> float:
    """One chat-lane request through the scheduler; ms from asking to the first token."""
    start = time.perf_counter()
    lane = rt.settings.chat
    async with rt.scheduler.admit("chat"):
        events = rt.engine.stream([Message("user", text)], replace(lane, max_tokens=16))
        try:
            async for ev in events:
                if ev.kind in ("content", "reasoning"):
                    return (time.perf_counter() - start) * 1000
        finally:
            await events.aclose()
    return (time.perf_counter() - start) * 1000


async def _measure(
    rt: Any, rounds: int, gap_s: float, busy: list[bool] | None = None
) -> list[float]:
    """Chat TTFT samples; `busy` gets, per sample, whether deep work was running as it was
    asked (a "saturated" figure means something only if it was)."""
    samples = []
    for i in range(rounds):
        if busy is not None:
            busy.append(rt.scheduler.depth()["deep_running"] > 0)
        samples.append(await _chat_ttft(rt, f"Quick question number {i}: say hi."))
        await asyncio.sleep(gap_s)
    return samples


async def _saturated(rt: Any, rounds: int, gap_s: float, deep_streams: int) -> tuple[list, dict]:
    """Chat samples while `deep_streams` deep jobs keep the engine busy; and the deep work's
    total time with those interruptions."""
    worker = rt.worker()
    jobs = [rt.jobs.submit("bench", f"Write a long essay, part {i}.") for i in range(deep_streams)]
    rt.scheduler.deep_max = deep_streams if not rt.scheduler.enabled else rt.scheduler.deep_max
    serving = asyncio.create_task(worker.serve(poll_s=0.05))
    start = time.perf_counter()
    try:
        while rt.scheduler.depth()["deep_running"] == 0:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        busy: list[bool] = []
        samples = await _measure(rt, rounds, gap_s, busy)
        while any(rt.store.job(j.id).state in ("queued", "running") for j in jobs):
            await asyncio.sleep(0.1)
        elapsed = time.perf_counter() - start
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
    finished = [rt.store.job(j.id) for j in jobs]
    return samples, {
        "samples_with_deep_running": sum(busy),
        "deep_total_s": round(elapsed, 2),
        "deep_states": [j.state for j in finished],
        "deep_errors": sorted({j.error for j in finished if j.error}),
    }


async def _deep_alone(rt: Any, deep_streams: int) -> float:
    worker = rt.worker()
    jobs = [rt.jobs.submit("bench", f"Write a long essay, part {i}.") for i in range(deep_streams)]
    serving = asyncio.create_task(worker.serve(poll_s=0.05))
    start = time.perf_counter()
    try:
        while any(rt.store.job(j.id).state in ("queued", "running") for j in jobs):
            await asyncio.sleep(0.1)
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
    return time.perf_counter() - start


async def _qos_conditions(rt: Any, rounds: int, gap_s: float, deep: int) -> dict[str, Any]:
    """All conditions in one event loop: the scheduler's primitives belong to it."""
    results: dict[str, Any] = {}
    # one unmeasured request first: a fresh engine's first prefill (the embedded one reads
    # its whole prompt opening cold, ~3 s) is start-up, not the idle latency people get
    await _chat_ttft(rt, "Warm up: say hi.")
    results["idle"] = Condition("idle", await _measure(rt, rounds, gap_s)).summary()
    alone = await _deep_alone(rt, deep)
    for enabled in (True, False):
        rt.scheduler.enabled = enabled
        before = rt.scheduler.stats["deep"].preemptions
        samples, extra = await _saturated(rt, rounds, gap_s, deep)
        extra["preemptions"] = rt.scheduler.stats["deep"].preemptions - before
        key = "saturated_scheduler_on" if enabled else "saturated_scheduler_off"
        results[key] = Condition(key, samples).summary() | extra
    results["deep_alone_s"] = round(alone, 2)
    return results


def _qos_on(settings: Settings, label: str, rounds: int, gap_s: float, deep: int) -> dict:
    from assistant.runtime import Runtime

    with TemporaryDirectory() as tmp:
        s = replace(settings, data_dir=Path(tmp), max_jobs_per_user=10_000)
        with Runtime(s) as rt:
            results: dict[str, Any] = {"engine": label}
            results |= asyncio.run(_qos_conditions(rt, rounds, gap_s, deep))
            on = results["saturated_scheduler_on"]
            results["preemption_cost_s"] = round(on["deep_total_s"] - results["deep_alone_s"], 2)
            limit = 1.3 * results["idle"]["p95_ms"] + 100
            results["target_p95_ms"] = round(limit, 1)
            results["target_met"] = on["p95_ms"] <= limit
            results["saturated"] = on["samples_with_deep_running"] == rounds
    return results


def bench_qos(settings: Settings, rounds: int | None) -> dict:
    rounds = rounds or 12
    out: dict[str, Any] = {"bench": "qos", "rounds": rounds}
    # a FIFO engine with 4 slots, 150 ms prefill + 0.5 ms per prompt token, 20 ms per token
    with simulated_engine(
        "--slots", "4", "--prefill-ms", "150", "--prefill-ms-per-token", "0.5",
        "--token-ms", "20", "--answer-words", "150", "--kind", "vllm",
    ) as url:  # fmt: skip
        sim = replace(settings, engine_url=url, engine_kind="vllm", deep_max_in_flight=None)
        out["simulated_fifo_4_slots"] = _qos_on(sim, "simulated FIFO, 4 slots", rounds, 0.2, 6)
    embedded = replace(
        settings,
        engine_url=None,
        deep=replace(settings.deep, max_tokens=8192),
    )
    # six jobs, run one at a time on the one slot: a base model's essay can end in seconds,
    # and the deep lane must stay busy while chat is measured
    out["embedded_llamacpp"] = _qos_on(embedded, "embedded llama.cpp, 1 slot", rounds, 0.3, 6)
    return out
