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
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from assistant.devtools.launcher import running
from assistant.engine.embedded import free_port
from assistant.settings import Settings
from assistant.stats import percentile

SESSIONS = 40
TURNS = 3
ALONE_TURNS = 20
CPU_BATCH = 5
CPU_TARGET_MS = {"gradio": 10.0, "openai": 15.0}
"""App CPU per typed turn alone, p50, per way in (the OpenAI endpoint's is issue 22's)."""
WARMUP_TURNS = 3
JOBS = 20
ENGINE_CONFIG = {"slots": 64, "token_ms": 10, "answer_words": 30}
"""The simulated engine's settings: its command line and the report are both made from it."""
ENGINE = tuple(a for k, v in ENGINE_CONFIG.items() for a in (f"--{k.replace('_', '-')}", str(v)))
ENGINE_CMD = [sys.executable, "-m", "assistant.devtools.simengine", "--port", "0", *ENGINE]
"""As `launcher.simulated_engine` starts it, kept as a process here: its CPU is read too."""
WAYS = {"gradio": ("gradio",), "openai": ("gradio", "openai")}
"""The ways in each `--api` runs: the OpenAI endpoint is measured beside the Gradio path."""
TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")
CALL_TIMEOUT_S = 120.0
IDLE_MS = 250.0
IDLE_WINDOW_S = 3.0
ADMIN = uuid.uuid4().hex[:11]
"""The session hash of the bench's own calls (jobs)."""


class CallError(Exception):
    """An endpoint call that gave no result: an HTTP error, an error event, a cut stream."""


def cpu_ms(pid: int) -> float:
    """CPU the process has used so far (all its threads): utime + stime, in ms."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat.rpartition(")")[2].split()  # the name may hold spaces; fields 3.. follow it
    return (int(fields[11]) + int(fields[12])) * TICK_MS


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def sse_result(lines: list[str]) -> Any:
    """The outputs of a finished call from its SSE lines (`event: complete`, `data: [...]`);
    CallError for an error event or a stream that ended without a result."""
    event = ""
    for line in lines:
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:") and event in ("complete", "error"):
            data = json.loads(line[5:].strip() or "null")
            if event == "error":
                raise CallError(f"error event: {data}" if data else "error event")
            return data
    raise CallError(f"the stream ended without a result (last event {event or 'none'})")


async def call(http: httpx.AsyncClient, api: str, *data: Any, session: str | None = None) -> Any:
    """One named endpoint call; its first output. `session`: a Gradio session hash, kept
    across a user's calls as the page and gradio_client do (each new one costs the app a
    fresh session state)."""
    body = {"data": list(data), "session_hash": session}
    posted = await http.post(f"gradio_api/call/{api}", json=body)
    if posted.status_code != 200:
        raise CallError(f"POST {api}: HTTP {posted.status_code} {posted.text[:200]}")
    event_id = posted.json()["event_id"]
    lines: list[str] = []
    final = False
    async with http.stream("GET", f"gradio_api/call/{api}/{event_id}") as r:
        if r.status_code != 200:
            raise CallError(f"GET {api}: HTTP {r.status_code}")
        async for line in r.aiter_lines():
            lines.append(line)
            if line.startswith("event:"):
                final = line[6:].strip() in ("complete", "error")
            elif final and line.startswith("data:"):
                break  # the result is in: no need to wait for the server to close
    out = sse_result(lines)
    return out[0] if isinstance(out, list) and out else out


class Gradio:
    """Turns through Gradio's call API, as `gradio_client` (and the bench before) drive it."""

    name = "gradio"

    def __init__(self, fresh: bool = False) -> None:
        self.hash = uuid.uuid4().hex[:11]
        self.cid = ""
        self.fresh = fresh
        """A new Gradio session for every call, as clients that keep none do (the soak)."""

    async def turn(self, http: httpx.AsyncClient, text: str) -> dict[str, Any]:
        if self.fresh:
            self.hash = uuid.uuid4().hex[:11]
        out = await call(http, "chat", text, self.cid, False, session=self.hash)
        self.cid = out["conversation_id"]
        return out

    @staticmethod
    async def delegate(http: httpx.AsyncClient, text: str, key: str) -> str:
        return (await call(http, "delegate", text, key, session=ADMIN))["id"]


