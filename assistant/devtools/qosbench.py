"""`assistant bench qos`: chat time to first token (queue wait included: what the user
waits) and the gaps between a chat reply's chunks (the steady stream a spoken reply needs)
idle, and with the deep lane saturated, with the lane scheduler on and off, on the embedded
engine and on a simulated FIFO engine with several slots and a realistic prefill delay; plus
how much longer the deep work took because chat preempted it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from assistant.devtools.cpus import cpus_allowed
from assistant.devtools.launcher import simulated_engine
from assistant.devtools.loadclient import cpu_ms
from assistant.settings import Settings
from assistant.stats import summary
from assistant.turns.pipeline import TurnRequest
from assistant.worker import worker_process

TAIL = (0.5, 0.95, 0.99)
"""The quantiles of a tail: p99 as well as p50 and p95."""


@dataclass
class Sample:
    """One chat turn as its asker saw it."""

    ttft_ms: float | None
    """From asking to the first token; None: the turn ended without one."""
    lane: str
    gaps_ms: list[float] = field(default_factory=list)
    """Between consecutive chunks of text (answer or reasoning), from the first on."""


@dataclass
class Condition:
    """The chat samples of one condition."""

    ttft_ms: list[float | None]
    """Per sample; None: the turn ended without a token (an error, a refusal, a job)."""
    lanes: list[str]
    gaps_ms: list[float] = field(default_factory=list)
    """Every sample's gaps between chunks, pooled: a reply's stream stutters or it does not."""

    def summary(self) -> dict[str, Any]:
        # a sample with no token has no time to first token: it is counted, not averaged in
        got = [t for t in self.ttft_ms if t is not None]
        return summary(got, quantiles=TAIL) | {
            "samples": len(self.ttft_ms),
            "no_token": len(self.ttft_ms) - len(got),
            "not_chat_lane": sum(lane != "chat" for lane in self.lanes),
            "gaps": summary(self.gaps_ms, quantiles=TAIL),
        }


PROBES = (
    "What's the capital of France?",
    "How many days are in a week?",
    "Say hi to my sister.",
    "What's a good name for a cat?",
)
"""Chat-lane requests: the router sends each to the chat lane (checked per sample)."""


async def _chat_ttft(rt: Any, text: str, conversation_id: str | None) -> Sample:
    """One typed turn through the whole pipeline (router, prompt with the system prompt and
    the conversation's history, lane scheduler, engine), timed where the app's own stream
    handling hands each chunk on: the first token, and the gaps between the chunks after."""
    start = time.perf_counter()
    sample = Sample(None, "")
    last = 0.0
    turn = rt.turns.stream(TurnRequest(text=text, owner="bench", conversation_id=conversation_id))
    async with contextlib.aclosing(turn) as events:
        async for ev in events:
            if ev.kind == "route" and ev.decision is not None:
                sample.lane = ev.decision.lane
            elif ev.kind in ("content", "reasoning") and ev.text:
                now = time.perf_counter()
                if sample.ttft_ms is None:
                    sample.ttft_ms = (now - start) * 1000
                else:
                    sample.gaps_ms.append((now - last) * 1000)
                last = now
    return sample


async def _measure(rt: Any, rounds: int, gap_s: float, busy: list[bool] | None = None) -> Condition:
    """Chat TTFT samples, turns in one conversation; `busy` gets, per sample, whether deep
    work was in progress all through it: running at the engine as the turn was asked, and a
    job still running (or preempted, to resume) when its reply ended. A "saturated" figure
    means something only if it was."""
    cid = rt.store.new_conversation("bench", "qos probes")
    got = Condition([], [])
    for i in range(rounds):
        deep_at_ask = rt.scheduler.depth()["deep_running"] > 0
        sample = await _chat_ttft(rt, PROBES[i % len(PROBES)], cid)
        got.ttft_ms.append(sample.ttft_ms)
        got.lanes.append(sample.lane)
        got.gaps_ms += sample.gaps_ms
        if busy is not None:
            busy.append(deep_at_ask and _jobs_running(rt))
        await asyncio.sleep(gap_s)
    return got


def _jobs_running(rt: Any) -> bool:
    return any(j.state == "running" for j in rt.store.jobs("bench"))


@contextlib.asynccontextmanager
async def _jobs_served(
    rt: Any, worker: str, *, lanes: bool = True, deep_max: int | None = None
) -> AsyncIterator[int | None]:
    """Queued jobs run while inside: by a worker process linked to `rt` ("process", as
    `assistant serve` runs them; yields its pid), or on this loop beside the chat turns
    ("loop", as it did; yields None)."""
    cap = rt.scheduler.deep_max
    rt.scheduler.enabled = lanes  # the app's side; a worker process gets `lanes` itself
    pid = None
    if worker == "loop":
        rt.scheduler.deep_max = deep_max or cap
        serving = asyncio.create_task(rt.worker().serve(poll_s=0.05))
    else:
        child = worker_process(rt, lanes=lanes, deep_max=deep_max)
        serving = asyncio.create_task(child.run())
        await asyncio.wait_for(child.ready.wait(), 120)
        pid = child.proc.pid if child.proc is not None else None
    try:
        yield pid
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
        rt.scheduler.enabled, rt.scheduler.deep_max = True, cap


async def _saturated(
    rt: Any,
    rounds: int,
    gap_s: float,
    deep_streams: int,
    worker: str,
    lanes: bool,
    deep_max: int | None = None,
) -> tuple[Condition, dict]:
    """Chat samples while `deep_streams` deep jobs keep the engine busy; and the deep work's
    total time with those interruptions. `deep_max`: the deep cap with the lanes on (None: the
    runtime's)."""
    jobs = [rt.jobs.submit("bench", f"Write a long essay, part {i}.") for i in range(deep_streams)]
    start = time.perf_counter()
    deep_max = deep_max if lanes else deep_streams
    async with _jobs_served(rt, worker, lanes=lanes, deep_max=deep_max) as worker_pid:
        # where the worker really runs, from the kernel (`bench qos --vllm` pins processes)
        worker_cpus = cpus_allowed(worker_pid) if worker_pid is not None else None
        while rt.scheduler.depth()["deep_running"] == 0:
            await asyncio.sleep(0.05)
        deep_began = time.perf_counter()  # the worker's start-up is not deep work
        await asyncio.sleep(0.5)
        measured = time.monotonic()
        pids = {"app": os.getpid()} | ({"worker": worker_pid} if worker_pid else {})
        used = {name: cpu_ms(pid) for name, pid in pids.items()}
        busy: list[bool] = []
        samples = await _measure(rt, rounds, gap_s, busy)
        lag = rt.loop_lag.summary(measured)
        # what the bench's own processes took of a core while chat was measured: on a pinned
        # run they share the cores left to them, and their work is the app's side of a gap
        window_ms = max(1.0, (time.monotonic() - measured) * 1000)
        share = {n: round((cpu_ms(pid) - used[n]) / window_ms, 2) for n, pid in pids.items()}
        while any(rt.store.job(j.id).state in ("queued", "running") for j in jobs):
            await asyncio.sleep(0.1)
        elapsed = time.perf_counter() - start
        deep_run = time.perf_counter() - deep_began
    finished = [rt.store.job(j.id) for j in jobs]
    return samples, {
        "samples_with_deep_running": sum(busy),
        "deep_total_s": round(elapsed, 2),
        "deep_run_s": round(deep_run, 2),
        "deep_tokens": sum(j.reasoning_tokens + j.answer_tokens for j in finished),
        "deep_states": sorted({j.state for j in finished}),
        "deep_errors": sorted({j.error for j in finished if j.error}),
        "loop_lag": lag,
        "worker_cpus": worker_cpus,
        "cpu_share": share,
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
    saturated, clean = _counts(idle, on, rounds)
    met = limit is not None and saturated and clean and on["p95_ms"] <= limit
    return {
        "target_p95_ms": round(limit, 1) if limit is not None else None,
        "saturated": saturated,
        "target_met": bool(met),
    }


def _counts(idle: dict, sat: dict, rounds: int) -> tuple[bool, bool]:
    """Whether deep work ran all through every saturated sample, and whether every turn of
    both went to chat and got a token."""
    saturated = sat["samples_with_deep_running"] == rounds
    clean = all(
        c["no_token"] == 0 and c["not_chat_lane"] == 0 and c["n"] == rounds for c in (idle, sat)
    )
    return saturated, clean


def tail_verdict(idle: dict, sat: dict, rounds: int) -> dict[str, Any]:
    """The tail a person hears: saturated chat p99 time to first token at most 1.5 x idle p99
    + 100 ms, and the p95 gap between a reply's chunks at most 1.5 x idle's; counted as
    `verdict` counts (deep work all through, every turn on chat with a token)."""
    ttft_limit = 1.5 * idle["p99_ms"] + 100 if idle["p99_ms"] is not None else None
    gap_idle = idle["gaps"]["p95_ms"]
    gap_limit = 1.5 * gap_idle if gap_idle is not None else None
    ttft_met = _within(sat["p99_ms"], ttft_limit)
    gap_met = _within(sat["gaps"]["p95_ms"], gap_limit)
    saturated, clean = _counts(idle, sat, rounds)
    return {
        "target_p99_ttft_ms": round(ttft_limit, 1) if ttft_limit is not None else None,
        "target_p95_gap_ms": round(gap_limit, 1) if gap_limit is not None else None,
        "ttft_met": bool(ttft_met),
        "gaps_met": bool(gap_met),
        "target_met": bool(saturated and clean and ttft_met and gap_met),
    }


def _within(value: float | None, limit: float | None) -> bool:
    return value is not None and limit is not None and value <= limit


def tail_lines(results: dict) -> list[str]:
    """One engine's tail in words, for the printed summary: each figure with its n."""
    idle = results["idle"]
    lines = []
    for key, name in (("scheduler_on", "lanes on"), ("scheduler_off", "lanes off")):
        sat, tail = results[f"saturated_{key}"], results["tail"][key]
        lines.append(
            f"{results['engine']}, {name}: chat TTFT p99 idle {idle['p99_ms']} ms "
            f"(n={idle['n']}), saturated {sat['p99_ms']} ms (n={sat['n']}), limit "
            f"{tail['target_p99_ttft_ms']}; chunk gaps p50/p95/p99 idle "
            f"{_gaps(idle)}, saturated {_gaps(sat)}, p95 limit {tail['target_p95_gap_ms']}; "
            f"tail target {'met' if tail['target_met'] else 'NOT met'}"
        )
    return lines


def _gaps(c: dict) -> str:
    g = c["gaps"]
    return f"{g['p50_ms']}/{g['p95_ms']}/{g['p99_ms']} ms (n={g['n']})"


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
            off = results["saturated_scheduler_off"]
            results["tail"] = {
                "scheduler_on": tail_verdict(results["idle"], on, rounds),
                "scheduler_off": tail_verdict(results["idle"], off, rounds),
            }
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
