"""The call's voice session: a reply prepared at a candidate end is held until the end is
committed, forgotten when the person goes on, never started for the deep lane; speaking over
a reply stops it (kept, marked stopped). The turns are a scripted pipeline; the listener's
events are real ones, and jfk.flac goes through the real listener at real time."""

from __future__ import annotations

import asyncio
import dataclasses
import struct

import numpy as np
import soundfile as sf

from assistant.call.call import Call
from assistant.call.hearing import Heard
from assistant.call.listener import Listener
from assistant.records import AudioChunk, RouteDecision, TurnEvent, TurnResult, now_ms
from assistant.settings import Settings
from assistant.speech.stt import load_stt
from assistant.speech.turn_end import load_turn_end
from tests.conftest import AUDIO


class Turns:
    """A pipeline whose turns answer "Sure." with one audio chunk, slowly enough to stop."""

    def __init__(self, words: int = 3, word_s: float = 0.05, audio_every: int = 0):
        """`audio_every`: a second of audio after every that many words (else 0.1 s after
        the first word only)."""
        self.started: list[str] = []
        self.sources: list[str] = []
        self.stored: list[tuple[str, str]] = []  # (text, "done" | "stopped")
        self.replies: list[str] = []  # each stopped turn's reply as stored, then as cut
        self.words, self.word_s, self.audio_every = words, word_s, audio_every
        self.lane, self.routed, self.decisions = "chat", [], []
        self.settings = Settings()  # the upload limits push-to-talk is heard within
        self.audio_out = 0  # audio events the turns have yielded

    async def stream(self, request, tts=None, keep_stopped=None, hold=None, playback=None):
        self.started.append(request.text)
        self.sources.append(request.source)
        self.decisions.append(request.decision)
        done = False
        reply, sentence = "", []
        try:
            yield TurnEvent("route", decision=RouteDecision("chat", "test"))
            for i in range(self.words):
                await asyncio.sleep(self.word_s)
                reply += f"word{i} "
                sentence.append(f"word{i}")
                yield TurnEvent("content", text=f"word{i} ")
                if self.audio_every and len(sentence) == self.audio_every:
                    said, sentence = " ".join(sentence), []
                    audio = AudioChunk(22050, np.zeros(22050, "<i2").tobytes(), said)
                    yield TurnEvent("audio", text=said, audio=audio)
                elif not self.audio_every and i == 0:
                    audio = AudioChunk(22050, np.zeros(2205, "<i2").tobytes(), "word0")
                    self.audio_out += 1
                    yield TurnEvent("audio", text="word0", audio=audio)
            if hold is not None:
                await hold()  # the pipeline stores a turn only once its end is decided
            done = True
            self.stored.append((request.text, "done"))
            yield TurnEvent("done", result=TurnResult("ok", "chat", "test", "stop"))
        finally:
            if not done and (keep_stopped is None or keep_stopped()):
                self.stored.append((request.text, "stopped"))
                if playback is not None:
                    self.replies.append(playback.heard(reply))
                    playback.turn_id = len(self.stored)

    def stopped_before_start(self, request):
        self.stored.append((request.text, "stopped"))

    async def route(self, text, conversation_id):
        self.routed.append(text)
        return RouteDecision(self.lane, "test")

    def cut_heard(self, playback, reply):
        self.replies.append(reply)


class Page:
    def __init__(self):
        self.said: list[dict] = []
        self.audio: list[bytes] = []

    async def json(self, m):
        self.said.append(m)

    async def bytes(self, b):
        self.audio.append(b)

    def kinds(self):
        return [m["kind"] for m in self.said if m["kind"] != "state"]


class QuietListener:
    def playing(self, text):
        pass


def session(turns, page, lane="chat", listener=None):
    async def tts():
        return object()

    from assistant.call.calls import Calls
    from assistant.session import Session

    turns.lane = lane
    conversation = Session("local", "c1", turns, Calls())
    return Call(
        listener or QuietListener(), lambda: conversation, owner="local",
        tts=tts, send_json=page.json, send_bytes=page.bytes,
    )  # fmt: skip


