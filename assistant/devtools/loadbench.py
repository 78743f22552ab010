"""`assistant bench load`: the app under many sessions, measured by a client that costs little.

One run: the simulated engine (64 slots, 30-token replies at 10 ms a token: ~0.3 s of engine
time a turn) and the app, each its own process; a warm-up; one user alone for ALONE_TURNS
turns (conversations of `rounds` turns, one after another); then SESSIONS sessions x `rounds`
turns (default 3) at once, with JOBS deep jobs submitted as that phase starts. The client is
one asyncio loop speaking Gradio's REST call API over httpx (POST /gradio_api/call/<api> for
an event id, then its SSE result from /gradio_api/call/<api>/<event_id>): no gradio_client,
no thread per session, so the machine's cores go to the app; each session keeps one Gradio
session hash, as a page does. Around each phase (and each batch of CPU_BATCH turns alone) the
app's CPU time, utime+stime from /proc/<pid>/stat, is read: app CPU per turn with the
engine's time excluded (the engine is another process, read too), beside what the app burns
idle over the same time. Also: errors, turns or jobs lost, the app's memory, the store's
integrity. Targets: the loaded p95 at most 2 x the alone p95 + 200 ms; app CPU per typed turn
alone, p50 over the batches, at most 10 ms.
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
CPU_TARGET_MS = 10.0
WARMUP_TURNS = 3
JOBS = 20
ENGINE = ("--slots", "64", "--token-ms", "10", "--answer-words", "30")
ENGINE_CMD = [sys.executable, "-m", "assistant.devtools.simengine", "--port", "0", *ENGINE]
"""As `launcher.simulated_engine` starts it, kept as a process here: its CPU is read too."""
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


async def session(
    http: httpx.AsyncClient,
    index: int,
    turns: int,
    cpu_pid: int | None = None,
    marks: list[float] | None = None,
) -> dict[str, Any]:
    """One user's turns in one conversation; records each turn whose call returned, and (with
    `cpu_pid`) appends the app's CPU time after each turn to `marks`."""
    latencies: list[float] = []
    stages: list[dict[str, float]] = []
    marks = [] if marks is None else marks
    errors: list[str] = []
    returned: list[tuple[str, str]] = []
    cid, ok, hash_ = "", 0, uuid.uuid4().hex[:11]
    for t in range(turns):
        text = f"Quick question: what is the capital of France? (user {index}, turn {t})"
        start = time.perf_counter()
        try:
            out = await call(http, "chat", text, cid, False, session=hash_)
        except Exception as e:  # a benchmark counts failures; it does not stop on them
            errors.append(f"{type(e).__name__}: {e}"[:300])
            continue
        finally:
            if cpu_pid:
                marks.append(cpu_ms(cpu_pid))
        latencies.append((time.perf_counter() - start) * 1000)
        cid = out["conversation_id"]
        stages.append(out.get("timings_ms") or {})
        returned.append((cid, text))
        if out.get("error") or not out.get("reply"):
            errors.append(out.get("error") or "empty reply")
        else:
            ok += 1
    return {
        "latencies": latencies,
        "stages": stages,
        "errors": errors,
        "returned": returned,
        "ok": ok,
    }


def per_turn_batches(marks: list[float], batch: int) -> list[float]:
    """App CPU per turn over consecutive batches of `batch` turns, from the CPU readings
    before the first turn and after each (a clock tick is 10 ms: one turn alone is too
    coarse a sample)."""
    return [(marks[i + batch] - marks[i]) / batch for i in range(0, len(marks) - batch, batch)]


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
    batches = per_turn_batches(meter.get("marks", []), CPU_BATCH)
    turns = max(1, len(latencies))
    out = {
        "conversations": len(sessions),
        "turns": len(latencies),
        "p50_ms": round(percentile(latencies, 0.5), 1),
        "p95_ms": round(percentile(latencies, 0.95), 1),
        "max_ms": round(max(latencies, default=0.0), 1),
        "errors": sum(len(s["errors"]) for s in sessions),
        "app_cpu_ms_per_turn": round(meter["app_cpu_ms"] / turns, 1),
        # of which the app would have spent idle over the phase's wall time (its pollers)
        "idle_cpu_ms_per_turn": round(idle * meter["wall_s"] / turns, 1),
        # the rest of the machine's budget: the simulated engine and this client
        "engine_cpu_ms_per_turn": round(meter["engine_cpu_ms"] / turns, 1),
        "client_cpu_ms_per_turn": round(meter["client_cpu_ms"] / turns, 1),
        "wall_s": round(meter["wall_s"], 1),
    }
    # where the time went, as the app saw it (route, lane queue, ttft, ...): p50 / p95
    stages: dict[str, list[float]] = {}
    for s in sessions:
        for t in s["stages"]:
            for k, v in t.items():
                stages.setdefault(k, []).append(v)
    out["app_stages_ms"] = {
        k: [round(percentile(v, 0.5), 1), round(percentile(v, 0.95), 1)] for k, v in stages.items()
    }
    if batches:  # the alone phase: app CPU per turn over each batch of CPU_BATCH turns
        out["app_cpu_ms_per_turn_batches"] = [round(ms, 1) for ms in batches]
        out["app_cpu_ms_per_turn_p50"] = round(percentile(batches, 0.5), 1)
    return out


