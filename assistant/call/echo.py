"""The echo guard's test: is what the microphone heard mostly the reply being played?"""

from __future__ import annotations

import re

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
