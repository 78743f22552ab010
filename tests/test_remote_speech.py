"""Speech on the user's own servers (`ASSISTANT_STT_URL`, `ASSISTANT_TTS_URL`): the remote
stages against a real OpenAI-compatible speech server (the app's own `/v1/audio/...`, with
its embedded Whisper and Piper, started on loopback), failures against a server that fails on
purpose (`tests.fault_speech`), the opt-in fallback, the settings, a call whose final is not
held behind a preview, and the CLI and `bench voice --live` with both sides remote."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from assistant.records import AudioChunk, Transcript
from assistant.settings import RemoteSpeech, Settings, load_settings
from assistant.speech.audio import SAMPLE_RATE, load_audio
from assistant.speech.fallback import FallbackSTT, FallbackTTS
from assistant.speech.remote import PCM_RATE, RemoteSpeechError, RemoteSTT, RemoteTTS, parse_wav
from assistant.speech.stt import load_stt
from assistant.speech.tts import load_tts, speech_sentences
from tests.app_proc import REPO, App, app_env, run_app
from tests.conftest import AUDIO
from tests.fault_speech import fault_server
from tests.simengine_proc import run_simengine

JFK = AUDIO / "jfk.flac"
LIMITS = {"max_bytes": 20_000_000, "max_seconds": 120.0}
DOWN = "http://127.0.0.1:9/v1"  # the discard port: nothing listens there


def words(text: str) -> list[str]:
    return "".join(c if c.isalnum() or c.isspace() else " " for c in text.lower()).split()


@pytest.fixture(scope="module")
def sim() -> Iterator[str]:
    with run_simengine("--token-ms", "5", "--answer-words", "30") as url:
        yield url


@pytest.fixture(scope="module")
def server(sim: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    """The speech server: the app's own OpenAI-compatible endpoint, its embedded models."""
    # its voice without Piper's noise, sampled afresh at each synthesis: about one "Bring a hat
    # and some water." in 300 came out as a recording tiny.en hears as "We're going to add in
    # some water." (every time, on every CPU: AVX2, AVX, none), failing the tests that speak
    # and transcribe back; without it every run speaks the one recording ("hat" heard at 0.97)
    with run_app(tmp_path_factory.mktemp("speech-server"), sim,
                 ASSISTANT_VOICE_VARIATION="0") as running:  # fmt: skip
        yield running


@pytest.fixture(scope="module")
def faults() -> Iterator[tuple[str, object]]:
    with fault_server() as running:
        yield running


def remote(base: str, **kw: object) -> RemoteSpeech:
    return RemoteSpeech(stt_url=base, tts_url=base, **kw)  # type: ignore[arg-type]


def tts_at(speech: RemoteSpeech) -> RemoteTTS:
    return RemoteTTS(speech, speech_sentences)


# --- against a real server ------------------------------------------------------------------


def test_transcription_on_a_speech_server(server: App) -> None:
    stt = RemoteSTT(remote(server.url + "v1"))
    out = stt.transcribe(load_audio(JFK, **LIMITS))
    assert "ask not what your country can do for you" in " ".join(words(out.text))
    assert 10.5 < out.duration_s < 11.5 and out.stt_ms > 0


def test_speech_comes_as_pcm_one_chunk_per_sentence_and_transcribes_back(server: App) -> None:
    speech = remote(server.url + "v1")
    tts = tts_at(speech)
    chunks = list(tts.synthesize("The weather is sunny today. Bring a hat and some water."))
    assert [c.text for c in chunks] == [
        "The weather is sunny today.",
        "Bring a hat and some water.",
    ]
    assert tts.formats[0] == "pcm" and all(c.sample_rate == PCM_RATE for c in chunks)
    pcm = np.frombuffer(b"".join(c.samples for c in chunks), "<i2").astype(np.float32) / 32768
    at16k = np.interp(
        np.arange(0, len(pcm), PCM_RATE / SAMPLE_RATE), np.arange(len(pcm)), pcm
    ).astype(np.float32)
    back = RemoteSTT(speech).transcribe(at16k)
    assert {"weather", "sunny", "hat", "water"} <= set(words(back.text))
    # a slower rate is the request's speed: longer audio
    slow = b"".join(c.samples for c in tts.at_rate(0.6).synthesize("The weather is sunny today."))
    assert len(slow) > len(chunks[0].samples) * 1.3