class OpenAI:
    """Turns through `/v1/chat/completions`, streamed, each with the whole history so far."""

    name = "openai"

    def __init__(self, fresh: bool = False) -> None:
        self.messages: list[dict[str, str]] = []

    async def turn(self, http: httpx.AsyncClient, text: str) -> dict[str, Any]:
        self.messages.append({"role": "user", "content": text})
        out = await completion(http, self.messages)
        self.messages.append({"role": "assistant", "content": out["reply"]})
        return out

    @staticmethod
    async def delegate(http: httpx.AsyncClient, text: str, key: str) -> str:
        out = await completion(http, [{"role": "user", "content": f"Delegate: {text}"}])
        if not out.get("job_id"):
            raise CallError(f"no job: {out.get('reply')!r}")
        return str(out["job_id"])


CLIENTS: dict[str, type[Gradio] | type[OpenAI]] = {"gradio": Gradio, "openai": OpenAI}


async def completion(http: httpx.AsyncClient, messages: list[dict[str, str]]) -> dict[str, Any]:
    """One streamed chat completion, read line by line: {"reply", "conversation_id",
    "timings_ms", "error", "job_id"} from the content deltas and the final chunk's extra
    field; CallError for an HTTP error, an error event or a stream without its end."""
    body = {"model": "assistant", "messages": messages, "stream": True}
    reply: list[str] = []
    extra: dict[str, Any] | None = None
    async with http.stream("POST", "v1/chat/completions", json=body) as r:
        if r.status_code != 200:
            await r.aread()
            raise CallError(f"POST v1/chat/completions: HTTP {r.status_code} {r.text[:200]}")
        async for line in r.aiter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            if "error" in chunk:
                raise CallError(f"error event: {chunk['error']}")
            for choice in chunk.get("choices") or []:
                reply.append((choice.get("delta") or {}).get("content") or "")
            extra = chunk.get("assistant") or extra
    if extra is None:
        raise CallError("the stream ended without its final chunk")
    return {**extra, "reply": "".join(reply)}


async def session(
    http: httpx.AsyncClient,
    way: str,
    index: int,
    turns: int,
    cpu_pid: int | None = None,
    marks: list[tuple[float, bool]] | None = None,
    fresh: bool = False,
) -> dict[str, Any]:
    """One user's turns in one conversation through `way`; records every turn's latency
    (failed ones too), and (with `cpu_pid`) appends the app's CPU time after each turn and
    whether it was answered to `marks`."""
    latencies: list[float] = []
    stages: list[dict[str, float]] = []
    marks = [] if marks is None else marks
    errors: list[str] = []
    returned: list[tuple[str, str]] = []
    ok = 0
    client = CLIENTS[way](fresh)
    for t in range(turns):
        text = f"Quick question: what is the capital of France? (user {index}, turn {t})"
        start = time.perf_counter()
        answered = False
        try:
            out = await client.turn(http, text)
            returned.append((out["conversation_id"], text))
            stages.append(out.get("timings_ms") or {})
            if out.get("error") or not out.get("reply"):
                errors.append(out.get("error") or "empty reply")
            else:
                ok += 1
                answered = True
        except Exception as e:  # a benchmark counts failures; it does not stop on them
            errors.append(f"{type(e).__name__}: {e}"[:300])
        finally:
            # a failed turn is in the percentiles too, with the time it took to fail
            latencies.append((time.perf_counter() - start) * 1000)
            if cpu_pid:
                marks.append((cpu_ms(cpu_pid), answered))
    return {
        "latencies": latencies,
        "stages": stages,
        "errors": errors,
        "returned": returned,
        "ok": ok,
    }


def per_turn_batches(marks: list[tuple[float, bool]], batch: int) -> list[float]:
    """App CPU per answered turn over consecutive batches of `batch` turns, from the CPU
    reading before the first turn and after each, with whether that turn was answered (a
    clock tick is 10 ms: one turn alone is too coarse a sample). A batch with no answered
    turn has no per-turn figure."""
    out = []
    for i in range(0, len(marks) - batch, batch):
        answered = sum(1 for _, ok in marks[i + 1 : i + batch + 1] if ok)
        if answered:
            out.append((marks[i + batch][0] - marks[i][0]) / answered)
    return out


def spread(values: list[float], *qs: float) -> dict[str, float]:
    """Percentiles with their n: {"n", "p50", "p95", ...}."""
    out: dict[str, float] = {"n": len(values)}
    for q in qs:
        out[f"p{round(q * 100)}"] = round(percentile(values, q), 1)
    return out


