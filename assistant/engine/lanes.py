"""The lane scheduler: the app's own priority in front of engines that have none.

Chat is admitted before deep; deep requests in flight are capped; on an engine with fewer free
slots than requests, an arriving chat turn preempts a running deep request (its holder stops the
stream, keeps what it generated, and asks to be admitted again).

Logins take turns (issue 49): every way in (the page, a call, `/v1`, the Gradio API, the
command line through the app) asks here, so a login's requests at the engine on a lane are
counted here against one bound, its share (`max_engine_per_user`); past it, its requests wait in
its own queue (per lane: a person's chat turn never waits behind their own deep answer). On each
lane a free place goes to the waiting login with the fewest requests at the engine, the one
admitted longest ago first among equals (round robin): one login's flood holds another's turn
back by at most one of its requests, not by all of them.

Delegated jobs run in a worker process of their own (`assistant.worker`), with a scheduler of
their own; a `LanePeer` joins the two: the web process's chat turns are mirrored in the
worker's scheduler (where they preempt and hold back deep work exactly as a local chat turn
would), and each process counts the other's running deep requests against the deep cap.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
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
    owner: str | None = None
    """The login it is for; None: the app's own (a mirrored chat turn), outside any share."""
    queue_ms: float = 0.0
    preempted: asyncio.Event = field(default_factory=asyncio.Event)


class LanePeer(Protocol):
    """The other process's scheduler, as this one sees it (the job worker's in the app, the
    app's in the job worker)."""

    deep_running: int
    """Deep requests it has at the engine."""

    async def chat_started(self, ticket: Ticket) -> None:
        """A chat turn was admitted here; returns once the peer has made room for it (on an
        engine with known slots: its deep work preempted), or at once when it need not."""
        ...

    def chat_ended(self, ticket: Ticket) -> None: ...


class DeepCount:
    """A peer known by its deep requests alone: the app, as its job worker sees it (the app's
    chat turns reach the worker as mirrored tickets instead)."""

    deep_running = 0

    async def chat_started(self, ticket: Ticket) -> None:
        return None

    def chat_ended(self, ticket: Ticket) -> None:
        return None


@dataclass
class LaneStats:
    """Recent per-lane samples (ms, tokens/s), bounded."""

    queue_ms: deque[float] = field(default_factory=lambda: deque(maxlen=500))
    ttft_ms: deque[float] = field(default_factory=lambda: deque(maxlen=500))
    tokens_per_s: deque[float] = field(default_factory=lambda: deque(maxlen=500))
    preemptions: int = 0


SHARE_UNKNOWN_SLOTS = 2
"""A login's share where the engine's slots are unknown: a flood of one login's requests then
holds two places at the engine, and another login's request still finds a free one (the
simulator's, and vLLM's smallest `max_num_seqs` worth running, are 4 or more)."""


def login_share(setting: int, slots: int | None, logins: int) -> int | None:
    """A login's requests at the engine at once: `max_engine_per_user` when set (> 0); else
    None (no bound) with fewer than two logins, since there is nobody to share with (the
    machine's own user alone, or one login: the load bench's many sessions of one person
    still go to the engine at once); else all of the engine's slots but one (at least one),
    else `SHARE_UNKNOWN_SLOTS`."""
    if setting > 0:
        return setting
    if logins < 2:
        return None
    return max(1, slots - 1) if slots else SHARE_UNKNOWN_SLOTS


