"""A call on the line: what a way in hands over (audio frames and the page's control messages
in; the call's messages and its reply's audio out) and a call made of it, wired once.

The way in today is the page's WebSocket (`web.call`): it reads its wire into `Inbound` items
and writes what the call sends (`Line`), nothing else. Everything else of a call is here: the
checks on its audio (size, pace: `frame_refusal`, which the reader applies as each frame
arrives), the models loaded, the `Listener`, the `Call`, the voice and the conversation (asked
of the session's own pickers), the watch that ends a quiet call (`idle.watch`), and its place
among the open calls (`Calls`). Another transport (a phone line) is one module that does what
`web.call` does and calls `take_call`.

Audio faster than `MAX_PACE` times real time only makes the app transcribe faster than anyone
speaks (issue 26): the call ends. A person may be quiet on a call; one in which nothing is said
ends after `Settings.call_idle_s`, the page told before (`call.idle`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from assistant.call import idle
from assistant.call.call import Call
from assistant.call.hearing import ListenConfig
from assistant.call.idle import Quiet
from assistant.call.listener import Listener
from assistant.call.playback import Played
from assistant.errors import AssistantError
from assistant.session.voice import chosen_voice
from assistant.speech.audio import SAMPLE_RATE
from assistant.speech.models import SpeechModels
from assistant.speech.vad import StreamingVad

if TYPE_CHECKING:
    from assistant.runtime import Runtime

log = logging.getLogger(__name__)

MAX_FRAME_BYTES = 64 * 1024
"""2 s of 16 kHz int16 audio: the page sends 100 ms at a time."""
MAX_PACE = 1.5
"""Seconds of audio a call may send per second of its time: a page sends in real time."""
PACE_BURST_S = 3.0
"""Audio a call may send ahead of that (a page catching up after a network stall)."""

Inbound = tuple[bytes, float] | dict[str, Any] | None
"""What the way in passes on: an audio frame and when it arrived, a control message
({"stop": true}, {"played": ...}), or None (the call is over: the page left, went quiet or
broke a rule)."""


class Line(Protocol):
    """How the call writes to its way in (one writer at a time: the way in's concern)."""

    async def send_json(self, message: dict[str, Any]) -> None: ...

    async def send_bytes(self, data: bytes) -> None: ...

    async def close(self, code: int, reason: str) -> None: ...


class Pace:
    """Whether a call's audio keeps to `MAX_PACE` times real time (16 kHz int16 frames)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.start: float | None = None
        self.audio_s = 0.0

    def allows(self, frame_bytes: int) -> bool:
        now = self.clock()
        if self.start is None:
            self.start = now
        self.audio_s += frame_bytes / 2 / SAMPLE_RATE
        return self.audio_s <= MAX_PACE * (now - self.start) + PACE_BURST_S


def frame_refusal(data: bytes, pace: Pace) -> str | None:
    """Why an audio frame ends the call, or None."""
    if len(data) > MAX_FRAME_BYTES or len(data) % 2:
        return "bad audio frame"
    if not pace.allows(len(data)):
        return f"audio sent faster than {MAX_PACE:g} times real time; the call ends"
    return None


async def take_call(
    rt: Runtime,
    speech: SpeechModels,
    owner: str,
    line: Line,
    inbox: asyncio.Queue[Inbound],
    expires: float | None,
) -> None:
    """The call of `owner` on `line` until `inbox` says None: its models loaded (audio that
    arrives meanwhile waits in `inbox`), then heard, answered and watched."""
    try:
        stt = await speech.stt()
        turn_end = await speech.turn_end()
        vad = StreamingVad(await speech.vad())
    except AssistantError as e:
        await line.send_json({"kind": "error", "text": f"hands-free is off: {e}"})
        await line.close(1000, "hands-free is off")
        return
    config = ListenConfig(fallback_ms=rt.settings.handsfree_pause_ms)
    listener = Listener(stt, config, vad=vad, turn_end=turn_end)
    quiet = Quiet()

    def session() -> Any:  # the conversation the login has open, asked at each turn
        return rt.sessions.saved(owner)

    async def tts() -> Any:  # the login's voice, chosen where the page's is, in its share
        chosen = await chosen_voice(speech, rt.conversations.prefs(owner), owner=owner)
        if chosen.warning:
            log.warning("call of %s: %s", owner, chosen.warning)
        return chosen.tts

    async def send_json(message: dict[str, Any]) -> None:
        quiet.saw(message)
        await line.send_json(message)

    async def send_bytes(data: bytes) -> None:
        quiet.now()  # the reply's audio
        await line.send_bytes(data)

    async def end(why: str, code: int = idle.LOGIN_CODE) -> None:
        """The call ends: the page is told why, the line closed, the call ended."""
        with contextlib.suppress(Exception):
            await line.send_json({"kind": "error", "text": why})
            await line.close(code, why)
        inbox.put_nowait(None)

    call = Call(
        listener, session, owner=owner, tts=tts,
        send_json=send_json, send_bytes=send_bytes, end_call=end,
    )  # fmt: skip
    hearing = asyncio.create_task(call.run(), name="call-hear")
    # ended when nothing is said for call_idle_s or the login expires: no poll (`idle.watch`)
    watching = asyncio.create_task(
        idle.watch(call, quiet, rt.settings.call_idle_s, end, line.send_json, expires),
        name="call-watch",
    )
    # typed questions and job notices reach the call from now on; it may give its place
    rt.calls.join(call, quiet, end)
    try:
        while (item := await inbox.get()) is not None:
            if isinstance(item, tuple):
                await call.feed(*item)
            elif item.get("stop"):  # the page's Stop, on the call's conversation
                await rt.sessions.stop(owner, call.conversation_id, "Stop")
            elif "played" in item and (report := Played.parse(item)) is not None:
                await call.played(report)  # what of a reply the person heard
    finally:
        for task in (hearing, watching):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        rt.calls.part(call)
        await call.close()
        await listener.close()
