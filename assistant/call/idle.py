"""When a quiet call ends (issue 51, item 5).

People on a call think, read the screen, look something up: silence alone ends a call only
after `Settings.call_idle_s` (minutes), and the page is told some time before (`warn_at`), so
a word keeps it. What the old 15 s bound was for is kept otherwise: a socket that sends nothing,
junk audio, or audio faster than real time still ends a call at once (`call.line`), and when
every call place is taken a new call may take the place of the call quiet the longest
(`calls.Calls.make_room`, at least `YIELD_AFTER_S` quiet), which is told why.

Nothing here polls (`watch`): the watch sleeps until the next deadline (the warning, the end,
the login's expiry) and wakes at once when the call's state or turn changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol

WARN_S = 60.0
"""The page is told this long before a quiet call ends (or at half the idle time, if shorter)."""
YIELD_AFTER_S = 60.0
"""A call quiet this long may give its place to a new call when all are taken: a person in
the middle of a conversation (a pause to think) keeps theirs."""
IDLE_CODE = 4408
YIELDED_CODE = 4409
"""The socket's close code for a call that gave its place to a newer one."""
LOGIN_CODE = 4401
"""The socket's close code for a call whose login logged out or expired."""
EXPIRED = "your login expired; the call ends"
BUSY_STATES = ("thinking", "speaking")
"""A call in one of these is answering: its quiet does not count (nor does it while a turn
runs). Hearing is not busy: noise holds the voice detector without a word said."""


class Quiet:
    """When a call last had something going on: words heard, a turn, a reply, its audio."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.since = clock()
        self.warned = False
        """The page was told the call will end: said once per quiet spell."""
        self.held = False
        """The call is answering (`watch`): no quiet until that ends, when a spell starts."""

    def now(self) -> None:
        self.since = self.clock()
        self.warned = False

    def hold(self, busy: bool) -> None:
        if busy != self.held:
            self.held = busy
            self.now()

    def seconds(self) -> float:
        return 0.0 if self.held else self.clock() - self.since

    def saw(self, message: dict[str, Any]) -> None:
        """A message the session sends the page: those that say words were heard or answered
        count (a voice detector's "speech" or "ignored" on noise do not)."""
        kind = message.get("kind")
        text = message.get("text")
        if kind in ("turn", "reply", "done") or (
            kind == "partial" and isinstance(text, str) and any(c.isalnum() for c in text)
        ):
            self.now()


def warn_at(idle_s: float) -> float:
    """Seconds of quiet after which the page is warned."""
    return idle_s - min(WARN_S, idle_s / 2)


def verdict(quiet: Quiet, idle_s: float) -> Literal["warn", "end"] | None:
    """What a call quiet for `quiet.seconds()` is due: a warning (once), its end, or nothing."""
    spell = quiet.seconds()
    if spell >= idle_s:
        return "end"
    if spell >= warn_at(idle_s) and not quiet.warned:
        return "warn"
    return None


def due_in(quiet: Quiet, idle_s: float) -> float:
    """Seconds until `verdict` has something new to say (the warning, else the end)."""
    return (idle_s if quiet.warned else warn_at(idle_s)) - quiet.seconds()


def warning(quiet: Quiet, idle_s: float) -> dict[str, Any]:
    """The page's message (`{"kind": "idle"}`, shown by the call's UI) before a quiet call ends."""
    left = max(1, round(idle_s - quiet.seconds()))
    return {
        "kind": "idle",
        "ends_in_s": left,
        "text": f"nothing said for a while: the call ends in {left} s unless you say something",
    }


def ended(idle_s: float) -> str:
    minutes = idle_s / 60
    spell = f"{minutes:g} min" if minutes >= 1 else f"{idle_s:.0f} s"
    return f"nothing said for {spell}; the call ends"


def yielded(quiet_s: float) -> str:
    return (
        f"every call place is taken and a new call came in; yours had been quiet for "
        f"{quiet_s:.0f} s, the longest, so it ends to make room. Start it again to go on"
    )


class Watched(Protocol):
    """What the watch reads of a call (`assistant.call.call.Call`)."""

    @property
    def state(self) -> str: ...
    @property
    def turn(self) -> object | None: ...
    @property
    def changed(self) -> asyncio.Event:
        """Set when the state or the turn changes; a waiter clears it before it waits."""
        ...


async def watch(
    call: Watched,
    quiet: Quiet,
    idle_s: float,
    end: Callable[[str, int], Awaitable[None]],
    tell: Callable[[dict[str, Any]], Awaitable[None]],
    expires: float | None = None,
) -> None:
    """End the call when nothing is said in it for `idle_s` (the page told first, by `tell`) or
    its login expires (at `expires` on the quiet's clock; None: it does not). A logout is an
    event of the call itself (`Calls.logout`), not looked for here.

    No timed poll: it waits for the call's next change (`Watched.changed`) or the nearest
    deadline, whichever comes first. What is said or played moves the quiet's deadline
    (`Quiet.now`) without a wake: the deadline is read again when it comes."""
    while True:
        busy = call.state in BUSY_STATES or call.turn is not None
        quiet.hold(busy)
        if expires is not None and quiet.clock() >= expires:
            await end(EXPIRED, LOGIN_CODE)
            return
        due = None if busy else verdict(quiet, idle_s)
        if due == "end":
            await end(ended(idle_s), IDLE_CODE)
            return
        if due == "warn":
            quiet.warned = True
            await tell(warning(quiet, idle_s))
            continue
        waits = [] if busy else [due_in(quiet, idle_s)]
        if expires is not None:
            waits.append(expires - quiet.clock())
        call.changed.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, min(waits)) if waits else None):
                await call.changed.wait()
