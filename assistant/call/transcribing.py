"""Transcription for the listener (`Transcriber`): one at a time per utterance, previews
giving way.

A newer request replaces a waiting one (a final is never queued behind a preview that would
only be superseded), and a preview starts only when no other listener's transcription is in
flight in this process, so on a busy machine previews give way to other people's finals.

Passes keep pace with the speech on the audio's clock: while one takes most of the step to
the next (a busy machine, two calls), the step doubles (up to 4 s), so the passes thin out
instead of falling ever further behind; once they are quick again it comes back
(`next_step`).

On a speech server (`speech.remote`) the CPU is not this machine's: a final starts at once
even while a preview runs (at most two requests per utterance), and previews do not wait
for other listeners' transcriptions.
"""

from __future__ import annotations

from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np

from assistant.call.frames import Frames
from assistant.call.hearing import FRAME_MS
from assistant.errors import AssistantError
from assistant.speech.pools import speech_pools
from assistant.speech.stages import SpeechToText


def _remote(stt: object) -> bool:
    return bool(getattr(stt, "remote", False))


PASS_BUSY = 0.6
"""A pass taking more than this share of the step to the next one: the passes fall behind."""
PASS_EASY = 0.3
MAX_STEP_MS = 4000


def next_step(step_ms: float, took_ms: float, base_ms: float) -> float:
    """The step to the next pass, after one took `took_ms` of speech to come back: doubled
    while passes take most of the step (fewer passes rather than a backlog), back toward
    `base_ms` when they are quick."""
    if took_ms > step_ms * PASS_BUSY:
        return min(step_ms * 2, MAX_STEP_MS)
    if took_ms < step_ms * PASS_EASY:
        return max(base_ms, step_ms / 2)
    return step_ms


class SttGate:
    """Listener transcriptions in flight in this process: previews wait for none."""

    in_flight = 0


@dataclass
class Job:
    kind: Literal["preview", "check", "final"]
    upto: int
    """Frames of the utterance it reads."""
    epoch: int
    utterance: int
    frames: list[np.ndarray]
    """The utterance's frames as the listener keeps them (read when the job starts: a job
    that waited reads what came meanwhile)."""


class Hooks(Protocol):
    """What a `Transcriber` asks of its listener and tells it (the listener implements it)."""

    frames: Frames
    """The stream's frames: `frames.heard`, the audio's clock, is how far a pass let the
    speech run ahead."""

    def current(self, job: Job) -> bool:
        """`job` still reads what is being said (a waiting job starts only then)."""
        ...

    def transcribed(self, job: Job, text: str) -> None: ...

    def failed(self, job: Job, reason: str) -> None:
        """The speech server failed `job` and nothing newer waits."""
        ...

    def notice(self, reason: str) -> None:
        """Something to tell the person (the embedded model stood in for a failed server)."""
        ...

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` as one of the listener's kept tasks."""
        ...


class Transcriber:
    """One listener's transcriptions: at most one running (two on a speech server) and one
    waiting, and the pace of the passes while the person speaks."""

    def __init__(self, stt: SpeechToText, step_ms: float, hooks: Hooks):
        self.stt, self.hooks = stt, hooks
        self.base_ms = self.step_ms = float(step_ms)
        """The step between passes while the person speaks (`next_step`)."""
        self.running: Job | None = None
        self.waiting: Job | None = None

    def idle(self) -> bool:
        return self.running is None and self.waiting is None

    def covers(self, epoch: int, upto: int) -> bool:
        """The running pass reads the utterance as it is (`epoch`) up to frame `upto`, and
        its words may be the final's."""
        job = self.running
        return job is not None and job.epoch == epoch and job.upto >= upto and self.whole(job)

    def whole(self, job: Job) -> bool:
        """`job` reads the whole Whisper window: a preview reads one fitted to its audio where
        the model can (a third of the CPU), so its words are shown, never kept as the final."""
        return job.kind != "preview" or not self._fitted

    @property
    def _fitted(self) -> bool:
        return bool(getattr(self.stt, "fitted_windows", False))

    def due(self, frames_since: int) -> bool:
        """A pass is due `frames_since` the last one began."""
        return frames_since * FRAME_MS >= self.step_ms

    def request(self, job: Job) -> None:
        if self.running is not None:
            ahead = self.running
            if job.kind == "final" and ahead.kind == "preview":
                if _remote(self.stt) or not self.whole(ahead):
                    # a speech server runs both at once, and a fitted preview's words are only
                    # shown: the final does not wait for it (at most two per utterance: what
                    # comes next waits for this final)
                    self._start(job)
                    return
            # one at a time: this waits for the running one, replacing any older waiting one
            # (a final is never queued behind a preview that would only be superseded)
            waiting = self.waiting
            if waiting is None or job.kind != "preview" or waiting.kind == "preview":
                self.waiting = job
            return
        if job.kind == "preview" and SttGate.in_flight and not _remote(self.stt):
            return  # someone else's transcription is running: the next preview will do
        self._start(job)

    def _start(self, job: Job) -> None:
        self.running = job
        audio = np.concatenate(job.frames[: job.upto])
        SttGate.in_flight += 1
        hooks = self.hooks

        async def run() -> None:
            text: str | None = None
            failed: str | None = None
            heard_at = hooks.frames.heard
            options = {"fitted": True} if not self.whole(job) else {}
            try:
                transcript = await speech_pools().transcribe(self.stt, audio, **options)
                text = transcript.text.strip()
                if job.kind == "preview":
                    # the speech heard meanwhile, the wait for the pool too, on its clock
                    took = (hooks.frames.heard - heard_at) * FRAME_MS
                    self.step_ms = next_step(self.step_ms, took, self.base_ms)
                notice = getattr(self.stt, "take_notice", lambda: None)()
                if notice:  # the embedded model stood in for a failed server: said once
                    hooks.notice(notice)
            except AssistantError as e:  # a speech server failing: said, never a silent hang
                failed = str(e)
            finally:
                SttGate.in_flight -= 1
                mine = self.running is job  # not so for a preview a final overtook
                if mine:
                    self.running = None
                if text is not None:
                    hooks.transcribed(job, text)
                elif failed is not None and mine and self.waiting is None:
                    hooks.failed(job, failed)
                waiting = self.waiting if mine else None
                if mine:
                    self.waiting = None
                if waiting is not None and hooks.current(waiting):
                    self._start(waiting)

        hooks.spawn(run())
