"""One turn of a call, as its session keeps it: held until committed, then sent, and what of
its reply the person heard."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from assistant.call.hearing import Heard
from assistant.call.playback import heard_part
from assistant.call.turn_taking import TurnView
from assistant.records import RouteDecision, now_ms
from assistant.turns.pipeline import Playback, TurnRequest


@dataclass
class VoiceTurn:
    """One turn the session started: held until committed, then sent."""

    utterance: int
    text: str
    heard: Heard | None
    """What the listener heard; None for a typed turn or a notice."""
    decision: RouteDecision | None = None
    """The lane chosen when the reply was prepared (the turn is not routed again); None: the
    turn routes itself."""
    committed: asyncio.Event = field(default_factory=asyncio.Event)
    kept: asyncio.Event = field(default_factory=asyncio.Event)
    """The listener said the window for going on with it has passed (`closed`)."""
    task: asyncio.Task[None] | None = None
    discard: bool = False
    """Cancelled before it was committed: the person went on; it is not stored."""
    began: bool = False
    """Its turn's stream began (which stores it however it ends), or it was stored without
    one (`keep_unstarted`)."""
    reply: str = ""
    audio_ms: float = 0.0
    """Audio sent to the page so far (its duration)."""
    first_audio_at: float | None = None
    request: TurnRequest | None = None
    source: str = "voice"
    """"voice", "typed" (typed on the page during the call) or "notice" (a job's notice)."""
    spoken: list[tuple[str, float]] = field(default_factory=list)
    """The reply's sentences as sent to be played: (text, audio ms), in order."""
    voiced: bool = False
    """Its reply is spoken (a voice was set): what is kept is what was heard."""
    played_ms: float | None = None
    """How much of its audio the page says it played when it was stopped (None: no such report
    yet; a report that the audio ran out between sentences is not where it stopped)."""
    playback: Playback | None = None
    session: Any = None
    """The conversation's session that runs it (`assistant.session`), once it started."""

    def view(self) -> TurnView:
        """The turn as the call's turn-taking table reads it."""
        return TurnView(
            self.utterance, self.text, self.committed.is_set(), self.first_audio_at is not None
        )

    def keep_unstarted(self) -> None:
        """Stored as stopped if it is the person's (committed, not forgotten) and its stream
        never began: a task cancelled before its first step runs none of it, so a backlog heard
        at once (its end, then the next speech) lost what was said (`bench voice --calls 2`)."""
        if self.began or self.discard or not self.committed.is_set() or self.session is None:
            return
        self.began = True
        said_at = self.heard.last_word_ms if self.heard is not None else now_ms()
        self.session.kept_unstarted(TurnRequest(
            text=self.text, speak=False, received_ms=said_at, source=self.source, heard_ms={},
            decision=self.decision,
        ))  # fmt: skip

    def stamp(self) -> None:
        """The listener's timings on the request, as of the commit (it went out before it)."""
        heard, request = self.heard, self.request
        if heard is None or request is None:
            return
        for key, value in (("endpoint", heard.endpoint_ms), ("stt", heard.stt_ms)):
            if value is not None:
                request.heard_ms[key] = value

    def heard_of(self, reply: str) -> str:
        """What of `reply` the person heard, as the turn is stored stopped: by the page's
        report if it came, else by the time since its first audio (the page's report, which
        follows a barge-in, then cuts it to what it really played)."""
        if not self.voiced:
            return reply  # no voice: the reply was read, not heard
        played = self.played_ms
        if played is None:
            started = self.first_audio_at
            played = 0.0 if started is None else max(0.0, now_ms() - started)
        return heard_part(reply, self.spoken, played)
