"""Typed records passed between stages. Defined in one place so every stage agrees."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Literal

Lane = Literal["chat", "deep"]
Role = Literal["system", "user", "assistant"]
JobState = Literal["queued", "running", "done", "failed", "cancelled"]

STAGES = {
    "endpoint": "endpoint",
    "stt": "stt",
    "route": "route",
    "queue": "queue",
    "ttft": "ttft",
    "first_sentence": "1st sentence",
    "tts_first_audio": "tts 1st",
    "llm_total": "llm",
    "tts_total": "tts",
    "first_audio": "1st audio",
    "total": "total",
}
"""The one list of latency stages (DESIGN.md section 6), in order, with their short labels."""
TIMING_KEYS = tuple(STAGES)


# finish reasons the engine client adds to the engine's own ("stop", "length", "tool_calls")
CUT = "cut"
"""The connection ended before the engine said it had finished."""
STALLED = "stalled"
"""No chunk arrived within the lane's read deadline."""
TIMED_OUT = "timeout"
"""The lane's total deadline passed."""
CRASHED = "crashed"
"""The engine's process died during the request (the finish event's text says how)."""
INTERRUPTED = "interrupted"
STOPPED = "stopped before the answer was complete"
"""The error of a turn stopped by the person (Stop, a barge-in, a newer turn, a client leaving)."""
"""The engine ended the stream cleanly but early, with no finish reason and budget left:
llama-cpp-python's server does this to a running request when another one arrives."""
INCOMPLETE = (CUT, STALLED, TIMED_OUT, CRASHED, INTERRUPTED)
EXHAUSTED_MESSAGE = (
    "The engine spent its whole reasoning budget and gave no answer, even after a retry "
    "without thinking. Try a shorter question, or delegate it for a bigger budget."
)
HANDED_OFF = "I've handed that to the deep lane; I'll tell you when it's done."
"""Spoken instead of the written hand-off, whose job id is no pleasure to hear."""


@dataclass(frozen=True)
class Message:
    """One chat message as the engine sees it."""

    role: Role
    content: str


@dataclass(frozen=True)
class RouteDecision:
    """Which lane a request goes to, and a reason a person can read."""

    lane: Lane
    reason: str
    ms: float = 0.0
    text: str = ""
    """The request with any explicit cue ("delegate ...") removed."""


@dataclass(frozen=True)
class StreamEvent:
    """One increment from the engine stream."""

    kind: Literal["reasoning", "content", "tool_call", "finish", "usage"]
    text: str = ""
    finish_reason: str | None = None
    tokens: int = 0


@dataclass
class Timings:
    """Per-turn latency record in milliseconds (DESIGN.md section 6); None = not measured."""

    endpoint: float | None = None
    """Hands-free only: how long the end of speech took to detect."""
    stt: float | None = None
    route: float | None = None
    queue: float | None = None
    ttft: float | None = None
    first_sentence: float | None = None
    tts_first_audio: float | None = None
    llm_total: float | None = None
    tts_total: float | None = None
    first_audio: float | None = None
    total: float | None = None

    def as_dict(self) -> dict[str, float]:
        return {k: round(v, 1) for k, v in asdict(self).items() if v is not None}


@dataclass
class Reply:
    """What one engine request produced."""

    content: str = ""
    reasoning: str = ""
    finish_reason: str | None = None
    content_tokens: int = 0
    reasoning_tokens: int = 0
    incomplete: bool = False
    """True when the stream was cut before the engine said it had finished."""
    delegate_requested: bool = False
    """True when the chat model called the `delegate` tool."""
    tokens_per_s: float | None = None
    note: str = ""
    """Why the stream ended early, where the engine layer knows (an engine crash)."""

    @property
    def exhausted(self) -> bool:
        """The budget ran out in reasoning: no answer at all."""
        return self.finish_reason == "length" and not self.content.strip()

    @property
    def reasoning_only(self) -> bool:
        """The engine said it had finished, but everything it said was reasoning (a model that
        never closed its thinking): no answer, whatever the finish reason."""
        return (
            not self.content.strip()
            and bool(self.reasoning.strip())
            and not self.delegate_requested
            and not self.incomplete
            and self.finish_reason != "length"
        )

    @property
    def unanswered(self) -> bool:
        """No answer came: never an empty success."""
        return self.exhausted or self.reasoning_only


