"""Text to speech over Wyoming, in the app's own voices.

Two ways in, both as Home Assistant's `components/wyoming/tts.py` sends them:
- `synthesize` with the whole text: `audio-start`, the `audio-chunk`s of each sentence as it
  is synthesized, `audio-stop`;
- streaming: `synthesize-start`, `synthesize-chunk`s as the text is written, the whole text
  once more as `synthesize` (for servers that do not stream: ignored here), `synthesize-stop`.
  Each sentence is spoken as soon as it is complete, so the first is heard while the rest is
  still being written; after the last, `audio-stop` and `synthesize-stopped`.

A voice named in the request must be one the app lists (never a path on the server); none
named: the login's own voice and speaking rate, as the page speaks to it. Each sentence is
synthesized on the text-to-speech pool in the login's share. Text is capped like a typed turn
(`max_text_chars`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import Event
from wyoming.tts import SynthesizeStopped, SynthesizeVoice

from assistant.errors import AssistantError
from assistant.records import AudioChunk as Spoken
from assistant.session.voice import chosen_voice
from assistant.speech.pools import speech_pools
from assistant.speech.sentences import SentenceSplitter
from assistant.wyoming.wire import WireError

SAMPLES_PER_CHUNK = 1024
"""Samples per `audio-chunk` (Piper's own Wyoming server sends as many)."""

Send = Callable[[Event], Awaitable[bool]]


async def voice_for(
    speech: Any, settings: Any, prefs: dict[str, Any], voice: SynthesizeVoice | None
) -> Any:
    """The voice a request asked for, at the login's speaking rate; none asked for: the
    login's own voice. An unknown name is refused with the names there are."""
    from assistant.speech.tts import listed_voices, unknown_voice

    rate = float(prefs.get("rate", 1.0))
    name = voice.name if voice is not None else None
    if name:
        if name not in listed_voices(settings):
            raise WireError(unknown_voice(name, settings), "unknown-voice")
        try:
            return await speech.tts(name, rate)
        except AssistantError as e:
            raise WireError(f"the voice {name!r} is not available: {e}", "voice") from e
    chosen = await chosen_voice(speech, prefs, honour_off=False)
    if chosen.tts is None:
        raise WireError(chosen.warning or "speech is off", "voice")
    return chosen.tts


class Speaking:
    """One synthesis request's audio, sent a sentence at a time as it is made."""

    def __init__(self, owner: str, send: Send, max_chars: int):
        self.owner, self.send, self.max_chars = owner, send, max_chars
        self.tts: Any = None
        """The voice, once resolved (the text may arrive before it is)."""
        self.chars = 0
        self.started = False
        """`audio-start` was sent."""
        self.splitter = SentenceSplitter()
        self.sentences: asyncio.Queue[str | None] = asyncio.Queue()

    def count(self, text: str) -> None:
        self.chars += len(text)
        if self.chars > self.max_chars:
            raise WireError(f"the text to speak is longer than {self.max_chars} characters "
                            "(max_text_chars)", "too-long")  # fmt: skip

    async def whole(self, text: str) -> None:
        """`synthesize`: every sentence of `text`, then `audio-stop`."""
        from assistant.speech.tts import speech_sentences  # Piper: loaded when used

        self.count(text)
        # linear, but up to max_text_chars of it: off the event loop
        sentences = await asyncio.to_thread(speech_sentences, text)
        if not sentences:
            raise WireError("nothing to speak: the text has no words after removing symbols",
                            "nothing-to-speak")  # fmt: skip
        for sentence in sentences:
            await self.say(sentence)
        await self.send(AudioStop().event())

    def feed(self, text: str) -> None:
        """A `synthesize-chunk`: its complete sentences go to be spoken."""
        self.count(text)
        for sentence in self.splitter.feed(text):
            self.sentences.put_nowait(sentence)

    def end(self) -> None:
        """`synthesize-stop`: the rest of the text goes too, and then nothing more."""
        for sentence in self.splitter.flush():
            self.sentences.put_nowait(sentence)
        self.sentences.put_nowait(None)

    async def stream(self) -> None:
        """Speak the fed sentences as they come; after the last, `audio-stop` (if any audio
        was sent) and `synthesize-stopped`."""
        while (sentence := await self.sentences.get()) is not None:
            await self.say(sentence)
        if self.started:
            await self.send(AudioStop().event())
        await self.send(SynthesizeStopped().event())

    async def say(self, sentence: str) -> None:
        pools = speech_pools()
        async with pools.share(self.owner):  # logins take turns, a sentence at a time
            chunks: list[Spoken] = await pools.synthesize(self.tts, sentence)
        for chunk in chunks:
            await self._audio(chunk)

    async def _audio(self, chunk: Spoken) -> None:
        if not self.started:
            self.started = True
            await self.send(AudioStart(rate=chunk.sample_rate, width=2, channels=1).event())
        step = SAMPLES_PER_CHUNK * 2
        for i in range(0, len(chunk.samples), step):
            audio = chunk.samples[i : i + step]
            event = AudioChunk(rate=chunk.sample_rate, width=2, channels=1, audio=audio)
            if not await self.send(event.event()):
                return  # the client has gone: nobody to play the rest to
