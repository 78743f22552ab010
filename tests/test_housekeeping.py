"""A client's own housekeeping and deep answers on the OpenAI endpoint (issue 31), as Open WebUI
uses it: with every message it also sends its background tasks (a title, tags, follow-ups,
search queries, autocompletion) through the same endpoint, as the prompts in
`tests/data/openwebui_task_prompts.json` (Open WebUI 0.12.4's own templates).

Driven with the `openai` library and raw HTTP against the running app on the simulated engine:
the tasks take the chat lane, start no job and no conversation, and get the JSON they ask for;
a deep request is answered in its own reply, streamed from its job; a client that leaves a deep
stream leaves the job running. Fast-tier tests at the end check the recognition itself.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai import OpenAI

from assistant.store.db import Store
from assistant.web.openai.housekeeping import Chore, answer, recognise
from assistant.web.openai.route import MODEL
from tests.app_proc import App, run_app
from tests.simengine_proc import root_url, run_simengine, sim_requests, sim_reset

TEMPLATES: dict[str, str] = json.loads(
    (Path(__file__).parent / "data" / "openwebui_task_prompts.json").read_text()
)["templates"]
QUESTION = "What is the capital of France?"
DEEP = "Delegate: write a long report on rivers."
OTHER_CLIENTS = {
    # LibreChat's title request: its title instruction, then the conversation
    "librechat": "Please generate a concise, 5-word-or-less title for the conversation, using "
    "its same language, with no punctuation. Apply title case conventions appropriate for the "
    'language. Never directly mention the language name or the word "title"\n\n'
    f"User: {QUESTION}\nAI: Paris.\n\nTitle:",
    # Chatbox names its conversations
    "chatbox": "Name the conversation based on the chat records.\nPlease provide a concise "
    "name, within 10 characters and without quotation marks.\nYou only need to answer with "
    f"the name.\nThe following is the conversation:\n\n```\n{QUESTION}\n```",
    # LobeChat's topic summary
    "lobechat": "You are an assistant skilled in conversation. Summarize the user's "
    f"conversation into a topic name within 10 words.\n\nuser: {QUESTION}",
}


def rendered(template: str, chat: list[tuple[str, str]]) -> str:
    """A template as Open WebUI fills it (`utils/task.py`: `ROLE: content` lines)."""
    lines = "\n".join(f"{role.upper()}: {text}" for role, text in chat)
    text = re.sub(r"\{\{MESSAGES:END:\d+\}\}", lambda _: lines, template)
    return (
        text.replace("{{CURRENT_DATE}}", "2026-12-04")
        .replace("{{TYPE}}", "General")
        .replace("{{PROMPT}}", "The capital of")
    )


@pytest.fixture(scope="module")
def sim() -> Iterator[str]:
    with run_simengine("--token-ms", "5", "--slots", "8", "--auto-tool-choice") as url:
        yield url


@pytest.fixture(scope="module")
def app(sim: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    data = tmp_path_factory.mktemp("owui")
    (data / "assistant.toml").write_text("max_jobs_per_user = 20\n")
    with run_app(data, sim) as running:
        yield running


def client(app: App) -> OpenAI:
    return OpenAI(base_url=app.url + "v1", api_key="unused", max_retries=0, timeout=120)


def in_store(app: App) -> tuple[list[Any], list[Any]]:
    """The app's conversations (with their turns) and jobs."""
    store = Store(app.data_dir / "assistant.db")
    try:
        return [(c, store.turns(c.id)) for c in store.conversations("local")], store.jobs()
    finally:
        store.close()


def deep_requests(sim: str) -> list[str]:
    """The last user message of every request the engine got on the deep lane."""
    seen = []
    for r in sim_requests(sim):
        body = r["body"]
        if body.get("reasoning_effort") == "high" or body.get("priority", 0) > 0:
            users = [m for m in body["messages"] if m["role"] == "user"]
            seen.append(str(users[-1]["content"]))
    return seen


def chore(oa: OpenAI, prompt: str) -> tuple[str, dict[str, str]]:
    """A background task as Open WebUI sends it: one user message, not streamed."""
    raw = oa.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": prompt}], stream=False
    )
    return raw.parse().choices[0].message.content or "", dict(raw.headers)


def streamed(oa: OpenAI, messages: list[dict[str, str]]) -> tuple[str, str, dict[str, Any]]:
    """A streamed turn as Open WebUI asks for it: (reasoning, content, the `assistant` extra)."""
    chunks = list(oa.chat.completions.create(model=MODEL, messages=messages, stream=True))  # type: ignore[call-overload]
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    reasoning = "".join((d.model_extra or {}).get("reasoning") or "" for d in deltas)
    content = "".join(d.content or "" for d in deltas)
    end = next(c for c in chunks if c.choices and c.choices[0].finish_reason)
    return reasoning, content, end.model_extra["assistant"]


