"""A plain `vllm serve MODEL --reasoning-parser qwen3` (FCFS, no auto tool choice): what most
users run. Every chat turn must work on it, and the doctor must say what is missing."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

import httpx
import pytest

from assistant.devtools.vllm_server import MAX_MODEL_LEN, VllmServer
from assistant.engine.client import TOOLS_REFUSED, Engine, build_client
from assistant.records import Message
from assistant.routing.router import DELEGATE_TOOL
from assistant.settings import load_settings
from tests.conftest import sim_settings
from tests.simengine_proc import run_simengine
from tests.test_cli import run
from tests.vllm_proc import ANSWER, REASONING_START, holding, vllm

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    with vllm(tmp_path_factory.mktemp("vllm-plain"), "plain", max_num_seqs=4) as s:
        yield s


def _json(proc) -> dict:
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, (proc.stdout, proc.stderr)
    return json.loads(lines[0])


def test_a_chat_turn_works_although_tools_are_refused(server, tmp_path):
    proc = run(["chat", "What is the capital of France?", "--json"], tmp_path, server.url)
    assert proc.returncode == 0, proc.stderr
    out = _json(proc)
    assert out["error"] is None and out["reply"] == ANSWER
    assert (out["lane"], out["finish_reason"]) == ("chat", "stop")
    assert "refuses tools" in proc.stderr  # warned (the log), the turn itself clean


async def test_tools_are_dropped_once_and_the_warning_given_once(server, settings):
    s = sim_settings(settings, server.url)
    engine = Engine(build_client(server.url, None), kind="vllm", model="tiny")
    ask = [Message("user", "Hello there")]
    for _ in range(2):
        reply = await engine.complete(ask, s.chat, tools=[DELEGATE_TOOL])
        assert reply.content == ANSWER and not reply.delegate_requested
    assert engine.tools_ok is False
    assert engine.warnings == [TOOLS_REFUSED]
    await engine.client.close()


def test_cue_and_classifier_still_route_without_the_tool(server, tmp_path):
    cue = "think hard about the halting problem"
    deep = _json(run(["chat", cue, "--json"], tmp_path, server.url))
    assert deep["lane"] == "deep" and deep["reason"].startswith("cue")
    assert deep["error"] is None and deep["reply"].strip() == ANSWER  # the CLI waits for it
    # a new conversation: the classifier on the message alone, as the test names (after the
    # cue turn the conversation classifier reads both: issue 50)
    chat = _json(run(["chat", "--new", "hi!", "--json"], tmp_path, server.url))
    assert chat["lane"] == "chat" and chat["reply"] == ANSWER


def test_doctor_says_what_the_plain_server_lacks(server, tmp_path):
    proc = run(["doctor", "--json"], tmp_path, server.url)
    assert proc.returncode == 0, proc.stderr
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["priority"]["ok"] is False, checks["priority"]
    assert "ignored" in checks["priority"]["detail"]
    assert "--scheduling-policy priority" in checks["priority"]["detail"]
    assert checks["tools"]["ok"] is False
    assert "--enable-auto-tool-choice" in checks["tools"]["detail"]
    assert checks["reasoning field"]["ok"] is True
    assert checks["thinking off"]["ok"] is True
    assert checks["latency"]["ok"] is True, checks["latency"]
    assert checks["prefix cache"]["ok"] is True  # on by default in vLLM 0.32
    # vLLM says its --max-num-seqs nowhere the app reads without dev mode: the probe counted them
    assert checks["deep lane"]["detail"].startswith(
        "vLLM runs 4 sequences at once; the deep lane may use 2 (the default; "
        "set ASSISTANT_DEEP_MAX_IN_FLIGHT=3"
    ), checks["deep lane"]


def test_doctor_latency_fails_when_chat_waits_behind_full_sequences(server, tmp_path):
    # all four sequences busy and FCFS: a chat request waits for one of them to end
    with holding(server, 4) as held:
        proc = run(["doctor", "--json"], tmp_path, server.url)
        assert held.ended == 0, "a held stream ended during the doctor: the engine was not full"
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["latency"]["ok"] is False, checks["latency"]
    assert "busy or slow" in checks["latency"]["detail"]
    # the rest would each wait as long: the report says so instead of taking minutes
    assert checks["other checks"]["ok"] is None and "not run" in checks["other checks"]["detail"]
    assert "priority" not in checks


def test_delegate_wait_with_thinking_fits_the_budget_and_keeps_reasoning(server, tmp_path):
    # the deep lane's 32k budget plus the prompt exceeds max_model_len: vLLM would refuse it
    # unless the app fitted the budget to the context the model list reports
    proc = run(["delegate", "Explain entropy briefly.", "--wait", "--json"], tmp_path, server.url)
    assert proc.returncode == 0, proc.stderr
    job = _json(proc)
    assert job["state"] == "done" and job["result"].strip() == ANSWER, job
    assert job["reasoning_tokens"] > 300 and job["answer_tokens"] > 0
    shown = _json(run(["jobs", "show", job["id"], "--json"], tmp_path, server.url))
    assert shown["state"] == "done"
    assert load_settings(env={}).deep.max_tokens + 64 > MAX_MODEL_LEN  # it would not fit


def test_an_answer_that_is_all_reasoning_is_never_an_empty_success(server, tmp_path):
    marked = "Explain entropy briefly. [[never-close]]"
    proc = run(["chat", "--deep", marked, "--json"], tmp_path, server.url)
    assert proc.returncode == 3, proc.stderr
    out = _json(proc)
    assert out["reply"] == "" and out["finish_reason"] == "stop"
    assert "never closed its thinking" in out["error"]
    job = _json(run(["delegate", marked, "--wait", "--json"], tmp_path, server.url))
    assert job["state"] == "failed" and job["error"].startswith("no answer")
    assert "all reasoning" in job["error"]


async def test_thinking_streams_reasoning_then_the_answer(server, settings):
    s = sim_settings(settings, server.url)
    engine = Engine(build_client(server.url, None), kind="vllm", model="tiny")
    try:
        deep = await engine.complete([Message("user", "Why is the sky blue?")], s.deep)
        chat = await engine.complete([Message("user", "Why is the sky blue?")], s.chat)
    finally:
        await engine.client.close()
    assert deep.reasoning.startswith(REASONING_START) and deep.content.strip() == ANSWER
    assert deep.finish_reason == "stop" and not deep.unanswered
    assert engine.window.size == MAX_MODEL_LEN  # learnt from /v1/models
    assert (chat.reasoning, chat.content) == ("", ANSWER)  # enable_thinking false honoured


# -- the simulator agrees with the real server where both apply ----------------------------


def _sse(url: str, body: dict) -> tuple[int, list[dict], str]:
    """Status, the JSON chunks of a streamed request, and the error text when refused."""
    chunks: list[dict] = []
    with httpx.stream("POST", url + "/chat/completions", json=body, timeout=120) as r:
        if r.status_code != 200:
            return r.status_code, [], r.read().decode()
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line[6:]))
    return 200, chunks, ""


def _shape(chunks: list[dict]) -> dict:
    """What clients rely on in a stream, without the values that differ by model."""
    deltas = [c["choices"][0]["delta"] for c in chunks if c.get("choices")]
    text_keys = sorted({k for d in deltas for k, v in d.items() if k != "role" and v})
    return {
        "first_role": deltas[0].get("role") if deltas else None,
        "text_keys": text_keys,
        "finish": [
            c["choices"][0]["finish_reason"]
            for c in chunks
            if c.get("choices") and c["choices"][0].get("finish_reason")
        ],
        "usage_last": bool(chunks)
        and chunks[-1].get("choices") == []
        and {"prompt_tokens", "completion_tokens", "total_tokens"} <= set(chunks[-1]["usage"]),
    }


def _batching(chunks: list[dict]) -> dict:
    """How a stream's tokens were batched, from the running count on each chunk."""
    counts = [c["usage"]["completion_tokens"] for c in chunks if c.get("usage")]
    steps = [b - a for a, b in itertools.pairwise(counts) if b > a]
    return {
        "usage_on_every_chunk": len(counts) == len(chunks),
        "first_token_alone": bool(steps) and steps[0] == 1,
        "largest_chunk": max(steps, default=0),
    }


