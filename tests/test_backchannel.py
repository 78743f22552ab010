"""Backchannels keep the floor (issue 51, item 4), on real recordings: the app's own Piper voice
says an acknowledgement or something else over a reply in a call, and the real listener (Silero,
Whisper tiny.en) hears it. "Right", "yeah", "okay", "I see", "uh-huh", "got it": the reply goes
on, no turn is started or stored, the page is not told to stop. "Wait", "stop", "no", a
question, more words: the reply stops and what was said is the next turn.

What the app hears is asserted too. The voice cannot hum: what the listener hears of its
"Mm-hmm" depends on where the pass cuts it ("MMM.", "And then mom.", "in a month."), so it is
in neither list, nor is its "Uh huh" (heard "Uh-huh." or "I have."); "Ah ha" is how it says
"uh-huh" (tiny.en writes "Uh-huh."). A synthetic hum is heard as nothing at all (Silero marks
none of it voiced).

Each recording is fed as fast as the listener's passes land (each 100 ms frame once the passes
it started are done; the listener counts the audio's own clock, so the pauses are the
recording's), the same recording on every run (the voice's noise off), with no turn-end model
(the pause ends the turn; the choice is made at "speech", before it): eleven recordings at
real time would take 30 s. About 1 s a case: two or three short transcriptions each, the
models loaded once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import numpy as np
import pytest
from piper import SynthesisConfig

from assistant.call.hearing import Heard
from assistant.call.listener import Listener
from assistant.records import now_ms
from assistant.settings import Settings
from assistant.speech.stt import load_stt
from assistant.speech.tts import PiperTTS, load_local_tts
from tests.test_session import Page, Turns, session

# (what the voice is given, its speed, what tiny.en hears: the words the test expects)
KEEP_THE_FLOOR = [
    ("Right.", 0.7, "right"),
    ("Yeah.", 0.8, "yeah"),
    ("Okay.", 1.0, "okay"),
    ("I see.", 0.8, "i see"),
    ("Ah ha.", 1.0, "uh-huh"),
    ("Got it.", 1.0, "got it"),
]
STOP_IT = [
    ("Wait.", 1.0, "wait"),
    ("Stop.", 1.0, "stop"),
    ("No.", 1.0, "no"),
    ("What do you mean?", 1.0, "what do you mean"),
    ("Yeah, tell me more about that.", 1.0, "tell me more"),
]


@pytest.fixture(scope="module")
def models():
    settings = Settings()
    # the voice's own noise off: VITS samples it afresh at every synthesis, and about one
    # "Got it." in twelve came out as a sound tiny.en hears as "That it." (a flake of CI's);
    # without it every run hears the same recording, on every CPU (checked: AVX2, AVX, none)
    voice = load_local_tts(settings).voice
    steady = PiperTTS(voice, config=SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0))
    return load_stt(settings), steady


def recording(tts, text: str, rate: float) -> bytes:
    """`text` in the app's voice at `rate`, as the page sends it: 16 kHz int16, 0.3 s of
    silence before and 2 s after (past the turn-end fallback)."""
    chunks = list(tts.at_rate(rate).synthesize(text))
    x = np.frombuffer(b"".join(bytes(c.samples) for c in chunks), "<i2").astype(np.float32)
    rate_in = chunks[0].sample_rate
    x16 = np.interp(np.linspace(0, len(x) - 1, int(len(x) * 16000 / rate_in)), np.arange(len(x)), x)
    audio = np.concatenate([np.zeros(4800), x16, np.zeros(32000)])
    return np.clip(audio, -32768, 32767).astype("<i2").tobytes()


async def until(cond: Callable[[], bool], what: str) -> None:
    """Wait for `cond` (a task of the call's to get there), bounded."""
    async with asyncio.timeout(20):
        while not cond():
            await asyncio.sleep(0.01)
    assert cond(), what


def over_a_reply(models, pcm: bytes):
    """A call answering "tell me a story" with 30 s of speech; `pcm` said over it. What the
    pipeline started and stored, what the page was told, what the listener said."""
    stt, _ = models

    async def run():
        turns, page = Turns(words=30, word_s=0.0, audio_every=1), Page()
        listener = Listener(stt)
        s = session(turns, page, listener=listener)
        heard: list[Heard] = []
        try:
            await s.say("tell me a story")
            await until(lambda: bool(page.audio), "the reply is playing")
            reply, told = s.turn, len(page.said)
            for i in range(0, len(pcm), 3200):  # the page's 100 ms frames
                got = await listener.feed(pcm[i : i + 3200], now_ms())
                # each pass lands before the next frame, as on a machine that keeps up: fed
                # faster than that, which part of a short word a pass read depended on the
                # load ("Got it." heard as "at it.", or as the reply's echo, on a busy CI)
                got += await listener.settle()
                for h in got:
                    heard.append(h)
                    await s.hear(h)
            while listener._tasks:  # the transcriptions and the turn-end model land
                for h in await listener.settle():
                    heard.append(h)
                    await s.hear(h)
            if s.turn is not reply:  # a barge-in: the next turn reaches the pipeline
                await until(lambda: len(turns.started) == 2, "the next turn started")
            still = s.turn is reply and reply is not None and not reply.task.done()
            # before the call closes (which stops the reply, kept as heard)
            return turns.started[:], turns.stored[:], page.said[told:], heard, still
        finally:
            await s.close()
            await listener.close()

    return asyncio.run(run())


@pytest.mark.parametrize(("text", "rate", "heard_as"), KEEP_THE_FLOOR)
def test_an_acknowledgement_over_the_reply_keeps_the_floor(models, text, rate, heard_as):
    started, stored, told, heard, still = over_a_reply(models, recording(models[1], text, rate))
    said = [h.text for h in heard if h.kind == "final"]
    assert [heard_as in t.lower() for t in said] == [True], heard  # what the app heard
    assert still, told  # the reply goes on
    assert started == ["tell me a story"] and stored == []  # no turn, nothing stored
    assert not [m for m in told if m["kind"] in ("barge", "speech", "turn", "partial")], told


@pytest.mark.parametrize(("text", "rate", "heard_as"), STOP_IT)
def test_anything_else_over_the_reply_stops_it_and_is_the_next_turn(models, text, rate, heard_as):
    started, stored, told, heard, still = over_a_reply(models, recording(models[1], text, rate))
    assert not still, heard
    assert stored == [("tell me a story", "stopped")]  # kept as far as it was heard
    assert "barge" in [m["kind"] for m in told]
    assert heard_as in started[1].lower(), (started, heard)
