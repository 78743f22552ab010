"""`assistant bench load [--api gradio|openai]`: the app under many sessions, measured by a
client that costs little.

One run: the simulated engine (64 slots, 30-token replies at 10 ms a token: ~0.3 s of engine
time a turn) and the app, each its own process. Then, for each way in (`--api openai`: Gradio's
call API first, then the OpenAI-compatible endpoint, in the same run on the same app): a
warm-up; one user alone for ALONE_TURNS turns (conversations of `rounds` turns, one after
another); then SESSIONS sessions x `rounds` turns (default 3) at once, with JOBS deep jobs
submitted through that way as the phase starts. The client is one asyncio loop over httpx: on
Gradio's REST call API (POST /gradio_api/call/<api> for an event id, then its SSE result; each
session keeps one Gradio session hash, as a page does), or streaming chat completions read by a
plain SSE line reader (each session sends its whole history, as OpenAI clients do). No thread
per session, so the machine's cores go to the app. Around each phase (and each batch of
CPU_BATCH turns alone) the app's CPU time, utime+stime from /proc/<pid>/stat, is read: app CPU
per answered turn (failed turns cost little and would dilute it), beside what the app burns
idle over the same time; the engine is another process and is read apart. Failed turns count
in the latency percentiles with the time they took, and any failure fails the target. Every
percentile carries its n. Also: turns or jobs lost, the app's memory, the store's integrity.
Targets: the loaded p95 at most 2 x the alone p95 + 200 ms with no error and every turn
stored; app CPU per typed turn alone, p50 over the batches, at most CPU_TARGET_MS for the way.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from assistant.devtools.launcher import running
from assistant.devtools.loadclient import (  # noqa: F401  (re-exported)
    ADMIN,
    ALONE_TURNS,
    CALL_TIMEOUT_S,
    CLIENTS,
    CPU_BATCH,
    CPU_TARGET_MS,
    ENGINE,
    ENGINE_CMD,
    ENGINE_CONFIG,
    IDLE_MS,
    IDLE_WINDOW_S,
    JOBS,
    SESSIONS,
    TICK_MS,
    TURNS,
    WARMUP_TURNS,
    WAYS,
    CallError,
    Gradio,
    Meter,
    OpenAI,
    call,
    completion,
    cpu_ms,
    per_turn_batches,
    rss_mb,
    session,
    settle,
    spread,
    sse_result,
    summary,
)
from assistant.engine.embedded import free_port
from assistant.settings import Settings


async def drive(
    url: str, pid: int, engine_pid: int, turns: int, ways: tuple[str, ...] = ("gradio",)
) -> dict[str, Any]:
    """Each way in turn, on the same app; the app's memory across the whole run."""
    limits = httpx.Limits(max_connections=SESSIONS * 2 + JOBS, max_keepalive_connections=100)
    timeout = httpx.Timeout(CALL_TIMEOUT_S, connect=10.0)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout) as http:
        meter = Meter(pid, engine_pid, http)
        rss_start = rss_mb(pid)
        runs = {}
        for way in ways:
            runs[way] = await drive_way(http, way, meter, pid, turns)
        return {"ways": runs, "rss": (rss_start, meter.peak, rss_mb(pid))}


async def drive_way(
    http: httpx.AsyncClient, way: str, meter: Meter, pid: int, turns: int
) -> dict[str, Any]:
    """Warm-up, the alone phase, then the loaded phase with the jobs; the jobs' end states."""
    warm = await session(http, way, -1, WARMUP_TURNS)  # first-use costs, not counted
    with contextlib.suppress(CallError, httpx.HTTPError, ValueError):
        await call(http, "jobs", session=ADMIN)
    idle = await settle(pid)
    alone_m: dict[str, Any] = {}
    async with meter.phase(alone_m):
        # one user at a time, in conversations as long as the loaded phase's (a longer
        # history would cost more per turn, and the phases would not compare)
        alone: list[dict[str, Any]] = []
        marks: list[tuple[float, bool]] = [(cpu_ms(pid), True)]
        for i in range(0, ALONE_TURNS, turns):
            n = min(turns, ALONE_TURNS - i)
            alone.append(await session(http, way, -2 - i, n, cpu_pid=pid, marks=marks))
    alone_m["marks"] = marks
    loaded_m: dict[str, Any] = {}
    async with meter.phase(loaded_m):
        job_ids, submit_errors = await submit_jobs(http, way)
        tasks = [session(http, way, i + 1, turns) for i in range(SESSIONS)]
        loaded = list(await asyncio.gather(*tasks))
    jobs_m: dict[str, Any] = {}
    async with meter.phase(jobs_m):
        jobs = await wait_jobs(http, job_ids)
    return {
        "warm": warm,
        "alone": alone,
        "loaded": loaded,
        "meters": (alone_m, loaded_m, jobs_m),
        "idle_cpu_ms_per_s": idle,
        "job_ids": job_ids,
        "job_submit_errors": submit_errors,
        "jobs": jobs,
    }


