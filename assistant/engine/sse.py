"""A lean reader for the engine's streams: the official client's request, a plain SSE parser.

The official `openai` client builds a typed model per streamed chunk (about 80 us each here,
for ~35 chunks a reply); `json.loads` takes 2 us. `LeanClient` wraps the injected
`AsyncOpenAI` and changes only streamed `chat.completions.create` / `completions.create`: the
request still goes through the client (its base URL, key, headers, timeouts, status errors
such as 429 with Retry-After), and the answer is read line by line into `Chunk`s, dicts with
attribute access, so `chunk.choices[0].delta.content` reads as on the SDK's models and a field
the engine did not send is None (`model_extra` included). Everything else is the client's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
from openai import AsyncOpenAI

DRAIN_S = 0.5
"""How long the rest of a body after `[DONE]` may take to read before the connection is cut."""


class Chunk(dict):
    """A parsed JSON object; `chunk.name` is `chunk.get("name")`."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        return self.get(name)


def parse(payload: str) -> Chunk:
    return json.loads(payload, object_hook=Chunk)


def _payload(event: bytes) -> str | None:
    """The data of one SSE event (its `data:` lines joined); None for an event without any
    (a comment, a keep-alive)."""
    data = [
        line[6:] if line.startswith(b"data: ") else line[5:]
        for line in event.split(b"\n")
        if line.startswith(b"data:")
    ]
    return b"\n".join(data).decode() if data else None


MERGED = "x_merged"
"""A coalesced chunk's count of the engine's chunks (tokens) it holds (`coalesced`)."""
_TEXT_FIELDS = ("content", "reasoning_content", "reasoning")


def _piece(chunk: Chunk) -> tuple[str, str] | None:
    """(field, text) of a chunk that is only a piece of streamed text (one choice, its delta
    one text field, or a completion's text; no role, tool call, finish, usage or logprobs);
    None for any other."""
    if chunk.get("usage") is not None or chunk.get("error"):
        return None
    choices = chunk.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
        return None
    choice = choices[0]
    if choice.get("finish_reason") is not None or choice.get("logprobs") is not None:
        return None
    if choice.get("index") not in (None, 0):
        return None
    delta = choice.get("delta")
    if delta is None:
        text = choice.get("text")
        return ("text", text) if isinstance(text, str) else None
    if not isinstance(delta, dict):
        return None
    present = [(k, v) for k, v in delta.items() if v is not None and v != []]
    if len(present) != 1 or present[0][0] not in _TEXT_FIELDS or not isinstance(present[0][1], str):
        return None
    return present[0]


def coalesced(chunks: list[Chunk]) -> list[Chunk]:
    """The chunks one read of the socket brought, consecutive pieces of the same text joined
    into one (counted in `MERGED`): each chunk costs the same CPU through every layer above
    (the deadline, the fold, the guard, the turn, the session's hand-off, the client's SSE),
    whatever its length, and under load the engine's tokens arrive several to a read. Nothing
    waits for more: what was read goes up at once."""
    if len(chunks) < 2:
        return chunks
    out: list[Chunk] = []
    last: tuple[str, str] | None = None
    for chunk in chunks:
        piece = _piece(chunk)
        if piece is not None and last is not None and piece[0] == last[0]:
            head = out[-1]
            choice = head["choices"][0]
            if piece[0] == "text":
                choice["text"] += piece[1]
            else:
                choice["delta"][piece[0]] += piece[1]
            head[MERGED] = (head.get(MERGED) or 1) + (chunk.get(MERGED) or 1)
            continue
        out.append(chunk)
        last = piece
    return out


class LeanStream:
    """One streamed response as `Chunk`s. Ends at `[DONE]` or the end of the body; an error
    event raises `openai.APIError` like the SDK's stream; a broken or silent connection
    raises the SDK's connection or timeout error."""

    def __init__(self, response: Any):
        self.response = response

    def __aiter__(self) -> AsyncIterator[Chunk]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[Chunk]:
        # bytes split at blank lines, not the client's text lines: its line decoder costs
        # more than the parsing (measured 13.3 against 10.4 ms of CPU a reply)
        buffer = b""
        try:
            body = self.response.aiter_bytes()
            async for data in body:
                buffer += data.replace(b"\r\n", b"\n") if b"\r" in data else data
                *events, buffer = buffer.split(b"\n\n")
                read: list[Chunk] = []
                done = False
                for event in events:
                    payload = _payload(event)
                    if payload == "[DONE]":
                        done = True
                        break
                    if payload is not None:
                        read.append(parse(payload))
                for chunk in coalesced(read):
                    yield self._checked(chunk)
                if done:
                    await _drain(body)
                    return
            payload = _payload(buffer)
            if payload is not None and payload != "[DONE]":
                yield self._checked(parse(payload))
        except (openai.APIError, asyncio.CancelledError, ValueError):
            raise
        except Exception as e:  # the transport's own errors, as the SDK's stream raises them
            request = self.response.request
            if "timeout" in type(e).__name__.lower():
                raise openai.APITimeoutError(request=request) from e
            message = str(e) or type(e).__name__
            raise openai.APIConnectionError(message=message, request=request) from e

    def _checked(self, chunk: Chunk) -> Chunk:
        error = chunk.get("error")
        if error:
            message = error.get("message") if isinstance(error, dict) else str(error)
            raise openai.APIError(
                message or "the engine sent an error", self.response.request, body=error
            )
        return chunk

    async def close(self) -> None:
        await self.response.aclose()


async def _drain(body: AsyncIterator[bytes]) -> None:
    """Read the body's end after `[DONE]` (the chunked encoding's last bytes), so the
    connection goes back to the pool: closing a response with unread bytes closes its
    connection, and every request opens a new one (a TCP connect, and anyio's happy-eyeballs
    cancel, which formats a task's repr: measured the largest share of the app's Python time
    per turn). Bounded: an engine that keeps the stream open is cut after DRAIN_S."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(DRAIN_S):
            async for _ in body:
                pass


class _Create:
    """`create(...)` of one endpoint: streamed requests read by `LeanStream`."""

    def __init__(self, client: AsyncOpenAI, path: str, resource: Any):
        self._client, self._path, self._resource = client, path, resource

    async def create(self, **params: Any) -> Any:
        if not params.get("stream"):
            return await self._resource.create(**params)
        options: dict[str, Any] = {}
        for name in ("extra_headers", "extra_query", "timeout"):
            if params.get(name) is not None:
                options[name.removeprefix("extra_")] = params.pop(name)
        body = {k: v for k, v in params.items() if k != "extra_body"}
        body.update(params.get("extra_body") or {})
        response = await self._client.post(
            self._path, body=body, cast_to=httpx.Response, stream=True, options=options
        )  # type: ignore[call-overload]
        return LeanStream(response)


class _Chat:
    def __init__(self, client: AsyncOpenAI):
        self.completions = _Create(client, "/chat/completions", client.chat.completions)


class LeanClient:
    """An `AsyncOpenAI` whose streamed completions are read by `LeanStream`."""

    def __init__(self, client: AsyncOpenAI):
        self._client = client
        self.chat = _Chat(client)
        self.completions = _Create(client, "/completions", client.completions)

    def with_options(self, **options: Any) -> LeanClient:
        return LeanClient(self._client.with_options(**options))

    def __getattr__(self, name: str) -> Any:  # models, base_url, close, ...
        return getattr(self._client, name)
