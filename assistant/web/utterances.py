"""Hands-free utterances between the microphone stream and the page's turn.

The `/listen` WebSocket hears an utterance end; the page then starts the turn as one of its
own events (so it streams into the chat and is cancelled by Stop like any other). The
utterance waits here under a one-time key the page passes back; only its owner can take it.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field

TTL_S = 120.0
"""An utterance the page never asked for (the tab closed) is dropped after this long."""


@dataclass(frozen=True)
class Utterance:
    owner: str
    text: str
    last_word_ms: float
    """`now_ms()` clock: the end of the user's last word, where the turn's latency starts."""
    heard_ms: dict[str, float] = field(default_factory=dict)
    """`endpoint` (detecting the end of speech) and `stt` (the transcript's tail after it)."""
    at: float = field(default_factory=time.monotonic)


class Utterances:
    def __init__(self) -> None:
        self._items: dict[str, Utterance] = {}
        self._lock = threading.Lock()

    def put(self, utterance: Utterance) -> str:
        key = secrets.token_urlsafe(12)
        with self._lock:
            old = time.monotonic() - TTL_S
            self._items = {k: u for k, u in self._items.items() if u.at > old}
            self._items[key] = utterance
        return key

    def take(self, key: str, owner: str) -> Utterance | None:
        """The utterance under `key` if it is `owner`'s, once."""
        with self._lock:
            found = self._items.get(key)
            if found is None or found.owner != owner:
                return None
            return self._items.pop(key)
