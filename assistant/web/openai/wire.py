"""The OpenAI-compatible API's wire format: parsing a request, errors, the per-login threads of
conversations, admission gates and the event stream (used by `web.openai.route`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from assistant.errors import (
    AssistantError,
    BadInput,
    Busy,
    Conflict,
    EngineError,
    EngineUnavailable,
)
from assistant.records import RouteDecision, TurnResult
from assistant.settings import Settings
from assistant.web.openai.housekeeping import Chore, recognise
from assistant.web.openai.shown_thinking import strip_shown_thinking

MODEL = "assistant"
"""The one model this server lists: the assistant, lanes and router included."""
MAX_BODY_BYTES = 2 * 1024 * 1024
"""A request's JSON at most: the history a lane can use is far smaller."""
MAX_MESSAGES = 1000
RETRY_AFTER_S = 2
"""What a refused client is told to wait before trying again."""
STREAM_EVERY_S = 0.05
"""Streamed deltas are sent at most this often (the page's rate); the first one at once."""
WAIT_HEADER = "x-assistant-wait"
CONVERSATION_HEADER = "x-assistant-conversation"
"""A conversation of the login's by id, or `latest`: its most recently active one."""
LATEST = "latest"
HISTORY_HEADER = "x-assistant-history"
"""`stored`: the turn carries the named conversation's history as the app keeps it (what the
page's turns read: stopped replies as heard, marked), not the messages before the last."""
IDEMPOTENCY_HEADER = "idempotency-key"
MAX_KEY_CHARS = 200
EFFORT_LANES = {"none": "chat", "minimal": "chat", "low": "chat", "high": "deep"}
"""`reasoning_effort` picks the lane itself; "medium" (or none given) leaves it to the router."""
STANDARD_FINISH = {"stop": "stop", "length": "length", "delegated": "stop", "tool_calls": "stop"}


class ApiError(Exception):
    """An OpenAI-shaped error: HTTP status, `{"error": {"message", "type", "code"}}`."""

    def __init__(
        self, status: int, message: str, kind: str, code: str | None = None, *,
        retry_after: float | None = None,
    ):  # fmt: skip
        super().__init__(message)
        self.status, self.message, self.kind, self.code = status, message, kind, code
        self.retry_after = retry_after

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": None,
                          "code": self.code}}  # fmt: skip

    def response(self) -> Response:
        headers = {"retry-after": str(int(self.retry_after))} if self.retry_after else None
        return JSONResponse(self.body(), self.status, headers=headers)


def api_error(e: AssistantError) -> ApiError:
    """The HTTP form of an error a turn raised."""
    if isinstance(e, BadInput):
        return ApiError(400, str(e), "invalid_request_error")
    if isinstance(e, Busy):
        return ApiError(429, str(e), "rate_limit_error", "busy", retry_after=RETRY_AFTER_S)
    if isinstance(e, Conflict):
        return ApiError(409, str(e), "invalid_request_error", "idempotency_key_reused")
    if isinstance(e, EngineUnavailable):
        return ApiError(503, str(e), "engine_unavailable", retry_after=RETRY_AFTER_S)
    if isinstance(e, EngineError):
        return ApiError(502, str(e), "engine_error")
    return ApiError(500, str(e), "server_error")


def result_error(result: TurnResult) -> ApiError:
    """A turn that ended with an error and no answer at all, as an HTTP error."""
    text = result.error or "the engine gave no answer"
    if "too many requests" in text:  # the lanes' bounded waiting room (engine.lanes)
        return ApiError(429, text, "rate_limit_error", "busy", retry_after=RETRY_AFTER_S)
    if result.exhausted:
        return ApiError(502, text, "engine_error", "budget_exhausted")
    if "unreachable" in text or "busy or failing" in text:
        return ApiError(503, text, "engine_unavailable", retry_after=RETRY_AFTER_S)
    return ApiError(502, text, "engine_error")


# --- the request -------------------------------------------------------------------------


@dataclass(frozen=True)
class Completion:
    """A chat completion request, checked: the last user message and the exchanges before."""

    text: str
    history: tuple[tuple[str, str], ...]
    stream: bool
    usage: bool
    """Stream a usage chunk at the end (`stream_options.include_usage`)."""
    deep: Literal["follow", "inline", "handoff"]
    """What a deep decision does: a job whose answer this reply streams (the default), the
    deep lane in this request (a client that chose the effort itself uses the assistant as
    its engine), or a job answered with the hand-off (`"wait": false`)."""
    decision: RouteDecision | None
    max_tokens: int | None
    conversation: str | None
    job_key: str | None = None
    """`Idempotency-Key`: a job a deep decision hands off is created once per key."""
    chore: Chore | None = None
    """A client's own housekeeping (a title, tags, ...): chat lane, no conversation."""
    stored_history: bool = False
    """The app's own history of `conversation` is the turn's (`HISTORY_HEADER`)."""

    def after(self, result: TurnResult) -> tuple[tuple[str, str], ...]:
        """The history a client sends next, once it has this turn's reply."""
        return (*self.history, (self.text, result.reply.strip()))


