"""The chat turn: route, build the prompt, stream on the chosen lane, recover, store.

One turn is an async generator of `TurnUpdate`s so the page can stream it; the CLI folds it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from assistant.engine import INCOMPLETE, Engine
from assistant.errors import AssistantError, BadInput, BudgetExhausted
from assistant.lanes import LaneScheduler
from assistant.prompt import Prompts
from assistant.records import (
    Message,
    Reply,
    RouteDecision,
    Timings,
    TurnResult,
    TurnUpdate,
    now_ms,
)
from assistant.settings import LaneConfig, Settings
from assistant.store import Store

if TYPE_CHECKING:
    from assistant.jobs import JobQueue
    from assistant.router import Router

log = logging.getLogger(__name__)

EXHAUSTED_MESSAGE = (
    "The engine spent its whole reasoning budget and gave no answer, even after a retry "
    "without thinking. Try a shorter question, or delegate it for a bigger budget."
)


def check_text(text: str, limit: int) -> str:
    """The request as the engine will see it, or BadInput with the reason."""
    text = (text or "").strip()
    if not text:
        raise BadInput("the message is empty")
    if len(text) > limit:
        raise BadInput(f"the message is too long ({len(text)} characters; the limit is {limit})")
    return text


class ChatService:
    """Runs chat turns against one engine through the lane scheduler."""

    def __init__(
        self,
        *,
        settings: Settings,
        engine: Engine,
        scheduler: LaneScheduler,
        router: Router,
        store: Store,
        prompts: Prompts,
        jobs: JobQueue | None = None,
        on_finish: Callable[[TurnResult], None] | None = None,
    ):
        self.settings = settings
        self.engine = engine
        self.scheduler = scheduler
        self.router = router
        self.store = store
        self.prompts = prompts
        self.jobs = jobs
        # told of every finished turn, once, with its final timings (the app's metrics)
        self.on_finish = on_finish

    def finished(self, result: TurnResult) -> None:
        """Report a finished turn to `on_finish`; a broken observer never breaks a turn."""
        if self.on_finish is None:
            return
        try:
            self.on_finish(result)
        except Exception:
            log.exception("the turn observer failed")

    def history(self, conversation_id: str | None) -> list[tuple[str, str]]:
        if not conversation_id:
            return []
        return [
            (u, r.reply) for u, r in self.store.turns(conversation_id) if r.reply and not r.error
        ]

    async def turn(
        self,
        text: str,
        *,
        owner: str = "local",
        conversation_id: str | None = None,
        force_deep: bool = False,
        deep_inline: bool = False,
        source: str = "text",
        timings: Timings | None = None,
        started_ms: float | None = None,
        report: bool = True,
    ) -> AsyncIterator[TurnUpdate]:
        """One turn. A deep decision becomes a job unless `deep_inline` (the CLI waits instead).

        `report=False`: the caller calls `finished` itself, later (a spoken turn's timings
        are complete only once its speech has ended)."""
        text = check_text(text, self.settings.max_text_chars)
        timings = timings or Timings()
        start = started_ms if started_ms is not None else now_ms()
        t0 = now_ms()
        # the classifier is CPU work (an encoder pass): off the event loop, like STT and TTS
        decision = await asyncio.to_thread(self.router.decide, text, explicit=force_deep)
        timings.route = now_ms() - t0
        yield TurnUpdate("route", decision=decision)
        result: TurnResult
        if decision.lane == "deep" and not deep_inline and self.jobs is not None:
            result = self._delegate(owner, decision, text, conversation_id, timings)
        else:
            lane = self.settings.deep if decision.lane == "deep" else self.settings.chat
            result = TurnResult("", decision.lane, decision.reason, None, timings)
            async for update in self._run(text, lane, decision, conversation_id, result):
                yield update
            if result.delegate_requested and self.jobs is not None:
                handoff = self._delegate(owner, decision, text, conversation_id, timings)
                result.job_id, result.reason = handoff.job_id, "model asked to delegate"
                result.lane = "deep"
                result.reply = (result.reply.strip() + "\n\n" + handoff.reply).strip()
        timings.total = now_ms() - start
        if conversation_id:
            result.turn_id = self.store.add_turn(conversation_id, text, result, source=source)
        if report:
            self.finished(result)
        yield TurnUpdate("done", result=result)

    def _delegate(
        self,
        owner: str,
        decision: RouteDecision,
        text: str,
        conversation_id: str | None,
        timings: Timings,
    ) -> TurnResult:
        assert self.jobs is not None
        job = self.jobs.submit(owner, decision.text or text, conversation_id=conversation_id)
        reply = f"Handed off to the deep lane as job {job.id}; I'll tell you when it's done."
        return TurnResult(reply, "deep", decision.reason, "delegated", timings, job_id=job.id)

    async def _run(
        self,
        text: str,
        lane: LaneConfig,
        decision: RouteDecision,
        conversation_id: str | None,
        result: TurnResult,
    ) -> AsyncIterator[TurnUpdate]:
        messages = self.prompts.chat(self.history(conversation_id), text, lane.history_tokens)
        if lane.name == "deep":
            messages = self.prompts.deep(decision.text or text)
        tools = None
        if lane.name == "chat" and self.engine.kind in ("vllm", "openai"):
            from assistant.router import DELEGATE_TOOL

            tools = [DELEGATE_TOOL]
        reply = Reply()
        try:
            async for update in self._attempt(messages, lane, result, reply, tools=tools):
                yield update
            if reply.exhausted and lane.name == "chat":
                # the budget went on reasoning: once more with thinking off, never more
                reply = Reply()
                async for update in self._attempt(messages, lane, result, reply, thinking=False):
                    yield update
        except AssistantError as e:
            result.error = str(e)
            result.reply = reply.content
            result.incomplete = bool(reply.content)
            return
        result.delegate_requested = reply.delegate_requested
        result.reply = reply.content
        result.reasoning = reply.reasoning
        result.finish_reason = reply.finish_reason
        result.incomplete = reply.incomplete
        result.tokens = reply.content_tokens + reply.reasoning_tokens
        result.tokens_per_s = reply.tokens_per_s
        if reply.exhausted:
            result.exhausted = True
            result.error = (
                EXHAUSTED_MESSAGE
                if lane.name == "chat"
                else ("the deep lane's budget ran out in reasoning before an answer")
            )
        elif reply.incomplete:
            result.error = {
                "crashed": f"{reply.note}; "
                + ("the answer above is incomplete" if reply.content else "please ask again"),
                "cut": "the connection to the engine broke; the answer above is incomplete",
                "interrupted": "the engine stopped this answer early to serve another "
                "request; the answer above is incomplete",
                "stalled": f"the engine stopped sending for {lane.read_timeout_s:.0f}s; "
                "the answer above is incomplete",
                "timeout": "the turn ran past its deadline; the answer above is incomplete",
            }[reply.finish_reason or "cut"]

    async def _attempt(
        self,
        messages: list[Message],
        lane: LaneConfig,
        result: TurnResult,
        reply: Reply,
        **kw: object,
    ) -> AsyncIterator[TurnUpdate]:
        """One engine request under a lane ticket, folding into `reply` as it streams."""
        timings = result.timings
        async with self.scheduler.admit(lane.name) as ticket:  # type: ignore[arg-type]
            timings.queue = (timings.queue or 0.0) + ticket.queue_ms
            sent = now_ms()
            first: float | None = None
            events = self.engine.stream(messages, lane, **kw)  # type: ignore[arg-type]
            try:
                async for ev in events:
                    if ev.kind in ("reasoning", "content") and first is None:
                        first = now_ms()
                        timings.ttft = first - sent
                    if ev.kind == "reasoning":
                        reply.reasoning += ev.text
                        reply.reasoning_tokens += 1
                        yield TurnUpdate("reasoning", text=ev.text)
                    elif ev.kind == "content":
                        reply.content += ev.text
                        reply.content_tokens += 1
                        yield TurnUpdate("content", text=ev.text)
                    elif ev.kind == "tool_call":
                        reply.delegate_requested |= json.loads(ev.text).get("name") == "delegate"
                    elif ev.kind == "finish":
                        reply.finish_reason = ev.finish_reason
                        reply.incomplete = ev.finish_reason in INCOMPLETE
                        reply.note = ev.text
            finally:
                await events.aclose()
            timings.llm_total = now_ms() - sent
            tokens = reply.content_tokens + reply.reasoning_tokens
            if first is not None and tokens > 1:
                elapsed = (now_ms() - first) / 1000
                reply.tokens_per_s = round((tokens - 1) / elapsed, 2) if elapsed > 0 else None
            self.scheduler.record(lane.name, timings.ttft, reply.tokens_per_s)  # type: ignore[arg-type]

    async def run(self, text: str, **kw: object) -> TurnResult:
        """A whole turn, for callers that do not stream."""
        result: TurnResult | None = None
        async for update in self.turn(text, **kw):  # type: ignore[arg-type]
            if update.kind == "done":
                result = update.result
        assert result is not None
        return result


def raise_for(result: TurnResult) -> None:
    """CLI semantics: an exhausted budget is exit code 3."""
    if result.exhausted:
        raise BudgetExhausted(result.error or EXHAUSTED_MESSAGE)
