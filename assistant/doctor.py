"""`assistant doctor`: what the engine really does, checked against the live engine.

Each check is one small request; the report says what was found and what to change.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import asdict, dataclass, replace

import httpx

from assistant.engine.client import Engine
from assistant.errors import AssistantError
from assistant.metrics import parse_engine_metrics
from assistant.records import Message, now_ms
from assistant.runtime import Runtime
from assistant.settings import Settings


@dataclass
class Check:
    name: str
    ok: bool | None
    """None: not applicable or could not tell."""
    detail: str


async def _timed(engine: Engine, lane, messages, **kw) -> tuple[float, object]:
    start = now_ms()
    reply = await engine.complete(messages, lane, **kw)
    return now_ms() - start, reply


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
    probe_lane = replace(s.chat, max_tokens=32, retries=0)

    # priority: a deep-lane priority is rejected unless vLLM runs --scheduling-policy priority
    if engine.profile.priority:
        try:
            await engine.complete(ask, replace(probe_lane, priority=s.deep.priority))
            accepted = engine.priority_ok
        except AssistantError:
            accepted = False
        checks.append(
            Check(
                "priority",
                accepted,
                "request priority accepted"
                if accepted
                else "rejected: start vLLM with --scheduling-policy priority (the app keeps "
                "its own lanes meanwhile)",
            )
        )
    else:
        checks.append(
            Check(
                "priority",
                None,
                f"{engine.kind} has no request priority (FIFO); "
                "the app's lane scheduler keeps chat first",
            )
        )

    try:
        think_ms, thought = await _timed(
            engine, replace(s.deep, max_tokens=256, retries=0), ask, thinking=True
        )
        plain_ms, plain = await _timed(engine, probe_lane, ask, thinking=False)
    except AssistantError as e:
        checks.append(Check("requests", False, str(e)))
        return checks
    has_field = bool(thought.reasoning)  # type: ignore[attr-defined]
    checks.append(
        Check(
            "reasoning field",
            has_field if engine.profile.thinking_switch else None,
            "reasoning arrives in its own field (reasoning / reasoning_content)"
            if has_field
            else "no separate reasoning seen; for vLLM start it with a --reasoning-parser",
        )
    )
    leaked = bool(plain.reasoning)  # type: ignore[attr-defined]
    checks.append(
        Check(
            "thinking off",
            (not leaked) if engine.profile.thinking_switch else None,
            "thinking switches off for the chat lane"
            if not leaked
            else "reasoning still came back with enable_thinking=false",
        )
    )
    checks.append(
        Check(
            "latency",
            True,
            f"chat lane (low effort, thinking off) {plain_ms:.0f} ms; "
            f"high effort with thinking {think_ms:.0f} ms",
        )
    )
    checks.append(await _prefix_check(rt, probe_lane))
    return checks


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
        return Check("prefix cache", None, "no prefix-cache queries counted")
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


def run_doctor(settings: Settings, *, as_json: bool = False) -> int:
    with Runtime(settings) as rt:
        checks = asyncio.run(_checks(rt))
        notice = rt.notice
    if as_json:
        sys.stdout.write(json.dumps({"checks": [asdict(c) for c in checks]}) + "\n")
    else:
        if notice:
            print(notice)
        for c in checks:
            mark = {True: "ok  ", False: "FAIL", None: "--  "}[c.ok]
            print(f"[{mark}] {c.name}: {c.detail}")
    return 0 if checks[0].ok else 1
