"""`assistant bench voice`: per-stage voice-turn times, pipelined vs sequential, in one run.

Pipelined is the product: the first sentence is spoken while the rest is generated.
Sequential is the naive baseline on the same engine and models: the full reply, then the full
speech. The headline figure is the ratio of their times to first audio (target: <= 0.4).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from assistant.records import TIMING_KEYS, now_ms
from assistant.settings import Settings
from assistant.speech.audio import load_audio
from assistant.stats import percentile

AUDIO_DIR = Path(__file__).resolve().parents[3] / "shared" / "audio"


async def _pipelined(rt: Any, stt: Any, tts: Any, path: Path) -> dict[str, float]:
    from assistant.turns.pipeline import TurnRequest

    cid = rt.store.new_conversation("bench")
    result = None
    request = TurnRequest(
        audio=path, conversation_id=cid, speak=True, received_ms=now_ms(), source="voice"
    )
    turn = rt.turns.stream(request, stt=stt, tts=tts)
    async with contextlib.aclosing(turn) as updates:
        async for update in updates:
            if update.kind == "done":
                result = update.result
    assert result is not None
    return result.timings.as_dict()


async def _sequential(rt: Any, stt: Any, tts: Any, path: Path) -> dict[str, float]:
    start = now_ms()
    samples = await asyncio.to_thread(load_audio, path, max_bytes=10**9, max_seconds=600)
    transcript = await asyncio.to_thread(stt.transcribe, samples)
    stt_ms = now_ms() - start
    cid = rt.store.new_conversation("b")
    result = await rt.turns.ask(transcript.text, conversation_id=cid)
    reply_done = now_ms()
    chunks = await asyncio.to_thread(lambda: list(tts.synthesize(result.reply or "Okay.")))
    done = now_ms()
    return {
        "stt": stt_ms,
        "llm_total": reply_done - start - stt_ms,
        "tts_total": done - reply_done,
        "first_audio": done - start if chunks else 0.0,
    }


def bench_voice(settings: Settings, rounds: int | None) -> dict:
    from assistant.runtime import Runtime
    from assistant.speech.stt import load_stt
    from assistant.speech.tts import load_tts

    rounds = rounds or 3
    files = [p for p in sorted(AUDIO_DIR.glob("*")) if p.suffix in (".flac", ".wav", ".mp3")]
    stt, tts = load_stt(settings), load_tts(settings)
    stt.warm()
    tts.warm()
    per_stage: dict[str, list[float]] = {k: [] for k in TIMING_KEYS}
    seq_first: list[float] = []
    pipe_first: list[float] = []

    async def run_all(rt: Any) -> None:
        # one event loop for the whole run: the runtime's queues and locks belong to it
        await rt.turns.ask("warm up", deep_inline=True)
        for _ in range(rounds):
            for path in files:
                piped = await _pipelined(rt, stt, tts, path)
                seq = await _sequential(rt, stt, tts, path)
                for key in TIMING_KEYS:
                    if key in piped:
                        per_stage[key].append(piped[key])
                if piped.get("first_audio") and seq.get("first_audio"):
                    pipe_first.append(piped["first_audio"])
                    seq_first.append(seq["first_audio"])

    with tempfile.TemporaryDirectory() as tmp, Runtime(replace(settings, data_dir=Path(tmp))) as rt:
        asyncio.run(run_all(rt))
        engine = "embedded llama.cpp (Gemma 3 270M)" if rt.embedded else rt.base_url
    stages = {
        k: {
            "p50_ms": round(percentile(v, 0.5), 1),
            "p95_ms": round(percentile(v, 0.95), 1),
            "n": len(v),
        }
        for k, v in per_stage.items()
        if v
    }
    ratios = [p / s for p, s in zip(pipe_first, seq_first, strict=True) if s]
    return {
        "bench": "voice",
        "engine": engine,
        "files": [p.name for p in files],
        "rounds": rounds,
        "pipelined": stages,
        "sequential_first_audio_p50_ms": round(percentile(seq_first, 0.5), 1),
        "pipelined_first_audio_p50_ms": round(percentile(pipe_first, 0.5), 1),
        "first_audio_ratio_p50": round(percentile(ratios, 0.5), 3),
        "target_ratio": 0.4,
        "target_met": bool(ratios) and percentile(ratios, 0.5) <= 0.4,
    }


if __name__ == "__main__":
    from assistant.settings import load_settings

    print(json.dumps(bench_voice(load_settings(), 1), indent=2))
