"""A conversation longer than the engine's context window (issue 48), on a real `vllm serve`
with a 2,048-token window: the tiny model's tokenizer spends a token a byte, so its system
prompt alone is half the window, and long replies ("[[long]]": to the budget) fill the rest in
two turns. Every turn keeps answering, and the simulator refuses as vLLM does."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from assistant.devtools.vllm_server import VllmServer
from assistant.engine.client import Engine, build_client
from assistant.engine.lanes import LaneScheduler
from assistant.engine.window import Window
from assistant.jobs import JobQueue
from assistant.prompting.prompt import Prompts
from assistant.store.db import Store
from assistant.turns.chat import ChatService
from assistant.turns.pipeline import Pipeline, TurnRequest
from tests.conftest import sim_settings
from tests.simengine_proc import run_simengine
from tests.test_chat import StubRouter
from tests.test_cli import run
from tests.vllm_proc import vllm

pytestmark = pytest.mark.timeout(900)
WINDOW = 2048


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    tmp = tmp_path_factory.mktemp("vllm-window")
    with vllm(tmp, "plain", max_num_seqs=2, max_model_len=WINDOW) as s:
        yield s


async def test_twenty_turns_keep_answering(server, settings, tmp_path):
    # each reply runs to the lane's budget (200 tokens, some 660 bytes of history each): without
    # fitting, the third turn's prompt is over the window and every turn after it is refused
    s = sim_settings(settings, server.url, max_tokens=200)
    store = Store(s.db_path)
    engine = Engine(build_client(server.url, None), kind="vllm", model="tiny")
    chat = ChatService(
        settings=s,
        engine=engine,
        scheduler=LaneScheduler(deep_max_in_flight=2),
        router=StubRouter(),
        store=store,
        prompts=Prompts.load(),
        jobs=JobQueue(store, s),
    )
    turns = Pipeline(chat, s, log_to=store)
    cid = store.new_conversation("local")
    results = []
    for n in range(20):
        ask = TurnRequest(text=f"Question {n}, go on [[long]]", owner="local", conversation_id=cid)
        results.append(await turns.run(ask))
    assert [r.error for r in results] == [None] * 20, [r.error for r in results]
    assert all("and so on" in r.reply for r in results)  # each ran to its budget
    assert engine.window.size == WINDOW and engine.window.counted  # learnt from the engine
    assert results[-1].dropped > 0 and sum(r.window_notice for r in results) == 1
    assert len(store.turns(cid)) == 20  # nothing stored is deleted
    await engine.client.close()
    # the command line continues the same conversation
    proc = run(["chat", "--conversation", cid, "one more", "--json"], tmp_path, server.url)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["error"] is None


def test_the_simulator_refuses_and_counts_as_vllm_does(server):
    def ask(url: str, model: str, text: str, budget: int) -> httpx.Response:
        body = {"model": model, "messages": [{"role": "user", "content": text}]}
        body |= {"max_tokens": budget, "stream_options": {"include_usage": True}}
        body |= {"chat_template_kwargs": {"enable_thinking": False}, "stream": True}
        with httpx.stream("POST", url + "/chat/completions", json=body, timeout=120) as r:
            r.read()
            return r

    def usage(r: httpx.Response) -> dict:
        chunks = [json.loads(line[6:]) for line in r.text.splitlines() if line[6:7] == "{"]
        return next(c["usage"] for c in chunks if c.get("usage"))

    flags = ("--max-model-len", str(WINDOW), "--token-chars", "1")
    with run_simengine(*flags, "--token-ms", "0.2") as sim:
        for text, budget in (("x" * 5000, 16), ("hello", 4096)):
            real = ask(server.url, "tiny", text, budget)
            simulated = ask(sim, "sim-model", text, budget)
            assert real.status_code == simulated.status_code == 400
            said = real.json()["error"]["message"]
            assert said == simulated.json()["error"]["message"]
            assert Window(None).refused(said, 5000)  # the app reads it as a length refusal
        # a prompt that fits with less room than its budget: the budget is cut, not refused
        real = ask(server.url, "tiny", "z" * 1900, 1024)
        simulated = ask(sim, "sim-model", "z" * 1900, 1024)
        assert real.status_code == simulated.status_code == 200
        counted = usage(real)["prompt_tokens"], usage(simulated)["prompt_tokens"]
        assert abs(counted[0] - counted[1]) <= 16, counted  # both count a token a byte
        assert usage(real)["completion_tokens"] <= WINDOW - counted[0]
