"""The simulated engine itself, over real HTTP in a separate process."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai import AsyncOpenAI
from prometheus_client.parser import text_string_to_metric_families

from assistant.devtools.simcore import PRIORITY_MSG, TOOLS_MSG
from assistant.devtools.simengine import REPLY
from tests.simengine_proc import root_url, run_simengine, sim_requests, sim_reset

MSG = [{"role": "user", "content": "hello there"}]
EXPECTED = REPLY.format(t="hello there")
DELEGATE_TOOL = {
    "type": "function",
    "function": {
        "name": "delegate",
        "description": "Hand hard work to the deep lane.",
        "parameters": {"type": "object", "properties": {"task": {"type": "string"}}},
    },
}


@pytest.fixture(scope="module")
def sim() -> Iterator[str]:
    """One engine for the per-request fault tests: fast tokens, several slots."""
    with run_simengine("--token-ms", "1", "--slots", "4", "--stall-s", "30") as url:
        yield url


@pytest.fixture
def client(sim: str) -> AsyncOpenAI:
    sim_reset(sim)
    return AsyncOpenAI(base_url=sim, api_key="test-key", max_retries=0, timeout=10)


async def raw_stream(
    base_url: str, body: dict[str, Any], *, read_timeout: float = 10, **headers: str
) -> tuple[list[dict[str, Any]], bool]:
    """POST a streaming request with httpx; return the parsed chunks and whether [DONE] came.
    Transport errors propagate, so a test can tell a cut from a clean end."""
    timeout = httpx.Timeout(10, read=read_timeout)
    chunks: list[dict[str, Any]] = []
    done = False
    body = {"model": "sim-model", "messages": MSG, "stream": True, **body}
    async with (
        httpx.AsyncClient(timeout=timeout) as http,
        http.stream("POST", base_url + "/chat/completions", json=body, headers=headers) as r,
    ):
        r.raise_for_status()
        async for line in r.aiter_lines():
            if line == "data: [DONE]":
                done = True
            elif line.startswith("data: "):
                chunks.append(json.loads(line[6:]))
    return chunks, done


def joined(chunks: list[dict[str, Any]], field: str) -> str:
    return "".join(c["choices"][0]["delta"].get(field) or "" for c in chunks if c["choices"])


def finish(chunks: list[dict[str, Any]]) -> str | None:
    return next(
        (
            c["choices"][0]["finish_reason"]
            for c in chunks
            if c["choices"] and c["choices"][0]["finish_reason"]
        ),
        None,
    )


async def test_models_and_health(sim: str) -> None:
    async with httpx.AsyncClient() as http:
        models = (await http.get(sim + "/models")).json()
        health = await http.get(root_url(sim) + "/health")
    assert models["data"][0]["id"] == "sim-model"
    assert models["data"][0]["max_model_len"] == 32768
    assert health.status_code == 200


async def test_openai_stream_with_usage(client: AsyncOpenAI) -> None:
    stream = await client.chat.completions.create(
        model="sim-model", messages=MSG, stream=True, stream_options={"include_usage": True}
    )
    text, reasons, usage = "", [], None
    async for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for choice in chunk.choices:
            text += choice.delta.content or ""
            reasons.append(choice.finish_reason)
    assert text == EXPECTED
    assert reasons[-1] == "stop"
    assert usage is not None and usage.completion_tokens == len(EXPECTED.split())
    assert usage.prompt_tokens > 0


async def test_openai_non_stream(client: AsyncOpenAI) -> None:
    reply = await client.chat.completions.create(model="sim-model", messages=MSG)
    assert reply.choices[0].message.content == EXPECTED
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None and reply.usage.total_tokens > reply.usage.prompt_tokens


async def test_thinking_streams_reasoning_field_first(client: AsyncOpenAI) -> None:
    stream = await client.chat.completions.create(
        model="sim-model",
        messages=MSG,
        stream=True,
        extra_body={"chat_template_kwargs": {"enable_thinking": True}},
    )
    order: list[str] = []
    async for chunk in stream:
        for choice in chunk.choices:
            if getattr(choice.delta, "reasoning", None):
                order.append("reasoning")
            if choice.delta.content:
                order.append("content")
    assert "reasoning" in order and "content" in order
    assert order.index("content") > max(i for i, k in enumerate(order) if k == "reasoning")


async def test_low_effort_does_not_think_high_effort_does(sim: str) -> None:
    low, _ = await raw_stream(sim, {"reasoning_effort": "low"})
    high, _ = await raw_stream(sim, {"reasoning_effort": "high"})
    assert joined(low, "reasoning") == ""
    assert joined(high, "reasoning") != ""
    assert joined(high, "content") == EXPECTED


async def test_old_reasoning_field_name() -> None:
    with run_simengine("--token-ms", "1", "--reasoning-field", "reasoning_content") as url:
        chunks, _ = await raw_stream(url, {"chat_template_kwargs": {"enable_thinking": True}})
    assert joined(chunks, "reasoning_content") != ""
    assert joined(chunks, "reasoning") == ""


async def test_max_tokens_gives_length(sim: str) -> None:
    chunks, done = await raw_stream(sim, {"max_tokens": 5})
    assert joined(chunks, "content").split() == EXPECTED.split()[:5]
    assert finish(chunks) == "length"
    assert done


async def test_reasoning_only_exhausts_budget(sim: str) -> None:
    chunks, _ = await raw_stream(sim, {"max_completion_tokens": 30, "sim_fault": "reasoning_only"})
    assert len(joined(chunks, "reasoning").split()) == 30
    assert joined(chunks, "content") == ""
    assert finish(chunks) == "length"


async def test_reasoning_only_when_thinking(sim: str) -> None:
    fault = {"X-Sim-Fault": "reasoning_only_when_thinking"}
    on = {"max_tokens": 40, "chat_template_kwargs": {"enable_thinking": True}}
    off = {"max_tokens": 40, "chat_template_kwargs": {"enable_thinking": False}}
    thinking, _ = await raw_stream(sim, on, **fault)
    plain, _ = await raw_stream(sim, off, **fault)
    assert (joined(thinking, "content"), finish(thinking)) == ("", "length")
    assert (joined(plain, "content"), finish(plain)) == (EXPECTED, "stop")


async def test_priority_accepted_and_ignored_without_policy(client: AsyncOpenAI) -> None:
    # vLLM 0.32 (measured): a non-zero priority under FCFS is accepted, and means nothing
    ok = await client.chat.completions.create(
        model="sim-model", messages=MSG, extra_body={"priority": 10}
    )
    assert ok.choices[0].message.content == EXPECTED


async def test_priority_rejected_by_older_vllm() -> None:
    with run_simengine("--token-ms", "1", "--reject-priority") as url:
        old = AsyncOpenAI(base_url=url, api_key="k", max_retries=0, timeout=10)
        with pytest.raises(openai.BadRequestError) as err:
            await old.chat.completions.create(
                model="sim-model", messages=MSG, extra_body={"priority": 10}
            )
        assert err.value.status_code == 400
        assert PRIORITY_MSG.format(p=10) in str(err.value)
        ok = await old.chat.completions.create(
            model="sim-model", messages=MSG, extra_body={"priority": 0}
        )
        assert ok.choices[0].message.content == EXPECTED
        await old.close()


async def test_tools_refused_without_auto_tool_choice(client: AsyncOpenAI) -> None:
    tool = {"type": "function", "function": {"name": "delegate", "parameters": {}}}
    with pytest.raises(openai.BadRequestError) as err:
        await client.chat.completions.create(model="sim-model", messages=MSG, tools=[tool])
    assert TOOLS_MSG in str(err.value)
    ok = await client.chat.completions.create(
        model="sim-model", messages=MSG, tools=[tool], tool_choice="none"
    )
    assert ok.choices[0].message.content == EXPECTED


async def wait_metrics(url: str, running: int, waiting: int) -> dict[str, float]:
    """Poll /metrics until the engine holds this many requests (they need a moment to arrive)."""
    values: dict[str, float] = {}
    async with httpx.AsyncClient() as http:
        deadline = time.monotonic() + 3
        while True:  # each look is an HTTP request: `until` takes only a plain condition
            values = parse_metrics((await http.get(root_url(url) + "/metrics")).text)
            held = (values["vllm:num_requests_running"], values["vllm:num_requests_waiting"])
            if held == (running, waiting) or time.monotonic() > deadline:
                return values
            await asyncio.sleep(0.02)


async def test_priority_policy_serves_lower_first() -> None:
    with run_simengine("--slots", "1", "--token-ms", "5", "--priority-policy") as url:
        # A stalled request holds the only slot until its client leaves: no timing races.
        blocker = asyncio.create_task(raw_stream(url, {"sim_fault": "stall"}))
        await wait_metrics(url, 1, 0)
        done_order: list[str] = []

        async def run(name: str, priority: int) -> None:
            await raw_stream(url, {"priority": priority, "max_tokens": 2})
            done_order.append(name)

        deep = asyncio.create_task(run("deep", 10))
        await wait_metrics(url, 1, 1)
        chat = asyncio.create_task(run("chat", 0))
        await wait_metrics(url, 1, 2)
        blocker.cancel()  # the client goes away; the engine frees the slot
        await asyncio.gather(deep, chat)
    assert done_order == ["chat", "deep"]


async def test_fifo_without_policy_and_queue_metrics() -> None:
    with run_simengine("--slots", "1", "--token-ms", "5") as url:
        blocker = asyncio.create_task(raw_stream(url, {"sim_fault": "stall"}))
        await wait_metrics(url, 1, 0)
        done_order: list[str] = []

        async def run(name: str) -> None:
            await raw_stream(url, {"max_tokens": 2})
            done_order.append(name)

        first = asyncio.create_task(run("first"))
        await wait_metrics(url, 1, 1)
        second = asyncio.create_task(run("second"))
        values = await wait_metrics(url, 1, 2)
        blocker.cancel()
        await asyncio.gather(first, second)
    assert done_order == ["first", "second"]
    assert values["vllm:num_requests_running"] == 1
    assert values["vllm:num_requests_waiting"] == 2
    assert 0 < values["vllm:kv_cache_usage_perc"] <= 1


async def test_fail_first_cli_then_ok() -> None:
    with run_simengine("--fail-first", "2", "--fail-status", "503", "--token-ms", "1") as url:
        async with httpx.AsyncClient() as http:
            body = {"model": "sim-model", "messages": MSG}
            statuses = [(await http.post(url + "/chat/completions", json=body)) for _ in range(3)]
    assert [r.status_code for r in statuses] == [503, 503, 200]
    assert statuses[0].headers["retry-after"] == "1"
    assert statuses[2].json()["choices"][0]["message"]["content"] == EXPECTED


async def test_per_request_429_counter_and_openai_error(sim: str, client: AsyncOpenAI) -> None:
    with pytest.raises(openai.RateLimitError):
        await client.chat.completions.create(
            model="sim-model", messages=MSG, extra_headers={"X-Sim-Fault": "429:1:t1"}
        )
    ok = await client.chat.completions.create(
        model="sim-model", messages=MSG, extra_headers={"X-Sim-Fault": "429:1:t1"}
    )
    assert ok.choices[0].message.content == EXPECTED


async def test_cut_closes_without_done(sim: str) -> None:
    got: list[dict[str, Any]] = []
    with pytest.raises(httpx.RemoteProtocolError):
        timeout = httpx.Timeout(10)
        body = {"model": "sim-model", "messages": MSG, "stream": True, "sim_fault": "cut:3"}
        async with (
            httpx.AsyncClient(timeout=timeout) as http,
            http.stream("POST", sim + "/chat/completions", json=body) as r,
        ):
            async for line in r.aiter_lines():
                assert line != "data: [DONE]"
                if line.startswith("data: "):
                    got.append(json.loads(line[6:]))
    assert joined(got, "content").split() == EXPECTED.split()[:3]


async def test_cut_with_openai_client(client: AsyncOpenAI) -> None:
    text = ""
    with pytest.raises((httpx.HTTPError, openai.APIError)):
        stream = await client.chat.completions.create(
            model="sim-model", messages=MSG, stream=True, extra_body={"sim_fault": "cut:4"}
        )
        async for chunk in stream:
            text += chunk.choices[0].delta.content or ""
    assert text.split() == EXPECTED.split()[:4]


async def test_stall_hits_read_timeout_and_frees_slot() -> None:
    with run_simengine("--slots", "1", "--token-ms", "1") as url:
        with pytest.raises(httpx.ReadTimeout):  # the stall is one; the client's deadline fired
            await raw_stream(url, {"sim_fault": "stall"}, read_timeout=0.5)
        await wait_metrics(url, 0, 0)  # the engine notices the disconnect, aborts the request
        chunks, done = await raw_stream(url, {})  # would wait forever if the slot leaked
    assert done and joined(chunks, "content") == EXPECTED


async def test_stall_with_openai_timeout(client: AsyncOpenAI) -> None:
    slow = client.with_options(timeout=httpx.Timeout(5, read=0.5))
    with pytest.raises(openai.APITimeoutError):
        await slow.chat.completions.create(
            model="sim-model", messages=MSG, extra_body={"sim_fault": "hang"}
        )


async def test_tool_call_delegate(sim: str, client: AsyncOpenAI) -> None:
    msgs = [{"role": "user", "content": "SIMDELEGATE prove the lemma"}]
    # tool_choice "required": this engine runs without auto tool choice, like plain vLLM
    body = {"messages": msgs, "tools": [DELEGATE_TOOL], "tool_choice": "required"}
    chunks, done = await raw_stream(sim, body)
    calls = [
        c["choices"][0]["delta"]["tool_calls"]
        for c in chunks
        if c["choices"] and c["choices"][0]["delta"].get("tool_calls")
    ]
    assert done and finish(chunks) == "tool_calls"
    assert calls[0][0]["function"]["name"] == "delegate"
    assert json.loads(calls[0][0]["function"]["arguments"]) == {"task": "prove the lemma"}
    reply = await client.chat.completions.create(
        model="sim-model", messages=msgs, tools=[DELEGATE_TOOL], tool_choice="required"
    )
    call = reply.choices[0].message.tool_calls[0]
    assert call.function.name == "delegate" and reply.choices[0].finish_reason == "tool_calls"
    no_call = {"tools": [DELEGATE_TOOL], "tool_choice": "auto"}
    with pytest.raises(httpx.HTTPStatusError):  # refused: auto tool choice is off here
        await raw_stream(sim, no_call)
    plain, _ = await raw_stream(sim, {"tools": [DELEGATE_TOOL], "tool_choice": "none"})
    assert joined(plain, "content") == EXPECTED


def parse_metrics(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[sample.name] = sample.value
    return out


async def test_prefix_cache_metrics_and_prefill_delay() -> None:
    long_text = " ".join(["word"] * 200)
    args = ("--prefill-ms-per-token", "10", "--token-ms", "1")
    with run_simengine(*args) as url:
        turn1 = [{"role": "system", "content": long_text}, {"role": "user", "content": "hi"}]
        start = time.monotonic()
        first, _ = await raw_stream(url, {"messages": turn1})
        t1 = time.monotonic() - start
        turn2 = [
            *turn1,
            {"role": "assistant", "content": joined(first, "content")},
            {"role": "user", "content": "again"},
        ]
        await raw_stream(url, {"messages": turn2, "stream_options": {"include_usage": True}})
        async with httpx.AsyncClient() as http:
            values = parse_metrics((await http.get(root_url(url) + "/metrics")).text)
    assert t1 > 2.0  # ~210 uncached prompt tokens at 10 ms each (a floor: load only adds)
    # only the new user message is prefilled: the first turn's prompt is a cache hit (the
    # delay is charged on prompt - hit); how fast is the benchmarks' to say
    assert values["vllm:prefix_cache_queries_total"] > values["vllm:prefix_cache_hits_total"] > 200


async def test_records_requests_and_reset(sim: str, client: AsyncOpenAI) -> None:
    await client.chat.completions.create(
        model="sim-model",
        messages=MSG,
        max_tokens=7,
        reasoning_effort="low",
        extra_body={"priority": 0, "chat_template_kwargs": {"enable_thinking": False}},
    )
    records = sim_requests(sim)
    body = records[-1]["body"]
    assert (body["max_tokens"], body["reasoning_effort"], body["priority"]) == (7, "low", 0)
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert records[-1]["headers"]["authorization"] == "Bearer test-key"
    assert records[-1]["received_at"] > 0
    sim_reset(sim)
    assert sim_requests(sim) == []


async def test_llamacpp_kind_ignores_priority_and_reports_slots() -> None:
    with run_simengine("--kind", "llamacpp", "--slots", "2", "--token-ms", "1") as url:
        chunks, done = await raw_stream(url, {"priority": 10})
        async with httpx.AsyncClient() as http:
            props = (await http.get(root_url(url) + "/props")).json()
            models = (await http.get(url + "/models")).json()
    assert done and joined(chunks, "content") == EXPECTED
    assert props["total_slots"] == 2
    assert models["data"][0]["owned_by"] == "llamacpp"


async def test_interrupt_on_new_cuts_running_stream() -> None:
    with run_simengine("--interrupt-on-new", "--token-ms", "30", "--answer-words", "300") as url:
        old = asyncio.create_task(raw_stream(url, {}))  # ~9 s unless something cuts it
        await wait_metrics(url, 1, 0)
        new_chunks, new_done = await raw_stream(url, {"max_tokens": 3})
        with pytest.raises(httpx.RemoteProtocolError):
            await old
    assert new_done and len(joined(new_chunks, "content").split()) == 3


def test_sigterm_stops_promptly_with_a_stalled_stream() -> None:
    cmd = [sys.executable, "-m", "assistant.devtools.simengine", "--port", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("READY port=")
        url = f"http://127.0.0.1:{int(line.split('=')[1])}/v1"
        body = {"model": "m", "messages": MSG, "stream": True, "sim_fault": "stall"}
        with (
            httpx.Client(timeout=5) as http,
            http.stream("POST", url + "/chat/completions", json=body) as r,
        ):
            assert r.status_code == 200
            proc.send_signal(signal.SIGTERM)
            # it exits with the stream still stalled (an hour's hold without the short
            # graceful timeout): the wait is for that event, not a measure of its speed
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pytest.fail("SIGTERM did not stop the engine while a stream was stalled")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
