"""The turn pipeline: every way in (the page typed and spoken, the API, the CLI) runs here.

    audio -> hear -> route -> engine stream -> sentences -> speech
             voice   chat      chat           voice       voice

Each stage is an async generator of `TurnEvent`s; a `Recorder` owns the turn's timings and
stores and reports the turn once, when it ends. Closing the stream (barge-in, Stop, a client
leaving) closes every stage, the engine request included.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from assistant.errors import AssistantError, Busy
from assistant.records import INTERRUPTED, STOPPED, RouteDecision, TurnEvent, TurnResult
from assistant.settings import Settings
from assistant.speech.audio import AudioSource
from assistant.speech.stages import SpeechToText, TextToSpeech
from assistant.turns.chat import ChatService
from assistant.turns.recorder import Recorder, TurnLog
from assistant.turns.voice import NOT_CAUGHT, hear, speak


@dataclass(frozen=True)
class TurnRequest:
    """One turn as asked: typed `text`, or `audio` to transcribe."""

    text: str = ""
    audio: AudioSource | None = None
    owner: str = "local"
    conversation_id: str | None = None
    force_deep: bool = False
    deep_inline: bool = False
    """Answer a deep decision in this turn (the CLI waits) instead of queueing a job."""
    follow_job: bool = False
    """A deep decision becomes a job whose reasoning and answer this turn streams as the job
    runs (the OpenAI endpoint), instead of the hand-off sentence."""
    housekeeping: bool = False
    """A client's own background task (a title, tags): answered as asked, no delegate tool."""
    decision: RouteDecision | None = None
    """A lane the caller chose itself (the OpenAI API's `reasoning_effort`): no routing."""
    history: tuple[tuple[str, str], ...] | None = None
    """The conversation so far as (request, reply) pairs, as a client sent it (the OpenAI
    API); None: the stored conversation's."""
    max_tokens: int | None = None
    """A budget the caller asked for; the lane's own budget still caps it."""
    speak: bool = False
    received_ms: float | None = None
    """When the request arrived, or speech ended (`now_ms()`): latency counts from here."""
    source: str = "text"
    from_page: bool = False
    """Typed or said on the page: while the login has a call open, the call answers it aloud
    (`Session.ask`); a client's request is always answered to the client."""
    job_key: str | None = None
    """Idempotency key of the job a deep decision hands off: one job per key."""
    heard_ms: dict[str, float] = field(default_factory=dict)
    """Stages measured before the turn began, e.g. a hands-free turn's `endpoint` and `stt`."""


@dataclass
class Playback:
    """A spoken reply's playback, for a turn stopped while it played (a call's barge-in): what
    is stored, and what the next prompt carries, is what the person heard, not all that was
    generated (LiveKit keeps the transcript synchronised to playback the same way)."""

    heard: Callable[[str], str]
    """The generated reply -> the part of it that had been played."""
    turn_id: int | None = None
    """The stored turn, once stored stopped (a later, exact playback report cuts it again)."""