def text_of(content: Any) -> str:
    """A message's text: a string, or the text parts of a content list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text":
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise ApiError(400, f"only text content is supported (got {kind!r})",
                               "invalid_request_error", "unsupported_content")  # fmt: skip
            parts.append(str(part.get("text", "")))
        return "".join(parts)
    raise ApiError(400, "a message's content must be a string or a list of parts",
                   "invalid_request_error")  # fmt: skip


def exchanges(messages: list[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """(request, reply) pairs from alternating messages; messages of the same role in a row
    are joined (a client may send two user messages before a reply)."""
    runs: list[tuple[str, list[str]]] = []  # joined once: `+=` in a loop is quadratic
    for role, text in messages:
        if runs and runs[-1][0] == role:
            runs[-1][1].append(text)
        else:
            runs.append((role, [text]))
    pairs: list[tuple[str, str]] = []
    pending: str | None = None
    for role, parts in runs:
        text = "\n\n".join(parts)
        if role == "user":
            pending = text
        elif pending is not None:
            pairs.append((pending.strip(), text.strip()))
            pending = None
        # a reply with no request before it (a client's greeting) has no place in the prompt
    return tuple(pairs)


def parse(body: Any, headers: dict[str, str], settings: Settings) -> Completion:
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object", "invalid_request_error")
    model = body.get("model")
    if model != MODEL:
        raise ApiError(404, f"the model {model!r} does not exist; this server has one model, "
                       f"{MODEL!r}", "invalid_request_error", "model_not_found")  # fmt: skip
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise ApiError(400, "messages must be a non-empty list", "invalid_request_error")
    if len(raw) > MAX_MESSAGES:
        raise ApiError(400, f"at most {MAX_MESSAGES} messages", "invalid_request_error")
    if body.get("n", 1) not in (1, None):
        raise ApiError(400, "only n=1 is supported", "invalid_request_error")
    messages: list[tuple[str, str]] = []
    for m in raw:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ApiError(400, "each message needs a role", "invalid_request_error")
        role = m["role"]
        if role == "user":
            messages.append((role, text_of(m.get("content"))))
        elif role == "assistant":
            messages.append((role, strip_shown_thinking(text_of(m.get("content")))))
        elif role not in ("system", "developer", "tool"):
            raise ApiError(400, f"unknown message role {role!r}", "invalid_request_error")
        # system/developer: the assistant's own system prompt leads instead; tool results
        # have no place in a turn (the endpoint runs no client tools)
    if not messages or messages[-1][0] != "user":
        raise ApiError(400, "the last message must be the user's", "invalid_request_error")
    last = len(messages) - 1
    while last > 0 and messages[last - 1][0] == "user":
        last -= 1  # the user's last messages in a row are one request
    text = "\n\n".join(t for _, t in messages[last:]).strip()
    limit = settings.max_text_chars
    if len(text) > limit:  # before any pattern reads it (housekeeping)
        raise ApiError(400, f"the message is too long ({len(text)} characters; the limit is "
                       f"{limit}, max_text_chars)", "invalid_request_error")  # fmt: skip
    effort = body.get("reasoning_effort")
    lane = EFFORT_LANES.get(str(effort).lower()) if effort else None
    chore = recognise(text, last > 0, body)
    decision = (
        RouteDecision(lane="chat", reason=chore.reason, text=text)
        if chore is not None  # small work whatever effort the client's task model asks for
        else RouteDecision(lane=lane, reason=f"explicit: reasoning_effort {effort}", text=text)  # type: ignore[arg-type]
        if lane
        else None
    )
    budget = body.get("max_completion_tokens") or body.get("max_tokens")
    # a JSON `true` is a Python int: refused by name
    if budget is not None and (
        isinstance(budget, bool) or not isinstance(budget, int) or budget < 1
    ):
        raise ApiError(400, "max_tokens must be a positive whole number", "invalid_request_error")
    options = body.get("stream_options") or {}
    said = body.get("wait", headers.get(WAIT_HEADER))
    handoff = said is False or str(said).lower() in ("0", "false", "no")
    job_key = headers.get(IDEMPOTENCY_HEADER, "").strip() or None
    if job_key is not None and len(job_key) > MAX_KEY_CHARS:
        raise ApiError(400, f"Idempotency-Key: at most {MAX_KEY_CHARS} characters",
                       "invalid_request_error")  # fmt: skip
    return Completion(
        text=text,
        history=exchanges(messages[:last]),
        stream=body.get("stream") is True,
        usage=isinstance(options, dict) and options.get("include_usage") is True,
        # a client that set the effort itself uses the assistant as its engine: it wants the
        # answer in the reply from the request it can cancel, not a job that outlives it
        deep="inline" if lane == "deep" and chore is None else "handoff" if handoff else "follow",
        decision=decision,
        max_tokens=budget,
        conversation=headers.get(CONVERSATION_HEADER) or None,
        job_key=job_key,
        chore=chore,
        stored_history=headers.get(HISTORY_HEADER, "").strip().lower() == "stored",
    )


async def read_json(request: Request, limit: int = MAX_BODY_BYTES) -> Any:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"the request is larger than {limit} bytes", "invalid_request_error")
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise ApiError(413, f"the request is larger than {limit} bytes",
                               "invalid_request_error")  # fmt: skip
    except ClientDisconnect as e:
        raise ApiError(400, "the client left before sending its request",
                       "invalid_request_error") from e  # fmt: skip
    try:
        return json.loads(body)
    except ValueError as e:
        raise ApiError(400, f"the body is not JSON: {e}", "invalid_request_error") from e
    except RecursionError as e:  # thousands of nested brackets: not a request, not a 500
        raise ApiError(400, "the body's JSON is nested too deeply", "invalid_request_error") from e


# --- the responses -----------------------------------------------------------------------


def header_safe(text: str) -> str:
    """A reason as a header value: printable ASCII, anything else percent-encoded."""
    return quote(text, safe=" !#$&'()*+,-./:;<=>?@[]^_`{|}~") if text else ""


def extra_of(result: TurnResult, cid: str | None) -> dict[str, Any]:
    """The `assistant` field: what the turn did, beyond the OpenAI shape."""
    return {
        "lane": result.lane,
        "reason": result.reason,
        "finish_reason": result.finish_reason,
        "job_id": result.job_id,
        "conversation_id": cid,
        "error": result.error,
        "incomplete": result.incomplete,
        "timings_ms": result.timings.as_dict(),
    }


CUT_FINISH = "error"
"""The finish reason of an answer that ended early for a reason other than its token budget
(a cut or stalled stream, a crashed engine, a deadline): OpenAI's names have none, and
"length" (what was said before) tells a client to raise `max_tokens`, which would not help
(issue 38). vLLM says "abort" for its own; the SDKs pass any string through."""


def finish_of(result: TurnResult) -> str:
    """The OpenAI finish reason; the assistant's own (cut, stalled, ...) is in `assistant`."""
    return STANDARD_FINISH.get(
        result.finish_reason or "", CUT_FINISH if result.incomplete else "stop"
    )