async def drive(url: str, pid: int, engine_pid: int, turns: int) -> dict[str, Any]:
    """Warm-up, the alone phase, then the loaded phase with the jobs; the jobs' end states."""
    limits = httpx.Limits(max_connections=SESSIONS * 2 + JOBS, max_keepalive_connections=100)
    timeout = httpx.Timeout(CALL_TIMEOUT_S, connect=10.0)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout) as http:
        meter = Meter(pid, engine_pid)
        rss_start = rss_mb(pid)
        warm = await session(http, -1, WARMUP_TURNS)  # first-use costs, not counted
        with contextlib.suppress(CallError, httpx.HTTPError, ValueError):
            await call(http, "jobs", session=ADMIN)
        idle = await settle(pid)
        alone_m: dict[str, Any] = {}
        async with meter.phase(alone_m):
            # one user at a time, in conversations as long as the loaded phase's (a longer
            # history would cost more per turn, and the phases would not compare)
            alone, marks = [], [cpu_ms(pid)]
            for i in range(0, ALONE_TURNS, turns):
                n = min(turns, ALONE_TURNS - i)
                alone.append(await session(http, -2 - i, n, cpu_pid=pid, marks=marks))
        alone_m["marks"] = marks
        loaded_m: dict[str, Any] = {}
        async with meter.phase(loaded_m):
            job_ids, submit_errors = await submit_jobs(http)
            tasks = [session(http, i + 1, turns) for i in range(SESSIONS)]
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
            "rss": (rss_start, meter.peak, rss_mb(pid)),
        }


async def submit_jobs(http: httpx.AsyncClient) -> tuple[list[str], list[str]]:
    """JOBS deep jobs, each with its own idempotency key: their ids, and any refusals."""
    ids: list[str] = []
    errors: list[str] = []
    for i in range(JOBS):
        try:
            job = await call(http, "delegate", f"deep task {i}", f"load-{i}", session=ADMIN)
            ids.append(job["id"])
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


def bench_load(settings: Settings, rounds: int | None) -> dict:
    turns = rounds or TURNS
    started = time.perf_counter()
    with (
        tempfile.TemporaryDirectory() as tmp,
        running(ENGINE_CMD, ready_line=True, timeout_s=30) as engine,
        app_process(engine.url, Path(tmp)) as (url, pid),
    ):
        run = asyncio.run(drive(url, pid, engine.pid, turns))
        checked = stored_check(Path(tmp) / "assistant.db", run["alone"] + run["loaded"])
    return report(run, checked, turns, time.perf_counter() - started)


def report(run: dict[str, Any], checked: dict[str, Any], turns: int, wall_s: float) -> dict:
    alone_m, loaded_m, jobs_m = run["meters"]
    idle = run["idle_cpu_ms_per_s"]
    alone = {**summary(run["alone"], alone_m, idle), "sessions_at_once": 1}
    loaded = summary(run["loaded"], loaded_m, idle)
    limit = 2 * alone["p95_ms"] + 200
    sessions = run["alone"] + run["loaded"]
    errors = [e for s in sessions for e in s["errors"]]
    states = [run["jobs"].get(i, {}).get("state", "missing") for i in run["job_ids"]]
    states += ["not submitted"] * len(run["job_submit_errors"])
    rss_start, peak, rss_end = run["rss"]
    return {
        "bench": "load",
        "engine": {"slots": 64, "token_ms": 10, "answer_tokens": 30},
        "alone": alone,
        # the loaded phase's app CPU includes the deep jobs' work that overlapped it
        "loaded": {
            **loaded,
            "sessions_at_once": SESSIONS,
            "turns_per_session": turns,
            "jobs": JOBS,
        },
        "target": {
            "loaded_p95_ms": loaded["p95_ms"],
            "limit_ms": round(limit, 1),
            "rule": "loaded p95 <= 2 x alone p95 + 200 ms",
            "ok": loaded["p95_ms"] <= limit,
        },
        "cpu_target": {
            "app_cpu_ms_per_typed_turn_p50": alone.get("app_cpu_ms_per_turn_p50"),
            "limit_ms": CPU_TARGET_MS,
            "rule": f"p50 over batches of {CPU_BATCH} turns alone <= {CPU_TARGET_MS:g} ms",
            "ok": alone.get("app_cpu_ms_per_turn_p50", 1e9) <= CPU_TARGET_MS,
        },
        # today's figures, under their old names (the loaded phase)
        "sessions": SESSIONS,
        "turns_per_session": turns,
        "chat_latency_p50_ms": loaded["p50_ms"],
        "chat_latency_p95_ms": loaded["p95_ms"],
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
        "turns_expected": ALONE_TURNS + SESSIONS * turns,
        "jobs": JOBS,
        "job_submit_errors": run["job_submit_errors"][:3],
        "jobs_done": states.count("done"),
        "jobs_lost": states.count("missing"),
        "job_states": {s: states.count(s) for s in set(states)},
        "wall_s": round(wall_s, 1),
        "app_rss_mb": {"start": round(rss_start), "peak": round(peak), "end": round(rss_end)},
    }
