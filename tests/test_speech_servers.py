"""The remote speech stages against servers nobody here wrote (`tests.speech_servers_proc`):
faster-whisper-server on the bundled tiny.en and local-tts-studio on the bundled Piper voice,
each in an environment of its own; and the transcription request the app sends, checked
against vLLM's own request model (its `TranscriptionRequest`, from .venv-vllm) and served by
the real servers here in every shape vLLM documents that they share."""

from __future__ import annotations

import email.parser
import email.policy
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from assistant.devtools.vllm_server import vllm_python
from assistant.settings import RemoteSpeech
from assistant.speech.audio import SAMPLE_RATE, load_array, load_audio
from assistant.speech.remote import RemoteSTT, RemoteTTS
from assistant.speech.tts import speech_sentences
from tests.app_proc import App, run_app
from tests.conftest import AUDIO
from tests.fault_speech import fault_server
from tests.simengine_proc import run_simengine
from tests.speech_servers_proc import piper_server, whisper_server

JFK = AUDIO / "jfk.flac"
LIMITS = {"max_bytes": 20_000_000, "max_seconds": 120.0}


def words(text: str) -> list[str]:
    return "".join(c if c.isalnum() or c.isspace() else " " for c in text.lower()).split()


@pytest.fixture(scope="module")
def whisper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with whisper_server(tmp_path_factory.mktemp("fws")) as url:
        yield url


@pytest.fixture(scope="module")
def piper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with piper_server(tmp_path_factory.mktemp("lts")) as url:
        yield url


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    with run_simengine() as sim, run_app(tmp_path_factory.mktemp("app"), sim) as running:
        yield running


def test_faster_whisper_server_transcribes(whisper: str) -> None:
    out = RemoteSTT(RemoteSpeech(stt_url=whisper)).transcribe(load_audio(JFK, **LIMITS))
    assert "ask not what your country can do for you" in " ".join(words(out.text))


def test_local_tts_studio_speaks_pcm_at_its_stated_rate_and_whisper_hears_it(
    whisper: str, piper: str
) -> None:
    tts = RemoteTTS(RemoteSpeech(tts_url=piper), speech_sentences)
    chunks = list(tts.synthesize("The weather is sunny today. Bring a hat and some water."))
    assert len(chunks) == 2 and tts.formats[0] == "pcm"
    # its raw PCM is at the voice's own rate, which it states (X-Sample-Rate), not 24 kHz
    assert {c.sample_rate for c in chunks} == {22050}
    pcm = np.frombuffer(b"".join(c.samples for c in chunks), "<i2")
    seconds = len(pcm) / 22050
    assert 2.0 < seconds < 6.0
    back = RemoteSTT(RemoteSpeech(stt_url=whisper)).transcribe(
        load_array(pcm, 22050, max_seconds=60)
    )
    assert {"weather", "sunny", "hat", "water"} <= set(words(back.text))


def _form(content_type: str, body: bytes) -> tuple[dict[str, str], tuple[str, str, bytes]]:
    """A multipart body's fields, and its file part (filename, content type, bytes)."""
    head = f"Content-Type: {content_type}\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    fields: dict[str, str] = {}
    file = ("", "", b"")
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if part.get_filename():
            file = (part.get_filename(), part.get_content_type(), payload)
        else:
            fields[str(name)] = payload.decode()
    return fields, file


VALIDATE = """
import io, json, sys
from fastapi import UploadFile
from vllm.entrypoints.speech_to_text.transcription.protocol import TranscriptionRequest
fields = json.loads(sys.stdin.read())
request = TranscriptionRequest.model_validate(
    {**fields, "file": UploadFile(io.BytesIO(b"RIFF"), filename="speech.wav")}
)
print(json.dumps(request.model_dump(exclude={"file"}, mode="json")))
"""


def test_the_request_sent_is_vllms_and_the_real_servers_answer_it(
    whisper: str, app: App, tmp_path: Path
) -> None:
    with fault_server() as (base, recorder):
        speech = RemoteSpeech(stt_url=base + "/record/v1", stt_model="openai/whisper-large-v3")
        clip = load_audio(JFK, **LIMITS)[: SAMPLE_RATE * 4]
        RemoteSTT(speech).transcribe(clip, hotwords="Americans")
    ((content_type, body),) = recorder.captured
    assert content_type.startswith("multipart/form-data; boundary=")
    fields, (filename, kind, audio) = _form(content_type, body)
    assert filename == "speech.wav" and kind == "audio/wav" and audio[:4] == b"RIFF"
    # vLLM's own request model takes every field as sent (an unknown one would be an error
    # there only as a warning, so the names are compared too)
    out = subprocess.run([str(vllm_python()), "-c", VALIDATE], input=json.dumps(fields),
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    parsed = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(fields) <= set(parsed), set(fields) - set(parsed)
    assert parsed["model"] == "openai/whisper-large-v3" and parsed["response_format"] == "json"
    assert parsed["temperature"] == 0.0 and parsed["prompt"] == "Americans"
    # that exact request, and vLLM's other documented shapes, served by the real servers
    # (faster-whisper-server serves json and verbose_json; the app all three)
    shapes = [
        ({"language": "en"}, "json"),
        ({"response_format": "verbose_json", "timestamp_granularities[]": "segment"}, "verbose"),
        ({"language": "en", "response_format": "text"}, "text"),
    ]
    for server, served in ((whisper, shapes[:2]), (app.url + "v1", shapes)):
        r = httpx.post(server + "/audio/transcriptions", content=body,
                       headers={"content-type": content_type}, timeout=120)  # fmt: skip
        assert r.status_code == 200, (server, r.text)
        assert "fellow americans" in " ".join(words(r.json()["text"]))
        for extra, kind in served:
            data = {"model": "whisper-1", "temperature": "0.0", **extra}
            upload = {"file": ("speech.wav", audio, "audio/wav")}
            r = httpx.post(server + "/audio/transcriptions", data=data, files=upload, timeout=120)
            assert r.status_code == 200, (server, extra, r.text)
            text = r.text if kind == "text" else r.json()["text"]
            assert "fellow americans" in " ".join(words(text)), (server, extra, text)
