"""The one session per open conversation (issue 34): it runs every turn as a task it keeps,
is the only thing that cancels one, and the registry gives every way in the same session by
one rule for which conversation it continues."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from assistant.call.calls import Calls
from assistant.errors import BadInput
from assistant.records import RouteDecision, TurnEvent, TurnResult
from assistant.session import Ask, Session, Sessions
from assistant.settings import Settings
from assistant.store.db import Store
from assistant.turns.conversations import Conversations


class SlowPipeline:
    """A pipeline whose turns stream a word every 20 ms; records how each ended."""

    def __init__(self, words: int = 50):
        self.words = words
        self.ended: list[str] = []
        self.requests: list[Ask] = []

    async def stream(self, request, **models):
        self.requests.append(request)
        how = "stopped"
        try:
            yield TurnEvent("route", decision=RouteDecision("chat", "test"))
            for i in range(self.words):
                await asyncio.sleep(0.02)
                yield TurnEvent("content", text=f"w{i} ")
            how = "done"
            yield TurnEvent("done", result=TurnResult("all", "chat", "test", "stop"))
        finally:
            self.ended.append(how)


async def _read(events, into: list[TurnEvent]) -> None:
    async with contextlib.aclosing(events) as stream:
        async for event in stream:
            into.append(event)


def test_a_newer_turn_stops_the_one_running_and_each_ends_once():
    async def run():
        pipeline = SlowPipeline()
        session = Session("alice", "c1", pipeline, Calls())  # type: ignore[arg-type]
        first: list[TurnEvent] = []
        reading = asyncio.create_task(_read(session.ask(Ask(text="one")), first))
        while len(first) < 3:
            await asyncio.sleep(0.01)
        second: list[TurnEvent] = []
        await _read(session.ask(Ask(text="two")), second)
        await reading
        return pipeline, session, first, second

    pipeline, session, first, second = asyncio.run(run())
    assert pipeline.ended == ["stopped", "done"]  # the first stopped where it was, once
    assert all(e.kind != "done" for e in first)
    assert second[-1].kind == "done"
    assert session.stopped_why is None and not session.busy


def test_the_session_fills_in_the_login_and_conversation_whatever_the_caller_set():
    async def run():
        pipeline = SlowPipeline(words=1)
        session = Session("alice", "c1", pipeline, Calls())  # type: ignore[arg-type]
        result = await session.run(Ask(text="hi", owner="mallory", conversation_id="c9"))
        return pipeline, result

    pipeline, result = asyncio.run(run())
    assert result is not None and result.reply == "all"
    (request,) = pipeline.requests
    assert (request.owner, request.conversation_id) == ("alice", "c1")


def test_a_reader_that_leaves_stops_the_turn_and_stop_ends_every_turn():
    async def run():
        pipeline = SlowPipeline()
        session = Session("alice", "c1", pipeline, Calls())  # type: ignore[arg-type]
        events = session.ask(Ask(text="one"))
        await anext(events)  # the route, then the client goes
        await events.aclose()
        left = list(pipeline.ended)
        # two /v1 requests at once (supersede=False), then Stop
        got: list[list[TurnEvent]] = [[], []]
        readers = [
            asyncio.create_task(_read(session.ask(Ask(text=t), supersede=False), got[i]))
            for i, t in enumerate(("a", "b"))
        ]
        while not all(len(g) >= 2 for g in got):
            await asyncio.sleep(0.01)
        assert session.busy
        await session.stop("Stop")
        await asyncio.gather(*readers)
        return pipeline, session, left

    pipeline, session, left = asyncio.run(run())
    assert left == ["stopped"]  # closed at once, not when the turn would have ended
    assert pipeline.ended == ["stopped", "stopped", "stopped"]
    assert session.stopped_why == "Stop" and not session.busy


def test_an_error_in_the_turn_reaches_the_reader():
    class Refusing:
        async def stream(self, request, **models):
            raise BadInput("the message is too long")
            yield  # pragma: no cover

    async def run():
        session = Session("alice", "c1", Refusing(), Calls())  # type: ignore[arg-type]
        await _read(session.ask(Ask(text="x" * 10)), [])

    with pytest.raises(BadInput, match="too long"):
        asyncio.run(run())


def test_a_spoken_turn_is_heard_in_the_logins_share_whoever_passes_the_model():
    # the page passes the plain speech model; the session, which knows the login, has it
    # heard in that login's share of the pool (issue 47: adapters hold no such policy)
    class Recording(SlowPipeline):
        async def stream(self, request, **models):
            self.stt = models.get("stt")
            async for event in super().stream(request, **models):
                yield event

    class Whisper:
        remote = False

    async def run():
        pipeline = Recording(words=1)
        session = Session("alice", "c1", pipeline, Calls())  # type: ignore[arg-type]
        await session.run(Ask(audio="a.flac"), stt=Whisper())
        return pipeline.stt

    heard_by = asyncio.run(run())
    assert heard_by.share_owner == "alice" and heard_by.remote is False


def test_one_rule_for_which_conversation_a_way_in_continues(tmp_path: Path):
    store = Store(tmp_path / "a.db")
    conversations = Conversations(store)
    sessions = Sessions(lambda: SlowPipeline(), conversations, Calls())  # type: ignore[arg-type, return-value]
    bobs = conversations.start("bob")
    new = sessions.of("alice", None, title="first question")
    assert conversations.get(new.conversation_id, "alice").title == "first question"  # type: ignore[arg-type, union-attr]
    assert sessions.of("alice", new.conversation_id) is new  # every way in: the same session
    assert sessions.of("alice", bobs).conversation_id not in (bobs, new.conversation_id)
    with pytest.raises(BadInput, match=f"no conversation {bobs}"):
        sessions.of("alice", bobs, strict=True)  # an id a client named: refused, not replaced
    # the page's first turn remembers its new conversation: a call and a reload reopen it
    page = sessions.of("carol", None, remember_new=True)
    assert sessions.saved("carol").conversation_id == page.conversation_id
    assert sessions.saved("dave").conversation_id != page.conversation_id
    assert sessions.none("alice").conversation_id is None  # housekeeping: no conversation
    store.close()


def test_the_pages_stop_stops_every_turn_of_its_conversation_and_no_other(tmp_path: Path):
    """Stop is one cancel, the session's: every turn running in the conversation ends, a call's
    reply (a task the session keeps: the call only speaks it) as well as the page's; the
    login's call answering in another conversation (a phone beside a desktop tab) and another
    login's call go on."""

    async def run():
        store = Store(tmp_path / "a.db")
        pipeline = SlowPipeline()
        conversations = Conversations(store)
        sessions = Sessions(lambda: pipeline, conversations, Calls())  # type: ignore[arg-type, return-value]
        session = sessions.of("alice", None)
        other = sessions.of("alice", None)  # her phone's call answers in another conversation
        bobs = sessions.of("bob", None)

        def call_turn(on: Session) -> asyncio.Task[None]:
            return on.keep(asyncio.Event().wait(), "call-turn")  # a reply being spoken

        alices, phone, bob = call_turn(session), call_turn(other), call_turn(bobs)
        got: list[TurnEvent] = []
        reading = asyncio.create_task(_read(session.ask(Ask(text="one")), got))
        while len(got) < 2:
            await asyncio.sleep(0.01)
        await sessions.stop("alice", session.conversation_id)
        await reading
        stopped = (alices.cancelled(), phone.done(), bob.done())
        again = call_turn(session)
        await sessions.stop("alice", None)  # a tab with no conversation yet, none saved: none
        unnamed = again.done()
        conversations.remember("alice", conversation=session.conversation_id)
        await sessions.stop("alice", None)  # now it names the saved one, its calls' conversation
        saved = again.cancelled()
        await other.stop()
        await bobs.stop()
        store.close()
        return pipeline, session, stopped, unnamed, saved

    pipeline, session, stopped, unnamed, saved = asyncio.run(run())
    assert pipeline.ended == ["stopped"] and session.stopped_why == "Stop"
    assert stopped == (True, False, False)
    assert not unnamed and saved


