"""Shared fixtures: settings on a temp data dir, a simulated engine process, engines on it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from openai import AsyncOpenAI

from assistant.engine.client import Engine
from assistant.engine.network import lean_client
from assistant.engine.sse import LeanClient
from assistant.settings import Settings, load_settings
from tests.simengine_proc import run_simengine

pytest_plugins = ["tests.ci_strict"]
# nothing in the test suite may fetch weights from a hub
os.environ.setdefault("HF_HUB_OFFLINE", "1")
AUDIO = Path(__file__).resolve().parent.parent.parent / "shared" / "audio"
if not AUDIO.is_dir():
    AUDIO = Path(os.environ.get("ASSISTANT_TEST_AUDIO", "../shared/audio")).resolve()


TIERS = {
    "test_browser": ("browser", "process", "model"),
    "test_browser_conversations": ("browser", "process", "model"),
    "test_browser_handsfree": ("browser", "process", "model"),
    "test_browser_tls": ("browser", "process", "model"),
    "test_browser_remote_speech": ("browser", "process", "model"),
    "test_listener": ("model",),
    "test_attacks": ("process",),
    "test_attacks_fair": ("process",),
    "test_attacks_local": ("process",),
    "test_attacks_sessions": ("process",),
    "test_build": ("process",),
    "test_callbench": ("process", "model"),
    "test_chat": ("process",),
    "test_ci": ("process",),
    "test_cli": ("process", "model"),
    "test_crash": ("process",),
    "test_dashboard": ("process",),
    "test_doctor": ("process",),
    "test_embedded": ("process", "model"),
    "test_engine": ("process",),
    "test_hardening": ("process", "model"),
    "test_jobs": ("process",),
    "test_leftovers": ("process",),
    "test_app_killed": ("process", "model"),
    "test_openai_api": ("process", "model"),
    "test_openai_routing": ("process", "model"),
    "test_housekeeping": ("process",),
    "test_openwebui": ("openwebui", "browser", "process"),
    "test_openai_audio": ("process", "model"),
    "test_remote_speech": ("process", "model"),
    "test_speech_servers": ("process", "model"),
    "test_router": ("model",),
    "test_security": ("process", "model"),
    "test_simengine": ("process",),
    "test_stt": ("model",),
    "test_tts": ("model",),
    "test_turnbench": ("model",),
    "test_ui": ("process", "model"),
    "test_voice": ("process", "model"),
    "test_wheel": ("process", "model"),
    "test_vllm_plain": ("vllm", "process"),
    "test_vllm_all": ("vllm", "process"),
    "test_vllm_priority": ("vllm", "process"),
    "test_vllm_tools": ("vllm", "process"),
    "test_vllm_page": ("vllm", "browser", "process", "model"),
    "test_vllm_window": ("vllm", "process"),
}
"""Which tier each module's tests belong to; a module not named here is the fast tier."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for mark in TIERS.get(item.module.__name__.rpartition(".")[2], ()):  # type: ignore[union-attr]
            item.add_marker(getattr(pytest.mark, mark))


@pytest.fixture(scope="session")
def sim_url() -> Iterator[str]:
    """A vLLM-like simulated engine run as we recommend (priority scheduling, auto tool
    choice) with four slots, fast tokens."""
    flags = ("--slots", "4", "--token-ms", "2", "--priority-policy", "--auto-tool-choice")
    with run_simengine(*flags) as url:
        yield url


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(env={"ASSISTANT_DATA_DIR": str(tmp_path)}, toml_path=tmp_path / "none")


def sim_settings(settings: Settings, url: str, read_s: float = 15.0, **lanes: float) -> Settings:
    """Settings aimed at a simulated engine, with short deadlines so faults show fast. The
    read deadline is short only where a test stalls the stream on purpose (`read_s=2`): a
    busy machine can pause a healthy stream for seconds, and 2 s turned those into stalls."""
    chat = replace(settings.chat, read_timeout_s=read_s, connect_timeout_s=1.0, **lanes)
    deep = replace(settings.deep, read_timeout_s=read_s, connect_timeout_s=1.0)
    return replace(settings, engine_url=url, engine_kind="vllm", chat=chat, deep=deep)


def sim_engine(url: str, fault: str = "", kind: str = "vllm") -> Engine:
    """An Engine on the simulator; `fault` rides on every request as the X-Sim-Fault header."""
    headers = {"X-Sim-Fault": fault} if fault else None
    client = AsyncOpenAI(
        base_url=url,
        api_key="test",
        max_retries=0,
        default_headers=headers,
        http_client=lean_client(),
    )
    # read as the app reads it (`build_client`): asyncio's sockets, the lean SSE reader
    client = LeanClient(client)  # type: ignore[assignment]
    # the runtime learns the context window from the engine's model list; so do these
    return Engine(client, kind=kind, model="sim-model", context=32768)
