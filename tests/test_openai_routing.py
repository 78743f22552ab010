"""`/v1` routes as the router does (issue 50, item 1): a client's messages are the conversation
the router reads, whether or not the app has the thread stored.

Each case is sent through `/v1/chat/completions` of a real app on the simulated engine, the
whole history each time as OpenAI clients send it, and its lane and reason must be those of
`Router.decide` on the same messages (as `scripts/eval_router.py --blind` scores it). The
conversations were written for this test, of the kinds the finding named; the router was not
tuned to them (what is checked is that the wire reads the conversation, not the lane).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import httpx
import pytest

from assistant.routing.conversation import Conversation
from assistant.routing.router import Router
from assistant.store.db import Store
from assistant.web.openai.route import MODEL
from tests.app_proc import App, run_app
from tests.simengine_proc import run_simengine
from tests.test_housekeeping import TEMPLATES, rendered

Message = dict[str, str]


def _u(text: str) -> Message:
    return {"role": "user", "content": text}


def _a(text: str) -> Message:
    return {"role": "assistant", "content": text}


WIKI = [
    _u("Is it worth moving our team's wiki from Confluence to Notion?"),
    _a("It can be, mostly for cost and editing speed, though search and permissions work "
       "differently. I could write up a full migration assessment covering costs, risks and a "
       "rollout plan, if that helps."),
]  # fmt: skip
SOLAR = [
    _u("how do solar panels degrade over time"),
    _a("Good panels lose about half a percent of output a year. I can prepare a detailed "
       "25-year yield projection for your roof, with shading and inverter swaps, if you'd "
       "like."),
]  # fmt: skip
IRA = [
    _u("what's the difference between a roth and a traditional ira"),
    _a("A Roth is taxed now and tax-free later; a traditional one is deducted now and taxed "
       "later. Want me to model both for your numbers over 30 years under a few tax "
       "scenarios?"),
]  # fmt: skip
KID = [
    _u("how do i get my kid into coding"),
    _a("Start with Scratch, then move to Python around age ten. Shall I put together a "
       "twelve-week curriculum with a small project each week?"),
]  # fmt: skip
BAKERY = [
    _u("Write me a business plan for a bakery"),
    _a("Happy to. Where will it be, and roughly what budget are you working with?"),
]
REVIEW = [
    _u("I need a literature review on microplastics in drinking water"),
    _a("Sure. Should it cover health effects, detection methods, or both? And how long?"),
]
PASSWORDS = [
    _u("Compile a competitive analysis of the top five password managers"),
    _a("I've handed this to the deep lane as a job; the analysis will show here when it's "
       "ready."),
]  # fmt: skip
GRANT = [
    _u("draft a grant proposal for our community garden"),
    _a("That is a job for the deep lane now: it is working on the proposal, and I'll post it "
       "here when it's done."),
]  # fmt: skip
ALTITUDE = [
    _u("What's the boiling point of water at altitude?"),
    _a("It drops about one degree Celsius for every 300 metres you climb, so at 3000 m water "
       "boils near 90 degrees."),
]  # fmt: skip
MUTEX = [
    _u("explain what a mutex is"),
    _a("A mutex is a lock that lets only one thread at a time run a section of code. A thread "
       "takes the lock before the section and gives it back after, and any other thread that "
       "wants it waits until then."),
]  # fmt: skip
TRIP = [
    _u("whats the weather usually like in porto in may"),
    _a("Mild: around 20 degrees by day, some rain early in the month."),
    _u("and is it walkable"),
    _a("Very, though hilly; the old town and the riverside are best on foot."),
    _u("good cheap places to eat?"),
    _a("Try a francesinha at a tasca near Bolhao market, or the bifanas at Conga."),
    _u("nice. how many days would you spend there"),
    _a("Three days covers the city; add a fourth for a Douro valley day trip."),
]
CASES: dict[str, tuple[list[Message], str]] = {
    # an offer accepted in other words
    "accept, plain": (WIKI, "yeah that'd be really useful actually"),
    "accept, with a fact": (IRA, "go on then, I earn about 85k and I'm 31"),
    "accept, spoken": (KID, "um yeah lets do that"),
    "accept, terse": (SOLAR, "sounds good, do it"),
    # a clarifying answer completing a big request
    "clarify, place and budget": (BAKERY, "Leeds city centre, about 60k of savings plus a loan"),
    "clarify, scope": (REVIEW, "both please, roughly 3000 words"),
    # a job's progress asked
    "job status, direct": (PASSWORDS, "any news on that?"),
    "job status, spoken": (GRANT, "is it nearly finished"),
    # an offer declined, deferred or questioned
    "decline": (WIKI, "no thanks, that's plenty for now"),
    "defer": (IRA, "maybe next week, I need to find my statements first"),
    "question the offer": (SOLAR, "how long would that take you?"),
    "ask what it holds": (KID, "what would the projects be like?"),
    # a short answer reshaped
    "reshape, table": (ALTITUDE, "can you put that in a table"),
    "reshape, shorter": (MUTEX, "shorter pls"),
    # a long conversation (more than three exchanges), then a small question and a big one
    "long, small": (TRIP, "and is the metro easy to use?"),
    "long, big": (TRIP, "plan the whole four days for me hour by hour with costs and bookings"),
}


@pytest.fixture(scope="module")
def router() -> Router:
    return Router.load().warm()


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    data = tmp_path_factory.mktemp("route")
    (data / "assistant.toml").write_text("max_jobs_per_user = 100\n")
    with run_simengine(
        "--token-ms", "1", "--answer-words", "12", "--slots", "8", "--auto-tool-choice"
    ) as url:
        with run_app(data, url) as running:
            yield running


@dataclass(frozen=True)
class Answer:
    lane: str
    reason: str
    """As the headers say them."""
    conversation: str | None
    reply: str
    job: str | None


def ask(app: App, messages: list[Message], **body: Any) -> Answer:
    """One request's decision and answer. A deep decision is handed off (`"wait": false`):
    its job runs on, unread."""
    r = httpx.post(
        app.url + "v1/chat/completions",
        json={"model": MODEL, "messages": messages, "wait": False, **body},
        timeout=120,
    )
    assert r.status_code == 200, r.text
    h, done = r.headers, r.json()
    assert done["assistant"]["lane"] == h["x-assistant-lane"]
    return Answer(
        h["x-assistant-lane"],
        unquote(h["x-assistant-reason"]),
        done["assistant"]["conversation_id"],
        done["choices"][0]["message"]["content"],
        h.get("x-assistant-job"),
    )


def decided(router: Router, messages: list[Message], job: str | None = None) -> tuple[str, str]:
    """`Router.decide` on the same messages, as `scripts/eval_router.py --blind` calls it."""
    turns = tuple((m["role"], m["content"]) for m in messages[:-1])
    before = Conversation(turns=turns, job=job)  # type: ignore[arg-type]
    d = router.decide(messages[-1]["content"], conversation=before)
    return d.lane, d.reason


def test_a_clients_history_the_app_never_stored_is_read_as_the_router_reads_it(
    app: App, router: Router
) -> None:
    differ = {}
    for name, (before, text) in CASES.items():
        messages = [*before, _u(text)]
        got = ask(app, messages)
        assert got.conversation is not None
        if (got.lane, got.reason) != decided(router, messages):
            differ[name] = ((got.lane, got.reason), decided(router, messages))
    assert not differ, differ


def test_a_stored_thread_continued_by_its_whole_history_is_read_as_the_router_reads_it(
    app: App, router: Router
) -> None:
    """The thread's last turn was answered and stored by the app, which finds it again by the
    history the client sends (as Open WebUI continues a chat); the client's messages, not
    the stored turns alone, are what the router reads."""
    differ = {}
    for name, (before, text) in CASES.items():
        seed = before[:-1]  # the earlier request, answered by the app: chat, as the client chose
        first = ask(app, seed, reasoning_effort="low")
        messages = [*seed, _a(first.reply), _u(text)]
        got = ask(app, messages)
        assert got.conversation == first.conversation is not None, name  # continued
        if (got.lane, got.reason) != decided(router, messages):
            differ[name] = ((got.lane, got.reason), decided(router, messages))
    assert not differ, differ


def test_a_stored_threads_job_is_read_with_the_clients_messages(app: App, router: Router) -> None:
    """A thread whose request the app handed off: asked about it, the client's messages are
    read with what the app knows besides them, the conversation's job (done here)."""
    messages = [_u("Delegate: compile a competitive analysis of the top five password managers")]
    first = ask(app, messages)
    assert first.lane == "deep" and first.job is not None
    store = Store(app.data_dir / "assistant.db")
    try:
        deadline = time.monotonic() + 120
        while (job := store.job(first.job)) is None or job.state != "done":
            assert time.monotonic() < deadline and (job is None or job.state != "failed"), job
            time.sleep(0.2)
    finally:
        store.close()
    for text in ("any news on that?", "is it finished", "great, now do the same for chat apps"):
        asked = [*messages, _a(first.reply), _u(text)]
        got = ask(app, asked)
        assert got.conversation == first.conversation, text
        assert (got.lane, got.reason) == decided(router, asked, job="done"), text


def test_housekeeping_with_a_conversation_inside_stays_chat_and_no_conversation(
    app: App,
) -> None:
    before, text = CASES["accept, plain"]
    chat = [(m["role"], m["content"]) for m in before] + [("user", text)]
    for key in ("title", "tags"):
        got = ask(app, [_u(rendered(TEMPLATES[key], chat))])
        assert (got.lane, got.conversation, got.job) == ("chat", None, None), key
        assert got.reason.startswith("client housekeeping"), got.reason
