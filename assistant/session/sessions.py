"""`Sessions`: the registry, and the one rule for which conversation a way in continues.

A session lives while something holds it (a running turn, a call, a page's reference); the
registry hands the same one to every way in on the same conversation, so a Stop on the page
stops a turn whoever started it, and a call open on it takes the page's turns.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

from assistant.call.calls import Calls
from assistant.errors import BadInput
from assistant.session.session import Session
from assistant.turns.conversations import Conversations
from assistant.turns.pipeline import Pipeline


class Sessions:
    """Every open conversation's session, by login and conversation."""

    def __init__(
        self, pipeline: Callable[[], Pipeline], conversations: Conversations, calls: Calls
    ):
        self._pipeline = pipeline  # built on first use: it loads the router
        self.conversations = conversations
        self.calls = calls
        self._open: weakref.WeakValueDictionary[tuple[str, str], Session] = (
            weakref.WeakValueDictionary()
        )

    def of(
        self,
        owner: str,
        conversation_id: str | None = None,
        *,
        strict: bool = False,
        title: str = "",
        remember_new: bool = False,
    ) -> Session:
        """The session of `owner`'s `conversation_id`; a new conversation when it is None, or
        is not `owner`'s (`strict`: refused instead, as an id a client named must be).
        `remember_new`: a new conversation becomes the one the login's page and calls reopen."""
        cid = conversation_id
        if cid is not None and not self.conversations.owned_by(cid, owner):
            if strict:
                raise BadInput(f"no conversation {cid}")
            cid = None
        if cid is None:
            cid = self.conversations.start(owner, title=title)
            if remember_new:
                self.conversations.remember(owner, conversation=cid)
        return self._session(owner, cid)

    def saved(self, owner: str) -> Session:
        """The conversation the login last had open (a call's, a reloaded page's), or a new
        one, remembered."""
        cid = self.conversations.prefs(owner).get("conversation")
        return self.of(owner, cid if isinstance(cid, str) else None, remember_new=True)

    def latest(self, owner: str) -> Session | None:
        """The login's most recently active conversation (the command line's default)."""
        listed = self.conversations.listed(owner)
        return self._session(owner, listed[0].id) if listed else None

    def none(self, owner: str) -> Session:
        """A session in no conversation: a client's housekeeping (a title, tags)."""
        return Session(owner, None, self._pipeline(), self.calls)

    async def stop(self, owner: str, conversation_id: str | None, why: str = "Stop") -> None:
        """Stop (the page's, a call's), the one cancel: every turn running in that
        conversation ends, a call's reply included (its call tells the page to stop playing
        it, kept as what was heard); a call answering in another conversation (a phone beside
        a desktop tab) goes on. A tab with no conversation yet names the one its calls
        continue (`saved`)."""
        if conversation_id is None:
            saved = self.conversations.prefs(owner).get("conversation")
            conversation_id = saved if isinstance(saved, str) else None
        session = self._open.get((owner, conversation_id)) if conversation_id else None
        if session is not None:
            await session.stop(why)

    def _session(self, owner: str, cid: str) -> Session:
        session = self._open.get((owner, cid))
        if session is None:
            session = Session(owner, cid, self._pipeline(), self.calls)
            self._open[(owner, cid)] = session
        return session
