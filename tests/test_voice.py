"""The voice turn with the real Whisper and Piper models and the simulated engine over HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Iterator
from dataclasses import replace

import httpx
import numpy as np
import pytest

from assistant.records import HANDED_OFF, TIMING_KEYS, TurnEvent
from assistant.runtime import Runtime
from assistant.settings import Settings
from assistant.speech.audio import wav_bytes
from assistant.turns.pipeline import TurnRequest
from assistant.turns.voice import NOT_CAUGHT
from tests.conftest import AUDIO, sim_settings
from tests.simengine_proc import root_url, run_simengine, sim_requests, sim_reset

JFK = AUDIO / "jfk.flac"


HOLD_AT = 80
"""Tokens (24 of reasoning, then the answer) after which the engine waits for the test: the
first sentences are out by then, the rest of the 160 words are not."""


@pytest.fixture(scope="module")
def voice_sim() -> Iterator[str]:
    """A reply of many sentences that stops after HOLD_AT tokens until the test releases it
    (POST /sim/release), so whether speech started before the reply ended is decided by
    events, not by the speed of a busy machine."""
    with run_simengine(
        "--token-ms", "5", "--answer-words", "160", "--fault", f"hold:{HOLD_AT}"
    ) as url:  # fmt: skip
        yield url


@pytest.fixture(scope="module")
def speech(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, object]:
    from assistant.speech.stt import load_stt
    from assistant.speech.tts import load_tts

    s = Settings(data_dir=tmp_path_factory.mktemp("speech"))
    return load_stt(s), load_tts(s)


@pytest.fixture
def rt(voice_sim: str, settings: Settings) -> Iterator[Runtime]:
    # thinking on, so the reply comes with reasoning that must be shown but never spoken;
    # the engine's hold lasts as long as the first sentence takes to speak: no read deadline
    s = sim_settings(settings, voice_sim, thinking=True)
    with Runtime(replace(s, chat=replace(s.chat, read_timeout_s=120.0))) as runtime:
        yield runtime


def _voice(rt: Runtime, stt: object, tts: object, audio: object, **fields: object):
    """A spoken turn from `audio` (a path or bytes), answered aloud."""
    request = TurnRequest(audio=audio, speak=True, source="voice", **fields)  # type: ignore[arg-type]
    return rt.turns.stream(request, stt=stt, tts=tts)  # type: ignore[arg-type]


async def _collect(gen: object) -> list[TurnEvent]:
    async with contextlib.aclosing(gen) as updates:  # type: ignore[type-var]
        return [u async for u in updates]


async def test_jfk_is_heard_answered_and_spoken_early(rt, speech, voice_sim):
    stt, tts = speech
    cid = rt.store.new_conversation("local")
    seen: list[tuple[float, TurnEvent]] = []
    heard = asyncio.Event()

    async def release_on_first_audio() -> None:
        # a pipeline that speaks only after the whole reply never plays anything while the
        # engine holds: released after a long wait instead, the order check below fails
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(heard.wait(), 120)
        async with httpx.AsyncClient() as client:
            await client.post(root_url(voice_sim) + "/sim/release")

    releaser = asyncio.create_task(release_on_first_audio())
    turn = _voice(rt, stt, tts, JFK, conversation_id=cid)
    try:
        async with contextlib.aclosing(turn) as updates:
            async for u in updates:
                seen.append((time.monotonic(), u))
                if u.kind == "audio":
                    heard.set()
    finally:
        heard.set()
        await releaser
    kinds = [u.kind for _, u in seen]
    transcript = next(u for _, u in seen if u.kind == "transcript").text
    assert "fellow americans" in transcript.lower() and "country" in transcript.lower()
    assert kinds[-1] == "done"
    result = seen[-1][1].result
    assert result is not None and result.reply.startswith("You said") and not result.error
    audio = [u.audio for _, u in seen if u.kind == "audio"]
    assert len(audio) >= 3, "one chunk per sentence of a many-sentence reply"
    assert all(a is not None and a.sample_rate > 8000 and len(a.samples) > 1000 for a in audio)
    # pipelined: the first sentence is heard while the engine is still generating the rest
    # (it holds after HOLD_AT tokens until the first audio has come)
    first_audio = kinds.index("audio")
    last_content = len(kinds) - 1 - kinds[::-1].index("content")
    assert first_audio < last_content
    # reasoning is shown (streamed) but never spoken
    assert "reasoning" in kinds and "carefully" in result.reasoning
    spoken = " ".join(a.text for a in audio)
    assert "carefully" not in spoken and "You said" in spoken
    timings = result.timings.as_dict()
    pushed = set(TIMING_KEYS) - {"endpoint"}  # endpoint: hands-free turns only
    assert pushed <= set(timings), f"missing: {pushed - set(timings)}"
    assert timings["first_audio"] < timings["total"]
    assert timings["first_sentence"] <= timings["first_audio"]
    # the stored record has the speech timings that ended after the reply was stored
    stored = rt.store.recent_timings()[0]
    assert stored["source"] == "voice"
    assert stored["timings"]["tts_total"] == pytest.approx(timings["tts_total"], abs=0.2)
    assert stored["timings"]["total"] == pytest.approx(timings["total"], abs=0.2)


async def test_silence_is_not_sent_to_the_engine(rt, speech, voice_sim):
    stt, tts = speech
    sim_reset(voice_sim)
    silence = wav_bytes(np.zeros(16000 * 2, dtype=np.int16), 16000)
    updates = await _collect(_voice(rt, stt, tts, silence))
    assert updates[0].kind == "transcript" and updates[0].text == ""
    assert updates[-1].kind == "done" and updates[-1].text == NOT_CAUGHT
    assert any(u.kind == "audio" for u in updates), "the short answer is spoken"
    assert updates[-1].result.timings.stt is not None
    assert sim_requests(voice_sim) == []


async def test_a_hand_off_is_spoken_without_the_job_id(rt, speech):
    _, tts = speech
    cid = rt.store.new_conversation("local")
    request = TurnRequest(text="plan a trip", conversation_id=cid, speak=True, force_deep=True)
    turn = rt.turns.stream(request, tts=tts)
    updates = await _collect(turn)
    result = updates[-1].result
    assert result.job_id and result.job_id in result.reply
    spoken = [u.audio.text for u in updates if u.kind == "audio"]
    assert spoken and " ".join(spoken) == HANDED_OFF
    assert rt.store.job(result.job_id).state == "queued"


@pytest.mark.parametrize("data", [b"", b"this is not audio at all" * 10])
async def test_bad_audio_is_a_clear_message(rt, speech, data):
    stt, tts = speech
    updates = await _collect(_voice(rt, stt, tts, data))
    assert [u.kind for u in updates] == ["error"]
    assert re.search(r"empty|not an audio file", updates[0].text)


async def test_barge_in_cancels_generation_and_speech(speech, settings):
    stt, tts = speech
    # a reply that would take 30 s: the test only passes if cancelling really stops it
    with run_simengine("--token-ms", "60", "--answer-words", "500") as url:
        with Runtime(sim_settings(settings, url)) as rt:
            before = asyncio.all_tasks()
            got: list[TurnEvent] = []
            first_audio = asyncio.Event()

            async def consume() -> None:
                turn = _voice(rt, stt, tts, JFK)
                async with contextlib.aclosing(turn) as updates:
                    async for u in updates:
                        got.append(u)
                        if u.kind == "audio":
                            first_audio.set()

            consumer = asyncio.create_task(consume())
            await asyncio.wait_for(first_audio.wait(), 60)
            assert await _running(url) == 1
            consumer.cancel()
            with pytest.raises(asyncio.CancelledError):
                await consumer
            assert not any(u.kind == "done" for u in got)
            # the engine sees the client go away and frees the slot
            assert await _idle(url, 5), "the engine still generates"
            left = {t for t in asyncio.all_tasks() - before if not t.done()}
            left.discard(asyncio.current_task())
            assert not left, f"tasks still running: {left}"


async def test_every_cancel_stops_the_stream_at_once(settings):
    # Fast tokens make a cancel often race a chunk that has just arrived; on Python 3.11
    # such a cancel can be dropped (asyncio.wait_for), leaving the engine generating.
    with run_simengine("--token-ms", "1", "--answer-words", "5000") as url:
        with Runtime(sim_settings(settings, url)) as rt:
            for i in range(25):

                async def consume() -> None:
                    turn = rt.turns.stream(TurnRequest(text="hello"))
                    async with contextlib.aclosing(turn) as updates:
                        async for _ in updates:
                            pass

                task = asyncio.create_task(consume())
                await asyncio.sleep(0.2 + 0.013 * i)
                task.cancel()
                await asyncio.wait_for(asyncio.wait({task}), 5.0)  # generous: shared CI machines
                assert task.cancelled(), f"cancel {i} did not stop the turn"
            assert await _idle(url, 3), "the engine still generates"


async def _idle(url: str, limit_s: float) -> bool:
    """Whether the engine stops generating within `limit_s` (it notices a client leave)."""
    deadline = time.monotonic() + limit_s
    while await _running(url):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.1)
    return True


async def _running(url: str) -> int:
    async with httpx.AsyncClient() as client:
        text = (await client.get(root_url(url) + "/metrics")).text
    match = re.search(r"^vllm:num_requests_running\{[^}]*\} ([0-9.]+)$", text, re.M)
    assert match, text
    return int(float(match.group(1)))
