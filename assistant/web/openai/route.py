"""`POST /v1/chat/completions` and `GET /v1/models`: the assistant as an OpenAI-compatible
server, on the app's own ASGI app beside Gradio's routes and outside Gradio's queue.

A request is a turn through the same pipeline as the page's: the router decides the lane from
the last user message (a deep decision becomes a job whose reasoning and answer the reply
streams as the job runs, or the hand-off text when the request asks for it with `"wait": false`),
the lane scheduler admits it, and the turn is stored in one of the login's conversations, so it
shows in the page's sidebar. A client's own housekeeping (`web.openai.housekeeping`: titles, tags,
follow-ups) takes the chat lane and no conversation, and is answered as its prompt asks. History
comes from the request's messages; the assistant's own system prompt leads (a client's system
messages are not used: no prompt is reachable through a request).

The lane and the routing reason are in the headers `X-Assistant-Lane` and `X-Assistant-Reason`
(so the response starts only once the turn has its first token: a failure before it is a
proper HTTP error) and in the extra field `assistant` of the final chunk (or of the response).

Who may call: with `ASSISTANT_AUTH`, a bearer `USER:PASSWORD` of one of its logins (failures
throttled like the page's login); without it, loopback clients only, never one a reverse
proxy forwarded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from assistant import limits
from assistant.errors import AssistantError
from assistant.records import TurnEvent, TurnResult, now_ms
from assistant.session import Ask, Sessions
from assistant.settings import Settings
from assistant.web.edge.identity import Gate, LocalGate
from assistant.web.openai import housekeeping
from assistant.web.openai.threads import THREADS_KEPT, Threads, thread_key  # noqa: F401
from assistant.web.openai.wire import (  # noqa: F401  (re-exported)
    CONVERSATION_HEADER,
    EFFORT_LANES,
    LATEST,
    MAX_BODY_BYTES,
    MAX_MESSAGES,
    MODEL,
    RETRY_AFTER_S,
    STANDARD_FINISH,
    STREAM_EVERY_S,
    WAIT_HEADER,
    ApiError,
    Completion,
    EventStream,
    api_error,
    exchanges,
    extra_of,
    finish_of,
    header_safe,
    parse,
    read_json,
    result_error,
    sse,
    text_of,
    usage_of,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
KEEPALIVE = b": waiting for the deep lane\n\n"
CLIENT_LEFT = 499
"""The status logged for a request whose client left before its answer (nginx's code)."""


class Admission:
    """At most `limit` API turns at once, and `per_login` of one login's; the next is refused
    (429) rather than queued without bound, so one login cannot take every place. Inside, the
    lanes decide who reaches the engine first."""

    def __init__(self, limit: int, per_login: int):
        self.limit, self.per_login = limit, per_login
        self._count = limits.api_requests(per_login, limit)
        self.by_login: dict[str, int] = self._count.open

    @property
    def active(self) -> int:
        return sum(self.by_login.values())

    def enter(self, owner: str) -> None:
        why = self._count.enter(owner)
        if why is not None:
            raise ApiError(429, why, "rate_limit_error", "busy", retry_after=RETRY_AFTER_S)

    def leave(self, owner: str) -> None:
        self._count.leave(owner)


class OpenAIRoute:
    """The endpoint's handlers, over the app's pipeline and conversations. `local_secret`:
    this start's secret for its own command line (`LocalGate`)."""

    def __init__(self, sessions: Sessions, settings: Settings, local_secret: str | None = None):
        self.sessions = sessions
        self.settings = settings
        self.gate: Gate | LocalGate = Gate(settings)
        if local_secret:
            self.gate = LocalGate(self.gate, local_secret)
        self.threads = Threads(sessions.conversations)
        self.admission = Admission(settings.max_queue, settings.max_api_per_user)

    def admit(self, request: Request) -> str:
        """The request's login, given one of the endpoint's places (`admission.leave(login)`
        frees it); ApiError if it has no login or no place is free."""
        owner = self.gate.owner(request)
        self.admission.enter(owner)
        return owner

    async def models(self, request: Request) -> Response:
        try:
            self.gate.owner(request)
        except ApiError as e:
            return e.response()
        entry = {"id": MODEL, "object": "model", "created": 0, "owned_by": "assistant"}
        return JSONResponse({"object": "list", "data": [entry]})

    async def completions(self, request: Request) -> Response:
        received = now_ms()
        try:
            owner = self.gate.owner(request)
            body = await read_json(request)
            # up to MAX_BODY_BYTES of messages to read through: off the event loop (issue 38)
            ask = await asyncio.to_thread(parse, body, dict(request.headers), self.settings)
            self.admission.enter(owner)
        except ApiError as e:
            return e.response()
        events: AsyncIterator[TurnEvent] | None = None
        streaming = False  # once true, the stream's body closes the turn and leaves
        try:
            # refused text must not leave an empty conversation behind
            limits.check_text(ask.text, self.settings.max_text_chars)
            # a client's housekeeping is no conversation: it neither starts nor renames one
            if ask.chore is None and ask.conversation == LATEST:  # the command line's default
                session = self.sessions.latest(owner) or self.sessions.of(owner, None)
                cid: str | None = session.conversation_id
            else:
                cid = None if ask.chore else self.threads.find(owner, ask.history, ask.conversation)
                session = self.sessions.none(owner) if cid is None else self.sessions.of(owner, cid)
            turn = Ask(
                text=ask.text,
                deep_inline=ask.deep == "inline",
                follow_job=ask.deep == "follow",
                housekeeping=ask.chore is not None,
                decision=ask.decision,
                # the app's own history when asked for (the command line: the same prompt as
                # the page's turns, stopped replies as heard); else the client's messages
                history=None if ask.stored_history and cid is not None else ask.history,
                max_tokens=ask.max_tokens,
                received_ms=received,
                source="api",
                job_key=ask.job_key,
            )
            # a client may send several at once on one conversation: none stops another
            events = session.ask(turn, supersede=False)
            # housekeeping is answered whole: its answer is checked before it is sent
            whole = not ask.stream or ask.chore is not None
            first = await unless_client_leaves(request, self._until_first(events, to_end=whole))
            if first is None:  # nobody will read the answer: the turn stopped where it was
                return Response(status_code=CLIENT_LEFT)
            held, result = first
            decision = next((e.decision for e in held if e.decision is not None), None)
            if decision is None:
                raise ApiError(500, "the turn ended before it was routed", "server_error")
            if result is not None:
                if cid is not None and not ask.stored_history:
                    self.threads.remember(owner, ask.after(result), cid)
                if result.error and not result.reply:
                    raise result_error(result)
                if ask.chore is not None:
                    held = self._chore(ask, result, held)
            headers = {
                "x-assistant-lane": decision.lane,
                "x-assistant-reason": header_safe(decision.reason),
            }
            if cid is not None:
                headers["x-assistant-conversation"] = cid
            job_id = result.job_id if result is not None else None
            job_id = job_id or next((e.text for e in held if e.kind == "waiting"), None)
            if job_id:
                headers["x-assistant-job"] = job_id
            if not ask.stream:
                assert result is not None  # not streaming: run to the end first
                return JSONResponse(self._whole(ask, result, cid), headers=headers)
            body = self._stream(ask, owner, cid, events, held)
            streaming = True
            return EventStream(
                body, headers={**headers, "cache-control": "no-cache", "x-accel-buffering": "no"}
            )
        except ApiError as e:
            return e.response()
        except AssistantError as e:
            return api_error(e).response()
        finally:
            if not streaming:  # answered (or failed) here, not by a stream
                if events is not None:
                    await events.aclose()  # type: ignore[attr-defined]
                self.admission.leave(owner)

    @staticmethod
    async def _until_first(
        events: AsyncIterator[TurnEvent], *, to_end: bool
    ) -> tuple[list[TurnEvent], TurnResult | None]:
        """Events up to the first token (`to_end`: to the end, then the result too), held
        back so the headers can say the lane and an early failure is still an HTTP error."""
        held: list[TurnEvent] = []
        async for event in events:
            held.append(event)
            if event.kind == "done":
                return held, event.result
            if not to_end and event.kind in ("content", "reasoning", "waiting") and event.text:
                break  # a followed job's "waiting": the reply starts while the job queues
        return held, None

    @staticmethod
    def _chore(ask: Completion, result: TurnResult, held: list[TurnEvent]) -> list[TurnEvent]:
        """A housekeeping answer as its client needs it (JSON with the key its prompt asked
        for), and the events a stream sends for it: the checked answer in one piece."""
        assert ask.chore is not None
        result.reply = housekeeping.answer(ask.chore, result.reply, ask.text)
        result.reasoning = ""  # nobody reads a title's thinking
        route = [e for e in held if e.kind == "route"]
        return [*route, TurnEvent("content", text=result.reply), TurnEvent("done", result=result)]

    def _whole(self, ask: Completion, result: TurnResult, cid: str | None) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": result.reply}
        if result.reasoning:
            message["reasoning"] = result.reasoning
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": MODEL,
            "choices": [{"index": 0, "message": message, "finish_reason": finish_of(result)}],
            "usage": usage_of(ask.history, ask.text, result),
            "assistant": extra_of(result, cid),
        }

    async def _stream(
        self,
        ask: Completion,
        owner: str,
        cid: str | None,
        events: AsyncIterator[TurnEvent],
        held: list[TurnEvent],
    ) -> AsyncIterator[bytes]:
        """The SSE body: the held events, then the rest of the turn as it comes."""
        base = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": MODEL}  # fmt: skip

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            return sse({**base, "choices": [choice], **extra})

        async def turn() -> AsyncIterator[TurnEvent]:
            for event in held:
                yield event
            if not any(e.kind == "done" for e in held):
                async for event in events:
                    yield event

        streamed = ""
        out = [chunk({"role": "assistant", "content": ""})]
        pending: list[list[str]] = []  # [kind, text]: deltas not yet sent, same kinds merged
        sent_at = 0.0  # the first token goes out at once

        def take() -> None:
            out.extend(chunk({kind: text}) for kind, text in pending)
            pending.clear()

        def flush() -> bytes:
            take()
            data = b"".join(out)
            out.clear()
            return data

        try:
            async for event in turn():
                if event.kind in ("content", "reasoning") and event.text:
                    if event.kind == "content":
                        streamed += event.text
                    if pending and pending[-1][0] == event.kind:
                        pending[-1][1] += event.text
                    else:
                        pending.append([event.kind, event.text])
                    now = time.monotonic()
                    # one write per STREAM_EVERY_S, not per token: each write is a trip
                    # through the middleware, the event loop and a syscall
                    if now - sent_at >= STREAM_EVERY_S:
                        sent_at = now
                        yield flush()
                elif event.kind == "waiting":
                    # a followed job queued or thinking quietly: a comment keeps the client's
                    # idle timeout from cutting the stream (SSE readers skip comments)
                    take()
                    out.append(KEEPALIVE)
                    sent_at = time.monotonic()
                    yield flush()
                elif event.kind == "done" and event.result is not None:
                    done = event.result
                    if cid is not None and not ask.stored_history:
                        self.threads.remember(owner, ask.after(done), cid)
                    if done.error and not done.reply:
                        # reasoning may have streamed, but no answer came: an error, not a
                        # silent empty success (the SDK raises it as an APIError)
                        take()
                        out.append(sse(result_error(done).body()))
                        yield flush()
                        return
                    tail = unsent(done.reply, streamed)
                    if tail:  # the hand-off sentence of a delegation
                        pending.append(["content", tail])
                    take()
                    out.append(chunk({}, finish_of(done), assistant=extra_of(done, cid)))
                    if ask.usage:
                        usage = usage_of(ask.history, ask.text, done)
                        out.append(sse({**base, "choices": [], "usage": usage}))
            out.append(b"data: [DONE]\n\n")
            yield flush()
        except AssistantError as e:
            take()
            out.append(sse(api_error(e).body()))
            yield flush()
        finally:
            with contextlib.suppress(Exception):
                await events.aclose()  # type: ignore[attr-defined]
            self.admission.leave(owner)


