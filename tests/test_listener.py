"""The hands-free listener on real recordings, with the real Silero VAD and Whisper tiny.en.

Audio is fed in chunks, faster than real time (the listener measures the pause on the audio
timeline, so the figures it reports do not depend on the feeding pace)."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import random
import threading
import time
from dataclasses import replace

import numpy as np
import pytest
import soundfile as sf

from assistant.call.echo import is_echo
from assistant.call.hearing import MERGE_PAST_FALLBACK_MS, ListenConfig
from assistant.call.listener import Listener
from assistant.records import now_ms
from assistant.settings import Settings
from assistant.speech.stt import load_stt
from assistant.speech.tts import load_tts
from assistant.speech.turn_end import load_turn_end
from tests.conftest import AUDIO

RATE = 16000


@pytest.fixture(scope="module")
def stt():
    return load_stt(Settings())


def resample(x: np.ndarray, rate: int) -> np.ndarray:
    n = int(len(x) * RATE / rate)
    return np.interp(np.linspace(0, len(x) - 1, n), np.arange(len(x)), x).astype(np.float32)


def load(path) -> np.ndarray:
    data, rate = sf.read(str(path), dtype="float32", always_2d=True)
    return resample(data.mean(axis=1), rate)


def channel(i: int) -> np.ndarray:
    data, rate = sf.read(str(AUDIO / "stereo_diarization.wav"), dtype="float32")
    return resample(data[:, i], rate)


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * RATE), dtype=np.float32)


def pcm(x: np.ndarray) -> bytes:
    return (np.clip(x, -1, 1) * 32767).astype("<i2").tobytes()


def listen(
    stt, audio: np.ndarray, chunk: int = 1600, playing: str | None = None, model=True
) -> list:
    """Feed `audio` and, after each chunk, let the background work end: what a machine
    infinitely faster than real time would hear."""

    async def run() -> list:
        listener = Listener(stt, turn_end=load_turn_end() if model else None)
        listener.playing(playing)
        data, out = pcm(audio), []
        try:
            for i in range(0, len(data), chunk * 2):
                out += await listener.feed(data[i : i + chunk * 2])
                out += await listener.settle()
        finally:
            await listener.close()
        return out

    return asyncio.run(run())


def two_requests() -> np.ndarray:
    return np.concatenate([silence(0.5), channel(0), silence(1.5), channel(1), silence(1.0)])


def finals(heard: list) -> list:
    return [h for h in heard if h.kind == "final"]


def test_two_requests_separated_by_silence_are_two_turns(stt):
    heard = listen(stt, two_requests())
    first, second = finals(heard)
    assert "wizard" in first.text and "horizon" in second.text.lower()
    kinds = [h.kind for h in heard if h.utterance == 1]
    assert kinds[0] == "speech" and kinds[-3:-1] == ["candidate", "final"]  # announced first
    assert kinds[-1] == "closed"  # the window for going on passed before the second request
    for h in (first, second):
        # the model ended the turn (not the fallback pause), after the candidate pause
        assert h.reason == "model" and h.endpoint_ms >= ListenConfig().candidate_ms
        assert h.probability is not None and h.probability >= 0.5
        assert h.stt_ms is not None and h.last_word_ms is not None and h.audio_s > 1


def test_long_pauses_inside_a_sentence_do_not_end_the_turn(stt):
    # jfk.flac: "And so my fellow Americans, (1.15 s) ask not (0.3 s) what your country can
    # do for you, (1.1 s) ask what you can do for your country." The model hears the pauses
    # after "ask not" and "for you" as unfinished: candidate ends, withdrawn as speech goes
    # on. "Americans," sounds finished and is committed, but the speaker goes on within the
    # merge window: the same turn, resumed, and its final transcript is the whole sentence
    audio = np.concatenate([silence(0.3), load(AUDIO / "jfk.flac"), silence(2.0)])
    heard = listen(stt, audio)
    texts = [h.text for h in finals(heard)]
    assert len(texts) == 2, texts
    assert "americans" in texts[0].lower()
    whole = texts[1].lower()
    assert "americans" in whole and "ask not" in whole and "for your country" in whole
    assert {h.utterance for h in finals(heard)} == {1}  # one turn, said twice
    kinds = [h.kind for h in heard]
    assert kinds.index("resumed") > kinds.index("final")  # the committed one went on
    assert kinds.count("candidate") > 2  # and the pauses inside were candidates
    # the window closed only once, after the whole: never while the person could go on
    last_final = len(kinds) - 1 - kinds[::-1].index("final")
    assert kinds.count("closed") == 1 and kinds.index("closed") > last_final
    # without the model, only the fallback pause ends a turn: one turn
    (alone,) = finals(listen(stt, audio, model=False))
    assert alone.reason == "pause" and alone.endpoint_ms >= ListenConfig().fallback_ms
    assert "americans" in alone.text.lower()


def test_a_turn_the_fallback_pause_ended_can_still_be_gone_on_with(stt):
    # On a busy machine the model's verdict can come after the fallback pause: the turn is
    # then committed at 1.5 s of silence. With the window for going on as long as that pause,
    # it was closed as the turn was committed, and "ask not ..." 1.6 s after the last word
    # became turns of their own (CI's call test). The window outlasts the fallback.
    def trimmed(x: np.ndarray) -> np.ndarray:
        loud = np.flatnonzero(np.abs(x) > 0.02)
        return x[max(0, loud[0] - 1600) : loud[-1] + 1600]

    said = trimmed(channel(1))  # "The horizon seems extremely distant."
    audio = np.concatenate([silence(0.3), said, silence(1.6), said, silence(2.5)])
    heard = listen(stt, audio, model=False)  # no model: only the fallback pause ends a turn
    first, whole = finals(heard)
    assert first.reason == "pause" and first.endpoint_ms >= ListenConfig().fallback_ms
    assert {h.utterance for h in finals(heard)} == {1}  # one turn, said twice
    assert [h.kind for h in heard].count("resumed") == 1
    assert whole.text.lower().count("horizon") == 2, whole.text
    # a longer pause setting (`handsfree_pause_ms`) keeps the window past it
    assert ListenConfig(fallback_ms=3000).merge_ms >= 3000 + MERGE_PAST_FALLBACK_MS


def test_going_on_while_the_reply_plays_is_one_turn_even_when_the_reply_quotes_it(stt):
    # On a busy machine the reply to "And so my fellow Americans," can be playing by the time
    # "ask not ..." arrives. The joined turn's transcript then begins with the words the reply
    # quotes ("You said: And so my fellow Americans."), and it was dropped as the reply's echo:
    # the rest of the sentence came out as a second turn, cut at its first word.
    audio = np.concatenate([silence(0.3), load(AUDIO / "jfk.flac"), silence(2.0)])
    reply = "You said: And so my fellow Americans. This is a simulated answer from the engine."

    async def run() -> list:
        listener = Listener(stt, turn_end=load_turn_end())
        data, out, chunk = pcm(audio), [], 1600
        try:
            for i in range(0, len(data), chunk * 2):
                out += await listener.feed(data[i : i + chunk * 2])
                out += await listener.settle()
                if finals(out) and listener._playing is None:
                    listener.playing(reply)  # the first part's reply starts at once
        finally:
            await listener.close()
        return out

    heard = asyncio.run(run())
    assert not [h for h in heard if h.kind == "ignored"], heard
    first, whole = finals(heard)
    assert "americans" in first.text.lower() and first.utterance == whole.utterance == 1
    assert "ask not" in whole.text.lower() and "for your country" in whole.text.lower()


def jfk_with_the_reply_playing(listener: Listener, step_s: float) -> list:
    """jfk.flac, heard in 100 ms chunks until the first final; then the reply to it plays
    (quoting it, as the scripted engine's does) and the rest comes `step_s` at a time."""
    audio = np.concatenate([silence(0.3), load(AUDIO / "jfk.flac"), silence(3.0)])
    reply = "You said: And so my fellow Americans. This is a simulated answer from the engine."

    async def run() -> list:
        data, out, i = pcm(audio), [], 0
        try:
            while i < len(data):
                step = 3200 if listener._playing is None else int(step_s * RATE) * 2
                out += await listener.feed(data[i : i + step])
                out += await listener.settle()
                i += step
                if finals(out) and listener._playing is None:
                    listener.playing(reply)
        finally:
            await listener.close()
        return out

    return asyncio.run(run())


def test_a_first_word_with_no_words_heard_in_it_still_goes_on_with_the_turn(stt):
    # "Ask" alone, said over the reply, is transcribed as nothing: it was dropped with the
    # window for going on, and "not what your country ..." became a turn of its own
    heard = jfk_with_the_reply_playing(Listener(stt, turn_end=load_turn_end()), 1.5)
    whole = finals(heard)[-1]
    assert whole.utterance == 1 and "ask not" in whole.text.lower(), finals(heard)
    assert "americans" in whole.text.lower() and "for your country" in whole.text.lower()


class SlowServer:
    """A speech server (previews and finals run at once) answering in `lo`-`hi` seconds."""

    remote = True

    def __init__(self, stt, lo: float, hi: float, seed: int) -> None:
        self.stt, self.lo, self.hi, self.rng = stt, lo, hi, random.Random(seed)

    def transcribe(self, samples, **kw):
        time.sleep(self.rng.uniform(self.lo, self.hi))
        return self.stt.transcribe(samples, **kw)


@pytest.mark.parametrize(("lo", "hi", "seed"), [(0.05, 0.1, 0), (0.05, 0.6, 1)])
def test_going_on_over_the_reply_in_real_time_never_leaves_the_turn_waiting(stt, lo, hi, seed):
    # In real time, with a speech server: "ask not", said as the reply to "Americans" plays,
    # was told apart from its echo only at the pause after it; joining it to the last turn
    # dropped the transcription in flight and asked for none, and the turn then waited for
    # its words for ever, holding all that came after (the rest of the sentence was lost)
    audio = np.concatenate([silence(1.5), load(AUDIO / "jfk.flac"), silence(5.0)])
    reply = "You said: And so my fellow Americans. This is a simulated answer from the engine."

    async def run() -> list:
        listener = Listener(SlowServer(stt, lo, hi, seed), turn_end=load_turn_end())
        data, out = pcm(audio), []
        try:
            for i in range(0, len(data), 3200):
                out += await listener.feed(data[i : i + 3200])
                await asyncio.sleep(0.1)  # 100 ms of audio every 100 ms
                out += listener.take()
                if finals(out) and listener._playing is None:
                    listener.playing(reply)
            out += await listener.settle()
        finally:
            await listener.close()
        return out

    heard = asyncio.run(run())
    spoken = {h.utterance for h in heard if h.kind == "speech"}
    assert spoken <= {h.utterance for h in heard if h.kind in ("final", "ignored")}, heard
    whole = finals(heard)[-1]
    assert whole.utterance == 1 and "for your country" in whole.text.lower(), finals(heard)
    assert "americans" in whole.text.lower() and "ask not" in whole.text.lower()


class ByLength:
    """Whisper, except that under 1.2 s of audio (a faint "Ask" alone) it hears "And", as
    tiny.en did in a call."""

    def __init__(self, stt) -> None:
        self.stt = stt

    def transcribe(self, samples, **kw):
        seconds = len(samples) / RATE
        heard = self.stt.transcribe(samples, **kw)
        return replace(heard, text="And.") if seconds < 1.2 else heard


def test_a_first_word_heard_as_a_word_of_the_reply_still_goes_on_with_the_turn(stt):
    # the reply quotes "And so ...", so "And" (a faint "Ask") alone was the reply's echo: it
    # closed the window for going on, and the rest became a turn of its own
    heard = jfk_with_the_reply_playing(Listener(ByLength(stt), turn_end=load_turn_end()), 1.5)
    assert any(h.kind == "ignored" and h.reason == "echo" for h in heard), heard
    whole = finals(heard)[-1]
    assert whole.utterance == 1 and "for your country" in whole.text.lower(), finals(heard)


def test_silence_noise_and_a_click_start_no_turn(stt):
    rng = np.random.default_rng(1)
    click = np.concatenate([silence(1.0), rng.standard_normal(1600) * 0.5, silence(1.0)])
    hiss = rng.standard_normal(RATE * 3) * 0.003
    for audio in (silence(3.0), hiss, click.astype(np.float32)):
        heard = listen(stt, audio.astype(np.float32))
        assert not [h for h in heard if h.kind in ("speech", "final", "candidate")], heard


def test_the_replys_own_voice_starts_no_turn(stt):
    reply = "The capital of France is Paris. It has been the capital for centuries."
    chunks = list(load_tts(Settings()).synthesize(reply))
    spoken = np.concatenate(
        [resample(np.frombuffer(c.samples, dtype="<i2") / 32768, c.sample_rate) for c in chunks]
    )
    audio = np.concatenate([silence(0.5), spoken, silence(1.6)])
    heard = listen(stt, audio, playing=reply)
    assert not finals(heard) and not [h for h in heard if h.kind == "speech"], heard
    # the same audio when nothing plays is a request, and a different request during
    # playback is heard
    assert finals(listen(stt, audio))
    assert finals(listen(stt, two_requests(), playing=reply))
    assert is_echo("the capital of france is paris", reply)
    assert not is_echo("what is the weather tomorrow", reply)


@pytest.mark.parametrize("chunk", [1, 37, 3200])
def test_any_chunk_size_hears_the_same(stt, chunk):
    audio = np.concatenate([silence(0.3), channel(1), silence(0.8)])
    (final,) = finals(listen(stt, audio, chunk=chunk))
    assert "horizon" in final.text.lower()


def test_silence_is_not_kept(stt):
    async def run() -> int:
        listener = Listener(stt)
        for _ in range(600):  # 60 s
            await listener.feed(pcm(silence(0.1)))
        kept = sum(len(f) for f in listener._preroll) + len(listener._audio)
        await listener.close()
        return kept

    assert asyncio.run(run()) <= int(0.35 * RATE)


class HeldStt:
    """Whisper that waits for the test's word: to see what queues while it runs."""

    def __init__(self, stt):
        self.stt = stt
        self.release = threading.Event()
        self.started = threading.Event()
        self.calls: list[int] = []
        self.running = self.most = 0
        self.lock = threading.Lock()

    def transcribe(self, samples):
        with self.lock:
            self.calls.append(len(samples))
            self.running += 1
            self.most = max(self.most, self.running)
        self.started.set()
        self.release.wait(60)
        try:
            return self.stt.transcribe(samples)
        finally:
            with self.lock:
                self.running -= 1


def test_feeding_never_waits_for_whisper_and_the_final_is_not_queued_behind_previews(stt):
    held = HeldStt(stt)
    audio = np.concatenate([silence(0.3), channel(0), silence(1.6)])

    async def run() -> tuple[list, list]:
        listener = Listener(held, turn_end=load_turn_end())
        before, data = [], pcm(audio)
        half = int(1.5 * RATE) * 2
        try:
            before += await listener.feed(data[:half])  # speech, and a first preview
            assert await asyncio.to_thread(held.started.wait, 60)
            for i in range(half, len(data), 3200):
                # Whisper is stuck in that call: the audio is still read, to the end
                before += await listener.feed(data[i : i + 3200])
            await asyncio.sleep(0.5)  # time for anything wrongly queued to reach Whisper
            assert held.running == 1 and len(held.calls) == 1
            held.release.set()
            after = await listener.settle()
            return before, after + await listener.settle()
        finally:
            held.release.set()
            await listener.close()

    before, after = asyncio.run(run())
    assert [h.kind for h in before] == ["speech"]  # heard at once, with Whisper still busy
    # one transcription at a time; while the first ran, the previews asked for were
    # replaced by the final one, which ran next: two calls, the second the whole utterance
    assert held.most == 1 and len(held.calls) == 2, held.calls
    assert held.calls[1] > held.calls[0]
    (final,) = finals(after)
    assert "wizard" in final.text


def spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_the_transcript_grows_while_the_cores_are_busy(stt):
    # another process keeps every core busy; the recording is played in real time
    audio = np.concatenate([silence(0.3), load(AUDIO / "jfk.flac"), silence(2.0)])
    cores = len(os.sched_getaffinity(0))
    ctx = multiprocessing.get_context("spawn")
    hogs = [ctx.Process(target=spin, args=(120,), daemon=True) for _ in range(cores)]
    for hog in hogs:
        hog.start()

    async def run() -> list:
        listener = Listener(stt, turn_end=load_turn_end())
        data, out, step = pcm(audio), [], 3200
        began = time.monotonic()
        try:
            for n, i in enumerate(range(0, len(data), step)):
                await asyncio.sleep(max(0.0, began + (n + 1) * 0.1 - time.monotonic()))
                out += await listener.feed(data[i : i + step])
            return out + await listener.settle()
        finally:
            await listener.close()

    try:
        heard = asyncio.run(run())
    finally:
        for hog in hogs:
            hog.kill()
    partials = [h for h in heard if h.kind == "partial"]
    assert partials, [h.kind for h in heard]
    last = finals(heard)[-1]
    assert "country" in last.text.lower()
    # a partial came before its utterance's final
    first_final = heard.index(finals(heard)[0])
    assert any(heard.index(p) < first_final for p in partials) or len(partials) > 1


def test_the_live_voice_bench_times_each_heard_turn_from_the_last_word(stt, tmp_path):
    # `assistant bench voice --live`: real-time feeding into the listener; each final starts
    # a turn that carries the listener's endpoint and stt and counts from the last word
    from assistant.devtools.voicebench import _live
    from assistant.records import Timings, TurnEvent, TurnResult

    started: list = []

    class Turns:
        async def stream(self, request, tts=None, keep_stopped=None, hold=None, playback=None):
            started.append(request)
            if hold is not None:
                await hold()
            timings = Timings(**request.heard_ms, first_audio=now_ms() - request.received_ms)
            yield TurnEvent("done", result=TurnResult("ok", "chat", "r", "stop", timings=timings))

    class Store:
        def new_conversation(self, owner):
            return "c1"

    class Sessions:  # the bench's conversation's session, over the fake turns
        def of(self, owner, cid):
            from assistant.call.calls import Calls
            from assistant.session import Session

            return Session(owner, cid, Turns(), Calls())  # type: ignore[arg-type]

    class Rt:
        turns, store, sessions = Turns(), Store(), Sessions()

    path = tmp_path / "one.wav"
    sf.write(str(path), np.concatenate([silence(0.3), channel(1)]), RATE)
    (timings,) = asyncio.run(_live(Rt(), stt, None, path))
    assert "horizon" in started[0].text.lower() and started[0].source == "voice"
    assert timings["endpoint"] >= ListenConfig().candidate_ms and timings["stt"] >= 0
    assert timings["first_audio"] >= timings["endpoint"]