def test_who_is_asking_is_read_in_one_module():
    """One rule for who a request is (issue 34): the page's login, the call socket's cookie,
    `/v1`'s Bearer key and the command line's secret are read in `web/edge/identity.py` only."""
    markers = ("request.username", "access-token-", '.get("authorization"', "get(SECRET_HEADER")
    root = Path(__file__).resolve().parents[1] / "assistant"
    readers = {
        path.relative_to(root).as_posix()
        for path in root.rglob("*.py")
        for marker in markers
        if marker in path.read_text()
    }
    assert readers == {"web/edge/identity.py"}


def test_a_jobs_notice_goes_one_way_said_in_the_call_else_on_the_page():
    """Each ended job's notice is taken once: shown on the page, and said in the login's call
    when one is open (the page then plays nothing), else said by the page."""
    from assistant.records import Job
    from assistant.session.notices import Notices

    def job(jid, state, **fields):
        return Job(jid, "alice", "p", state, created_at=0, updated_at=0, **fields)

    class Queue:
        def __init__(self):
            self.ended = {"alice": [job("j1", "done", result="# The report\n...")]}

        def take_ended(self, owner):
            return self.ended.pop(owner, [])

    class Call:
        owner, conversation_id = "alice", "c1"

        def __init__(self):
            self.said: list[str] = []

        def announce(self, text):
            self.said.append(text)

    async def run():
        calls, call = Calls(), Call()
        notices = Notices(Queue(), calls)  # type: ignore[arg-type]
        calls.join(call)  # type: ignore[arg-type]
        first = await notices.deliver("alice", "c1")
        again = await notices.deliver("alice", "c1")
        calls.part(call)  # type: ignore[arg-type]
        notices.jobs.ended["alice"] = [job("j2", "failed", error="engine down")]
        no_call = await notices.deliver("alice", "c1")
        return first, again, no_call, call

    first, again, no_call, call = asyncio.run(run())
    assert first.shown == ["✅ Job j1 is done: The report"] and first.to_say == ""
    assert call.said == ["Your delegated job is done."]  # said in the call, once
    assert again.shown == [] and again.to_say == ""
    assert no_call.shown == ["❌ Job j2 failed: engine down"]
    assert no_call.to_say == "Your delegated job failed."  # no call: the page says it


