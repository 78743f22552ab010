"""Logins take turns at the engine (issue 49, item 2): one bound per login and lane, round
robin over logins, the deep cap shared with the other process, an inline deep answer's
deadline and its place among the login's jobs. Orders of events, not timings."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from assistant.engine.generation import Generation
from assistant.engine.lanes import DeepCount, LaneScheduler, login_share
from assistant.errors import Busy
from assistant.jobs import JobQueue
from assistant.records import TIMED_OUT
from assistant.store.db import Store
from tests.fakes import FakeEngine
from tests.test_jobs import _worker
from tests.waiting import until


async def _hold(sched: LaneScheduler, lane: str, owner: str, log: list, go: asyncio.Event):
    async with sched.admit(lane, owner):  # type: ignore[arg-type]
        log.append(owner)
        await go.wait()


def _held(sched: LaneScheduler, owner: str, lane: str = "chat") -> int:
    return sched.held[lane].get(owner, 0)  # type: ignore[index]


async def test_a_free_place_goes_to_the_login_that_waited_its_turn():
    # one slot; ann's four requests arrive before bob's one: bob's goes next, not fifth
    sched = LaneScheduler(deep_max_in_flight=1, slots=1)
    log: list[str] = []
    gates = {n: asyncio.Event() for n in range(6)}
    tasks = [asyncio.create_task(_hold(sched, "chat", "ann", log, gates[0]))]
    await until(lambda: log == ["ann"], 10, "ann's first to run")
    for n in range(1, 4):
        tasks.append(asyncio.create_task(_hold(sched, "chat", "ann", log, gates[n])))
    await until(lambda: sched.waiting["chat"] == 3, 10, "ann's others to wait")
    tasks.append(asyncio.create_task(_hold(sched, "chat", "bob", log, gates[4])))
    await until(lambda: sched.waiting["chat"] == 4, 10, "bob's to wait")
    gates[0].set()
    await until(lambda: len(log) == 2, 10, "the next to be admitted")
    assert log == ["ann", "bob"]
    for gate in gates.values():
        gate.set()
    await asyncio.gather(*tasks)
    assert log == ["ann", "bob", "ann", "ann", "ann"]
    assert list(sched.admitted)[:2] == [("chat", "ann"), ("chat", "bob")]


async def test_logins_alternate_while_both_have_requests_waiting():
    sched = LaneScheduler(deep_max_in_flight=1, slots=1)
    log: list[str] = []
    go = asyncio.Event()
    first = asyncio.create_task(_hold(sched, "chat", "ann", log, go))
    await until(lambda: log == ["ann"], 10, "the first to run")
    rest = [asyncio.create_task(_hold(sched, "chat", "ann", log, go)) for _ in range(3)]
    await until(lambda: sched.waiting["chat"] == 3, 10, "ann's to wait")
    rest += [asyncio.create_task(_hold(sched, "chat", "bob", log, go)) for _ in range(3)]
    await until(lambda: sched.waiting["chat"] == 6, 10, "bob's to wait")
    go.set()
    await asyncio.gather(first, *rest)
    assert log == ["ann", "bob", "ann", "bob", "ann", "bob", "ann"]


async def test_a_logins_share_holds_its_flood_in_the_app_and_not_another_login():
    # the engine's slots unknown (vLLM, the simulator): nothing else holds a chat turn back
    sched = LaneScheduler(deep_max_in_flight=2, share=2)
    log: list[str] = []
    go = asyncio.Event()
    anns = [asyncio.create_task(_hold(sched, "chat", "ann", log, go)) for _ in range(16)]
    await until(lambda: sched.waiting["chat"] == 14, 10, "ann's flood to wait past her share")
    assert _held(sched, "ann") == 2
    bobs = asyncio.create_task(_hold(sched, "chat", "bob", log, go))
    await until(lambda: "bob" in log, 10, "bob's turn")
    assert log == ["ann", "ann", "bob"]  # at once, beside two of ann's, not behind 16
    go.set()
    await asyncio.gather(*anns, bobs)
    assert log.count("ann") == 16 and not sched.held["chat"]


async def test_the_share_is_per_lane_a_persons_chat_never_waits_behind_their_deep():
    sched = LaneScheduler(deep_max_in_flight=4, share=1)
    log: list[str] = []
    go = asyncio.Event()
    deep = asyncio.create_task(_hold(sched, "deep", "ann", log, go))
    await until(lambda: _held(sched, "ann", "deep") == 1, 10, "ann's deep answer to run")
    async with sched.admit("chat", "ann"):
        assert _held(sched, "ann") == 1
    go.set()
    await deep


async def test_a_mirrored_chat_turn_is_outside_any_share():
    # the worker holds the app's chat turns as tickets of nobody's: none waits for a share
    sched = LaneScheduler(deep_max_in_flight=1, share=1)
    log: list[str] = []
    go = asyncio.Event()
    mirrored = [asyncio.create_task(_hold(sched, "chat", None, log, go)) for _ in range(3)]  # type: ignore[arg-type]
    await until(lambda: len(log) == 3, 10, "every mirrored turn to be admitted")
    go.set()
    await asyncio.gather(*mirrored)


async def test_the_deep_cap_counts_the_other_processs_deep_requests():
    sched = LaneScheduler(deep_max_in_flight=2)
    sched.peer = peer = DeepCount()
    peer.deep_running = 2  # the worker's two jobs at the engine
    log: list[str] = []
    go = asyncio.Event()
    inline = asyncio.create_task(_hold(sched, "deep", "ann", log, go))
    await until(lambda: sched.waiting["deep"] == 1, 10, "the inline deep answer to wait")
    assert sched.depth()["deep_running"] == 2 and not log
    peer.deep_running = 1  # a job ended
    await sched.recount()
    await until(lambda: log == ["ann"], 10, "the inline deep answer to be admitted")
    go.set()
    await inline


async def test_an_inline_deep_answer_that_cannot_get_the_lane_ends_at_its_deadline(settings):
    sched = LaneScheduler(deep_max_in_flight=1)
    sched.peer = peer = DeepCount()
    peer.deep_running = 1  # the deep lane stays full
    answer = Generation(None, sched, settings.deep, lambda _: [], owner="ann", deadline_s=0.2)  # type: ignore[arg-type]
    events = [ev async for ev in answer.events()]
    assert [(e.kind, e.finish_reason) for e in events] == [("finish", TIMED_OUT)]
    assert answer.reply.incomplete and answer.reply.finish_reason == TIMED_OUT
    assert sched.waiting["deep"] == 0 and not sched.queues["deep"]  # it left the queue


async def test_an_inline_deep_answer_counts_among_the_logins_jobs(settings):
    s = replace(settings, max_jobs_per_user=2)
    queue = JobQueue(Store(s.db_path), s)
    queue.submit("ann", "one")
    with queue.inline("ann"):
        with pytest.raises(Busy, match="max_jobs_per_user"):
            queue.submit("ann", "two")  # one job and one inline answer: her two
        with pytest.raises(Busy, match="max_jobs_per_user"), queue.inline("ann"):
            pass
        assert queue.submit("bob", "his own").owner == "bob"
    queue.submit("ann", "two")  # the inline answer ended: its place is free
    with pytest.raises(Busy, match="2 jobs"), queue.inline("ann"):
        pass


async def test_the_job_worker_leaves_the_places_the_apps_inline_deep_answers_hold(settings):
    # deep cap 2 and the app's inline deep answer at the engine (as the link reports it):
    # of two queued jobs the worker takes one, and the other once the answer has ended
    engine = FakeEngine(words=2000, token_s=0.01, slots=None)
    sched = LaneScheduler(deep_max_in_flight=2)
    sched.peer = app = DeepCount()
    app.deep_running = 1
    store = Store(settings.db_path)
    queue, worker = _worker(store, engine, settings, sched)
    jobs = [queue.submit("ann", f"a slow task {n}") for n in range(2)]
    serving = asyncio.create_task(worker.serve(poll_s=3600))  # a poll that never comes
    try:
        await until(lambda: engine.active, 10, "a job at the engine")
        # both were queued before its first claims: it took one place, not two
        assert len(worker.tasks) == 1
        assert sorted(store.job(j.id).state for j in jobs) == ["queued", "running"]
        app.deep_running = 0  # the inline answer ended (the link wakes the worker)
        queue.wake.set()
        await until(lambda: engine.active == 2, 10, "the second job at the engine")
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
        store.close()


def test_queued_jobs_are_claimed_a_login_at_a_time(settings):
    store = Store(settings.db_path)
    anns = [store.create_job("ann", f"ann {n}", 1000)[0] for n in range(3)]
    bobs = store.create_job("bob", "bob's one", 1000)[0]
    claimed = [store.claim_job("w", 30.0) for _ in range(4)]
    assert [j.id for j in claimed] == [anns[0].id, bobs.id, anns[1].id, anns[2].id]


def test_a_logins_share_is_the_setting_or_all_slots_but_one():
    assert login_share(3, None, 2) == 3 and login_share(3, 8, 1) == 3
    assert login_share(0, 8, 2) == 7 and login_share(0, 1, 2) == 1
    assert login_share(0, None, 3) == 2


def test_with_one_login_there_is_no_share_unless_one_is_set():
    # no auth (the machine's own user) or one login: nobody to be fair to
    assert login_share(0, 8, 0) is None and login_share(0, None, 1) is None
