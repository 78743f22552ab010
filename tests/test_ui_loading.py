"""The page says while the speech models load, and stops saying it once they are ready."""

from __future__ import annotations

from assistant.runtime import EngineInfo
from assistant.speech.models import SpeechModels
from assistant.web.page.page import EngineStatus


async def test_banner_shows_speech_model_loading_until_warm(settings):
    speech = SpeechModels(settings)
    status = EngineStatus(
        EngineInfo(True, "vllm", "m"),
        settings,
        base_url="http://x/v1",
        warnings=["the engine rejected request priority"],
        speech=speech,
    )
    first = await status.banner()
    assert "Loading the speech model" in first
    assert "rejected request priority" in first  # the engine's warnings are shown too
    await speech.warm()
    assert speech.loading is None
    assert "Loading" not in await status.banner()
