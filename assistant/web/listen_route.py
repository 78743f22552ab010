"""`/listen`: the hands-free microphone stream, a WebSocket on the app's own server.

Why a WebSocket and not Gradio's streaming `gr.Audio`: Gradio sends a streamed microphone
as one queued event per chunk (an HTTP POST, a queue slot and a JSON round trip, 4 to 10 times
a second per listener), which costs the app CPU per chunk and cannot push "speech started"
back to the page the moment it happens (barge-in). Here the page's AudioWorklet sends raw
16 kHz PCM frames and the server answers with small JSON messages:

    {"kind": "speech", "utterance": 1}                  someone started speaking: barge-in
    {"kind": "partial", "utterance": 1, "text": ...}     the transcript so far
    {"kind": "final", "utterance": 1, "text": ..., "key": ...}   the turn: the page starts it
    {"kind": "ignored", "utterance": 1, "reason": ...}   noise, too short, or the reply's echo
    {"kind": "error", "text": ...}

The page sends {"playing": true, "text": <the reply being spoken>} and {"playing": false}
around its reply's playback: the listener's echo guard. Closing the socket (hands-free off, the
tab closed) drops the listener and its audio.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from assistant.errors import AssistantError
from assistant.records import now_ms
from assistant.settings import Settings
from assistant.web.turns import SpeechModels
from assistant.web.utterances import Utterance, Utterances

log = logging.getLogger(__name__)

MAX_FRAME_BYTES = 64 * 1024
"""2 s of 16 kHz int16 audio: the page sends 100 ms at a time."""


def ws_owner(app: Any, ws: WebSocket, settings: Settings) -> str | None:
    """The login behind a WebSocket (Gradio's own cookie), "local" without one; None: none."""
    if not settings.auth:
        return "local"
    cookie_id = getattr(app, "cookie_id", "")
    token = ws.cookies.get(f"access-token-{cookie_id}") or ws.cookies.get(
        f"access-token-unsecure-{cookie_id}"
    )
    user = getattr(app, "tokens", {}).get(token) if token else None
    return str(user) if user else None


def add_listen_route(
    app: Any, settings: Settings, speech: SpeechModels, utterances: Utterances
) -> None:
    from assistant.speech.listener import ListenConfig, Listener

    config = ListenConfig(end_pause_ms=settings.handsfree_pause_ms)

    async def listen(ws: WebSocket) -> None:
        owner = ws_owner(app, ws, settings)
        if owner is None:
            await ws.close(code=4401, reason="log in first")
            return
        await ws.accept()
        try:
            stt = await speech.stt()
        except AssistantError as e:
            await ws.send_json({"kind": "error", "text": f"hands-free is off: {e}"})
            await ws.close()
            return
        listener = Listener(stt, config)
        try:
            while True:
                message = await ws.receive()
                if message["type"] == "websocket.disconnect":
                    break
                data = message.get("bytes")
                if data is not None:
                    if len(data) > MAX_FRAME_BYTES or len(data) % 2:
                        await ws.send_json({"kind": "error", "text": "bad audio frame"})
                        break
                    for heard in await listener.feed(data, now_ms()):
                        await ws.send_json(_said(heard, owner, utterances))
                elif message.get("text"):
                    _control(listener, message["text"])
        except WebSocketDisconnect:
            pass
        finally:
            await listener.close()

    app.add_api_websocket_route("/listen", listen)


def _said(heard: Any, owner: str, utterances: Utterances) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": heard.kind, "utterance": heard.utterance}
    if heard.kind in ("partial", "final"):
        out["text"] = heard.text
    if heard.kind == "ignored":
        out["reason"] = heard.reason
    if heard.kind == "final":
        stages = {"endpoint": heard.endpoint_ms, "stt": heard.stt_ms}
        out["key"] = utterances.put(
            Utterance(
                owner=owner,
                text=heard.text,
                last_word_ms=heard.last_word_ms if heard.last_word_ms is not None else now_ms(),
                heard_ms={k: v for k, v in stages.items() if v is not None},
            )
        )
    return out


def _control(listener: Any, text: str) -> None:
    try:
        control = json.loads(text)
    except ValueError:
        return
    if isinstance(control, dict) and "playing" in control:
        said = control.get("text") if control["playing"] else None
        listener.playing(str(said) if said else None)
