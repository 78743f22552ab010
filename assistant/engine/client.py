"""The engine client: a request shape per engine kind, streamed, with deadlines, one retry layer.

Wraps the official async `openai` client (injected). Everything above this module sees only
`StreamEvent`s; everything engine-specific (vLLM's priority and thinking switch, the two names
of the reasoning field, llama.cpp's lack of both) is decided here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import threading
from collections.abc import AsyncIterator
from typing import Any, Protocol

import httpx
import openai
from openai import AsyncOpenAI

from assistant.engine.fold import collect
from assistant.engine.network import lean_client
from assistant.engine.profile import (
    PROFILES,
    TOOLS_REFUSED,
    batching_refused,
    priority_rejected,
    tools_refused,
)
from assistant.engine.sse import MERGED, LeanClient
from assistant.engine.transcript import TranscriptPrompt
from assistant.engine.window import ContextRefused, Window
from assistant.errors import EngineError, EngineUnavailable
from assistant.records import (
    CRASHED,
    CUT,
    INTERRUPTED,
    STALLED,
    TIMED_OUT,
    Message,
    Reply,
    StreamEvent,
)
from assistant.settings import LaneConfig

log = logging.getLogger(__name__)

RESTART_WAIT_S = 60.0
"""How long a request waits for a supervised engine that is restarting."""

_RETRYABLE_STATUS = (408, 429, 500, 502, 503, 504)


class CrashReport(Protocol):
    def describe(self) -> str: ...


class Supervisor(Protocol):
    """The engine process's keeper (the embedded engine), where the app owns the process."""

    generation: int
    """Counts the process's starts."""
    ready: threading.Event
    """Set while a process is up and answering."""

    def crash_of(self, generation: int) -> CrashReport | None:
        """How process `generation` died, if it did (blocking, briefly)."""
        ...


def build_client(base_url: str, api_key: str | None) -> AsyncOpenAI:
    """The one client for an engine. Its own retries are off: this module is the retry layer."""
    client = AsyncOpenAI(
        base_url=base_url,
        api_key=api_key or "not-needed",
        max_retries=0,
        # asyncio's own sockets under httpx, not anyio's (engine.network)
        http_client=lean_client(limits=httpx.Limits(max_connections=256)),
    )
    # streamed answers read by a plain SSE parser, not a typed model per chunk (engine.sse)
    return LeanClient(client)  # type: ignore[return-value]


def _field(obj: Any, name: str) -> Any:
    value = getattr(obj, name, None)
    if value is None:
        extra = getattr(obj, "model_extra", None) or {}
        value = extra.get(name)
    return value


