"""Small ASGI pieces the edge middleware shares: answering a refusal (HTTP or WebSocket),
reading a request's body once and handing it on."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def header_map(scope: Scope) -> dict[str, str]:
    """The request's headers, names lowercase (the last of repeated ones wins)."""
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


async def refuse(
    scope: Scope, send: Send, status: int, text: str, extra: dict[str, str] | None = None
) -> None:
    """Answer `status` with a one-line plain-text reason (on `/v1`, an OpenAI-style error, so
    its clients show the reason). A WebSocket is refused during its handshake with the same
    status where the server supports it (uvicorn does), so a client sees 421/403/401 and the
    reason rather than a bare close."""
    body, kind = text.encode(), b"text/plain; charset=utf-8"
    if scope["path"].startswith("/v1/"):
        error = "permission_error" if status == 403 else "invalid_request_error"
        body = json.dumps({"error": {"message": text, "type": error, "code": None}}).encode()
        kind = b"application/json"
    headers = [(b"content-type", kind)]
    headers.append((b"content-length", str(len(body)).encode()))
    headers += [(k.encode(), v.encode()) for k, v in (extra or {}).items()]
    if scope["type"] == "websocket":
        if "websocket.http.response" not in scope.get("extensions", {}):
            await send({"type": "websocket.close", "code": 1008, "reason": text[:120]})
            return
        start = {"type": "websocket.http.response.start", "status": status, "headers": headers}
        await send(start)
        await send({"type": "websocket.http.response.body", "body": body})
        return
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class TooLarge(Exception):
    """The body passed the limit it was read with."""


async def read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body; None: the client left first. TooLarge past `limit` bytes."""
    body = b""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        body += message.get("body", b"")
        if len(body) > limit:
            raise TooLarge
        if not message.get("more_body", False):
            return body


def capped(receive: Receive, limit: int) -> Receive:
    """A `receive` that ends the request as if the client had left once its body passes
    `limit` bytes: the route stops reading and nothing past the limit is stored."""
    seen = 0

    async def capping() -> Message:
        nonlocal seen
        message = await receive()
        seen += len(message.get("body", b""))
        if message["type"] == "http.request" and seen > limit:
            return {"type": "http.disconnect"}
        return message

    return capping


def counted(receive: Receive, add: Callable[[int], None]) -> Receive:
    """A `receive` that tells `add` the size of each part of the body as it arrives."""

    async def counting() -> Message:
        message = await receive()
        if message["type"] == "http.request" and message.get("body"):
            add(len(message["body"]))
        return message

    return counting


def replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives the app the body already read, then the client's messages."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again
