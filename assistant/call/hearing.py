"""What the hands-free listener is told (`ListenConfig`) and says (`Heard`, in its `Outbox`)."""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from typing import Literal

RATE = 16000
FRAME = 512
"""Silero's window at 16 kHz: 32 ms."""
FRAME_MS = FRAME * 1000 / RATE


@dataclass(frozen=True)
class ListenConfig:
    candidate_ms: int = 200
    """Silence after which the turn may be over: the final transcript and the turn-end model
    start, and a reply can be prepared. Measured on ../shared/audio: Silero marks the gaps
    between words inside a phrase at 32-160 ms, so 200 ms is past them; the model's verdict
    on a finished phrase is already settled at 200 ms (0.95-0.98 on every finished recording)."""
    fallback_ms: int = 1500
    """Silence that ends the turn whatever the model says. The longest mid-sentence pause in
    the recordings is 1088 ms (jfk.flac, "... can do for you, | ask what ..."; the model says
    0.02-0.07 all through it), so 1.5 s keeps it one turn, while a finished turn the model
    doubts waits at most this long."""
    recheck_ms: int = 300
    """While the model says "not finished", it is asked again after this much more silence
    (the tail of a falling phrase can settle later: hotwords.mp3 goes 0.25 at 200 ms to
    0.88 at 400 ms)."""
    end_threshold: float = 0.5
    """Smart Turn's probability above which the turn is complete (pipecat's own cut)."""
    min_speech_ms: int = 250
    """Voiced time below this (a cough, a click, a knock) starts no turn."""
    threshold: float = 0.5
    """Silero speech probability above which a frame is voiced."""
    max_utterance_s: float = 30.0
    barge_min_speech_ms: int = 300
    """While a reply plays, speech must last this long (and not be its echo) to interrupt."""
    preroll_ms: int = 300
    """Audio kept from before the first voiced frame, so the first word is not clipped."""
    merge_ms: int = 2000
    """Speech that starts this soon after the last word of a committed turn continues it: the
    listener says "resumed" (the session cancels the reply it started) and the final
    transcript and the model then hear both parts as one. jfk.flac's "And so my fellow
    Americans," sounds finished (0.95) and goes on 1.15 s after the last word; a reply's
    first audio comes 0.8-1.5 s after the last word, so this is "they went on as the reply
    began". It counts from the last word, so a commit delayed on a busy machine does not
    widen it. Speaking later than this over the reply is a barge-in and a turn of its own.
    Longer than `fallback_ms` (by `MERGE_PAST_FALLBACK_MS` at least, whatever the setting):
    at 1,500 ms, equal to it, a turn the fallback pause ended had
    its window closed as it was committed, so on a busy machine (the model's verdict later
    than the fallback, the pause heard a little longer) "ask not ..." came out as turns of
    its own, its first word dropped as too short (CI's call test, 1 run in 3 with two cores
    busy)."""
    preview_every_ms: int = 1000
    """The words so far are transcribed this often while someone speaks (the growing
    transcript)."""

    def __post_init__(self) -> None:
        # a longer `handsfree_pause_ms` must not close the window as its turn is committed
        least = self.fallback_ms + MERGE_PAST_FALLBACK_MS
        if self.merge_ms < least:
            object.__setattr__(self, "merge_ms", least)


MERGE_PAST_FALLBACK_MS = 500
"""The window for going on lasts at least this long past the fallback pause."""


# What the listener says, in order:
#
# speech      someone started speaking (barge-in); over a reply, with the words heard so far
# partial     the transcript so far (the page shows it growing)
# candidate   a short pause (`candidate_ms`): the turn may be over; carries the final
#             transcript, so a reply can be prepared before the end is confirmed
# resumed     speech went on after a candidate (or soon after a final): what was prepared
#             for it is stale; the same utterance goes on
# final       the end is committed (the turn-end model said so, or the pause reached
#             `fallback_ms`), with the transcript and the timings
# closed      the window for going on with a committed utterance has passed: its turn is
#             the person's for good (what the session waits for before keeping it)
# ignored     an utterance dropped: too short, no words, or the reply's own echo
HeardKind = Literal[
    "speech", "partial", "candidate", "resumed", "final", "closed", "ignored", "notice"
]
"""`notice`: something the person should be told (`reason`), e.g. that the embedded model
stands in for a failed speech server."""


@dataclass(frozen=True)
class Heard:
    kind: HeardKind
    utterance: int
    text: str = ""
    reason: str = ""
    """Why it was ignored; on "final", what ended it: "model" or "pause" (the fallback)."""
    last_word_ms: float | None = None
    """`now_ms()` clock of the end of the last voiced frame (on "candidate" and "final")."""
    endpoint_ms: float | None = None
    """From the last word to the decision that the turn ended (on "final")."""
    stt_ms: float | None = None
    """Transcription still to do after that decision (on "final"; 0: it was ready)."""
    probability: float | None = None
    """The turn-end model's last verdict (on "final"; None: it was not asked)."""
    audio_s: float = 0.0
    """The utterance's length; on "speech", the time voiced so far."""
    seq: int = 0
    """Its place in what the listener said (1, 2, ...; 0: not said by a listener), so the
    session can tell whether it has heard everything said so far."""


class Outbox:
    """What the listener said, in order, for its one reader (the call), each numbered
    (`Heard.seq`)."""

    def __init__(self) -> None:
        self._out: list[Heard] = []
        self._ready = asyncio.Event()
        self.said = 0
        """How many things it has said (the last one's `seq`)."""

    def say(self, heard: Heard) -> None:
        self.said += 1
        self._out.append(dataclasses.replace(heard, seq=self.said))
        self._ready.set()

    def take(self) -> list[Heard]:
        out, self._out = self._out, []
        self._ready.clear()
        return out

    async def next(self) -> list[Heard]:
        """Wait until something was said; what was."""
        while not self._out:
            await self._ready.wait()
        return self.take()
