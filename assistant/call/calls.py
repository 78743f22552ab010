"""The calls that are open: admission per login and in all, and each login's call sessions.

A call is a `Call` (`assistant.call.call`). Whatever else of the person's reaches
the app while a call is open goes through it, so it is heard in the call: a typed question is
answered there (spoken), and a job's notice is said there, not played by the page beside it
(where the call's microphone would hear it as the person speaking).

When every place is taken, a new call may take the place of the call quiet the longest
(`make_room`; `call.idle`): a call left open in a forgotten tab does not shut others out.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from assistant.call.call import Call
    from assistant.call.idle import Quiet

from assistant import limits
from assistant.call.idle import YIELD_AFTER_S, YIELDED_CODE, yielded

End = Callable[[str, int], Awaitable[None]]
"""Ends a call, telling its page why (the reason, the socket's close code)."""

MAX_CALLS_PER_LOGIN = limits.CALLS_PER_LOGIN
MAX_CALLS = limits.CALLS


class Calls:
    """Who has a call open (counted by `limits.calls`: the bounds live there)."""

    def __init__(self, per_login: int = MAX_CALLS_PER_LOGIN, total: int = MAX_CALLS):
        self.per_login, self.total = per_login, total
        self._count = limits.calls(per_login, total)
        self.open: dict[str, int] = self._count.open
        self._sessions: dict[str, list[Call]] = {}
        self._quiet: dict[Call, tuple[Quiet, End]] = {}
        self._left = asyncio.Event()

    def admit(self, owner: str) -> str | None:
        """None: admitted (call `leave` at the end); else why not."""
        return self._count.enter(owner)

    def leave(self, owner: str) -> None:
        self._count.leave(owner)
        self._left.set()

    def full(self) -> bool:
        return sum(self.open.values()) >= self.total

    async def enter(self, owner: str) -> str | None:
        """`admit`, and when every place is taken (and `owner` is within their own share: a
        place freed for them would not help otherwise), the call quiet the longest may give
        its place (`make_room`)."""
        refused = self.admit(owner)
        mine = self.open.get(owner, 0) < self.per_login
        if refused and self.full() and mine and await self.make_room():
            refused = self.admit(owner)
        return refused

    def join(self, session: Call, quiet: Quiet | None = None, end: End | None = None) -> None:
        """`session` is the owner's call until `part`; with `quiet` and `end`, it may give its
        place to a new call (`make_room`)."""
        self._sessions.setdefault(session.owner, []).append(session)
        if quiet is not None and end is not None:
            self._quiet[session] = (quiet, end)

    async def make_room(self, wait_s: float = 10.0) -> bool:
        """All places taken: end the call quiet the longest (at least `YIELD_AFTER_S`), telling
        it why, and wait until its place is free. False: no call was quiet enough."""
        quiet_s, victim = max(
            ((q.seconds(), s) for s, (q, _) in self._quiet.items()),
            key=lambda pair: pair[0],
            default=(0.0, None),
        )
        if victim is None or quiet_s < YIELD_AFTER_S:
            return False
        _, end = self._quiet.pop(victim)
        self._left.clear()
        await end(yielded(quiet_s), YIELDED_CODE)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait_s):  # its socket's handler counts it out
                while self.full():
                    await self._left.wait()
                    self._left.clear()
        return not self.full()

    def part(self, session: Call) -> None:
        self._quiet.pop(session, None)
        sessions = self._sessions.get(session.owner, [])
        if session in sessions:
            sessions.remove(session)
        if not sessions:
            self._sessions.pop(session.owner, None)

    def of(self, owner: str, conversation_id: str | None = None) -> Call | None:
        """The owner's call, if one is open: the one on `conversation_id` if there is one,
        else the newest."""
        sessions = self._sessions.get(owner, [])
        for session in reversed(sessions):
            if conversation_id is not None and session.conversation_id == conversation_id:
                return session
        return sessions[-1] if sessions else None

    async def logout(self, owner: str) -> None:
        """`owner` logged out: each of their calls ends now (its reply stopped, kept as heard)."""
        for session in list(self._sessions.get(owner, [])):
            await session.logout()
