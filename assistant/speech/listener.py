"""Hands-free listening: voice activity detection on a live microphone stream, a transcript
that grows while the person speaks, and the end of their turn.

The browser streams 16 kHz mono int16 PCM in real time (`web.listen_route`); `Listener.feed`
runs Silero VAD (the model faster-whisper ships) frame by frame, 32 ms a frame, and says
what happened: speech started (the page stops a playing reply: barge-in), the transcript so
far, the final transcript, or an utterance it dropped (too short, no words, the reply's echo).

Speech in streams: while the person speaks, what they said so far is transcribed in the
background about every second (the page shows it growing); a transcription that began after
the last word is the final one, so at the end little or nothing is left to transcribe.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections import deque
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np

from assistant.records import Transcript, now_ms
from assistant.speech.pools import speech_pools

RATE = 16000
FRAME = 512
"""Silero's window at 16 kHz: 32 ms."""
FRAME_MS = FRAME * 1000 / RATE
CONTEXT = 64
"""Samples of the previous frame Silero v6 reads before each frame."""
CHECK_EVERY_MS = 250
PROBABLE_END_MS = 160
"""Silence after which the final transcript is started early (it is used if no word follows)."""


@dataclass(frozen=True)
class ListenConfig:
    end_pause_ms: int = 500
    """Silence after speech that ends the turn. LiveKit and Pipecat end turns on 0.5-0.8 s
    pauses; 500 ms keeps "last word to first audio" near the 1.2 s target (pause + STT tail +
    first token + first clause) while a breath between phrases (~200-400 ms) does not cut in."""
    min_speech_ms: int = 250
    """Voiced time below this (a cough, a click, a knock) starts no turn."""
    segment_pause_ms: int | None = None
    """An internal pause at which the audio before it is transcribed for good in the
    background, leaving only the tail for the end. Off by default: measured on the test
    recordings, Whisper tiny costs about the same for 0.6 s as for 5 s (its encoder always
    reads a 30 s window), so a tail saves 50-100 ms at most, while a cut inside a phrase
    loses words ("Ask not" became "Ask! Knock!"). The running previews give the growing
    transcript instead, and one that began after the last word is the final transcript."""
    threshold: float = 0.5
    """Silero speech probability above which a frame is voiced."""
    max_utterance_s: float = 30.0
    barge_min_speech_ms: int = 300
    """While a reply plays, speech must last this long (and not be its echo) to interrupt."""
    preroll_ms: int = 300
    """Audio kept from before the first voiced frame, so the first word is not clipped."""
    preview_every_ms: int = 1000
    """With no pause to cut at, the words since the last cut are previewed this often, so the
    transcript still grows while someone speaks without stopping."""


@dataclass(frozen=True)
class Heard:
    kind: Literal["speech", "partial", "final", "ignored"]
    utterance: int
    text: str = ""
    reason: str = ""
    last_word_ms: float | None = None
    """`now_ms()` clock of the end of the last voiced frame (on "final")."""
    endpoint_ms: float | None = None
    """From the last voiced frame to the moment the end was detected (on "final")."""
    stt_ms: float | None = None
    """Transcription still to do after the end was detected: the tail (on "final")."""
    audio_s: float = 0.0


class SpeechToText(Protocol):
    def transcribe(self, samples: np.ndarray) -> Transcript: ...


class StreamingVad:
    """Silero VAD carried across calls (its LSTM state and the 64-sample context), so a
    stream cut into any chunks gets the probabilities one long array would."""

    def __init__(self, session: Any | None = None):
        if session is None:
            from faster_whisper.vad import get_vad_model

            session = get_vad_model().session
        self.session = session
        self.h = np.zeros((1, 1, 128), dtype=np.float32)
        self.c = np.zeros((1, 1, 128), dtype=np.float32)
        self.context = np.zeros(CONTEXT, dtype=np.float32)

    def probs(self, frames: np.ndarray) -> np.ndarray:
        """Speech probability per 512-sample frame of `frames` (shape (n, 512), float32)."""
        if len(frames) == 0:
            return np.zeros(0, dtype=np.float32)
        before = np.vstack([self.context[None, :], frames[:-1, -CONTEXT:]])
        x = np.concatenate([before, frames], axis=1).astype(np.float32)
        out, self.h, self.c = self.session.run(None, {"input": x, "h": self.h, "c": self.c})
        self.context = frames[-1, -CONTEXT:].copy()
        return np.asarray(out, dtype=np.float32).reshape(-1)[: len(frames)]


