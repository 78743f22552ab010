"""`/listen`: the hands-free microphone stream, a WebSocket on the app's own server.

Why a WebSocket and not Gradio's streaming `gr.Audio`: Gradio sends a streamed microphone
as one queued event per chunk (an HTTP POST, a queue slot and a JSON round trip, 4 to 10 times
a second per listener), which costs the app CPU per chunk and cannot push "speech started"
back to the page the moment it happens (barge-in). Here the page's AudioWorklet sends raw
16 kHz PCM frames, and each call is a `Call` (`assistant.call.call`) that takes its
turns, runs each as a task of the conversation's session (their one owner) and answers with
small JSON messages and the reply's audio (`assistant.call.messages`). The page sends
{"stop": true} for its Stop button (Stop on the call's conversation, as the page's is), and
{"played": utterance, "ms": n, "interrupted": bool} when a reply's audio stops playing (it ran
out, or a barge-in stopped it: `call.playback`). Closing the socket
(the call ended, the tab closed) drops the session, its listener and its audio.

Calls are bounded (issue 19, `assistant.call.calls`): a few open at once per login and in
all; a refused call is told why before the socket closes (code 4429). A socket
that sends nothing for `IDLE_S` is dropped (the page sends audio ten times a second, so
silence on the wire means the page is gone or stuck, not that the person is quiet), and so is
one that sends junk or audio faster than `MAX_PACE` times real time. A person may be quiet
on a call: one in which nothing is said (only silence or noise: no words heard, no turn, no
reply under way) ends after `Settings.call_idle_s` (minutes), the page told before
(`assistant.call.idle`); when every place is taken, the call quiet the longest may give its
place to a new one. A call whose login logs out (an event: `Calls.logout`) or expires (at the
time the login wall gives it: `identity.login_expiry`) ends too (issue 38), closed with 4401.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from assistant.call import idle
from assistant.call.idle import Quiet
from assistant.call.playback import Played
from assistant.errors import AssistantError
from assistant.records import now_ms
from assistant.session.voice import chosen_voice
from assistant.speech.audio import SAMPLE_RATE
from assistant.speech.models import SpeechModels
from assistant.web.edge.identity import login_expiry, socket_owner

if TYPE_CHECKING:
    from assistant.runtime import Runtime

log = logging.getLogger(__name__)

MAX_FRAME_BYTES = 64 * 1024
"""2 s of 16 kHz int16 audio: the page sends 100 ms at a time."""
IDLE_S = 15.0
MAX_PACE = 1.5
"""Seconds of audio a call may send per second of its time: a page sends in real time, and
audio sent faster only makes the app transcribe faster than anyone speaks (issue 26)."""
PACE_BURST_S = 3.0
"""Audio a call may send ahead of that (a page catching up after a network stall)."""


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


Inbound = tuple[bytes, float] | dict[str, Any] | None
"""What the reader passes on: an audio frame and when it arrived, a control message, or None
(the call is over: the page left, went quiet or broke a rule)."""


class CallSocket:
    """A call's WebSocket: the reader, the session's tasks and the call write to it, one at a
    time."""

    def __init__(self, ws: WebSocket) -> None:
        self.ws, self.lock = ws, asyncio.Lock()

    async def send_json(self, message: dict[str, Any]) -> None:
        async with self.lock:
            await self.ws.send_json(message)

    async def send_bytes(self, data: bytes) -> None:
        async with self.lock:
            await self.ws.send_bytes(data)


async def read_call(ws: WebSocket, inbox: asyncio.Queue[Inbound], out: CallSocket) -> None:
    """Read the call's socket as messages arrive: frames checked (size, pace) on arrival and
    stamped with it, {"stop": true} passed on; None last, however the call ends."""
    pace = Pace()
    try:
        while True:
            try:
                async with asyncio.timeout(IDLE_S):  # not wait_for: it can swallow a cancel
                    message = await ws.receive()
            except TimeoutError:
                await ws.close(code=4408, reason=f"nothing received for {IDLE_S:.0f} s")
                return
            if message["type"] == "websocket.disconnect":
                return
            data = message.get("bytes")
            if data is not None:
                if why := frame_refusal(data, pace):
                    await out.send_json({"kind": "error", "text": why})
                    return
                inbox.put_nowait((data, now_ms()))
            elif message.get("text"):
                with contextlib.suppress(ValueError):
                    control = json.loads(message["text"])
                    if isinstance(control, dict):
                        inbox.put_nowait(control)
    except (WebSocketDisconnect, RuntimeError):
        pass
    finally:
        inbox.put_nowait(None)


def add_listen_route(app: Any, rt: Runtime, speech: SpeechModels) -> None:
    """`/listen` on `app`: each call a `Call` on the runtime `rt`'s turns."""
    from assistant.call.hearing import ListenConfig
    from assistant.call.listener import Listener
    from assistant.speech.vad import StreamingVad

    settings = rt.settings
    config = ListenConfig(fallback_ms=settings.handsfree_pause_ms)
    calls = rt.calls
    app.state.calls = calls

    async def listen(ws: WebSocket) -> None:
        owner = socket_owner(app, ws, settings)
        if owner is None:
            await ws.close(code=idle.LOGIN_CODE, reason="log in first")
            return
        await ws.accept()
        refused = await calls.enter(owner)  # a quiet call may give its place
        if refused:
            await ws.send_json({"kind": "error", "text": f"call refused: {refused}"})
            await ws.close(code=4429, reason=refused[:120])
            return
        try:
            await _call(ws, owner)
        finally:
            calls.leave(owner)

    async def _call(ws: WebSocket, owner: str) -> None:
        out, expires = CallSocket(ws), login_expiry(ws)
        # The socket is read from the moment it opens: the page sends as soon as it is open,
        # and loading the models can take seconds on a busy machine. Read later, that audio
        # came in as one burst that the pace check refused, ending the call unheard; read
        # now, it is paced as it arrives and heard once the models are ready.
        inbox: asyncio.Queue[Inbound] = asyncio.Queue()
        reader = asyncio.create_task(read_call(ws, inbox, out), name="call-read")
        try:
            try:
                stt = await speech.stt()
                turn_end = await speech.turn_end()
                vad = StreamingVad(await speech.vad())
            except AssistantError as e:
                await out.send_json({"kind": "error", "text": f"hands-free is off: {e}"})
                await ws.close()
                return
            listener = Listener(stt, config, vad=vad, turn_end=turn_end)
            await _session_call(out, owner, listener, inbox, expires)
        finally:
            reader.cancel()
            with contextlib.suppress(BaseException):
                await reader

    async def _session_call(
        out: CallSocket,
        owner: str,
        listener: Any,
        inbox: asyncio.Queue[Inbound],
        expires: float | None,
    ) -> None:
        from assistant.call.call import Call

        def session() -> Any:  # the conversation the login has open, asked at each turn
            return rt.sessions.saved(owner)

        async def tts() -> Any:  # the login's voice, chosen where the page's is, in its share
            chosen = await chosen_voice(speech, rt.conversations.prefs(owner), owner=owner)
            if chosen.warning:
                log.warning("call of %s: %s", owner, chosen.warning)
            return chosen.tts

        quiet = Quiet()

        async def send_json(message: dict[str, Any]) -> None:
            quiet.saw(message)
            await out.send_json(message)

        async def send_bytes(data: bytes) -> None:
            quiet.now()  # the reply's audio
            await out.send_bytes(data)

        async def end(why: str, code: int = idle.LOGIN_CODE) -> None:
            """The call ends: the page is told why, the socket closed, the session ended."""
            with contextlib.suppress(Exception):
                await out.send_json({"kind": "error", "text": why})
                await out.ws.close(code=code, reason=why)
            inbox.put_nowait(None)

        session = Call(
            listener, session, owner=owner, tts=tts,
            send_json=send_json, send_bytes=send_bytes, end_call=end,
        )  # fmt: skip
        hearing = asyncio.create_task(session.run(), name="call-hear")
        # ended when nothing is said for call_idle_s or the login expires: no poll (`idle.watch`)
        watching = asyncio.create_task(
            idle.watch(session, quiet, settings.call_idle_s, end, out.send_json, expires),
            name="call-watch",
        )
        # typed questions and job notices reach the call from now on; it may give its place
        calls.join(session, quiet, end)
        try:
            while (item := await inbox.get()) is not None:
                if isinstance(item, tuple):
                    await session.feed(*item)
                elif item.get("stop"):  # the page's Stop, on the call's conversation
                    await rt.sessions.stop(owner, session.conversation_id, "Stop")
                elif "played" in item and (report := Played.parse(item)) is not None:
                    await session.played(report)  # what of a reply the person heard
        except (WebSocketDisconnect, RuntimeError):
            pass  # the page went while the session was telling it something
        finally:
            for task in (hearing, watching):
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
            calls.part(session)
            await session.close()
            await listener.close()

    app.add_api_websocket_route("/listen", listen)
