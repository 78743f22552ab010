"""The calls that are open: admission per login and in all, and each login's call sessions.

A call is a `Call` (`assistant.call.call`). Whatever else of the person's reaches
the app while a call is open goes through it, so it is heard in the call: a typed question is
answered there (spoken), and a job's notice is said there, not played by the page beside it
(where the call's microphone would hear it as the person speaking).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from assistant.call.call import Call

from assistant import limits

MAX_CALLS_PER_LOGIN = limits.CALLS_PER_LOGIN
MAX_CALLS = limits.CALLS


class Calls:
    """Who has a call open (counted by `limits.calls`: the bounds live there)."""

    def __init__(self, per_login: int = MAX_CALLS_PER_LOGIN, total: int = MAX_CALLS):
        self.per_login, self.total = per_login, total
        self._count = limits.calls(per_login, total)
        self.open: dict[str, int] = self._count.open
        self._sessions: dict[str, list[Call]] = {}

    def admit(self, owner: str) -> str | None:
        """None: admitted (call `leave` at the end); else why not."""
        return self._count.enter(owner)

    def leave(self, owner: str) -> None:
        self._count.leave(owner)

    def join(self, session: Call) -> None:
        """`session` is the owner's call until `part`."""
        self._sessions.setdefault(session.owner, []).append(session)

    def part(self, session: Call) -> None:
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
