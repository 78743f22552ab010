"""The OpenAI-compatible endpoint (`/v1/chat/completions`, `/v1/models`), driven by the official
`openai` library against the running app on the simulated engine: streaming and not, a deep
request answered from its job and one handed off, errors, admission, logins and their
isolation, and a second app that uses the first as its engine.

Fast-tier tests at the end check the request parsing, the gate and the conversation matching
without a process.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai import AsyncOpenAI, OpenAI
from starlette.requests import Request

from assistant.store.db import Store
from assistant.web.edge.security import LoginThrottle
from assistant.web.openai.route import (
    MODEL,
    ApiError,
    Gate,
    Threads,
    exchanges,
    parse,
    unsent,
)
from tests.app_proc import App, run_app
from tests.simengine_proc import run_simengine

USERS = {"ann": "pw-ann-1", "bob": "pw-bob-1"}
AUTH = ",".join(f"{u}:{p}" for u, p in USERS.items())
MAX_TEXT = 2000
MAX_QUEUE = 3


@pytest.fixture(scope="module")
def sim() -> Iterator[str]:
    # 30-word answers at 10 ms a token: a turn takes ~0.3 s, long enough to overlap others
    with run_simengine(
        "--token-ms", "10", "--answer-words", "30", "--slots", "8", "--auto-tool-choice"
    ) as url:
        yield url


def config(data: Path) -> Path:
    data.mkdir(parents=True, exist_ok=True)
    (data / "assistant.toml").write_text(
        f"max_text_chars = {MAX_TEXT}\nmax_queue = {MAX_QUEUE}\nmax_jobs_per_user = 20\n"
    )
    return data


@pytest.fixture(scope="module")
def app(sim: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    """No login: loopback clients only, everyone is "local"."""
    with run_app(config(tmp_path_factory.mktemp("open")), sim) as running:
        yield running


@pytest.fixture(scope="module")
def guarded(sim: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    with run_app(config(tmp_path_factory.mktemp("guarded")), sim, ASSISTANT_AUTH=AUTH) as running:
        yield running


def client(app: App, key: str = "unused", **kw: Any) -> OpenAI:
    return OpenAI(base_url=app.url + "v1", api_key=key, max_retries=0, timeout=60, **kw)


def stored(app: App, owner: str) -> dict[str, list[tuple[str, Any]]]:
    """owner's conversations in the app's store: {id: [(request, result), ...]}."""
    store = Store(app.data_dir / "assistant.db")
    try:
        return {c.id: store.turns(c.id) for c in store.conversations(owner)}
    finally:
        store.close()


def conversation_rows(app: App) -> int:
    store = Store(app.data_dir / "assistant.db")
    try:
        return len(store._query("SELECT id FROM conversations"))
    finally:
        store.close()


QUESTION = "What is the capital of France?"


# --- no login: the local user -------------------------------------------------------------


def test_models_lists_the_assistant(app: App) -> None:
    assert [m.id for m in client(app).models.list()] == [MODEL]


def test_a_chat_turn_not_streamed_says_its_lane_and_is_stored(app: App) -> None:
    raw = client(app).chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": QUESTION}]
    )
    done = raw.parse()
    assert raw.headers["x-assistant-lane"] == "chat"
    assert raw.headers["x-assistant-reason"].startswith("classifier 0.")
    assert "You said" in done.choices[0].message.content
    assert done.choices[0].finish_reason == "stop"
    extra = done.model_extra["assistant"]
    assert extra["lane"] == "chat" and extra["reason"] == raw.headers["x-assistant-reason"]
    assert extra["conversation_id"] == raw.headers["x-assistant-conversation"]
    assert done.usage.completion_tokens > 0
    turns = stored(app, "local")[extra["conversation_id"]]
    assert [(u, r.reply, r.lane) for u, r in turns] == [
        (QUESTION, done.choices[0].message.content, "chat")
    ]


def test_a_streamed_turn_comes_in_standard_chunks_ending_with_the_decision(app: App) -> None:
    with client(app).chat.completions.with_streaming_response.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Name a primary colour."}],
        stream=True,
        stream_options={"include_usage": True},
    ) as raw:
        assert raw.headers["x-assistant-lane"] == "chat"
        assert raw.headers["content-type"].startswith("text/event-stream")
        chunks = list(raw.parse())
    contents = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    # in pieces as they come (several tokens a piece: one write per 50 ms), not one lump
    assert len(contents) > 1
    assert chunks[0].choices[0].delta.role == "assistant"
    final = next(c for c in chunks if c.choices and c.choices[0].finish_reason)
    assert final.choices[0].finish_reason == "stop"
    assert final.model_extra["assistant"]["lane"] == "chat"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    cid = final.model_extra["assistant"]["conversation_id"]
    assert stored(app, "local")[cid][0][1].reply == "".join(contents)


def test_the_history_comes_from_the_request_and_continues_one_conversation(app: App) -> None:
    oa = client(app)
    messages: list[dict[str, str]] = [
        {"role": "system", "content": "You are a pirate."},  # not used: the app's own leads
        {"role": "user", "content": "Tell me about Lyon."},
    ]
    ids = []
    for follow_up in ("And about its food?", "And its rivers?"):
        done = oa.chat.completions.create(model=MODEL, messages=messages)
        ids.append(done.model_extra["assistant"]["conversation_id"])
        messages += [
            {"role": "assistant", "content": done.choices[0].message.content},
            {"role": "user", "content": follow_up},
        ]
    done = oa.chat.completions.create(model=MODEL, messages=messages)
    ids.append(done.model_extra["assistant"]["conversation_id"])
    assert len(set(ids)) == 1  # one conversation in the sidebar, three turns
    turns = stored(app, "local")[ids[0]]
    assert [u for u, _ in turns] == [
        "Tell me about Lyon.",
        "And about its food?",
        "And its rivers?",
    ]


def test_a_deep_request_that_asks_for_the_handoff_gets_the_job_id(app: App) -> None:
    raw = client(app).chat.completions.with_raw_response.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Delegate: write a long report on rivers."}],
        extra_body={"wait": False},
    )
    done = raw.parse()
    extra = done.model_extra["assistant"]
    assert raw.headers["x-assistant-lane"] == "deep"
    assert raw.headers["x-assistant-reason"] == "cue: 'delegate'"
    assert extra["job_id"] and raw.headers["x-assistant-job"] == extra["job_id"]
    assert extra["job_id"] in done.choices[0].message.content
    assert "Handed off" in done.choices[0].message.content
    store = Store(app.data_dir / "assistant.db")
    try:
        job = store.job(extra["job_id"])
    finally:
        store.close()
    assert job is not None and job.owner == "local" and "report on rivers" in job.prompt


def test_a_deep_request_streams_its_jobs_reasoning_and_answer(app: App) -> None:
    stream = client(app).chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Think hard about why the sky is blue."}],
        stream=True,
    )
    chunks = list(stream)
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    reasoning = "".join((d.model_extra or {}).get("reasoning") or "" for d in deltas)
    content = "".join(d.content or "" for d in deltas)
    assert reasoning.split()  # the engine's reasoning, streamed as `reasoning` deltas
    assert "You said" in content and "Handed off" not in content
    extra = next(c for c in chunks if c.choices and c.choices[0].finish_reason).model_extra
    job_id = extra["assistant"]["job_id"]
    assert extra["assistant"]["lane"] == "deep" and job_id
    store = Store(app.data_dir / "assistant.db")
    try:
        job = store.job(job_id)
    finally:
        store.close()
    # it ran as a job on the deep lane (the Jobs panel has it), and this reply is its answer
    assert job is not None and job.state == "done" and job.result.strip() in content
    # asking to wait changes nothing; not streamed, the same answer comes whole
    raw = client(app).chat.completions.with_raw_response.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Delegate: explain tides."}],
        extra_headers={"X-Assistant-Wait": "true"},
    )
    assert raw.headers["x-assistant-lane"] == "deep" and raw.headers["x-assistant-job"]
    assert "You said" in (raw.parse().choices[0].message.content or "")


def test_reasoning_effort_chooses_the_lane_itself(app: App) -> None:
    oa = client(app)
    low = oa.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Delegate: write a long report on rivers."}],
        reasoning_effort="low",
    )
    assert low.headers["x-assistant-lane"] == "chat"
    assert low.headers["x-assistant-reason"] == "explicit: reasoning_effort low"
    high = oa.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": "hi"}], reasoning_effort="high"
    )
    # the answer itself, from the deep lane, not a job id
    assert high.headers["x-assistant-lane"] == "deep" and "x-assistant-job" not in high.headers
    assert "You said" in high.parse().choices[0].message.content


def test_the_chat_model_asking_to_delegate_streams_its_words_then_its_jobs_answer(
    app: App,
) -> None:
    stream = client(app).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "SIMDELEGATE hi there"}], stream=True
    )
    chunks = list(stream)
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    content = "".join(d.content or "" for d in deltas)
    reasoning = "".join((d.model_extra or {}).get("reasoning") or "" for d in deltas)
    extra = next(c for c in chunks if c.choices and c.choices[0].finish_reason).model_extra
    assert extra["assistant"]["reason"] == "model asked to delegate"
    assert extra["assistant"]["lane"] == "deep" and extra["assistant"]["job_id"]
    assert reasoning.split() and "You said" in content and "Handed off" not in content
    # asking for the hand-off: the model's words and the job id
    stream = client(app).chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "SIMDELEGATE hi there"}],
        stream=True,
        extra_body={"wait": False},
    )
    chunks = list(stream)
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    extra = next(c for c in chunks if c.choices and c.choices[0].finish_reason).model_extra
    assert extra["assistant"]["reason"] == "model asked to delegate"
    assert extra["assistant"]["job_id"] in content and content.rstrip().endswith("done.")


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"model": "gpt-4o"}, openai.NotFoundError, "does not exist"),
        ({"messages": [{"role": "user", "content": "x" * (MAX_TEXT + 1)}]},
         openai.BadRequestError, "too long"),
        ({"messages": [{"role": "user", "content": "   "}]}, openai.BadRequestError, "empty"),
        ({"messages": [{"role": "assistant", "content": "hi"}]},
         openai.BadRequestError, "last message"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
         openai.BadRequestError, "only text"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("stream", [False, True])
def test_bad_requests_get_openai_errors(
    app: App, kwargs: dict, error: type, words: str, stream: bool
) -> None:
    ask = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], **kwargs}
    before = conversation_rows(app)
    with pytest.raises(error) as caught:
        out = client(app).chat.completions.create(**ask, stream=stream)
        list(out) if stream else None
    assert words in caught.value.message
    assert caught.value.body["message"] and caught.value.body["type"]  # {"error": {...}}
    assert conversation_rows(app) == before  # no empty conversation left behind


def test_not_json_and_too_big_bodies_are_refused(app: App) -> None:
    r = httpx.post(app.url + "v1/chat/completions", content=b"{not json", timeout=10)
    assert r.status_code == 400 and "not JSON" in r.json()["error"]["message"]
    huge = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "x" * 3_000_000}]})
    r = httpx.post(app.url + "v1/chat/completions", content=huge, timeout=30)
    assert r.status_code == 413


def test_excess_requests_are_refused_with_429_and_retry_after(app: App) -> None:
    async def one(oa: AsyncOpenAI, i: int) -> Any:
        try:
            return await oa.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": f"Count to ten, please ({i})"}]
            )
        except openai.RateLimitError as e:
            return e

    async def burst() -> list[Any]:
        oa = AsyncOpenAI(base_url=app.url + "v1", api_key="x", max_retries=0, timeout=60)
        return list(await asyncio.gather(*(one(oa, i) for i in range(MAX_QUEUE * 3))))

    out = asyncio.run(burst())
    refused = [e for e in out if isinstance(e, openai.RateLimitError)]
    answered = [c for c in out if not isinstance(c, Exception)]
    assert refused and len(answered) >= MAX_QUEUE
    assert all(int(e.response.headers["retry-after"]) >= 1 for e in refused)
    assert all(e.body["code"] == "busy" for e in refused)
    # and the app keeps answering
    assert (
        client(app)
        .chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "still there?"}]
        )
        .choices[0]
        .message.content
    )


def test_a_client_leaving_mid_stream_stops_the_turn_keeps_it_and_frees_its_place(
    app: App,
) -> None:
    text = "Tell me a long story about a lighthouse keeper."
    body = {"model": MODEL, "messages": [{"role": "user", "content": text}], "stream": True}
    with httpx.stream("POST", app.url + "v1/chat/completions", json=body, timeout=30) as r:
        assert r.status_code == 200
        first = next(r.iter_lines())
        assert first.startswith("data: ")
    # the app noticed: the turn is stored as stopped, with what had streamed
    deadline = time.monotonic() + 20
    kept = None
    while time.monotonic() < deadline and kept is None:
        for turns in stored(app, "local").values():
            kept = next((r for u, r in turns if u == text), kept)
        time.sleep(0.2)
    assert kept is not None and kept.incomplete and "stopped" in (kept.error or "")

    # and its place is free again: MAX_QUEUE requests at once are all answered
    async def burst() -> list[Any]:
        oa = AsyncOpenAI(base_url=app.url + "v1", api_key="x", max_retries=0, timeout=60)
        ask = [{"role": "user", "content": "hello"}]
        return await asyncio.gather(
            *(oa.chat.completions.create(model=MODEL, messages=ask) for _ in range(MAX_QUEUE))
        )

    assert all(c.choices[0].message.content for c in asyncio.run(burst()))


def test_a_forwarded_request_is_not_loopback(app: App) -> None:
    oa = client(app, default_headers={"X-Forwarded-For": "203.0.113.9"})
    # refused at the edge, before the route (issue 26): the reason says what to set
    with pytest.raises(openai.PermissionDeniedError, match="ASSISTANT_AUTH"):
        oa.models.list()


def test_the_page_lists_api_conversations(app: App) -> None:
    """The sidebar's list is the store's per-login list: API turns are in it."""
    done = client(app).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "A title for the sidebar"}]
    )
    cid = done.model_extra["assistant"]["conversation_id"]
    from assistant.turns.conversations import Conversations

    store = Store(app.data_dir / "assistant.db")
    try:
        listed = {c.id: c.title for c in Conversations(store).listed("local")}
    finally:
        store.close()
    assert listed[cid] == "A title for the sidebar"


# --- with logins ----------------------------------------------------------------------------


def test_with_logins_a_bearer_login_is_needed(guarded: App) -> None:
    with pytest.raises(openai.AuthenticationError):
        client(guarded, "nobody").models.list()
    with pytest.raises(openai.AuthenticationError, match="wrong"):
        client(guarded, "ann:wrong").models.list()
    assert [m.id for m in client(guarded, f"ann:{USERS['ann']}").models.list()] == [MODEL]


def test_each_login_has_its_own_conversations(guarded: App) -> None:
    ann = client(guarded, f"ann:{USERS['ann']}")
    bob = client(guarded, f"bob:{USERS['bob']}")
    first = [{"role": "user", "content": "My secret is 42."}]
    done = ann.chat.completions.create(model=MODEL, messages=first)
    cid = done.model_extra["assistant"]["conversation_id"]
    # bob sends the very same history: it continues a conversation of his own, not ann's
    history = [*first, {"role": "assistant", "content": done.choices[0].message.content},
               {"role": "user", "content": "What was it?"}]  # fmt: skip
    theirs = bob.chat.completions.create(model=MODEL, messages=history)
    assert theirs.model_extra["assistant"]["conversation_id"] != cid
    # nor can he name ann's conversation
    with pytest.raises(openai.NotFoundError):
        bob.chat.completions.create(
            model=MODEL, messages=history, extra_headers={"X-Assistant-Conversation": cid}
        )
    assert cid in stored(guarded, "ann") and cid not in stored(guarded, "bob")
    mine = ann.chat.completions.create(model=MODEL, messages=history)
    assert mine.model_extra["assistant"]["conversation_id"] == cid


def test_failed_bearer_logins_are_throttled(guarded: App) -> None:
    for _ in range(5):
        with pytest.raises(openai.AuthenticationError):
            client(guarded, "bob:guess").models.list()
    with pytest.raises(openai.RateLimitError) as caught:
        client(guarded, f"bob:{USERS['bob']}").models.list()  # right password, still locked
    assert int(caught.value.response.headers["retry-after"]) > 0
    assert client(guarded, f"ann:{USERS['ann']}").models.list()  # another user is not


# --- one assistant as another's engine --------------------------------------------------


def test_a_second_app_uses_the_first_as_its_engine(
    guarded: App, tmp_path_factory: pytest.TempPathFactory
) -> None:
    data = config(tmp_path_factory.mktemp("outer"))
    with run_app(
        data,
        guarded.url + "v1",
        ASSISTANT_ENGINE_KIND="openai",
        ASSISTANT_API_KEY=f"ann:{USERS['ann']}",
    ) as outer:
        oa = client(outer)
        done = oa.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": QUESTION}]
        )
        assert "You said" in done.choices[0].message.content  # the simulator, two hops away
        assert done.model_extra["assistant"]["lane"] == "chat"
        # the outer app's deep job runs on the inner's deep lane and comes back answered
        handoff = oa.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "Delegate: a long essay on tea."}]
        )
        job_id = handoff.model_extra["assistant"]["job_id"]
        deadline = time.monotonic() + 120
        job = None
        while time.monotonic() < deadline:
            store = Store(outer.data_dir / "assistant.db")
            try:
                job = store.job(job_id)
            finally:
                store.close()
            if job is not None and job.state in ("done", "failed"):
                break
            time.sleep(0.5)
        assert job is not None and job.state == "done", job
        assert "You said" in job.result
    # the inner app kept both as ann's turns: the outer's lanes chose the inner's lanes
    turns = [r for ts in stored(guarded, "ann").values() for _, r in ts]
    reasons = {r.reason for r in turns}
    assert "explicit: reasoning_effort low" in reasons
    assert "explicit: reasoning_effort high" in reasons
    assert any(r.lane == "deep" and r.reasoning for r in turns)


# --- fast tier: parsing, the gate, the conversation a request continues -------------------


def test_parse_takes_the_last_user_messages_and_pairs_the_rest() -> None:
    from assistant.settings import Settings

    body = {
        "model": MODEL,
        "messages": [
            {"role": "system", "content": "ignored"},
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b"},
            {"role": "user", "content": [{"type": "text", "text": "c"}]},
            {"role": "user", "content": "d"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 50,
    }
    ask = parse(body, {}, Settings())
    assert ask.text == "c\n\nd" and ask.history == (("a", "b"),)
    assert ask.stream and ask.usage and ask.deep == "follow" and ask.decision is None
    assert ask.max_tokens == 50
    assert parse({**body, "wait": True}, {}, Settings()).deep == "follow"
    assert parse({**body, "wait": False}, {}, Settings()).deep == "handoff"
    assert parse(body, {"x-assistant-wait": "false"}, Settings()).deep == "handoff"
    assert parse(body, {"x-assistant-wait": "1"}, Settings()).deep == "follow"
    high = parse({**body, "reasoning_effort": "high"}, {}, Settings())
    assert high.deep == "inline" and high.decision is not None and high.decision.lane == "deep"
    assert parse({**body, "reasoning_effort": "medium"}, {}, Settings()).decision is None
    for bad in ({**body, "model": "x"}, {**body, "messages": []}, {**body, "max_tokens": -1},
                {**body, "messages": [{"role": "robot", "content": "x"}]}, [1, 2]):  # fmt: skip
        with pytest.raises(ApiError):
            parse(bad, {}, Settings())


def test_exchanges_join_repeated_roles_and_drop_a_reply_without_a_request() -> None:
    msgs = [("assistant", "hello!"), ("user", "a"), ("user", "b"), ("assistant", "c"),
            ("assistant", "d"), ("user", "e"), ("assistant", "f")]  # fmt: skip
    assert exchanges(msgs) == (("a\n\nb", "c\n\nd"), ("e", "f"))


def test_unsent_is_the_handoff_after_what_streamed() -> None:
    assert unsent("Sure.\n\nHanded off as job 1.", " Sure.") == "\n\nHanded off as job 1."
    assert unsent("Handed off as job 1.", "") == "Handed off as job 1."
    assert unsent("all of it", "all of it") == ""


def _request(peer: str, headers: dict[str, str] | None = None) -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    return Request({"type": "http", "headers": raw, "client": (peer, 5000), "method": "GET"})


def test_the_gate_without_logins_answers_loopback_only() -> None:
    from assistant.settings import Settings

    gate = Gate(Settings())
    assert gate.owner(_request("127.0.0.1")) == "local"
    assert gate.owner(_request("::1")) == "local"
    for request in (_request("192.168.1.20"), _request("127.0.0.1", {"X-Real-IP": "1.2.3.4"})):
        with pytest.raises(ApiError) as caught:
            gate.owner(request)
        assert caught.value.status == 403


def test_the_gate_with_logins_maps_a_bearer_to_its_login() -> None:
    from assistant.settings import Settings

    now = [0.0]
    gate = Gate(Settings(auth=(("ann", "pw:with:colons"),)), LoginThrottle(clock=lambda: now[0]))
    ok = {"Authorization": "Bearer ann:pw:with:colons"}
    assert gate.owner(_request("10.0.0.2", ok)) == "ann"
    for headers in ({}, {"Authorization": "Basic ann:pw"}, {"Authorization": "Bearer ann:pw"}):
        with pytest.raises(ApiError) as caught:
            gate.owner(_request("10.0.0.2", headers))
        assert caught.value.status == 401
    for _ in range(4):
        with pytest.raises(ApiError):
            gate.owner(_request("10.0.0.2", {"Authorization": "Bearer ann:nope"}))
    with pytest.raises(ApiError) as caught:
        gate.owner(_request("10.0.0.2", ok))
    assert caught.value.status == 429 and caught.value.retry_after
    assert gate.owner(_request("10.0.0.3", ok)) == "ann"  # from elsewhere: not locked
    now[0] += 120
    assert gate.owner(_request("10.0.0.2", ok)) == "ann"


def test_threads_continue_by_history_per_owner_and_bounded(tmp_path: Path, monkeypatch) -> None:
    from assistant.records import TurnResult
    from assistant.turns.conversations import Conversations
    from assistant.web.openai import threads as threads_module

    store = Store(tmp_path / "a.db")
    threads = Threads(Conversations(store))
    first = threads.find("ann", (), None)
    store.add_turn(first, "q", TurnResult("r", "chat", "x", "stop"))
    threads.remember("ann", (("q", "r"),), first)
    assert threads.find("ann", (("q", "r"),), None) == first
    assert threads.find("bob", (("q", "r"),), None) != first
    # not remembered (a restart): found from the stored turns
    assert Threads(Conversations(store)).find("ann", (("q", "r"),), None) == first
    with pytest.raises(ApiError):
        threads.find("bob", (), first)
    monkeypatch.setattr(threads_module, "THREADS_KEPT", 3)
    for i in range(10):
        threads.remember("ann", ((f"q{i}", "r"),), first)
    assert len(threads.kept) == 3
    store.close()
