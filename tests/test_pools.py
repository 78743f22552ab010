"""Speech runs on bounded pools sized for the machine (admission by resource); fast tier."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from assistant.speech.pools import PoolSizes, SpeechPools


@pytest.mark.parametrize(
    ("cores", "sizes"),
    [
        (1, PoolSizes(1, 1, 1, 1)),
        (2, PoolSizes(1, 2, 1, 1)),  # this machine: one Whisper call on both cores at a time
        (8, PoolSizes(2, 4, 2, 1)),
        (16, PoolSizes(4, 4, 4, 1)),
    ],
)
def test_pool_sizes_follow_the_cores(cores, sizes):
    assert PoolSizes.for_cores(cores) == sizes


def test_calls_past_the_pool_size_wait_their_turn_instead_of_sharing_the_cores():
    pools = SpeechPools(PoolSizes(1, 1, 2, 1))
    running, peak, lock = [0], [0], threading.Lock()

    def work(seconds: float) -> str:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(seconds)
        with lock:
            running[0] -= 1
        return threading.current_thread().name

    async def main() -> tuple[list[str], int, list[str], int]:
        stt = await asyncio.gather(*(pools.run_stt(work, 0.05) for _ in range(4)))
        stt_peak, peak[0] = peak[0], 0
        tts = await asyncio.gather(*(pools.run_tts(work, 0.05) for _ in range(4)))
        return stt, stt_peak, tts, peak[0]

    try:
        stt, stt_peak, tts, tts_peak = asyncio.run(main())
    finally:
        pools.shutdown()
    assert stt_peak == 1 and tts_peak == 2
    assert all(n.startswith("stt") for n in stt) and all(n.startswith("tts") for n in tts)


def test_calls_counts_the_logins_calls_holding_or_waiting_for_their_place():
    pools = SpeechPools(PoolSizes(1, 1, 1, 1))
    release = threading.Event()

    async def main() -> tuple[int, int]:
        async def call(owner: str) -> None:
            async with pools.share(owner):
                await pools.run_stt(release.wait, 30)

        calls = [asyncio.create_task(call(o)) for o in ("ann", "ann", "ann", "bob")]
        while pools.calls() < 4:  # ann's second and third wait for her place
            await asyncio.sleep(0.01)
        seen = pools.calls()
        release.set()
        await asyncio.gather(*calls)
        return seen, pools.calls()

    try:
        assert asyncio.run(asyncio.wait_for(main(), 60)) == (4, 0)
    finally:
        release.set()
        pools.shutdown()


def test_gradio_queue_polls_cheaply_when_idle():
    # the private attributes quiet_queue sets must still exist in the pinned Gradio
    import gradio as gr

    from assistant.web.server import PROGRESS_POLL_S, QUEUE_POLL_S, quiet_queue

    with gr.Blocks() as demo:
        gr.Markdown("x")
    demo.queue()
    assert demo._queue.sleep_when_free == 0.001  # Gradio's default: 1000 wake-ups a second
    quiet_queue(demo)
    assert demo._queue.sleep_when_free == QUEUE_POLL_S
    assert demo._queue.progress_update_sleep_when_free == PROGRESS_POLL_S


class SlowVoice:
    """A text-to-speech model whose every sentence takes `seconds` of its pool's thread;
    records the order sentences were spoken in."""

    def __init__(self, seconds: float):
        self.seconds, self.spoken, self.lock = seconds, [], threading.Lock()

    def synthesize(self, text: str):
        from assistant.records import AudioChunk

        time.sleep(self.seconds)
        with self.lock:
            self.spoken.append(text)
        yield AudioChunk(22050, b"\0\0" * 100, text)


def test_a_logins_spoken_replies_take_its_share_so_anothers_are_not_held_up(monkeypatch):
    # the page's spoken replies were synthesized outside the login's share of the pool: ann's
    # four replies at once put bob's first sentence behind four of hers (issue 49, item 6)
    from assistant.records import TurnEvent, TurnResult
    from assistant.speech import pools as process_pools
    from assistant.turns.recorder import Recorder
    from assistant.turns.voice import ForLogin, speak

    pools = SpeechPools(PoolSizes(1, 1, 1, 1))  # one synthesis at a time, as on two cores
    monkeypatch.setattr(process_pools, "_pools", pools)
    voice = SlowVoice(0.15)

    async def reply(who: str, n: int) -> None:
        said = " ".join(f"This is sentence {k} of {who}'s reply number {n}." for k in range(3))

        async def events():
            yield TurnEvent("content", text=said)
            yield TurnEvent("done", result=TurnResult(said, "chat", "r", "stop"))

        async for _ in speak(events(), ForLogin(voice, who), Recorder()):
            pass

    async def main() -> None:
        anns = [asyncio.create_task(reply("ann", n)) for n in range(4)]
        while pools.calls() < 4:  # each of ann's replies has a sentence in (or for) her place
            await asyncio.sleep(0.01)
        await reply("bob", 0)
        await asyncio.gather(*anns)

    try:
        asyncio.run(asyncio.wait_for(main(), 20))
    finally:
        pools.shutdown()
    first_of_bob = next(i for i, s in enumerate(voice.spoken) if "bob" in s)
    # at most ann's sentence already on the pool comes first, not one of each of her replies
    assert first_of_bob <= 1, voice.spoken[: first_of_bob + 1]


def test_the_pages_voice_speaks_in_the_logins_share():
    from assistant.web.page.turns import Turns

    class Prefs:
        def prefs(self, owner):
            return {}

    class Sessions:
        conversations = Prefs()

    class Speech:
        async def tts(self, voice=None, speed=1.0):
            return SlowVoice(0)

    from assistant.settings import Settings

    turns = Turns(Sessions(), Settings(), Speech(), streamed=False)  # type: ignore[arg-type]
    tts = asyncio.run(turns._tts("ann"))
    assert tts.share_owner == "ann" and next(iter(tts.synthesize("Hi."))).text == "Hi."


def test_a_calls_voice_speaks_in_the_logins_share_as_the_pages_does():
    """The login's voice is chosen in one place (`session.voice`) for the page and for a call
    (`web.call`): asked for a login, it speaks each sentence in that login's share; with
    speech off (a call honours the saved box) there is no voice to share."""
    from assistant.session.voice import chosen_voice

    class Speech:
        async def tts(self, voice=None, speed=1.0):
            return SlowVoice(0)

    chosen = asyncio.run(chosen_voice(Speech(), {}, owner="ann"))
    assert chosen.tts.share_owner == "ann"
    assert next(iter(chosen.tts.synthesize("Hi."))).text == "Hi."
    off = asyncio.run(chosen_voice(Speech(), {"speak": False}, owner="ann"))
    assert off.tts is None