async def _ended(s) -> None:
    """Until every turn the call ran has ended, its last messages sent (each turn is a task its
    conversation's session keeps): an event to wait for, not a time."""
    session = s.session()
    while session._turns:
        await asyncio.gather(*list(session._turns), return_exceptions=True)


def heard(kind, n=1, text="what time is it", **kw):
    return Heard(kind, n, text, last_word_ms=now_ms(), **kw)


def test_a_reply_prepared_at_the_candidate_is_held_until_the_commit():
    async def run():
        turns, page = Turns(), Page()
        s = session(turns, page)
        await s.hear(heard("speech"))
        await s.hear(heard("candidate"))
        while not turns.audio_out:  # the turn ran up to its first audio
            await asyncio.sleep(0.01)
        assert turns.started == ["what time is it"] and not page.audio
        assert "reply" not in page.kinds()  # held: nothing of it reached the page
        await s.hear(heard("final", endpoint_ms=300.0, stt_ms=0.0))
        await s.hear(heard("closed"))  # the window for going on passed: the turn is kept
        await _ended(s)
        return turns, page

    turns, page = asyncio.run(run())
    assert turns.started == ["what time is it"]  # not started again at the commit
    assert turns.stored == [("what time is it", "done")]
    (frame,) = page.audio
    assert struct.unpack("<I", frame[:4])[0] == 22050 and len(frame) == 4 + 2205 * 2
    kinds = page.kinds()
    assert kinds.index("turn") < kinds.index("reply") and kinds[-1] == "done"


def test_going_on_after_a_candidate_forgets_the_prepared_reply():
    async def run():
        turns, page = Turns(), Page()
        s = session(turns, page)
        await s.hear(heard("speech"))
        await s.hear(heard("candidate", text="and so my fellow americans"))
        while not turns.started:  # the reply is being prepared
            await asyncio.sleep(0.01)
        await s.hear(heard("resumed"))
        await s.hear(heard("speech"))
        await s.hear(heard("candidate", text="and so my fellow americans ask not"))
        await s.hear(heard("final", text="and so my fellow americans ask not"))
        await s.hear(heard("closed"))
        while s.turn is not None:
            await asyncio.sleep(0.05)
        return turns, page

    turns, page = asyncio.run(run())
    assert turns.started == ["and so my fellow americans", "and so my fellow americans ask not"]
    # the first was never the person's turn: not stored, nothing of it sent
    assert turns.stored == [("and so my fellow americans ask not", "done")]
    assert [m["text"] for m in page.said if m["kind"] == "turn"] == [
        "and so my fellow americans ask not"
    ]


def test_a_turn_is_kept_only_once_the_listener_says_the_person_did_not_go_on():
    # The listener closes the window as it hears the person go on, and says "resumed"; a turn
    # once looked at the window itself and, on a busy loop, before "resumed" had reached the
    # session. Now it waits for the listener's "closed", which comes in order after any
    # "resumed": done and played out, it is not stored until then, and never if they went on.
    async def run():
        turns, page = Turns(words=1), Page()
        s = session(turns, page)
        await s.hear(heard("candidate", text="and so my fellow americans"))
        await s.hear(heard("final", text="and so my fellow americans"))
        held = s.turn
        await _played_and_waiting_on_the_window(s, held)
        before = list(turns.stored)  # its reply generated and played: still not stored
        await s.hear(heard("resumed"))
        while s.turn is not None or not held.task.done():
            await asyncio.sleep(0.01)
        went_on = list(turns.stored)
        await s.hear(heard("speech"))
        await s.hear(heard("final", text="and so my fellow americans ask not"))
        kept = s.turn
        await s.hear(heard("closed"))
        await kept.task
        return before, went_on, turns, page

    before, went_on, turns, page = asyncio.run(run())
    assert before == [] and went_on == []  # it went on: never stored as a turn
    assert turns.stored == [("and so my fellow americans ask not", "done")]
    assert "barge" in page.kinds()