async def submit_jobs(http: httpx.AsyncClient, way: str = "gradio") -> tuple[list[str], list[str]]:
    """JOBS deep jobs through `way`, each with its own key: their ids, and any refusals."""
    ids: list[str] = []
    errors: list[str] = []
    for i in range(JOBS):
        try:
            ids.append(await CLIENTS[way].delegate(http, f"deep task {i}", f"load-{way}-{i}"))
        except Exception as e:  # counted, like a chat error
            errors.append(f"{type(e).__name__}: {e}"[:300])
    return ids, errors


async def wait_jobs(http: httpx.AsyncClient, job_ids: list[str]) -> dict[str, dict]:
    deadline = time.monotonic() + 600
    jobs: dict[str, dict] = {}
    while time.monotonic() < deadline:
        with contextlib.suppress(CallError, httpx.HTTPError, ValueError):
            jobs = {j["id"]: j for j in await call(http, "jobs", session=ADMIN)}
        if all(jobs.get(i, {}).get("state") in ("done", "failed") for i in job_ids):
            break
        await asyncio.sleep(1)
    return jobs


@contextlib.contextmanager
def app_process(engine_url: str, data_dir: Path) -> Iterator[tuple[str, int]]:
    port = free_port()
    config = data_dir / "assistant.toml"
    # No logins here: the SESSIONS sessions are one login, and its own caps (8 /v1 requests
    # at once, 10 jobs) would refuse most of the burst with 429, measuring the cap instead of
    # the app's cost (the bench's /v1 burst came back 96 of 120 refused). The caps are tested
    # where they are the point: tests/test_attacks.py, tests/test_attacks_fair.py.
    config.write_text(
        f"max_jobs_per_user = {JOBS + 5}\nmax_api_per_user = {SESSIONS + JOBS}\nmax_queue = 512\n"
    )
    env = dict(
        os.environ,
        ASSISTANT_ENGINE_URL=engine_url,
        ASSISTANT_DATA_DIR=str(data_dir),
        ASSISTANT_CONFIG=str(config),
        ASSISTANT_DEEP_MAX_IN_FLIGHT="4",
    )
    cmd = [sys.executable, "-m", "assistant.cli", "serve", "--port", str(port)]
    url = f"http://127.0.0.1:{port}/"
    with running(cmd, url=url, timeout_s=120, env=env, log=data_dir / "app.log", grace_s=20) as p:
        yield url, p.pid


def stored_check(db: Path, sessions: list[dict[str, Any]]) -> dict[str, Any]:
    """A turn whose call returned must be in the store: anything else is lost."""
    from assistant.store.db import Store

    store = Store(db)
    try:
        returned = [pair for s in sessions for pair in s["returned"]]
        stored = {cid: [u for u, _ in store.turns(cid)] for cid in {c for c, _ in returned}}
        return {
            "turns_returned": len(returned),
            "turns_stored": sum(len(v) for v in stored.values()),
            "turns_lost": sum(1 for cid, text in returned if text not in stored[cid]),
            "store_integrity_ok": store.integrity_ok(),
        }
    finally:
        store.close()


READER_STREAMS = 60
SOAK_CLIENTS = 8
SOAK_CONVERSATION = 25
SOAK_WARMUP = 200
SOAK_EVERY = 500
SOAK_LIMIT_MB = 50.0


