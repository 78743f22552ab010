"""The answer to `describe`: what the app serves over Wyoming.

Three programs: `asr`, the app's Whisper; `tts`, the Piper voices the app lists and has here
(Home Assistant offers each as a voice); `handle`, the assistant, in every language Whisper
knows (the engine answers in the language it is asked in; Home Assistant's assistant editor
offers a conversation agent only for a language it lists, and one listing none for none).
All three stream: transcript chunks, synthesized audio as each sentence is ready, and the
reply's chunks (`handled-chunk`) as the engine writes them, each followed by the event a
client that does not stream waits for.
"""

from __future__ import annotations

import json
import re
from importlib import metadata

from wyoming.info import (
    AsrModel,
    AsrProgram,
    Attribution,
    HandleModel,
    HandleProgram,
    Info,
    TtsProgram,
    TtsVoice,
)

from assistant.errors import AssistantError
from assistant.settings import Settings

ATTRIBUTION = Attribution(name="the assistant", url="")
ASR_NAME = "assistant-whisper"
TTS_NAME = "assistant-piper"
HANDLE_NAME = "assistant"


def _version() -> str:
    try:
        return metadata.version("assistant")
    except metadata.PackageNotFoundError:
        return "0"


def whisper_languages() -> list[str]:
    """The languages a multilingual Whisper knows (its own list)."""
    from faster_whisper.tokenizer import _LANGUAGE_CODES

    return sorted(_LANGUAGE_CODES)


def stt_languages(settings: Settings) -> list[str]:
    """English for an English-only Whisper (the bundled tiny.en), else Whisper's languages."""
    model = settings.whisper_model or "tiny.en"
    return ["en"] if model.rstrip("/").endswith(".en") else whisper_languages()


def voice_language(name: str) -> list[str]:
    """A Piper voice's language, from its config (`en_US`), else from its name."""
    from assistant.speech.tts import resolve_voice

    try:
        config = json.loads(resolve_voice(name).config.read_text(encoding="utf-8"))
        code = config.get("language", {}).get("code")
        if isinstance(code, str) and code:
            return [code]
    except (AssistantError, OSError, ValueError, AttributeError):
        pass
    found = re.match(r"[a-z]{2,3}_[A-Z]{2}", name)
    return [found.group()] if found else ["en"]


def build_info(settings: Settings) -> Info:
    """The `info` event's content (reads the voices' configs: call it off the event loop)."""
    from assistant.speech.tts import voice_choices

    version = _version()
    voices = [
        TtsVoice(name=name, attribution=ATTRIBUTION, installed=True, version=version,
                 description=label.partition(": ")[2] or name, languages=voice_language(name))
        for label, name in voice_choices(settings)
    ]  # fmt: skip
    whisper = settings.whisper_model or "tiny.en"
    return Info(
        asr=[
            AsrProgram(
                name=ASR_NAME, attribution=ATTRIBUTION, installed=True, version=version,
                description="The assistant's speech recognition (faster-whisper)",
                models=[AsrModel(name=whisper, attribution=ATTRIBUTION, installed=True,
                                 description=f"Whisper {whisper}", version=version,
                                 languages=stt_languages(settings))],
                supports_transcript_streaming=True,
            )
        ],
        tts=[
            TtsProgram(
                name=TTS_NAME, attribution=ATTRIBUTION, installed=True, version=version,
                description="The assistant's voices (Piper)", voices=voices,
                supports_synthesize_streaming=True,
            )
        ],
        handle=[
            HandleProgram(
                name=HANDLE_NAME, attribution=ATTRIBUTION, installed=True, version=version,
                description="The assistant: quick answers now, hard work as a background job",
                models=[HandleModel(name=HANDLE_NAME, attribution=ATTRIBUTION, installed=True,
                                    description="chat and deep lanes", version=version,
                                    languages=whisper_languages())],
                supports_handled_streaming=True,
                supports_home_control=False,
            )
        ],
    )  # fmt: skip