class LaneScheduler:
    """Admission control per lane.

    `slots`: how many requests the engine serves at once (None: unknown, so chat is never held
    back by the app). `lane_slots`: instead, each lane has an engine of its own with this many
    slots (the embedded engine's processes): a lane waits only for its own, and nothing is
    preempted, since the lanes share no slot. `enabled=False` admits everything at once, FIFO at
    the engine: the baseline the QoS benchmark compares against. `share`: a login's requests
    at the engine at once on each lane (None: no bound; logins still take turns).
    """

    def __init__(
        self,
        *,
        deep_max_in_flight: int,
        slots: int | None = None,
        lane_slots: dict[Lane, int] | None = None,
        enabled: bool = True,
        max_waiting: int = 256,
        share: int | None = None,
    ):
        self.deep_max = max(1, deep_max_in_flight)
        self.slots = None if lane_slots else slots
        self.lane_slots = lane_slots
        self.enabled = enabled
        self.max_waiting = max_waiting
        self.share = share
        self.running: dict[Lane, list[Ticket]] = {"chat": [], "deep": []}
        self.queues: dict[Lane, dict[str | None, deque[Ticket]]] = {"chat": {}, "deep": {}}
        """Waiting tickets per lane, per login, in arrival order."""
        self.held: dict[Lane, dict[str | None, int]] = {"chat": {}, "deep": {}}
        """Each login's requests at the engine, per lane."""
        self._turns = itertools.count()
        self._last: dict[str | None, int] = {}
        """When each login was last admitted (a count): the longest ago goes first."""
        self.admitted: deque[tuple[Lane, str | None]] = deque(maxlen=1000)
        """The order of recent admissions (lane, login): what tests read turns from."""
        self.waiting: dict[Lane, int] = {"chat": 0, "deep": 0}
        self.stats: dict[Lane, LaneStats] = {"chat": LaneStats(), "deep": LaneStats()}
        self._cond = asyncio.Condition()
        self.peer: LanePeer | None = None
        """The other process's scheduler, when jobs run in a worker (`assistant.worker`)."""
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
            return self._own_slot_free(lane) and (lane == "chat" or self._deep_room())
        if lane == "chat":
            return self._slot_free()
        return self._next("chat") is None and self._deep_room() and self._slot_free()

    def _deep_room(self) -> bool:
        """Under the deep cap, counting the other process's deep requests with this one's: an
        inline deep answer and the worker's jobs share `deep.max_in_flight`."""
        return self.deep_running < self.deep_max

    @property
    def peer_deep(self) -> int:
        """The other process's deep requests at the engine, as it last said."""
        return self.peer.deep_running if self.peer is not None else 0

    @property
    def deep_running(self) -> int:
        """Deep requests at the engine: this process's and its peer's."""
        return len(self.running["deep"]) + self.peer_deep

    def _under_share(self, lane: Lane, owner: str | None) -> bool:
        held = self.held[lane].get(owner, 0)
        return owner is None or self.share is None or held < self.share

    def _next(self, lane: Lane) -> Ticket | None:
        """The waiting ticket whose turn it is on `lane`: the first of the login with the fewest
        requests at the engine (the app's own first; among equals, the login admitted longest
        ago), among logins under their share. None: nobody on the lane may go."""
        best: Ticket | None = None
        best_key: tuple[int, int, int] = (0, 0, 0)
        for owner, queue in self.queues[lane].items():
            if not queue or not self._under_share(lane, owner):
                continue
            key = (owner is not None, self.held[lane].get(owner, 0), self._last.get(owner, -1))
            if best is None or key < best_key:
                best, best_key = queue[0], key
        return best

    def _your_turn(self, ticket: Ticket) -> bool:
        if not self.enabled:
            return True
        return self._next(ticket.lane) is ticket and self._admissible(ticket.lane)

    def _preempt_for_chat(self, owner: str | None) -> None:
        """No slot for a waiting chat turn: ask the newest running deep request to yield."""
        if not self.enabled or self._slot_free() or not self._under_share("chat", owner):
            return
        candidates = [t for t in self.running["deep"] if not t.preempted.is_set()]
        if candidates:
            candidates[-1].preempted.set()
            self.stats["deep"].preemptions += 1

    @contextlib.asynccontextmanager
    async def admit(self, lane: Lane, owner: str | None = None) -> AsyncIterator[Ticket]:
        """Wait for this lane's turn, and `owner`'s (a login; None: the app's own); the ticket
        is held until the block exits."""
        if sum(self.waiting.values()) >= self.max_waiting:
            raise Busy("too many requests are waiting; try again in a moment")
        ticket = Ticket(lane, owner)
        start = now_ms()
        async with self._cond:
            self.waiting[lane] += 1
            queue = self.queues[lane].setdefault(owner, deque())
            queue.append(ticket)
            try:
                if lane == "chat":
                    self._preempt_for_chat(owner)
                await self._cond.wait_for(lambda: self._your_turn(ticket))
            finally:
                self.waiting[lane] -= 1
                queue.remove(ticket)
                if not queue:
                    del self.queues[lane][owner]
                self._cond.notify_all()
            self.running[lane].append(ticket)
            self.held[lane][owner] = self.held[lane].get(owner, 0) + 1
            self._last[owner] = next(self._turns)
            self.admitted.append((lane, owner))
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
                self.held[lane][owner] -= 1
                if not self.held[lane][owner]:
                    del self.held[lane][owner]
                self._cond.notify_all()
            self._changed()

    async def recount(self) -> None:
        """The peer's count changed: waiting deep requests look again at the deep cap."""
        async with self._cond:
            self._cond.notify_all()

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
            "deep_running": self.deep_running,
        }