def usage_of(history: tuple[tuple[str, str], ...], text: str, result: TurnResult) -> dict:
    from assistant.engine.transcript import estimate_tokens

    prompt = sum(estimate_tokens(u) + estimate_tokens(r) for u, r in history)
    prompt += estimate_tokens(text)
    return {"prompt_tokens": prompt, "completion_tokens": result.tokens,
            "total_tokens": prompt + result.tokens}  # fmt: skip


def sse(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"


class EventStream(Response):
    """A `text/event-stream` response from an async iterator of bytes that stops the iterator
    when the client leaves. Starlette's StreamingResponse does the same in an anyio task group
    whose cancel formats the task's repr (an inspect of every callback: about a millisecond
    a response here); two plain tasks do it for nothing."""

    media_type = "text/event-stream"

    def __init__(self, body: AsyncIterator[bytes], headers: dict[str, str]):
        # as StreamingResponse sets itself up: no body, so no content-length
        self.body_iterator = body
        self.status_code = 200
        self.background = None
        self.init_headers(headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        pump = asyncio.ensure_future(self._pump(send))
        watch = asyncio.ensure_future(self._watch(receive))
        try:
            await asyncio.wait((pump, watch), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (pump, watch):
                task.cancel()  # the client left: the turn's stream closes (and is stored)
            await asyncio.gather(pump, watch, return_exceptions=True)
        if not pump.cancelled() and pump.exception() is not None:
            raise pump.exception()  # type: ignore[misc]

    async def _pump(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code,
                    "headers": self.raw_headers})  # fmt: skip
        async for data in self.body_iterator:
            await send({"type": "http.response.body", "body": data, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    @staticmethod
    async def _watch(receive: Receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
