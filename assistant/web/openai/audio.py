"""`POST /v1/audio/transcriptions` and `POST /v1/audio/speech`: the app's own speech (its
Whisper and Piper pools, or the speech servers it is configured with) as an OpenAI-compatible
server, beside `/v1/chat/completions` and under the same login and admission (`OpenAIRoute`'s
gate and places: a login's transcriptions and chat turns share its `max_api_per_user`).

Uploads are capped like the page's (`max_upload_bytes`, `max_audio_s`); text to speak like a
typed turn (`max_text_chars`). Speech is streamed a sentence at a time: the first sentence is
synthesized before the response starts (so a failure is still a proper HTTP error), the rest
while the client plays it. Formats: `wav` (the default here; streamed, so its sizes say
"unknown") and `pcm` (OpenAI's: 24 kHz 16-bit mono); `mp3` and the rest are refused by name.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from typing import Any

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

from assistant.errors import AssistantError, BadInput, ConfigError, ModelMissing
from assistant.limits import uploads as uploads_per_day
from assistant.records import AudioChunk
from assistant.settings import Settings
from assistant.speech.audio import load_audio, resample_int16
from assistant.speech.models import SpeechModels
from assistant.speech.pools import speech_pools
from assistant.speech.remote import PCM_RATE, RemoteSpeechError
from assistant.web.edge.asgi import TooLarge, read_body
from assistant.web.edge.security import MULTIPART_SLACK
from assistant.web.openai.route import OpenAIRoute
from assistant.web.openai.wire import ApiError, read_json

TRANSCRIPT_FORMATS = ("json", "text", "verbose_json")
SPEECH_FORMATS = {"wav": "audio/wav", "pcm": "audio/pcm"}
MAX_FORM_FIELDS = 32
OPENAI_VOICES = frozenset(
    {"alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer",
     "verse", "marin", "cedar"}
)  # fmt: skip
"""OpenAI's voice names: clients send one by default; each gets the app's default voice."""


class OpenAIAudio:
    """The two audio handlers, over the app's speech models and the chat endpoint's gate."""

    def __init__(self, route: OpenAIRoute, speech: SpeechModels, settings: Settings) -> None:
        self.route, self.speech, self.settings = route, speech, settings

    async def transcriptions(self, request: Request) -> Response:
        try:
            owner = self.route.admit(request)
        except ApiError as e:
            return e.response()
        try:
            form = await self._form(request)
            upload = form.get("file")
            if not isinstance(upload, UploadFile):
                raise ApiError(400, "send the audio as the multipart file field 'file'",
                               "invalid_request_error")  # fmt: skip
            fmt = str(form.get("response_format") or "json")
            if fmt not in TRANSCRIPT_FORMATS:
                served = ", ".join(TRANSCRIPT_FORMATS)
                raise ApiError(400, f"response_format {fmt!r} is not served; use one of {served}",
                               "invalid_request_error")  # fmt: skip
            prompt = str(form.get("prompt") or "") or None
            data = await upload.read()
            self._count_upload(owner, len(data))
            limits = {"max_bytes": self.settings.max_upload_bytes,
                      "max_seconds": self.settings.max_audio_s}  # fmt: skip
            pools = speech_pools()
            async with pools.share(owner):  # logins take turns on the pool
                samples = await pools.run_stt(lambda: load_audio(data, **limits))
                stt = await self.speech.stt()
                heard = await pools.transcribe(stt, samples, hotwords=prompt)
        except ApiError as e:
            return e.response()
        except AssistantError as e:
            return speech_error(e).response()
        finally:
            self.route.admission.leave(owner)
        if fmt == "text":
            return PlainTextResponse(heard.text)
        if fmt == "verbose_json":
            return JSONResponse({"task": "transcribe", "language": heard.language,
                                 "duration": round(heard.duration_s, 3), "text": heard.text,
                                 "segments": []})  # fmt: skip
        return JSONResponse({"text": heard.text})

    def _count_upload(self, owner: str, n: int) -> None:
        """`n` upload bytes against the login's day (`max_upload_bytes_per_day`; with a login
        only, like the page's), or 429 naming the limit."""
        if not self.settings.auth:
            return
        day = uploads_per_day(self.settings)
        why = day.refusal(owner, n)
        if why is not None:
            raise ApiError(429, why, "rate_limit_error", "upload_limit")
        day.add(owner, n)

    async def _form(self, request: Request) -> Any:
        """The multipart form, read within the upload cap (plus room for its framing)."""
        limit = self.settings.max_upload_bytes + MULTIPART_SLACK
        declared = request.headers.get("content-length", "")
        try:
            if declared.isdigit() and int(declared) > limit:
                raise TooLarge
            body = await read_body(request.receive, limit)
        except TooLarge as e:
            raise ApiError(413, f"the upload is larger than {limit} bytes (max_upload_bytes)",
                           "invalid_request_error") from e  # fmt: skip
        if body is None:
            raise ApiError(400, "the client left before sending its request",
                           "invalid_request_error")  # fmt: skip
        sent = False

        async def replay() -> dict[str, Any]:  # the body once more, for the form parser
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        try:
            return await Request(request.scope, replay).form(
                max_files=1, max_fields=MAX_FORM_FIELDS
            )
        except Exception as e:  # starlette raises several kinds for a malformed form
            raise ApiError(400, f"the body is not a multipart form: {e}",
                           "invalid_request_error") from e  # fmt: skip

    async def speak(self, request: Request) -> Response:
        try:
            owner = self.route.admit(request)
        except ApiError as e:
            return e.response()
        streaming = False
        try:
            body = await read_json(request)
            text, fmt, voice, speed = self._speech_request(body)
            tts = await self._voice(voice, speed)
            from assistant.speech.tts import speech_sentences  # Piper: loaded when used

            # linear, but up to max_text_chars of it: off the event loop (issue 38)
            sentences = await asyncio.to_thread(speech_sentences, text)
            first = await self._say(tts, sentences[0], owner) if sentences else []
            if not first:
                raise ApiError(400, "nothing to speak: the input has no words after removing "
                               "symbols", "invalid_request_error")  # fmt: skip
            out = self._stream(tts, first, sentences[1:], fmt, owner)
            streaming = True
            return StreamingResponse(out, media_type=SPEECH_FORMATS[fmt])
        except ApiError as e:
            return e.response()
        except AssistantError as e:
            return speech_error(e).response()
        finally:
            if not streaming:
                self.route.admission.leave(owner)

    def _speech_request(self, body: Any) -> tuple[str, str, str | None, float]:
        if not isinstance(body, dict):
            raise ApiError(400, "the body must be a JSON object", "invalid_request_error")
        text = body.get("input")
        if not isinstance(text, str) or not text.strip():
            raise ApiError(400, "'input' must be non-empty text", "invalid_request_error")
        if len(text) > self.settings.max_text_chars:
            raise ApiError(400, f"'input' is longer than {self.settings.max_text_chars} "
                           "characters (max_text_chars)", "invalid_request_error")  # fmt: skip
        fmt = body.get("response_format") or "wav"
        if fmt not in SPEECH_FORMATS:
            served = ", ".join(SPEECH_FORMATS)
            raise ApiError(400, f"response_format {fmt!r} is not served; use one of {served}",
                           "invalid_request_error")  # fmt: skip
        speed = body.get("speed", 1.0)
        if not isinstance(speed, int | float) or not 0.25 <= speed <= 4.0:
            raise ApiError(400, "'speed' must be a number from 0.25 to 4.0",
                           "invalid_request_error")  # fmt: skip
        voice = body.get("voice")
        return text, fmt, voice if isinstance(voice, str) and voice else None, float(speed)

    async def _voice(self, voice: str | None, speed: float) -> Any:
        """One of the voices the app lists, by name; OpenAI's names ("alloy") get the default
        one; any other name is a 400 naming the voices (never a path on the server: each
        spelling of one loaded another model, issue 38)."""
        from assistant.speech.tts import listed_voices, unknown_voice

        if voice is not None and voice not in listed_voices(self.settings):
            if voice.lower() not in OPENAI_VOICES:
                raise ApiError(400, unknown_voice(voice, self.settings),
                               "invalid_request_error", "unknown_voice")  # fmt: skip
            voice = None
        try:
            return await self.speech.tts(voice, speed)
        except (ConfigError, ModelMissing):
            if voice is None:
                raise
            return await self.speech.tts(None, speed)  # listed but not installed here

    @staticmethod
    async def _say(tts: Any, sentence: str, owner: str) -> list[AudioChunk]:
        """One sentence, in `owner`'s turn: two logins' long texts are spoken a sentence of
        each at a time, not one whole text after the other."""
        pools = speech_pools()
        async with pools.share(owner):
            return await pools.synthesize(tts, sentence)

    async def _stream(
        self, tts: Any, first: list[AudioChunk], rest: list[str], fmt: str, owner: str
    ) -> AsyncIterator[bytes]:
        rate = PCM_RATE if fmt == "pcm" else first[0].sample_rate
        try:
            if fmt == "wav":
                yield streamed_wav_header(rate)
            for chunk in first:
                yield resample_int16(chunk.samples, chunk.sample_rate, rate)
            for sentence in rest:
                try:
                    chunks = await self._say(tts, sentence, owner)
                except AssistantError:
                    return  # the status is sent: the audio ends where speech failed
                for chunk in chunks:
                    yield resample_int16(chunk.samples, chunk.sample_rate, rate)
        finally:
            self.route.admission.leave(owner)


