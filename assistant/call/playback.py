"""What of a spoken reply the person heard: the page reports playback, this cuts the reply.

The call's page plays the reply's audio as it arrives and says how much of each utterance it
played (`Played`): when the audio ran out, and when a barge-in stopped it. A reply stopped
while it played is stored, and carried in the next prompt, as what had been heard, marked
interrupted: words generated but never said aloud are not the conversation. The cut is made
on the reply's own text: each spoken sentence is mapped back onto the text it was made from
(speech says a link as "a link", `my_var` as "my var", and never says code or list numbers),
so what is kept ends where the played audio ended, word for word, and never goes further.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from assistant.speech.sentences import strip_code_blocks
from assistant.speech.tts import clean_for_speech

_TOKEN = re.compile(r"\S+")
_WORD = re.compile(r"[^\W_]+")
"""A word as said: letters or digits (`my_var` is said "my var", `1,000` as two numbers)."""
MAX_SOURCE_CHARS = 4000
"""The longest stretch of the reply one spoken sentence is looked for in: a sentence is at most
a few hundred characters said, and a link said "a link" is rarely longer than this."""
RESYNC_WORDS = 8
"""A spoken sentence not found where the last ended is looked for from this many words on."""
MAX_SOURCE_TOKENS = 300
"""And the most tokens (runs of non-space) it is looked for in: each is a try at the stretch
so far, so this bounds the work on a sentence said some other way (not from this reply)."""


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
    """The start of `reply` the person heard, given the sentences spoken so far (their spoken
    text, audio ms each, in order) and how much audio played. Each spoken sentence is mapped
    back onto the span of `reply` it was made from (`source_spans`), so a link said "a link",
    `my_var` said "my var", list numbers and markup that are not said, and code that is never
    spoken do not shift the cut: it ends where the last sentence that played out came from
    and, in the one playing, at the word its played time reaches, never beyond its span.
    Only ever a prefix of `reply`."""
    played: list[tuple[str, float]] = []
    start = 0.0
    for text, ms in spoken:
        if played_ms >= start + ms:
            played.append((text, 1.0))
        else:
            if ms > 0:
                played.append((text, max(0.0, played_ms - start) / ms))
            break
        start += ms
    if not played:
        return ""
    source = _Source(reply)
    spans = source.spans([text for text, _ in played])
    text, fraction = played[-1]
    if fraction < 1.0:  # the sentence playing: its share of words, within its own source
        said = _words(text)
        n = int(len(said) * fraction)
        last = spans.pop()
        if n > 0:
            spans.append((last[0], source.word_end(*last, said, n)))
    return reply[: source.in_reply(spans[-1][1])] if spans else ""


def source_spans(reply: str, spoken: list[str]) -> list[tuple[int, int]]:
    """For each spoken sentence (as said, in order), the span of `reply` it was made from."""
    source = _Source(reply)
    return [(source.in_reply(a), source.in_reply(b)) for a, b in source.spans(spoken)]


class _Source:
    """A reply as speech reads it: fenced code dropped (it is shown, never spoken), with where
    each remaining character sits in the reply."""

    def __init__(self, reply: str):
        self.text = strip_code_blocks(reply)
        self.at: list[int] = []
        pos = 0
        for i, part in enumerate(reply.split("```")):
            if i % 2 == 0:  # outside a fence, as `strip_code_blocks` keeps it
                self.at.extend(range(pos, pos + len(part)))
            pos += len(part) + 3
        del self.at[len(self.text) :]  # trailing backticks it holds back (a fence to come)

    def in_reply(self, end: int) -> int:
        """An end offset in the code-free text, as an end offset in the reply."""
        return 0 if end <= 0 else self.at[end - 1] + 1

    def spans(self, spoken: list[str]) -> list[tuple[int, int]]:
        """Each spoken sentence's source, in the code-free text, one after the other: the
        shortest stretch from where the last ended (or from one of the next few words, past
        text said with the sentence before) that speech says as those very words (by
        `clean_for_speech`, the voice's own normalisation). A sentence found nowhere (said
        some other way: a hand-off, a piece of a link that speech cut in two) adds nothing:
        the cut never goes past text whose saying it has matched."""
        spans: list[tuple[int, int]] = []
        cursor = 0
        for said in spoken:
            want = _words(said)
            # from the token of a word on: what has no word (a table's rules, a divider) was
            # never said, however long
            found = None
            for start in itertools.islice(self._word_starts(cursor), RESYNC_WORDS):
                if (end := self._match(start, want)) is not None:
                    found = (start, end)
                    break
            if found is None:
                spans.append((cursor, cursor))
                continue
            spans.append(found)
            cursor = found[1]
        return spans

    def _word_starts(self, cursor: int) -> Iterator[int]:
        """Where each token with a word in it starts, from `cursor` on."""
        for m in _TOKEN.finditer(self.text, cursor):
            if _WORD.search(m.group()):
                yield m.start()

    def _match(self, start: int, want: list[str]) -> int | None:
        tokens = _TOKEN.finditer(self.text, start, start + MAX_SOURCE_CHARS)
        for m in itertools.islice(tokens, MAX_SOURCE_TOKENS):
            piece = self.text[start : m.end()]
            got = _words(clean_for_speech(piece))
            if got == want or _words(piece) == want:
                return m.end()
            if len(got) > len(want) + 2:  # (a list's "1." is a word until its line goes on)
                return None
        return None

    def word_end(self, start: int, end: int, said: list[str], n: int) -> int:
        """Where the first `n` of the words `said` of `text[start:end]` end (at most `end`):
        the shortest stretch speech says as those words, else as many words."""
        fallback = end
        for m in _TOKEN.finditer(self.text, start, end):
            got = _words(clean_for_speech(self.text[start : m.end()]))
            if got[:n] == said[:n] and len(got) >= n:
                return m.end()
            if fallback == end and len(got) >= n:
                fallback = m.end()
        return fallback


def _words(text: str) -> list[str]:
    return [w.casefold() for w in _WORD.findall(text)]
