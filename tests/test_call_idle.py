"""A quiet call's clock (`assistant.call.idle`): warned once per quiet spell, ended after the
idle time, and any word starts the spell again. A fake clock: no waiting."""

from __future__ import annotations

from assistant.call import idle
from assistant.call.idle import Quiet


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_minutes_of_quiet_are_warned_once_then_end_the_call():
    clock = Clock()
    quiet = Quiet(clock)
    clock.t = 539.0
    assert idle.verdict(quiet, 600.0) is None  # nine minutes of thinking: nothing said
    clock.t = 540.0
    assert idle.verdict(quiet, 600.0) == "warn"
    assert idle.warning(quiet, 600.0)["ends_in_s"] == 60
    quiet.warned = True
    assert idle.verdict(quiet, 600.0) is None  # told once
    clock.t = 600.0
    assert idle.verdict(quiet, 600.0) == "end"
    assert idle.ended(600.0) == "nothing said for 10 min; the call ends"


def test_words_start_the_quiet_spell_again_and_noise_does_not():
    clock = Clock()
    quiet = Quiet(clock)
    clock.t = 550.0
    quiet.warned = True
    quiet.saw({"kind": "speech", "utterance": 1})  # the voice detector on noise
    quiet.saw({"kind": "partial", "utterance": 1, "text": " ..."})
    assert quiet.seconds() == 550.0 and quiet.warned
    quiet.saw({"kind": "partial", "utterance": 1, "text": "well"})
    assert quiet.seconds() == 0.0 and not quiet.warned


def test_a_short_idle_time_is_warned_at_its_half():
    assert idle.warn_at(10.0) == 5.0 and idle.warn_at(600.0) == 540.0
