"""`assistant bench qos`: chat time to first token (queue wait included: what the user
waits) idle, and with the deep lane saturated, with the lane scheduler on and off, on the
embedded engine and on a simulated FIFO engine with several slots and a realistic prefill
delay; plus how much longer the deep work took because chat preempted it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from assistant.devtools.launcher import simulated_engine
from assistant.settings import Settings
from assistant.stats import summary
from assistant.turns.pipeline import TurnRequest
from assistant.worker import worker_process


@dataclass
class Condition:
    """The chat samples of one condition."""

    ttft_ms: list[float | None]
    """Per sample; None: the turn ended without a token (an error, a refusal, a job)."""
    lanes: list[str]

    def summary(self) -> dict[str, Any]:
        # a sample with no token has no time to first token: it is counted, not averaged in
        got = [t for t in self.ttft_ms if t is not None]
        return summary(got) | {
            "samples": len(self.ttft_ms),
            "no_token": len(self.ttft_ms) - len(got),
            "not_chat_lane": sum(lane != "chat" for lane in self.lanes),
        }


PROBES = (
    "What's the capital of France?",
    "How many days are in a week?",
    "Say hi to my sister.",
    "What's a good name for a cat?",
)
"""Chat-lane requests: the router sends each to the chat lane (checked per sample)."""


async def _chat_ttft(rt: Any, text: str, conversation_id: str | None) -> tuple[float | None, str]:
    """One typed turn through the whole pipeline (router, prompt with the system prompt and
    the conversation's history, lane scheduler, engine): ms from asking to its first token,
    or None if none came; and the lane it went to."""
    start = time.perf_counter()
    ttft: float | None = None
    lane = ""
    turn = rt.turns.stream(TurnRequest(text=text, owner="bench", conversation_id=conversation_id))
    async with contextlib.aclosing(turn) as events:
        async for ev in events:
            if ev.kind == "route" and ev.decision is not None:
                lane = ev.decision.lane
            elif ev.kind in ("content", "reasoning") and ev.text and ttft is None:
                ttft = (time.perf_counter() - start) * 1000
    return ttft, lane


async def _measure(rt: Any, rounds: int, gap_s: float, busy: list[bool] | None = None) -> Condition:
    """Chat TTFT samples, turns in one conversation; `busy` gets, per sample, whether deep
    work was in progress all through it: running at the engine as the turn was asked, and a
    job still running (or preempted, to resume) when its reply ended. A "saturated" figure
    means something only if it was."""
    cid = rt.store.new_conversation("bench", "qos probes")
    samples: list[float | None] = []
    lanes: list[str] = []
    for i in range(rounds):
        deep_at_ask = rt.scheduler.depth()["deep_running"] > 0
        ttft, lane = await _chat_ttft(rt, PROBES[i % len(PROBES)], cid)
        samples.append(ttft)
        lanes.append(lane)
        if busy is not None:
            busy.append(deep_at_ask and _jobs_running(rt))
        await asyncio.sleep(gap_s)
    return Condition(samples, lanes)


def _jobs_running(rt: Any) -> bool:
    return any(j.state == "running" for j in rt.store.jobs("bench"))


@contextlib.asynccontextmanager
async def _jobs_served(
    rt: Any, worker: str, *, lanes: bool = True, deep_max: int | None = None
) -> AsyncIterator[None]:
    """Queued jobs run while inside: by a worker process linked to `rt` ("process", as
    `assistant serve` runs them), or on this loop beside the chat turns ("loop", as it did)."""
    cap = rt.scheduler.deep_max
    rt.scheduler.enabled = lanes  # the app's side; a worker process gets `lanes` itself
    if worker == "loop":
        rt.scheduler.deep_max = deep_max or cap
        serving = asyncio.create_task(rt.worker().serve(poll_s=0.05))
    else:
        child = worker_process(rt, lanes=lanes, deep_max=deep_max)
        serving = asyncio.create_task(child.run())
        await asyncio.wait_for(child.ready.wait(), 120)
    try:
        yield
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
        rt.scheduler.enabled, rt.scheduler.deep_max = True, cap


async def _saturated(
    rt: Any, rounds: int, gap_s: float, deep_streams: int, worker: str, lanes: bool
) -> tuple[Condition, dict]:
    """Chat samples while `deep_streams` deep jobs keep the engine busy; and the deep work's
    total time with those interruptions."""
    jobs = [rt.jobs.submit("bench", f"Write a long essay, part {i}.") for i in range(deep_streams)]
    start = time.perf_counter()
    async with _jobs_served(rt, worker, lanes=lanes, deep_max=None if lanes else deep_streams):
        while rt.scheduler.depth()["deep_running"] == 0:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        measured = time.monotonic()
        busy: list[bool] = []
        samples = await _measure(rt, rounds, gap_s, busy)
        lag = rt.loop_lag.summary(measured)
        while any(rt.store.job(j.id).state in ("queued", "running") for j in jobs):
            await asyncio.sleep(0.1)
        elapsed = time.perf_counter() - start
    finished = [rt.store.job(j.id) for j in jobs]
    return samples, {
        "samples_with_deep_running": sum(busy),
        "deep_total_s": round(elapsed, 2),
        "deep_states": sorted({j.state for j in finished}),
        "deep_errors": sorted({j.error for j in finished if j.error}),
        "loop_lag": lag,
    }


async def _deep_alone(rt: Any, deep_streams: int, worker: str) -> float:
    jobs = [rt.jobs.submit("bench", f"Write a long essay, part {i}.") for i in range(deep_streams)]
    start = time.perf_counter()
    async with _jobs_served(rt, worker):
        while any(rt.store.job(j.id).state in ("queued", "running") for j in jobs):
            await asyncio.sleep(0.1)
    return time.perf_counter() - start


async def _qos_conditions(
    rt: Any, rounds: int, gap_s: float, deep: int, worker: str
) -> dict[str, Any]:
    """All conditions in one event loop: the scheduler's primitives belong to it."""
    results: dict[str, Any] = {"worker": worker}
    sampling = asyncio.create_task(rt.loop_lag.run())
    try:
        # one unmeasured request first: a fresh engine's first prefill (the embedded one reads
        # its whole prompt opening cold, ~3 s) is start-up, not the idle latency people get
        await _chat_ttft(rt, "Hello!", None)
        measured = time.monotonic()
        results["idle"] = (await _measure(rt, rounds, gap_s)).summary()
        results["idle"]["loop_lag"] = rt.loop_lag.summary(measured)
        alone = await _deep_alone(rt, deep, worker)
        for enabled in (True, False):
            samples, extra = await _saturated(rt, rounds, gap_s, deep, worker, enabled)
            key = "saturated_scheduler_on" if enabled else "saturated_scheduler_off"
            results[key] = samples.summary() | extra
        results["deep_alone_s"] = round(alone, 2)
    finally:
        sampling.cancel()
        await asyncio.gather(sampling, return_exceptions=True)
    return results


def verdict(idle: dict, on: dict, rounds: int) -> dict[str, Any]:
    """The target, from the idle and the saturated (scheduler on) summaries: saturated p95 at
    most 1.3 x idle p95 + 100 ms, and it counts only if deep work was in progress all
    through every saturated sample and every turn of both went to chat and got a token."""
    limit = 1.3 * idle["p95_ms"] + 100 if idle["p95_ms"] is not None else None
    saturated = on["samples_with_deep_running"] == rounds
    clean = all(
        c["no_token"] == 0 and c["not_chat_lane"] == 0 and c["n"] == rounds for c in (idle, on)
    )
    met = limit is not None and saturated and clean and on["p95_ms"] <= limit
    return {
        "target_p95_ms": round(limit, 1) if limit is not None else None,
        "saturated": saturated,
        "target_met": bool(met),
    }


def _qos_on(
    settings: Settings, label: str, rounds: int, gap_s: float, deep: int, worker: str = "process"
) -> dict:
    from assistant.runtime import Runtime

    with TemporaryDirectory() as tmp:
        s = replace(settings, data_dir=Path(tmp), max_jobs_per_user=10_000)
        with Runtime(s) as rt:
            results: dict[str, Any] = {"engine": label}
            results |= asyncio.run(_qos_conditions(rt, rounds, gap_s, deep, worker))
            on = results["saturated_scheduler_on"]
            results["preemption_cost_s"] = round(on["deep_total_s"] - results["deep_alone_s"], 2)
            results |= verdict(results["idle"], on, rounds)
    return results


def bench_qos(settings: Settings, rounds: int | None) -> dict:
    rounds = rounds or 24  # a p95 of fewer samples is decided by one or two of them
    out: dict[str, Any] = {"bench": "qos", "rounds": rounds}
    # a FIFO engine with 64 slots, 150 ms prefill + 0.5 ms per prompt token, 20 ms per token;
    # 32 deep jobs in flight at once, each reasoning 3,000 tokens first (about a minute), so
    # they outlast the chat turns (40 words each, thinking off) measured beside them
    with simulated_engine(
        "--slots", "64", "--prefill-ms", "150", "--prefill-ms-per-token", "0.5",
        "--token-ms", "20", "--answer-words", "40", "--reasoning-tokens", "3000",
        "--kind", "vllm",
    ) as url:  # fmt: skip
        sim = replace(settings, engine_url=url, engine_kind="vllm", deep_max_in_flight=32)
        out["simulated_fifo_64_slots"] = _qos_on(sim, "simulated FIFO, 64 slots", rounds, 0.2, 32)
    embedded = replace(
        settings,
        engine_url=None,
        deep=replace(settings.deep, max_tokens=8192),
    )
    # twelve jobs, run one at a time on the deep lane's one slot: a base model's essay can end
    # in seconds (2.5 s each on a process of its own), and the deep lane must stay busy while
    # chat is measured (six were done before half the samples)
    layout = (
        f"a process per lane, {embedded.embedded_threads} thread(s) each"
        if embedded.embedded_per_lane
        else f"one process both lanes share (1 slot: chat preempts deep), "
        f"{embedded.embedded_threads} thread(s)"
    )
    out["embedded_llamacpp"] = _qos_on(embedded, f"embedded llama.cpp, {layout}", rounds, 0.3, 12)
    return out