async def soak_way(http: httpx.AsyncClient, way: str, pid: int, total: int) -> dict[str, Any]:
    """`total` turns through `way` by SOAK_CLIENTS clients, a new conversation every
    SOAK_CONVERSATION turns (on Gradio's API a new session every call, the worst case): the
    app's RSS after SOAK_WARMUP turns and then every SOAK_EVERY, against the post-warm-up RSS."""
    done, errors = 0, 0
    curve: list[tuple[int, float]] = [(0, rss_mb(pid))]
    marks = iter([SOAK_WARMUP, *range(SOAK_EVERY, total + SOAK_EVERY, SOAK_EVERY)])
    mark = next(marks)

    async def client(c: int) -> None:
        nonlocal done, errors, mark
        while done < total:
            n = min(SOAK_CONVERSATION, total - done)
            s = await session(http, way, 1000 + c, n, fresh=True)
            errors += len(s["errors"])
            done += n
            while done >= mark:
                curve.append((done, rss_mb(pid)))
                mark = next(marks, 1 << 62)

    await asyncio.gather(*(client(c) for c in range(SOAK_CLIENTS)))
    warm = next((mb for n, mb in curve if n >= SOAK_WARMUP), curve[-1][1])
    end = rss_mb(pid)
    return {
        "turns": done,
        "errors": errors,
        "rss_mb_curve": [[n, round(mb)] for n, mb in curve] + [[done, round(end)]],
        "after_warmup_mb": round(warm),
        "end_mb": round(end),
        "grew_mb": round(end - warm, 1),
        "target": {
            "rule": f"end within {SOAK_LIMIT_MB:g} MB of the RSS after warm-up, no error",
            "ok": end - warm <= SOAK_LIMIT_MB and errors == 0,
        },
    }


def bench_soak(total: int) -> dict[str, Any]:
    """Both ways in, one after the other, on one app."""

    async def run(url: str, pid: int) -> dict[str, Any]:
        limits = httpx.Limits(max_connections=SOAK_CLIENTS * 2)
        async with httpx.AsyncClient(base_url=url, limits=limits, timeout=CALL_TIMEOUT_S) as h:
            return {way: await soak_way(h, way, pid, total) for way in ("gradio", "openai")}

    with (
        tempfile.TemporaryDirectory() as tmp,
        running(ENGINE_CMD, ready_line=True, timeout_s=30) as engine,
        app_process(engine.url, Path(tmp)) as (url, pid),
    ):
        return {"bench": "load", "soak": asyncio.run(run(url, pid))}


async def reader_costs(engine_url: str, n: int | None = None) -> dict[str, Any]:
    """CPU in this process per streamed reply of the bench's shape, read from the same engine
    by the official client's typed chunks and by the app's lean reader (`engine.sse`): the
    per-chunk parsing the app pays on every turn, compared in the same run."""
    from openai import AsyncOpenAI

    from assistant.engine.sse import LeanClient

    n = n or READER_STREAMS
    messages = [{"role": "user", "content": "Quick question: what is the capital of France?"}]
    out: dict[str, Any] = {"n": n}
    sdk = AsyncOpenAI(base_url=engine_url, api_key="x", max_retries=0)
    for name, client in (("sdk", sdk), ("lean", LeanClient(sdk))):
        chunks = 0
        for i in range(n + 3):  # three unmeasured: first-use costs
            if i == 3:
                cpu0, chunks = time.process_time(), 0
            stream = await client.chat.completions.create(
                model="sim-model", messages=messages, stream=True, max_tokens=64
            )
            async for _ in stream:
                chunks += 1
            await stream.close()
        out[f"{name}_cpu_ms_per_reply"] = round((time.process_time() - cpu0) * 1000 / n, 2)
        out["chunks_per_reply"] = round(chunks / n, 1)
    await sdk.close()
    return out


def router_costs(n: int = 64) -> dict[str, Any]:
    """CPU per routing decision in this process: one at a time, as a lone turn routes, and in
    the batches `routing.batch` forms from concurrent turns. (Caching by text saves nothing
    here: every request of the bench, like a real conversation's, is new.)"""
    from assistant.routing.router import Router

    router = Router.load().warm()
    texts = [f"Quick question: what is the capital of France? (user {i}, turn 0)" for i in range(n)]
    out: dict[str, Any] = {"n": n}
    cpu0 = time.process_time()
    for t in texts:
        router.decide(t)
    out["one_at_a_time_cpu_ms"] = round((time.process_time() - cpu0) * 1000 / n, 2)
    for size in (4, 8, 16):
        cpu0 = time.process_time()
        for i in range(0, n, size):
            router.decide_many(texts[i : i + size])
        out[f"batch_{size}_cpu_ms"] = round((time.process_time() - cpu0) * 1000 / n, 2)
    return out


def bench_load(settings: Settings, rounds: int | None, api: str = "gradio", soak: int = 0) -> dict:
    if soak:
        return bench_soak(soak)
    turns = rounds or TURNS
    ways = WAYS[api]
    started = time.perf_counter()
    with (
        tempfile.TemporaryDirectory() as tmp,
        running(ENGINE_CMD, ready_line=True, timeout_s=30) as engine,
        app_process(engine.url, Path(tmp)) as (url, pid),
    ):
        run = asyncio.run(drive(url, pid, engine.pid, turns, ways))
        if api == "openai":  # what the app's engine reader and router cost, same run
            run["costs"] = {
                "engine_reader": asyncio.run(reader_costs(engine.url)),
                "router": router_costs(),
            }
        db = Path(tmp) / "assistant.db"
        checked = {
            way: stored_check(db, r["alone"] + r["loaded"]) for way, r in run["ways"].items()
        }
    return report(run, checked, turns, time.perf_counter() - started, api)


