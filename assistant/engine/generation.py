"""One answer generated on a lane: the engine-call loop of chat turns, inline deep turns and
jobs alike.

Each stretch of generation is admitted by the lane scheduler, streamed, filtered (the prompt
guard), and folded into one `Reply`. On the deep lane a stretch that is preempted by a chat
turn, cut, interrupted or stalled is not the end: what it generated is kept, and the answer
asks for the lane again and continues from there (`prompt(partial)` builds the request that
resumes it). So an inline deep turn (`chat --deep`, `/v1` with high effort) yields the slot
of a one-slot engine to a chat turn exactly as a job does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from assistant.engine.client import Engine
from assistant.engine.fold import Fold, folded
from assistant.engine.lanes import LaneScheduler, Ticket
from assistant.engine.window import ContextRefused
from assistant.records import (
    CRASHED,
    CUT,
    INTERRUPTED,
    STALLED,
    TIMED_OUT,
    Message,
    Reply,
    StreamEvent,
)
from assistant.settings import LaneConfig

log = logging.getLogger(__name__)

PREEMPTED = "preempted"
YIELDED = (PREEMPTED, INTERRUPTED)
"""Ends where the answer gave its slot to another request: preempted by the app's lanes, or
interrupted by an engine that serves one request at a time when another reached it."""
RESUMABLE = (*YIELDED, CUT, STALLED, CRASHED)
"""Ends that are not the answer's fault: a job continues from what was generated (after an
engine crash, once the engine is back: opening the next request waits for its restart)."""
MAX_RESUMES = 50
"""Bounded: an engine that cuts every stream cannot keep an answer going forever."""
MIN_SEGMENT_TOKENS = 256
"""A resumed stretch asks for at least this many tokens, even near the budget's end."""

Prompt = Callable[[str], list[Message]]
"""The request for the answer so far: the first one for "", else the one that resumes it."""
Filter = Callable[[AsyncIterator[StreamEvent]], AsyncIterator[StreamEvent]]


