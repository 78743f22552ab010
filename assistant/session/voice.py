"""The voice a login hears, chosen in one place for every way the app speaks to them: a page's
reply, a call's, a job's notice said on the page; and how a login is heard outside a turn
(`heard`: the Gradio API's `/transcribe`), as its turns hear it.

The login's Voice settings (`Conversations.prefs`): the voice, its rate, speech on or off. A
chosen voice that is gone gives way to the configured one, with a warning to show; speech off,
or no voice that can speak: no voice, with why when it is a failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from assistant.errors import AssistantError

if TYPE_CHECKING:
    from assistant.records import Transcript
    from assistant.settings import Settings
    from assistant.speech.audio import AudioSource


class Voices(Protocol):
    async def tts(self, voice: str | None = None, rate: float = 1.0) -> Any: ...


@dataclass(frozen=True)
class Chosen:
    tts: Any | None
    """The voice at the login's rate; None: nothing is spoken."""
    warning: str | None = None
    """What the person should be told about it (a voice gone, speech failing)."""


async def chosen_voice(
    speech: Voices, prefs: Mapping[str, Any], *, honour_off: bool = True, owner: str | None = None
) -> Chosen:
    """`honour_off`: the saved "Speak replies" decides (a call, a notice); the page passes its
    box's value with each turn instead. `owner`: the voice speaks each sentence in that login's
    share of the speech pools (a page's reply, a call's), so one login's replies take turns
    with another's instead of holding the pool."""
    chosen = await _chosen(speech, prefs, honour_off)
    if owner is None or chosen.tts is None:
        return chosen
    from assistant.turns.voice import ForLogin

    return Chosen(ForLogin(chosen.tts, owner), chosen.warning)


async def heard(audio: AudioSource, stt: Any, settings: Settings, owner: str) -> Transcript:
    """Speech to text as a turn hears it: decoded within the upload limits, transcribed on the
    pool in `owner`'s share (no turn, no conversation: the pipeline is not built for it)."""
    from assistant.turns.voice import transcribe

    return await transcribe(audio, stt, settings, owner)


async def _chosen(speech: Voices, prefs: Mapping[str, Any], honour_off: bool) -> Chosen:
    if honour_off and not prefs.get("speak", True):
        return Chosen(None)
    voice, rate = prefs.get("voice"), float(prefs.get("rate", 1.0))
    warning = None
    if voice is not None:
        try:
            return Chosen(await speech.tts(voice, rate))
        except AssistantError as e:
            warning = f"The voice {voice!r} is not available ({e}); using the default voice."
    try:
        return Chosen(await speech.tts(None, rate), warning)
    except AssistantError as e:
        return Chosen(None, f"Speech is off: {e}")
