"""Speech on the user's own servers: OpenAI-compatible `/v1/audio/transcriptions` (e.g. vLLM
serving a Whisper model) and `/v1/audio/speech` (Speaches, Kokoro-FastAPI, Piper servers),
behind the same stage Protocols as the embedded models.

The stages are blocking calls run on the speech pools (the listener, the voice turn and the
job notices already call them that way), so the official `openai` client is used in its
blocking form, on the pools' remote executor (`speech.pools`), which is sized for waiting,
not for the CPU. Every request has a deadline and no retries: a server that is down, slow,
refuses the format or answers junk is a `RemoteSpeechError` whose message says which and
where, never a silent empty transcript or silence.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import openai

from assistant.errors import AssistantError
from assistant.records import AudioChunk, Transcript, now_ms
from assistant.settings import RemoteSpeech
from assistant.speech.audio import SAMPLE_RATE, is_silent, wav_bytes

PCM_RATE = 24000
"""OpenAI's `pcm` speech format: 24 kHz, 16-bit signed little-endian, mono."""
CONNECT_S = 5.0
_TAG_ONLY = re.compile(r"^\s*([\[(*♪♫].*[\])*♪♫]|[♪♫\s.]+)\s*$")


class RemoteSpeechError(AssistantError):
    """A speech server failed: down, slow, refused the request or answered junk."""


def client_for(url: str, key: str | None, timeout_s: float) -> openai.OpenAI:
    """The client of one speech server: its deadline per request, no retries (a retry would
    double a slow server's delay; the caller's fallback, if any, is the retry)."""
    # openai's own Timeout: from 3.6x it is httpx2's and refuses an httpx.Timeout (TypeError:
    # every remote transcription failed on a fresh install)
    timeout = openai.Timeout(timeout_s, connect=min(CONNECT_S, timeout_s))
    return openai.OpenAI(base_url=url, api_key=key or "none", timeout=timeout, max_retries=0)


def failure(e: Exception, what: str, url: str, timeout_s: float) -> RemoteSpeechError:
    """A readable reason for `e`, a failure of the `what` server at `url`."""
    where = f"the {what} server at {url}"
    if isinstance(e, openai.APITimeoutError):
        why = f"{where} did not answer within {timeout_s:g} s (ASSISTANT_SPEECH_TIMEOUT_S)"
    elif isinstance(e, openai.APIConnectionError):
        why = f"{where} is unreachable ({e.__cause__ or e})"
    elif isinstance(e, openai.APIStatusError):
        detail = _short(e.response.text) if e.response is not None else str(e)
        why = f"{where} refused the request: HTTP {e.status_code} {detail}"
    else:
        why = f"{where} answered something unusable: {e}"
    return RemoteSpeechError(why)


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


class RemoteSTT:
    """Transcription on an OpenAI-compatible `/v1/audio/transcriptions` server."""

    remote = True
    """Run on the pools' remote executor: it waits on the network, not on the CPU."""

    def __init__(self, speech: RemoteSpeech, client: openai.OpenAI | None = None) -> None:
        assert speech.stt_url, "RemoteSTT needs ASSISTANT_STT_URL"
        self.url, self.model, self.timeout_s = speech.stt_url, speech.stt_model, speech.timeout_s
        self.client = client or client_for(speech.stt_url, speech.stt_key, speech.timeout_s)

    def transcribe(self, samples: np.ndarray, *, hotwords: str | None = None) -> Transcript:
        """16 kHz mono float32 samples to text; silence is not sent (nothing to transcribe)."""
        start = now_ms()
        audio = np.asarray(samples, dtype=np.float32).reshape(-1)
        duration = audio.size / SAMPLE_RATE
        if is_silent(audio):
            return Transcript("", "en", duration, now_ms() - start)
        extra = {"prompt": hotwords} if hotwords else {}
        try:
            result = self.client.audio.transcriptions.create(
                model=self.model,
                file=("speech.wav", wav_bytes(audio, SAMPLE_RATE), "audio/wav"),
                response_format="json",
                temperature=0.0,
                **extra,  # type: ignore[arg-type]
            )
            text = getattr(result, "text", None)
            if not isinstance(text, str):
                raise ValueError(f"no text in its answer ({_short(repr(result), 120)})")
        except openai.OpenAIError as e:
            raise failure(e, "transcription", self.url, self.timeout_s) from e
        except ValueError as e:
            raise failure(e, "transcription", self.url, self.timeout_s) from e
        text = "" if _TAG_ONLY.match(text) else text.strip()  # "[Music]": no words
        language = getattr(result, "language", None) or "en"
        return Transcript(text, str(language), duration, now_ms() - start)

    def warm(self) -> None:
        """Nothing to load here; the doctor checks the server."""


