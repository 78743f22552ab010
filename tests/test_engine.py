"""The engine client against a real (simulated) engine process: shapes, faults, deadlines."""

from __future__ import annotations

import threading

import httpx
import pytest

from assistant.engine.client import CUT, STALLED, Engine, build_client
from assistant.engine.fold import Fold, folded
from assistant.errors import EngineError, EngineUnavailable
from assistant.records import Message
from tests.conftest import sim_engine, sim_settings
from tests.simengine_proc import run_simengine, sim_requests, sim_reset

ASK = [Message("system", "Be brief."), Message("user", "hello there")]


def _requests(url: str) -> list[dict]:
    return [r["body"] for r in sim_requests(url)]


async def test_vllm_lanes_send_priority_effort_and_thinking(sim_url, settings):
    s = sim_settings(settings, sim_url)
    with run_simengine("--priority-policy", "--token-ms", "1") as url:
        engine = sim_engine(url)
        chat = await engine.complete(ASK, s.chat)
        deep = await engine.complete(ASK, s.deep)
        sent = _requests(url)
    assert chat.content and chat.finish_reason == "stop"
    assert not chat.reasoning  # thinking off on the chat lane
    assert deep.reasoning and deep.content  # vLLM's `reasoning` field is read
    c, d = sent[0], sent[1]
    assert c["priority"] == 0 and c["reasoning_effort"] == "low"
    assert c["chat_template_kwargs"] == {"enable_thinking": False}
    assert c["stream"] is True and c["max_tokens"] == s.chat.max_tokens
    assert d["priority"] == 10 and d["reasoning_effort"] == "high"
    assert d["chat_template_kwargs"] == {"enable_thinking": True}
    assert 30000 < d["max_tokens"] <= 32768  # the 32k budget, fitted to the context
    # only the deep lane batches its chunks: chat keeps every token as it comes
    assert "stream_interval" not in c and d["stream_interval"] == s.deep.stream_interval
    assert d["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}


async def test_a_batched_deep_stream_counts_every_token_in_few_chunks(sim_url, settings):
    s = sim_settings(settings, sim_url)
    chunks = 0
    fold = Fold()
    stream = folded(sim_engine(sim_url).stream(ASK, s.deep), fold)
    async for ev in stream:
        chunks += ev.kind in ("reasoning", "content")
    reply = fold.reply
    # per kind, the tokens add up to the engine's own count, carried on the batched chunks
    assert reply.reasoning_tokens + reply.content_tokens == fold.usage_tokens > 32
    assert reply.reasoning_tokens > 16 and reply.content_tokens > 1
    assert chunks <= fold.usage_tokens / 8


async def test_old_reasoning_content_field_is_read(settings):
    with run_simengine("--reasoning-field", "reasoning_content", "--token-ms", "1") as url:
        s = sim_settings(settings, url)
        reply = await sim_engine(url).complete(ASK, s.deep)
    assert reply.reasoning.startswith("Let me think")
    assert reply.content


async def test_llamacpp_and_openai_kinds_send_no_vllm_fields(sim_url, settings):
    s = sim_settings(settings, sim_url)
    sim_reset(sim_url)
    await sim_engine(sim_url, kind="llamacpp").complete(ASK, s.deep)
    await sim_engine(sim_url, kind="openai").complete(ASK, s.deep)
    llama, oa = _requests(sim_url)[-2:]
    for body in (llama, oa):
        assert "priority" not in body and "chat_template_kwargs" not in body
    assert "reasoning_effort" not in llama and llama["max_tokens"] > 30000
    assert oa["reasoning_effort"] == "high" and oa["max_completion_tokens"] > 30000


async def test_priority_rejected_falls_back_and_warns_once(settings):
    with run_simengine("--token-ms", "1", "--reject-priority") as url:  # vLLM before 0.32
        s = sim_settings(settings, url)
        engine = sim_engine(url)
        first = await engine.complete(ASK, s.deep)
        second = await engine.complete(ASK, s.deep)
        bodies = _requests(url)
    assert first.content and second.content  # deep work is not failed by the rejection
    assert engine.priority_ok is False
    assert len(engine.warnings) == 1 and "--scheduling-policy priority" in engine.warnings[0]
    assert "priority" not in bodies[-1]  # later requests go without it


async def test_503_before_first_token_is_retried_then_succeeds(sim_url, settings):
    s = sim_settings(settings, sim_url)
    reply = await sim_engine(sim_url, fault="503:2:retry-ok").complete(ASK, s.chat)
    assert reply.content and reply.finish_reason == "stop"


async def test_503_that_persists_fails_after_bounded_retries(sim_url, settings):
    s = sim_settings(settings, sim_url)
    sim_reset(sim_url)
    with pytest.raises(EngineUnavailable, match="503"):
        await sim_engine(sim_url, fault="503").complete(ASK, s.chat)
    assert len(_requests(sim_url)) == s.chat.retries + 1  # one retry layer, bounded


async def test_stream_cut_mid_answer_keeps_partial(sim_url, settings):
    s = sim_settings(settings, sim_url)
    reply = await sim_engine(sim_url, fault="cut:4").complete(ASK, s.chat)
    assert reply.finish_reason == CUT and reply.incomplete
    assert reply.content  # the part that arrived is kept


async def test_stalled_stream_hits_the_read_deadline(sim_url, settings):
    s = sim_settings(settings, sim_url, read_s=2.0)
    reply = await sim_engine(sim_url, fault="stall:3").complete(ASK, s.chat)
    # STALLED is the read deadline firing (a stall that ended by itself would finish
    # otherwise): no endless hang
    assert reply.finish_reason == STALLED and reply.incomplete
    assert reply.content  # the three tokens before the stall


async def test_hang_before_headers_is_bounded(sim_url, settings):
    s = sim_settings(settings, sim_url, read_s=2.0)
    with pytest.raises((EngineUnavailable, EngineError)):
        await sim_engine(sim_url, fault="hang").complete(ASK, s.chat)


async def test_engine_down_fails_fast_with_a_clear_message(settings):
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    s = sim_settings(settings, f"http://127.0.0.1:{port}/v1")
    client = build_client(s.engine_url, None)
    attempts: list[str] = []  # its requests (asking for the model first, here)

    async def sent(request: httpx.Request) -> None:
        attempts.append(request.url.path)

    client._client._client.event_hooks["request"].append(sent)  # LeanClient > openai > httpx
    engine = Engine(client, kind="vllm", model="m")
    with pytest.raises(EngineUnavailable, match="unreachable"):
        await engine.complete(ASK, s.chat)
    # fast: the lane's retries and no more, not a loop until some deadline (how long the
    # backoff takes is the lane's setting)
    assert len(attempts) == s.chat.retries + 1, attempts


async def test_model_is_discovered_when_not_configured(sim_url, settings):
    s = sim_settings(settings, sim_url)
    engine = Engine(build_client(sim_url, None), kind="vllm", model=None, context=32768)
    reply = await engine.complete(ASK, s.chat)
    assert engine.model == "sim-model" and reply.content


async def test_context_is_learned_when_the_engine_was_down_at_start(sim_url, settings):
    # a model named in settings, and no context window: what the runtime has when the
    # engine was down at start. A 32k deep budget must still be fitted to the context.
    s = sim_settings(settings, sim_url)
    engine = Engine(build_client(sim_url, None), kind="vllm", model="sim-model")
    sim_reset(sim_url)
    reply = await engine.complete(ASK, s.deep)
    assert reply.content and engine.window.size == 32768
    assert _requests(sim_url)[0]["max_tokens"] <= 32768 - 10


async def test_a_clean_early_end_is_an_interruption_not_a_cut(sim_url, settings):
    """llama-cpp-python ends a running stream cleanly, with no finish reason, when another
    request arrives: that is reported as such, and is not a broken connection."""
    s = sim_settings(settings, sim_url)
    reply = await sim_engine(sim_url, fault="interrupt:4").complete(ASK, s.chat)
    assert reply.finish_reason == "interrupted" and reply.incomplete
    assert 0 < len(reply.content.split()) <= 4


async def test_a_stream_with_a_finish_reason_is_complete(sim_url, settings):
    s = sim_settings(settings, sim_url)
    reply = await sim_engine(sim_url).complete(ASK, s.chat)
    assert reply.finish_reason == "stop" and not reply.incomplete


async def test_a_stream_that_used_its_whole_budget_is_length_without_a_reason(sim_url, settings):
    """Some servers end at the budget with no finish reason: the budget's end, not a cut."""
    s = sim_settings(settings, sim_url)
    reply = await sim_engine(sim_url, fault="interrupt:16").complete(ASK, s.chat, max_tokens=16)
    assert reply.finish_reason == "length" and not reply.incomplete


class _AliveSupervisor:
    """A supervised engine whose process never died."""

    generation = 1
    ready = threading.Event()

    def crash_of(self, generation: int) -> None:
        return None


async def test_a_supervised_engine_that_did_not_crash_keeps_the_real_end(sim_url, settings):
    s = sim_settings(settings, sim_url)
    for fault, finish in (("interrupt:4", "interrupted"), ("cut:4", "cut")):
        engine = sim_engine(sim_url, fault=fault)
        engine.supervisor = _AliveSupervisor()
        reply = await engine.complete(ASK, s.chat)
        assert reply.finish_reason == finish and reply.note == "", (fault, reply)
