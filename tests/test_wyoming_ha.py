"""Home Assistant's voice pipeline against the app's Wyoming port (issue 54), end to end.

Home Assistant itself is no test dependency (2025.4 needs Python 3.13, the app 3.11; it was
pointed at the app by hand, and docs/home-assistant.md says what answered), so its client
side is replayed: the `wyoming` library's `AsyncTcpClient` sends exactly the event sequences
`homeassistant/components/wyoming/` sends and reads the answers as it reads them (stt.py:
`transcribe`, `audio-start`, `audio-chunk`s, `audio-stop`, read until `transcript`; tts.py:
`synthesize`, read until `audio-stop`, and the streaming form `synthesize-start`,
`synthesize-chunk`s, `synthesize`, `synthesize-stop`, read until `synthesize-stopped`;
conversation.py: `transcript` with its `context`, read until `handled` or `not-handled`).
The server is the real one on loopback, in this process, with the app's real Whisper tiny.en,
Piper voice and router; the engine is a scripted fake (no engine is what is tested here), and
the deep job runs in a real job worker on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import time
import wave
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pytest
from wyoming.asr import Transcribe, Transcript
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.event import Event
from wyoming.handle import Handled, NotHandled
from wyoming.info import Describe, Info
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeVoice,
)

from assistant.records import HANDED_OFF
from assistant.runtime import Runtime
from assistant.settings import Settings
from assistant.speech.audio import load_audio
from assistant.speech.models import SpeechModels
from assistant.wyoming.server import WyomingServer, listening_socket
from tests.conftest import AUDIO
from tests.fakes import FakeEngine
from tests.waiting import until

pytestmark = pytest.mark.model
JFK = AUDIO / "jfk.flac"
READ_S = 60.0
"""The longest a replayed client waits for one event (Home Assistant's own waits are longer)."""


@dataclass
class Served:
    rt: Runtime
    server: WyomingServer
    engine: FakeEngine

    @property
    def port(self) -> int:
        return self.server.port


@contextlib.asynccontextmanager
async def serving(
    settings: Settings,
    *,
    router: Any = None,
    words: int = 12,
    host: str = "127.0.0.1",
    **changes: Any,
) -> AsyncIterator[Served]:
    """The Wyoming server on a free port of `host`, over a runtime whose engine is scripted
    (`router`: a stub instead of the real classifier); `changes` to the settings."""
    settings = replace(settings, engine_url="http://127.0.0.1:9/v1", **changes)
    rt = Runtime(settings)  # nothing answers on port 9: the engine is replaced below
    engine = FakeEngine(words=words, token_s=0.002, slots=None)
    rt.engine = engine
    if router is not None:
        rt._router = router
    server = WyomingServer(rt, SpeechModels(rt.settings))
    await server.start(listening_socket(host, 0))
    try:
        yield Served(rt, server, engine)
    finally:
        await server.stop()
        rt.close()


def client(port: int) -> AsyncTcpClient:
    return AsyncTcpClient("127.0.0.1", port, connect_timeout=5, read_timeout=READ_S)


async def read_until(c: AsyncTcpClient, *ends: str) -> list[Event]:
    """Every event up to and with the first of type `ends` (or an `error`); the connection's
    end is None last."""
    seen: list[Event] = []
    while True:
        event = await c.read_event()
        seen.append(event)
        if event is None or event.type in (*ends, "error"):
            return seen


# ----- what Home Assistant sends (components/wyoming/*.py) ---------------------------------


async def ha_describe(port: int) -> Info:
    async with client(port) as c:
        await c.write_event(Describe().event())
        events = await read_until(c, "info")
    return Info.from_event(events[-1])


def pcm16k(path: Any) -> bytes:
    samples = load_audio(path, max_bytes=50_000_000, max_seconds=60)
    return (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()


async def ha_stt(port: int, pcm: bytes, *, rate: int = 16000, width: int = 2, channels: int = 1,
                 chunk: int = 1024, **transcribe: Any) -> list[Event]:  # fmt: skip
    """stt.py's `async_process_audio_stream`: everything read, to `transcript`."""
    async with client(port) as c:
        await c.write_event(Transcribe(language="en", **transcribe).event())
        fmt = {"rate": rate, "width": width, "channels": channels}
        await c.write_event(AudioStart(**fmt).event())
        for i in range(0, len(pcm), chunk):
            await c.write_event(AudioChunk(audio=pcm[i : i + chunk], **fmt).event())
        await c.write_event(AudioStop().event())
        return await read_until(c, "transcript")


async def ha_tts(port: int, text: str, voice: str | None = None) -> list[Event]:
    """tts.py's `async_get_tts_audio`: `synthesize`, read to `audio-stop`."""
    async with client(port) as c:
        chosen = SynthesizeVoice(name=voice) if voice else None
        await c.write_event(Synthesize(text=text, voice=chosen).event())
        return await read_until(c, "audio-stop")


async def ha_tts_stream(port: int, pieces: list[str], gap_s: float = 0.0) -> list[Event]:
    """tts.py's `async_stream_tts_audio`: the text written as it comes (a background task),
    the audio read to `synthesize-stopped`."""
    async with client(port) as c:

        async def write() -> None:
            await c.write_event(SynthesizeStart().event())
            for piece in pieces:
                await c.write_event(SynthesizeChunk(text=piece).event())
                await asyncio.sleep(gap_s)
            await c.write_event(Synthesize(text="".join(pieces)).event())
            await c.write_event(SynthesizeStop().event())

        writing = asyncio.create_task(write())
        try:
            return await read_until(c, "synthesize-stopped")
        finally:
            await writing


async def ha_conversation(port: int, text: str, conversation_id: str, **ids: str) -> list[Event]:
    """conversation.py's `async_process`: `transcript` with its context, read to `handled` or
    `not-handled`."""
    async with client(port) as c:
        context = {"conversation_id": conversation_id, **ids}
        await c.write_event(Transcript(text, context=context, language="en").event())
        return await read_until(c, "handled", "not-handled")


def wav_of(events: list[Event]) -> tuple[int, bytes]:
    """The audio a client got, as Home Assistant assembles it."""
    chunks = [AudioChunk.from_event(e) for e in events if e and AudioChunk.is_type(e.type)]
    assert chunks, [e.type for e in events if e]
    return chunks[0].rate, b"".join(c.audio for c in chunks)


def words(text: str) -> list[str]:
    return "".join(c if c.isalnum() or c.isspace() else " " for c in text.lower()).split()


# ----- the tests ---------------------------------------------------------------------------


async def test_describe_offers_whisper_the_voices_and_the_assistant_streaming(settings):
    async with serving(settings) as app:
        info = await ha_describe(app.port)
    (asr,), (tts,), (handle,) = info.asr, info.tts, info.handle
    assert asr.installed and asr.models[0].languages == ["en"]
    assert asr.supports_transcript_streaming
    names = [v.name for v in tts.voices]
    assert "en_US-joe-medium" in names and tts.supports_synthesize_streaming
    assert all(v.installed and v.languages == ["en_US"] for v in tts.voices)
    assert handle.installed and handle.supports_handled_streaming
    # Home Assistant's assistant editor offers an agent only for a language it lists
    assert {"en", "de", "fr"} <= set(handle.models[0].languages)


async def test_speech_to_text_gives_the_apps_words_streamed(settings):
    async with serving(settings) as app:
        events = await ha_stt(app.port, pcm16k(JFK))
    kinds = [e.type for e in events]
    assert kinds[-1] == "transcript", kinds
    text = Transcript.from_event(events[-1]).text
    assert "ask not what your country can do for you" in " ".join(words(text))
    # the streamed side came first: a client that streams reads the same words in chunks
    assert kinds[0] == "transcript-start" and "transcript-chunk" in kinds
    streamed = "".join(e.data["text"] for e in events if e.type == "transcript-chunk")
    assert words(streamed) == words(text)


async def test_names_home_assistant_asks_for_are_favoured(settings):
    async with serving(settings) as app:
        events = await ha_stt(
            app.port, pcm16k(AUDIO / "hotwords.mp3"), transcript_names=["ComfyUI"]
        )
    assert "ComfyUI" in Transcript.from_event(events[-1]).text


async def test_stereo_48_khz_audio_is_heard_as_well(settings):
    mono = np.frombuffer(pcm16k(JFK), "<i2")
    up = np.repeat(mono, 3)  # 48 kHz, crude but intelligible
    stereo = np.stack([up, up], axis=1).astype("<i2").tobytes()
    async with serving(settings) as app:
        # chunks cut inside a frame, as Home Assistant's speech-to-text API passes them on
        events = await ha_stt(app.port, stereo, rate=48000, channels=2, chunk=4097)
    assert "fellow americans" in " ".join(words(Transcript.from_event(events[-1]).text))


async def test_text_to_speech_is_the_apps_voice_and_transcribes_back(settings):
    sentence = "The weather is sunny today. Bring a hat."
    async with serving(settings) as app:
        events = await ha_tts(app.port, sentence)
        rate, pcm = wav_of(events)
        assert events[0].type == "audio-start" and events[-1].type == "audio-stop"
        assert rate == 22050 and len(pcm) / 2 / rate > 1.0
        back = await ha_stt(app.port, resample_to_16k(pcm, rate))
        named = await ha_tts(app.port, "Hello there.", voice="joe")
    assert {"weather", "sunny", "hat"} <= set(words(Transcript.from_event(back[-1]).text))
    assert wav_of(named)[1]


def resample_to_16k(pcm: bytes, rate: int) -> bytes:
    with io.BytesIO() as buf:
        with wave.open(buf, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(rate)
            w.writeframes(pcm)
        return pcm16k(buf.getvalue())


async def test_streamed_text_is_spoken_a_sentence_at_a_time(settings):
    # Home Assistant writes the reply's text as it arrives: the first sentence is spoken
    # while the rest is still being written (here 1.5 s later; a sentence is known to be
    # complete once the next one begins)
    pieces = ["The weather is ", "sunny today. ", "Bring a hat ", "and some water."]
    async with serving(settings) as app:
        started = time.monotonic()
        first_audio: list[float] = []

        async def timed() -> list[Event]:
            async with client(app.port) as c:
                await c.write_event(SynthesizeStart().event())
                for i, piece in enumerate(pieces):
                    await c.write_event(SynthesizeChunk(text=piece).event())
                    if i == 2:  # the first sentence is complete: its audio comes now
                        event = await c.read_event()
                        while event is not None and event.type != "audio-chunk":
                            event = await c.read_event()
                        first_audio.append(time.monotonic() - started)
                        await asyncio.sleep(1.5)
                await c.write_event(Synthesize(text="".join(pieces)).event())
                await c.write_event(SynthesizeStop().event())
                return await read_until(c, "synthesize-stopped")

        rest = await timed()
        whole = await ha_tts_stream(app.port, pieces)
    assert first_audio and first_audio[0] < 1.5
    assert rest[-1].type == "synthesize-stopped" and "audio-stop" in [e.type for e in rest]
    assert whole[-1].type == "synthesize-stopped"
    assert whole[0].type == "audio-start" and wav_of(whole)[1]


async def test_a_chat_question_streams_its_answer_into_one_conversation(settings):
    async with serving(settings) as app:
        first = await ha_conversation(app.port, "What's the weather like?", "01HA1",
                                      device_id="kitchen-satellite")  # fmt: skip
        second = await ha_conversation(app.port, "And tomorrow?", "01HA1",
                                       device_id="kitchen-satellite")  # fmt: skip
        kinds = [e.type for e in first]
        assert kinds[0] == "handled-start" and kinds[-1] == "handled", kinds
        streamed = "".join(e.data["text"] for e in first if e.type == "handled-chunk")
        handled = Handled.from_event(first[-1])
        assert handled.text and words(streamed) == words(handled.text)
        cid = handled.context["assistant_conversation"]
        assert handled.context["conversation_id"] == "01HA1"
        assert Handled.from_event(second[-1]).context["assistant_conversation"] == cid
        turns = app.rt.conversations.turns(cid, "local")
        assert [t.user_text for t in turns] == ["What's the weather like?", "And tomorrow?"]
        assert all(t.result.lane == "chat" for t in turns)


async def test_a_deep_request_is_handed_off_at_once_and_its_status_is_asked_later(settings):
    async with serving(settings, words=30) as app:
        ask = "Think hard about a migration plan for our database."
        started = time.monotonic()
        events = await ha_conversation(app.port, ask, "01HA2", satellite_id="office")
        took = time.monotonic() - started
        handled = Handled.from_event(events[-1])
        assert handled.text == HANDED_OFF and took < 10
        job_id, cid = handled.context["job_id"], handled.context["assistant_conversation"]
        job = app.rt.store.job(job_id)
        assert job is not None and job.state == "queued" and job.owner == "local"
        # the app's worker runs it; its result is in the Jobs panel, linked to the conversation
        worker = app.rt.worker()
        serving_jobs = asyncio.create_task(worker.serve(poll_s=0.05))
        try:
            await until(lambda: app.rt.store.job(job_id).state == "done", 30, "the job to end")
        finally:
            serving_jobs.cancel()
            await asyncio.gather(serving_jobs, return_exceptions=True)
        assert app.rt.store.conversation_job(cid).id == job_id
        # an hour later, in a new Home Assistant conversation on the same satellite
        app.server.handling.clock = lambda: time.time() + 3600
        later = await ha_conversation(app.port, "Is it done?", "01HA3", satellite_id="office")
        assert Handled.from_event(later[-1]).context["assistant_conversation"] == cid
        chat = [m for lane, m in app.engine.requests if lane == "chat"][-1]
        note = "\n".join(m.content for m in chat)
        assert f"job {job_id}" in note and "done" in note


async def test_a_refused_turn_is_not_handled_with_the_reason(settings):
    async with serving(settings, max_text_chars=20) as app:
        events = await ha_conversation(app.port, "x" * 50, "01HA4")
    assert events[-1].type == "not-handled"
    assert "too long" in (NotHandled.from_event(events[-1]).text or "")


async def test_the_satellite_benchmark_measures_each_way(settings):
    from argparse import Namespace

    from scripts.bench_wyoming import bench

    async with serving(settings) as app:
        args = Namespace(host="127.0.0.1", port=app.port, n=1,
                         question=["Hello there?", "What is the capital of France?"])  # fmt: skip
        result = await asyncio.wait_for(bench(args), READ_S)
    assert result["transcripts"] == ["What is the capital of France?"]
    for way in ("sequential", "streaming"):
        figures = result[way]
        assert figures["first_audio_ms"]["n"] == 1
        assert 0 < figures["transcript_ms"]["max"] <= figures["first_audio_ms"]["max"]
