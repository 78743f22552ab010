"""Conversations as the page and the API see them: listed, reopened, renamed, deleted and
exported, plus each login's preferences. Every read and write is scoped to an owner."""

from __future__ import annotations

import time
from typing import Any

from assistant.records import STAGES, ConversationInfo, StoredTurn
from assistant.store.db import Store

UNTITLED = "New conversation"


class Conversations:
    """A narrow view of the store for the web layer; another owner's id is "no conversation"."""

    def __init__(self, store: Store):
        self._store = store

    def start(self, owner: str, title: str = "") -> str:
        """A new conversation of `owner`'s; returns its id."""
        return self._store.new_conversation(owner, title=title)

    def owned_by(self, conversation_id: str, owner: str) -> bool:
        return self._store.conversation_owner(conversation_id) == owner

    def listed(self, owner: str) -> list[ConversationInfo]:
        """`owner`'s conversations with at least one turn, the most recently active first."""
        return self._store.conversations(owner)

    def get(self, conversation_id: str, owner: str) -> ConversationInfo | None:
        return self._store.conversation(conversation_id, owner)

    def turns(self, conversation_id: str, owner: str) -> list[StoredTurn] | None:
        """Its turns, oldest first; None when it is not `owner`'s."""
        if not self.owned_by(conversation_id, owner):
            return None
        return self._store.transcript(conversation_id)

    def rename(self, conversation_id: str, owner: str, title: str) -> bool:
        title = " ".join(title.split())
        return bool(title) and self._store.rename_conversation(conversation_id, owner, title)

    def delete(self, conversation_id: str, owner: str) -> bool:
        return self._store.delete_conversation(conversation_id, owner)

    def markdown(self, conversation_id: str, owner: str) -> str | None:
        """The whole conversation as a Markdown document; None when it is not `owner`'s."""
        info = self.get(conversation_id, owner)  # None: not `owner`'s
        if info is None:
            return None
        return export_markdown(info, self._store.transcript(conversation_id))

    def recent_timings(self, owner: str, limit: int = 200) -> list[dict[str, Any]]:
        """The latency records of `owner`'s recent turns, for the dashboard."""
        return self._store.recent_timings(owner, limit)

    def prefs(self, owner: str) -> dict[str, Any]:
        """The last conversation, voice and speaking rate `owner` chose (absent: defaults)."""
        return self._store.prefs(owner)

    def remember(self, owner: str, **changes: Any) -> dict[str, Any]:
        return self._store.set_prefs(owner, **changes)


def export_markdown(info: ConversationInfo, turns: list[StoredTurn]) -> str:
    """Title, then each request and reply, reasoning folded in <details>, latency in italics."""
    out = [f"# {info.title or UNTITLED}", ""]
    for t in turns:
        r = t.result
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(t.created_at))
        spoken = " (spoken)" if t.source == "voice" else ""
        out += [f"## You{spoken}, {when}", "", t.user_text, "", "## Assistant", ""]
        if r.reasoning:
            out += ["<details><summary>Reasoning</summary>", "", r.reasoning, "", "</details>", ""]
        out += [r.reply or "*(no answer)*", ""]
        if r.error:
            out += [f"> ⚠️ {r.error}", ""]
        timings = ", ".join(
            f"{STAGES.get(k, k)} {v:.0f} ms" for k, v in r.timings.as_dict().items()
        )
        out += [f"*{r.lane} lane, {r.reason}" + (f"; {timings}" if timings else "") + "*", ""]
    return "\n".join(out)
