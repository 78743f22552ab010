"""`Session`: one open conversation of one login, and the turns it runs.

The session fills in who asks and where (the login and the conversation, resolved once by the
registry), runs each turn as a task it keeps, whatever way it came in (`ask` for a reader of
its events, `keep` for a call, whose task reads `events` and speaks them), and is the only
thing that cancels one: Stop, a newer turn, a call's barge-in, a caller that leaves (its reader
closing) and the session closing all end in `stop`. A turn stopped that way is stored as far as
it got (the pipeline's rule), so nothing the person said is lost. A call open on the
conversation (`call`) is its audio in and out: it takes the page's typed and push-to-talk
turns, answered aloud there, never played beside it into its microphone.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Coroutine
from typing import TYPE_CHECKING, Any

from assistant.call.calls import Calls
from assistant.errors import AssistantError
from assistant.records import RouteDecision, TurnEvent
from assistant.turns.pipeline import Pipeline, Playback, TurnRequest
from assistant.turns.stream import cancel_all
from assistant.turns.voice import ForLogin, transcribe

if TYPE_CHECKING:
    from assistant.call.call import Call
    from assistant.records import Job

_END = object()


class Session:
    """The turns of `conversation_id` (None: a client's housekeeping, in no conversation)."""

    def __init__(self, owner: str, conversation_id: str | None, pipeline: Pipeline, calls: Calls):
        self.owner = owner
        self.conversation_id = conversation_id
        self.pipeline = pipeline
        self._calls = calls
        self._turns: set[asyncio.Task[None]] = set()
        self.stopped_why: str | None = None
        """Why the latest turn was stopped from outside (None: it was not)."""

    @property
    def call(self) -> Call | None:
        """The login's call, if one is open: the one on this conversation, else the newest
        (a call hears the person wherever the page is; what it answers must not play beside
        it)."""
        return self._calls.of(self.owner, self.conversation_id)

    @property
    def busy(self) -> bool:
        return any(not t.done() for t in self._turns)

    async def route(self, text: str) -> RouteDecision:
        """The lane `text` would take here (the classifier; no engine call). Pass it on as the
        request's `decision` and the turn is not routed again."""
        return await self.pipeline.route(text, self.conversation_id)

    def request(self, ask: TurnRequest) -> TurnRequest:
        """`ask` as this session's: its login and its conversation, whatever the caller set."""
        return dataclasses.replace(ask, owner=self.owner, conversation_id=self.conversation_id)

    async def ask(
        self, ask: TurnRequest, *, supersede: bool = True, **models: Any
    ) -> AsyncIterator[TurnEvent]:
        """The turn's events, the last "done" unless it was stopped. `supersede`: a newer
        turn stops the one running (the page; a `/v1` client may send several at once).
        `models`: the pipeline's per-turn parts (`stt`, heard in the login's share of the
        pool, `tts`, and a call's `hold`, ...); `voice`, instead of `tts`: how to get the
        login's voice, asked only for a turn spoken here (`ask.speak`, and not handed to a
        call, which speaks in its own)."""
        if models.get("stt") is not None:
            models["stt"] = ForLogin(models["stt"], self.owner)
        call = self.call if ask.from_page and not ask.force_deep else None
        if call is not None:
            async with contextlib.aclosing(self._in_call(call, ask, models.get("stt"))) as said:
                async for event in said:
                    yield event
            return
        if (voice := models.pop("voice", None)) is not None:
            models["tts"] = await voice() if ask.speak else None
        if supersede:
            await self.stop("a newer turn")
        self.stopped_why = None
        queue: asyncio.Queue[Any] = asyncio.Queue()
        want = asyncio.Event()
        task = self.keep(self._run(self.request(ask), queue, want, models), "turn")
        try:
            while True:
                want.set()  # the next event, once this one is handled (see `_run`)
                if (item := await queue.get()) is _END:
                    break
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            # the reader left (Stop, a client gone, the page closed): the turn stops with it
            if not task.done():
                await cancel_all([task])

    def delegate(self, text: str, key: str | None = None) -> Job:
        """`text` handed to the deep lane as a job of this session's login (and conversation,
        when it has one), with no turn to answer it: a client that only queues work (the
        Gradio API's `delegate`). The same key gives back the same job."""
        jobs = self.pipeline.chat.jobs
        if jobs is None:
            raise AssistantError("deep jobs are off in this process")
        return jobs.submit(self.owner, text, key=key, conversation_id=self.conversation_id)

    async def _in_call(self, call: Call, ask: TurnRequest, stt: Any) -> AsyncIterator[TurnEvent]:
        """The page's turn while a call is open: a turn of the call, answered aloud there (a
        reply played by the page beside the call would reach the call's microphone and be
        heard as the person). Push-to-talk is heard here, then said to the call; the events
        are only what the page shows of it (what was heard, or why it could not be)."""
        text, source = ask.text, "typed"
        if ask.audio is not None:
            try:
                heard = await transcribe(ask.audio, stt, self.pipeline.settings, self.owner)
            except AssistantError as e:  # bad audio, or the speech server failed
                yield TurnEvent("error", text=f"I couldn't use that audio: {e}")
                return
            text, source = heard.text, "voice"
            yield TurnEvent("transcript", text=text)
        if text.strip():
            await call.say(text, source=source)

    def keep(self, work: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        """Run `work`, a turn however it reaches the person (a call's reply spoken on its
        socket, a notice said there), as a task of this session: kept, and ended by `stop`."""
        task = asyncio.create_task(work, name=f"{name}-{self.conversation_id}")
        self._turns.add(task)
        task.add_done_callback(self._turns.discard)
        return task

    def events(self, ask: TurnRequest, **models: Any) -> AsyncIterator[TurnEvent]:
        """The turn's events, as this session's, for a task it keeps (`keep`) to read: a call
        speaks them as they come."""
        return self.pipeline.stream(self.request(ask), **models)

    def kept_unstarted(self, ask: TurnRequest) -> None:
        """A call's committed turn stopped before its stream began (a backlog heard at once:
        its end, then the next speech, before its task ran): what was said is stored."""
        self.pipeline.stopped_before_start(self.request(ask))

    async def heard(self, playback: Playback, reply: str) -> None:
        """A stopped turn's stored reply cut to what the person heard (the page's report of
        how much it played, which comes after the stop)."""
        await asyncio.to_thread(self.pipeline.cut_heard, playback, reply)

    async def _run(
        self,
        request: TurnRequest,
        queue: asyncio.Queue[Any],
        want: asyncio.Event,
        models: dict[str, Any],
    ) -> None:
        # In step with the reader, as a generator would be: the pipeline goes on only once the
        # reader has handled its last event (a call's reply is held until its audio, sent by
        # the reader, has played; run ahead, it would be stored before it was heard).
        try:
            async with contextlib.aclosing(self.pipeline.stream(request, **models)) as events:
                while True:
                    await want.wait()
                    want.clear()
                    try:
                        event = await anext(events)
                    except StopAsyncIteration:
                        break
                    queue.put_nowait(event)
        except asyncio.CancelledError:
            raise
        except BaseException as e:  # raised in the reader, where the caller can say it
            queue.put_nowait(e)
        finally:
            queue.put_nowait(_END)

    async def stop(self, why: str = "stopped", turn: asyncio.Task[None] | None = None) -> None:
        """The one cancel: every turn of this session (or only `turn`: a call's barge-in
        stops its own reply, not a client's request beside it) ends now, stored as far as it
        got."""
        running = [t for t in self._turns if not t.done() and turn in (None, t)]
        if running:
            self.stopped_why = why
            await cancel_all(running)

    async def run(self, ask: TurnRequest, **models: Any) -> Any:
        """A whole turn, for callers that do not stream: its result (None: stopped)."""
        result = None
        async with contextlib.aclosing(self.ask(ask, supersede=False, **models)) as events:
            async for event in events:
                if event.kind == "done":
                    result = event.result
        return result
