"""The chat stages of a turn: route, build the prompt, stream on the chosen lane, recover.

`ChatService.turn` is the middle of the turn pipeline (`assistant.turns.pipeline`): text in,
`TurnEvent`s out, ending with a "done" event whose result the pipeline stores and reports.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from assistant.engine.client import Engine
from assistant.engine.generation import YIELDED, Generation
from assistant.engine.lanes import LaneScheduler
from assistant.engine.transcript import resumed
from assistant.errors import AssistantError, ended_early
from assistant.limits import check_text
from assistant.prompting.guard import guarded
from assistant.prompting.history import carried, out_of_view
from assistant.prompting.notes import quoted
from assistant.prompting.prompt import Prompts, job_status
from assistant.records import (
    EXHAUSTED_MESSAGE,
    Message,
    Reply,
    RouteDecision,
    TurnEvent,
    TurnResult,
    now_ms,
)
from assistant.routing.batch import RouteBatcher
from assistant.routing.conversation import Conversation, find_offer, offered_task
from assistant.settings import LaneConfig, Settings
from assistant.store.db import Store
from assistant.turns.job_stream import follow
from assistant.turns.recorder import Recorder

if TYPE_CHECKING:
    from assistant.jobs import JobQueue
    from assistant.routing.router import Router

log = logging.getLogger(__name__)
History = tuple[tuple[str, str], ...] | None
"""The conversation as a client sent it, (request, reply) pairs; None: as stored."""

REASONING_ONLY_MESSAGE = (
    "The engine's whole reply was reasoning (the model never closed its thinking), so no "
    "answer came{again}; its reasoning is kept. Try asking again, or rephrase the question."
)


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
    ):
        self.settings = settings
        self.engine = engine
        self.scheduler = scheduler
        self.router = router
        self.store = store
        self.prompts = prompts
        self.jobs = jobs
        self.batcher = RouteBatcher()

    def history(self, conversation_id: str | None, given: History = None) -> list[tuple[str, str]]:
        """`given` (a client's own history) if there is one, else the stored conversation's;
        replies quoted either way: none passes for the app's note (`prompting.notes`)."""
        if given is not None:
            return [(user, quoted(reply)) for user, reply in given]
        if not conversation_id:
            return []
        return carried(self.store.turns(conversation_id))

    def conversation(
        self, conversation_id: str | None, given: History = None
    ) -> Conversation | None:
        """What the router reads besides the message (issue 30): the last exchanges, the offer
        the last reply made, the lane and task of the last request, and whether a job of this
        conversation runs or has just finished. None: nothing came before."""
        job = self.store.conversation_job(conversation_id) if conversation_id else None
        state = None
        if job is not None and job.state in ("queued", "running"):
            state = "running"
        elif job is not None and job.state == "done" and self.store.clock() - job.updated_at < 600:
            state = "done"  # finished in the last ten minutes: "is it done?" is about it
        if given is not None:  # a client's own history: the offer is read from its text
            pairs = list(given)
            return Conversation.of_exchanges(pairs, job=state) if pairs else None
        stored = self.store.turns(conversation_id)[-3:] if conversation_id else []
        stored = [(u, r) for u, r in stored if r.reply and not r.error]
        if not stored:
            return None
        last = stored[-1][1]
        task = ""
        if last.job_id and (done := self.store.job(last.job_id)) is not None:
            task = done.prompt
        return Conversation.of_exchanges(
            [(u, r.reply) for u, r in stored],
            offer=last.offer,
            job=state,
            last_lane=last.lane,
            last_task=task,
        )

    def _offered(
        self,
        decision: RouteDecision,
        text: str,
        conversation_id: str | None,
        history: History,
    ) -> RouteDecision:
        """The decision a model's `delegate` call leads to: when the message answers an offer
        of the last reply, the job's text is the offered task (issue 37 item 3), as when the
        router itself reads the yes; else the message."""
        conversation = self.conversation(conversation_id, history)
        task = offered_task(text, conversation) if conversation is not None else None
        return dataclasses.replace(decision, text=task) if task else decision

    async def route(
        self, text: str, cid: str | None, history: History = None, *, explicit: bool = False
    ) -> RouteDecision:
        """The lane of `text` in conversation `cid`, with no engine call. The classifier is CPU
        work (an encoder pass): off the event loop, one pass for all turns routing at once."""
        context = self.conversation(cid, history)
        return await self.batcher.decide(self.router, text, explicit=explicit, conversation=context)

    def jobs_note(self, owner: str, conversation_id: str | None) -> str:
        """What the chat request says of this conversation's latest job (DESIGN.md 4: "how's
        the report going?" is answered from the job), "" when it has none; never a job of
        another login."""
        job = self.store.conversation_job(conversation_id) if conversation_id else None
        if job is None or job.owner != owner:
            return ""
        return job_status(job, self.store.clock())

    async def turn(
        self,
        text: str,
        rec: Recorder,
        *,
        owner: str = "local",
        conversation_id: str | None = None,
        force_deep: bool = False,
        deep_inline: bool = False,
        follow_job: bool = False,
        housekeeping: bool = False,
        decision: RouteDecision | None = None,
        history: History = None,
        max_tokens: int | None = None,
        job_key: str | None = None,
    ) -> AsyncIterator[TurnEvent]:
        """Route and answer `text`. A deep decision becomes a job unless `deep_inline` (the CLI
        waits instead); `follow_job`: the job's answer streams in this turn as it runs.
        `housekeeping`: a client's background task, no delegate tool. `decision`: the lane
        chosen by the caller, not routed. `history`: the conversation as the caller sent it,
        not as stored. Ends with a "done" event; the turn is not stored here."""
        text = check_text(text, self.settings.max_text_chars)
        t0 = now_ms()
        if decision is None:
            decision = await self.route(text, conversation_id, history, explicit=force_deep)
        rec.set("route", now_ms() - t0)
        yield TurnEvent("route", decision=decision)
        result: TurnResult
        task = (owner, decision.text or text, conversation_id, job_key)
        if decision.lane == "deep" and not deep_inline and self.jobs is not None and follow_job:
            result = TurnResult("", "deep", decision.reason, None)
            async with contextlib.aclosing(self._follow(*task, result, rec)) as events:
                async for event in events:
                    yield event
        elif decision.lane == "deep" and not deep_inline and self.jobs is not None:
            result = self._delegate(owner, decision, text, conversation_id, job_key)
            # the job exists: a turn stopped during its hand-off is still linked to it
            yield TurnEvent("waiting", text=result.job_id or "")
        else:
            lane = self.settings.deep if decision.lane == "deep" else self.settings.chat
            result = TurnResult("", decision.lane, decision.reason, None)
            past = self.history(conversation_id, history)
            note = "" if housekeeping else self.jobs_note(owner, conversation_id)
            run = self._run(text, lane, decision, past, result, rec, max_tokens, history,
                            tools=not housekeeping, note=note, owner=owner)  # fmt: skip
            # an inline deep answer is one of the login's jobs while it runs (issue 49)
            inline = self.jobs.inline(owner) if lane.name == "deep" and self.jobs else None
            with inline or contextlib.nullcontext():
                async with contextlib.aclosing(run) as events:
                    async for event in events:
                        yield event
            if result.dropped and history is None and conversation_id:  # said once (the page)
                result.window_notice = not out_of_view(self.store.turns(conversation_id))
            if result.delegate_requested:  # a yes to the last reply's offer: that task, in full
                decision = self._offered(decision, text, conversation_id, history)
                task = (owner, decision.text or text, conversation_id, job_key)
            if result.delegate_requested and self.jobs is not None and follow_job:
                # the model's words, then its job's thinking and answer in the same reply
                said = result.reply.strip()
                result.reason, result.lane = "model asked to delegate", "deep"
                if said:
                    yield TurnEvent("content", text="\n\n")
                async with contextlib.aclosing(self._follow(*task, result, rec)) as events:
                    async for event in events:
                        yield event
                result.reply = (said + "\n\n" + result.reply).strip()
            elif result.delegate_requested and self.jobs is not None:
                handoff = self._delegate(owner, decision, text, conversation_id, job_key)
                result.job_id, result.reason = handoff.job_id, "model asked to delegate"
                yield TurnEvent("waiting", text=handoff.job_id or "")
                result.lane = "deep"
                result.reply = (result.reply.strip() + "\n\n" + handoff.reply).strip()
        self._remember(result.reply)
        yield TurnEvent("done", result=result)

    def _remember(self, reply: str) -> None:
        """The router embeds the reply now, on a thread, not when the next turn is routed."""
        remember = getattr(self.router, "remember", None)  # a stand-in router may have none
        if remember is not None and reply.strip():
            asyncio.get_running_loop().run_in_executor(None, remember, reply)

    async def _follow(
        self,
        owner: str,
        task: str,
        conversation_id: str | None,
        key: str | None,
        result: TurnResult,
        rec: Recorder,
    ) -> AsyncIterator[TurnEvent]:
        """A job for `task`, its reasoning and answer streamed as it runs (`job_stream`)."""
        assert self.jobs is not None
        job = self.jobs.submit(owner, task, key=key, conversation_id=conversation_id)
        async with contextlib.aclosing(follow(self.store, job, result, rec)) as events:
            async for event in events:
                yield event

    def _delegate(
        self,
        owner: str,
        decision: RouteDecision,
        text: str,
        conversation_id: str | None,
        key: str | None = None,
    ) -> TurnResult:
        assert self.jobs is not None
        task = decision.text or text
        job = self.jobs.submit(owner, task, key=key, conversation_id=conversation_id)
        reply = f"Handed off to the deep lane as job {job.id}; I'll tell you when it's done."
        return TurnResult(reply, "deep", decision.reason, "delegated", job_id=job.id)

    async def _run(
        self,
        text: str,
        lane: LaneConfig,
        decision: RouteDecision,
        past: list[tuple[str, str]],
        result: TurnResult,
        rec: Recorder,
        max_tokens: int | None = None,
        given: History = None,
        tools: bool = True,
        note: str = "",
        owner: str | None = None,
    ) -> AsyncIterator[TurnEvent]:
        messages = self.prompts.chat(past, text, lane.history_tokens, note=note)
        if lane.name == "deep":
            task = decision.text or text
            # a client's own history stays with its deep request: a client resuming a cut
            # answer ("continue where you stopped") needs it; stored chat history does not
            messages = (
                self.prompts.deep(task)
                if given is None
                else [
                    Message("system", self.prompts.delegate),
                    *self.prompts.chat(past, task, lane.history_tokens)[1:],
                ]
            )
        budget = {"max_tokens": min(max_tokens, lane.max_tokens)} if max_tokens else {}
        offered = None
        # an engine that refused tools once is not offered them again (the client warned)
        engine_ok = self.engine.kind in ("vllm", "openai") and self.engine.tools_ok
        if tools and lane.name == "chat" and engine_ok:
            from assistant.routing.router import DELEGATE_TOOL

            offered = [DELEGATE_TOOL]
        reply = Reply()
        deep_budget = min(max_tokens, lane.max_tokens) if max_tokens else lane.max_tokens
        try:
            if lane.name == "deep":
                # one answer however often a chat turn takes its slot, resumed like a job's
                # (an engine's cut or crash is reported, as on the chat lane: the person is
                # waiting, and sees what arrived)
                whole = self._attempt(
                    messages, lane, result, reply, rec, budget=deep_budget, resume_on=YIELDED,
                    owner=owner, deadline_s=self.settings.deep_inline_deadline_s,
                )  # fmt: skip
                async with contextlib.aclosing(whole) as events:
                    async for event in events:
                        yield event
            else:
                first = self._attempt(
                    messages, lane, result, reply, rec, tools=offered, owner=owner, **budget
                )
                async with contextlib.aclosing(first) as events:
                    async for event in events:
                        yield event
                if reply.unanswered:
                    # the budget went on reasoning, or the model only reasoned: once more with
                    # thinking off, never more
                    reply = Reply()
                    again = self._attempt(
                        messages, lane, result, reply, rec, thinking=False, owner=owner, **budget
                    )
                    async with contextlib.aclosing(again) as events:
                        async for event in events:
                            yield event
        except AssistantError as e:
            result.error = str(e)
            result.reply = reply.content
            result.incomplete = bool(reply.content)
            return
        result.delegate_requested = reply.delegate_requested
        result.reply = reply.content
        if lane.name == "chat":  # kept with the turn: a "yes" next turn delegates this task
            result.offer = find_offer(reply.content)
        result.reasoning = reply.reasoning
        result.finish_reason = reply.finish_reason
        result.incomplete = reply.incomplete
        result.tokens_per_s = reply.tokens_per_s
        if reply.exhausted:
            result.exhausted = True
            result.error = (
                EXHAUSTED_MESSAGE
                if lane.name == "chat"
                else ("the deep lane's budget ran out in reasoning before an answer")
            )
        elif reply.reasoning_only:
            result.exhausted = True  # no answer: the CLI's exit code 3, like a spent budget
            again = " even after a retry without thinking" if lane.name == "chat" else ""
            result.error = REASONING_ONLY_MESSAGE.format(again=again)
        elif reply.incomplete:
            result.error = {
                "crashed": f"{reply.note}; "
                + ("the answer above is incomplete" if reply.content else "please ask again"),
                "cut": "the connection to the engine broke; the answer above is incomplete",
                "interrupted": f"{ended_early(self.engine)}; the answer above is incomplete",
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
        rec: Recorder,
        *,
        resume_on: tuple[str, ...] = (),
        budget: int | None = None,
        **kw: object,
    ) -> AsyncIterator[TurnEvent]:
        """One answer on `lane` (across as many stretches as `resume_on` ends take),
        folding into `reply` as it streams."""
        # what the reply shows, says and stores never repeats the instructions
        secret = "\n".join(m.content for m in messages if m.role == "system")
        answer = Generation(
            self.engine,
            self.scheduler,
            lane,
            lambda partial: resumed(messages, partial),
            reply,
            budget=budget,
            resume_on=resume_on,
            filter=(lambda stream: guarded(stream, secret)) if secret else None,
            **kw,
        )
        shown = {"content": "", "reasoning": ""}
        try:
            async with contextlib.aclosing(answer.events()) as events:
                async for ev in events:
                    fold = answer.fold
                    if fold is not None and fold.ttft_ms is not None:
                        rec.first("ttft", fold.ttft_ms)
                    if ev.kind in ("reasoning", "content"):
                        shown[ev.kind] += ev.text
                        yield TurnEvent(ev.kind, text=ev.text)
        finally:
            rec.add("queue", answer.queue_ms)
            if secret:  # the turn keeps what was shown: the engine's text, guarded
                reply.content, reply.reasoning = shown["content"], shown["reasoning"]
        if answer.sent_ms is not None:
            rec.set("llm_total", now_ms() - answer.sent_ms)
        result.tokens = answer.generated
        result.dropped = answer.dropped
        self.scheduler.record(lane.name, rec.timings.ttft, reply.tokens_per_s)  # type: ignore[arg-type]
