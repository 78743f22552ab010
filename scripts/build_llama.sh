#!/usr/bin/env bash
# Build llama-cpp-python for a portable CPU baseline and install it into the given Python.
#
# llama.cpp compiles for the build machine's own CPU by default (-march=native). On a VM whose
# CPU reports AMX or AVX-512 that the hypervisor does not let processes use, such a build dies
# with SIGSEGV/SIGILL at the first generation. So the flags are fixed here, never "native":
#   x86_64: AVX2 + FMA + F16C + BMI2 (every x86-64 CPU since 2013/2015), no AVX-512, no AMX;
#           ASSISTANT_LLAMA_CPU=baseline (chosen by itself on a CPU without AVX2) drops to SSE4.2.
#   aarch64 and others: the compiler's default target for the architecture.
# pip caches a built wheel under the source package's name, not the flags, so pip's wheel cache
# is bypassed; our own cache keys the wheel by version, architecture and flags, and a stamp in
# the venv makes a venv holding any other build (an old native one) reinstall ours.
set -euo pipefail
cd "$(dirname "$0")/.."
PYBIN=${1:-.venv/bin/python}
VERSION=$(sed -n 's/.*"llama-cpp-python\[server\]==\([0-9.]*\)".*/\1/p' pyproject.toml)
ARCH=${ASSISTANT_BUILD_ARCH:-$(uname -m)}

common="-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=OFF -DGGML_CPU_ALL_VARIANTS=OFF -DLLAVA_BUILD=OFF"
common="$common -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF"
common="$common -DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
tier=${ASSISTANT_LLAMA_CPU:-}
case "$ARCH" in
  x86_64|amd64)
    if [ -z "$tier" ]; then
      if grep -qw avx2 /proc/cpuinfo 2>/dev/null; then tier=avx2; else tier=baseline; fi
    fi
    if [ "$tier" = baseline ]; then
      flags="$common -DGGML_SSE42=ON -DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_BMI2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF -DGGML_AVX_VNNI=OFF"
    else
      tier=avx2
      flags="$common -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_BMI2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX_VNNI=OFF"
    fi ;;
  *)
    tier=default
    flags="$common" ;;
esac

if [ "$PYBIN" = --print-flags ]; then echo "$flags"; exit 0; fi
key=$(printf '%s %s %s' "$VERSION" "$ARCH" "$flags" | sha256sum | cut -c1-12)
cache=${ASSISTANT_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/assistant-wheels}
dir="$cache/llama-cpp-python-$VERSION-$ARCH-$tier-$key"
stamp="$(dirname "$PYBIN")/../.llama-cpp-python-$key"

if ! ls "$dir"/*.whl >/dev/null 2>&1; then
  echo "building llama-cpp-python $VERSION for $ARCH ($tier); about 10 minutes on 2 cores" >&2
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
  CMAKE_ARGS="$flags" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
    "$PYBIN" -m pip wheel -q --no-deps --no-cache-dir --no-binary llama-cpp-python \
    "llama-cpp-python==$VERSION" -w "$dir.tmp"
  printf '%s\n' "$flags" > "$dir.tmp/CMAKE_ARGS"
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
fi
if [ ! -e "$stamp" ]; then
  wheel=$(ls "$dir"/*.whl | head -n1)
  "$PYBIN" -m pip install -q --force-reinstall --no-deps "$wheel"
  "$PYBIN" -m pip install -q "$wheel[server]"
  rm -f "$(dirname "$PYBIN")"/../.llama-cpp-python-*
  printf '%s\n' "$flags" > "$stamp"
fi
