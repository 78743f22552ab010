"""The echo guard: is what the microphone heard mostly the reply being played (`is_echo`),
and until when does that audio play on the page (`Playout`)?"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable

from assistant.records import now_ms

_WORD = re.compile(r"[a-z0-9']+")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def is_echo(heard: str, playing: str, share: float = 0.6) -> bool:
    """Most of what was heard are the words being played: the assistant hearing itself. A
    word cut off mid-way ("cap" of "capital") counts as played."""
    said, played = words(heard), set(words(playing))
    if not said:
        return False

    def was_played(w: str) -> bool:
        return w in played or (len(w) >= 3 and any(p.startswith(w) for p in played))

    return sum(map(was_played, said)) / len(said) >= share


class Playout:
    """When the reply's audio ends on the page, as far as the call knows: a deadline moved
    later as audio is sent and brought in by the page's report, one timer on the loop, and
    an event. Nothing sleeps and re-reads it."""

    def __init__(self, on_end: Callable[[], None]):
        self._on_end = on_end
        self.ended = asyncio.Event()
        self.ended.set()
        self._timer: asyncio.TimerHandle | None = None

    def playing(self) -> bool:
        return not self.ended.is_set()

    def until(self, end_ms: float) -> None:
        """The audio now ends at `end_ms` (`now_ms()` clock); at once if that has passed."""
        self.cancel()
        if (left := end_ms - now_ms()) <= 0:
            self._end()
            return
        self.ended.clear()
        self._timer = asyncio.get_running_loop().call_later(left / 1000, self._end)

    def _end(self) -> None:
        self._timer = None
        self.ended.set()
        self._on_end()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