@dataclass
class TurnResult:
    """One finished chat turn, as the CLI and the page report it."""

    reply: str
    lane: Lane
    reason: str
    finish_reason: str | None
    timings: Timings = field(default_factory=Timings)
    reasoning: str = ""
    error: str | None = None
    incomplete: bool = False
    job_id: str | None = None
    tokens: int = 0
    tokens_per_s: float | None = None
    exhausted: bool = False
    delegate_requested: bool = False
    """The chat model called the `delegate` tool."""
    turn_id: int | None = None
    """The stored turn's id, once stored."""
    offer: str | None = None
    """The task the reply offered to take on ("draft the migration plan"): a "yes" to it on the
    next turn delegates this task (issue 30)."""
    dropped: int = 0
    """Earlier turns this turn's request left out to fit the engine's context window (issue
    48): still stored and shown, no longer in the model's view."""
    window_notice: bool = False
    """The conversation's first turn to leave turns out: the page says so, once."""

    def as_json(self) -> dict:
        return {
            "reply": self.reply,
            "lane": self.lane,
            "reason": self.reason,
            "finish_reason": self.finish_reason,
            "timings_ms": self.timings.as_dict(),
            "error": self.error,
            "incomplete": self.incomplete,
            "job_id": self.job_id,
            "tokens": self.tokens,
            "tokens_per_s": self.tokens_per_s,
            "dropped": self.dropped,
        }


@dataclass
class Job:
    """A delegated deep-lane task, as stored."""

    id: str
    owner: str
    prompt: str
    state: JobState
    created_at: float
    updated_at: float
    result: str = ""
    reasoning: str = ""
    error: str | None = None
    budget: int = 0
    reasoning_tokens: int = 0
    answer_tokens: int = 0
    elapsed_s: float = 0.0
    attempts: int = 0
    idempotency_key: str | None = None
    notified: bool = False

    def as_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ConversationInfo:
    """One conversation as the page's list shows it."""

    id: str
    title: str
    """Its first request unless the user renamed it."""
    updated_at: float
    """The time of its last turn (its start, before any)."""
    turns: int


@dataclass(frozen=True)
class StoredTurn:
    """A turn as the store keeps it, for reopening and exporting a conversation."""

    user_text: str
    source: str
    """"text" or "voice"."""
    result: TurnResult
    created_at: float


@dataclass(frozen=True)
class Transcript:
    """Speech-to-text output."""

    text: str
    language: str
    duration_s: float
    stt_ms: float

    def as_json(self) -> dict:
        return {
            "text": self.text,
            "language": self.language,
            "duration_s": round(self.duration_s, 3),
            "stt_ms": round(self.stt_ms, 1),
        }


@dataclass(frozen=True)
class AudioChunk:
    """One synthesized sentence: mono int16 PCM."""

    sample_rate: int
    samples: bytes
    text: str = ""


def now_ms() -> float:
    return time.perf_counter() * 1000.0


@dataclass
class TurnEvent:
    """One step of a turn in progress: what every stage of the pipeline yields."""

    kind: Literal[
        "transcript", "route", "reasoning", "content", "audio", "error", "waiting", "done"
    ]
    """"waiting": a followed job exists (its id in `text`) or is still quiet; no words."""
    text: str = ""
    transcript: Transcript | None = None
    decision: RouteDecision | None = None
    audio: AudioChunk | None = None
    """One synthesized piece of the answer (kind "audio")."""
    result: TurnResult | None = None
    """The finished turn (kind "done"), with its final timings once the pipeline ends it."""