def test_silence_is_not_sent(faults) -> None:
    base, server = faults
    before = len(server.requests)
    out = RemoteSTT(remote(base + "/junk/v1")).transcribe(np.zeros(SAMPLE_RATE, np.float32))
    assert out.text == "" and len(server.requests) == before


def test_a_server_without_pcm_is_asked_for_wav_from_then_on(faults) -> None:
    base, server = faults
    tts = tts_at(remote(base + "/wavonly/v1"))
    before = len(server.requests)
    first = list(tts.synthesize("One. Two."))
    asked = [fmt for _, _, fmt in server.requests[before:]]
    assert asked == ["pcm", "wav", "wav"]  # refused once, then WAV for every sentence
    assert [c.sample_rate for c in first] == [16000, 16000] and all(c.samples for c in first)
    assert tts.at_rate(1.5).formats[0] == "wav"  # every rate of the voice knows it


# --- failures: a clear message, never silence --------------------------------------------


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("down", "is unreachable"),
        ("slow", "did not answer within 1 s"),
        ("junk", "answered something unusable"),
        ("nojson", "answered something unusable"),
        ("error", "refused the request: HTTP 500"),
    ],
)
def test_each_failure_says_what_and_where(faults, mode: str, message: str) -> None:
    base, _ = faults
    url = DOWN if mode == "down" else f"{base}/{mode}/v1"
    speech = remote(url, timeout_s=1.0)
    voice = load_audio(JFK, **LIMITS)[: SAMPLE_RATE * 2]
    with pytest.raises(RemoteSpeechError, match=message) as stt_error:
        RemoteSTT(speech).transcribe(voice)
    assert "transcription server at " + url in str(stt_error.value)
    with pytest.raises(RemoteSpeechError, match=message if mode != "nojson" else "not audio"):
        list(tts_at(speech).synthesize("Hello there."))
    # "slow": "did not answer within 1 s" is the deadline firing, both times (the client's
    # timeout; a server that answered after SLOW_S would have given a transcript)


# --- fallback: only when asked, said once ---------------------------------------------------


class LocalStt:
    def __init__(self) -> None:
        self.calls = 0

    def transcribe(self, samples: np.ndarray, *, hotwords: str | None = None) -> Transcript:
        self.calls += 1
        return Transcript("local words", "en", 1.0, 1.0)


class LocalVoice:
    def __init__(self) -> None:
        self.rates: list[float] = []

    def at_rate(self, rate: float) -> LocalVoice:
        self.rates.append(rate)
        return self

    def synthesize(self, text: str) -> Iterator[AudioChunk]:
        yield AudioChunk(22050, b"\1\0" * 100, text)


def test_the_embedded_models_stand_in_only_when_asked_and_say_so_once(caplog) -> None:
    voice = load_audio(JFK, **LIMITS)[:SAMPLE_RATE]
    local = LocalStt()
    stt = FallbackSTT(RemoteSTT(remote(DOWN)), lambda: local)
    assert stt.transcribe(voice).text == "local words"
    assert stt.transcribe(voice).text == "local words"
    notice = stt.take_notice()
    assert notice and "unreachable" in notice and "embedded speech-to-text" in notice
    assert stt.take_notice() is None  # once
    assert sum("embedded speech-to-text" in r.message for r in caplog.records) == 1
    lv = LocalVoice()
    tts = FallbackTTS(tts_at(remote(DOWN)), lambda: lv).at_rate(1.25)
    assert [c.text for c in tts.synthesize("Hi there.")] == ["Hi there."]
    assert lv.rates == [1.25] and "embedded text-to-speech" in (tts.take_notice() or "")
    # without the setting a failure is an error, not the embedded model
    with pytest.raises(RemoteSpeechError):
        load_stt(Settings(speech=remote(DOWN + "/x"))).transcribe(voice)