class Pipeline:
    """Runs turns through the stages; speech models are passed per turn (they load late)."""

    def __init__(
        self,
        chat: ChatService,
        settings: Settings,
        *,
        log_to: TurnLog | None = None,
        observe: Callable[[TurnResult], None] | None = None,
        disk: Callable[[str], str | None] | None = None,
    ):
        self.chat = chat
        self.settings = settings
        self.log_to = log_to
        self.observe = observe
        self.disk = disk
        """Why a login may store no more turns (`limits.disk_refusal`), or None."""

    async def stream(
        self,
        request: TurnRequest,
        *,
        stt: SpeechToText | None = None,
        tts: TextToSpeech | None = None,
        keep_stopped: Callable[[], bool] | None = None,
        hold: Callable[[], Awaitable[object]] | None = None,
        playback: Playback | None = None,
    ) -> AsyncIterator[TurnEvent]:
        """The turn's events; the last is "done" with the stored, reported result.
        `keep_stopped`: whether a turn stopped before its end is stored (a hands-free reply
        prepared for words that went on is not: it was never the person's turn). `hold`:
        awaited before the turn is stored (a prepared reply waits for its end to be decided)."""
        if request.conversation_id is not None:
            # a turn that would be stored, refused before anything is heard, routed or stored:
            # a login over its disk keeps everything it has and adds nothing
            if (why := self._over_disk(request.owner)) is not None:
                raise Busy(why)
        rec = Recorder(request.received_ms, log_to=self.log_to, observe=self.observe)
        for stage, ms in request.heard_ms.items():
            rec.set(stage, ms)
        heard: list[str] = [request.text]
        events = self._answer(request, stt, rec, heard)
        if request.speak and tts is not None:
            events = speak(events, tts, rec)
        partial = _Partial()
        # stored from its start, unless it is a hands-free reply prepared before the person
        # had finished: that is not their turn until it is kept
        pending = keep_stopped is None
        failure: str | None = None
        try:
            async with contextlib.aclosing(events) as stages:
                async for event in stages:
                    partial.add(event)
                    if pending and event.kind == "route" and event.decision is not None:
                        rec.begin(event.decision, conversation_id=request.conversation_id,
                                  text=heard[0], source=request.source)  # fmt: skip
                    elif event.kind in ("content", "reasoning"):
                        rec.progress(partial.reply, partial.reasoning)
                    if event.kind == "done" and event.result is not None:
                        if hold is not None:
                            await hold()
                        self._finish(rec, request, heard[0], event.result)
                    yield event
        except AssistantError as e:
            failure = str(e)  # stored as what happened to the turn (e.g. a refused job key)
            raise
        finally:
            # Stopped (Stop, barge-in, switching conversation, a client leaving): keep what
            # was asked and what had arrived, so the conversation reopens with it.
            keep = keep_stopped is None or keep_stopped()
            if keep_stopped is not None and partial.decision is None and request.text:
                # a call's committed turn stopped before it was routed: what was said stays
                partial.decision = UNROUTED
            if not rec.finished and partial.decision is not None and keep:
                stopped = partial.stopped(failure or STOPPED)
                if playback is not None:
                    stopped.reply = playback.heard(stopped.reply)
                self._finish(rec, request, heard[0], stopped)
                if playback is not None:
                    playback.turn_id = stopped.turn_id

    def stopped_before_start(self, request: TurnRequest) -> None:
        """Store `request` as a turn stopped before it was routed, as `stream` does when one is
        stopped at once, for a turn whose stream never began (a task cancelled before its
        first step never runs the stream's `finally`)."""
        if request.text.strip() and self._over_disk(request.owner) is None:
            stopped = _Partial(decision=UNROUTED)
            rec = Recorder(request.received_ms, log_to=self.log_to, observe=self.observe)
            self._finish(rec, request, request.text, stopped.stopped(STOPPED))

    def _over_disk(self, owner: str) -> str | None:
        """Why `owner` may store no more turns (`limits.disk_refusal`), or None."""
        return self.disk(owner) if self.disk is not None else None

    async def route(self, text: str, conversation_id: str | None) -> RouteDecision:
        """The lane a turn of `text` would take (no engine call): a call asks before it
        prepares a reply, and passes the decision on in the request, so the turn is routed
        once."""
        return await self.chat.route(text, conversation_id)

    def cut_heard(self, playback: Playback, reply: str) -> None:
        """A stored stopped turn's reply cut to `reply` (what the page says it played)."""
        if playback.turn_id and self.log_to is not None:
            self.log_to.cut_reply(playback.turn_id, reply)

    def _finish(self, rec: Recorder, request: TurnRequest, text: str, result: TurnResult) -> None:
        # stages a caller measured while the turn ran (a hands-free turn prepared before its
        # end was decided learns its `endpoint` then) are applied again, over the turn's own
        for stage, ms in request.heard_ms.items():
            rec.set(stage, ms)
        rec.finish(
            result,
            # a turn where nothing was heard is not part of the conversation
            conversation_id=request.conversation_id if text.strip() else None,
            text=text,
            source=request.source,
        )

    async def _answer(
        self,
        request: TurnRequest,
        stt: SpeechToText | None,
        rec: Recorder,
        heard: list[str],
    ) -> AsyncIterator[TurnEvent]:
        text = request.text
        if request.audio is not None:
            if stt is None:
                yield TurnEvent("error", text="speech recognition is not available")
                return
            async with contextlib.aclosing(hear(request.audio, stt, rec, self.settings)) as h:
                async for event in h:
                    yield event
                    if event.kind == "error":
                        return
                    text = event.text
            heard[0] = text
            if not text.strip():
                # silence or noise: answered without calling the engine at all
                result = TurnResult(NOT_CAUGHT, "chat", "no speech heard", None)
                yield TurnEvent("done", text=NOT_CAUGHT, result=result)
                return
        turn = self.chat.turn(
            text,
            rec,
            owner=request.owner,
            conversation_id=request.conversation_id,
            force_deep=request.force_deep,
            deep_inline=request.deep_inline,
            follow_job=request.follow_job,
            housekeeping=request.housekeeping,
            decision=request.decision,
            history=request.history,
            max_tokens=request.max_tokens,
            job_key=request.job_key,
        )
        async with contextlib.aclosing(turn) as events:
            async for event in events:
                yield event

    async def run(self, request: TurnRequest, **models: object) -> TurnResult:
        """A whole turn, for callers that do not stream (the API, the CLI)."""
        result: TurnResult | None = None
        async with contextlib.aclosing(self.stream(request, **models)) as events:  # type: ignore[arg-type]
            async for event in events:
                if event.kind == "done":
                    result = event.result
        assert result is not None
        return result

    async def ask(self, text: str, **fields: object) -> TurnResult:
        """`run` for a typed question: `ask("hi", conversation_id=cid)`."""
        return await self.run(TurnRequest(text=text, **fields))  # type: ignore[arg-type]


UNROUTED = RouteDecision("chat", "stopped before it was routed")
"""The lane stored for a call's committed turn stopped before it was routed."""


@dataclass
class _Partial:
    """What a turn had produced so far, to store it if it is stopped before its end."""

    decision: RouteDecision | None = None
    reply: str = ""
    reasoning: str = ""
    job_id: str | None = None
    """The job the turn handed off or follows, once it exists ("waiting"): a turn stopped
    during its hand-off stays linked to the job, which runs on."""

    def add(self, event: TurnEvent) -> None:
        if event.kind == "route" and event.decision is not None:
            self.decision = event.decision
        elif event.kind == "content":
            self.reply += event.text
        elif event.kind == "reasoning":
            self.reasoning += event.text
        elif event.kind == "waiting" and event.text:
            self.job_id = event.text

    def stopped(self, error: str) -> TurnResult:
        assert self.decision is not None
        return TurnResult(
            self.reply,
            self.decision.lane,
            self.decision.reason,
            INTERRUPTED,
            reasoning=self.reasoning,
            error=error,
            incomplete=True,
            job_id=self.job_id,
        )
