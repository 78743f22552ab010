"""The real embedded engine: llama.cpp's server process with the bundled Gemma 3 270M."""

from __future__ import annotations

import os

import httpx
import pytest

from assistant.embedded import EmbeddedEngine
from assistant.runtime import Runtime


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    from assistant.settings import load_settings

    data = tmp_path_factory.mktemp("embedded")
    rt = Runtime(load_settings(env={"ASSISTANT_DATA_DIR": str(data)}, toml_path=data / "x"))
    yield rt
    rt.close()


def test_embedded_engine_answers_on_loopback(runtime):
    assert runtime.embedded is not None and runtime.notice and "base model" in runtime.notice
    assert runtime.base_url.startswith("http://127.0.0.1:")
    models = httpx.get(runtime.base_url + "/models", timeout=5).json()
    assert models["data"]
    assert runtime.engine.kind == "llamacpp"


async def test_chat_and_deep_turns_through_the_embedded_engine(runtime):
    cid = runtime.store.new_conversation("local")
    chat = await runtime.chat.run(
        "The capital of France is", conversation_id=cid, deep_inline=True
    )
    deep = await runtime.chat.run(
        "List three prime numbers.", conversation_id=cid, force_deep=True, deep_inline=True
    )
    for result in (chat, deep):
        assert result.error is None or result.reply, result.error
        assert result.finish_reason in ("stop", "length")
        assert result.timings.ttft and result.timings.ttft > 0
    assert chat.lane == "chat" and deep.lane == "deep"
    assert len(runtime.store.turns(cid)) == 2


def test_stop_kills_our_process_by_pid(tmp_path):
    engine = EmbeddedEngine(tmp_path / "models", ctx=512)
    engine.start()
    pid = engine.proc.pid
    engine.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert engine.proc is None
    engine.stop()  # twice is harmless
