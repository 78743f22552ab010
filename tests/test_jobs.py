"""Delegated jobs: stored before the engine call, progress, preemption, budget, cancel."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from assistant.engine.lanes import LaneScheduler
from assistant.jobs import JobQueue, JobWorker
from assistant.prompting.prompt import Prompts
from assistant.records import Message
from assistant.store.db import Store
from tests.conftest import sim_engine, sim_settings
from tests.fakes import FakeEngine
from tests.simengine_proc import sim_requests
from tests.waiting import until


def _worker(store, engine, settings, scheduler=None) -> tuple[JobQueue, JobWorker]:
    queue = JobQueue(store, settings)
    scheduler = scheduler or LaneScheduler(deep_max_in_flight=1, slots=engine.slots)
    worker = JobWorker(
        store=store,
        engine=engine,
        scheduler=scheduler,
        prompts=Prompts.load(),
        queue=queue,
        settings=settings,
    )
    return queue, worker


async def test_job_runs_on_the_deep_lane_led_by_delegate_prompt(sim_url, settings):
    s = sim_settings(settings, sim_url)
    store = Store(s.db_path)
    queue, worker = _worker(store, sim_engine(sim_url), s)
    job = queue.submit("ann", "Compare three sorting algorithms in depth", key="k")
    assert store.job(job.id).state == "queued"  # stored before any engine call
    done = await worker.run_by_id(job.id)
    assert done.state == "done" and "You said" in done.result
    assert done.reasoning_tokens > 0 and done.answer_tokens > 0 and done.elapsed_s > 0
    body = sim_requests(sim_url)[-1]["body"]
    assert body["messages"][0]["content"] == Prompts.load().delegate
    assert "edit in place" in body["messages"][0]["content"].lower()
    assert body["priority"] == 10 and body["chat_template_kwargs"]["enable_thinking"] is True
    assert queue.submit("ann", "Compare three sorting algorithms in depth", key="k").id == job.id


async def test_the_next_queued_job_starts_when_one_ends_not_at_the_next_poll(sim_url, settings):
    s = sim_settings(settings, sim_url)
    store = Store(s.db_path)
    queue, worker = _worker(store, sim_engine(sim_url), s)  # one deep request at a time
    jobs = [queue.submit("ann", f"Summarize chapter {i}") for i in range(3)]
    serving = asyncio.create_task(worker.serve(poll_s=3600))  # a poll that never comes
    try:
        await until(
            lambda: all(store.job(j.id).state == "done" for j in jobs), 60, "all three jobs"
        )
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
        store.close()


async def test_budget_exhausted_fails_keeps_reasoning_and_offers_retry(sim_url, settings):
    s = sim_settings(settings, sim_url)
    store = Store(s.db_path)
    queue, worker = _worker(store, sim_engine(sim_url, fault="reasoning_only"), s)
    job = queue.submit("ann", "prove it", budget=8192)
    failed = await worker.run_by_id(job.id)
    assert failed.state == "failed" and "budget exhausted" in failed.error
    assert failed.reasoning and not failed.result.strip()
    retried = queue.retry(job.id, "ann")
    assert retried.state == "queued" and retried.budget == 16384


async def test_a_job_whose_answer_is_all_reasoning_fails_and_keeps_it(sim_url, settings):
    s = sim_settings(settings, sim_url)
    store = Store(s.db_path)
    queue, worker = _worker(store, sim_engine(sim_url, fault="reasoning_stop"), s)
    job = queue.submit("ann", "prove it", budget=8192)
    failed = await worker.run_by_id(job.id)
    assert failed.state == "failed" and failed.error.startswith("no answer")
    assert "all reasoning" in failed.error and failed.reasoning and not failed.result


async def test_chat_preempts_a_running_job_which_resumes_without_losing_work(settings):
    engine = FakeEngine(words=40, token_s=0.01, slots=1)
    store = Store(settings.db_path)
    sched = LaneScheduler(deep_max_in_flight=1, slots=1)
    queue, worker = _worker(store, engine, settings, sched)
    serving = asyncio.create_task(worker.serve(poll_s=0.05))
    job = queue.submit("ann", "a long task")
    await until(lambda: engine.active, 10, "the job to reach the engine")
    await until(lambda: engine.tokens > 5, 10, "some words to be generated")
    async with sched.admit("chat"):
        chat_events = [ev async for ev in engine.stream([Message("user", "hi")], settings.chat)]
    await until(lambda: store.job(job.id).state == "done", 10, "the job to finish")
    serving.cancel()
    await asyncio.gather(serving, return_exceptions=True)
    final = store.job(job.id)
    assert chat_events[-1].finish_reason == "stop"
    assert final.state == "done"
    assert final.result.split() == [f"w{i}" for i in range(40)]  # nothing lost, nothing twice
    lanes = [lane for lane, _ in engine.requests]
    assert lanes[:3] == ["deep", "chat", "deep"]
    resumed = engine.requests[2][1]
    assert resumed[-2].role == "assistant" and resumed[-2].content.startswith("w0 ")
    assert engine.max_active == 1  # the one-slot engine never had two requests at once
    assert sched.stats["deep"].preemptions == 1


async def test_cancel_stops_a_running_job(settings):
    engine = FakeEngine(words=10_000, token_s=0.01, slots=1)
    store = Store(settings.db_path)
    queue, worker = _worker(store, engine, settings)
    job = queue.submit("ann", "endless")
    run = asyncio.create_task(worker.run_by_id(job.id))
    await until(lambda: engine.active, 10, "the job to reach the engine")
    assert queue.cancel(job.id, "ann")
    final = await asyncio.wait_for(run, timeout=10)
    assert final.state == "cancelled"
    assert engine.active == 0  # the engine stream was closed


async def test_stream_cut_by_the_engine_is_preemption_not_failure(settings):
    # like the embedded llama.cpp server, which cuts a running stream when a request arrives
    engine = FakeEngine(words=30, token_s=0.001, slots=1, cut_first_at=7)
    store = Store(settings.db_path)
    queue, worker = _worker(store, engine, settings)
    job = queue.submit("ann", "task")
    final = await worker.run_by_id(job.id)
    assert final.state == "done"
    assert final.result.split() == [f"w{i}" for i in range(30)]
    assert len(engine.requests) == 2


async def test_per_user_job_limit_has_a_clear_message(settings):
    import pytest

    from assistant.errors import Busy

    s = replace(settings, max_jobs_per_user=2)
    queue = JobQueue(Store(s.db_path), s)
    queue.submit("ann", "one")
    queue.submit("ann", "two")
    with pytest.raises(Busy, match="2 jobs"):
        queue.submit("ann", "three")
    assert queue.submit("bob", "his own").owner == "bob"
    # Retry brings a job back into the queue: it counts against the same limit
    third = queue.submit("bob", "and a second")
    queue.cancel(third.id)
    queue.submit("bob", "a third, in its place")
    with pytest.raises(Busy, match="2 jobs"):
        queue.retry(third.id, "bob")
    assert queue.store.job(third.id).state == "cancelled"


async def test_stopping_the_worker_as_a_job_ends_stops_it(settings):
    """A cancel that lands as the queue is woken (a job just ended) stops the worker. With
    `asyncio.wait_for` on Python 3.11 the wake won and the cancel was swallowed: the worker
    polled forever and the app's shutdown (and a CI run) hung."""
    store = Store(settings.db_path)
    _, worker = _worker(store, FakeEngine(), settings)
    serving = asyncio.create_task(worker.serve(poll_s=3600))
    try:
        # the worker waits on the queue (asyncio.Event keeps its waiters in `_waiters`)
        await until(lambda: worker.queue.wake._waiters, 5, "the worker to wait on the queue")
        worker.queue.wake.set()  # a job ended ...
        serving.cancel()  # ... in the same moment as the stop
        done, _ = await asyncio.wait({serving}, timeout=5)
        assert serving in done and serving.cancelled()
    finally:
        serving.cancel()
        store.close()
