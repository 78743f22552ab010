"""What a call tells its page: the messages of the call's socket, one place.

Messages to the page (JSON; reply audio as binary frames):

    {"kind": "state", "state": "listening" | "hearing" | "thinking" | "speaking"}
    {"kind": "speech" | "partial" | "ignored", "utterance": n, "text": ..., "reason": ...}
    {"kind": "turn", "utterance": n, "text": ...}          the committed request
    {"kind": "reply", "utterance": n, "text": ...}         the reply so far
    binary frame                          reply audio: the sample rate (uint32 LE), then int16 PCM
    {"kind": "done", "utterance": n, "stopped": bool}
    {"kind": "barge", "utterance": n}                      stop playing now
    {"kind": "error", "text": ...}                         said to the person
    {"kind": "idle", "ends_in_s": n, "text": ...}          a quiet call ends soon (`call.idle`)
"""

from __future__ import annotations

from typing import Any

from assistant.call.turn_taking import Event


def shown(event: Event, utterance: int, reason: str = "") -> dict[str, Any] | None:
    """The page's message for what the table's SHOW action shows (None: nothing to show).
    `utterance`: the turn's number (a typed turn's is the session's own)."""
    kind, text = event.kind, event.text
    if kind in ("final", "typed"):
        return {"kind": "turn", "utterance": utterance, "text": text}
    if kind == "speech":
        return {"kind": "speech", "utterance": utterance}
    if kind == "partial":
        return {"kind": "partial", "utterance": utterance, "text": text}
    if kind == "ignored":
        return {"kind": "ignored", "utterance": utterance, "reason": reason}
    if kind == "notice":
        return {"kind": "error", "text": reason}
    return None
