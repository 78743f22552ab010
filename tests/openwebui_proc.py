"""A real Open WebUI (the registry's `open-webui`, in .venv-owui made by scripts/setup_openwebui.sh)
as a process on a loopback port, offline, with the app's /v1 as its only connection.

Without .venv-owui these tests skip, and CI fails a skip (tests/ci_strict.py), as for vLLM.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from assistant.devtools.launcher import running
from assistant.engine.embedded import free_port

REPO = Path(__file__).resolve().parent.parent
OPEN_WEBUI = REPO / ".venv-owui" / "bin" / "open-webui"
START_TIMEOUT_S = 240.0
"""About 20 s on a quiet machine; its first start also migrates its new database."""


def openwebui_env(data_dir: Path, api_base: str) -> dict[str, str]:
    """Open WebUI's settings for a test: offline, no login, one OpenAI connection (the app)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSISTANT_")}
    env.update(
        DATA_DIR=str(data_dir),
        # offline: no model downloads, no update checks, no telemetry
        OFFLINE_MODE="true",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        ENABLE_VERSION_UPDATE_CHECK="false",
        ANONYMIZED_TELEMETRY="false",
        DO_NOT_TRACK="true",
        SCARF_NO_ANALYTICS="true",
        # its own local models (document embeddings, speech) are never loaded
        RAG_EMBEDDING_ENGINE="openai",
        RAG_EMBEDDING_MODEL_AUTO_UPDATE="false",
        RAG_RERANKING_MODEL_AUTO_UPDATE="false",
        # speech: the app's own /v1/audio, both ways (issue 31's item 4)
        AUDIO_STT_ENGINE="openai",
        AUDIO_STT_OPENAI_API_BASE_URL=api_base,
        AUDIO_STT_OPENAI_API_KEY="unused",
        AUDIO_STT_MODEL="whisper-1",
        AUDIO_TTS_ENGINE="openai",
        AUDIO_TTS_OPENAI_API_BASE_URL=api_base,
        AUDIO_TTS_OPENAI_API_KEY="unused",
        AUDIO_TTS_MODEL="tts-1",
        AUDIO_TTS_VOICE="alloy",
        # the app speaks WAV; Open WebUI turns non-MP3 speech into MP3 with ffmpeg, which this
        # machine need not have (the app brings its own): it passes the WAV on as it is
        BYPASS_PYDUB_PREPROCESSING="true",
        WHISPER_MODEL_AUTO_UPDATE="false",
        ENABLE_WEB_SEARCH="false",
        # one person, no login; the environment wins over anything it saved before
        WEBUI_AUTH="false",
        WEBUI_SECRET_KEY="test-only-secret",
        ENABLE_PERSISTENT_CONFIG="false",
        # the app is its only engine, and the background tasks are on (its defaults, said
        # here so a changed default cannot make the test pass without them)
        ENABLE_OLLAMA_API="false",
        ENABLE_OPENAI_API="true",
        OPENAI_API_BASE_URL=api_base,
        OPENAI_API_KEY="unused",
        DEFAULT_MODELS="assistant",
        ENABLE_TITLE_GENERATION="true",
        ENABLE_TAGS_GENERATION="true",
        ENABLE_FOLLOW_UP_GENERATION="true",
    )
    return env


@contextlib.contextmanager
def run_openwebui(data_dir: Path, api_base: str) -> Iterator[str]:
    """Open WebUI's page URL until the block ends; stopped by its PID."""
    if not OPEN_WEBUI.exists():
        pytest.skip(f"needs Open WebUI in {OPEN_WEBUI.parent.parent} (scripts/setup_openwebui.sh)")
    port = free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    url = f"http://127.0.0.1:{port}/"
    with running(
        [str(OPEN_WEBUI), "serve", "--host", "127.0.0.1", "--port", str(port)],
        url=url + "health",
        timeout_s=START_TIMEOUT_S,
        env=openwebui_env(data_dir, api_base),
        cwd=data_dir,
        log=data_dir / "openwebui.log",
        grace_s=10,
    ):
        yield url