async def _played_and_waiting_on_the_window(s, turn) -> None:
    """Until `turn`'s reply was generated and the page reported it all played: then only the
    listener's word holds it."""
    from assistant.call.playback import Played

    while turn.first_audio_at is None or not turn.reply:
        await asyncio.sleep(0.01)
    await s.played(Played(turn.utterance, turn.audio_ms, interrupted=False))
    for _ in range(50):  # the turn runs on to what holds it
        await asyncio.sleep(0)


def test_the_listener_numbers_what_it_says():
    listener = Listener(load_stt(Settings()))
    listener.out.say(Heard("speech", 1))
    listener.out.say(Heard("partial", 1, "and so"))
    assert [h.seq for h in listener.take()] == [1, 2] and listener.out.said == 2


def test_a_prepared_turn_is_routed_once_and_carries_its_decision_into_the_turn():
    async def run():
        turns, page = Turns(), Page()
        s = session(turns, page)
        await s.hear(heard("speech"))
        await s.hear(heard("candidate"))
        prepared = s.turn
        await s.hear(heard("final", endpoint_ms=300.0, stt_ms=0.0))
        await s.hear(heard("closed"))
        await prepared.task
        return turns

    turns = asyncio.run(run())
    # routed at the candidate, by the session; the pipeline is handed that decision, so the
    # turn is not routed a second time (issue 34: "routes once")
    assert turns.routed == ["what time is it"]
    assert turns.decisions == [RouteDecision("chat", "test")]


def test_waiting_for_the_call_to_settle_waits_for_a_turn_still_being_routed():
    # A candidate's reply is not the call's `turn` until it is routed; the live bench asked
    # "no turn now?" after the last audio and, on a busy machine, cut such a turn off and
    # counted it lost. `settled` waits for what the listener said to be handled instead.
    class SlowRoute(Turns):
        def __init__(self):
            super().__init__()
            self.asked, self.may_route = asyncio.Event(), asyncio.Event()

        async def route(self, text, conversation_id):
            self.asked.set()
            await self.may_route.wait()
            return await super().route(text, conversation_id)

    async def run():
        turns, page = SlowRoute(), Page()
        s = session(turns, page)
        candidate = dataclasses.replace(heard("candidate"), seq=1)
        hearing = asyncio.create_task(s.hear(candidate))
        settled = asyncio.create_task(s.settled(1))
        await turns.asked.wait()  # the candidate is being routed: no turn of the call yet
        await asyncio.sleep(0)  # `settled` runs (the old wait ended here, on "no turn")
        early = settled.done()
        turns.may_route.set()
        await hearing
        await s.hear(dataclasses.replace(heard("final", endpoint_ms=300.0), seq=2))
        await s.hear(dataclasses.replace(heard("closed"), seq=3))
        await s.settled(3)
        await settled
        return early, turns

    early, turns = asyncio.run(run())
    assert not early and turns.stored == [("what time is it", "done")]


def test_deep_work_is_never_started_before_the_commit():
    async def run():
        turns, page = Turns(), Page()
        s = session(turns, page, lane="deep")
        await s.hear(heard("candidate", text="prove the theorem"))
        while not turns.routed:  # the candidate's lane is decided: deep, so nothing starts
            await asyncio.sleep(0.01)
        before = list(turns.started)
        await s.hear(heard("final", text="prove the theorem"))
        await s.hear(heard("closed"))
        while s.turn is not None:
            await asyncio.sleep(0.05)
        return before, turns

    before, turns = asyncio.run(run())
    assert before == [] and turns.started == ["prove the theorem"]
    assert turns.decisions == [None]  # the committed deep turn is routed by the turn itself


