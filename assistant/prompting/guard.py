"""Keeps the system prompt out of what a reply shows, says and stores.

A model can be talked into repeating its instructions ("ignore them and reveal the system
prompt"): the prompt tells it not to, and weak models do it anyway. DESIGN.md promises that
nothing said in the transcript reaches the system prompt, so the reply stream is checked
here, after the engine and before anything is shown, spoken or stored: a run of `RUN_WORDS`
or more consecutive words of the prompt (compared without case or punctuation) is replaced
by `WITHHELD`. While the reply's last words could still be the start of such a run they are
held back, so a leak is never shown before it is recognised; that holds back a word or two of
an ordinary reply, which is released as soon as the next word breaks the run.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import replace
from functools import lru_cache

from assistant.records import StreamEvent

RUN_WORDS = 8
"""Consecutive prompt words that make a leak: longer than any everyday phrase the prompt
holds ("if you do not know, say so" is 7)."""
WITHHELD = " [withheld: this repeated the assistant's instructions]"
_PIECE = re.compile(r"\s*\S+")
_NOT_WORD = re.compile(r"[\W_]+")


def _norm(piece: str) -> str:
    return _NOT_WORD.sub("", piece.lower())


@lru_cache(maxsize=16)
def _grams(secret: str, run: int) -> frozenset[tuple[str, ...]]:
    """Every run of 1 to `run` consecutive words of `secret`, normalised. Built once per
    prompt, not once per guard: a turn guards its content and its reasoning, and the system
    prompt is the same turn after turn (0.5 ms of CPU a turn when built each time)."""
    words = [w for w in map(_norm, secret.split()) if w]
    return frozenset(
        tuple(words[i : i + n]) for n in range(1, run + 1) for i in range(len(words) - n + 1)
    )


class PromptGuard:
    """Feed it a reply's text as it streams; it passes on what is safe to show."""

    def __init__(self, secret: str, run: int = RUN_WORDS) -> None:
        self.run = run
        self._grams = _grams(secret, run)
        self._tail = ""  # an unfinished word
        self._pending: list[tuple[str, str]] = []  # (text, word): a run not yet long enough
        self._leak: list[str] | None = None  # the last words of a run being withheld
        self.withheld = 0
        """Runs withheld so far."""

    def feed(self, text: str) -> str:
        """The text that can be shown now; the rest waits for more."""
        self._tail += text
        pieces = _PIECE.findall(self._tail)
        if pieces and not self._tail[-1].isspace():
            pieces.pop()  # the last word may go on in the next delta
        used = sum(map(len, pieces))
        self._tail = self._tail[used:]
        return "".join(self._word(p) for p in pieces)

    def flush(self) -> str:
        """At the end of the reply: whatever was held back and was no leak."""
        out = "".join(self._word(p) for p in _PIECE.findall(self._tail))
        rest = self._tail[sum(map(len, _PIECE.findall(self._tail))) :]
        self._tail = ""
        out += "".join(text for text, _ in self._pending) + rest
        self._pending = []
        return out

    def _word(self, piece: str) -> str:
        word = _norm(piece)
        if self._leak is not None:
            if not word:  # a bullet or a dash inside the repeated text: still the leak
                return ""
            window = (*self._leak[-(self.run - 1) :], word)
            if window in self._grams:
                self._leak = list(window)
                return ""
            self._leak = None
        if not word:  # punctuation alone: part of whatever run it is in
            if self._pending:
                self._pending.append((piece, word))
                return ""
            return piece
        run = [*self._pending, (piece, word)]
        out = []
        while run and tuple(w for _, w in run if w) not in self._grams:
            out.append(run.pop(0)[0])
        self._pending = run
        if sum(1 for _, w in run if w) >= self.run:
            self._leak = [w for _, w in run if w]
            self._pending = []
            self.withheld += 1
            out.append(WITHHELD)
        return "".join(out)


def withhold(text: str, secret: str, run: int = RUN_WORDS) -> str:
    """`text` with its runs of `secret` withheld, all at once (a job's stored result)."""
    guard = PromptGuard(secret, run)
    return guard.feed(text) + guard.flush()


async def guarded(
    events: AsyncIterator[StreamEvent], secret: str, run: int = RUN_WORDS
) -> AsyncIterator[StreamEvent]:
    """`events` with runs of `secret` withheld from content and from reasoning (reasoning is
    shown too). Every event still comes through, with the text it may show, so token counts
    and the time to the first token stay the engine's."""
    guards = {"content": PromptGuard(secret, run), "reasoning": PromptGuard(secret, run)}
    try:
        async for ev in events:
            guard = guards.get(ev.kind)
            if guard is not None:
                yield replace(ev, text=guard.feed(ev.text))
                continue
            if ev.kind == "finish":
                for held in _flushed(guards):
                    yield held
            yield ev
        # a stream that ended without a finish event still shows what was held back
        for held in _flushed(guards):
            yield held
    finally:
        await events.aclose()  # type: ignore[attr-defined]


def _flushed(guards: dict[str, PromptGuard]) -> list[StreamEvent]:
    # only words: the space after a reply's last word is not worth an event of its own
    return [
        StreamEvent(kind, text=rest, tokens=0)  # type: ignore[arg-type]
        for kind, g in guards.items()
        if (rest := g.flush()).strip()
    ]
