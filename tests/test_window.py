"""A conversation never outgrows the engine (issue 48, DESIGN.md 9): every request is fitted to
the engine's context window (system prompt, job status and newest turns kept, the oldest whole
turns left out first, the reply's room kept); an engine that still refuses a request for its
length gets it once more, fitted with its own count; the page says once that earlier turns
left the model's view; nothing stored is deleted; a job that cannot fit is refused, naming the
limit. On the simulated engine with vLLM's 2,048-token window and a byte-level tokenizer (one
token a byte, as the real-vLLM tier's tiny model), and on the window's own arithmetic."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from assistant.engine.lanes import LaneScheduler
from assistant.engine.window import START_RATE, ContextFull, Window
from assistant.jobs import JobQueue
from assistant.prompting.prompt import Prompts
from assistant.records import Message, StoredTurn, TurnResult
from assistant.store.db import Store
from assistant.turns.chat import ChatService
from assistant.turns.pipeline import Pipeline, TurnRequest
from assistant.web.page.turns import WINDOW_NOTICE, history_of
from tests.conftest import sim_engine, sim_settings
from tests.simengine_proc import run_simengine, sim_requests, sim_reset
from tests.test_chat import StubRouter

WINDOW = 2048
ASK = "tell me more about it, and then some more; tell me more about it, and then more."
BUDGET = 256
"""The chat lane's budget here: the tiny model's prompts leave a 1,024 budget no history."""


@pytest.fixture(scope="module")
def small_url() -> Iterator[str]:
    """A plain vLLM with --max-model-len 2048 (no auto tool choice), counting a token a byte;
    each reply repeats the question."""
    flags = ("--max-model-len", str(WINDOW), "--token-chars", "1", "--answer-words", "30")
    with run_simengine(*flags, "--token-ms", "0.2") as url:
        yield url


def _pipeline(settings, url: str, store: Store | None = None) -> Pipeline:
    store = store or Store(settings.db_path)
    engine = sim_engine(url)
    engine.window.size = None  # learnt from the engine's model list, as the app does
    prompts = Prompts.load()
    fits = lambda text, budget: engine.window.answer(prompts.deep(text), budget, what="the job")  # noqa: E731
    chat = ChatService(
        settings=settings,
        engine=engine,
        scheduler=LaneScheduler(deep_max_in_flight=2),
        router=StubRouter(),
        store=store,
        prompts=prompts,
        jobs=JobQueue(store, settings, fits=fits),
    )
    return Pipeline(chat, settings, log_to=store)


def _turn(n: int) -> Message:
    return Message("user" if n % 2 == 0 else "assistant", f"turn {n // 2}: " + "x" * 100)


# -- the window's arithmetic --------------------------------------------------------------


def test_fit_keeps_the_system_prompt_the_last_message_and_the_newest_whole_turns():
    window = Window(WINDOW)
    system, last = Message("system", "s" * 400), Message("user", "the question")
    messages = [system, *(_turn(n) for n in range(20)), last]
    fitted = window.fit(messages, 1024)
    kept = fitted.messages
    assert kept[0] == system and kept[-1] == last
    assert fitted.dropped > 0 and len(kept) == len(messages) - 2 * fitted.dropped
    assert kept[1].role == "user" and kept[1].content.startswith(f"turn {fitted.dropped}:")
    # everything the request carries, and the reply's room, within the window
    assert window.count(kept) + fitted.max_tokens <= WINDOW
    assert fitted.max_tokens >= 1024 // 4
    # with one turn fewer it would not have fitted the reply's whole room
    assert window.count([system, *messages[2 * fitted.dropped - 1 :]]) + 1024 > WINDOW


def test_a_budget_bigger_than_the_window_keeps_half_of_it_and_asks_for_what_fits():
    window = Window(WINDOW)
    fitted = window.fit([Message("system", "s" * 600), Message("user", "a job")], 32768)
    assert fitted.dropped == 0
    assert WINDOW // 2 <= fitted.max_tokens <= WINDOW - window.count(fitted.messages)


def test_a_request_that_cannot_fit_is_refused_naming_the_limit():
    window = Window(WINDOW)
    with pytest.raises(ContextFull, match="2048 tokens") as e:
        window.fit([Message("system", "s" * 600), Message("user", "y" * 4000)], 32768)
    assert "context window" in str(e.value) and "--max-model-len" in str(e.value)


def test_an_unknown_window_fits_nothing():
    messages = [Message("system", "s"), *(_turn(n) for n in range(200)), Message("user", "q")]
    assert Window(None).fit(messages, 1024).messages == messages


def test_the_rate_follows_the_engines_counts():
    window = Window(WINDOW)
    assert window.rate == START_RATE
    window.learn(1000, 250)  # an English tokenizer: the first count replaces the guess
    assert 0.25 < window.rate < 0.3
    window.learn(1000, 200)  # a cheaper prompt never lowers it again
    assert 0.25 < window.rate < 0.3
    window.learn(1000, 1000)  # a byte-level one
    assert window.rate > 1.0
    window = Window(WINDOW)
    window.learn(21, 12)  # "Hello" in a chat template: mostly template, says little
    assert window.rate == START_RATE and not window.counted


@pytest.mark.parametrize(
    "message,size,count",
    [
        # vLLM 0.32 (what the conversation got; tests/test_vllm_window.py checks it)
        (
            "Error code: 400 - {'error': {'message': \"This model's maximum context length is "
            "2048 tokens. However, your prompt contains at least 2049 input tokens, which "
            "exceeds this limit even without any output tokens. Please reduce the length of the "
            'input prompt. (parameter=input_tokens, value=2049)"}}',
            2048,
            2049,
        ),
        # older vLLM
        (
            "'max_tokens' or 'max_completion_tokens' is too large: 1024. This model's maximum "
            "context length is 4096 tokens and your request has 3500 input tokens "
            "(1024 > 4096 - 3500).",
            4096,
            3500,
        ),
        # llama-cpp-python (the embedded engine), and llama.cpp's server
        (
            "This model's maximum context length is 4096 tokens, however you requested 5160 "
            "tokens (5000 in your prompt; 160 for the completion). Please reduce your prompt; "
            "or completion length.",
            4096,
            5000,
        ),
        (
            "{'code': 400, 'message': 'the request exceeds the available context size, try "
            "increasing it', 'type': 'exceed_context_size_error', 'n_prompt_tokens': 5000, "
            "'n_ctx': 4096}",
            4096,
            5000,
        ),
    ],
)
def test_a_refusal_for_length_teaches_the_window(message, size, count):
    window = Window(None)
    assert window.refused(message, weight=1000)
    assert window.size == size
    assert window.rate >= count / 1000  # the next fit counts at least what the engine did


def test_a_budget_over_an_unknown_window_teaches_only_the_window():
    window = Window(None)
    said = "max_tokens=32768 cannot be greater than max_model_len=2048. Please request fewer "
    assert window.refused(said + "output tokens. (parameter=max_tokens, value=32768)", 1000)
    assert window.size == 2048 and window.rate == START_RATE


def test_other_refusals_are_not_for_length():
    window = Window(WINDOW)
    assert not window.refused('"auto" tool choice requires --enable-auto-tool-choice', 1000)
    assert window.rate == START_RATE and window.size == WINDOW


# -- a conversation on the simulated engine ------------------------------------------------


async def test_a_long_conversation_keeps_answering_and_says_so_once(small_url, settings):
    s = sim_settings(settings, small_url, max_tokens=BUDGET)
    turns = _pipeline(s, small_url)
    store = turns.chat.store
    cid = store.new_conversation("ann")
    sim_reset(small_url)
    results = []
    for n in range(20):
        request = TurnRequest(text=f"{n}: {ASK}", owner="ann", conversation_id=cid)
        results.append(await turns.run(request))
    assert [r.error for r in results] == [None] * 20, [r.error for r in results]
    assert all(r.reply.startswith("You said") for r in results)
    # the oldest turns left the model's view, and the page said so once
    assert results[-1].dropped > 0
    assert [r.window_notice for r in results].count(True) == 1
    # nothing stored was deleted, and the reopened conversation says it once too
    stored = store.transcript(cid)
    assert len(stored) == 20 and all(t.result.reply for t in stored)
    shown = history_of(stored)
    assert sum(WINDOW_NOTICE.replace("'", "&#x27;") in m["content"] for m in shown) == 1
    # every request fitted the window (the engine refuses a prompt over it), once the tools
    # the engine refused were dropped; the newest turns were kept
    bodies = [r["body"] for r in sim_requests(small_url) if not r["body"].get("tools")]
    assert len(bodies) == 20  # never refused for its length, never sent twice
    for n, body in enumerate(bodies):
        messages = body["messages"]
        assert messages[0]["role"] == "system" and messages[-1]["content"] == f"{n}: {ASK}"
        if n:
            assert messages[-3]["content"] == f"{n - 1}: {ASK}"  # the turn before it, whole
        assert body["max_tokens"] >= BUDGET // 4  # and its answer had room
    assert "0: tell me" not in str(bodies[-1]["messages"])  # the first turn is out of view


async def test_a_refusal_for_length_is_sent_again_fitted_once(small_url, settings):
    # a long stored conversation, and a window whose rate was learnt on a cheaper tokenizer
    # (the model behind the URL changed): the engine refuses the first request for its length
    s = sim_settings(settings, small_url, max_tokens=BUDGET)
    store = Store(s.db_path)
    cid = store.new_conversation("ann")
    for n in range(6):
        store.add_turn(cid, f"{n}: {ASK}", TurnResult("y" * 300, "chat", "stub", "stop"))
    turns = _pipeline(s, small_url, store)
    turns.chat.engine.tools_ok = False  # (tools refused: a single request each time)
    turns.chat.engine.window.learn(1000, 250)  # a quarter token a byte, as English costs
    sim_reset(small_url)
    result = await turns.run(TurnRequest(text="and now?", owner="ann", conversation_id=cid))
    assert result.error is None and result.reply.startswith("You said: and now?")
    first, second = (r["body"] for r in sim_requests(small_url))
    assert len(second["messages"]) < len(first["messages"])  # fitted again, tighter
    assert result.dropped > 0 and result.window_notice


async def test_a_job_too_long_for_the_window_is_refused_naming_the_limit(small_url, settings):
    s = sim_settings(settings, small_url, max_tokens=BUDGET)
    turns = _pipeline(s, small_url)
    cid = turns.chat.store.new_conversation("ann")
    await turns.chat.engine.discover(s.deep)  # the app knows its engine's window
    task = "Write the report on this: " + "data " * 1200
    with pytest.raises(ContextFull, match="2048 tokens"):
        await turns.run(TurnRequest(text=task, owner="ann", conversation_id=cid, force_deep=True))
    assert turns.chat.store.jobs("ann") == []  # refused, not queued to fail later


def test_the_page_says_it_once_for_a_reopened_conversation():
    results = [TurnResult("a", "chat", "r", "stop", dropped=d) for d in (0, 0, 1, 2, 0, 3)]
    shown = history_of([StoredTurn(f"q{i}", "text", r, 0.0) for i, r in enumerate(results)])
    notes = [m for m in shown if "context window is full" in m["content"]]
    assert len(notes) == 1 and notes[0] is shown[5]  # under the third turn's reply


def test_settings_take_a_context_window_where_the_engine_does_not_say(tmp_path):
    from assistant.errors import ConfigError
    from assistant.settings import load_settings

    env = {"ASSISTANT_DATA_DIR": str(tmp_path), "ASSISTANT_ENGINE_CONTEXT": "8192"}
    assert load_settings(env=env, toml_path=tmp_path / "none").engine_context == 8192
    with pytest.raises(ConfigError, match="ASSISTANT_ENGINE_CONTEXT"):
        load_settings(env={**env, "ASSISTANT_ENGINE_CONTEXT": "lots"}, toml_path=tmp_path / "x")
    toml = tmp_path / "assistant.toml"
    toml.write_text("engine_context = 4096\n")
    assert load_settings(env={}, toml_path=toml).engine_context == 4096