async def unless_client_leaves(request: Request, work: Awaitable[T]) -> T | None:
    """`work`'s result, or None if the client disconnected first: then `work` is cancelled,
    so a turn nobody will read stops (and is stored as far as it got) instead of running on
    at the engine (issue 26)."""
    task = asyncio.ensure_future(work)
    left = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, left}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        left.cancel()
        if not task.done():
            task.cancel()
        await asyncio.gather(task, left, return_exceptions=True)
    return None if task.cancelled() else task.result()


async def _disconnected(request: Request) -> None:
    # the body is read: what the server receives next is the client going away
    while (await request.receive())["type"] != "http.disconnect":
        pass


def unsent(reply: str, streamed: str) -> str:
    """What of the final reply the stream has not sent: the hand-off text of a delegation,
    which the turn adds after the model's own words."""
    for sent in (streamed, streamed.strip()):
        if reply.startswith(sent):
            return reply[len(sent) :]
    return ""


def add_openai_routes(
    app: Any, sessions: Sessions, settings: Settings, local_secret: str | None = None
) -> OpenAIRoute:
    """Register the endpoints on the app's server (plain Starlette routes: no Gradio queue,
    no per-session state, no FastAPI body models)."""
    route = OpenAIRoute(sessions, settings, local_secret)
    app.add_route("/v1/models", route.models, methods=["GET"], include_in_schema=False)
    app.add_route(
        "/v1/chat/completions", route.completions, methods=["POST"], include_in_schema=False
    )
    return route
