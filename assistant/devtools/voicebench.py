"""`assistant bench voice`: per-stage voice-turn times, pipelined vs sequential, in one run.

With `--live`, the same run also feeds each recording at real-time pace (100 ms chunks,
then silence) through the hands-free path: the streaming `Listener` (VAD endpointing, the
transcript's tail) and the turn it starts, timed from the user's last word. Its target:
last word to first audio, endpoint pause included, p50 at most 1.2 s.

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

import numpy as np

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


CHUNK_S = 0.1
LIVE_TARGET_MS = 1200.0


async def _live(rt: Any, stt: Any, tts: Any, path: Path) -> list[dict[str, float]]:
    """Play one recording into a Listener in real time; every turn it hears, timed."""
    from assistant.speech.listener import Listener
    from assistant.speech.turn_end import load_turn_end
    from assistant.turns.pipeline import TurnRequest

    samples = await asyncio.to_thread(load_audio, path, max_bytes=10**9, max_seconds=600)
    pcm = (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()
    pcm += bytes(int(16000 * 2 * 1.5))  # the pause after the last words
    listener = Listener(stt, turn_end=load_turn_end())
    cid = rt.store.new_conversation("bench-live")
    turns: dict[int, asyncio.Task[dict[str, float]]] = {}

    async def turn(heard: Any) -> dict[str, float]:
        request = TurnRequest(
            text=heard.text,
            conversation_id=cid,
            speak=True,
            received_ms=heard.last_word_ms,
            source="voice",
            heard_ms={"endpoint": heard.endpoint_ms, "stt": heard.stt_ms},
        )
        result = None
        async with contextlib.aclosing(rt.turns.stream(request, tts=tts)) as updates:
            async for update in updates:
                if update.kind == "done":
                    result = update.result
        return result.timings.as_dict() if result else {}

    step = int(16000 * 2 * CHUNK_S)
    began = now_ms()
    try:
        for n, i in enumerate(range(0, len(pcm), step)):
            # real time: chunk n is sent when its last sample would have been spoken
            await asyncio.sleep(max(0.0, (began + (n + 1) * CHUNK_S * 1000 - now_ms()) / 1000))
            for heard in await listener.feed(pcm[i : i + step], now_ms()):
                if heard.kind == "resumed" and heard.utterance in turns:
                    turns.pop(heard.utterance).cancel()  # the same turn, going on
                elif heard.kind == "final":
                    turns[heard.utterance] = asyncio.create_task(turn(heard))
        for heard in await listener.settle():
            if heard.kind == "final":
                turns[heard.utterance] = asyncio.create_task(turn(heard))
        return list(await asyncio.gather(*turns.values()))
    finally:
        await listener.close()


def _stages(per_stage: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    return {
        k: {
            "p50_ms": round(percentile(v, 0.5), 1),
            "p95_ms": round(percentile(v, 0.95), 1),
            "n": len(v),
        }
        for k, v in per_stage.items()
        if v
    }


def bench_voice(settings: Settings, rounds: int | None, *, live: bool = False) -> dict:
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
    live_stage: dict[str, list[float]] = {k: [] for k in TIMING_KEYS}

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
                if live:
                    for timings in await _live(rt, stt, tts, path):
                        for key, value in timings.items():
                            live_stage.setdefault(key, []).append(value)

    with tempfile.TemporaryDirectory() as tmp, Runtime(replace(settings, data_dir=Path(tmp))) as rt:
        asyncio.run(run_all(rt))
        engine = "embedded llama.cpp (Gemma 3 270M)" if rt.embedded else rt.base_url
    stages = _stages(per_stage)
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
    } | (_live_report(live_stage) if live else {})


def _live_report(per_stage: dict[str, list[float]]) -> dict[str, Any]:
    first = per_stage.get("first_audio", [])
    p50 = round(percentile(first, 0.5), 1) if first else None
    return {
        "live": _stages(per_stage),
        "live_first_audio_from_last_word_p50_ms": p50,
        "live_target_ms": LIVE_TARGET_MS,
        "live_target_met": p50 is not None and p50 <= LIVE_TARGET_MS,
    }


if __name__ == "__main__":
    from assistant.settings import load_settings

    print(json.dumps(bench_voice(load_settings(), 1), indent=2))
