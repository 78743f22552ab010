"""The installed llama.cpp runs on any x86-64 CPU of the last decade, not only the build machine's.

A build for the build machine's CPU (-march=native) holds AVX-512 or AMX instructions wherever
that CPU reports them; on a machine (or VM) that cannot run them the engine dies at its first
generation. These tests read what was actually installed.
"""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
X86 = platform.machine() in ("x86_64", "AMD64")
# AMX tile instructions, and any use of the 512-bit registers only AVX-512 has
AMX = re.compile(
    r"\b(ldtilecfg|sttilecfg|tileloadd\w*|tilestored|tilezero|tilerelease|tdp\w+ps|tdpb\w+d)\b"
)
ZMM = re.compile(r"%zmm\d+")


def _native_libraries() -> list[Path]:
    import llama_cpp

    lib = Path(llama_cpp.__file__).parent / "lib"
    return sorted({p.resolve() for p in lib.glob("*.so*") if p.is_file()})


def test_llama_libraries_are_installed():
    names = {p.name for p in _native_libraries()}
    assert any(n.startswith("libggml-cpu") for n in names), names
    assert any(n.startswith("libllama") for n in names), names


@pytest.mark.skipif(not X86, reason="x86-64 instruction check")
def test_no_amx_or_avx512_instructions_in_the_installed_libraries():
    objdump = shutil.which("objdump")
    assert objdump, "objdump (binutils, installed with gcc) is needed to inspect the build"
    for lib in _native_libraries():
        text = subprocess.run(
            [objdump, "-d", "--no-show-raw-insn", str(lib)],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        assert not AMX.search(text), f"{lib.name} holds AMX tile instructions"
        zmm = ZMM.findall(text)
        assert not zmm, f"{lib.name} uses AVX-512 registers ({len(zmm)} times): a native build"


def test_compiled_features_are_the_portable_baseline():
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode()
    for feature in ("AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16", "AMX_INT8"):
        assert f"{feature} = 1" not in info, info
    if X86:
        assert "AVX2 = 1" in info, info  # the baseline itself, not a lower one by accident


def test_the_installed_build_was_made_by_the_portable_build_script():
    """The stamp names the flags the venv's llama-cpp-python was built with: never native."""
    stamps = list(Path(sys.prefix).glob(".llama-cpp-python-*"))
    assert len(stamps) == 1, f"expected one build stamp in {sys.prefix}, found {stamps}"
    flags = stamps[0].read_text()
    assert "-DGGML_NATIVE=OFF" in flags and "-DGGML_AMX_INT8=OFF" in flags
    assert "march=native" not in flags


@pytest.mark.parametrize(
    ("arch", "present", "absent"),
    [
        ("x86_64", ["-DGGML_AVX2=ON", "-DGGML_NATIVE=OFF"], ["AVX512=ON", "AMX_TILE=ON"]),
        ("aarch64", ["-DGGML_NATIVE=OFF"], ["-DGGML_AVX2=ON", "-DGGML_AVX=ON"]),
    ],
)
def test_build_flags_per_architecture(arch, present, absent):
    """An ARM box (the seed deployment's) gets the compiler's portable default, no x86 flags."""
    flags = subprocess.run(
        [str(ROOT / "scripts" / "build_llama.sh"), "--print-flags"],
        capture_output=True, text=True, check=True,
        env={"PATH": "/usr/bin:/bin", "ASSISTANT_BUILD_ARCH": arch, "HOME": "/nonexistent"},
    ).stdout  # fmt: skip
    for flag in present:
        assert flag in flags
    for flag in absent:
        assert flag not in flags


def test_a_cpu_without_avx2_gets_the_sse_baseline():
    flags = subprocess.run(
        [str(ROOT / "scripts" / "build_llama.sh"), "--print-flags"],
        capture_output=True, text=True, check=True,
        env={"PATH": "/usr/bin:/bin", "ASSISTANT_BUILD_ARCH": "x86_64",
             "ASSISTANT_LLAMA_CPU": "baseline"},
    ).stdout  # fmt: skip
    assert "-DGGML_AVX=OFF" in flags and "-DGGML_SSE42=ON" in flags
