"""The speech stages' interfaces, one Protocol each: what the turn pipeline, the listener and
the call need of speech-to-text and text-to-speech, whether the embedded models (`stt`, `tts`)
or a speech server (`remote`) provide it. Light on purpose: naming a stage loads no model."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import numpy as np

from assistant.records import AudioChunk, Transcript


class SpeechToText(Protocol):
    """Audio samples (16 kHz mono float32) in, text out."""

    def transcribe(self, samples: np.ndarray) -> Transcript: ...


class TextToSpeech(Protocol):
    """Text in, one mono int16 audio chunk per sentence out."""

    def synthesize(self, text: str) -> Iterator[AudioChunk]: ...


class TurnEndModel(Protocol):
    """The audio of a turn so far in, the probability that the person has finished out."""

    def probability(self, audio: np.ndarray) -> float: ...
