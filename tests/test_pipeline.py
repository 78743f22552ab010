"""The turn pipeline on fakes (engine, router, speech): the fast tier, seconds in all."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from dataclasses import replace

import numpy as np
import pytest

from assistant.engine.lanes import LaneScheduler
from assistant.jobs import JobQueue
from assistant.prompting.prompt import Prompts
from assistant.records import AudioChunk, RouteDecision, Transcript, TurnEvent, TurnResult
from assistant.speech.audio import wav_bytes
from assistant.store.db import Store
from assistant.turns.chat import ChatService
from assistant.turns.pipeline import Pipeline, TurnRequest
from assistant.turns.voice import NOT_CAUGHT
from tests.fakes import FakeEngine

SPEECH = wav_bytes((np.sin(np.arange(16000) / 5) * 8000).astype(np.int16), 16000)


class Router:
    def decide(
        self, text: str, *, explicit: bool = False, conversation: object = None
    ) -> RouteDecision:
        return RouteDecision("deep" if explicit else "chat", "stub", 0.0, text)


class STT:
    def __init__(self, text: str = "what is the weather"):
        self.text = text
        self.threads: list[str] = []

    def transcribe(self, samples: object) -> Transcript:
        self.threads.append(threading.current_thread().name)
        return Transcript(self.text, "en", 1.0, 1.0)


class TTS:
    """Takes 20 ms a sentence, like a (very fast) Piper."""

    def __init__(self, fail: bool = False):
        self.fail = fail
        self.said: list[str] = []
        self.threads: list[str] = []

    def synthesize(self, text: str) -> list[AudioChunk]:
        if self.fail:
            raise RuntimeError("no voice")
        time.sleep(0.02)
        self.said.append(text)
        self.threads.append(threading.current_thread().name)
        return [AudioChunk(22050, b"\0\0" * 220, text)]


class Sentences(FakeEngine):
    """Words grouped in sentences, so there is something to speak early. With `until`, the
    answer stops after its first sentence until that event is set (the test sets it when the
    first audio arrives), so "speech starts before the answer ends" is decided by the order
    of events, not by how fast a busy machine runs the speech thread."""

    def __init__(self, *args, until: asyncio.Event | None = None, **kw):
        super().__init__(*args, **kw)
        self.until = until

    async def stream(self, messages, lane, **kw):  # type: ignore[override]
        async with contextlib.aclosing(super().stream(messages, lane, **kw)) as events:
            async for ev in events:
                if ev.kind == "content":
                    n = int(ev.text.strip()[1:])
                    yield replace(ev, text=ev.text.strip() + (". " if n % 5 == 4 else " "))
                    if n == 4 and self.until is not None:
                        # a pipeline that speaks only after the answer never sets it: then
                        # the answer goes on after the wait, and the order check fails
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(self.until.wait(), 30)
                else:
                    yield ev


def _pipeline(settings, engine=None, observed=None):
    store = Store(settings.db_path)
    chat = ChatService(
        settings=settings,
        engine=engine or Sentences(words=20, token_s=0.01),
        scheduler=LaneScheduler(deep_max_in_flight=1, slots=1),
        router=Router(),
        store=store,
        prompts=Prompts.load(),
        jobs=JobQueue(store, settings),
    )
    observe = observed.append if observed is not None else None
    return Pipeline(chat, settings, log_to=store, observe=observe), store


async def _events(stream) -> list[TurnEvent]:
    async with contextlib.aclosing(stream) as events:
        return [e async for e in events]


async def test_a_typed_turn_is_stored_and_reported_once_with_its_timings(settings):
    observed: list[TurnResult] = []
    pipeline, store = _pipeline(settings, observed=observed)
    cid = store.new_conversation("ann")
    events = await _events(pipeline.stream(TurnRequest(text="hello", conversation_id=cid)))
    kinds = [e.kind for e in events]
    assert kinds[0] == "route" and kinds[-1] == "done" and kinds.count("content") == 20
    result = events[-1].result
    assert {"route", "queue", "ttft", "llm_total", "total"} <= set(result.timings.as_dict())
    assert observed == [result] and result.turn_id is not None
    ((_, stored),) = store.turns(cid)
    assert stored.timings.as_dict() == result.timings.as_dict()


async def test_speech_starts_while_the_answer_is_still_generated(settings):
    heard = asyncio.Event()
    pipeline, store = _pipeline(settings, engine=Sentences(words=20, token_s=0.01, until=heard))
    cid = store.new_conversation("ann")
    tts = TTS()
    request = TurnRequest(text="hello", conversation_id=cid, speak=True)
    events: list[TurnEvent] = []
    async with contextlib.aclosing(pipeline.stream(request, tts=tts)) as stream:
        async for e in stream:
            events.append(e)
            if e.kind == "audio":
                heard.set()
    kinds = [e.kind for e in events]
    first_audio = kinds.index("audio")
    last_content = len(kinds) - 1 - kinds[::-1].index("content")
    assert first_audio < last_content, "the first sentence is spoken before the answer ends"
    assert kinds[-1] == "done" and kinds.count("audio") == 4 and len(tts.said) == 4
    assert all(name.startswith("tts") for name in tts.threads)  # on the bounded TTS pool
    timings = events[-1].result.timings
    assert timings.first_sentence <= timings.first_audio <= timings.total
    assert timings.tts_total >= 4 * 20 and timings.tts_first_audio >= 20
    # stored once, at the end: with the speech timings, not patched in afterwards
    ((_, stored),) = store.turns(cid)
    assert stored.timings.as_dict() == timings.as_dict()


async def test_a_spoken_request_is_heard_first(settings):
    pipeline, store = _pipeline(settings)
    cid = store.new_conversation("ann")
    request = TurnRequest(audio=SPEECH, conversation_id=cid, speak=True, source="voice")
    stt = STT()
    events = await _events(pipeline.stream(request, stt=stt, tts=TTS()))
    assert events[0].kind == "transcript" and events[0].text == "what is the weather"
    assert [name[:3] for name in stt.threads] == ["stt"]  # on the bounded STT pool
    assert events[-1].result.timings.stt is not None
    ((user, _),) = store.turns(cid)
    assert user == "what is the weather"


async def test_silence_gets_a_spoken_answer_without_the_engine_and_is_not_kept(settings):
    engine = Sentences(words=20, token_s=0.01)
    pipeline, store = _pipeline(settings, engine)
    cid = store.new_conversation("ann")
    tts = TTS()
    request = TurnRequest(audio=SPEECH, conversation_id=cid, speak=True, source="voice")
    events = await _events(pipeline.stream(request, stt=STT(""), tts=tts))
    assert events[-1].result.reply == NOT_CAUGHT and tts.said == [NOT_CAUGHT]
    assert engine.requests == [] and store.turns(cid) == []


async def test_failing_speech_does_not_lose_the_answer(settings):
    pipeline, _ = _pipeline(settings)
    events = await _events(pipeline.stream(TurnRequest(text="hi", speak=True), tts=TTS(True)))
    assert any(e.kind == "error" and "speech failed" in e.text for e in events)
    assert events[-1].kind == "done" and events[-1].result.reply.count(".") == 4


async def test_closing_the_stream_stops_generation_and_speech(settings):
    engine = Sentences(words=5000, token_s=0.005)
    pipeline, _ = _pipeline(settings, engine)
    before = asyncio.all_tasks()
    stream = pipeline.stream(TurnRequest(text="hi", speak=True), tts=TTS())
    async for event in stream:
        if event.kind == "audio":
            break  # barge-in: the consumer stops listening
    await stream.aclose()
    assert engine.active == 0, "the engine request is closed"
    left = {t for t in asyncio.all_tasks() - before if not t.done()}
    assert not left, f"tasks still running: {left}"


async def test_a_stopped_turn_is_kept_with_what_had_arrived(settings):
    # Stop, barge-in or switching conversation closes the stream: the request and the part
    # of the answer that arrived stay in the conversation, marked as stopped
    engine = Sentences(words=5000, token_s=0.005)
    pipeline, store = _pipeline(settings, engine)
    cid = store.new_conversation("ann")
    stream = pipeline.stream(TurnRequest(text="tell me a long story", conversation_id=cid))
    words = 0
    async for event in stream:
        words += event.kind == "content"
        if words == 10:
            break
    await stream.aclose()
    ((user, stored),) = store.turns(cid)
    assert user == "tell me a long story" and stored.reply.startswith("w0 w1")
    assert stored.incomplete and stored.error and "stopped" in stored.error
    assert stored.finish_reason == "interrupted" and stored.lane == "chat"


async def test_a_call_turn_stopped_before_its_stream_began_is_kept(settings):
    # a call's committed turn whose task was cancelled before its first step (a backlog heard
    # at once on a busy machine) never ran the stream: what was said is stored all the same
    pipeline, store = _pipeline(settings, Sentences(words=5))
    cid = store.new_conversation("ann")
    ask = TurnRequest(text="what time is it", conversation_id=cid, owner="ann", source="voice")
    pipeline.stopped_before_start(ask)
    pipeline.stopped_before_start(replace(ask, text="  "))  # nothing said: nothing stored
    ((user, stored),) = store.turns(cid)
    assert user == "what time is it" and stored.reply == ""
    assert stored.incomplete and "stopped" in (stored.error or "")
    assert stored.reason == "stopped before it was routed" and stored.lane == "chat"


@pytest.mark.parametrize("stop_at", ["waiting", "audio"])
async def test_a_hand_off_stopped_at_any_moment_stays_linked_to_its_job(settings, stop_at):
    # issue 48 item 4: Stop while the hand-off is said kept a deep turn with no job id, and
    # the conversation lost the job that ran on to done
    pipeline, store = _pipeline(settings)
    cid = store.new_conversation("ann")
    request = TurnRequest(
        text="plan a trip", owner="ann", conversation_id=cid, speak=True, force_deep=True
    )
    stream = pipeline.stream(request, tts=TTS())
    async for event in stream:
        assert event.kind != "done"
        if event.kind == stop_at:
            break
    await stream.aclose()
    ((user, stored),) = store.turns(cid)
    assert user == "plan a trip" and stored.lane == "deep" and "stopped" in stored.error
    job = store.job(stored.job_id or "")
    assert job is not None and job.state == "queued"
    assert store.conversation_job(cid).id == job.id
    # the job runs on; its result reaches the conversation as when the hand-off was heard
    claimed = store.claim_job("w", 60.0, job_id=job.id)
    assert claimed is not None
    store.finish_job(job.id, "w", "done", result="# Trip plan\n\nDay one: Lisbon.")
    assert "Trip plan" in pipeline.chat.jobs_note("ann", cid)
    assert [j.id for j in pipeline.chat.jobs.take_ended("ann")] == [job.id]