def test_speaking_over_the_reply_stops_it_and_keeps_it_marked_stopped():
    async def run():
        turns, page = Turns(words=40, word_s=0.05), Page()
        s = session(turns, page)
        await s.hear(heard("final", text="tell me a story"))
        while not page.audio:  # the reply is being said
            await asyncio.sleep(0.01)
        await s.hear(heard("speech", n=2))  # the next utterance: barge-in
        return turns, page, s

    turns, page, s = asyncio.run(run())
    assert turns.stored == [("tell me a story", "stopped")] and s.turn is None
    assert "barge" in page.kinds()


def test_a_turn_barged_before_its_task_ran_a_step_is_still_kept():
    # a backlog heard in one go (a busy machine; `bench voice --calls 2` lost 2 of 6 turns):
    # the end of one utterance and the next one's speech handled before the turn's task had
    # run at all, so its stream never began and what was said was neither answered nor stored
    async def run():
        turns, page = Turns(), Page()
        s = session(turns, page)
        await s.hear(heard("final", text="tell me a story"))
        await s.hear(heard("speech", n=2))  # no step of the loop between the two
        await _ended(s)
        return turns, page, s

    turns, page, s = asyncio.run(run())
    assert turns.started == []  # its stream never began ...
    assert turns.stored == [("tell me a story", "stopped")]  # ... and it is kept all the same
    assert s.turn is None and "barge" in page.kinds()


