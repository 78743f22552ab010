"""Speech to text over Wyoming: `transcribe` (optional), `audio-start`, `audio-chunk`s,
`audio-stop`, answered with `transcript-start`, `transcript-chunk`s, `transcript` and
`transcript-stop` (a client that does not stream reads only `transcript`, as Home Assistant's
`components/wyoming/stt.py` does).

The audio is checked as it arrives (its format, each chunk's size and format, its length
against `max_audio_s`, a login's upload bytes per day), then transcribed by the app's own
Whisper on the speech-to-text pool in the login's share (`SpeechPools.share`), as a page's
upload is. Where the pool has a worker to spare (a machine of 8 cores or more), passes over
the audio so far while it still arrives send the words two passes agree on as chunks; on a
smaller machine such a pass would only hold up the final one, and the chunks come at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
from wyoming.asr import Transcribe, TranscriptChunk, TranscriptStart
from wyoming.audio import AudioChunk, AudioStart
from wyoming.event import Event

from assistant.limits import DailyBytes
from assistant.records import Transcript
from assistant.speech.audio import load_array
from assistant.speech.pools import speech_pools
from assistant.wyoming.wire import WireError

RATES = (8000, 48000)
"""Sample rates taken, lowest and highest (Home Assistant sends 16 kHz)."""
WIDTHS = (1, 2, 4)
"""Bytes per sample taken: 8-bit unsigned, 16-bit and 32-bit signed."""
CHANNELS = (1, 2)
MAX_HOTWORDS_CHARS = 500
"""Names and terms Home Assistant asks Whisper to favour (`transcript_names`), at most."""
PREVIEW_EVERY_S = 1.0
"""Seconds of new audio before another pass while the audio still arrives."""

Send = Callable[[Event], Awaitable[bool]]


def hotwords(transcribe: Transcribe) -> str | None:
    """The names and terms a `transcribe` event asks to favour, as Whisper's hotwords."""
    words = [*(transcribe.transcript_names or []), *(transcribe.transcript_terms or [])]
    text = " ".join(w.strip() for w in words if isinstance(w, str) and w.strip())
    return text[:MAX_HOTWORDS_CHARS] or None


class Hearing:
    """One request's audio, checked as it arrives; 16 kHz mono float32 at the end."""

    def __init__(self, owner: str, max_seconds: float, day: DailyBytes | None,
                 hotwords: str | None = None):  # fmt: skip
        self.owner, self.max_seconds, self.day = owner, max_seconds, day
        self.hotwords = hotwords
        self.format: tuple[int, int, int] | None = None
        """(rate, width, channels) from `audio-start`; None before it."""
        self.parts: list[np.ndarray] = []
        self.seconds = 0.0
        self._rest = b""
        """The bytes of a sample a chunk ended inside."""

    def start(self, event: Event) -> None:
        if self.format is not None:
            raise WireError("audio-start came twice in one request", "out-of-order")
        try:
            start = AudioStart.from_event(event)
        except (KeyError, TypeError) as e:
            raise WireError("audio-start needs rate, width and channels", "bad-audio") from e
        self.format = _checked(start.rate, start.width, start.channels)

    def add(self, event: Event) -> None:
        if self.format is None:
            raise WireError("audio-chunk before audio-start", "out-of-order")
        try:
            chunk = AudioChunk.from_event(event)
        except (KeyError, TypeError) as e:
            raise WireError("audio-chunk needs rate, width and channels", "bad-audio") from e
        if (chunk.rate, chunk.width, chunk.channels) != self.format:
            raise WireError("an audio-chunk's format differs from its audio-start's", "bad-audio")
        rate, width, channels = self.format
        # a chunk may end inside a sample: Home Assistant's speech-to-text API passes on the
        # request body as the network cut it; the part waits for the next chunk
        data = self._rest + chunk.audio
        whole = len(data) - len(data) % (width * channels)
        self._rest = data[whole:]
        self.seconds += whole / (rate * width * channels)
        if self.seconds > self.max_seconds:
            raise WireError(f"the audio is longer than {self.max_seconds:g} s (max_audio_s)",
                            "too-long")  # fmt: skip
        if self.day is not None:
            if why := self.day.refusal(self.owner, len(chunk.audio)):
                raise WireError(why, "over-limit")
            self.day.add(self.owner, len(chunk.audio))
        self.parts.append(_samples(data[:whole], width, channels))

    def samples(self, parts: list[np.ndarray]) -> np.ndarray:
        """`parts` of what was heard, as Whisper takes it (blocking: run it on the pool)."""
        if self.format is None or not parts:
            return np.zeros(0, np.float32)
        joined = np.concatenate(parts)
        return load_array(joined, self.format[0], max_seconds=self.max_seconds)