def test_open_webui_session_keeps_its_housekeeping_small_and_gets_the_deep_answer(
    app: App, sim: str
) -> None:
    """Two messages and a follow-up, each with Open WebUI's background tasks after it."""
    sim_reset(sim)
    oa = client(app)
    _, answer1, first = streamed(oa, [{"role": "user", "content": QUESTION}])
    assert first["lane"] == "chat" and "You said" in answer1
    chat = [("user", QUESTION), ("assistant", answer1)]
    for key in ("title", "follow_ups", "tags"):
        text, headers = chore(oa, rendered(TEMPLATES[key], chat))
        assert headers["x-assistant-lane"] == "chat", key
        assert headers["x-assistant-reason"].startswith("client housekeeping"), key
        assert "x-assistant-conversation" not in headers and "x-assistant-job" not in headers
        assert key in json.loads(text), text  # the JSON Open WebUI parses
    # the report: answered in its own reply, with its thinking, while it runs as a job
    history = [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": answer1}]
    thinking, report, second = streamed(oa, [*history, {"role": "user", "content": DEEP}])
    assert second["lane"] == "deep" and second["job_id"]
    assert thinking.split() and "You said" in report and "Handed off" not in report
    assert second["conversation_id"] == first["conversation_id"]
    # Open WebUI sends the answer back with its thinking folded into the text
    shown = f'<details type="reasoning" done="true">\n> {thinking}\n</details>\n{report}'
    for key in ("follow_ups", "tags"):
        chore(oa, rendered(TEMPLATES[key], [*chat, ("user", DEEP), ("assistant", shown)]))
    _, answer3, third = streamed(
        oa,
        [*history, {"role": "user", "content": DEEP}, {"role": "assistant", "content": shown},
         {"role": "user", "content": "Thanks! And in one line?"}],
    )  # fmt: skip
    assert third["conversation_id"] == first["conversation_id"] and answer3

    # the engine saw one deep request: the report's job; no task reached the deep lane
    assert ["report on rivers" in text for text in deep_requests(sim)] == [True]
    conversations, jobs = in_store(app)
    mine = [(c, turns) for c, turns in conversations if c.id == first["conversation_id"]]
    assert len(conversations) == 1 and mine, [c.title for c, _ in conversations]
    assert [u for u, _ in mine[0][1]] == [QUESTION, DEEP, "Thanks! And in one line?"]
    assert not any("### Task" in c.title for c, _ in conversations)
    job = next(j for j in jobs if j.id == second["job_id"])
    assert job.state == "done" and job.notified  # the client has it: no notice in the page
    assert len(jobs) == 1


@pytest.mark.parametrize("key", ["title", "tags", "follow_ups", "queries", "text"])
def test_each_open_webui_task_gets_its_json_on_the_chat_lane(app: App, sim: str, key: str) -> None:
    sim_reset(sim)
    before = in_store(app)
    text, headers = chore(client(app), rendered(TEMPLATES[key], [("user", QUESTION)]))
    assert headers["x-assistant-lane"] == "chat"
    assert isinstance(json.loads(text), dict) and key in json.loads(text)
    bodies = [r["body"] for r in sim_requests(sim)]
    assert bodies and all(b.get("reasoning_effort") != "high" for b in bodies)
    assert all(not b.get("tools") for b in bodies)  # no delegate tool: a task never becomes a job
    after = in_store(app)
    assert len(after[0]) == len(before[0]) and len(after[1]) == len(before[1])


def test_a_streamed_task_gets_its_checked_answer_in_one_piece(app: App) -> None:
    prompt = rendered(TEMPLATES["tags"], [("user", QUESTION)])
    chunks = list(
        client(app).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": prompt}], stream=True
        )
    )
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert json.loads(content) == {"tags": ["General"]}  # the simulator only echoes the prompt


@pytest.mark.parametrize("name", sorted(OTHER_CLIENTS))
def test_other_clients_title_requests_are_housekeeping_too(app: App, name: str) -> None:
    before = in_store(app)
    text, headers = chore(client(app), OTHER_CLIENTS[name])
    assert headers["x-assistant-reason"] == "client housekeeping: title"
    assert 0 < len(text.split()) <= 8 and "\n" not in text
    assert len(in_store(app)[0]) == len(before[0])


