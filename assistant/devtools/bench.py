"""`assistant bench qos|voice|load|idle|typed|turns`: the benchmarks. Speed is measured here,
never asserted in tests. Each lives in its own module (`qosbench`, `voicebench`, `loadbench`,
`idlebench`, `typedbench`, `turnbench`)."""

from __future__ import annotations

import json
import sys

from assistant.errors import BadInput
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
    calls: int = 0,
    busy: bool = False,
    deep: int = 0,
    engine_cpus: str | None = None,
    deep_caps: str | None = None,
    policies: str = "fcfs,priority",
) -> int:
    from assistant.devtools.busy import busy_core

    if engine_cpus is not None and not (which == "qos" and vllm):
        raise BadInput("--engine-cpus is for bench qos --vllm")
    if deep_caps is not None and not (which == "qos" and vllm):
        raise BadInput("--deep-caps is for bench qos --vllm")
    with busy_core(busy) as machine:
        if deep_caps is not None:
            result = _caps(settings, rounds, engine_cpus, deep_caps, policies)
        else:
            result = _run(
                which, settings, rounds, live, vllm, api, soak, audio_dir, scale, calls, deep,
                engine_cpus,
            )  # fmt: skip
    if busy:
        result["machine"] = machine
    if as_json:
        sys.stdout.write(json.dumps(result) + "\n")
    else:
        print(json.dumps(result, indent=2))
        print("\n".join(result.get("summary", [])))
    return 0


def _caps(
    settings: Settings, rounds: int | None, engine_cpus: str | None, caps: str, policies: str
) -> dict:
    from assistant.devtools.qoscaps import POLICIES, bench_qos_caps, parse_caps

    chosen = tuple(p.strip() for p in policies.split(",") if p.strip())
    if not chosen or any(p not in POLICIES for p in chosen):
        raise BadInput(f"--policies: some of {', '.join(POLICIES)}")

    def emit(row: dict) -> None:  # each row as it ends: a stopped sweep keeps what it made
        sys.stdout.write(json.dumps(row) + "\n")
        sys.stdout.flush()

    return bench_qos_caps(settings, rounds, engine_cpus, parse_caps(caps), chosen, emit)


def _run(
    which: str,
    settings: Settings,
    rounds: int | None,
    live: bool,
    vllm: bool,
    api: str,
    soak: int,
    audio_dir: str | None,
    scale: bool,
    calls: int,
    deep: int = 0,
    engine_cpus: str | None = None,
) -> dict:
    if which == "qos" and scale:
        from assistant.devtools.qosscale import bench_qos_scale

        result = bench_qos_scale(settings, rounds)
    elif which == "qos" and vllm:
        from assistant.devtools.qosbench_vllm import bench_qos_vllm

        result = bench_qos_vllm(settings, rounds, engine_cpus)
    elif which == "qos":
        from assistant.devtools.qosbench import bench_qos

        result = bench_qos(settings, rounds)
    elif which == "voice" and calls:
        from pathlib import Path

        from assistant.devtools.callbench import bench_calls
        from assistant.devtools.voicebench import AUDIO_DIR, recordings

        files = recordings(Path(audio_dir) if audio_dir else AUDIO_DIR)
        result = bench_calls(calls, rounds or 1, files)
    elif which == "voice":
        from pathlib import Path

        from assistant.devtools.voicebench import bench_voice

        result = bench_voice(
            settings, rounds, live=live, audio_dir=Path(audio_dir) if audio_dir else None
        )
    elif which == "turns":
        import os
        from pathlib import Path

        from assistant.devtools.turnbench import measure
        from assistant.devtools.voicebench import AUDIO_DIR
        from assistant.speech.stt import load_local_stt

        dirs = [Path(d) for d in audio_dir.split(os.pathsep)] if audio_dir else [AUDIO_DIR]
        result = measure(dirs, stt=load_local_stt(settings))
    elif which == "typed":
        from assistant.devtools.typedbench import bench_typed

        result = bench_typed(settings, rounds, deep)
    elif which == "idle":
        from assistant.devtools.idlebench import bench_idle

        result = bench_idle(settings, rounds)
    else:
        from assistant.devtools.loadbench import bench_load

        result = bench_load(settings, rounds, api, soak)
    return result
