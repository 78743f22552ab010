"""One turn's latency record: one owner for its timings, reported once, when the turn ends."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

from assistant.records import STAGES, RouteDecision, Timings, TurnResult, now_ms

log = logging.getLogger(__name__)


SAVE_EVERY_S = 1.0
"""A running turn's reply is saved at most this often: a crash loses at most this much."""


class TurnLog(Protocol):
    """Where turns are kept (the store): from their start, and finished."""

    def start_turn(
        self, conversation_id: str, user_text: str, lane: str, reason: str, source: str = "text"
    ) -> int: ...

    def save_partial(self, turn_id: int, reply: str, reasoning: str) -> None: ...

    def cut_reply(self, turn_id: int, reply: str) -> None: ...

    def add_turn(
        self,
        conversation_id: str,
        user_text: str,
        result: TurnResult,
        source: str = "text",
        turn_id: int | None = None,
    ) -> int: ...


class Recorder:
    """Stages write their times here; `finish` stores the turn and tells the observer, once.

    Times count from `start_ms`: when the request arrived (typed) or the end of speech (voice).
    """

    def __init__(
        self,
        start_ms: float | None = None,
        *,
        log_to: TurnLog | None = None,
        observe: Callable[[TurnResult], None] | None = None,
    ):
        self.start_ms = start_ms if start_ms is not None else now_ms()
        self.timings = Timings()
        self.log_to = log_to
        self.observe = observe
        self.finished = False
        self.turn_id: int | None = None
        """The turn's stored row once `begin` stored it (pending)."""
        self._saved_at = 0.0

    def since_start(self) -> float:
        return now_ms() - self.start_ms

    def set(self, stage: str, ms: float) -> None:
        assert stage in STAGES, stage
        setattr(self.timings, stage, ms)

    def first(self, stage: str, ms: float | None = None) -> None:
        """Record `stage` (default: now, from the start) unless it already has a value."""
        if getattr(self.timings, stage) is None:
            self.set(stage, self.since_start() if ms is None else ms)

    def add(self, stage: str, ms: float) -> None:
        """Accumulate into `stage` (speech time over several sentences, queue over retries)."""
        self.set(stage, (getattr(self.timings, stage) or 0.0) + ms)

    def begin(
        self, decision: RouteDecision, *, conversation_id: str | None, text: str, source: str
    ) -> None:
        """The turn is routed: store it now, pending, so a crash keeps the user's words."""
        if self.turn_id is None and conversation_id and text.strip() and self.log_to:
            self.turn_id = self.log_to.start_turn(
                conversation_id, text, decision.lane, decision.reason, source
            )
            self._saved_at = time.monotonic()

    def progress(self, reply: str, reasoning: str) -> None:
        """What has arrived so far; saved over the pending row every SAVE_EVERY_S."""
        if self.turn_id is None or self.log_to is None or self.finished:
            return
        now = time.monotonic()
        if now - self._saved_at >= SAVE_EVERY_S:
            self._saved_at = now
            self.log_to.save_partial(self.turn_id, reply, reasoning)

    def finish(
        self, result: TurnResult, *, conversation_id: str | None, text: str, source: str
    ) -> TurnResult:
        """The turn ended: its total, stored with its final timings, observed. Once only."""
        if self.finished:
            return result
        self.finished = True
        self.set("total", self.since_start())
        result.timings = self.timings
        if conversation_id and self.log_to is not None:
            result.turn_id = self.log_to.add_turn(
                conversation_id, text, result, source=source, turn_id=self.turn_id
            )
        if self.observe is not None:
            try:
                self.observe(result)
            except Exception:  # a broken observer never breaks a turn
                log.exception("the turn observer failed")
        return result
