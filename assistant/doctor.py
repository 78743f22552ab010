"""`assistant doctor`: what the engine really does, checked against the live engine.

Each check is one small request; the report says what was found and what to change.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
from dataclasses import asdict, dataclass, replace

import httpx

from assistant.datadir import exposure
from assistant.engine.client import Engine
from assistant.engine.fold import Fold, folded
from assistant.engine.ordering import PriorityProbe
from assistant.errors import AssistantError
from assistant.metrics import parse_engine_metrics
from assistant.records import Message, Reply, now_ms
from assistant.runtime import Runtime
from assistant.settings import Settings


@dataclass
class Check:
    name: str
    ok: bool | None
    """None: not applicable or could not tell."""
    detail: str


CHAT_TTFT_OK_MS = 1500.0
"""A chat-lane first token slower than this is not a conversation (the design's chat replies
take 0.6-2.8 s in all on the reference deployment)."""


log = logging.getLogger(__name__)

PRIORITY_TRIES = 2
"""Runs of the priority probe when one cannot tell for a passing reason (a stall)."""
PROBE_READ_S = 15.0
"""The longest the doctor waits for a chunk of one probe."""
SATURATED = (
    "not run: the engine had no free sequence for a first probe, so each would wait as long; "
    "run the doctor again when it is less busy"
)


@dataclass
class Timed:
    """One probe request: total ms, time to first token (ms, None without a token), the
    reply, and how many chunks brought text."""

    total_ms: float
    ttft_ms: float | None
    reply: Reply
    chunks: int


async def _timed(engine: Engine, lane, messages, **kw) -> Timed:
    fold = Fold()
    start = now_ms()
    chunks = 0
    async with contextlib.aclosing(folded(engine.stream(messages, lane, **kw), fold)) as events:
        async for ev in events:
            chunks += ev.kind in ("reasoning", "content")
    return Timed(now_ms() - start, fold.ttft_ms, fold.reply, chunks)


async def _checks(rt: Runtime) -> list[Check]:
    s, engine, info = rt.settings, rt.engine, rt.info
    checks = [
        Check(
            "reachable",
            info.reachable,
            f"{rt.base_url} answers" if info.reachable else f"{rt.base_url}: {info.error}",
        )
    ]
    if not info.reachable:
        return checks
    checks.append(
        Check(
            "model",
            bool(engine.model),
            f"{engine.model} (kind {engine.kind}; "
            f"models: {', '.join(info.models) or 'none listed'})",
        )
    )
    ask = [Message("user", "Say hello in five words.")]
    # bounded probes: a busy or stalled engine is a finding, not a reason to wait minutes
    probe_lane = replace(s.chat, max_tokens=32, retries=0, read_timeout_s=PROBE_READ_S)
    think_lane = replace(
        s.deep, max_tokens=256, retries=0, read_timeout_s=PROBE_READ_S, total_timeout_s=60.0
    )
    try:
        # latency first, on the engine as the user has it: the priority probe below fills the
        # engine itself. The first request warms the engine and tells whether it is saturated;
        # if it gets no token, every later probe would wait as long, so the report ends there
        first = (await _timed(engine, probe_lane, ask, thinking=False)).ttft_ms
        if first is None:
            checks.append(_latency_check(None, None, None))
            checks.append(Check("other checks", None, SATURATED))
            checks.append(sequences_check(rt, None))
            return checks
        plain_probe = await _timed(engine, probe_lane, ask, thinking=False)
        think = await _timed(engine, think_lane, ask, thinking=True)
        plain_ms, plain_ttft, plain = plain_probe.total_ms, plain_probe.ttft_ms, plain_probe.reply
        think_ms, thought = think.total_ms, think.reply
        checks.append(_batching_check(engine, think, think_lane.stream_interval))
        checks.append(await _tools_check(engine, ask, probe_lane))
        priority, seen = await _priority_check(rt)
        checks += [priority, sequences_check(rt, seen)]
    except AssistantError as e:
        checks.append(Check("requests", False, str(e)))
        return checks
    has_field = bool(thought.reasoning)
    checks.append(
        Check(
            "reasoning field",
            has_field if engine.profile.thinking_switch else None,
            "reasoning arrives in its own field (reasoning / reasoning_content)"
            if has_field
            else "no separate reasoning seen; for vLLM start it with a --reasoning-parser",
        )
    )
    leaked = bool(plain.reasoning)
    checks.append(
        Check(
            "thinking off",
            (not leaked) if engine.profile.thinking_switch else None,
            "thinking switches off for the chat lane"
            if not leaked
            else "reasoning still came back with enable_thinking=false",
        )
    )
    checks.append(_latency_check(plain_ms, plain_ttft, think_ms))
    checks.append(await _prefix_check(rt, probe_lane))
    return checks


def _batching_check(engine: Engine, think: Timed, interval: int) -> Check:
    """Whether the deep lane's chunks come batched (vLLM's per-request `stream_interval`): a
    job's thousands of one-token chunks would each cost the worker a parse."""
    name = "batched deep chunks"
    if not engine.profile.batching or interval <= 1:
        return Check(name, None, f"{engine.kind}: the deep lane streams a chunk per token")
    if not engine.batching_ok:
        return Check(name, False, "the engine refused stream_interval (vLLM before 0.32?): "
                     "the deep lane streams a chunk per token")  # fmt: skip
    tokens = think.reply.reasoning_tokens + think.reply.content_tokens
    per_chunk = tokens / think.chunks if think.chunks else 0.0
    return Check(
        name,
        per_chunk > 1.5 or tokens < 2 * interval,
        f"stream_interval {interval} accepted: {tokens} tokens came in {think.chunks} chunks",
    )