class Engine:
    """A configured view of one OpenAI-compatible engine."""

    def __init__(
        self,
        client: AsyncOpenAI,
        *,
        kind: str,
        model: str | None,
        slots: int | None = None,
        context: int | None = None,
        transcript: TranscriptPrompt | None = None,
        supervisor: Supervisor | None = None,
        lanes: dict[str, tuple[AsyncOpenAI, Supervisor | None]] | None = None,
    ):
        """`lanes`: a lane served by an engine process of its own (the embedded engine's deep
        lane): its client and supervisor, in place of `client` and `supervisor`."""
        if kind not in PROFILES:
            raise EngineError(f"unknown engine kind {kind!r}")
        self.client = client
        self.kind = kind
        self.profile = PROFILES[kind]
        self.model = model
        self.slots = slots
        """Sequences the engine serves at once, where it reports them."""
        self.window = Window(context)
        """The engine's context window (its size where it reports it): requests fit it."""
        self.transcript = transcript
        """Set for a base model: requests go to /completions as a transcript."""
        self.supervisor = supervisor
        self.lanes = lanes or {}
        self.priority_ok = self.profile.priority
        self.batching_ok = self.profile.batching
        """False once the engine refused `stream_interval`: chunks of one token, as before."""
        self.tools_ok = True
        """False once the engine refused tools: the chat lane stops offering them."""
        self.warnings: list[str] = []
        self._listed = False  # the model list was read (see `_discover_model`)

    def overhead(self, tools: list[dict] | None = None) -> int:
        """Bytes a request carries besides its messages: tools, a transcript's opening."""
        extra = len(json.dumps(tools)) if tools and self.tools_ok else 0
        if self.transcript is not None:
            extra += len(self.transcript.opening) + len(self.transcript.long_example)
        return extra

    def _warn_once(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)
            log.warning(text)

    async def stream(
        self,
        messages: list[Message],
        lane: LaneConfig,
        *,
        thinking: bool | None = None,
        max_tokens: int | None = None,
        tools: list[dict] | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Stream one request. Always ends with one `finish` event unless it raises.

        Raises EngineUnavailable / EngineError only before the first token; after it, a
        cut or stalled stream ends with finish_reason `cut` / `stalled` so the caller keeps
        what arrived.
        """
        thinking = lane.thinking if thinking is None else thinking
        started = False
        deadline = asyncio.get_running_loop().time() + lane.total_timeout_s
        stream, budget = await self._open(messages, lane, thinking, max_tokens, tools)
        supervisor = self._supervisor(lane)
        generation = supervisor.generation if supervisor else 0
        finish: str | None = None
        note = ""
        produced = 0  # tokens so far, for a stream that ends with no finish reason
        resumed = self.transcript is not None and self.transcript.continues(messages)
        calls: dict[int, dict[str, str]] = {}
        counted = 0  # the engine's running count of tokens, where it sends one per chunk
        learnt = False  # the engine's count of the prompt, once
        try:
            iterator = stream.__aiter__()
            while True:
                remaining = deadline - asyncio.get_running_loop().time()
                if remaining <= 0:
                    finish = TIMED_OUT
                    break
                try:
                    # the read deadline also lives in httpx; this guards engines that trickle
                    # keep-alive bytes without ever sending a chunk
                    # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancel
                    # that lands as a chunk arrives, and the engine would keep generating
                    async with asyncio.timeout(min(remaining, lane.read_timeout_s)):
                        chunk = await iterator.__anext__()
                except StopAsyncIteration:
                    break
                except (TimeoutError, httpx.ReadTimeout, openai.APITimeoutError):
                    finish = STALLED if remaining > lane.read_timeout_s else TIMED_OUT
                    break
                except (httpx.HTTPError, openai.APIError) as e:
                    if not started and isinstance(e, openai.APIStatusError):
                        raise EngineError(f"engine error: {e.message}") from e
                    log.info("stream ended early: %s", e)
                    finish = CUT  # the connection really broke
                    break
                usage = getattr(chunk, "usage", None)
                if not learnt and usage is not None and getattr(usage, "prompt_tokens", None):
                    learnt = True  # the engine's own count of this prompt: the window learns
                    self.window.learn(self._weight(messages, tools), usage.prompt_tokens)
                # tokens in this chunk: one, unless the engine counts them or the reader joined
                each = getattr(chunk, MERGED, None) or 1
                if usage is not None and getattr(usage, "completion_tokens", None):
                    each = max(1, usage.completion_tokens - counted)
                    counted = usage.completion_tokens
                    yield StreamEvent("usage", tokens=usage.completion_tokens)
                for choice in chunk.choices or []:
                    if self.transcript is not None:  # a completion: text, no delta
                        # a new answer's first word comes with the space after "Assistant:";
                        # a resumed answer's continuation keeps its own
                        text = choice.text if started or resumed else (choice.text or "").lstrip()
                        if text:
                            started = True
                            produced += each
                            yield StreamEvent("content", text=text, tokens=each)
                        finish = choice.finish_reason or finish
                        continue
                    delta = choice.delta
                    reasoning = _field(delta, "reasoning") or _field(delta, "reasoning_content")
                    content = delta.content if delta is not None else None
                    # a batched chunk may hold the end of the reasoning and the answer's start:
                    # its tokens are shared by length
                    shares = (each, each)
                    if reasoning and content:
                        part = round(each * len(reasoning) / (len(reasoning) + len(content)))
                        shares = (max(1, part), max(1, each - part))
                    if reasoning:
                        started = True
                        produced += shares[0]
                        yield StreamEvent("reasoning", text=reasoning, tokens=shares[0])
                    if content:
                        started = True
                        produced += shares[1]
                        yield StreamEvent("content", text=content, tokens=shares[1])
                    for call in (delta.tool_calls if delta is not None else None) or []:
                        entry = calls.setdefault(call.index or 0, {"name": "", "arguments": ""})
                        if call.function is not None:
                            entry["name"] += call.function.name or ""
                            entry["arguments"] += call.function.arguments or ""
                    if choice.finish_reason:
                        finish = choice.finish_reason
            for call in calls.values():
                yield StreamEvent("tool_call", text=json.dumps(call))
            if finish is None:
                # a clean end with no finish reason: the budget's end if it was all used
                # (some servers omit the reason then), else the engine stopped it early
                finish = "length" if produced >= budget else INTERRUPTED
            if finish in (CUT, INTERRUPTED) and supervisor is not None:
                note = await self._crash_note(supervisor, generation)
                finish = CRASHED if note else finish
            yield StreamEvent("finish", text=note, finish_reason=finish)
        finally:
            await stream.close()

    def _client(self, lane: LaneConfig) -> AsyncOpenAI:
        route = self.lanes.get(lane.name)
        return route[0] if route is not None else self.client

    def _supervisor(self, lane: LaneConfig) -> Supervisor | None:
        route = self.lanes.get(lane.name)
        return route[1] if route is not None else self.supervisor

    @staticmethod
    async def _crash_note(supervisor: Supervisor, generation: int) -> str:
        """'' if process `generation` is alive, else what happened to it and whether it is
        back (a supervised engine restarts; the turn waits a bounded time to say so)."""
        crash = await asyncio.to_thread(supervisor.crash_of, generation)
        if crash is None:
            return ""
        back = await asyncio.to_thread(supervisor.ready.wait, RESTART_WAIT_S)
        return crash.describe() + (" and was restarted" if back else "; it is restarting")

    def _weight(self, messages: list[Message], tools: list[dict] | None) -> int:
        return self.window.weight(messages, self.overhead(tools))

    def _fit(self, messages: list[Message], budget: int, tools: list[dict] | None) -> int:
        """The budget, shrunk so prompt plus answer fit the window (engines reject more);
        ContextFull if the prompt leaves the answer too little."""
        return self.window.answer(messages, budget, self.overhead(tools))

    async def _open(
        self,
        messages: list[Message],
        lane: LaneConfig,
        thinking: bool,
        max_tokens: int | None,
        tools: list[dict] | None,
    ) -> tuple[Any, int]:
        """Open the stream, retrying connection failures and 429/5xx with backoff (bounded);
        with the answer's budget it asked for (fitted to the window)."""
        timeout = httpx.Timeout(
            connect=lane.connect_timeout_s,
            read=lane.read_timeout_s,
            write=lane.connect_timeout_s,
            pool=lane.connect_timeout_s,
        )
        attempt = 0
        supervisor = self._supervisor(lane)
        waited_restarts = 0  # bounded too: an engine that dies at every start fails the request
        while True:
            params: dict[str, Any] = {}
            try:
                unsized = self.window.size is None and not self._listed
                if not (lane.model or self.model) or unsized:
                    await self._discover_model(lane)
                budget = self._fit(messages, max_tokens or lane.max_tokens, tools)
                params = self.profile.shape(
                    lane,
                    thinking=thinking,
                    max_tokens=budget,
                    use_priority=self.priority_ok,
                    use_batching=self.batching_ok,
                )
                if tools and self.tools_ok:
                    params["tools"] = tools
                client = self._client(lane).with_options(timeout=timeout)
                if self.transcript is not None:
                    return await client.completions.create(
                        model=lane.model or self.model,  # type: ignore[arg-type]
                        prompt=self.transcript.render(messages, lane.name),
                        stop=self.transcript.stop(lane.name),
                        temperature=self.transcript.temperature(lane.name),
                        stream=True,
                        **params,
                    ), budget
                return await client.chat.completions.create(
                    model=lane.model or self.model,
                    messages=[{"role": m.role, "content": m.content} for m in messages],
                    stream=True,
                    **params,
                ), budget
            except openai.APIStatusError as e:
                if "priority" in params.get("extra_body", {}) and priority_rejected(e):
                    # concurrent requests may all be rejected before the first one returns
                    self.priority_ok = False
                    self._warn_once(
                        "the engine rejected request priority (start vLLM with "
                        "--scheduling-policy priority); the app's own lanes keep order instead"
                    )
                    continue
                if "stream_interval" in params.get("extra_body", {}) and batching_refused(e):
                    self.batching_ok = False
                    self._warn_once(
                        "the engine refused stream_interval; deep-lane chunks stay one token each"
                    )
                    continue
                if "tools" in params and tools_refused(e):
                    # the same turn again without tools: a chat turn never fails for them
                    self.tools_ok = False
                    self._warn_once(TOOLS_REFUSED)
                    continue
                if e.status_code == 400 and self.window.refused(
                    str(e.message), self._weight(messages, tools)
                ):
                    raise ContextRefused(f"the engine refused the request: {e.message}") from e
                if e.status_code not in _RETRYABLE_STATUS or attempt >= lane.retries:
                    if e.status_code in _RETRYABLE_STATUS:
                        raise EngineUnavailable(
                            f"the engine is busy or failing (HTTP {e.status_code}) after "
                            f"{attempt + 1} attempts"
                        ) from e
                    raise EngineError(f"the engine refused the request: {e.message}") from e
                wait = _retry_after(e) or _backoff(attempt)
            except (openai.APIConnectionError, httpx.HTTPError) as e:
                if supervisor is not None and not supervisor.ready.is_set() and waited_restarts < 3:
                    waited_restarts += 1
                    # the engine process died and is being restarted: wait for it, bounded
                    log.info("the engine is restarting; waiting for it")
                    if await asyncio.to_thread(supervisor.ready.wait, RESTART_WAIT_S):
                        continue
                if attempt >= lane.retries:
                    raise EngineUnavailable(
                        f"the engine is unreachable at {self._client(lane).base_url} "
                        f"({type(e).__name__})"
                    ) from e
                wait = _backoff(attempt)
            attempt += 1
            log.info("engine request failed; retry %d in %.2fs", attempt, wait)
            await asyncio.sleep(wait)

    async def discover(self, lane: LaneConfig) -> None:
        """Learn the model and the window before a request is fitted to it, if not yet asked
        (any failure here is left to the request, which asks again, retries and reports it)."""
        if not self._listed and (self.model is None or self.window.size is None):
            with contextlib.suppress(Exception):
                await self._discover_model(lane)

    async def _discover_model(self, lane: LaneConfig) -> None:
        """The engine's first model and its context window, asked once.

        The engine may have been down at start: without the context window a deep budget
        (32k) is not fitted, and an engine such as vLLM rejects every deep request."""
        page = await self.client.with_options(timeout=lane.connect_timeout_s).models.list()
        self._listed = True
        if not page.data:
            if lane.model or self.model:
                return
            raise EngineError("the engine lists no models; set ASSISTANT_MODEL")
        self.model = self.model or page.data[0].id
        entry = next((m for m in page.data if m.id == (lane.model or self.model)), page.data[0])
        if self.window.size is None:
            self.window.size = (entry.model_extra or {}).get("max_model_len")  # vLLM reports it

    async def complete(self, messages: list[Message], lane: LaneConfig, **kw: Any) -> Reply:
        """Run a request to the end and collect it."""
        return await collect(self.stream(messages, lane, **kw))


def _backoff(attempt: int) -> float:
    return min(4.0, 0.25 * 2**attempt) * (0.75 + random.random() / 2)


def _retry_after(e: openai.APIStatusError) -> float | None:
    raw = e.response.headers.get("retry-after") if e.response is not None else None
    try:
        return min(5.0, max(0.0, float(raw))) if raw else None
    except ValueError:
        return None