def _checked(rate: Any, width: Any, channels: Any) -> tuple[int, int, int]:
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (rate, width, channels)):
        raise WireError("rate, width and channels must be whole numbers", "bad-audio")
    if not RATES[0] <= rate <= RATES[1] or width not in WIDTHS or channels not in CHANNELS:
        raise WireError(
            f"audio of {rate} Hz, {width} bytes a sample, {channels} channels is not taken; "
            "send PCM of 8-48 kHz, 1, 2 or 4 bytes a sample, mono or stereo (16 kHz 16-bit "
            "mono is best)",
            "bad-audio",
        )
    return rate, width, channels


def _samples(pcm: bytes, width: int, channels: int) -> np.ndarray:
    """Little-endian PCM as an integer array of (frames, channels)."""
    if width == 1:  # unsigned 8-bit: centred on 128
        x = (np.frombuffer(pcm, np.uint8).astype(np.int16) - 128) << 8
    else:
        x = np.frombuffer(pcm, "<i2" if width == 2 else "<i4")
    return x.reshape(-1, channels)


async def transcribe(hearing: Hearing, stt: Any, *, preview: bool = False) -> Transcript:
    """`hearing`'s audio so far, in its login's share of the speech-to-text pool."""
    pools = speech_pools()
    options = {"hotwords": hearing.hotwords} if hearing.hotwords else {}
    async with pools.share(hearing.owner):
        # what has arrived so far: the list may grow while the pool reads it
        samples = await pools.run_stt(hearing.samples, list(hearing.parts))
        if preview and samples.size / 16000 < PREVIEW_EVERY_S:
            return Transcript("", "en", 0.0, 0.0)
        return await pools.transcribe(stt, samples, **options)


class Chunks:
    """The transcript's streamed side: `transcript-start`, then each `transcript-chunk`."""

    def __init__(self, send: Send):
        self.send = send
        self.started = False
        self.sent: list[str] = []
        """Words already sent as chunks."""
        self._last: list[str] = []
        self._task: asyncio.Task[None] | None = None
        self._at = 0.0

    @staticmethod
    def previews() -> bool:
        """Whether a pass over the audio while it arrives cannot hold up the final pass."""
        return speech_pools().sizes.stt_workers >= 2

    def heard_more(self, hearing: Hearing, stt: Callable[[], Awaitable[Any]]) -> None:
        """Audio arrived: a pass over all of it so far, once enough is new and none runs
        (`stt`: loads the model)."""
        if not self.previews() or self._task is not None:
            return
        if hearing.seconds - self._at < PREVIEW_EVERY_S:
            return
        self._at = hearing.seconds
        self._task = asyncio.create_task(self._preview(hearing, stt), name="wyoming-preview")

    async def _preview(self, hearing: Hearing, stt: Callable[[], Awaitable[Any]]) -> None:
        try:
            words = (await transcribe(hearing, await stt(), preview=True)).text.split()
        except Exception:  # a pass that fails is only a chunk less; the final one says why
            return
        finally:
            self._task = None
        agreed = _common(self._last, words)
        self._last = words
        if len(agreed) > len(self.sent) and agreed[: len(self.sent)] == self.sent:
            await self._chunk(agreed[len(self.sent) :])

    async def _chunk(self, words: list[str]) -> None:
        if not self.started:
            self.started = True
            await self.send(TranscriptStart().event())
        if words:
            text = " ".join(words)
            await self.send(TranscriptChunk(text=(" " + text) if self.sent else text).event())
            self.sent = [*self.sent, *words]

    async def finish(self, text: str) -> None:
        """The final pass's words not yet sent (all of them when the passes disagreed with
        it: the `transcript` event that follows is the whole truth either way)."""
        await self.stop()
        words = text.split()
        rest = words[len(self.sent) :] if words[: len(self.sent)] == self.sent else []
        await self._chunk(rest)

    async def stop(self) -> None:
        """No more passes (the audio ended, or the client left)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task


def _common(a: list[str], b: list[str]) -> list[str]:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return a[:n]