async def _tools_check(engine: Engine, ask: list[Message], lane) -> Check:
    """Offer the chat lane's `delegate` tool once: vLLM refuses tools (HTTP 400) unless it runs
    with auto tool choice; the client then sends the request again without them."""
    if engine.kind not in ("vllm", "openai"):
        return Check("tools", None, f"{engine.kind}: the chat lane offers no tools")
    from assistant.routing.router import DELEGATE_TOOL

    await engine.complete(ask, lane, thinking=False, tools=[DELEGATE_TOOL])
    if engine.tools_ok:
        return Check(
            "tools",
            True,
            "the engine accepts tools (auto tool choice on): the model's own delegate step works",
        )
    return Check(
        "tools",
        False,
        "auto tool choice is off: chat turns go without tools and the model's own delegate "
        "step is off (cues and the classifier still route); start vLLM with "
        "--enable-auto-tool-choice --tool-call-parser <parser for your model>",
    )


async def _priority_check(rt: Runtime) -> tuple[Check, int | None]:
    """The priority check, and how many sequences the engine ran when its probe made one wait
    (None where it did not fill the engine)."""
    engine = rt.engine
    if not engine.profile.priority:
        return Check(
            "priority",
            None,
            f"{engine.kind} has no request priority (FIFO); "
            "the app's lane scheduler keeps chat first",
        ), None
    headers = {"Authorization": f"Bearer {rt.settings.api_key}"} if rt.settings.api_key else {}
    async with httpx.AsyncClient(base_url=rt.base_url, headers=headers) as client:
        for attempt in range(PRIORITY_TRIES):
            found = await PriorityProbe(
                client,
                model=engine.model or "",
                metrics_url=rt.base_url.removesuffix("/v1") + "/metrics",
                context=engine.window.size,
            ).run()
            if found.settled:
                break
            # a stall or a moving queue is not an answer: look once more before saying so
            log.info("priority probe inconclusive (%s); try %d", found.detail, attempt + 2)
    return Check("priority", found.honoured, found.detail), found.sequences


ENGINE_NAMES = {"vllm": "vLLM", "llamacpp": "llama.cpp"}
CAP_SETTING = "ASSISTANT_DEEP_MAX_IN_FLIGHT"


def sequences_check(rt: Runtime, seen: int | None) -> Check:
    """How many sequences the engine runs at once (seen by the priority probe, or reported by
    the engine: llama.cpp's `/props`), and the deep cap the app uses beside it: all but one
    keeps a sequence for chat, since vLLM does not preempt at `max_num_seqs`."""
    cap = rt.scheduler.deep_max
    source = (
        f"{CAP_SETTING}={rt.settings.deep_max_in_flight}"
        if rt.settings.deep_max_in_flight
        else "the default"
    )
    engine = ENGINE_NAMES.get(rt.engine.kind, "the engine")
    n = seen or rt.info.slots
    if n is None:
        return Check(
            "deep lane",
            None,
            f"{engine} does not say how many sequences it runs at once; the deep lane may use "
            f"{cap} ({source}; set {CAP_SETTING} to the engine's sequences minus one)",
        )
    how = "" if seen else " (as it reports)"
    plural = "s" if n != 1 else ""
    found = f"{engine} runs {n} sequence{plural} at once{how}; the deep lane may use {cap}"
    best = max(1, n - 1)
    if cap == best:
        keeps = "one is always free for chat" if n > 1 else "a chat turn preempts it"
        return Check("deep lane", True, f"{found} ({source}), so {keeps}")
    if cap < best:
        return Check(
            "deep lane", True, f"{found} ({source}; set {CAP_SETTING}={best} to use all but one)"
        )
    waits = (
        "a chat turn stops a deep request to start"
        if rt.scheduler.slots
        else "a chat turn can wait behind deep requests at the engine (vLLM does not preempt "
        "at max_num_seqs)"
    )
    return Check(
        "deep lane",
        None if rt.scheduler.slots else False,  # stopping deep work for chat is no failure
        f"{found} ({source}), so {waits}; set {CAP_SETTING}={best} to keep one for chat",
    )


