#!/usr/bin/env bash
# Create .venv-owui: Open WebUI from the registry (open-webui), in an environment of its own, for
# the test tier that drives the real Open WebUI against the app's /v1 (tests/test_openwebui.py).
# Safe to run again: a finished environment is stamped and left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=.venv-owui
VERSION=0.12.4
STAMP=$VENV/.open-webui-$VERSION
[ -f "$STAMP" ] && exit 0
[ -x $VENV/bin/python ] || "$PY" -m venv $VENV
# Open WebUI needs torch (sentence-transformers); the CPU build, asked for first and pinned
# with it, keeps pip from taking CUDA wheels of several GB (as for .venv-vllm).
$VENV/bin/python -m pip install -q "torch==2.13.0"
$VENV/bin/python -m pip install -q "open-webui==$VERSION" "torch==2.13.0"
$VENV/bin/python -c 'import importlib.metadata as m; print("open-webui", m.version("open-webui"))'
touch "$STAMP"
