"""The pace of a call's passes while the person speaks (`call.transcribing.next_step`): they
thin out while transcription falls behind the speech and come back when it keeps up; and the
window they read: a preview's fitted to its audio, a final's whole (`speech.stt`)."""

from __future__ import annotations

import asyncio

import numpy as np

from assistant.call.frames import Frames
from assistant.call.transcribing import MAX_STEP_MS, Job, Transcriber, next_step
from assistant.records import Transcript
from assistant.speech.stt import fitted_frames
from assistant.speech.vad import StreamingVad


def test_the_passes_slow_down_while_they_fall_behind_and_come_back_when_they_keep_up():
    base = 1000.0
    step = next_step(base, took_ms=800, base_ms=base)  # 80% of the step: behind
    assert step == 2000
    step = next_step(step, took_ms=1500, base_ms=base)
    assert step == 4000
    assert next_step(step, took_ms=3900, base_ms=base) == MAX_STEP_MS  # bounded
    assert next_step(step, took_ms=2000, base_ms=base) == step  # keeping up: as it is
    step = next_step(step, took_ms=300, base_ms=base)
    assert step == 2000
    assert next_step(1000.0, took_ms=100, base_ms=base) == base  # never under the base


class Recording:
    """A model that says which passes asked for a fitted window, and how it read each."""

    fitted_windows = True

    def __init__(self) -> None:
        self.asked: list[bool] = []

    def transcribe(self, samples, fitted: bool = False):
        self.asked.append(fitted)
        return Transcript("words", "en", len(samples) / 16000, 1.0)


class Hooks:
    def __init__(self) -> None:
        self.frames = Frames(StreamingVad(session=object()), 0.5)
        self.texts: list[tuple[str, str]] = []
        self.tasks: list[asyncio.Task] = []

    def current(self, job: Job) -> bool:
        return True

    def transcribed(self, job: Job, text: str) -> None:
        self.texts.append((job.kind, text))

    def failed(self, job: Job, reason: str) -> None:
        raise AssertionError(reason)

    def notice(self, reason: str) -> None:
        pass

    def spawn(self, work) -> None:
        self.tasks.append(asyncio.ensure_future(work))


def test_a_preview_reads_a_fitted_window_and_is_never_kept_as_the_final():
    frames = [np.zeros(512, np.float32)] * 160  # 5 s

    async def run() -> tuple[Recording, Hooks, bool, bool]:
        stt, hooks = Recording(), Hooks()
        transcriber = Transcriber(stt, 1000, hooks)
        transcriber.request(Job("preview", 160, 1, 1, frames))
        covered = transcriber.covers(1, 160)  # running, up to the last word: not the final's
        final = Job("final", 160, 1, 1, frames)
        transcriber.request(final)
        # it runs beside the preview, not after it: on a 25 s utterance a final that waited
        # for a preview was ready 5.3 s after the end was decided, 2.8 s in the whole window
        beside = transcriber.running is final and transcriber.waiting is None
        while len(hooks.texts) < 2:
            await asyncio.gather(*hooks.tasks)
        return stt, hooks, covered, beside

    stt, hooks, covered, beside = asyncio.run(run())
    assert stt.asked == [True, False] and not covered  # the final reads the whole window
    assert beside and sorted(kind for kind, _ in hooks.texts) == ["final", "preview"]


def test_the_fitted_window_covers_the_audio_and_short_clips_get_the_whole_one():
    assert fitted_frames(1.2, 100) is None  # "Yeah.": lost in short windows
    assert fitted_frames(2.9, 100) is None
    assert fitted_frames(3.0, 100) == 800  # at least 8 s
    assert fitted_frames(12.3, 100) == 1400  # the audio and a second more, whole seconds
    assert fitted_frames(29.5, 100) is None  # the whole window is no longer