def way_report(run: dict[str, Any], checked: dict[str, Any], turns: int, way: str) -> dict:
    alone_m, loaded_m, jobs_m = run["meters"]
    idle = run["idle_cpu_ms_per_s"]
    alone = {**summary(run["alone"], alone_m, idle), "sessions_at_once": 1}
    loaded = summary(run["loaded"], loaded_m, idle)
    for part, meter in ((alone, alone_m), (loaded, loaded_m)):
        part["loop_lag"] = meter.get("loop_lag")
        if "worker_cpu_ms" in meter:
            part["worker_cpu_ms"] = round(meter["worker_cpu_ms"], 1)
    alone_p95, loaded_p95 = alone["latency_ms"]["p95"], loaded["latency_ms"]["p95"]
    limit = 2 * alone_p95 + 200
    sessions = run["alone"] + run["loaded"]
    errors = [e for s in sessions for e in s["errors"]]
    expected = ALONE_TURNS + SESSIONS * turns
    states = [run["jobs"].get(i, {}).get("state", "missing") for i in run["job_ids"]]
    states += ["not submitted"] * len(run["job_submit_errors"])
    complete = not errors and checked["turns_lost"] == 0 and checked["turns_stored"] == expected
    cpu = alone.get("app_cpu_ms_per_typed_turn", {"n": 0, "p50": None})
    cpu_limit = CPU_TARGET_MS[way]
    return {
        "alone": alone,
        # the loaded phase's app CPU includes the deep jobs' work that overlapped it
        "loaded": {
            **loaded,
            "sessions_at_once": SESSIONS,
            "turns_per_session": turns,
            "jobs": JOBS,
        },
        "target": {
            "alone_p95_ms": alone_p95,
            "loaded_p95_ms": loaded_p95,
            "n": {"alone": alone["latency_ms"]["n"], "loaded": loaded["latency_ms"]["n"]},
            "limit_ms": round(limit, 1),
            "rule": "loaded p95 <= 2 x alone p95 + 200 ms, no error, every turn stored",
            "ok": loaded_p95 <= limit and complete,
        },
        "cpu_target": {
            "app_cpu_ms_per_typed_turn_p50": cpu["p50"],
            "n": cpu["n"],
            "limit_ms": cpu_limit,
            "rule": f"p50 over batches of {CPU_BATCH} turns alone <= {cpu_limit:g} ms, no error",
            "ok": cpu["p50"] is not None and cpu["p50"] <= cpu_limit and not errors,
        },
        "app_idle_cpu_ms_per_s": round(idle, 1),
        "jobs_wait": {
            "app_cpu_ms": round(jobs_m["app_cpu_ms"], 1),
            "wall_s": round(jobs_m["wall_s"], 1),
        },
        "warmup_errors": run["warm"]["errors"][:3],
        "chat_ok": sum(s["ok"] for s in sessions),
        "chat_errors": len(errors),
        "error_samples": errors[:5],
        **checked,
        "turns_expected": expected,
        "jobs": JOBS,
        "job_submit_errors": run["job_submit_errors"][:3],
        "jobs_done": states.count("done"),
        "jobs_lost": states.count("missing"),
        "job_states": {s: states.count(s) for s in set(states)},
    }


def report(
    run: dict[str, Any], checked: dict[str, Any], turns: int, wall_s: float, api: str = "gradio"
) -> dict:
    ways = {way: way_report(r, checked[way], turns, way) for way, r in run["ways"].items()}
    main = ways[api]
    rss_start, peak, rss_end = run["rss"]
    return {
        "bench": "load",
        "api": api,
        "engine": {"simulated": True, **ENGINE_CONFIG},
        "sessions": SESSIONS,
        "turns_per_session": turns,
        # the way asked for (`--api`) first; every way measured in this run below
        "target": main["target"],
        "cpu_target": main["cpu_target"],
        "chat_errors": main["chat_errors"],
        "ways": ways,
        **({"costs": run["costs"]} if "costs" in run else {}),
        "wall_s": round(wall_s, 1),
        "app_rss_mb": {"start": round(rss_start), "peak": round(peak), "end": round(rss_end)},
    }
