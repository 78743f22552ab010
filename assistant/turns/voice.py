"""The voice stages of the turn pipeline: `hear` (audio in) and `speak` (audio out).

`speak` sits after the chat stages: it passes their events on and speaks the answer's complete
sentences as they arrive, so the first sentence is heard while the rest is still generated.
Reasoning is never spoken. Blocking models (Whisper, Piper) run on their bounded pools
(`speech.pools`); a synthesis already running in its thread finishes when the turn is
cancelled (a thread cannot be stopped), but its audio is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator
from typing import Any

from assistant.errors import BadInput
from assistant.records import HANDED_OFF, AudioChunk, Transcript, TurnEvent, now_ms
from assistant.settings import Settings
from assistant.speech.audio import AudioSource, load_audio
from assistant.speech.pools import speech_pools
from assistant.speech.remote import RemoteSpeechError
from assistant.speech.sentences import SentenceSplitter
from assistant.speech.stages import SpeechToText, TextToSpeech
from assistant.turns.recorder import Recorder
from assistant.turns.stream import merge

log = logging.getLogger(__name__)

NOT_CAUGHT = "I didn't catch that."


class ForLogin:
    """A speech model (either stage) used for `owner`: `transcribe` and each spoken sentence
    take the login's share of the pools with it (`SpeechPools.share`), wherever the turn runs,
    so one login's long replies are spoken a sentence of each login's at a time instead of
    holding the pool for another's. Everything else is the model's."""

    def __init__(self, stt: SpeechToText | TextToSpeech, owner: str):
        self.stt, self.share_owner = stt, owner

    def __getattr__(self, name: str) -> Any:
        if name == "stt":  # not set yet (a copy): no recursion
            raise AttributeError(name)
        return getattr(self.stt, name)


async def transcribe(
    audio: AudioSource, stt: SpeechToText, settings: Settings, owner: str | None = None
) -> Transcript:
    """Decode (within the upload limits) and transcribe, on the speech-to-text pool, in
    `owner`'s turn (or the `ForLogin` model's; None: no share)."""
    pools = speech_pools()
    limits = {"max_bytes": settings.max_upload_bytes, "max_seconds": settings.max_audio_s}
    async with pools.share(owner or getattr(stt, "share_owner", None)):
        samples = await pools.run_stt(functools.partial(load_audio, **limits), audio)
        return await pools.transcribe(stt, samples)


async def hear(
    audio: AudioSource, stt: SpeechToText, rec: Recorder, settings: Settings
) -> AsyncIterator[TurnEvent]:
    """Audio to a transcript event, or an error event for audio that cannot be used."""
    try:
        transcript = await transcribe(audio, stt, settings)
    except BadInput as e:
        yield TurnEvent("error", text=f"I couldn't use that audio: {e}")
        return
    except RemoteSpeechError as e:  # the user's speech server: its failure, said as such
        yield TurnEvent("error", text=f"speech recognition failed: {e}")
        return
    rec.set("stt", rec.since_start())  # decoding included: it is part of hearing the user
    yield TurnEvent("transcript", text=transcript.text, transcript=transcript)


async def speak(
    events: AsyncIterator[TurnEvent], tts: TextToSpeech, rec: Recorder
) -> AsyncIterator[TurnEvent]:
    """Pass `events` on, with the answer's sentences spoken as "audio" events in between;
    the "done" event comes after the last audio."""
    pending: asyncio.Queue[str | None] = asyncio.Queue()
    ended: list[TurnEvent] = []

    async def text(upstream: AsyncIterator[TurnEvent]) -> AsyncIterator[TurnEvent]:
        splitter = SentenceSplitter()
        spoken = False

        def say(parts: list[str]) -> None:
            nonlocal spoken
            for part in parts:
                rec.first("first_sentence")
                spoken = True
                pending.put_nowait(part)

        try:
            async for event in upstream:
                if event.kind == "content":
                    say(splitter.feed(event.text))  # reasoning is never fed: never spoken
                elif event.kind == "done" and event.result is not None:
                    say(splitter.flush())
                    if event.result.job_id:
                        say([HANDED_OFF])
                    elif not spoken:
                        # nothing streamed (an error, or an answer that was all code): say why
                        result = event.result
                        say(splitter.feed(result.error or result.reply) + splitter.flush())
                    ended.append(event)
                    continue
                yield event
        finally:
            pending.put_nowait(None)

    async def voice() -> AsyncIterator[TurnEvent]:
        try:
            while (sentence := await pending.get()) is not None:
                async with contextlib.aclosing(_say(tts, sentence, rec)) as said:
                    async for event in said:
                        yield event
        except Exception as e:  # speech failing must not lose the answer
            log.warning("speech failed: %s", e)
            yield TurnEvent("error", text=f"speech failed: {e}")

    # closing this stage closes the merge, which closes both sides and the stages before
    async with contextlib.aclosing(events) as upstream:
        async with contextlib.aclosing(merge(text(upstream), voice())) as merged:
            async for event in merged:
                yield event
    for event in ended:
        yield event


async def _say(tts: TextToSpeech, text: str, rec: Recorder) -> AsyncIterator[TurnEvent]:
    """Speak one piece of text, recording the speech timings; in the `ForLogin` model's share
    of the pool (taken per sentence, so logins' sentences take turns)."""
    began = now_ms()
    pools = speech_pools()
    async with pools.share(getattr(tts, "share_owner", None)):
        chunks: list[AudioChunk] = await pools.synthesize(tts, text)
    done = now_ms()
    rec.add("tts_total", done - began)
    notice = getattr(tts, "take_notice", lambda: None)()
    if notice:  # the embedded voice stands in for a failed server: said once, not an error
        yield TurnEvent("error", text=notice)
    for chunk in chunks:
        if rec.timings.first_audio is None:
            rec.set("tts_first_audio", done - began)
            rec.first("first_audio")
        yield TurnEvent("audio", text=chunk.text, audio=chunk)
