"""Which of a login's conversations an OpenAI request continues, found by the history it sends
(OpenAI clients send the whole conversation each time and no id)."""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass, field

from assistant.turns.conversations import Conversations
from assistant.web.openai.wire import ApiError

THREADS_KEPT = 10_000
"""Conversations remembered by their history, most recent first (memory stays bounded)."""


def thread_key(owner: str, history: tuple[tuple[str, str], ...]) -> str:
    return hashlib.sha256(json.dumps([owner, history]).encode()).hexdigest()


@dataclass
class Threads:
    """The login's conversation a request continues, found by the history it sends.

    OpenAI clients send the whole conversation each time and no id. After a turn, the
    conversation is remembered under its history so far; the next request that sends that
    history (plus its new message) continues it. Not remembered (after a restart): the
    login's recent conversations whose stored turns are that history."""

    conversations: Conversations
    kept: OrderedDict[str, str] = field(default_factory=OrderedDict)

    def find(self, owner: str, history: tuple[tuple[str, str], ...], asked: str | None) -> str:
        if asked:
            if not self.conversations.owned_by(asked, owner):
                raise ApiError(404, f"no conversation {asked}", "invalid_request_error",
                               "conversation_not_found")  # fmt: skip
            return asked
        if history:
            cid = self.kept.get(thread_key(owner, history))
            if cid is not None and self.conversations.owned_by(cid, owner):
                return cid
            cid = self._stored(owner, history)
            if cid is not None:
                return cid
        return self.conversations.start(owner)

    def _stored(self, owner: str, history: tuple[tuple[str, str], ...]) -> str | None:
        for info in self.conversations.listed(owner)[:20]:
            if info.turns != len(history):
                continue
            turns = self.conversations.turns(info.id, owner) or []
            if tuple((t.user_text.strip(), t.result.reply.strip()) for t in turns) == history:
                return info.id
        return None

    def remember(self, owner: str, history: tuple[tuple[str, str], ...], cid: str) -> None:
        key = thread_key(owner, history)
        self.kept[key] = cid
        self.kept.move_to_end(key)
        while len(self.kept) > THREADS_KEPT:
            self.kept.popitem(last=False)