class Generation:
    """One answer, folded into `reply` (fresh, or a saved answer being continued).

    `budget`: tokens for the whole answer (each stretch asks for what is left); None leaves
    each request's own `max_tokens` in `options`. `resume_on`: the ends after which the
    answer continues (by default every `RESUMABLE` one on the deep lane, none on the chat
    lane, whose turn reports an incomplete reply instead of a second request); a stretch
    races its ticket's preemption only when `PREEMPTED` is among them. `owner`: the login it is
    for (its turn and its share at the lanes). `deadline_s`: the whole answer's, waits for the
    lane included; past it the answer ends "timeout" with what it has."""

    def __init__(
        self,
        engine: Engine,
        scheduler: LaneScheduler,
        lane: LaneConfig,
        prompt: Prompt,
        reply: Reply | None = None,
        *,
        budget: int | None = None,
        resume_on: tuple[str, ...] | None = None,
        filter: Filter | None = None,
        on_segment: Callable[[str | None], None] | None = None,
        owner: str | None = None,
        deadline_s: float | None = None,
        **options: Any,
    ):
        self.engine = engine
        self.scheduler = scheduler
        self.lane = lane
        self.prompt = prompt
        self.reply = reply if reply is not None else Reply()
        self.budget = budget
        if resume_on is None:
            resume_on = RESUMABLE if lane.name == "deep" else ()
        self.resume_on = resume_on
        self.filter = filter
        self.on_segment = on_segment
        """Called with each stretch's finish reason as it ends, preempted or not (a job saves
        its progress and counts the engine's crashes)."""
        self.owner = owner
        self.deadline_s = deadline_s
        self.options = options
        self.resumes = 0
        self.queue_ms = 0.0
        """Time spent waiting for admission, over all stretches."""
        self.fold: Fold | None = None
        """The latest stretch's fold (its time to first token)."""
        self.sent_ms: float | None = None
        """When the first stretch's request was sent."""
        self.generated = 0
        """Tokens the engine generated for this answer here (its own count where it gave one),
        over every stretch; not those of a saved answer being continued."""
        self.dropped = 0
        """Earlier turns the latest request left out to fit the engine's context window."""

    @property
    def tokens(self) -> int:
        return self.reply.content_tokens + self.reply.reasoning_tokens

    async def events(self) -> AsyncIterator[StreamEvent]:
        """Reasoning and content deltas as they come, over every stretch, then one "finish"
        event with the last stretch's finish reason ("preempted" if it was preempted and
        could not resume). The filter sees the answer whole, not stretch by stretch (a word
        it holds back at a preemption comes out with the next stretch); `reply` folds what
        the engine sent, so a resumed request continues the answer as the model wrote it."""
        stream = self._stretches()
        if self.deadline_s is not None:
            stream = self._until_deadline(stream, self.deadline_s)
        if self.filter is not None:
            stream = self.filter(stream)
        async with contextlib.aclosing(stream) as events:  # type: ignore[type-var]
            async for ev in events:
                yield ev

    async def _stretches(self) -> AsyncIterator[StreamEvent]:
        while True:
            finish: str | None = CUT
            segment = self._segment()
            async with contextlib.aclosing(segment) as events:
                async for ev in events:
                    if ev.kind == "finish":
                        finish = ev.finish_reason
                    else:
                        yield ev
            if self.on_segment is not None:
                self.on_segment(finish)
            if finish in self.resume_on and self.resumes < MAX_RESUMES:
                self.resumes += 1
                # a preemption is counted by the scheduler; an engine's own cut is counted here
                stats = self.scheduler.stats[self.lane.name]  # type: ignore[index]
                stats.preemptions += finish in (CUT, INTERRUPTED)
                log.info("%s: %s after %d tokens; resuming", self.lane.name, finish, self.tokens)
                continue  # keep what it generated; ask for the lane again and continue
            yield StreamEvent("finish", finish_reason=finish, text=self.reply.note)
            return

    async def _segment(self) -> AsyncIterator[StreamEvent]:
        lane = self.lane.name
        async with self.scheduler.admit(lane, self.owner) as ticket:  # type: ignore[arg-type]
            self.queue_ms += ticket.queue_ms
            options = dict(self.options)
            if self.budget is not None:
                options["max_tokens"] = max(MIN_SEGMENT_TOKENS, self.budget - self.tokens)
            self.fold = fold = Fold(self.reply)
            if self.sent_ms is None:
                self.sent_ms = fold.sent_ms
            refits = 1  # an engine that refuses the fitted request for its length: once more
            budget = options.get("max_tokens") or self.lane.max_tokens
            while True:
                request = await self._fitted(options, budget)
                events = folded(self.engine.stream(request, self.lane, **options), fold)
                if PREEMPTED in self.resume_on:
                    events = _until_preempted(events, ticket)
                try:
                    async with contextlib.aclosing(events) as events:
                        async for ev in events:
                            if ev.kind == "finish" and ev.finish_reason == CRASHED:
                                log.warning("%s: %s; the answer resumes", self.lane.name, ev.text)
                            yield ev
                except ContextRefused:
                    if not refits:
                        raise
                    refits -= 1
                    log.info("%s: refused for its length; fitted again", self.lane.name)
                    continue  # the window learnt the engine's count: a tighter fit
                finally:
                    self.generated += fold.tokens
                return

    async def _until_deadline(
        self, events: AsyncIterator[StreamEvent], deadline_s: float
    ) -> AsyncIterator[StreamEvent]:
        """`events` until `deadline_s` from now; then the answer ends "timeout", keeping what
        was folded (an inline deep answer cannot wait for the deep lane, or run, forever)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + deadline_s
        step: asyncio.Future[StreamEvent] | None = None
        try:
            while True:
                step = asyncio.ensure_future(anext(events))  # type: ignore[arg-type]
                done, _ = await asyncio.wait({step}, timeout=max(0.0, deadline - loop.time()))
                if step not in done:  # its admission or its stream let go before the end
                    step.cancel()
                    await asyncio.gather(step, return_exceptions=True)
                    self.reply.finish_reason, self.reply.incomplete = TIMED_OUT, True
                    log.info("%s: past its deadline of %.0f s", self.lane.name, deadline_s)
                    yield StreamEvent("finish", finish_reason=TIMED_OUT)
                    return
                try:
                    ev = step.result()
                except StopAsyncIteration:
                    return
                yield ev
        finally:
            # a step still running (this answer cancelled) is stopped first: a generator
            # cannot be closed while it is being read
            if step is not None and not step.done():
                step.cancel()
                await asyncio.gather(step, return_exceptions=True)
            await events.aclose()  # type: ignore[attr-defined]

    async def _fitted(self, options: dict[str, Any], budget: int) -> list[Message]:
        """The request for the answer so far, fitted to the engine's context window: its oldest
        turns left out as needed (`dropped` counts them), its budget what is left of `budget`."""
        await self.engine.discover(self.lane)
        extra = self.engine.overhead(options.get("tools"))
        fitted = self.engine.window.fit(self.prompt(self.reply.content), budget, extra)
        options["max_tokens"] = fitted.max_tokens
        self.dropped = fitted.dropped
        return fitted.messages


async def _until_preempted(
    events: AsyncIterator[StreamEvent], ticket: Ticket
) -> AsyncIterator[StreamEvent]:
    """`events` until the ticket is preempted (a chat turn needs the slot): then the stream is
    closed at once, even in the middle of the engine's prefill, and a "preempted" finish ends
    it. What was folded so far is kept."""
    preempted = asyncio.ensure_future(ticket.preempted.wait())
    step: asyncio.Future[StreamEvent] | None = None
    try:
        while True:
            step = asyncio.ensure_future(anext(events))  # type: ignore[arg-type]
            done, _ = await asyncio.wait({step, preempted}, return_when=asyncio.FIRST_COMPLETED)
            if step not in done:
                yield StreamEvent("finish", finish_reason=PREEMPTED)
                return
            try:
                ev = step.result()
            except StopAsyncIteration:
                return
            yield ev
            if ev.kind == "finish":  # the stream's last event: a later preemption is too late
                return
    finally:
        # the pending step first (a stream cannot be closed while it is being read), then
        # the stream, whatever ended this: a preemption, the answer's end, a cancellation
        for pending in (step, preempted):
            if pending is not None and not pending.done():
                pending.cancel()
        await asyncio.gather(
            *(f for f in (step, preempted) if f is not None), return_exceptions=True
        )
        await events.aclose()  # type: ignore[attr-defined]
