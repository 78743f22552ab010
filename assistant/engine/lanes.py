"""The lane scheduler: the app's own priority in front of engines that have none.

Chat is admitted before deep; deep requests in flight are capped; on an engine with fewer free
slots than requests, an arriving chat turn preempts a running deep request (its holder stops the
stream, keeps what it generated, and asks to be admitted again).

Delegated jobs run in a worker process of their own (`assistant.worker`), with a scheduler of
their own; a `LanePeer` joins the two: the web process's chat turns are mirrored in the
worker's scheduler (where they preempt and hold back deep work exactly as a local chat turn
would), and the worker's running deep requests are counted in the web process's depth.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Protocol

from assistant.errors import Busy
from assistant.records import Lane, now_ms


@dataclass(eq=False)
class Ticket:
    """One admitted request."""

    lane: Lane
    queue_ms: float = 0.0
    preempted: asyncio.Event = field(default_factory=asyncio.Event)


class LanePeer(Protocol):
    """The other process's scheduler, as this one sees it."""

    deep_running: int
    """Deep requests it has at the engine."""

    async def chat_started(self, ticket: Ticket) -> None:
        """A chat turn was admitted here; returns once the peer has made room for it (on an
        engine with known slots: its deep work preempted), or at once when it need not."""
        ...

    def chat_ended(self, ticket: Ticket) -> None: ...


@dataclass
class LaneStats:
    """Recent per-lane samples (ms, tokens/s), bounded."""

    queue_ms: deque[float] = field(default_factory=lambda: deque(maxlen=500))
    ttft_ms: deque[float] = field(default_factory=lambda: deque(maxlen=500))
    tokens_per_s: deque[float] = field(default_factory=lambda: deque(maxlen=500))
    preemptions: int = 0


class LaneScheduler:
    """Admission control per lane.

    `slots`: how many requests the engine serves at once (None: unknown, so chat is never held
    back by the app). `lane_slots`: instead, each lane has an engine of its own with this many
    slots (the embedded engine's processes): a lane waits only for its own, and nothing is
    preempted, since the lanes share no slot. `enabled=False` admits everything at once, FIFO at
    the engine: the baseline the QoS benchmark compares against.
    """

    def __init__(
        self,
        *,
        deep_max_in_flight: int,
        slots: int | None = None,
        lane_slots: dict[Lane, int] | None = None,
        enabled: bool = True,
        max_waiting: int = 256,
    ):
        self.deep_max = max(1, deep_max_in_flight)
        self.slots = None if lane_slots else slots
        self.lane_slots = lane_slots
        self.enabled = enabled
        self.max_waiting = max_waiting
        self.running: dict[Lane, list[Ticket]] = {"chat": [], "deep": []}
        self.waiting: dict[Lane, int] = {"chat": 0, "deep": 0}
        self.stats: dict[Lane, LaneStats] = {"chat": LaneStats(), "deep": LaneStats()}
        self._cond = asyncio.Condition()
        self.peer: LanePeer | None = None
        """The worker process's scheduler, when jobs run there (`assistant.worker`)."""
        self.on_change: Callable[[], None] | None = None
        """Called whenever a request is admitted or released (the worker reports its deep
        count through it)."""

    @property
    def in_flight(self) -> int:
        return len(self.running["chat"]) + len(self.running["deep"])

    def _slot_free(self) -> bool:
        return self.slots is None or self.in_flight < self.slots

    def _own_slot_free(self, lane: Lane) -> bool:
        """A lane with an engine of its own: a slot there, as this process counts them."""
        assert self.lane_slots is not None
        return len(self.running[lane]) < self.lane_slots[lane]

    def _admissible(self, lane: Lane) -> bool:
        if not self.enabled:
            return True
        if self.lane_slots is not None:
            return self._own_slot_free(lane) and (
                lane == "chat" or len(self.running["deep"]) < self.deep_max
            )
        if lane == "chat":
            return self._slot_free()
        return (
            self.waiting["chat"] == 0
            and len(self.running["deep"]) < self.deep_max
            and self._slot_free()
        )

    def _preempt_for_chat(self) -> None:
        """No slot for a waiting chat turn: ask the newest running deep request to yield."""
        if not self.enabled or self._slot_free():
            return
        candidates = [t for t in self.running["deep"] if not t.preempted.is_set()]
        if candidates:
            candidates[-1].preempted.set()
            self.stats["deep"].preemptions += 1

    @contextlib.asynccontextmanager
    async def admit(self, lane: Lane) -> AsyncIterator[Ticket]:
        """Wait for this lane's turn; the ticket is held until the block exits."""
        if sum(self.waiting.values()) >= self.max_waiting:
            raise Busy("too many requests are waiting; try again in a moment")
        ticket = Ticket(lane)
        start = now_ms()
        async with self._cond:
            self.waiting[lane] += 1
            try:
                if lane == "chat":
                    self._preempt_for_chat()
                await self._cond.wait_for(lambda: self._admissible(lane))
            finally:
                self.waiting[lane] -= 1
                self._cond.notify_all()
            self.running[lane].append(ticket)
        self._changed()
        try:
            if lane == "chat" and self.peer is not None and self.enabled:
                await self.peer.chat_started(ticket)
            ticket.queue_ms = now_ms() - start
            self.stats[lane].queue_ms.append(ticket.queue_ms)
            yield ticket
        finally:
            if lane == "chat" and self.peer is not None:
                self.peer.chat_ended(ticket)
            async with self._cond:
                self.running[lane].remove(ticket)
                self._cond.notify_all()
            self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def record(self, lane: Lane, ttft_ms: float | None, tokens_per_s: float | None) -> None:
        if ttft_ms is not None:
            self.stats[lane].ttft_ms.append(ttft_ms)
        if tokens_per_s is not None:
            self.stats[lane].tokens_per_s.append(tokens_per_s)

    def depth(self) -> dict[str, int]:
        return {
            "chat_waiting": self.waiting["chat"],
            "deep_waiting": self.waiting["deep"],
            "chat_running": len(self.running["chat"]),
            "deep_running": len(self.running["deep"])
            + (self.peer.deep_running if self.peer is not None else 0),
        }