@dataclass
class RemoteTTS:
    """Speech from an OpenAI-compatible `/v1/audio/speech` server, one request per sentence,
    so the first sentence is heard while the server speaks the next. Streamed PCM where the
    server offers it, else WAV (decided on the first refusal, then kept)."""

    speech: RemoteSpeech
    sentences: Callable[[str], list[str]]
    """Text to the sentences to speak (`tts.speech_sentences`: the embedded voice's cleaning)."""
    client: openai.OpenAI | None = None
    speed: float = 1.0
    formats: list[str] = field(default_factory=lambda: ["pcm", "wav"])
    """The formats still to try, the one in use first (shared by every rate of one voice)."""
    remote = True

    def __post_init__(self) -> None:
        s = self.speech
        assert s.tts_url, "RemoteTTS needs ASSISTANT_TTS_URL"
        self.url = s.tts_url
        if self.client is None:
            self.client = client_for(s.tts_url, s.tts_key, s.timeout_s)

    def synthesize(self, text: str) -> Iterator[AudioChunk]:
        """One AudioChunk per sentence; nothing for text with nothing speakable."""
        for sentence in self.sentences(text):
            rate, pcm = self.sentence(sentence)
            if pcm:
                yield AudioChunk(sample_rate=rate, samples=pcm, text=sentence)

    def sentence(self, text: str) -> tuple[int, bytes]:
        """(sample rate, mono int16 PCM) of one sentence."""
        while True:
            fmt = self.formats[0]
            try:
                return self._fetch(text, fmt)
            except openai.APIStatusError as e:
                # a server that does not offer this format says so with a 4xx: try the next
                if 400 <= e.status_code < 500 and len(self.formats) > 1:
                    self.formats.pop(0)
                    continue
                raise failure(e, "speech", self.url, self.speech.timeout_s) from e
            except (openai.OpenAIError, ValueError) as e:
                raise failure(e, "speech", self.url, self.speech.timeout_s) from e

    def _fetch(self, text: str, fmt: str) -> tuple[int, bytes]:
        assert self.client is not None
        with self.client.audio.speech.with_streaming_response.create(
            model=self.speech.tts_model,
            voice=self.speech.tts_voice,
            input=text,
            response_format=fmt,  # type: ignore[arg-type]
            speed=self.speed,
        ) as response:
            kind = response.headers.get("content-type", "")
            stated = response.headers.get("x-sample-rate", "")  # Piper servers say theirs
            body = b"".join(response.iter_bytes())
        return decode_speech(body, fmt, kind, int(stated) if stated.isdigit() else PCM_RATE)

    def at_rate(self, rate: float) -> RemoteTTS:
        """This voice at `rate` times its speed (the request's `speed`)."""
        if abs(rate - self.speed) < 1e-3:
            return self
        speed = min(max(rate, 0.5), 2.0)
        return RemoteTTS(self.speech, self.sentences, self.client, speed, self.formats)

    def warm(self) -> None:
        """Nothing to load here; the doctor checks the server."""


def decode_speech(
    body: bytes, fmt: str, content_type: str = "", pcm_rate: int = PCM_RATE
) -> tuple[int, bytes]:
    """(sample rate, mono int16 PCM) from a speech server's answer, or ValueError (junk);
    raw PCM is at `pcm_rate` (OpenAI's 24 kHz unless the server stated its own)."""
    if body[:4] == b"RIFF":  # a WAV, whatever was asked for (some servers ignore the format)
        rate, pcm = parse_wav(body)
        if not pcm:
            raise ValueError("it sent a WAV without samples")
        return rate, pcm
    if content_type.startswith(("text/", "application/json")) or body[:1] in (b"{", b"<"):
        raise ValueError(f"it sent {content_type or 'text'}, not audio: {_short(repr(body), 120)}")
    if fmt != "pcm":
        raise ValueError(f"asked for {fmt}, it sent {len(body)} bytes that are not a WAV")
    if not body:
        raise ValueError("it sent no audio")
    return pcm_rate, body[: len(body) - len(body) % 2]


def parse_wav(data: bytes) -> tuple[int, bytes]:
    """A 16-bit PCM WAV's rate and mono samples; a streamed WAV's sizes (0 or 0xFFFFFFFF,
    unknown when the header was sent) mean "to the end"."""
    if len(data) < 12 or data[8:12] != b"WAVE":
        raise ValueError("not a WAV file")
    pos, fmt = 12, None
    while pos + 8 <= len(data):
        tag, size = data[pos : pos + 4], struct.unpack("<I", data[pos + 4 : pos + 8])[0]
        pos += 8
        if tag == b"fmt ":
            fmt = struct.unpack("<HHIIHH", data[pos : pos + 16])
        elif tag == b"data":
            if fmt is None:
                raise ValueError("a WAV without its format chunk")
            codec, channels, rate, _, _, bits = fmt
            if codec not in (1, 0xFFFE) or bits != 16:
                raise ValueError(f"a WAV of {bits}-bit samples (codec {codec}); need 16-bit PCM")
            end = len(data) if size in (0, 0xFFFFFFFF) else min(len(data), pos + size)
            pcm = data[pos:end]
            pcm = pcm[: len(pcm) - len(pcm) % (2 * channels)]
            if channels > 1:
                frames = np.frombuffer(pcm, "<i2").reshape(-1, channels)
                pcm = frames.mean(axis=1).astype("<i2").tobytes()
            return rate, pcm
        pos += size + (size & 1)
    raise ValueError("a WAV without audio data")
