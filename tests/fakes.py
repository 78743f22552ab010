"""A fake engine for deterministic scheduling tests: a real Engine subclass with scripted output."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from assistant.engine.client import Engine
from assistant.records import Message, StreamEvent
from assistant.settings import LaneConfig


class FakeEngine(Engine):
    """Emits `words` one per `token_s`; a deep request reasons first. Records every request."""

    def __init__(
        self,
        words: int = 20,
        token_s: float = 0.01,
        slots: int | None = 1,
        cut_first_at: int | None = None,
    ):
        super().__init__(client=None, kind="llamacpp", model="fake", slots=slots)  # type: ignore[arg-type]
        self.words = words
        self.cut_first_at = cut_first_at
        self.token_s = token_s
        self.requests: list[tuple[str, list[Message]]] = []
        self.active = 0
        self.max_active = 0
        self.tokens = 0
        """Content tokens yielded so far, over all requests."""

    async def stream(  # type: ignore[override]
        self, messages: list[Message], lane: LaneConfig, **kw: object
    ) -> AsyncIterator[StreamEvent]:
        self.requests.append((lane.name, messages))
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            done = sum(1 for m in messages if m.role == "assistant" and lane.name == "deep")
            start = len(messages[-2].content.split()) if done else 0
            cut = self.cut_first_at if len(self.requests) == 1 else None
            for i in range(start, self.words):
                if i == cut:
                    yield StreamEvent("finish", finish_reason="cut")
                    return
                await asyncio.sleep(self.token_s)
                self.tokens += 1
                yield StreamEvent("content", text=f"w{i} ", tokens=1)
            yield StreamEvent("finish", finish_reason="stop")
        finally:
            self.active -= 1