def test_settings_choose_the_stages(tmp_path: Path) -> None:
    env = {
        "ASSISTANT_STT_URL": "http://gpu-box:8000/v1/",
        "ASSISTANT_STT_MODEL": "openai/whisper-large-v3",
        "ASSISTANT_TTS_URL": "http://speech:8880/v1",
        "ASSISTANT_TTS_VOICE": "af_bella",
        "ASSISTANT_TTS_KEY": "k",
        "ASSISTANT_SPEECH_FALLBACK": "local",
        "ASSISTANT_SPEECH_TIMEOUT_S": "7.5",
    }
    s = load_settings(env, tmp_path / "none.toml")
    assert s.speech == RemoteSpeech(
        stt_url="http://gpu-box:8000/v1", stt_model="openai/whisper-large-v3",
        tts_url="http://speech:8880/v1", tts_voice="af_bella", tts_key="k",
        fallback="local", timeout_s=7.5,
    )  # fmt: skip
    assert isinstance(load_stt(s), FallbackSTT) and isinstance(load_tts(s), FallbackTTS)
    alone = Settings(speech=RemoteSpeech(tts_url="http://speech:8880/v1"))
    assert isinstance(load_tts(alone), RemoteTTS)
    assert load_settings({}, tmp_path / "none.toml").speech == RemoteSpeech()
    with pytest.raises(Exception, match="ASSISTANT_SPEECH_FALLBACK"):
        load_settings({"ASSISTANT_SPEECH_FALLBACK": "maybe"}, tmp_path / "none.toml")


# --- a call: the final is not held behind a preview -------------------------------------


class HeldRemote:
    """A speech server whose first request (a preview) hangs until the test lets it go."""

    remote = True

    def __init__(self, stt: RemoteSTT) -> None:
        self.stt, self.release, self.lock = stt, threading.Event(), threading.Lock()
        self.calls: list[int] = []

    def transcribe(self, samples: np.ndarray, **kw: object) -> Transcript:
        with self.lock:
            self.calls.append(len(samples))
            first = len(self.calls) == 1
        if first:
            self.release.wait(60)
        return self.stt.transcribe(samples)


