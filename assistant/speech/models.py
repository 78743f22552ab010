"""The embedded speech models of one app, loaded once on first use in a thread (or at start, by
`warm`), shared by the page, the call's `/listen`, `/v1/audio` and job notices. No web code:
the call's path loads no Gradio."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from assistant.errors import AssistantError
from assistant.settings import Settings

log = logging.getLogger(__name__)


class SpeechModels:
    """STT and TTS, loaded once on first use in a thread; a missing model is a message."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.loading: str | None = "Loading the speech models (Whisper, Piper, turn end)"
        """What is still loading, for the page's banner; None once ready."""

    async def stt(self) -> Any:
        from assistant.speech.stt import load_stt

        return await asyncio.to_thread(load_stt, self.settings)

    async def tts(self, voice: str | None = None, rate: float = 1.0) -> Any:
        """The voice `voice` (default: the configured one) at speaking rate `rate`."""
        from assistant.speech.tts import load_tts

        loaded = await asyncio.to_thread(load_tts, self.settings, voice)
        return loaded.at_rate(rate)

    async def turn_end(self) -> Any:
        """The turn-end model (Smart Turn), loaded and warmed once."""
        from assistant.speech.turn_end import load_turn_end

        return await asyncio.to_thread(load_turn_end)

    async def vad(self) -> Any:
        """Silero VAD's session for a call's listener, loaded in a thread: its first load
        imports faster-whisper (with remote speech, nothing else has), which would hold up the
        event loop and every call on it."""
        from assistant.speech.vad import vad_session

        return await asyncio.to_thread(vad_session)

    async def warm(self) -> None:
        """Load them all at start so the first voice turn does not pay for it."""
        loads = (("Whisper", self.stt), ("Piper", self.tts), ("turn end", self.turn_end),
                 ("voice activity", self.vad))  # fmt: skip
        for name, load in loads:
            self.loading = f"Loading the speech model ({name})"
            try:
                await load()
            except AssistantError as e:
                log.warning("speech model not available: %s", e)
        self.loading = None