_WORD = re.compile(r"[a-z0-9']+")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def is_echo(heard: str, playing: str, share: float = 0.6) -> bool:
    """Most of what was heard are the words being played: the assistant hearing itself. A
    word cut off mid-way ("cap" of "capital") counts as played."""
    said, played = words(heard), set(words(playing))
    if not said:
        return False

    def was_played(w: str) -> bool:
        return w in played or (len(w) >= 3 and any(p.startswith(w) for p in played))

    return sum(map(was_played, said)) / len(said) >= share


class Listener:
    """One microphone stream. `feed` never blocks the event loop on Whisper: transcription
    runs on the STT pool (VAD, ~0.1 ms a frame, runs inline so the end of a turn is never
    queued behind a transcription)."""

    def __init__(
        self,
        stt: SpeechToText,
        config: ListenConfig | None = None,
        *,
        vad: StreamingVad | None = None,
    ):
        self.stt = stt
        self.config = config or ListenConfig()
        self.vad = vad or StreamingVad()
        self.count = 0
        self._pending = np.zeros(0, dtype=np.float32)
        self._preroll: deque[np.ndarray] = deque(
            maxlen=max(1, int(self.config.preroll_ms // FRAME_MS))
        )
        self._playing: str | None = None
        self._reset()

    def _reset(self) -> None:
        self._active = False
        self._audio: list[np.ndarray] = []  # this utterance's frames
        self._voiced_ms = 0.0
        self._silence_ms = 0.0
        self._last_voiced = 0  # frames into the utterance, after its last voiced frame
        self._cut = 0  # frames already sent to background transcription
        self._segments: list[asyncio.Task[str]] = []
        self._preview: asyncio.Task[str] | None = None
        self._preview_at = 0  # frames into the utterance when the last preview started
        self._preview_from = 0  # ... and the frame it starts from
        self._shown = ""
        self._announced = False
        self._echo = False
        self._checked_ms = 0.0

    def playing(self, text: str | None) -> None:
        """The reply being spoken to the user (None once it stops): the echo guard."""
        self._playing = text or None

    async def feed(self, pcm: bytes, received_ms: float | None = None) -> list[Heard]:
        received = now_ms() if received_ms is None else received_ms
        samples = np.frombuffer(pcm[: len(pcm) // 2 * 2], dtype="<i2").astype(np.float32) / 32768
        self._pending = np.concatenate([self._pending, samples])
        n = len(self._pending) // FRAME
        if n == 0:
            return []
        frames = self._pending[: n * FRAME].reshape(n, FRAME)
        self._pending = self._pending[n * FRAME :]
        probs = self.vad.probs(frames)
        out: list[Heard] = []
        for i, (frame, p) in enumerate(zip(frames, probs, strict=True)):
            # how long ago (audio time) this frame ended, when the chunk arrived
            behind_ms = ((n - 1 - i) * FRAME + len(self._pending)) * 1000 / RATE
            out += await self._frame(frame, float(p) >= self.config.threshold, received, behind_ms)
        out += self._partial()
        return out

    async def _frame(
        self, frame: np.ndarray, voiced: bool, received: float, behind_ms: float
    ) -> list[Heard]:
        cfg = self.config
        if not self._active:
            if not voiced:
                self._preroll.append(frame)
                return []
            self._active = True
            self._audio = list(self._preroll)
            self._preroll.clear()
        self._audio.append(frame)
        if voiced:
            self._voiced_ms += FRAME_MS
            self._silence_ms = 0.0
            self._last_voiced = len(self._audio)
        else:
            self._silence_ms += FRAME_MS
        out: list[Heard] = []
        if not self._announced and not self._echo:
            out += await self._maybe_announce()
        if (
            cfg.segment_pause_ms is not None
            and self._silence_ms >= cfg.segment_pause_ms
            and self._silence_ms - FRAME_MS < cfg.segment_pause_ms
            and self._last_voiced > self._cut
        ):
            self._segment(len(self._audio))
        elif self._announced and (self._preview_due() or self._probable_end()):
            if self._preview is not None:
                self._preview.cancel()  # superseded: it did not hear the last word
            self._preview_at, self._preview_from = len(self._audio), self._cut
            audio = np.concatenate(self._audio[self._cut :])
            self._preview = asyncio.ensure_future(self._transcribe(audio))
        too_long = len(self._audio) * FRAME_MS >= cfg.max_utterance_s * 1000
        if self._silence_ms >= cfg.end_pause_ms or too_long:
            # the end: measured from the last voiced frame, in audio time, to now
            frames_after = len(self._audio) - self._last_voiced
            endpoint = frames_after * FRAME_MS + behind_ms + max(0.0, now_ms() - received)
            out.append(await self._end(endpoint))
        return out

    async def _maybe_announce(self) -> list[Heard]:
        cfg = self.config
        need = cfg.barge_min_speech_ms if self._playing else cfg.min_speech_ms
        if self._voiced_ms < need:
            return []
        if self._playing:
            # while the reply plays, its own voice may leak into the microphone: hear what
            # was said before interrupting it; a few words are needed to tell, so look again
            # every 250 ms of speech until there are three (or a second and a half of speech)
            if self._voiced_ms < self._checked_ms + CHECK_EVERY_MS:
                return []
            self._checked_ms = self._voiced_ms
            so_far = await self._transcribe(np.concatenate(self._audio))
            if len(words(so_far)) < 3 and self._voiced_ms < 1500:
                return []
            if not so_far or is_echo(so_far, self._playing):
                self._echo = bool(so_far)
                return []
        self._announced = True
        self.count += 1
        return [Heard("speech", self.count)]

    def _segment(self, upto: int) -> None:
        audio = np.concatenate(self._audio[self._cut : upto])
        self._cut = upto
        self._segments.append(asyncio.ensure_future(self._transcribe(audio)))

    def _probable_end(self) -> bool:
        """A pause long enough that the turn may be over: start the transcript the end will
        need now, rather than after the rest of the end pause (it is then ready sooner)."""
        crossed = self._silence_ms >= PROBABLE_END_MS > self._silence_ms - FRAME_MS
        return crossed and self._preview_at < self._last_voiced

    def _preview_due(self) -> bool:
        if self._preview is not None and not self._preview.done():
            return False  # one at a time: previews must not queue up on the STT pool
        since = (len(self._audio) - max(self._preview_at, self._cut)) * FRAME_MS
        return since >= self.config.preview_every_ms

    def _partial(self) -> list[Heard]:
        """The transcript so far, once more of it is ready."""
        if not self._announced:
            return []
        done = []
        for task in self._segments:
            if not task.done() or task.cancelled() or task.exception() is not None:
                break
            done.append(task.result())
        preview = self._preview
        if len(done) == len(self._segments) and preview is not None and preview.done():
            if not preview.cancelled() and preview.exception() is None:
                done.append(preview.result())
        text = " ".join(t for t in done if t)
        if text and text != self._shown:
            self._shown = text
            return [Heard("partial", self.count, text)]
        return []

    async def _end(self, endpoint_ms: float) -> Heard:
        detected = now_ms()
        audio_s = len(self._audio) * FRAME_MS / 1000
        announced, echo, playing = self._announced, self._echo, self._playing
        number = self.count if announced else self.count + 1
        voiced_ms = self._voiced_ms
        tail = (
            np.concatenate(self._audio[self._cut : self._last_voiced + 4])
            if self._last_voiced > self._cut
            else None
        )
        segments, preview = self._segments, self._preview
        # a preview that began after the last word, from the last cut, already holds the
        # tail: wait for it rather than queue the same transcription behind it
        covers = (
            preview is not None
            and not preview.cancelled()
            and self._preview_from == self._cut
            and self._preview_at >= self._last_voiced
        )
        if preview is not None and not covers:
            preview.cancel()
        self._reset()
        if voiced_ms < self.config.min_speech_ms:
            _cancel([*segments, *([preview] if preview else [])])
            return Heard("ignored", number, reason="too short", audio_s=audio_s)
        parts = [await t for t in segments]
        if tail is not None:
            parts.append(await preview if covers and preview else await self._transcribe(tail))
        text = " ".join(p for p in parts if p).strip()
        stt_ms = now_ms() - detected
        if not text:
            return Heard("ignored", number, reason="no words", audio_s=audio_s)
        if echo or (playing and is_echo(text, playing)):
            return Heard("ignored", number, text, reason="echo", audio_s=audio_s)
        if not announced:
            self.count += 1
        return Heard(
            "final",
            self.count,
            text,
            last_word_ms=detected - endpoint_ms,
            endpoint_ms=endpoint_ms,
            stt_ms=stt_ms,
            audio_s=audio_s,
        )

    async def _transcribe(self, audio: np.ndarray) -> str:
        transcript = await speech_pools().run_stt(self.stt.transcribe, audio)
        return transcript.text.strip()

    async def close(self) -> None:
        if self._preview is not None:
            self._segments.append(self._preview)
        _cancel(self._segments)
        for task in self._segments:
            with contextlib.suppress(BaseException):
                await task
        self._reset()
        self._pending = np.zeros(0, dtype=np.float32)
        self._preroll.clear()


def _cancel(tasks: list[asyncio.Task[str]]) -> None:
    for task in tasks:
        task.cancel()
