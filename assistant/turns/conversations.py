"""Conversations as the page and the API see them: started, owned, and measured per login."""

from __future__ import annotations

from typing import Any

from assistant.store.db import Store


class Conversations:
    """A narrow view of the store for the web layer; every read is scoped to an owner."""

    def __init__(self, store: Store):
        self._store = store

    def start(self, owner: str, title: str = "") -> str:
        """A new conversation of `owner`'s; returns its id."""
        return self._store.new_conversation(owner, title=title)

    def owned_by(self, conversation_id: str, owner: str) -> bool:
        return self._store.conversation_owner(conversation_id) == owner

    def recent_timings(self, owner: str, limit: int = 200) -> list[dict[str, Any]]:
        """The latency records of `owner`'s recent turns, for the dashboard."""
        return self._store.recent_timings(owner, limit)
