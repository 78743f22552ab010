"""Transcription for the listener: one at a time per utterance, previews giving way.

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

import asyncio
import contextlib
import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from assistant.call.hearing import FRAME_MS, Heard, ListenConfig
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


class Transcribing:
    """The listener's transcriptions (`Listener` supplies the state and `_transcribed`)."""

    stt: SpeechToText
    config: ListenConfig
    _audio: list[np.ndarray]
    _step_ms: float
    """The step between passes while the person speaks (`next_step`)."""
    _heard: int
    """Frames heard so far, on the audio's clock: how far a pass let the speech run ahead."""
    _preview_at: int
    _epoch: int
    _uid: int
    _running: Job | None
    _waiting: Job | None
    _tasks: set[asyncio.Task[Any]]
    _candidate: bool
    _text: str | None
    _announced: bool
    _closed: Any
    count: int

    _out: list[Any]
    _ready: asyncio.Event
    said = 0
    """How many things it has said (the last one's `seq`)."""

    def _transcribed(self, job: Job, text: str) -> None:
        raise NotImplementedError

    def _reset(self) -> None:
        raise NotImplementedError

    def _close_window(self) -> None:
        raise NotImplementedError

    # what the listener heard, for its one reader
    def take(self) -> list[Any]:
        out, self._out = self._out, []
        self._ready.clear()
        return out

    async def next(self) -> list[Any]:
        """Wait until something was heard; what was."""
        while not self._out:
            await self._ready.wait()
        return self.take()

    async def settle(self) -> list[Any]:
        """Wait for every transcription and model call in flight; what they produced."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        return self.take()

    def _say(self, heard: Any) -> None:
        self.said += 1
        self._out.append(dataclasses.replace(heard, seq=self.said))
        self._ready.set()

    def _preview_due(self) -> bool:
        return (len(self._audio) - self._preview_at) * FRAME_MS >= self._step_ms

    def _transcribe(self, kind: Literal["preview", "check", "final"], upto: int) -> None:
        job = Job(kind, upto, self._epoch, self._uid)
        if self._running is not None:
            if kind == "final" and self._running.kind == "preview" and _remote(self.stt):
                # a speech server runs both at once: the final does not wait for a preview
                # (at most two per utterance: what comes next waits for this final)
                self._start(job)
                return
            # one at a time: this waits for the running one, replacing any older waiting one
            # (a final is never queued behind a preview that would only be superseded)
            if self._waiting is None or kind != "preview" or self._waiting.kind == "preview":
                self._waiting = job
            return
        if kind == "preview" and SttGate.in_flight and not _remote(self.stt):
            return  # someone else's transcription is running: the next preview will do
        self._start(job)

    def _start(self, job: Job) -> None:
        self._running = job
        audio = np.concatenate(self._audio[: job.upto])
        SttGate.in_flight += 1

        async def run() -> None:
            text: str | None = None
            failed: str | None = None
            heard_at = self._heard
            try:
                transcript = await speech_pools().transcribe(self.stt, audio)
                text = transcript.text.strip()
                if job.kind == "preview":
                    # the speech heard meanwhile, the wait for the pool too, on its clock
                    took = (self._heard - heard_at) * FRAME_MS
                    self._step_ms = next_step(self._step_ms, took, self.config.preview_every_ms)
                notice = getattr(self.stt, "take_notice", lambda: None)()
                if notice:  # the embedded model stood in for a failed server: said once
                    self._say(Heard("notice", self.count, reason=notice))
            except AssistantError as e:  # a speech server failing: said, never a silent hang
                failed = str(e)
            finally:
                SttGate.in_flight -= 1
                mine = self._running is job  # not so for a preview a final overtook
                if mine:
                    self._running = None
                if text is not None:
                    self._transcribed(job, text)
                elif failed is not None and mine and self._waiting is None:
                    self._failed(job, failed)
                waiting = self._waiting if mine else None
                if mine:
                    self._waiting = None
                if (
                    waiting is not None
                    and waiting.utterance == self._uid
                    and (waiting.kind == "preview" or waiting.epoch == self._epoch)
                ):
                    self._start(waiting)

        self._spawn(run())

    def _failed(self, job: Job, reason: str) -> None:
        """A transcription failed: an utterance waiting for its words ends, with the reason
        (a preview's failure while the person speaks waits for the next one)."""
        if job.utterance != self._uid or not self._candidate or self._text is not None:
            return
        number = self.count if self._announced else self.count + 1
        self._say(Heard("ignored", number, reason=f"speech recognition failed: {reason}"))
        self._reset()
        self._close_window()

    async def _cancel_tasks(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
