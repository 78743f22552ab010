"""Incremental sentence splitting for a streamed reply, so speech can start early.

The reply arrives as small text deltas. `SentenceSplitter.feed` returns each sentence as soon
as it is certainly complete, and the reply's first piece sooner: its first clause, where a
speaker would pause (`_first_clause`); `flush` returns the rest at the end of the stream.
Fenced code blocks are dropped: code is shown, never spoken.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from functools import lru_cache

import pysbd

MAX_CLAUSE_CHARS = 200
"""A clause longer than this is cut (at a comma, else a space) so speech starts early."""
MIN_CLAUSE_CHARS = 40
"""Never cut a long clause before this many characters: short fragments sound choppy."""
FIRST_CLAUSE_WORDS = 4
"""The first piece of a reply may be a clause of at least this many words, ended where a
speaker would pause (`_first_clause`), so speech starts on the first few words instead of at
the first sentence's end (issue 51). Only the first piece: by the next one, speech is already
playing, and whole sentences sound better."""
AHEAD_WORDS = 4
"""The first clause is cut only once this many words after the cut have arrived with no
sentence end among them: what follows is no dangling fragment ("..., I think."), and a
sentence about to end is kept whole."""

_FENCE = "```"
_CLOSERS = "\"'\u201d\u2019)]"  # straight and curly closing quotes, brackets

# A boundary is only *possible* here; pysbd then decides (abbreviations, decimals, initials).
# After "." the whole next word must have arrived: "the U.S. A" may still become "U.S. Army".
_BOUNDARY = re.compile(
    r"""[!?…]+[\"'\u201d\u2019)\]]*\s+(?=\S)
      | \.[\"'\u201d\u2019)\]]*\s+(?=\S+\s)
      | \n\s*(?=\S)""",
    re.X,
)
_CLAUSE_CUT = re.compile(r"[,;:\u2014\u2013]\s+|\s+-\s+")  # comma-like marks, dashes
_MARK = re.compile(r"[,;:\u2014\u2013](?=\s)|(?<=[ \t])-(?=\s)")  # a pause after it
# Before these a clause starts. "and", "or" and "so" start one only before its subject ("and
# it", "so you"): elsewhere they join words ("salt and pepper", "so much").
_CONJUNCTION = re.compile(
    r"""(?<=\s)(?=(?:but|because|although|whereas|unless)\s)
      | (?<=\s)(?=(?:and|or|so)\s+(?:then|I|you|he|she|it|we|they|this|that|there)[\s'\u2019])""",
    re.X | re.I,
)
_MAYBE_END = re.compile(r"[.!?\u2026][\"'\u201d\u2019)\]]*(?:\s|$)|\n")
_LIST_WORD = re.compile(r"(?:and|or)$", re.I)
_WORD = re.compile(r"\S+")
_SPACE = re.compile(r"\s")
_SPEAKABLE = re.compile(r"\w")
_ELLIPSIS = re.compile(r"…(?=(\s+[\"'\u201c\u2018(\[]*[A-Z])?)")


@lru_cache(maxsize=1)
def _segmenter() -> pysbd.Segmenter:
    return pysbd.Segmenter(language="en", clean=False)


def _pysbd_bounds(text: str) -> list[int]:
    """End offsets of each sentence in `text` (the last is len(text)), per pysbd."""
    # pysbd ignores "…"; as "." (same length, so offsets still map) it ends a sentence, but
    # only before a capital: "Well… maybe" is one thought.
    mapped = _ELLIPSIS.sub(lambda m: "." if m.group(1) else ",", text)
    segments = _segmenter().segment(mapped)
    if "".join(segments) != mapped:
        # pysbd altered the text (it can, on odd input): do not guess, keep it whole.
        return [len(text)]
    bounds, pos = [], 0
    for seg in segments:
        pos += len(seg)
        # pysbd sometimes splits `end." Next` before the closing quote: move it back.
        while pos < len(text) and text[pos] in _CLOSERS and text[pos - 1] in ".!?…":
            pos += 1
        if not bounds or pos > bounds[-1]:
            bounds.append(pos)
    if bounds[-1] != len(text):
        bounds.append(len(text))
    return bounds


def _clause_cut(text: str) -> int:
    """Where to cut an over-long clause: after the last comma-like mark, else a space."""
    window = text[:MAX_CLAUSE_CHARS]
    cuts = [m.end() for m in _CLAUSE_CUT.finditer(window) if m.start() >= MIN_CLAUSE_CHARS]
    if cuts:
        return cuts[-1]
    spaces = [m.end() for m in re.finditer(r"\s+", window) if m.start() >= MIN_CLAUSE_CHARS]
    if spaces:
        return spaces[-1]
    return MAX_CLAUSE_CHARS  # one enormous token (a URL, a hash): hard cut


def _open_quote(text: str) -> bool:
    """Whether `text` ends inside a quote, brackets, inline code or emphasis."""
    pairs = (("\u201c", "\u201d"), ("(", ")"), ("[", "]"))
    return any(text.count(c) % 2 for c in '"`*') or any(
        text.count(a) > text.count(b) for a, b in pairs
    )


def _first_clause(text: str) -> int | None:
    """Where the first piece of a reply may end before its sentence does, or None: after a
    comma-like mark or a spaced dash, or before a conjunction that starts a clause, once
    `FIRST_CLAUSE_WORDS` have come before it and `AHEAD_WORDS` after it. Never inside a
    quote, never where a sentence end (or what may be one, as "e.g. ") has arrived after it,
    never in a list ("flour, sugar, eggs", "red, green and blue", "Paris, the capital, is")."""
    text = text[: 2 * MAX_CLAUSE_CHARS]  # a first piece is never longer: bounded work
    cuts = [(m.start(), m.end()) for m in _MARK.finditer(text)]
    marks = [end for _, end in cuts]
    cuts += [(m.start(), m.start()) for m in _CONJUNCTION.finditer(text)]
    if not cuts:
        return None
    words = [m for m in _WORD.finditer(text) if _SPEAKABLE.search(m.group())]
    starts = [m.start() for m in words]
    complete = len(words) - (1 if words and words[-1].end() == len(text) else 0)
    last_end = max((m.start() for m in _MAYBE_END.finditer(text)), default=-1)
    for start, end in sorted(cuts):
        i = bisect_left(starts, end)  # the first word after the cut
        if complete - i < AHEAD_WORDS:
            return None  # a later cut has fewer still
        if i < FIRST_CLAUSE_WORDS or last_end >= end or _open_quote(text[:end]):
            continue
        # a list: a short item before the cut (since the previous mark), or next after it
        previous = marks[bisect_right(marks, start) - 1] if marks and marks[0] <= start else None
        if previous is not None and bisect_left(starts, start) - bisect_left(starts, previous) < 3:
            continue
        ahead = [m.group() for m in words[i : i + AHEAD_WORDS]]
        if _MARK.search(" ".join(ahead) + " ") or any(_LIST_WORD.match(w) for w in ahead[1:]):
            continue
        return len(text) - len(text[end:].lstrip())  # the space too: pysbd drops a leading one
    return None


def _speakable(pieces: list[str]) -> list[str]:
    return [p.strip() for p in pieces if _SPEAKABLE.search(p)]


class SentenceSplitter:
    """Feed streamed text; get back sentences as soon as they are complete."""

    def __init__(self) -> None:
        self._buf = ""
        """Speakable text not yet returned."""
        self._tail = ""
        """Trailing backticks held back: they may be the start of a code fence."""
        self._in_code = False
        self._checked = 0
        """Boundary offset pysbd already declined, so it is not asked again for nothing."""
        self._started = False
        """A piece has been returned: the early first clause is no longer wanted."""

    def feed(self, delta: str) -> list[str]:
        """Add a delta; return the sentences it completed (possibly none)."""
        added = self._strip_code(delta)
        self._buf += added
        out = self._complete_sentences()
        # a first clause can only become possible as a word ends (a space arrives)
        early = not out and not self._started and _SPACE.search(added)
        if early and (first := _first_clause(self._buf)) is not None:
            out.append(self._buf[:first])
            self._buf, self._checked = self._buf[first:], 0
        while len(self._buf) > MAX_CLAUSE_CHARS:
            cut = _clause_cut(self._buf)
            out.append(self._buf[:cut])
            self._buf = self._buf[cut:]
            self._checked = 0
        out = _speakable(out)
        self._started = self._started or bool(out)
        return out

    def flush(self) -> list[str]:
        """End of stream: return whatever is left, split into sentences."""
        text = self._buf + ("" if self._in_code else self._tail)
        self._buf, self._tail, self._in_code, self._checked = "", "", False, 0
        return split_sentences_now(text)

    def _strip_code(self, delta: str) -> str:
        text, kept = self._tail + delta, []
        self._tail = ""
        while (i := text.find(_FENCE)) >= 0:
            if not self._in_code:
                kept.append(text[:i])
            self._in_code = not self._in_code
            text = text[i + len(_FENCE) :]
        held = len(text) - len(text.rstrip("`"))
        if held:
            self._tail, text = text[-held:], text[:-held]
        if not self._in_code:
            kept.append(text)
        return "".join(kept)

    def _complete_sentences(self) -> list[str]:
        safe = 0
        for m in _BOUNDARY.finditer(self._buf):
            safe = m.end()
        if safe <= self._checked:
            return []
        bounds = [b for b in _pysbd_bounds(self._buf) if b <= safe]
        if not bounds:
            self._checked = safe
            return []
        out, start = [], 0
        for b in bounds:
            out.append(self._buf[start:b])
            start = b
        self._buf = self._buf[start:]
        self._checked = 0
        return out


def split_sentences_now(text: str) -> list[str]:
    """Split complete text into speakable sentences, long clauses cut as `feed` would."""
    out, start = [], 0
    for b in _pysbd_bounds(text) if text else []:
        sentence = text[start:b]
        start = b
        while len(sentence) > MAX_CLAUSE_CHARS:
            cut = _clause_cut(sentence)
            out.append(sentence[:cut])
            sentence = sentence[cut:]
        out.append(sentence)
    return _speakable(out)


def split_sentences(text: str) -> list[str]:
    """Split a whole text (code fences dropped) into speakable sentences."""
    splitter = SentenceSplitter()
    return splitter.feed(text) + splitter.flush()


def strip_code_blocks(text: str) -> str:
    """Remove fenced code blocks (an unclosed fence drops the rest)."""
    return SentenceSplitter()._strip_code(text)
