"""The app installed from its wheel (not editable) finds its prompts and voices, and works."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
from pathlib import Path

import pytest
import soundfile as sf

from tests.simengine_proc import run_simengine

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scratch venv holding the built wheel; its dependencies come from the test venv."""
    tmp = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
         "-w", str(tmp / "dist"), str(ROOT)],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    (wheel,) = (tmp / "dist").glob("assistant-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys._base_executable, "-m", "venv", str(venv)], check=True, timeout=300)  # type: ignore[attr-defined]
    (scratch_site,) = venv.glob("lib/python*/site-packages")
    # the dependencies (gradio, llama-cpp-python, ...) are the test venv's; `assistant` is not,
    # because a path a .pth file adds is searched after the venv's own site-packages
    (scratch_site / "deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    return venv


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSISTANT_")}
    env.pop("PYTHONPATH", None)
    return env | extra


def test_the_installed_package_is_the_wheel_not_the_checkout(installed, tmp_path):
    where = subprocess.run(
        [str(installed / "bin" / "python"), "-c",
         "import assistant.prompting.prompt as p; print(p.__file__); print(p.PROMPTS_DIR)"],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert all(str(installed) in line for line in where), where
    assert str(ROOT) not in " ".join(where)


def test_speak_from_the_wheel(installed, tmp_path):
    out = tmp_path / "hello.wav"
    subprocess.run(
        [str(installed / "bin" / "assistant"), "speak", "Hello from the wheel.", "-o", str(out)],
        cwd=tmp_path, env=_env(ASSISTANT_DATA_DIR=str(tmp_path / "data")),
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    audio, rate = sf.read(out)
    assert rate > 8000 and len(audio) > rate // 2  # half a second of speech at least


def test_a_chat_turn_from_the_wheel(installed, tmp_path):
    with run_simengine("--token-ms", "1") as url:
        run = subprocess.run(
            [str(installed / "bin" / "assistant"), "chat", "hello there", "--json"],
            cwd=tmp_path,
            env=_env(ASSISTANT_ENGINE_URL=url, ASSISTANT_DATA_DIR=str(tmp_path / "data")),
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert run.returncode == 0, run.stderr
    reply = json.loads(run.stdout)
    assert reply["reply"].startswith("You said: hello there") and reply["error"] is None
