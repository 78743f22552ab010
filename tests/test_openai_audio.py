"""The app's own speech as an OpenAI-compatible server: `/v1/audio/transcriptions` and
`/v1/audio/speech`, driven by the official `openai` library against the running app (its
embedded Whisper tiny.en and Piper voice), with the chat endpoint's gate and limits."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai import AsyncOpenAI, OpenAI

from assistant.speech.remote import PCM_RATE, parse_wav
from tests.app_proc import App, run_app
from tests.conftest import AUDIO
from tests.simengine_proc import run_simengine

JFK = AUDIO / "jfk.flac"
MAX_UPLOAD = 2_000_000


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    data = tmp_path_factory.mktemp("audio")
    # one place per login: a second request while one runs is refused
    (data / "assistant.toml").write_text(
        f"max_api_per_user = 1\nmax_upload_bytes = {MAX_UPLOAD}\nmax_text_chars = 500\n"
    )
    with run_simengine() as sim, run_app(data, sim) as running:
        yield running


def client(app: App, **kw: Any) -> OpenAI:
    return OpenAI(base_url=app.url + "v1", api_key="unused", max_retries=0, timeout=120, **kw)


def words(text: str) -> list[str]:
    return "".join(c if c.isalnum() or c.isspace() else " " for c in text.lower()).split()


def test_a_recording_is_transcribed(app: App) -> None:
    with JFK.open("rb") as f:
        out = client(app).audio.transcriptions.create(model="whisper-1", file=f)
    assert "ask not what your country can do for you" in " ".join(words(out.text))


def test_transcription_formats_text_and_verbose_json(app: App) -> None:
    oa = client(app)
    text = oa.audio.transcriptions.create(
        model="whisper-1", file=("jfk.flac", JFK.read_bytes()), response_format="text"
    )
    assert "fellow americans" in " ".join(words(str(text)))
    verbose = oa.audio.transcriptions.create(
        model="whisper-1", file=("jfk.flac", JFK.read_bytes()), response_format="verbose_json"
    )
    assert verbose.language == "en" and 10 < verbose.duration < 12
    assert "country" in verbose.text


def test_speech_is_a_wav_that_transcribes_back(app: App) -> None:
    oa = client(app)
    sentence = "The weather is sunny today. Bring a hat."
    with oa.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", input=sentence, response_format="wav"
    ) as r:
        assert r.headers["content-type"].startswith("audio/wav")
        body = r.read()
    rate, pcm = parse_wav(body)
    assert rate == 22050 and len(pcm) / 2 / rate > 1.0
    back = oa.audio.transcriptions.create(model="whisper-1", file=("s.wav", body))
    assert {"weather", "sunny", "hat"} <= set(words(back.text))


def test_pcm_is_24_khz_and_as_long_as_the_wav(app: App) -> None:
    # Piper draws each sound's length at random, so two syntheses of a text differ; over more
    # sounds the draws average out: on a 167-character text they differed by up to 3% in 8
    # runs and by 6.5% once in a full run, so the text is as long as this app allows (500),
    # while a PCM left at the voice's 22.05 kHz (read as OpenAI's 24 kHz) is 8.8% short
    oa = client(app)
    text = (
        "One two three four five. The weather is sunny today, so bring a hat and some water. "
        "We will meet at the station at nine, walk along the river, and be back by noon. "
        "After lunch we can visit the old library, read for an hour, and then take the bus "
        "home before the evening traffic starts. On Sunday the market opens early, so we "
        "should buy bread, apples and cheese there, and then cook dinner together while the "
        "children play in the garden until it gets dark outside."
    )
    assert len(text) <= 500
    pcm = oa.audio.speech.create(model="tts-1", voice="alloy", input=text, response_format="pcm")
    wav = oa.audio.speech.create(model="tts-1", voice="alloy", input=text, response_format="wav")
    rate, samples = parse_wav(wav.content)
    pcm_s, wav_s = len(pcm.content) / 2 / PCM_RATE, len(samples) / 2 / rate
    assert pcm.content[:4] != b"RIFF" and abs(pcm_s / wav_s - 1) < 0.05, (pcm_s, wav_s)


def test_bad_requests_get_openai_errors(app: App) -> None:
    oa = client(app)
    with pytest.raises(openai.BadRequestError, match="not an audio file"):
        oa.audio.transcriptions.create(model="whisper-1", file=("x.wav", b"not audio at all"))
    with pytest.raises(openai.BadRequestError, match="response_format 'mp3'"):
        oa.audio.speech.create(model="tts-1", voice="alloy", input="Hi.", response_format="mp3")
    with pytest.raises(openai.BadRequestError, match="nothing to speak"):
        oa.audio.speech.create(model="tts-1", voice="alloy", input="🎉 *** 🎉")
    with pytest.raises(openai.BadRequestError, match="max_text_chars"):
        oa.audio.speech.create(model="tts-1", voice="alloy", input="word " * 200)
    r = httpx.post(app.url + "v1/audio/transcriptions", content=b"{}", timeout=10)
    assert r.status_code == 400 and "multipart" in r.json()["error"]["message"]


def test_an_upload_over_the_cap_is_refused(app: App) -> None:
    with pytest.raises(openai.APIStatusError) as e:
        client(app).audio.transcriptions.create(
            model="whisper-1", file=("big.wav", b"\0" * (MAX_UPLOAD + 100_000))
        )
    assert e.value.status_code == 413 and "max_upload_bytes" in e.value.message


def test_the_gate_and_the_per_login_limit_apply(app: App) -> None:
    # a forwarded request is not loopback: without logins it is refused, like chat's
    forwarded = client(app, default_headers={"x-forwarded-for": "203.0.113.9"})
    with pytest.raises(openai.PermissionDeniedError):
        forwarded.audio.speech.create(model="tts-1", voice="alloy", input="Hello there.")

    async def one(oa: AsyncOpenAI) -> Any:
        try:
            return await oa.audio.transcriptions.create(
                model="whisper-1", file=("jfk.flac", JFK.read_bytes())
            )
        except openai.RateLimitError as e:
            return e

    async def burst() -> list[Any]:
        oa = AsyncOpenAI(base_url=app.url + "v1", api_key="x", max_retries=0, timeout=120)
        return list(await asyncio.gather(*(one(oa) for _ in range(3))))

    out = asyncio.run(burst())
    refused = [e for e in out if isinstance(e, openai.RateLimitError)]
    assert refused and any(not isinstance(o, Exception) for o in out)
    assert "max_api_per_user" in refused[0].message
