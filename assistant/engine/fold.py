"""The one fold from engine stream events to a `Reply`, for chat turns and jobs alike.

Tokens come from the engine's `usage` where it reports it (vLLM, OpenAI), else one per event;
tool calls are parsed defensively (an engine may send broken JSON arguments).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator

from assistant.records import INCOMPLETE, Reply, StreamEvent, now_ms


class Fold:
    """Folds events into `reply` (a fresh one, or a preempted answer being continued)."""

    def __init__(self, reply: Reply | None = None):
        self.reply = reply if reply is not None else Reply()
        self.sent_ms = now_ms()
        self.first_ms: float | None = None
        self.usage_tokens = 0
        self._counted = 0  # tokens this fold counted itself, one per event

    def add(self, ev: StreamEvent) -> None:
        reply = self.reply
        if ev.kind in ("reasoning", "content"):
            if self.first_ms is None:
                self.first_ms = now_ms()
            self._counted += ev.tokens
        if ev.kind == "reasoning":
            reply.reasoning += ev.text
            reply.reasoning_tokens += ev.tokens
        elif ev.kind == "content":
            reply.content += ev.text
            reply.content_tokens += ev.tokens
        elif ev.kind == "tool_call":
            reply.delegate_requested |= is_delegate(ev.text)
        elif ev.kind == "usage":
            self.usage_tokens = ev.tokens
        elif ev.kind == "finish":
            reply.finish_reason = ev.finish_reason
            reply.incomplete = ev.finish_reason in INCOMPLETE
            reply.note = ev.text
            self._rate()

    @property
    def ttft_ms(self) -> float | None:
        return None if self.first_ms is None else self.first_ms - self.sent_ms

    @property
    def tokens(self) -> int:
        """Tokens generated in this request: the engine's count where it gave one."""
        return self.usage_tokens or self._counted

    def _rate(self) -> None:
        tokens = self.tokens
        if self.first_ms is not None and tokens > 1:
            elapsed = (now_ms() - self.first_ms) / 1000.0
            self.reply.tokens_per_s = round((tokens - 1) / elapsed, 2) if elapsed > 0 else None


async def folded(events: AsyncIterator[StreamEvent], fold: Fold) -> AsyncIterator[StreamEvent]:
    """The engine stage of turns and jobs alike: `events` passed on, each folded into
    `fold.reply` first; the engine stream is closed when this ends or is closed."""
    try:
        async for ev in events:
            fold.add(ev)
            yield ev
    finally:
        await events.aclose()  # type: ignore[attr-defined]


def is_delegate(raw: str) -> bool:
    """Whether a tool call (as JSON text) is the `delegate` tool."""
    try:
        call = json.loads(raw)
    except ValueError:
        return False
    return isinstance(call, dict) and call.get("name") == "delegate"


async def collect(events: AsyncIterator[StreamEvent]) -> Reply:
    """Run a stream to its end and fold it into a Reply."""
    fold = Fold()
    async with contextlib.aclosing(folded(events, fold)) as stream:
        async for _ in stream:
            pass
    return fold.reply
