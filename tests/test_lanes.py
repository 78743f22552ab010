"""The lane scheduler's ordering, cap and preemption, deterministically."""

from __future__ import annotations

import asyncio

from assistant.engine.lanes import LaneScheduler
from tests.waiting import until


async def _hold(sched: LaneScheduler, lane: str, log: list, release: asyncio.Event) -> None:
    async with sched.admit(lane) as ticket:  # type: ignore[arg-type]
        log.append(lane)
        await release.wait()
        return ticket


async def test_deep_requests_in_flight_are_capped():
    sched = LaneScheduler(deep_max_in_flight=2)
    log: list[str] = []
    release = asyncio.Event()
    tasks = [asyncio.create_task(_hold(sched, "deep", log, release)) for _ in range(3)]
    await until(lambda: sched.waiting["deep"] == 1, 10, "the third request to wait")
    assert log == ["deep", "deep"]
    release.set()
    await asyncio.gather(*tasks)
    assert log == ["deep"] * 3


async def test_chat_is_admitted_before_waiting_deep():
    sched = LaneScheduler(deep_max_in_flight=1, slots=1)
    log: list[str] = []
    first, rest = asyncio.Event(), asyncio.Event()
    running = asyncio.create_task(_hold(sched, "deep", log, first))
    await until(lambda: log == ["deep"], 10, "the first deep request to run")
    deep2 = asyncio.create_task(_hold(sched, "deep", log, rest))
    await until(lambda: sched.waiting["deep"] == 1, 10, "the second deep request to wait")
    chat = asyncio.create_task(_hold(sched, "chat", log, rest))  # arrives after deep2
    await until(lambda: sched.waiting["chat"] == 1, 10, "the chat request to wait")
    first.set()
    await until(lambda: len(log) == 2, 10, "the next request to be admitted")
    rest.set()
    await asyncio.gather(running, deep2, chat)
    assert log == ["deep", "chat", "deep"]


async def test_chat_preempts_running_deep_on_a_one_slot_engine():
    sched = LaneScheduler(deep_max_in_flight=1, slots=1)
    admitted = asyncio.Event()
    tickets = []

    async def deep() -> None:
        async with sched.admit("deep") as t:
            tickets.append(t)
            admitted.set()
            await t.preempted.wait()  # the holder yields when asked

    d = asyncio.create_task(deep())
    await admitted.wait()
    async with sched.admit("chat") as chat_ticket:
        assert tickets[0].preempted.is_set()
        assert chat_ticket.queue_ms >= 0
    await d
    assert sched.stats["deep"].preemptions == 1


async def test_chat_waits_for_a_free_slot_without_preempting_when_slots_remain():
    sched = LaneScheduler(deep_max_in_flight=1, slots=2)
    log: list[str] = []
    release = asyncio.Event()
    d = asyncio.create_task(_hold(sched, "deep", log, release))
    await until(lambda: log == ["deep"], 10, "the deep request to run")
    async with sched.admit("chat"):
        log.append("chat-in")
    release.set()
    ticket = await d
    assert log == ["deep", "chat-in"]
    assert not ticket.preempted.is_set()


async def test_lanes_with_an_engine_each_wait_only_for_their_own_slot():
    """The embedded engine's layout: a process per lane, one slot each. Chat goes beside a
    running deep request without preempting it; a second chat turn waits for the first (a
    llama.cpp server given two requests cuts the first), and deep work behind waiting chat
    is not held back (they share no slot)."""
    sched = LaneScheduler(deep_max_in_flight=1, lane_slots={"chat": 1, "deep": 1})
    assert sched.slots is None
    log: list[str] = []
    deep_done, chat_done = asyncio.Event(), asyncio.Event()
    deep = asyncio.create_task(_hold(sched, "deep", log, deep_done))
    await until(lambda: log == ["deep"], 10, "the deep request to run")
    chat = asyncio.create_task(_hold(sched, "chat", log, chat_done))
    await until(lambda: log == ["deep", "chat"], 10, "chat beside the deep request")
    chat2 = asyncio.create_task(_hold(sched, "chat", log, chat_done))
    deep2 = asyncio.create_task(_hold(sched, "deep", log, deep_done))
    await until(lambda: sched.waiting == {"chat": 1, "deep": 1}, 10, "both to wait their lane")
    deep_done.set()  # the first deep request ends: the next deep one goes, chat still waiting
    await until(lambda: log.count("deep") == 2, 10, "the second deep request to run")
    assert sched.waiting["chat"] == 1
    chat_done.set()
    tickets = await asyncio.gather(deep, chat, chat2, deep2)
    assert not any(t.preempted.is_set() for t in tickets)
    assert sched.stats["deep"].preemptions == 0


async def test_scheduler_off_admits_everything_at_once():
    sched = LaneScheduler(deep_max_in_flight=1, slots=1, enabled=False)
    log: list[str] = []
    release = asyncio.Event()
    tasks = [asyncio.create_task(_hold(sched, "deep", log, release)) for _ in range(4)]
    await until(lambda: len(log) == 4, 10, "all four requests to be admitted at once")
    release.set()
    await asyncio.gather(*tasks)


async def test_queue_is_bounded():
    from assistant.errors import Busy

    sched = LaneScheduler(deep_max_in_flight=1, slots=1, max_waiting=2)
    release = asyncio.Event()
    log: list[str] = []
    tasks = [asyncio.create_task(_hold(sched, "deep", log, release)) for _ in range(3)]
    await until(lambda: sched.waiting["deep"] == 2, 10, "two requests to wait")
    try:
        async with sched.admit("deep"):
            raise AssertionError("a fourth request must be refused")
    except Busy as e:
        assert "waiting" in str(e)
    release.set()
    await asyncio.gather(*tasks)
