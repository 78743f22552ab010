"""vLLM with auto tool choice but neither a reasoning parser nor prefix caching: the doctor
reports each of those in the state it is in; chat and the model's delegate tool work."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from assistant.devtools.vllm_server import FLAGS, VllmServer
from assistant.engine.client import Engine, build_client
from assistant.engine.lanes import LaneScheduler
from assistant.jobs import JobQueue
from assistant.prompting.prompt import Prompts
from assistant.store.db import Store
from assistant.turns.chat import ChatService
from assistant.turns.pipeline import Pipeline, TurnRequest
from tests.conftest import sim_settings
from tests.test_chat import StubRouter
from tests.test_chat_jobs_note import ASKED, OFFER, PLAN
from tests.test_cli import run
from tests.vllm_proc import ANSWER, vllm

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    flags = [*FLAGS["tools"], "--no-enable-prefix-caching"]
    with vllm(tmp_path_factory.mktemp("vllm-tools"), flags, reasoning_parser=None) as s:
        yield s


def test_doctor_reports_tools_on_and_what_is_missing(server, tmp_path):
    proc = run(["doctor", "--json"], tmp_path, server.url)
    assert proc.returncode == 0, proc.stderr
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["tools"]["ok"] is True
    assert checks["priority"]["ok"] is False, checks["priority"]
    assert checks["reasoning field"]["ok"] is False
    assert "--reasoning-parser" in checks["reasoning field"]["detail"]
    assert checks["prefix cache"]["ok"] is False, checks["prefix cache"]


def test_chat_and_the_delegate_tool_work(server, tmp_path):
    chat = json.loads(run(["chat", "hello", "--json"], tmp_path, server.url).stdout)
    assert chat["reply"] == ANSWER and chat["error"] is None
    asked = "Hello there [[delegate]]"  # the classifier says chat: the model's call delegates
    out = json.loads(run(["chat", asked, "--json"], tmp_path, server.url).stdout)
    assert (out["lane"], out["reason"]) == ("deep", "model asked to delegate")


async def test_the_models_delegate_call_after_an_accepted_offer_is_the_offered_task(
    server, settings
):
    """Issue 37 item 3 on real vLLM with tools on: the router says chat (a stub), the chat
    lane offers `delegate`, the model calls it after a yes to an offer, and the job's text
    is the offered task."""
    s = sim_settings(settings, server.url)
    store = Store(s.db_path)
    chat = ChatService(
        settings=s,
        engine=Engine(build_client(server.url, None), kind="vllm", model="tiny"),
        scheduler=LaneScheduler(deep_max_in_flight=2),
        router=StubRouter(),
        store=store,
        prompts=Prompts.load(),
        jobs=JobQueue(store, s),
    )
    turns = Pipeline(chat, s, log_to=store)
    asked = TurnRequest(text="yes please [[delegate]]", owner="ann", history=((ASKED, OFFER),))
    result = await turns.run(asked)
    assert (result.lane, result.reason) == ("deep", "model asked to delegate"), result
    prompt = store.job(result.job_id).prompt
    assert prompt.startswith(PLAN[0].upper() + PLAN[1:]) and ASKED in prompt
