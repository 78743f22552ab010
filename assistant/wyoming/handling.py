"""The conversation over Wyoming: a `transcript` sent to `handle` is a turn of a conversation
in the app, routed like any other.

Home Assistant's `components/wyoming/conversation.py` sends `transcript` with its `context`
(`conversation_id`, `device_id`, `satellite_id`) and reads until `handled` or `not-handled`.
The answer streams as Wyoming's spec says: `handled-start`, a `handled-chunk` per piece the
engine writes, `handled` with the whole reply (what a client that does not stream reads:
Home Assistant today), `handled-stop`. A deep decision becomes a job through the pipeline, as
on the page; the answer is then at once the short spoken hand-off, and the job's result is in
the conversation and the Jobs panel. A failure is `not-handled` with the reason, the event
Home Assistant ends on (it would wait on an `error`).

Which conversation: the app's own id when the client echoes it (`assistant_conversation` in
the `context` of `handled`), else the one Home Assistant's `conversation_id` continued, else
the one this satellite last used, if it was used within `REOPEN_S`, or its job still runs or
ended since (so "is it done?" after a long job, in a new Home Assistant conversation, is asked
where the job is); else a new one. Remembered in the login's preferences.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

from wyoming.asr import Transcript
from wyoming.event import Event
from wyoming.handle import Handled, HandledChunk, HandledStart, HandledStop, NotHandled

from assistant.errors import AssistantError
from assistant.records import HANDED_OFF, Job, TurnResult, now_ms
from assistant.session import Ask, Session, Sessions
from assistant.turns.conversations import Conversations

REOPEN_S = 15 * 60.0
"""A satellite's last conversation is continued for this long after its last turn."""
REMEMBERED = 64
"""Home Assistant conversations and satellites remembered per login, the newest kept."""
PREF = "wyoming"
"""The login's preference that remembers them."""
OURS = "assistant_conversation"
"""The app's conversation id in a `context`."""
MAX_ID_CHARS = 200

Send = Callable[[Event], Awaitable[bool]]


def _id(context: dict[str, Any], key: str) -> str:
    value = context.get(key)
    return value if isinstance(value, str) and len(value) <= MAX_ID_CHARS else ""


class Handling:
    """Transcripts to turns of the login's conversations; `job_of`: a conversation's latest
    job (the store's)."""

    def __init__(
        self,
        sessions: Sessions,
        conversations: Conversations,
        job_of: Callable[[str], Job | None],
        clock: Callable[[], float] = time.time,
    ):
        self.sessions, self.conversations = sessions, conversations
        self.job_of, self.clock = job_of, clock

    def session(self, owner: str, context: dict[str, Any]) -> Session:
        """The conversation this transcript continues (see the module's docstring)."""
        known = self.conversations.prefs(owner).get(PREF)
        known = dict(known) if isinstance(known, dict) else {}
        theirs, satellite = _id(context, "conversation_id"), _id(context, "satellite_id")
        satellite = satellite or _id(context, "device_id")
        cid = None
        for candidate in (_id(context, OURS), known.get(f"ha:{theirs}") if theirs else None):
            if isinstance(candidate, str) and self.conversations.owned_by(candidate, owner):
                cid = candidate
                break
        if cid is None:
            last = known.get(f"sat:{satellite}")
            if isinstance(last, str) and self._reopens(last, owner):
                cid = last
        session = self.sessions.of(owner, cid)
        for key in ([f"ha:{theirs}"] if theirs else []) + [f"sat:{satellite}"]:
            known.pop(key, None)
            known[key] = session.conversation_id
        while len(known) > REMEMBERED:
            known.pop(next(iter(known)))
        self.conversations.remember(owner, **{PREF: known})
        return session

    def _reopens(self, cid: str, owner: str) -> bool:
        info = self.conversations.get(cid, owner)
        if info is None:
            return False
        if self.clock() - info.updated_at < REOPEN_S:
            return True
        job = self.job_of(cid)
        if job is None:
            return False
        return job.state in ("queued", "running") or job.updated_at > info.updated_at

    async def handle(self, owner: str, transcript: Transcript, send: Send) -> None:
        """Answer `transcript` as a turn; every outcome ends in `handled` or `not-handled`."""
        received = now_ms()
        context = transcript.context if isinstance(transcript.context, dict) else {}
        try:
            session = self.session(owner, context)
        except AssistantError as e:
            await send(NotHandled(text=str(e), context=context).event())
            return
        reply = Reply(send, {**context, OURS: session.conversation_id})
        ask = Ask(text=transcript.text, received_ms=received, source="voice")
        result: TurnResult | None = None
        try:
            # several at once on one conversation (two satellites): none stops another
            async with contextlib.aclosing(session.ask(ask, supersede=False)) as events:
                async for event in events:
                    if event.kind == "content" and event.text:
                        await reply.chunk(event.text)
                    elif event.kind == "done":
                        result = event.result
        except AssistantError as e:  # a refused job, a text over the limit: said, not raised
            await reply.fail(str(e))
            return
        if result is None:
            await reply.fail("the turn was stopped before it was answered")
        elif result.job_id:
            # the written hand-off names the job's id, no pleasure to hear: the spoken one
            await reply.chunk((" " if reply.streamed.strip() else "") + HANDED_OFF)
            await reply.end(reply.streamed.strip(), job=result.job_id)
        elif result.error and not result.reply.strip():
            await reply.fail(result.error)
        else:
            if not reply.streamed.strip():
                await reply.chunk(result.reply)
            await reply.end(result.reply)


class Reply:
    """One reply's events: started at its first chunk, ended once."""

    def __init__(self, send: Send, context: dict[str, Any]):
        self.send, self.context = send, context
        self.streamed = ""

    async def chunk(self, text: str) -> None:
        if not text:
            return
        if not self.streamed:
            await self.send(HandledStart(context=self.context).event())
        self.streamed += text
        await self.send(HandledChunk(text=text).event())

    async def end(self, text: str, job: str | None = None) -> None:
        context = {**self.context, "job_id": job} if job else self.context
        await self.send(Handled(text=text, context=context).event())
        await self.send(HandledStop().event())

    async def fail(self, why: str) -> None:
        if self.streamed:  # started: the stream ends with what was said, and why it stopped
            await self.end(f"{self.streamed.strip()} ({why})")
        else:
            await self.send(NotHandled(text=why, context=self.context).event())