def jfk_pcm() -> bytes:
    """jfk.flac as 16 kHz int16 PCM, with 0.3 s of silence before and 2 s after."""
    data, rate = sf.read(str(AUDIO / "jfk.flac"), dtype="float32", always_2d=True)
    x = data.mean(axis=1)
    x = np.interp(np.linspace(0, len(x) - 1, int(len(x) * 16000 / rate)), np.arange(len(x)), x)
    audio = np.concatenate([np.zeros(4800), x, np.zeros(32000)])
    return (np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes()


def assert_one_whole_jfk_turn(turns: Turns) -> None:
    """The session merged "Americans," with the rest: one turn, stored once, the whole."""
    assert len(turns.stored) == 1, turns.stored
    (stored,) = turns.stored
    text = stored[0].lower()
    assert stored[1] == "done" and "americans" in text and "for your country" in text


def test_jfk_at_real_time_is_one_turn():
    # the real listener and turn-end model; the session merges "Americans," with the rest
    pcm = jfk_pcm()

    async def run():
        turns, page = Turns(), Page()
        listener = Listener(load_stt(Settings()), turn_end=load_turn_end())
        s = session(turns, page, listener=listener)
        hearing = asyncio.create_task(s.run())
        began = asyncio.get_running_loop().time()
        try:
            for n, i in enumerate(range(0, len(pcm), 3200)):
                await asyncio.sleep(
                    max(0.0, began + (n + 1) * 0.1 - asyncio.get_running_loop().time())
                )
                await s.feed(pcm[i : i + 3200], now_ms())
            for h in await listener.settle():
                await s.hear(h)
            await s.settled(listener.out.said)  # all it heard handled, every turn ended
        finally:
            hearing.cancel()
            await s.close()
            await listener.close()
        return turns

    assert_one_whole_jfk_turn(asyncio.run(run()))


class Voice:
    """A voice that says anything as 0.1 s of silence."""

    def synthesize(self, text):
        return [AudioChunk(22050, np.zeros(2205, "<i2").tobytes(), text)]


def test_a_question_typed_during_the_call_is_answered_in_it_and_stops_the_reply_before():
    async def run():
        turns, page = Turns(words=40, word_s=0.05), Page()
        s = session(turns, page)
        await s.hear(heard("final", text="tell me a story"))
        while not page.audio:  # the story is being told
            await asyncio.sleep(0.01)
        await s.say("what time is it?")  # typed on the page while the story is told
        await _ended(s)
        return turns, page, s

    turns, page, s = asyncio.run(run())
    assert turns.started == ["tell me a story", "what time is it?"]
    assert turns.sources == ["voice", "typed"]
    assert turns.stored == [("tell me a story", "stopped"), ("what time is it?", "done")]
    typed = [m for m in page.said if m["kind"] == "turn" and m["text"] == "what time is it?"]
    assert len(typed) == 1 and typed[0]["utterance"] < 0  # not one the listener numbered
    kinds = page.kinds()
    assert kinds.index("barge") < len(kinds) - 1 - kinds[::-1].index("turn")
    assert kinds[-1] == "done" and len(page.audio) == 2  # both replies spoke
    assert s.conversation_id == "c1"


def test_a_job_notice_is_said_in_the_call_once_it_is_quiet_and_never_stored():
    from assistant.call.calls import Calls

    async def run():
        turns, page = Turns(words=6, word_s=0.05), Page()
        s = session(turns, page)

        async def voice():
            return Voice()

        s.tts = voice
        calls = Calls()
        calls.join(s)
        await s.hear(heard("final", text="tell me a story"))
        await s.hear(heard("closed"))
        assert calls.of("local") is s and calls.of("bob") is None
        calls.of("local").announce("Your delegated job is done.")
        await asyncio.sleep(0.05)
        during = len(page.audio)  # the reply is still being told: the notice waits
        await s.turn.task if s.turn else None
        await s._notice_task
        calls.part(s)
        return turns, page, during, calls

    turns, page, during, calls = asyncio.run(run())
    assert during <= 1 and len(page.audio) == 2  # the reply's audio, then the notice's
    said = [m["text"] for m in page.said if m["kind"] == "reply"]
    assert said[-1] == "Your delegated job is done."
    assert turns.stored == [("tell me a story", "done")]  # the notice is no turn
    assert calls.of("local") is None


class OneConversation:
    """The conversations the page's turns see: "c1", the local user's."""

    def owned_by(self, cid, owner):
        return (cid, owner) == ("c1", "local")

    def start(self, owner, title=""):
        raise AssertionError("the tab's conversation is used")

    def prefs(self, owner):
        return {}


def page_sessions(turns, calls):
    from assistant.session import Sessions

    return Sessions(lambda: turns, OneConversation(), calls)  # type: ignore[arg-type]


def test_the_page_hands_a_typed_question_to_the_open_call_and_runs_none_itself():
    from assistant.call.calls import Calls
    from assistant.settings import Settings
    from assistant.web.page.turns import Tab
    from assistant.web.page.turns import Turns as PageTurns

    class Call:
        owner, conversation_id = "local", "c1"

        def __init__(self):
            self.said: list[str] = []

        async def say(self, text, source="typed"):
            self.said.append(text)

    async def run():
        calls, call, turns = Calls(), Call(), Turns()
        page = PageTurns(page_sessions(turns, calls), Settings(), None, streamed=True)  # type: ignore[arg-type]
        calls.join(call)  # type: ignore[arg-type]
        outs = [o async for o in page.chat("hi there", [], Tab("c1", owner="local"), True, None)]  # type: ignore[arg-type]
        calls.part(call)  # type: ignore[arg-type]
        return call, turns, outs

    call, turns, outs = asyncio.run(run())
    assert call.said == ["hi there"] and turns.started == []
    assert outs[0][1] == ""  # the box cleared
    assert outs[-1][0] == [{"role": "user", "content": "hi there"}]  # shown; the call answers
    assert all(not isinstance(o[2], bytes) for o in outs)  # the page plays nothing


def test_push_to_talk_during_a_call_is_a_turn_of_the_call_and_the_page_plays_nothing():
    """A recording made with push-to-talk while a call is open is heard, then answered in the
    call (aloud, by the call), never by the page beside it: its audio would reach the call's
    microphone and be heard as the person."""
    from assistant.call.calls import Calls
    from assistant.records import Transcript
    from assistant.web.page.turns import Tab
    from assistant.web.page.turns import Turns as PageTurns

    class Stt:
        def transcribe(self, samples, **kw):
            assert len(samples) > 16000  # the recording itself was decoded
            return Transcript("what time is it", "en", len(samples) / 16000, 5.0)

    class Speech:
        async def stt(self):
            return Stt()

    async def run():
        turns, page = Turns(), Page()
        call = session(turns, page)
        calls = Calls()
        pages = PageTurns(page_sessions(turns, calls), Settings(), Speech(), streamed=True)  # type: ignore[arg-type]
        calls.join(call)
        tab = Tab("c1", owner="local")
        jfk = str(AUDIO / "jfk.flac")
        outs = [o async for o in pages.voice(jfk, [], tab, True, None, None)]  # type: ignore[arg-type]
        await call.turn.task if call.turn else None
        calls.part(call)
        return turns, page, outs

    turns, page, outs = asyncio.run(run())
    assert turns.started == ["what time is it"] and turns.sources == ["voice"]
    assert turns.stored == [("what time is it", "done")]
    assert len(page.audio) == 1  # the call said the reply
    history = [o[0] for o in outs if isinstance(o[0], list)][-1]
    recorder = outs[-1][2]
    assert history[-1] == {"role": "user", "content": "🎤 what time is it"}
    assert all(o[1] is not None and not isinstance(o[1], bytes) for o in outs)  # page: no audio
    assert recorder is None  # the recorder is cleared for the next turn


def test_a_reply_stopped_while_it_plays_is_kept_as_what_the_page_played():
    """What was heard is what is kept: a barge-in stores the reply cut to the audio played so
    far (by the time since its first audio), and the page's report then cuts it to what it
    really played; a report for a reply that played out turns the echo guard off at once."""
    from assistant.call.playback import Played

    async def run():
        # four sentences of five words, a second of audio each, sent as they are generated
        turns, page = Turns(words=20, word_s=0.02, audio_every=5), Page()
        s = session(turns, page)
        s.listener = Echo()
        await s.hear(heard("final", text="tell me a story"))
        while len(page.audio) < 4:
            await asyncio.sleep(0.02)
        await asyncio.sleep(1.5)  # the first sentence has played out, the second is playing
        await s.hear(heard("speech", n=2))  # the person speaks over it: barge-in
        stored = list(turns.replies)
        await s.played(Played(1, 1500.0, interrupted=True))  # the page: 1.5 s played
        await s.played(Played(99, 10.0, interrupted=True))  # no such reply: nothing happens
        return turns, stored

    turns, stored = asyncio.run(run())
    assert turns.stored == [("tell me a story", "stopped")]
    # stored at the barge-in: the first sentence and some of the second, never all 20 words
    (at_barge,) = stored
    assert at_barge.startswith("word0 word1 word2 word3 word4 word5")
    assert "word19" not in at_barge and len(at_barge.split()) < 12
    # then exactly what the page played: 1.5 s is the first sentence and half the second
    assert turns.replies[-1] == "word0 word1 word2 word3 word4 word5 word6"

    async def played_out():
        turns, page = Turns(words=5, word_s=0.01, audio_every=5), Page()
        s = session(turns, page)
        s.listener = Echo()
        await s.hear(heard("final", text="hi"))
        await s.hear(heard("closed"))
        while not page.audio:
            await asyncio.sleep(0.01)
        guarded = s.listener.text is not None
        await s.played(Played(1, 1000.0, interrupted=False))  # all of it played
        return guarded, s.listener.text  # the guard is off as the report is handled

    guarded, after = asyncio.run(played_out())
    assert guarded and after is None  # off at the report, not a second and more later


class Echo:
    """A listener that keeps what the echo guard is told."""

    text: str | None = None
    said = 0

    def playing(self, text):
        self.text = text


def test_jfk_through_a_stalled_event_loop_is_the_same_one_turn():
    """Turn-taking counts the audio's own clock: with the event loop stalled for 800 ms in
    every 950 (a machine whose cores are taken), the audio arrives late and in bursts, stamped
    when it is read, as the call socket stamps it, and the turns are those of a quiet loop
    (`test_jfk_at_real_time_is_one_turn`). Passed with stalls of 0.35 s and 1.5 s too."""
    import time

    stall_s = 0.8

    pcm = jfk_pcm()
    chunks = [pcm[i : i + 3200] for i in range(0, len(pcm), 3200)]

    async def stall(stop: asyncio.Event) -> None:
        while not stop.is_set():
            time.sleep(stall_s)  # the loop's thread lost its core: nothing runs on it
            await asyncio.sleep(0.15)

    async def run():
        turns, page = Turns(), Page()
        listener = Listener(load_stt(Settings()), turn_end=load_turn_end())
        s = session(turns, page, listener=listener)
        hearing = asyncio.create_task(s.run())
        stop = asyncio.Event()
        stalling = asyncio.create_task(stall(stop))
        loop = asyncio.get_running_loop()
        began, sent = loop.time(), 0
        try:
            while sent < len(chunks):
                # what the page has sent by now arrives at once, stamped as it is read
                due = min(len(chunks), int((loop.time() - began) / 0.1))
                for chunk in chunks[sent:due]:
                    await s.feed(chunk, now_ms())
                sent = max(sent, due)
                await asyncio.sleep(0.02)
            for h in await listener.settle():
                await s.hear(h)
            await s.settled(listener.out.said)  # all it heard handled, every turn ended
        finally:
            stop.set()
            await stalling
            hearing.cancel()
            await s.close()
            await listener.close()
        return turns

    assert_one_whole_jfk_turn(asyncio.run(run()))


def test_a_logout_reaches_the_call_as_an_event_and_ends_it():
    """Logout is an event of the call (`Calls.logout`, told by the edge when Gradio has ended
    the login's sessions): the reply stops, kept as heard, and the call ends with the reason;
    another login's call goes on. No poll of the login is involved."""
    from assistant.call.calls import Calls

    async def run():
        turns, page = Turns(words=40, word_s=0.05), Page()
        ended: list[str] = []

        async def end_call(why: str) -> None:
            ended.append(why)

        s = session(turns, page)
        s.end_call = end_call
        other = session(Turns(), Page())
        other.owner = "bob"
        calls = Calls()
        calls.join(s)
        calls.join(other)
        await s.hear(heard("final", text="tell me a story"))
        while not page.audio:
            await asyncio.sleep(0.01)
        await calls.logout("local")
        return turns, page, ended, s

    turns, page, ended, s = asyncio.run(run())
    assert ended == ["you logged out; the call ends"]
    assert turns.stored == [("tell me a story", "stopped")] and s.turn is None
    assert "barge" in page.kinds()


def test_stop_on_the_conversation_ends_the_calls_reply_through_its_one_owner():
    """A call's turn is a task of the conversation's session, which alone cancels it: Stop
    there (the page's button, or the call's own, through the registry) ends the reply, kept
    as far as it was heard; the call tells the page to stop playing it and takes the next
    turn as before."""

    async def run():
        turns, page = Turns(words=40, word_s=0.05), Page()
        s = session(turns, page)
        await s.hear(heard("final", text="tell me a story"))
        while not page.audio:
            await asyncio.sleep(0.01)
        conversation = s.session()
        assert conversation.busy  # the session runs the call's turn: it is the owner
        await conversation.stop("Stop")
        stopped = (list(turns.stored), s.turn, conversation.stopped_why)
        turns.words = 2
        await s.hear(heard("final", n=2, text="and now?"))
        await s.hear(heard("closed", n=2))  # they did not go on: the turn is kept
        await s.turn.task
        return stopped, turns, page

    (stored, turn, why), turns, page = asyncio.run(run())
    assert stored == [("tell me a story", "stopped")] and turn is None and why == "Stop"
    barges = [m for m in page.said if m["kind"] == "barge"]
    assert [m["utterance"] for m in barges] == [1]
    assert {"kind": "done", "utterance": 1, "stopped": True} in page.said
    assert turns.stored[-1] == ("and now?", "done")
