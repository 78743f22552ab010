"""Does the engine really order its queue by request priority? Shown, not assumed.

vLLM 0.32 accepts `priority` under its default FCFS policy and silently ignores it, so an
accepted request proves nothing. This probe makes the engine queue and watches the order:

1. fill the engine's running sequences with long priority-10 streams (ignore_eos), one at a
   time, until its `/metrics` shows a request waiting (up to `MAX_FILL`);
2. queue `QUEUED` more priority-10 requests, then one priority-0 request, confirming from
   `/metrics` that all of them wait;
3. close one filler: one sequence frees, and the engine admits one waiting request. With
   priority scheduling that is the priority-0 request; with FCFS, the oldest priority-10 one.

Closing a stream aborts its request in vLLM, so the probe's cost is bounded by how fast it can
observe, not by generation speed; everything is closed when it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from assistant.metrics import EngineMetrics, parse_engine_metrics

MAX_FILL = 16
"""More running sequences than this and the probe says it cannot tell (it would load a big
deployment too much to find out)."""
QUEUED = 2
FILL_TOKENS = 32768
"""At most this many (fitted to the context): fillers must outlast the probe on a fast engine;
they are closed, and so aborted, when it ends."""
WAIT_S = 60.0
"""How long any one observation may take (a queue showing in /metrics, a first token)."""
WARM_S = 120.0
SETTLE_S = 15.0
"""How long the probe waits for the engine to drop closed requests: at its start (others'),
for a steady baseline, and at its end (its own)."""
STEADY_S = 1.0
"""The engine's count must hold this long (not fall) before the probe takes it as its base."""
FLAG = "--scheduling-policy priority"


@dataclass
class Ordering:
    """What the probe found: True (priority orders the queue), False (it is ignored), or None
    (could not tell, with why)."""

    honoured: bool | None
    detail: str
    running: int = 0
    settled: bool = True
    """False: it could not tell because an observation failed or the queue moved (a busy or
    stalling engine), so another run may tell; True: a verdict, or a reason that stays."""
    sequences: int | None = None
    """How many requests the engine ran at once when one had to wait (its `max_num_seqs`,
    where its KV memory does not run out first); None: the probe did not fill it."""


@dataclass
class _Stream:
    """One streaming request; `first` is set when its first chunk arrives (it was admitted)."""

    priority: int
    first: asyncio.Event = field(default_factory=asyncio.Event)
    first_at: float | None = None
    error: str | None = None
    task: asyncio.Task | None = None


class PriorityProbe:
    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        model: str,
        metrics_url: str,
        context: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.client = client
        self.model = model
        self.metrics_url = metrics_url
        self.fill_tokens = min(FILL_TOKENS, max(64, (context or FILL_TOKENS + 128) - 128))
        """Filler budget: the prompt is a few dozen tokens, the rest of the context is theirs."""
        self.clock = clock
        self.streams: list[_Stream] = []
        self.base: float | None = None
        """Requests the engine ran or queued before the probe (other users', or none)."""
        self.sequences: int | None = None
        """The engine's running requests, read from `/metrics`, when the first one waited."""

    async def run(self) -> Ordering:
        try:
            found = await self._run()
            found.sequences = self.sequences
            return found
        finally:
            for s in self.streams:
                if s.task is not None:
                    s.task.cancel()
            await asyncio.gather(
                *(s.task for s in self.streams if s.task is not None), return_exceptions=True
            )
            await self._settle()

    async def _settle(self) -> None:
        """Wait (bounded) until the engine has dropped the probe's requests: vLLM notices a
        closed unstreamed request only at its next check, seconds later on a busy CPU, and
        until then it holds a sequence the next check (or the next doctor run) would miss."""
        if self.base is None or not self.streams:
            return
        base = self.base
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(SETTLE_S):
                while True:
                    m = await self._metrics()
                    if m is None or _total(m) <= base:
                        return
                    await asyncio.sleep(0.05)

    async def _steady(self, m: EngineMetrics) -> EngineMetrics:
        """The engine's count once it stops falling (bounded by SETTLE_S): requests their
        clients just closed (a previous run's, a test's, another user's) are dropped seconds
        later on a busy CPU, and a baseline that counts them would never be reached again."""
        deadline = self.clock() + SETTLE_S
        while self.clock() < deadline:
            await asyncio.sleep(STEADY_S)
            now = await self._metrics()
            if now is None or _total(now) >= _total(m):
                return m if now is None else now
            m = now
        return m

    async def _run(self) -> Ordering:
        first = await self._metrics()
        if first is None:
            return Ordering(None, f"cannot confirm: the engine serves no /metrics; use {FLAG}")
        self.base = _total(await self._steady(first))
        # a cold engine's first request can take longer than any one observation may
        warm = self._start(0, 1)
        try:
            await asyncio.wait_for(asyncio.shield(warm.task), WARM_S)  # type: ignore[arg-type]
        except TimeoutError:
            return Ordering(
                None, f"cannot confirm: one token took over {WARM_S:.0f} s", settled=False
            )
        if warm.error:
            return self._failed([warm])  # type: ignore[return-value]
        fillers: list[_Stream] = []
        base = self.base
        while True:
            if len(fillers) >= MAX_FILL:
                return Ordering(
                    None,
                    f"cannot confirm: the engine runs more than {MAX_FILL} requests at once, too "
                    f"many to fill for a check; if it is vLLM, make sure it runs with {FLAG}",
                    len(fillers),
                )
            fillers.append(self._start(10, self.fill_tokens))
            started = len(fillers)
            seen = await self._until(lambda m: _total(m) >= base + started)  # noqa: B023
            if seen is None:
                return self._failed(fillers) or Ordering(
                    None,
                    "cannot confirm: the engine's /metrics did not count the probe's requests",
                    settled=False,
                )
            if (seen.waiting or 0) >= 1:
                self.sequences = int(seen.running) if seen.running else None
                break
        running = len(fillers) - 1
        # the last filler waits; it is not streamed, so its admission could not be seen:
        # withdraw it, and queue streamed ones in its place
        fillers.pop().task.cancel()  # type: ignore[union-attr]
        if await self._until(lambda m: (m.waiting or 0) == 0) is None:
            return self._inconclusive(fillers, running)
        queued = [self._start(10, 4) for _ in range(QUEUED)]
        if await self._until(lambda m: (m.waiting or 0) >= QUEUED) is None:
            return self._inconclusive(fillers + queued, running)
        urgent = self._start(0, 4)
        if await self._until(lambda m: (m.waiting or 0) >= QUEUED + 1) is None:
            return self._inconclusive(fillers + queued, running)
        if any(s.first.is_set() for s in queued):
            return self._inconclusive(fillers + queued, running)
        if fillers:
            fillers[0].task.cancel()  # type: ignore[union-attr]  one sequence frees
        # else the engine was full before the probe began: wait for one of its own to end
        admitted = await self._first_of([urgent, *queued])
        if admitted is None:
            return self._failed([urgent, *queued]) or Ordering(
                None,
                "cannot confirm: no queued request was admitted after a sequence freed",
                running,
                settled=False,
            )
        if admitted.error:
            return self._failed([admitted])  # type: ignore[return-value]
        if admitted is urgent:
            return Ordering(
                True,
                f"a priority-0 request overtook {QUEUED} queued priority-10 ones "
                f"(with {running} running): the engine orders its queue by priority",
                running,
            )
        return Ordering(
            False,
            f"priority is accepted but ignored: with {running} requests running, a priority-0 "
            f"request waited behind queued priority-10 ones (FCFS). Start vLLM with {FLAG}; "
            "meanwhile the app's own lanes keep chat first",
            running,
        )

    def _start(self, priority: int, max_tokens: int) -> _Stream:
        s = _Stream(priority)
        s.task = asyncio.create_task(self._stream(s, max_tokens))
        self.streams.append(s)
        return s

    async def _stream(self, s: _Stream, max_tokens: int) -> None:
        # fillers are not streamed: a fast engine's per-token chunks would busy the server the
        # probe needs to read /metrics from; only the queued requests' first chunks matter
        stream = 1 < max_tokens < self.fill_tokens
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": "Count from one to a thousand."}],
            "max_tokens": max_tokens,
            "stream": stream,
            "priority": s.priority,
            "ignore_eos": True,  # vLLM: run to max_tokens, so fillers hold their sequence
            "chat_template_kwargs": {"enable_thinking": False},
        }
        try:
            # a busy engine's server can stall for tens of seconds: that is slow, not a failure
            timeout = httpx.Timeout(None, connect=WAIT_S)
            async with self.client.stream(
                "POST", "/chat/completions", json=body, timeout=timeout
            ) as r:
                if r.status_code != 200:
                    text = (await r.aread()).decode(errors="replace")
                    s.error = f"HTTP {r.status_code}: {_message(text)}"
                    s.first.set()
                    return
                async for line in r.aiter_lines():
                    if stream and line.startswith("data:") and not s.first.is_set():
                        s.first_at = self.clock()
                        s.first.set()
        except httpx.HTTPError as e:
            s.error = f"{type(e).__name__}: {e}"
            s.first.set()

    async def _metrics(self) -> EngineMetrics | None:
        try:
            r = await self.client.get(self.metrics_url, timeout=15.0)
        except httpx.HTTPError:
            return None
        if r.status_code != 200:
            return None
        m = parse_engine_metrics(r.text)
        return None if m.running is None or m.waiting is None else m

    async def _until(self, ok: Callable[[EngineMetrics], bool]) -> EngineMetrics | None:
        deadline = self.clock() + WAIT_S
        while self.clock() < deadline:
            m = await self._metrics()
            if m is not None and ok(m):
                return m
            if any(s.error for s in self.streams):
                return None
            await asyncio.sleep(0.02)
        return None

    async def _first_of(self, streams: list[_Stream]) -> _Stream | None:
        waits = {asyncio.ensure_future(s.first.wait()): s for s in streams}
        try:
            done, _ = await asyncio.wait(waits, timeout=WAIT_S, return_when="FIRST_COMPLETED")
        finally:
            for w in waits:
                w.cancel()
        firsts = [waits[w] for w in done]
        if not firsts:
            return None
        # several may land in one engine step: the earliest arrival wins
        return min(firsts, key=lambda s: s.first_at or float("inf"))

    def _failed(self, streams: list[_Stream]) -> Ordering | None:
        error = next((s.error for s in streams if s.error), None)
        if error is None:
            return None
        return Ordering(None, f"cannot confirm: a probe request failed ({error})", settled=False)

    def _inconclusive(self, streams: list[_Stream], running: int) -> Ordering:
        return self._failed(streams) or Ordering(
            None,
            "cannot confirm: the engine's queue did not hold still long enough to compare "
            f"(with {running} running); use {FLAG}",
            running,
            settled=False,
        )


def _total(m: EngineMetrics) -> float:
    return (m.running or 0) + (m.waiting or 0)


def _message(text: str) -> str:
    with contextlib.suppress(ValueError, AttributeError, TypeError):
        return str(json.loads(text)["error"]["message"])[:200]
    return text[:200]