@pytest.fixture(scope="module")
def sim():
    # FCFS, no tool parser, a template that thinks by default: like the plain server's model
    with run_simengine("--token-ms", "1", "--model", "tiny", "--template-thinks") as url:
        yield url


def test_the_simulator_agrees_with_vllm_where_both_apply(server, sim):
    ask = [{"role": "user", "content": "Why is the sky blue?"}]
    usage = {"stream_options": {"include_usage": True}}
    cases = {
        "thinking": {"chat_template_kwargs": {"enable_thinking": True}, **usage},
        "no thinking": {"chat_template_kwargs": {"enable_thinking": False}, **usage},
        "priority under FCFS": {"priority": 10, **usage},
        "tools, auto": {"tools": [DELEGATE_TOOL], **usage},
        "tools, none": {"tools": [DELEGATE_TOOL], "tool_choice": "none", **usage},
    }
    for name, extra in cases.items():
        body = {"model": "tiny", "messages": ask, "max_tokens": 2000, "stream": True, **extra}
        real, simulated = _sse(server.url, body), _sse(sim, body)
        assert real[0] == simulated[0], (name, real, simulated)
        if real[0] != 200:
            said = [json.loads(text)["error"]["message"] for text in (real[2], simulated[2])]
            assert said[0] == said[1], said  # the simulator uses vLLM's own words
            continue
        assert _shape(real[1]) == _shape(simulated[1]), name
    plain = {"model": "tiny", "messages": ask, "stream": True, "max_tokens": 2000}
    assert _shape(_sse(server.url, plain)[1])["text_keys"] == ["content", "reasoning"]
    # the deep lane's batched chunks: the first token at once, then `stream_interval` tokens a
    # chunk, and the running token count on every chunk
    batched = plain | {"stream_interval": 16, "chat_template_kwargs": {"enable_thinking": True}}
    batched["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
    real, simulated = _sse(server.url, batched), _sse(sim, batched)
    assert real[0] == simulated[0] == 200, (real, simulated)
    assert _shape(real[1]) == _shape(simulated[1])
    assert (
        _batching(real[1])
        == _batching(simulated[1])
        == {
            "usage_on_every_chunk": True,
            "first_token_alone": True,
            "largest_chunk": 16,
        }
    )
    refused = [_sse(url, batched | {"stream_interval": 0})[0] for url in (server.url, sim)]
    assert refused == [400, 400]
    real_models = httpx.get(server.url + "/models").json()["data"][0]
    sim_models = httpx.get(sim + "/models").json()["data"][0]
    needed = {"id", "object", "created", "owned_by", "root", "parent", "max_model_len"}
    assert needed <= set(real_models) and needed <= set(sim_models)
    assert real_models["owned_by"] == sim_models["owned_by"] == "vllm"
