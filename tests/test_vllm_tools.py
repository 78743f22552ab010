"""vLLM with auto tool choice but neither a reasoning parser nor prefix caching: the doctor
reports each of those in the state it is in; chat and the model's delegate tool work."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from assistant.devtools.vllm_server import FLAGS, VllmServer
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
