"""`assistant bench qos|voice|load|idle`: the benchmarks. Speed is measured here, never asserted in
tests. Each lives in its own module (`qosbench`, `voicebench`, `loadbench`, `idlebench`)."""

from __future__ import annotations

import json
import sys

from assistant.settings import Settings


def run_bench(
    which: str,
    settings: Settings,
    *,
    as_json: bool,
    rounds: int | None,
    live: bool = False,
    vllm: bool = False,
    api: str = "gradio",
    soak: int = 0,
    audio_dir: str | None = None,
    scale: bool = False,
) -> int:
    if which == "qos" and scale:
        from assistant.devtools.qosscale import bench_qos_scale

        result = bench_qos_scale(settings, rounds)
    elif which == "qos" and vllm:
        from assistant.devtools.qosbench_vllm import bench_qos_vllm

        result = bench_qos_vllm(settings, rounds)
    elif which == "qos":
        from assistant.devtools.qosbench import bench_qos

        result = bench_qos(settings, rounds)
    elif which == "voice":
        from pathlib import Path

        from assistant.devtools.voicebench import bench_voice

        result = bench_voice(
            settings, rounds, live=live, audio_dir=Path(audio_dir) if audio_dir else None
        )
    elif which == "idle":
        from assistant.devtools.idlebench import bench_idle

        result = bench_idle(settings, rounds)
    else:
        from assistant.devtools.loadbench import bench_load

        result = bench_load(settings, rounds, api, soak)
    if as_json:
        sys.stdout.write(json.dumps(result) + "\n")
    else:
        print(json.dumps(result, indent=2))
    return 0