def _latency_check(plain_ms: float | None, ttft: float | None, think_ms: float | None) -> Check:
    if plain_ms is None or think_ms is None:
        detail = f"chat lane (low effort, thinking off): no first token within {PROBE_READ_S:.0f} s"
    else:
        detail = (
            "chat lane (low effort, thinking off): first token "
            + (f"{ttft:.0f} ms" if ttft is not None else "never")
            + f", reply {plain_ms:.0f} ms; high effort with thinking {think_ms:.0f} ms"
        )
    ok = ttft is not None and ttft <= CHAT_TTFT_OK_MS
    if not ok:
        detail += (
            f". Over the {CHAT_TTFT_OK_MS:.0f} ms a conversation needs: the engine is busy or "
            "slow (with vLLM, --scheduling-policy priority lets chat overtake queued deep work)"
        )
    return Check("latency", ok, detail)


async def _prefix_check(rt: Runtime, lane) -> Check:
    """Send one long prefix twice and see whether the engine's prefix cache counted a hit."""
    url = rt.base_url.removesuffix("/v1") + "/metrics"
    before = await _metrics(url, rt.settings.api_key)
    prefix = "Reference notes. " + " ".join(f"item {i} is fine." for i in range(150))
    for _ in range(2):
        await rt.engine.complete(
            [Message("system", prefix), Message("user", "Reply with OK.")],
            replace(lane, max_tokens=4),
        )
    after = await _metrics(url, rt.settings.api_key)
    if before is None or after is None or after.prefix_queries is None:
        return Check("prefix cache", None, "the engine exposes no prefix-cache metrics")
    queries = (after.prefix_queries or 0) - (before.prefix_queries or 0)
    hits = (after.prefix_hits or 0) - (before.prefix_hits or 0)
    if queries <= 0:
        # the engine has the counters but looked nothing up: its prefix cache is off
        return Check(
            "prefix cache",
            False,
            "no prefix-cache lookups counted for a repeated prefix: prefix caching looks off "
            "(vLLM: drop --no-enable-prefix-caching); every turn pays the full prefill",
        )
    rate = hits / queries
    return Check(
        "prefix cache",
        rate > 0,
        f"hit rate {rate:.0%} on a repeated prefix"
        + ("" if rate > 0 else ": prefix caching looks off (vLLM: --enable-prefix-caching)"),
    )


async def _metrics(url: str, api_key: str | None):
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        async with httpx.AsyncClient(timeout=3.0) as client:
            r = await client.get(url, headers=headers)
        if r.status_code != 200:
            return None
        return parse_engine_metrics(r.text)
    except httpx.HTTPError:
        return None


def data_dir_check(settings: Settings) -> Check:
    """Whether other users can read the conversations (a warning: the engine's checks
    decide the exit code)."""
    why = exposure(settings.data_dir)
    return Check("data directory", why is None,
                 why or f"{settings.data_dir}: only its user can read it")  # fmt: skip


def run_doctor(settings: Settings, *, as_json: bool = False) -> int:
    from assistant.speech.checkup import speech_checks

    with Runtime(settings) as rt:
        checks = asyncio.run(_checks(rt))
        notice = rt.notice
    # speech after the engine: its servers are the user's too, and fail on their own
    speech = [Check(c.name, c.ok, c.detail) for c in speech_checks(settings)]
    engine_ok = bool(checks[0].ok)
    checks += [*speech, data_dir_check(settings)]
    if as_json:
        sys.stdout.write(json.dumps({"checks": [asdict(c) for c in checks]}) + "\n")
    else:
        if notice:
            print(notice)
        for c in checks:
            mark = {True: "ok  ", False: "FAIL", None: "--  "}[c.ok]
            print(f"[{mark}] {c.name}: {c.detail}")
    return 0 if engine_ok and not any(c.ok is False for c in speech) else 1