class Meter:
    """The app's CPU (and our own) across a phase, and its peak RSS sampled meanwhile."""

    def __init__(self, pid: int, engine_pid: int) -> None:
        self.pid, self.engine_pid, self.peak = pid, engine_pid, rss_mb(pid)

    async def sample_rss(self) -> None:
        while True:
            self.peak = max(self.peak, rss_mb(self.pid))
            await asyncio.sleep(0.5)

    @contextlib.asynccontextmanager
    async def phase(self, out: dict[str, Any]) -> Any:
        app0, own0, wall0 = cpu_ms(self.pid), time.process_time(), time.perf_counter()
        engine0 = cpu_ms(self.engine_pid)
        sampler = asyncio.create_task(self.sample_rss())
        try:
            yield
        finally:
            sampler.cancel()
            out["app_cpu_ms"] = cpu_ms(self.pid) - app0
            out["engine_cpu_ms"] = cpu_ms(self.engine_pid) - engine0
            out["client_cpu_ms"] = (time.process_time() - own0) * 1000
            out["wall_s"] = time.perf_counter() - wall0


async def settle(pid: int, budget_s: float = 60.0) -> float:
    """Wait until start-up work (loading the speech models) is over: a 1 s window under
    IDLE_MS of CPU. Then the app's idle CPU, ms per second, over IDLE_WINDOW_S: what it
    spends with nobody asking anything (its pollers), which every phase pays too."""
    deadline = time.monotonic() + budget_s
    while time.monotonic() < deadline:
        before = cpu_ms(pid)
        await asyncio.sleep(1.0)
        if cpu_ms(pid) - before < IDLE_MS:
            break
    before = cpu_ms(pid)
    await asyncio.sleep(IDLE_WINDOW_S)
    return (cpu_ms(pid) - before) / IDLE_WINDOW_S


def summary(sessions: list[dict[str, Any]], meter: dict[str, Any], idle: float) -> dict[str, Any]:
    latencies = [ms for s in sessions for ms in s["latencies"]]
    answered = max(1, sum(s["ok"] for s in sessions))
    out: dict[str, Any] = {
        "conversations": len(sessions),
        "turns": len(latencies),
        "answered": sum(s["ok"] for s in sessions),
        "errors": sum(len(s["errors"]) for s in sessions),
        # every turn, failed ones with the time they took: nothing left out
        "latency_ms": {**spread(latencies, 0.5, 0.95), "max": round(max(latencies, default=0), 1)},
        # per answered turn: a failure costs little and would make the figure look better
        "app_cpu_ms_per_turn": round(meter["app_cpu_ms"] / answered, 1),
        # of which the app would have spent idle over the phase's wall time (its pollers)
        "idle_cpu_ms_per_turn": round(idle * meter["wall_s"] / answered, 1),
        # the rest of the machine's budget: the simulated engine and this client
        "engine_cpu_ms_per_turn": round(meter["engine_cpu_ms"] / answered, 1),
        "client_cpu_ms_per_turn": round(meter["client_cpu_ms"] / answered, 1),
        "wall_s": round(meter["wall_s"], 1),
    }
    # where the time went, as the app saw it (route, lane queue, ttft, ...)
    stages: dict[str, list[float]] = {}
    for s in sessions:
        for t in s["stages"]:
            for k, v in t.items():
                stages.setdefault(k, []).append(v)
    out["app_stages_ms"] = {k: spread(v, 0.5, 0.95) for k, v in stages.items()}
    batches = per_turn_batches(meter.get("marks", []), CPU_BATCH)
    if batches:  # the alone phase: app CPU per turn over each batch of CPU_BATCH turns
        out["app_cpu_ms_per_turn_batches"] = [round(ms, 1) for ms in batches]
        out["app_cpu_ms_per_typed_turn"] = spread(batches, 0.5)
    return out


async def drive(
    url: str, pid: int, engine_pid: int, turns: int, ways: tuple[str, ...] = ("gradio",)
) -> dict[str, Any]:
    """Each way in turn, on the same app; the app's memory across the whole run."""
    limits = httpx.Limits(max_connections=SESSIONS * 2 + JOBS, max_keepalive_connections=100)
    timeout = httpx.Timeout(CALL_TIMEOUT_S, connect=10.0)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout) as http:
        meter = Meter(pid, engine_pid)
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
    config.write_text(f"max_jobs_per_user = {JOBS + 5}\nmax_queue = 512\n")
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
