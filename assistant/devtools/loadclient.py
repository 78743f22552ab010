"""The load bench's client: calls through Gradio's REST API and the OpenAI endpoint, sessions,
CPU and memory readings from /proc, and the summaries (used by `devtools.loadbench`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

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
        # the hand-off, not the answer: the jobs run while the sessions are measured
        ask = [{"role": "user", "content": f"Delegate: {text}"}]
        out = await completion(http, ask, handoff=True)
        if not out.get("job_id"):
            raise CallError(f"no job: {out.get('reply')!r}")
        return str(out["job_id"])


CLIENTS: dict[str, type[Gradio] | type[OpenAI]] = {"gradio": Gradio, "openai": OpenAI}


async def completion(
    http: httpx.AsyncClient, messages: list[dict[str, str]], handoff: bool = False
) -> dict[str, Any]:
    """One streamed chat completion, read line by line: {"reply", "conversation_id",
    "timings_ms", "error", "job_id"} from the content deltas and the final chunk's extra
    field; CallError for an HTTP error, an error event or a stream without its end."""
    body: dict[str, Any] = {"model": "assistant", "messages": messages, "stream": True}
    if handoff:
        body["wait"] = False
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


def children(pid: int) -> list[int]:
    """The process's direct children (the embedded engine), from /proc."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


def named_children(pid: int) -> dict[str, list[int]]:
    """The app's children by what they run: the job worker and the embedded engines (one per
    lane when the lanes run apart: a single "engine" read only the last, the idle one)."""
    named: dict[str, list[int]] = {}
    for child in children(pid):
        try:
            cmd = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        kind = "worker" if " worker" in cmd and "assistant" in cmd else "engine"
        named.setdefault(kind, []).append(child)
    return named


def group_cpu_ms(pids: list[int]) -> float:
    """CPU the processes have used so far, together (`cpu_ms`); one that ended counts 0."""
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            total += cpu_ms(pid)
    return total


def lag_histogram(text: str) -> dict[float, float]:
    """The app's `assistant_event_loop_lag_seconds` buckets (upper bound in s: count)."""
    from prometheus_client.parser import text_string_to_metric_families

    return {
        float(sample.labels["le"]): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "assistant_event_loop_lag_seconds_bucket"
    }


def lag_between(before: dict[float, float], after: dict[float, float]) -> dict[str, Any]:
    """The loop lag samples taken between two readings: n, and p50/p95/max as bucket upper
    bounds in ms (a histogram keeps no more than that)."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]  # cumulative
    n = counts[-1] if counts else 0.0

    def upper(q: float) -> float | None:
        for bound, c in zip(bounds, counts, strict=True):
            if n and c >= q * n:
                return bound * 1000 if bound != float("inf") else None
        return None

    top = next((b for b, c in zip(bounds, counts, strict=True) if c >= n), None) if n else None
    return {
        "n": int(n),
        "p50_ms_at_most": upper(0.5),
        "p95_ms_at_most": upper(0.95),
        "max_ms_at_most": top * 1000 if top not in (None, float("inf")) else None,
    }


class Meter:
    """The app's CPU (its web process and its job worker; our own too) across a phase, its
    event loop's lag (from its /metrics), and its peak RSS sampled meanwhile."""

    def __init__(self, pid: int, engine_pid: int, http: httpx.AsyncClient | None = None) -> None:
        self.pid, self.engine_pid, self.peak = pid, engine_pid, rss_mb(pid)
        self.http = http
        self.worker_pid = next(iter(named_children(pid).get("worker", [])), None)

    async def lag(self) -> dict[float, float]:
        if self.http is None:
            return {}
        with contextlib.suppress(httpx.HTTPError, ValueError):
            return lag_histogram((await self.http.get("/metrics")).text)
        return {}

    async def sample_rss(self) -> None:
        while True:
            self.peak = max(self.peak, rss_mb(self.pid))
            await asyncio.sleep(0.5)

    @contextlib.asynccontextmanager
    async def phase(self, out: dict[str, Any]) -> Any:
        app0, own0, wall0 = cpu_ms(self.pid), time.process_time(), time.perf_counter()
        engine0 = cpu_ms(self.engine_pid)
        worker0 = cpu_ms(self.worker_pid) if self.worker_pid else 0.0
        lag0 = await self.lag()
        sampler = asyncio.create_task(self.sample_rss())
        try:
            yield
        finally:
            sampler.cancel()
            out["loop_lag"] = lag_between(lag0, await self.lag())
            if self.worker_pid:
                out["worker_cpu_ms"] = cpu_ms(self.worker_pid) - worker0
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