def test_a_client_leaving_a_deep_stream_leaves_its_job_running(app: App, sim: str) -> None:
    """Keep-alive comments while the job waits; the job outlives the client; its result
    waits in the Jobs panel (announced there, since the client never got it)."""
    httpx.post(root_url(sim) + "/sim/hold", timeout=5).raise_for_status()
    ask = [{"role": "user", "content": "Delegate: a history of lighthouses."}]
    body = {"model": MODEL, "stream": True, "messages": ask}
    try:
        with httpx.stream("POST", app.url + "v1/chat/completions", json=body, timeout=30) as r:
            assert r.status_code == 200 and r.headers["x-assistant-lane"] == "deep"
            job_id = r.headers["x-assistant-job"]
            comments = 0
            for line in r.iter_lines():
                comments += line.startswith(":")
                if comments >= 2:  # one when the job began, one after a quiet stretch
                    break
    finally:
        httpx.post(root_url(sim) + "/sim/release", timeout=5).raise_for_status()
    deadline = time.monotonic() + 60
    job = None
    while time.monotonic() < deadline:
        job = next(j for j in in_store(app)[1] if j.id == job_id)
        if job.state in ("done", "failed"):
            break
        time.sleep(0.3)
    assert job is not None and job.state == "done" and "You said" in job.result
    assert not job.notified


def test_the_handoff_when_the_client_asks_for_it(app: App) -> None:
    for ask in ({"extra_body": {"wait": False}}, {"extra_headers": {"X-Assistant-Wait": "false"}}):
        done = client(app).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "Delegate: explain tides."}], **ask
        )
        assert "Handed off" in (done.choices[0].message.content or "")
        assert done.model_extra["assistant"]["job_id"]


# --- fast tier: recognition and answers ---------------------------------------------------


def test_open_webui_templates_are_recognised_by_the_key_they_ask_for() -> None:
    for key, template in TEMPLATES.items():
        found = recognise(rendered(template, [("user", QUESTION)]), has_history=False)
        assert found is not None and found.key == key, (key, found)
    assert recognise("### Task: x", False, {"metadata": {"task": "title_generation"}}) == Chore(
        "title", None
    )
    assert recognise("Tags?", False, {"metadata": {"task": "tags_generation"}}) == Chore("tags")


def test_a_persons_messages_are_not_housekeeping() -> None:
    for text in (
        QUESTION,
        "What is a good title for my novel about a chat bot?",
        "What's the name of this chat app?",
        "Suggest a title for the chat group I run.",
        "### Task: write me a long report on rivers",
        DEEP,
    ):
        assert recognise(text, has_history=False) is None, text
    # inside a conversation nothing is a client's task, whatever it looks like
    assert recognise(rendered(TEMPLATES["title"], [("user", QUESTION)]), has_history=True) is None


def test_folded_thinking_in_an_earlier_answer_is_not_part_of_the_history() -> None:
    from assistant.settings import Settings
    from assistant.web.openai.wire import parse

    shown = '<details type="reasoning" done="true" duration="3">\n> hmm\n</details>\nParis.'
    body = {"model": MODEL, "messages": [
        {"role": "user", "content": QUESTION}, {"role": "assistant", "content": shown},
        {"role": "user", "content": "And Spain?"}]}  # fmt: skip
    assert parse(body, {}, Settings()).history == ((QUESTION, "Paris."),)


def test_answers_are_the_json_the_prompt_asks_for() -> None:
    prompt = rendered(TEMPLATES["title"], [("user", QUESTION)])
    title = Chore("title", "title")
    assert json.loads(answer(title, 'Sure! ```json\n{"title": "Paris"}\n```', prompt)) == {
        "title": "Paris"
    }
    assert json.loads(answer(title, "French Capital", prompt)) == {"title": "French Capital"}
    # a reply that repeats the prompt's own example has not answered (the simulated engine
    # echoes the prompt: Open WebUI titled the chat "your concise title here")
    echo = answer(title, f"You said: {prompt}", prompt)
    assert json.loads(echo) == {"title": "What is the capital of"}
    tags = rendered(TEMPLATES["tags"], [("user", QUESTION)])
    assert json.loads(answer(Chore("tags", "tags"), tags, tags)) == {"tags": ["General"]}
    history_word = answer(title, '{"title": "capital of France"}', prompt)
    assert json.loads(history_word) == {"title": "capital of France"}  # from the chat: fine
    made_up = json.loads(answer(title, "You said: a very long echo of it all " * 5, prompt))
    assert made_up == {"title": "What is the capital of"}
    assert json.loads(answer(Chore("tags", "tags"), "no json", "")) == {"tags": ["General"]}
    assert json.loads(answer(Chore("follow-ups", "follow_ups"), "{}", "")) == {"follow_ups": []}
    assert answer(Chore("title"), '"Capital of France"', "") == "Capital of France"
