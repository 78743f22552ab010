"""The voice a login hears is chosen in one place (`session.voice`), for the page's replies,
a call's and a job's notice alike."""

from __future__ import annotations

import asyncio

from assistant.errors import AssistantError
from assistant.session.voice import chosen_voice


class Voices:
    """Speech models with the configured voice and `joe`; `broken`: none of them speaks."""

    def __init__(self, broken: bool = False):
        self.broken = broken

    async def tts(self, voice: str | None = None, rate: float = 1.0):
        if self.broken:
            raise AssistantError("the voice model could not be loaded")
        if voice not in (None, "joe"):
            raise AssistantError(f"no voice {voice}")
        return (voice or "default", rate)


def choose(prefs, broken=False, **kw):
    return asyncio.run(chosen_voice(Voices(broken), prefs, **kw))


def test_the_chosen_voice_at_the_chosen_rate():
    assert choose({"voice": "joe", "rate": 1.5}).tts == ("joe", 1.5)
    assert choose({}).tts == ("default", 1.0) and choose({}).warning is None


def test_speech_off_speaks_nothing_unless_the_page_says_with_its_turn():
    assert choose({"speak": False, "voice": "joe"}).tts is None  # a call, a notice
    assert choose({"speak": False}, honour_off=False).tts == ("default", 1.0)  # the page's box


def test_a_voice_that_is_gone_gives_way_to_the_default_and_says_so():
    chosen = choose({"voice": "amy", "rate": 0.8})
    assert chosen.tts == ("default", 0.8)
    assert chosen.warning and "'amy' is not available" in chosen.warning


def test_no_voice_that_speaks_is_text_only_with_why():
    chosen = choose({"voice": "joe"}, broken=True)
    assert chosen.tts is None and chosen.warning and chosen.warning.startswith("Speech is off")
