"""When a reply's audio ends on the page (`call.echo.Playout`): a deadline that moves as audio
is sent, one timer on the loop, an event; the end said once, nothing polled."""

from __future__ import annotations

import asyncio

from assistant.call.echo import Playout
from assistant.records import now_ms


async def test_more_audio_moves_the_end_and_the_page_report_brings_it_in():
    ends: list[float] = []
    playout = Playout(lambda: ends.append(now_ms()))
    assert not playout.playing()
    playout.until(now_ms() + 60_000)  # a reply's first audio sent
    playout.until(now_ms() + 120_000)  # more of it: later still
    assert playout.playing() and not ends
    playout.until(now_ms())  # the page: all of it has played
    assert not playout.playing() and playout.ended.is_set() and len(ends) == 1


async def test_the_end_comes_by_itself_once_the_audio_is_due_to_end():
    ended = asyncio.Event()
    playout = Playout(ended.set)
    playout.until(now_ms() + 20)
    assert playout.playing()
    async with asyncio.timeout(30):  # a bound, not a timing: the event is what is awaited
        await playout.ended.wait()
    assert ended.is_set() and not playout.playing()


async def test_a_moved_end_is_said_once_and_a_closed_call_says_none():
    ends: list[float] = []
    playout = Playout(lambda: ends.append(now_ms()))
    playout.until(now_ms() + 10)
    playout.until(now_ms() + 20)  # the first timer is gone, not left to fire
    async with asyncio.timeout(30):
        await playout.ended.wait()
    assert len(ends) == 1
    playout.until(now_ms() + 10)
    playout.cancel()  # the call closed
    assert playout._timer is None and len(ends) == 1
