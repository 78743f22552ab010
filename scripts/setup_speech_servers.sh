#!/usr/bin/env bash
# Create .venv-stt and .venv-tts: two OpenAI-compatible speech servers nobody here wrote, each in
# an environment of its own, for the remote-speech tests (tests/test_speech_servers.py):
# the registry's faster-whisper-server (/v1/audio/transcriptions) and local-tts-studio
# (/v1/audio/speech for Piper voices). The tests point them at the app's own bundled model
# files (tiny.en, the Piper voice): nothing is downloaded at run time.
# Safe to run again: a finished environment is stamped and left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
make_venv() {  # VENV STAMP PACKAGES...
  local venv=$1 stamp=$2; shift 2
  [ -f "$venv/$stamp" ] && return 0
  [ -x "$venv/bin/python" ] || "$PY" -m venv "$venv"
  "$venv/bin/python" -m pip install -q "$@"
  touch "$venv/$stamp"
}
make_venv .venv-stt .faster-whisper-server-0.0.3 "faster-whisper-server==0.0.3"
make_venv .venv-tts .local-tts-studio-1.0.0 "local-tts-studio==1.0.0" piper-tts
