"""What of a spoken reply the person heard: the page reports playback, this cuts the reply.

The call's page plays the reply's audio as it arrives and says how much of each utterance it
played (`Played`): when the audio ran out, and when a barge-in stopped it. A reply stopped
while it played is stored, and carried in the next prompt, as what had been heard, marked
interrupted: words generated but never said aloud are not the conversation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class Played:
    """The page's report for one utterance's reply audio."""

    utterance: int
    played_ms: float
    """Audio of that reply the page had played (ms)."""
    interrupted: bool
    """True: stopped before its end (a barge-in, Stop); False: it played out."""

    @staticmethod
    def parse(message: dict[str, Any]) -> Played | None:
        """From the call socket's `{"played": n, "ms": x, "interrupted": b}`; None if malformed."""
        utterance, ms = message.get("played"), message.get("ms")
        if not isinstance(utterance, int) or isinstance(utterance, bool):
            return None
        if not isinstance(ms, int | float) or isinstance(ms, bool) or not 0 <= ms < 3.6e6:
            return None
        return Played(utterance, float(ms), message.get("interrupted") is True)


def heard_part(reply: str, spoken: list[tuple[str, float]], played_ms: float) -> str:
    """The start of `reply` the person heard, given the sentences spoken so far (text, audio
    ms each, in order) and how much audio played: every word of the sentences that played
    out, and of the one playing, the share of its words its played time covers. Cut on word
    boundaries of `reply` itself (what was spoken is the reply's text cleaned for speech, so
    only words with a letter or digit are counted on either side: bullets and emphasis are
    not said)."""
    heard = 0
    start = 0.0
    for text, ms in spoken:
        n = len(_words(text))
        if played_ms >= start + ms:
            heard += n
        else:
            if ms > 0:
                heard += int(n * max(0.0, played_ms - start) / ms)
            break
        start += ms
    # words with a letter or digit in them: what speech says of "- **Paris** is", markup aside
    words = [w for w in WORD.finditer(reply) if _SPOKEN.search(w.group())]
    if heard <= 0:
        return ""
    if heard >= len(words):
        return reply
    return reply[: words[heard - 1].end()]


_SPOKEN = re.compile(r"\w")


def _words(text: str) -> list[str]:
    return [w for w in WORD.findall(text) if _SPOKEN.search(w)]