class OpenCall:
    """A call open for the login: what the session told it to say."""

    def __init__(self, owner: str, conversation_id: str | None):
        self.owner, self.conversation_id = owner, conversation_id
        self.said: list[tuple[str, str]] = []

    async def say(self, text: str, source: str = "typed") -> None:
        self.said.append((text, source))


class HeardStt:
    """Speech to text that hears one sentence in any audio."""

    def transcribe(self, samples, **options):
        from assistant.records import Transcript

        return Transcript("and the weather?", "en", len(samples) / 16000, 1.0)


def test_the_pages_turn_during_a_call_is_the_calls_and_a_clients_never_is(tmp_path: Path):
    """The session, not the page, decides: while the login has a call open, a question typed
    or said with push-to-talk on the page is a turn of the call (answered aloud there, never
    played beside it into its microphone); a delegated one and a client's request are not;
    audio that cannot be heard is said so and reaches nobody."""
    import numpy as np

    from assistant.speech.audio import wav_bytes

    wav = tmp_path / "ptt.wav"
    wav.write_bytes(wav_bytes(np.zeros(8000, "<i2").tobytes(), 16000))

    async def run():
        pipeline, calls = SlowPipeline(words=1), Calls()
        pipeline.settings = Settings()  # the upload limits push-to-talk is heard within
        session = Session("alice", "c1", pipeline, calls)  # type: ignore[arg-type]
        call = OpenCall("alice", "c1")
        calls.join(call)  # type: ignore[arg-type]
        got: dict[str, list[TurnEvent]] = {k: [] for k in ("typed", "ptt", "bad", "deep", "api")}
        await _read(session.ask(Ask(text="what's the time?", from_page=True)), got["typed"])
        ptt = Ask(audio=str(wav), source="voice", from_page=True)
        await _read(session.ask(ptt, stt=HeardStt()), got["ptt"])
        bad = Ask(audio=b"not audio at all", source="voice", from_page=True)
        await _read(session.ask(bad, stt=HeardStt()), got["bad"])
        deep = Ask(text="plan my year", force_deep=True, from_page=True)
        await _read(session.ask(deep), got["deep"])
        await _read(session.ask(Ask(text="hi", source="api")), got["api"])
        return pipeline, call, got

    pipeline, call, got = asyncio.run(run())
    assert call.said == [("what's the time?", "typed"), ("and the weather?", "voice")]
    assert got["typed"] == [] and [(e.kind, e.text) for e in got["ptt"]] == [
        ("transcript", "and the weather?")
    ]
    (error,) = got["bad"]
    assert error.kind == "error" and error.text.startswith("I couldn't use that audio")
    assert [r.text for r in pipeline.requests] == ["plan my year", "hi"]
    assert got["deep"][-1].kind == got["api"][-1].kind == "done"


def test_a_delegated_task_is_a_job_of_the_sessions_login_and_conversation(tmp_path: Path):
    """The Gradio API's `delegate` queues work through the session, like every other way in:
    the job is the session's login's, and the same key gives it back."""
    from types import SimpleNamespace

    from assistant.jobs import JobQueue

    store = Store(tmp_path / "a.db")
    try:
        jobs = JobQueue(store, Settings())
        pipeline = SimpleNamespace(chat=SimpleNamespace(jobs=jobs))
        sessions = Sessions(lambda: pipeline, Conversations(store), Calls())  # type: ignore[arg-type, return-value]
        api = sessions.none("alice")
        first, again = api.delegate("a long task", "k1"), api.delegate("a long task", "k1")
        in_conversation = sessions.of("alice", None).delegate("another task")
        owned = [j.id for j in jobs.owned("alice")]
    finally:
        store.close()
    assert first.id == again.id and first.owner == in_conversation.owner == "alice"
    assert first.id != in_conversation.id
    assert sorted(owned) == sorted([first.id, in_conversation.id])
