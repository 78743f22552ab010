"""Routing reads the conversation (issue 30): an accepted offer, a follow-up, a question about
the running job, decided from the turns before the last message, without an engine call.

The multi-turn development set (`assistant/routing/conversation_dev.jsonl`, 264 cases) was
written for this issue by these rules, stated in docs/routing.md too:
- each case is one to two exchanges and a last message; an earlier request on a topic no other
  case uses; the assistant's reply is a short answer, a hand-off notice ("Handed off to the
  deep lane as job ...") or an answer that ends in an offer, phrased in one of the ways models
  phrase them ("Shall I ...?", "Want me to ...?", "I can ..., shall I?", "If you like, I can
  ...", "Let me know if you'd like me to ...");
- groups, with their lane: a large task offered and accepted (deep; with an addition, deep);
  a small thing offered and accepted (chat); an offer declined (chat); a clarifying question
  answered yes or no (chat); "the same for X" after deep work (deep) and after a quick
  question (chat); a refinement of delegated work (deep) and of a chat answer (chat); a
  question about a running or finished job (chat); a new request that ignores the offer (its
  own lane); a follow-up to work that was itself an accepted offer (deep);
- later groups in other words: K, written after the rules' first version was scored; L to O,
  each written after the rules and scored once before they changed for it (first scores in
  scripts/make_conversation_dev.py and the README: accuracy 0.82 to 0.92, deep recall 0.67 to
  0.86, the fair guess for phrasings nobody tuned the rules on);
- every third case of a group is spoken: lower case, no punctuation, a hesitation ("um",
  "uh", "er", "so", "like", "you know") at the start of a short message or after its third
  word;
- nothing trains on it (the heads are unchanged by it), and no request in it repeats or nearly
  repeats a training line (checked below with the training script's own twin test; the
  conversation classifier's training leaves out conversations that would, issue 37).
It was written beside the rules, so its figures are development figures, not held-out ones.

Tests marked `model` run the real MiniLM encoder and the shipped head.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from assistant.cli import main as cli_main
from assistant.engine.lanes import LaneScheduler
from assistant.jobs import JobQueue
from assistant.prompting.prompt import Prompts
from assistant.records import Message, StreamEvent
from assistant.routing.batch import RouteBatcher
from assistant.routing.conversation import Conversation, find_offer, read
from assistant.routing.router import Router
from assistant.settings import LaneConfig
from assistant.store.db import Store
from assistant.turns.chat import ChatService
from assistant.turns.pipeline import Pipeline, TurnRequest
from assistant.web.openai.wire import parse
from scripts.eval_router import CONVERSATIONS, load_conversations, score_conversations
from scripts.train_router import training_set, twins
from tests.fakes import FakeEngine

PLAN = "draft the whole migration plan with timelines"
OFFER = f"Test with pgloader on a copy first. I can {PLAN}, shall I?"
ASKED = "is postgres faster than mysql?"
OFFERED = Conversation.of_exchanges([(ASKED, OFFER)])


@pytest.fixture(scope="module")
def router() -> Router:
    return Router.load().warm()


# --- the development set -------------------------------------------------------------------


def test_dev_set_covers_both_lanes_every_rule_and_speech():
    cases = load_conversations()
    deep = [c["lane"] == "deep" for c in cases]
    assert len(cases) >= 100 and 0.4 <= sum(deep) / len(cases) <= 0.6
    assert sum(c["style"] == "spoken" for c in cases) >= len(cases) / 4
    assert len({c["rule"][0] for c in cases}) == 15  # groups A to O
    assert all(c["turns"] and c["turns"][-1][0] == "assistant" for c in cases)
    assert len({json.dumps([c["turns"], c["text"]]) for c in cases}) == len(cases)


def test_dev_set_is_apart_from_the_training_data():
    """No request of the set (earlier requests, and last messages of four words or more: a
    "yes please" is decided by the rules, not learned) is, or nearly is, a training line."""
    cases = load_conversations()
    asked = {t for c in cases for r, t in c["turns"] if r == "user"}
    asked |= {c["text"] for c in cases if len(c["text"].split()) >= 4}
    assert len(asked) >= 150
    assert not twins(training_set()[0], sorted(asked))


@pytest.mark.model
def test_figures_on_the_multi_turn_set(router: Router):
    """With the conversation read, accuracy at least 0.95 and deep recall at least 0.98 (issue
    30 held the rules written beside this set to 0.98; issue 37's learned classifier, never
    tuned on it, scored 0.973 / 0.979 and the floor was lowered to 0.96; issue 50 put it back:
    0.985 / 0.986, 139 of 141 deep); the last message alone scores far lower."""
    cases = load_conversations(CONVERSATIONS)
    read_ = score_conversations(router, cases)
    alone = score_conversations(router, cases, read=False)
    print(f"\nmulti-turn: accuracy {read_.accuracy:.3f}, deep recall {read_.deep_recall:.3f}")
    print(f"last message alone: {alone.accuracy:.3f}, deep recall {alone.deep_recall:.3f}")
    assert read_.accuracy >= 0.95 and read_.deep_recall >= 0.98, read_.misses
    assert alone.accuracy < 0.8 and alone.deep_recall < 0.6


@pytest.mark.model
def test_single_message_sets_are_no_worse(router: Router):
    """The rules need turns before the message: on single requests the router is the one
    it was (the figures tests/test_router_spoken.py holds; here with an empty conversation)."""
    from assistant.routing.router import load_examples
    from scripts.eval_router import score
    from scripts.train_router import SPOKEN_DEV, SPOKEN_EVAL, TYPED_DEV

    for path, acc, recall in ((TYPED_DEV, 0.98, 1.0), (SPOKEN_DEV, 0.98, 0.98),
                              (SPOKEN_EVAL, 0.97, 0.98)):  # fmt: skip
        texts, deep = load_examples(path)
        s = score(router, texts, deep)
        empty = [router.decide(t, conversation=Conversation()).lane == "deep" for t in texts]
        assert s.accuracy >= acc and s.deep_recall >= recall, (path.name, s.misses)
        assert empty == [d == "deep" for d in (router.decide(t).lane for t in texts)]


# --- the rules -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "task"),
    [
        (OFFER, PLAN),
        ("Want me to write the full report with charts?", "write the full report with charts"),
        ("If you like, I can write the migration script.", "write the migration script"),
        (
            "Let me know if you'd like me to put together a comparison of all five vendors.",
            "put together a comparison of all five vendors",
        ),
        ("Shall I draft the data retention policy?", "draft the data retention policy"),
        ("Do you mean Paris, France?", None),
        ("It's 20 degrees and sunny.", None),
        ("I can't make bookings, sorry.", None),
    ],
)  # fmt: skip
def test_find_offer(reply: str, task: str | None):
    assert find_offer(reply) == task


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("ok do it", "accepts the offer"),
        ("yes please", "accepts the offer"),
        ("um yeah go ahead", "accepts the offer"),
        ("sure, and include rollback steps", "accepts the offer"),
        ("no thanks", "declines the offer"),
        ("thanks", None),  # thanks is no yes
        ("what's the capital of peru?", None),
    ],
)
def test_reading_an_answer_to_an_offer(text: str, reason: str | None):
    found = read(text, OFFERED)
    assert (found.reason.split(" to ")[0] if found else None) == reason


def test_a_clients_whole_history_is_read():
    """All of it, as `Router.decide` is scored: the classifier reads the conversation's length
    and every earlier hand-off notice (issue 50: the last three exchanges were kept)."""
    pairs = [(f"question {i}", f"answer {i}") for i in range(5)]
    conversation = Conversation.of_exchanges(pairs)
    assert len(conversation.turns) == 10 and conversation.turns[0] == ("user", "question 0")
    rows = [{"role": r, "content": t} for r, t in conversation.turns]
    assert Conversation.of_messages(rows).turns == conversation.turns


def test_no_conversation_no_rule():
    assert read("ok do it", None) is None and read("ok do it", Conversation()) is None
    assert read("yes please", Conversation.of_exchanges([("hi", "Hello! How are you?")])) is None


def test_a_status_question_needs_a_job():
    handed = Conversation.of_exchanges([("write a market study", "Sure, here goes.")])
    assert read("how's it coming along?", handed) is None
    running = Conversation.of_exchanges([("write a market study", "Sure.")], job="running")
    assert read("how's it coming along?", running).reason == "asks about the running job"


@pytest.mark.model
def test_ok_do_it_after_an_offer_starts_the_offered_task(router: Router, monkeypatch):
    alone = router.decide("ok do it")
    assert alone.lane == "chat"  # the message alone: small talk
    passes: list[list[str]] = []
    encoder = router.encoder

    class Counting:
        def encode(self, texts, **kw):
            passes.append(list(texts))
            return encoder.encode(texts, **kw)

    monkeypatch.setattr(router, "encoder", Counting())
    d = router.decide("ok do it", conversation=OFFERED)
    assert d.lane == "deep"
    assert d.reason.startswith(f"accepts the offer to {PLAN[:20]}") and "(conversation" in d.reason
    assert d.text.startswith(PLAN.capitalize()) and ASKED in d.text
    assert len(passes) <= 1 and d.ms > 0, passes  # no engine call: one encoder pass at most


@pytest.mark.model
def test_follow_ups_inherit_the_earlier_requests_lane(router: Router):
    research = Conversation.of_exchanges(
        [("research the rental market in munich for a two-bedroom flat, by district", "On it.")]
    )
    weather = Conversation.of_exchanges([("what's the weather in munich?", "Sunny, 22.")])
    deep = router.decide("now do the same for Berlin", conversation=research)
    chat = router.decide("now do the same for Berlin", conversation=weather)
    assert (deep.lane, chat.lane) == ("deep", "chat")
    assert deep.reason.startswith("asks the same for Berlin as the earlier request (conversation")
    assert "rental market in munich" in deep.text and "Berlin" in deep.text
    done = Conversation.of_exchanges(
        [("write a lesson plan on photosynthesis with activities", "Handed off as job x1.")],
        job="done",
    )
    refine = router.decide("make it shorter and add a worksheet", conversation=done)
    status = router.decide("how's it coming along?", conversation=done)
    assert refine.lane == "deep" and refine.reason.startswith("refines the earlier request")
    assert status.lane == "chat" and status.reason.startswith("asks about the delegated job")


def test_the_last_answer_in_another_shape_stays_on_the_chat_lane(router: Router):
    # "and in one line?" after a report is not the report again for a place called "one
    # line": the chat lane has the answer in its history (Open WebUI's follow-up was a job)
    report = Conversation.of_exchanges(
        [("Delegate: write a long report on rivers.", "Rivers shape the land ...")]
    )
    for shape in ("Thanks! And in one line?", "and in plain English", "and in two sentences?"):
        d = router.decide(shape, conversation=report)
        assert d.lane == "chat" and d.reason.startswith("asks for the last answer in"), shape
    berlin = router.decide("And in Berlin?", conversation=report)
    assert berlin.lane == "deep" and "Berlin" in berlin.reason


@pytest.mark.model
async def test_batched_decisions_read_each_turns_conversation(router: Router):
    batcher = RouteBatcher()
    got = await asyncio.gather(
        batcher.decide(router, "ok do it", conversation=OFFERED),
        batcher.decide(router, "ok do it"),
        batcher.decide(router, "write a compiler for a small language in rust with tests"),
    )
    assert [d.lane for d in got] == ["deep", "chat", "deep"]
    assert got[0].text.startswith(PLAN.capitalize())


# --- every way in: stored turns, /v1, the CLI -------------------------------------------------


class OfferingEngine(FakeEngine):
    """Answers every chat request with `reply`."""

    def __init__(self, reply: str):
        super().__init__()
        self.reply = reply

    async def stream(  # type: ignore[override]
        self, messages: list[Message], lane: LaneConfig, **kw: object
    ) -> AsyncIterator[StreamEvent]:
        self.requests.append((lane.name, messages))
        yield StreamEvent("content", text=self.reply, tokens=len(self.reply.split()))
        yield StreamEvent("finish", finish_reason="stop")


def _pipeline(settings, router: Router, reply: str = OFFER) -> Pipeline:
    store = Store(settings.db_path)
    chat = ChatService(
        settings=settings,
        engine=OfferingEngine(reply),
        scheduler=LaneScheduler(deep_max_in_flight=2),
        router=router,
        store=store,
        prompts=Prompts.load(),
        jobs=JobQueue(store, settings),
    )
    return Pipeline(chat, settings, log_to=store)


@pytest.mark.model
async def test_an_offer_is_stored_with_its_turn_and_a_yes_delegates_it(settings, router):
    turns = _pipeline(settings, router)
    store = turns.chat.store
    cid = store.new_conversation("ann")
    first = await turns.ask(ASKED, owner="ann", conversation_id=cid)
    assert first.lane == "chat" and first.offer == PLAN
    assert store.turns(cid)[0][1].offer == PLAN  # kept with the turn (migration 5)
    yes = await turns.ask("ok do it", owner="ann", conversation_id=cid)
    assert yes.lane == "deep" and yes.job_id and yes.reason.startswith("accepts the offer")
    job = store.job(yes.job_id)
    assert job.prompt.startswith(PLAN.capitalize()) and "ok do it" not in job.prompt
    # and the job now running, a question about it is small talk
    status = await turns.ask("is it done yet?", owner="ann", conversation_id=cid)
    assert status.lane == "chat" and status.reason.startswith("asks about the running job")


@pytest.mark.model
async def test_v1_messages_are_the_conversation(settings, router):
    body = {
        "model": "assistant",
        "messages": [
            {"role": "user", "content": ASKED},
            {"role": "assistant", "content": OFFER},
            {"role": "user", "content": "yes please"},
        ],
    }
    ask = parse(body, {}, settings)
    turns = _pipeline(settings, router, reply="Sure.")
    request = TurnRequest(text=ask.text, owner="ann", history=ask.history)
    result = await turns.run(request)
    assert result.lane == "deep" and result.reason.startswith("accepts the offer")
    assert turns.chat.store.job(result.job_id).prompt.startswith(PLAN.capitalize())
    # the same message with no history before it: the message alone decides, as before
    alone = await turns.run(TurnRequest(text="yes please", owner="ann"))
    assert alone.reason.startswith("classifier")


@pytest.mark.model
def test_cli_route_with_history(tmp_path: Path, capsys, monkeypatch):
    monkeypatch.setenv("ASSISTANT_DATA_DIR", str(tmp_path))
    history = tmp_path / "history.json"
    history.write_text(
        json.dumps([{"role": "user", "content": ASKED}, {"role": "assistant", "content": OFFER}])
    )
    assert cli_main(["route", "--json", "--history", str(history), "ok do it"]) == 0
    assert cli_main(["route", "--json", "ok do it"]) == 0
    with_history, alone = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert with_history["lane"] == "deep" and with_history["reason"].startswith("accepts the offer")
    assert alone["lane"] == "chat"
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert cli_main(["route", "--history", str(bad), "ok"]) == 1


def test_the_page_shows_an_offer_under_its_reply():
    from assistant.records import TurnResult
    from assistant.web.page.turns import meta_line

    line = meta_line(TurnResult("... shall I?", "chat", "classifier 0.90", "stop", offer=PLAN))
    assert f"offer: {PLAN} (say yes to hand it off)" in line
    assert "offer" not in meta_line(TurnResult("Hi.", "chat", "classifier 0.90", "stop"))


@pytest.mark.parametrize(
    "text",
    [
        "yes please " * 40,
        "ok " * 2000,
        "now " * 200 + "do the same for x",
        "and " * 500 + "make it",
    ],
)
def test_long_messages_are_read_fast(text: str, monkeypatch):
    """A yes can split into the rules' alternatives in many ways: matched whole, 40 repeats
    took minutes. Only a yes's first words are matched, so any message is read at once:
    checked by what the rules' patterns are given (how fast is the router bench's figure)."""
    import re

    from assistant.routing import conversation

    given: dict[str, list[int]] = {}  # pattern name: words of each text it was given

    class Spy:
        def __init__(self, name: str, pattern: re.Pattern) -> None:
            self.name, self.pattern = name, pattern

        def __getattr__(self, attr: str):
            method = getattr(self.pattern, attr)

            def spied(*args, **kw):
                text = args[1] if attr in ("sub", "subn") else args[0]
                given.setdefault(self.name, []).append(len(str(text).split()))
                return method(*args, **kw)

            return spied

    for name, value in vars(conversation).items():
        if isinstance(value, re.Pattern):
            monkeypatch.setattr(conversation, name, Spy(name, value))
    read(text, OFFERED)
    # the whole message is cleaned (one linear pass each) and what follows a yes is checked
    # for an opening "and" (anchored); every other pattern sees a yes's first words only
    whole = {"_THUMBS", "_HESITATION", "_ADD_START"}
    assert whole - {"_ADD_START"} <= set(given), given
    for name, words in given.items():
        assert len(words) <= conversation._YES_WORDS, (name, len(words))
        assert name in whole or max(words) <= conversation._YES_WORDS, (name, max(words))


@pytest.mark.model
async def test_a_follow_up_to_a_stored_job_carries_the_earlier_task(settings, router):
    turns = _pipeline(settings, router, reply="Sure.")
    store = turns.chat.store
    cid = store.new_conversation("ann")
    research = "research the rental market in munich for a two-bedroom flat, by district"
    first = await turns.ask(research, owner="ann", conversation_id=cid)
    assert first.lane == "deep" and first.job_id
    again = await turns.ask("now do the same for Berlin", owner="ann", conversation_id=cid)
    assert again.lane == "deep" and again.reason == (
        "asks the same for Berlin as the earlier request (deep lane)"
    )
    prompt = store.job(again.job_id).prompt
    assert prompt.startswith(research) and prompt.endswith("now do the same for Berlin")


def test_a_long_history_is_read_within_bounds_and_still_decided_by_its_ends(router):
    # a client's history is its own to make as long as it likes: one 1 MB reply ("<think>" x
    # 150,000, issue 38's worst input) held the app's event loop 1.5 s for one decision once
    # /v1 read the conversation classifier (issue 50); the offer at a long reply's end and a
    # long request's start are what the router reads of them
    from assistant.routing.conversation import READ_CHARS

    offer = "Would you like me to draft the full migration plan with every step?"
    msgs = [
        {"role": "user", "content": "how do I move our database to postgres? " + "x " * 50_000},
        {"role": "assistant", "content": "<think>" * 150_000 + " " + offer},
    ]
    conv = Conversation.of_messages(msgs)
    assert [len(t) for _, t in conv.turns] == [READ_CHARS, READ_CHARS]
    assert conv.turns[0][1].startswith("how do I move") and conv.turns[1][1].endswith(offer)
    same = Conversation.of_exchanges([(msgs[0]["content"], msgs[1]["content"])])
    assert same.turns == conv.turns  # stored threads and a client's messages read alike
    short = Conversation.of_messages(
        [{"role": "user", "content": "how do I move our database to postgres?"},
         {"role": "assistant", "content": "A few steps. " + offer}]
    )  # fmt: skip
    assert router.decide("yes please", conversation=conv).lane == "deep"
    assert router.decide("yes please", conversation=short).lane == "deep"
