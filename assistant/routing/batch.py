"""Routing decisions of concurrent turns, taken together.

The classifier's encoder pass is the biggest CPU cost of a typed turn (about 7 ms for a short
request on these cores), and a pass over several requests costs far less than a pass each:
measured 6.7 ms a decision one by one, 3.9 at 8 at once, 3.5 at 16. So turns that need the
classifier wait in one list; a single task runs one pass (off the event loop) over everything
that arrived while the previous pass ran. Alone, a turn pays no wait: its pass starts at once.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from assistant.records import RouteDecision

if TYPE_CHECKING:
    from assistant.routing.conversation import Conversation
    from assistant.routing.router import Router

MAX_BATCH = 16
"""Requests per encoder pass at most (beyond it the saving per request is small)."""
PASSES = 2
"""Encoder passes at once at most: one per core of the machines this runs on (two), so a
burst of turns is not routed one batch after another on a single core."""


@dataclass
class _Waiting:
    router: Router
    text: str
    decided: asyncio.Future[RouteDecision]
    conversation: Conversation | None = None


@dataclass
class RouteBatcher:
    """`await batcher.decide(router, text)`: the router's decision, batched with others'."""

    max_batch: int = MAX_BATCH
    passes: int = PASSES
    _waiting: list[_Waiting] = field(default_factory=list)
    _tasks: set[asyncio.Task] = field(default_factory=set)
    _loop: asyncio.AbstractEventLoop | None = None

    async def decide(
        self,
        router: Router,
        text: str,
        *,
        explicit: bool = False,
        conversation: Conversation | None = None,
    ) -> RouteDecision:
        if explicit:  # no encoder pass
            return router.decide(text, explicit=True)
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new loop (the CLI runs one per command): start afresh
            self._loop, self._waiting, self._tasks = loop, [], set()
        waiting = _Waiting(router, text, loop.create_future(), conversation)
        self._waiting.append(waiting)
        if len(self._tasks) < self.passes:
            task = loop.create_task(self._run(), name="route-batch")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return await waiting.decided

    async def _run(self) -> None:
        while self._waiting:
            router = self._waiting[0].router
            batch = [w for w in self._waiting if w.router is router][: self.max_batch]
            self._waiting = [w for w in self._waiting if w not in batch]
            batch = [w for w in batch if not w.decided.done()]  # a turn stopped meanwhile
            if not batch:
                continue
            try:
                decisions = await asyncio.to_thread(_decide_many, router, batch)
            except Exception as e:  # handed to every turn that waited for it
                for w in batch:
                    if not w.decided.done():
                        w.decided.set_exception(e)
                continue
            for w, decision in zip(batch, decisions, strict=True):
                if not w.decided.done():
                    w.decided.set_result(decision)


def _decide_many(router: Router, batch: list[_Waiting]) -> list[RouteDecision]:
    texts = [w.text for w in batch]
    convs = [w.conversation for w in batch]
    many = getattr(router, "decide_many", None)  # a stand-in router may decide one at a time
    if many is None:
        return [_one(router, w.text, w.conversation) for w in batch]
    # a stand-in router that reads no conversation is given none
    return many(texts, convs) if any(c is not None for c in convs) else many(texts)


def _one(router: Router, text: str, conversation: Conversation | None) -> RouteDecision:
    return router.decide(text, conversation=conversation) if conversation else router.decide(text)
