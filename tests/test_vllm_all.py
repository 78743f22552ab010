"""vLLM as we recommend running it: priority scheduling, auto tool choice (Hermes), the qwen3
reasoning parser, prefix caching. The doctor says so, the model's delegate tool works, and
cancelling closes the real request."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator

import openai
import pytest

from assistant.devtools.vllm_server import VllmServer
from assistant.engine.client import Engine, build_client
from assistant.records import Message
from assistant.routing.router import DELEGATE_TOOL
from assistant.store.db import Store
from tests.app_proc import CLI_SERVE, run_app
from tests.conftest import sim_settings
from tests.test_cli import run
from tests.vllm_proc import metrics, vllm, wait_running
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    with vllm(tmp_path_factory.mktemp("vllm-all"), "all", max_num_seqs=4) as s:
        yield s


def _json(proc) -> dict:
    assert proc.stdout.strip(), proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_doctor_confirms_every_recommended_flag(server, tmp_path):
    proc = run(["doctor", "--json"], tmp_path, server.url)
    assert proc.returncode == 0, proc.stderr
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    for name in (
        "reachable",
        "model",
        "tools",
        "priority",
        "reasoning field",
        "thinking off",
        "latency",
        "prefix cache",
        "batched deep chunks",
    ):
        assert checks[name]["ok"] is True, checks[name]
    assert "overtook" in checks["priority"]["detail"]


def test_the_models_delegate_tool_turns_a_chat_turn_into_a_job(server, tmp_path):
    # a greeting: cue and classifier both say chat, so only the model's own call can delegate
    proc = run(["chat", "Hello there [[delegate]]", "--json"], tmp_path, server.url)
    out = _json(proc)
    assert proc.returncode == 0 and out["error"] is None, out
    assert (out["lane"], out["reason"]) == ("deep", "model asked to delegate")
    assert out["job_id"] and f"job {out['job_id']}" in out["reply"]
    job = _json(run(["jobs", "show", out["job_id"], "--json"], tmp_path, server.url))
    assert job["state"] == "queued"  # the store is the queue: the app's worker runs it


async def test_a_named_tool_choice_forces_the_delegate_call(server):
    # random or scripted weights do not choose tools; a named tool_choice makes vLLM's guided
    # decoding produce the call, so the request shape the tool needs is proven on the server
    client = openai.AsyncOpenAI(base_url=server.url, api_key="x", max_retries=0)
    try:
        r = await client.chat.completions.create(
            model="tiny",
            messages=[{"role": "user", "content": "Write the full report."}],
            tools=[DELEGATE_TOOL],
            tool_choice={"type": "function", "function": {"name": "delegate"}},
            max_tokens=400,
            extra_body={"chat_template_kwargs": {"enable_thinking": False}},
        )
    finally:
        await client.close()
    calls = r.choices[0].message.tool_calls or []
    assert [c.function.name for c in calls] == ["delegate"]


async def test_closing_a_stream_closes_the_real_request(server, settings):
    s = sim_settings(settings, server.url)
    engine = Engine(build_client(server.url, None), kind="vllm", model="tiny")
    before = metrics(server).running or 0
    # a budget the tiny model cannot spend while the test reads: the chat lane's 1,024 tokens
    # take it under two seconds, and a request that ended by itself proves nothing
    stream = engine.stream([Message("user", "Go on forever [[long]]")], s.chat, max_tokens=30000)
    try:
        got = ""
        async for ev in stream:
            got += ev.text if ev.kind == "content" else ""
            if len(got) > 40:
                break
        assert "and so on" in got
        assert (await asyncio.to_thread(metrics, server)).running == before + 1
    finally:
        await stream.aclose()
        await engine.client.close()
    after = await asyncio.to_thread(wait_running, server, lambda m: m.running == before)
    assert after.running == before


def test_cancelling_a_running_job_in_the_app_closes_its_request(server, tmp_path):
    with run_app(tmp_path / "app", server.url, entry=CLI_SERVE) as app:
        queued = _json(
            run(
                ["delegate", "Write it all out [[long]]", "--no-wait", "--json"],
                app.data_dir,
                server.url,
            )
        )
        job_id = queued["id"]
        busy = wait_running(server, lambda m: (m.running or 0) >= 1)
        assert busy.running >= 1

        def tokens() -> int:
            job = _json(run(["jobs", "show", job_id, "--json"], app.data_dir, server.url))
            return job["reasoning_tokens"] + job["answer_tokens"]

        # the app's job worker process runs it, and its progress reaches the store as it goes
        # (every second, in chunks vLLM batched for it)
        first = wait_until(tokens, 60, "the job's progress to be stored")
        wait_until(lambda: tokens() > first, 30, "the job's progress to grow")
        store = Store(app.data_dir / "assistant.db")
        try:
            (owner,) = store.db.execute(
                "SELECT lease_owner FROM jobs WHERE id=?", (job_id,)
            ).fetchone()
        finally:
            store.close()
        worker_pid = int(owner.split(":")[1])
        assert worker_pid != app.proc.pid and os.getsid(worker_pid) == worker_pid
        out = _json(run(["jobs", "cancel", job_id, "--json"], app.data_dir, server.url))
        assert out["cancelled"] is True
        idle = wait_running(server, lambda m: (m.running or 0) == 0)
        assert idle.running == 0, "the cancelled job's request still runs in vLLM"
    shown = _json(run(["jobs", "show", job_id, "--json"], app.data_dir, server.url))
    assert shown["state"] == "cancelled"
