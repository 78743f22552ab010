"""vLLM with `--scheduling-policy priority` but no auto tool choice: the doctor confirms the
priority by the queue's order, not by acceptance, and says tools are off; chat works."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from assistant.devtools.vllm_server import VllmServer
from tests.test_cli import run
from tests.vllm_proc import ANSWER, vllm

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    with vllm(tmp_path_factory.mktemp("vllm-priority"), "priority", max_num_seqs=2) as s:
        yield s


def test_doctor_shows_priority_honoured_and_tools_off(server, tmp_path):
    proc = run(["doctor", "--json"], tmp_path, server.url)
    assert proc.returncode == 0, proc.stderr
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["priority"]["ok"] is True, checks["priority"]
    assert "with 2 running" in checks["priority"]["detail"]
    assert checks["tools"]["ok"] is False


def test_chat_turn_works(server, tmp_path):
    proc = run(["chat", "hello", "--json"], tmp_path, server.url)
    out = json.loads(proc.stdout)
    assert proc.returncode == 0 and out["reply"] == ANSWER and out["error"] is None