def speech_error(e: AssistantError) -> ApiError:
    """The HTTP error for a speech failure: the user's audio, a server behind, or a model."""
    if isinstance(e, BadInput):
        return ApiError(400, str(e), "invalid_request_error")
    if isinstance(e, RemoteSpeechError):
        return ApiError(502, str(e), "server_error", "speech_server")
    if isinstance(e, ModelMissing | ConfigError):
        return ApiError(503, str(e), "server_error", "speech_model")
    return ApiError(500, str(e), "server_error")


def streamed_wav_header(rate: int) -> bytes:
    """A 16-bit mono WAV header whose sizes say "unknown" (the audio is still being made)."""
    unknown = 0xFFFFFFFF
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    return (b"RIFF" + struct.pack("<I", unknown) + b"WAVE" + b"fmt " + struct.pack("<I", 16)
            + fmt + b"data" + struct.pack("<I", unknown))  # fmt: skip


def add_audio_routes(
    app: Any, route: OpenAIRoute, speech: SpeechModels, settings: Settings
) -> OpenAIAudio:
    """Register the two endpoints beside `/v1/chat/completions`."""
    audio = OpenAIAudio(route, speech, settings)
    app.add_route("/v1/audio/transcriptions", audio.transcriptions, methods=["POST"],
                  include_in_schema=False)  # fmt: skip
    app.add_route("/v1/audio/speech", audio.speak, methods=["POST"], include_in_schema=False)
    return audio
