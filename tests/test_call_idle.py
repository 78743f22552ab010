"""A quiet call's clock (`assistant.call.idle`): warned once per quiet spell, ended after the
idle time, and any word starts the spell again (a fake clock: no waiting). Its watch sleeps
until a deadline or the call's next change, never on a period (real time, under 2 s each)."""

from __future__ import annotations

import asyncio
import time

import pytest

from assistant.call import idle
from assistant.call.calls import Calls
from assistant.call.idle import Quiet
from assistant.web.edge.identity import LOGIN_LEFT
from assistant.web.edge.login_wall import LoginWall


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


class Waits(asyncio.Event):
    """The call's change event, counting the watch's waits on it (each wait ends in one wake)."""

    def __init__(self) -> None:
        super().__init__()
        self.waits = 0

    async def wait(self) -> bool:
        self.waits += 1
        return await super().wait()


class Watched:
    def __init__(self, state: str = "listening") -> None:
        self.state, self.turn, self.changed = state, None, Waits()


class Ends:
    """What the watch did to the call: told the page, ended it (with when)."""

    def __init__(self) -> None:
        self.told: list[dict] = []
        self.ended: list[tuple[str, int, float]] = []

    async def tell(self, message: dict) -> None:
        self.told.append(message)

    async def end(self, why: str, code: int) -> None:
        self.ended.append((why, code, time.monotonic()))


@pytest.fixture
def no_sleep(monkeypatch):
    """A watch that sleeps on a period (`asyncio.sleep`) fails the test."""

    async def sleep(*_args, **_kwargs):
        raise AssertionError("the watch slept on a period")

    monkeypatch.setattr(asyncio, "sleep", sleep)


def test_a_quiet_call_is_warned_then_ended_waking_only_at_its_deadlines(no_sleep):
    call, ends = Watched(), Ends()

    async def run() -> float:
        started = time.monotonic()
        await idle.watch(call, Quiet(), 1.0, ends.end, ends.tell)
        return started

    started = asyncio.run(run())
    ((why, code, at),) = ends.ended
    assert code == idle.IDLE_CODE and why == idle.ended(1.0)
    assert 1.0 <= at - started < 1.5, at - started
    assert [m["kind"] for m in ends.told] == ["idle"]
    # two waits: until the warning (at 0.5 s), then until the end; a poll would be many more
    assert call.changed.waits == 2


def test_an_expired_login_ends_the_call_at_its_expiry(no_sleep):
    call, ends = Watched(), Ends()
    quiet = Quiet()

    async def run() -> None:
        await idle.watch(call, quiet, 600.0, ends.end, ends.tell, expires=quiet.clock() + 0.3)

    started = time.monotonic()
    asyncio.run(run())
    ((why, code, at),) = ends.ended
    assert code == idle.LOGIN_CODE == 4401 and "expired" in why
    assert 0.3 <= at - started < 0.8 and ends.told == [] and call.changed.waits == 1


def test_a_busy_call_has_no_quiet_and_its_quiet_starts_when_the_answer_ends():
    call, ends = Watched("thinking"), Ends()
    quiet = Quiet()

    async def run() -> float:
        watching = asyncio.create_task(idle.watch(call, quiet, 0.4, ends.end, ends.tell))
        await asyncio.sleep(0.7)  # thinking longer than the idle time: nothing ends
        assert ends.ended == [] and ends.told == []
        assert quiet.seconds() == 0.0  # and no call quiet enough to give way for a new one
        assert call.changed.waits == 1  # waiting for the answer to end, not waking to look
        call.state = "listening"
        call.changed.set()  # the watch is told at once: the quiet starts now
        answered = time.monotonic()
        await watching
        return answered

    answered = asyncio.run(run())
    ((_, code, at),) = ends.ended
    assert code == idle.IDLE_CODE and 0.4 <= at - answered < 0.9, at - answered


def test_a_quiet_held_while_busy_starts_again_when_released():
    clock = Clock()
    quiet = Quiet(clock)
    clock.t = 100.0
    quiet.hold(True)
    clock.t = 700.0
    assert quiet.seconds() == 0.0 and idle.verdict(quiet, 600.0) is None
    quiet.hold(False)
    clock.t = 710.0
    assert quiet.seconds() == 10.0 and idle.due_in(quiet, 600.0) == 530.0


def test_the_login_wall_gives_a_socket_the_time_its_login_has_left():
    # a call ends when its login expires: the wall, which expires logins, tells it when
    clock = Clock()
    wall = LoginWall(max_age_s=3600.0, clock=clock)

    class Gradio:
        cookie_id, tokens = "c", {"tok": "ann"}

    def scope() -> dict:
        return {"type": "websocket", "path": "/listen", "app": Gradio()}

    headers = {"cookie": "access-token-c=tok"}
    first = scope()
    assert wall.login_of(first, headers) == "ann" and first[LOGIN_LEFT] == 3600.0
    clock.t = 3000.0
    later = scope()
    assert wall.login_of(later, headers) == "ann" and later[LOGIN_LEFT] == 600.0
    clock.t = 3601.0
    gone = scope()
    assert wall.login_of(gone, headers) is None and LOGIN_LEFT not in gone


def test_a_calls_turn_holds_its_quiet_and_the_turns_end_starts_it():
    # a real call answering a typed question: its quiet starts when the answer has ended (the
    # call's own change wakes the watch), not when the watch began or last looked
    from tests.test_session import Page, Turns, session

    ends = Ends()

    async def run() -> float:
        call = session(Turns(words=20), Page())  # an answer of a second
        watching = asyncio.create_task(idle.watch(call, Quiet(), 0.6, ends.end, ends.tell))
        asked = time.monotonic()
        await call.say("what time is it")
        while call.turn is not None or call.state != "listening":
            await asyncio.sleep(0.005)
        answered = time.monotonic()
        assert answered - asked > 0.6 and ends.ended == []  # longer than the idle time: not quiet
        async with asyncio.timeout(5):
            await watching
        return answered

    answered = asyncio.run(run())
    ((_, code, at),) = ends.ended
    assert code == idle.IDLE_CODE and 0.5 <= at - answered < 1.2, at - answered
