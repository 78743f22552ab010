"""The voice turn: audio in -> transcript -> chat turn -> sentences -> speech, pipelined.

Independent of Gradio. The reply streams from the engine into the sentence splitter; each
complete sentence is synthesized (in a thread) while the engine keeps generating, so the
first sentence is heard before the reply has finished. Reasoning is never spoken.

Barge-in is cancellation: closing or cancelling the consumer of `voice_turn`/`spoken_turn`
cancels the engine stream and any pending synthesis. Every task is kept and awaited in
`finally`; a synthesis already running in its thread finishes (a thread cannot be stopped)
but its audio is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from assistant.audio import AudioSource, load_audio
from assistant.errors import AssistantError, BadInput
from assistant.records import (
    AudioChunk,
    RouteDecision,
    Timings,
    Transcript,
    TurnResult,
    now_ms,
)
from assistant.sentences import SentenceSplitter

if TYPE_CHECKING:
    from assistant.runtime import Runtime
    from assistant.stt import SpeechToText
    from assistant.tts import TextToSpeech

log = logging.getLogger(__name__)

NOT_CAUGHT = "I didn't catch that."
HANDED_OFF = "I've handed that to the deep lane; I'll tell you when it's done."
"""Spoken instead of the written hand-off, whose job id is no pleasure to hear."""


@dataclass
class VoiceUpdate:
    """A step of a spoken turn in progress."""

    kind: Literal["transcript", "route", "reasoning", "content", "audio", "done", "error"]
    text: str = ""
    transcript: Transcript | None = None
    decision: RouteDecision | None = None
    audio: AudioChunk | None = None
    """One synthesized sentence (kind "audio")."""
    result: TurnResult | None = None
    """The finished turn (kind "done"); its timings include speech."""


async def voice_turn(
    rt: Runtime,
    stt: SpeechToText,
    tts: TextToSpeech | None,
    audio: AudioSource,
    *,
    owner: str = "local",
    conversation_id: str | None = None,
    speak: bool = True,
    received_ms: float | None = None,
) -> AsyncIterator[VoiceUpdate]:
    """One voice turn from recorded or uploaded audio (bytes or a path).

    `received_ms` (a `now_ms()` value) is the end of speech: when the audio arrived. Latency
    records (`first_sentence`, `first_audio`, `total`) count from it.
    """
    start = received_ms if received_ms is not None else now_ms()
    timings = Timings()
    settings = rt.settings
    try:
        samples = await asyncio.to_thread(
            load_audio, audio, max_bytes=settings.max_upload_bytes, max_seconds=settings.max_audio_s
        )
    except BadInput as e:
        yield VoiceUpdate("error", text=f"I couldn't use that audio: {e}")
        return
    transcript = await asyncio.to_thread(stt.transcribe, samples)
    timings.stt = now_ms() - start  # decoding included: it is part of hearing the user
    yield VoiceUpdate("transcript", text=transcript.text, transcript=transcript)
    if not transcript.text.strip():
        # silence or noise: answer without calling the engine at all
        said = _say(tts if speak else None, NOT_CAUGHT, timings, start)
        async with contextlib.aclosing(said) as updates:
            async for update in updates:
                yield update
        timings.total = now_ms() - start
        result = TurnResult(NOT_CAUGHT, "chat", "no speech heard", None, timings)
        yield VoiceUpdate("done", text=NOT_CAUGHT, result=result)
        return
    turn = spoken_turn(
        rt,
        tts,
        transcript.text,
        owner=owner,
        conversation_id=conversation_id,
        speak=speak,
        source="voice",
        timings=timings,
        started_ms=start,
    )
    async with contextlib.aclosing(turn) as updates:
        async for update in updates:
            yield update


async def spoken_turn(
    rt: Runtime,
    tts: TextToSpeech | None,
    text: str,
    *,
    owner: str = "local",
    conversation_id: str | None = None,
    speak: bool = True,
    force_deep: bool = False,
    source: str = "text",
    timings: Timings | None = None,
    started_ms: float | None = None,
) -> AsyncIterator[VoiceUpdate]:
    """A chat turn whose reply is also spoken, sentence by sentence, as it streams."""
    timings = timings if timings is not None else Timings()
    start = started_ms if started_ms is not None else now_ms()
    speak = speak and tts is not None
    out: asyncio.Queue[VoiceUpdate | None] = asyncio.Queue()
    sentences: asyncio.Queue[str | None] = asyncio.Queue()
    pump = asyncio.create_task(
        _pump(rt, text, out, sentences if speak else None, timings, start,
              owner=owner, conversation_id=conversation_id, force_deep=force_deep,
              source=source, report=not speak),
        name="voice-pump",
    )  # fmt: skip
    tasks = [pump]
    if speak:
        assert tts is not None
        tasks.append(asyncio.create_task(_speak(tts, sentences, out, timings, start), name="tts"))
    try:
        ended = 0
        while ended < len(tasks):
            update = await out.get()
            if update is None:
                ended += 1
            else:
                yield update
        try:
            result = pump.result()
        except AssistantError as e:
            yield VoiceUpdate("error", text=str(e))
            return
        if speak and (err := tasks[1].exception()) is not None:
            log.warning("speech failed: %s", err)
            yield VoiceUpdate("error", text=f"speech failed: {err}")
        timings.total = now_ms() - start
        if result.turn_id is not None and speak:
            # the chat service stored the turn when the reply ended; speech ended later
            await asyncio.to_thread(rt.store.update_timings, result.turn_id, timings)
        if speak:
            rt.chat.finished(result)  # observed now that speech timings are in
        yield VoiceUpdate("done", text=result.reply, result=result)
    finally:
        await _cancel_all(tasks)


async def _pump(
    rt: Runtime,
    text: str,
    out: asyncio.Queue[VoiceUpdate | None],
    sentences: asyncio.Queue[str | None] | None,
    timings: Timings,
    start: float,
    **turn_kw: object,
) -> TurnResult:
    """Run the chat turn: updates to `out`, complete sentences of the answer to `sentences`."""
    splitter = SentenceSplitter()
    spoken = False

    def to_speech(parts: list[str]) -> None:
        nonlocal spoken
        if sentences is None or not parts:
            return
        if timings.first_sentence is None:
            timings.first_sentence = now_ms() - start
        spoken = True
        for part in parts:
            sentences.put_nowait(part)

    result: TurnResult | None = None
    try:
        turn = rt.chat.turn(text, timings=timings, started_ms=start, **turn_kw)  # type: ignore[arg-type]
        async with contextlib.aclosing(turn) as updates:
            async for u in updates:
                if u.kind == "content":
                    to_speech(splitter.feed(u.text))  # reasoning is never fed: never spoken
                    out.put_nowait(VoiceUpdate("content", text=u.text))
                elif u.kind == "reasoning":
                    out.put_nowait(VoiceUpdate("reasoning", text=u.text))
                elif u.kind == "route":
                    out.put_nowait(VoiceUpdate("route", decision=u.decision))
                elif u.kind == "done":
                    result = u.result
        to_speech(splitter.flush())
        assert result is not None
        if result.job_id:
            to_speech([HANDED_OFF])
        elif not spoken:
            # nothing streamed (an error, or an answer that was all code): say why
            to_speech(splitter.feed(result.error or result.reply) + splitter.flush())
        return result
    finally:
        if sentences is not None:
            sentences.put_nowait(None)
        out.put_nowait(None)


async def _speak(
    tts: TextToSpeech,
    sentences: asyncio.Queue[str | None],
    out: asyncio.Queue[VoiceUpdate | None],
    timings: Timings,
    start: float,
) -> None:
    """Synthesize sentences in order, each as soon as it arrives."""
    try:
        while (sentence := await sentences.get()) is not None:
            async with contextlib.aclosing(_say(tts, sentence, timings, start)) as said:
                async for update in said:
                    out.put_nowait(update)
    finally:
        out.put_nowait(None)


async def _say(
    tts: TextToSpeech | None, text: str, timings: Timings, start: float
) -> AsyncIterator[VoiceUpdate]:
    """Speak one piece of text (nothing when `tts` is None), recording speech timings."""
    if tts is None:
        return
    began = now_ms()
    # Piper is blocking CPU work: off the event loop, one sentence per thread hop
    chunks = await asyncio.to_thread(lambda: list(tts.synthesize(text)))
    done = now_ms()
    timings.tts_total = (timings.tts_total or 0.0) + (done - began)
    for chunk in chunks:
        if timings.first_audio is None:
            timings.tts_first_audio = done - began
            timings.first_audio = done - start
        yield VoiceUpdate("audio", text=chunk.text, audio=chunk)


async def _cancel_all(tasks: list[asyncio.Task]) -> None:
    """Cancel every task and wait until each has ended.

    The cancel is repeated until it lands: on Python 3.11 `asyncio.wait_for` drops a
    cancellation that races the result it was waiting for (the engine stream's read
    deadline uses it), and a dropped cancel would leave the engine generating.
    """
    for task in tasks:
        task.cancel()
    pending = {t for t in tasks if not t.done()}
    try:
        while pending:
            _, pending = await asyncio.wait(pending, timeout=0.1)
            for task in pending:
                task.cancel()
    finally:
        for task in tasks:
            task.cancel()  # no-op on finished tasks; covers our own cancellation above
    await asyncio.gather(*tasks, return_exceptions=True)
