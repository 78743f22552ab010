"""A quiet call's clock (`assistant.call.idle`): warned once per quiet spell, ended after the
idle time, and any word starts the spell again. A fake clock: no waiting."""

from __future__ import annotations

import asyncio

from assistant.call import idle
from assistant.call.calls import Calls
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


class Session:
    def __init__(self, owner: str) -> None:
        self.owner = owner


def test_a_quiet_call_gives_its_place_only_when_that_lets_the_new_one_in():
    # ann and bob have the two places; ann's call has been quiet for ten minutes
    clock = Clock()
    calls = Calls(per_login=1, total=2)
    ended: list[tuple[str, str, int]] = []

    def call_of(owner: str) -> Quiet:
        assert calls.admit(owner) is None
        quiet = Quiet(clock)

        async def end(why: str, code: int) -> None:
            ended.append((owner, why, code))
            calls.leave(owner)  # its socket's handler counts it out

        calls.join(Session(owner), quiet, end)  # type: ignore[arg-type]
        return quiet

    call_of("ann")
    clock.t = 600.0
    call_of("bob")
    # bob's second call: over his own share, so ann's place would not help: nobody is ended
    assert asyncio.run(calls.enter("bob"))  # refused
    assert ended == []
    # cy's call: ann's, quiet the longest, gives its place and is told why
    assert asyncio.run(calls.enter("cy")) is None
    ((owner, why, code),) = ended
    assert owner == "ann" and "quiet for 600 s" in why and code == idle.YIELDED_CODE
    assert calls.open == {"bob": 1, "cy": 1}
