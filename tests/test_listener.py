"""The hands-free listener on real recordings, with the real Silero VAD and Whisper tiny.en.

Audio is fed in chunks, faster than real time (the listener measures the pause on the audio
timeline, so the figures it reports do not depend on the feeding pace)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import soundfile as sf

from assistant.records import now_ms
from assistant.settings import Settings
from assistant.speech.listener import ListenConfig, Listener, is_echo
from assistant.speech.stt import load_stt
from assistant.speech.tts import load_tts
from tests.conftest import AUDIO

RATE = 16000


@pytest.fixture(scope="module")
def stt():
    return load_stt(Settings())


def resample(x: np.ndarray, rate: int) -> np.ndarray:
    n = int(len(x) * RATE / rate)
    return np.interp(np.linspace(0, len(x) - 1, n), np.arange(len(x)), x).astype(np.float32)


def channel(i: int) -> np.ndarray:
    data, rate = sf.read(str(AUDIO / "stereo_diarization.wav"), dtype="float32")
    return resample(data[:, i], rate)


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * RATE), dtype=np.float32)


def pcm(x: np.ndarray) -> bytes:
    return (np.clip(x, -1, 1) * 32767).astype("<i2").tobytes()


def listen(stt, audio: np.ndarray, chunk: int = 1600, playing: str | None = None) -> list:
    async def run() -> list:
        listener = Listener(stt)
        listener.playing(playing)
        data, out = pcm(audio), []
        try:
            for i in range(0, len(data), chunk * 2):
                out += await listener.feed(data[i : i + chunk * 2])
        finally:
            await listener.close()
        return out

    return asyncio.run(run())


def two_requests() -> np.ndarray:
    return np.concatenate([silence(0.5), channel(0), silence(1.5), channel(1), silence(1.0)])


def finals(heard: list) -> list:
    return [h for h in heard if h.kind == "final"]


def test_two_requests_separated_by_silence_are_two_turns(stt):
    heard = listen(stt, two_requests())
    first, second = finals(heard)
    assert "wizard" in first.text and "horizon" in second.text.lower()
    assert next(h.kind for h in heard if h.utterance == 1) == "speech"  # announced first
    for h in (first, second):
        assert h.endpoint_ms >= ListenConfig().end_pause_ms  # the pause itself, at least
        assert h.stt_ms is not None and h.last_word_ms is not None and h.audio_s > 1


def test_silence_noise_and_a_click_start_no_turn(stt):
    rng = np.random.default_rng(1)
    click = np.concatenate([silence(1.0), rng.standard_normal(1600) * 0.5, silence(1.0)])
    hiss = rng.standard_normal(RATE * 3) * 0.003
    for audio in (silence(3.0), hiss, click.astype(np.float32)):
        heard = listen(stt, audio.astype(np.float32))
        assert not [h for h in heard if h.kind in ("speech", "final")], heard


def test_the_replys_own_voice_starts_no_turn(stt):
    reply = "The capital of France is Paris. It has been the capital for centuries."
    chunks = list(load_tts(Settings()).synthesize(reply))
    spoken = np.concatenate(
        [resample(np.frombuffer(c.samples, dtype="<i2") / 32768, c.sample_rate) for c in chunks]
    )
    audio = np.concatenate([silence(0.5), spoken, silence(1.0)])
    heard = listen(stt, audio, playing=reply)
    assert not finals(heard) and not [h for h in heard if h.kind == "speech"], heard
    # the same audio when nothing plays is a request, and a different request during
    # playback is heard
    assert finals(listen(stt, audio))
    assert finals(listen(stt, two_requests(), playing=reply))
    assert is_echo("the capital of france is paris", reply)
    assert not is_echo("what is the weather tomorrow", reply)


@pytest.mark.parametrize("chunk", [1, 37, 3200])
def test_any_chunk_size_hears_the_same(stt, chunk):
    audio = np.concatenate([silence(0.3), channel(1), silence(0.8)])
    (final,) = finals(listen(stt, audio, chunk=chunk))
    assert "horizon" in final.text.lower()


def test_silence_is_not_kept(stt):
    async def run() -> int:
        listener = Listener(stt)
        for _ in range(600):  # 60 s
            await listener.feed(pcm(silence(0.1)))
        kept = sum(len(f) for f in listener._preroll) + len(listener._audio)
        await listener.close()
        return kept

    assert asyncio.run(run()) <= int(0.35 * RATE)


def test_the_live_voice_bench_times_each_heard_turn_from_the_last_word(stt, tmp_path):
    # `assistant bench voice --live`: real-time feeding into the listener; each final starts
    # a turn that carries the listener's endpoint and stt and counts from the last word
    from assistant.devtools.voicebench import _live
    from assistant.records import Timings, TurnEvent, TurnResult

    started: list = []

    class Turns:
        async def stream(self, request, tts=None):
            started.append(request)
            timings = Timings(**request.heard_ms, first_audio=now_ms() - request.received_ms)
            yield TurnEvent("done", result=TurnResult("ok", "chat", "r", "stop", timings=timings))

    class Store:
        def new_conversation(self, owner):
            return "c1"

    class Rt:
        turns, store = Turns(), Store()

    path = tmp_path / "one.wav"
    sf.write(str(path), np.concatenate([silence(0.3), channel(1)]), RATE)
    (timings,) = asyncio.run(_live(Rt(), stt, None, path))
    assert "horizon" in started[0].text.lower() and started[0].source == "voice"
    assert timings["endpoint"] >= 500 and timings["stt"] >= 0
    assert timings["first_audio"] >= timings["endpoint"]
