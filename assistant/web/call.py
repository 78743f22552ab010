"""`/listen`: a call's WebSocket on the app's own server; its wire and nothing else.

Why a WebSocket and not Gradio's streaming `gr.Audio`: Gradio sends a streamed microphone
as one queued event per chunk (an HTTP POST, a queue slot and a JSON round trip, 4 to 10 times
a second per listener), which costs the app CPU per chunk and cannot push "speech started"
back to the page the moment it happens (barge-in). Here the page's AudioWorklet sends raw
16 kHz PCM frames and small JSON controls: {"stop": true} for its Stop button (Stop on the
call's conversation, as the page's is), and {"played": utterance, "ms": n, "interrupted":
bool} when a reply's audio stops playing (`call.playback`). The call answers with small JSON
messages (`call.messages`) and the reply's audio.

This module only translates: it checks the login (closed with 4401 without one), asks the
open calls for a place (`Calls.enter`; a refused call is told why, code 4429), reads the
socket from the moment it opens into `call.line`'s `Inbound` items (each frame checked as it
arrives: `frame_refusal`), and writes what the call sends. The call itself, its models, its
turns and when it ends, is `call.line.take_call`. A socket that sends nothing for `IDLE_S` is
dropped: the page sends audio ten times a second, so silence on the wire means the page is
gone or stuck, not that the person is quiet.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import TYPE_CHECKING, Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from assistant.call import idle
from assistant.call.line import Inbound, Pace, frame_refusal, take_call
from assistant.records import now_ms
from assistant.speech.models import SpeechModels
from assistant.web.edge.identity import login_expiry, socket_owner

if TYPE_CHECKING:
    from assistant.runtime import Runtime

IDLE_S = 15.0


class CallSocket:
    """A call's WebSocket as its `Line`: the reader, the session's tasks and the call write to
    it, one at a time."""

    def __init__(self, ws: WebSocket) -> None:
        self.ws, self.lock = ws, asyncio.Lock()

    async def send_json(self, message: dict[str, Any]) -> None:
        async with self.lock:
            await self.ws.send_json(message)

    async def send_bytes(self, data: bytes) -> None:
        async with self.lock:
            await self.ws.send_bytes(data)

    async def close(self, code: int, reason: str) -> None:
        await self.ws.close(code=code, reason=reason[:120])


async def read_call(ws: WebSocket, inbox: asyncio.Queue[Inbound], out: CallSocket) -> None:
    """Read the call's socket as messages arrive: frames checked (size, pace) on arrival and
    stamped with it, controls passed on; None last, however the call ends."""
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
    """`/listen` on `app`: each call `take_call` on the runtime `rt`."""
    settings, calls = rt.settings, rt.calls
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
        out, expires = CallSocket(ws), login_expiry(ws)
        # The socket is read from the moment it opens: the page sends as soon as it is open,
        # and loading the models can take seconds on a busy machine. Read later, that audio
        # came in as one burst that the pace check refused, ending the call unheard; read
        # now, it is paced as it arrives and heard once the models are ready.
        inbox: asyncio.Queue[Inbound] = asyncio.Queue()
        reader = asyncio.create_task(read_call(ws, inbox, out), name="call-read")
        try:
            with contextlib.suppress(WebSocketDisconnect, RuntimeError):  # the page went
                await take_call(rt, speech, owner, out, inbox, expires)
        finally:
            reader.cancel()
            with contextlib.suppress(BaseException):
                await reader
            calls.leave(owner)

    app.add_api_websocket_route("/listen", listen)