def test_a_calls_final_does_not_wait_for_a_hung_preview(server: App) -> None:
    from assistant.call.listener import Listener
    from assistant.speech.turn_end import load_turn_end

    held = HeldRemote(RemoteSTT(remote(server.url + "v1")))
    speech = load_audio(JFK, **LIMITS)[: int(SAMPLE_RATE * 3.2)]  # "And so my fellow Americans"
    audio = np.concatenate([np.zeros(SAMPLE_RATE // 4), speech, np.zeros(SAMPLE_RATE * 2)])
    data = (np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes()

    async def run() -> tuple[list, bool]:
        listener = Listener(held, turn_end=load_turn_end())
        heard: list = []
        try:
            for i in range(0, len(data), 3200):
                heard += await listener.feed(data[i : i + 3200])
                await asyncio.sleep(0.01)
            while not any(h.kind == "final" for h in heard):
                heard += await asyncio.wait_for(listener.next(), 60)
            return heard, not held.release.is_set()
        finally:
            held.release.set()
            await listener.close()

    heard, preview_still_hung = asyncio.run(run())
    final = next(h for h in heard if h.kind == "final")
    assert "fellow americans" in " ".join(words(final.text))
    # a preview of the first second hung; the final of the whole utterance went past it
    assert preview_still_hung and len(held.calls) >= 2 and held.calls[-1] > held.calls[0]


# --- the commands, with both sides remote --------------------------------------------------


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "assistant.cli", *args], env=env, capture_output=True,
        text=True, timeout=300, cwd=REPO,
    )  # fmt: skip


def test_transcribe_and_speak_use_the_servers(server: App, sim: str, tmp_path: Path) -> None:
    env = app_env(tmp_path, sim, ASSISTANT_STT_URL=server.url + "v1",
                  ASSISTANT_TTS_URL=server.url + "v1")  # fmt: skip
    out = cli("speak", "Bring a hat and some water.", "-o", str(tmp_path / "o.wav"), env=env)
    assert out.returncode == 0, out.stderr
    rate, pcm = parse_wav((tmp_path / "o.wav").read_bytes())
    assert rate == PCM_RATE and len(pcm) / 2 / rate > 1.0
    out = cli("transcribe", str(tmp_path / "o.wav"), "--json", env=env)
    assert out.returncode == 0, out.stderr
    assert {"hat", "water"} <= set(words(json.loads(out.stdout)["text"]))
    down = {**env, "ASSISTANT_STT_URL": DOWN}
    out = cli("transcribe", str(JFK), "--json", env=down)
    assert out.returncode == 1 and "unreachable" in out.stderr and "Traceback" not in out.stderr


def test_the_live_voice_bench_reports_its_stages_with_remote_speech(
    server: App, sim: str, tmp_path: Path
) -> None:
    audio = tmp_path / "audio"
    audio.mkdir()
    (audio / "jfk.flac").write_bytes(JFK.read_bytes())
    refs = json.loads((AUDIO / "transcripts.json").read_text())
    (audio / "transcripts.json").write_text(json.dumps({"jfk.flac": refs["jfk.flac"]}))
    env = app_env(tmp_path, sim, ASSISTANT_STT_URL=server.url + "v1",
                  ASSISTANT_TTS_URL=server.url + "v1")  # fmt: skip
    out = cli("bench", "voice", "--live", "--audio", str(audio), "--rounds", "1", "--json",
              env={**env, "PYTHONUNBUFFERED": "1"})  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["speech"] == {"stt": server.url + "v1", "tts": server.url + "v1"}
    for stage in ("stt", "first_audio", "tts_first_audio"):
        assert report["push_to_talk"][stage]["n"] >= 1, report["push_to_talk"]
    assert report["turns_without_audio"] == {"pipelined": 0, "sequential": 0, "live": 0}
    # the call heard the recording as one turn, timed from the last word like the embedded
    assert report["live_lost_share"] == 0 and report["live_first_audio_from_last_word"]["n"] >= 1
    for stage in ("endpoint", "stt", "first_audio"):
        assert report["live"][stage]["n"] >= 1, report["live"]
    print(json.dumps(report))  # the figures, for the record (pytest -s)
    assert os.environ.get("ASSISTANT_STT_URL") is None  # the test process stays embedded


def test_the_doctor_checks_the_speech_servers(server: App, sim: str, tmp_path: Path) -> None:
    env = app_env(tmp_path, sim, ASSISTANT_STT_URL=server.url + "v1",
                  ASSISTANT_TTS_URL=server.url + "v1")  # fmt: skip
    out = cli("doctor", "--json", env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    checks = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
    for name in ("speech-to-text server", "text-to-speech server", "transcription"):
        assert checks[name]["ok"] is True and " ms" in checks[name]["detail"], checks[name]
    # the app lists only its chat model: said, and settled by the requests that follow
    assert checks["speech-to-text model"]["ok"] is None
    trip = checks["spoken sentence"]
    assert trip["ok"] is True and "fox" in trip["detail"]
    assert "transcribed back in" in trip["detail"]
    # a fallback standing in does not hide the server's failure from the doctor
    dead = {"ASSISTANT_STT_URL": DOWN, "ASSISTANT_SPEECH_FALLBACK": "local"}
    down = cli("doctor", "--json", env={**env, **dead})
    assert down.returncode == 1
    checks = {c["name"]: c for c in json.loads(down.stdout)["checks"]}
    assert checks["speech-to-text server"]["ok"] is False
    assert "unreachable" in checks["speech-to-text server"]["detail"]
    assert checks["transcription"]["ok"] is False and DOWN in checks["transcription"]["detail"]
    assert checks["text-to-speech server"]["ok"] is True  # each side on its own


def test_a_call_on_a_dead_server_with_fallback_says_so_once_and_hears(tmp_path: Path) -> None:
    from assistant.call.listener import Listener
    from assistant.speech.stt import load_local_stt
    from assistant.speech.turn_end import load_turn_end

    local = load_local_stt(Settings(data_dir=tmp_path))
    stt = FallbackSTT(RemoteSTT(remote(DOWN)), lambda: local)
    speech = load_audio(JFK, **LIMITS)
    audio = np.concatenate([np.zeros(SAMPLE_RATE // 4), speech, np.zeros(SAMPLE_RATE * 2)])
    data = (np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes()

    async def run() -> list:
        listener = Listener(stt, turn_end=load_turn_end())
        heard: list = []
        try:
            for i in range(0, len(data), 3200):
                heard += await listener.feed(data[i : i + 3200])
                heard += await listener.settle()
            return heard
        finally:
            await listener.close()

    heard = asyncio.run(run())
    notices = [h for h in heard if h.kind == "notice"]
    assert len(notices) == 1 and "unreachable" in notices[0].reason
    assert "embedded speech-to-text" in notices[0].reason
    finals = " ".join(h.text for h in heard if h.kind == "final")  # heard, by the embedded
    assert "for your country" in " ".join(words(finals))
