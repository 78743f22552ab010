"""`assistant bench voice`: per-stage voice-turn times, in one run.

Push-to-talk: each recording as an uploaded file, pipelined (the product: the first sentence
spoken while the rest is generated) beside sequential (the full reply, then the full speech),
per stage p50/p95 with n; a turn that produced no audio is counted, not dropped.

With `--live [--audio DIR]` (any directory with a `transcripts.json` like ../shared/audio),
each recording is also played at real-time pace (100 ms chunks, then silence) into a call:
the listener, the turn-end model and the voice session, as the page's call runs. Timed from
the user's last word; target: first audio p50 <= 800 ms and p95 <= 1500 ms, and no
recording cut into two turns. The first turn after start is reported on its own.
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

from assistant.errors import AssistantError
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
LIVE_TARGET_P50_MS = 800.0
LIVE_TARGET_P95_MS = 1500.0


async def _live(rt: Any, stt: Any, tts: Any, path: Path) -> list[dict[str, float]]:
    """Play one recording in real time into a call (the listener, the turn-end model and
    the voice session, as the page's call runs); the timings of every turn it stored."""
    from assistant.call.call import Call
    from assistant.call.listener import Listener
    from assistant.speech.turn_end import load_turn_end

    samples = await asyncio.to_thread(load_audio, path, max_bytes=10**9, max_seconds=600)
    pcm = (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()
    pcm += bytes(int(16000 * 2 * 2.5))  # the pause after the last words: past any fallback
    listener = Listener(stt, turn_end=load_turn_end())
    cid = rt.store.new_conversation("bench-live")
    done: list[dict[str, float]] = []

    async def nothing(_: Any) -> None:
        return None

    async def voice() -> Any:
        return tts

    conversation = rt.sessions.of("bench-live", cid)
    session = Call(
        listener, lambda: conversation, owner="bench-live", tts=voice,
        send_json=nothing, send_bytes=nothing,
        on_done=lambda result: done.append(result.timings.as_dict()),
    )  # fmt: skip
    hearing = asyncio.create_task(session.run())
    step = int(16000 * 2 * CHUNK_S)
    began = now_ms()
    try:
        for n, i in enumerate(range(0, len(pcm), step)):
            # real time: chunk n is sent when its last sample would have been spoken
            await asyncio.sleep(max(0.0, (began + (n + 1) * CHUNK_S * 1000 - now_ms()) / 1000))
            await session.feed(pcm[i : i + step], now_ms())
        for heard in await listener.settle():
            await session.hear(heard)
        # every turn it heard answered and ended: an event, not "no turn now" (a turn being
        # routed is none yet, and was cut off here as lost on a busy machine)
        await session.settled(listener.out.said)
        return done
    finally:
        hearing.cancel()
        with contextlib.suppress(BaseException):
            await hearing
        await session.close()
        await listener.close()


def _stages(per_stage: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    """p50/p95 per stage, each with its n."""
    return {
        k: {
            "p50_ms": round(percentile(v, 0.5), 1),
            "p95_ms": round(percentile(v, 0.95), 1),
            "n": len(v),
        }
        for k, v in per_stage.items()
        if v
    }


def recordings(audio_dir: Path) -> list[Path]:
    """The recordings a `transcripts.json` in `audio_dir` names (like ../shared/audio)."""
    index = audio_dir / "transcripts.json"
    if not index.is_file():
        raise AssistantError(f"{audio_dir} has no transcripts.json naming its recordings")
    names = json.loads(index.read_text())
    files = [audio_dir / name for name in names if (audio_dir / name).is_file()]
    if not files:
        raise AssistantError(f"none of the recordings {audio_dir}/transcripts.json names exist")
    return files


def bench_voice(
    settings: Settings,
    rounds: int | None,
    *,
    live: bool = False,
    audio_dir: Path | None = None,
) -> dict:
    from assistant.runtime import Runtime
    from assistant.speech.stt import load_stt
    from assistant.speech.tts import load_tts

    rounds = rounds or 3
    files = recordings(audio_dir or AUDIO_DIR)
    stt, tts = load_stt(settings), load_tts(settings)
    stt.warm()
    tts.warm()
    per_stage: dict[str, list[float]] = {k: [] for k in TIMING_KEYS}
    seq_first: list[float] = []
    pipe_first: list[float] = []
    live_stage: dict[str, list[float]] = {k: [] for k in TIMING_KEYS}
    no_audio = {"pipelined": 0, "sequential": 0, "live": 0}
    live_turns: list[int] = []  # turns stored per recording played (one each is right)
    live_names: list[str] = []
    first_turn: list[float] = []

    async def run_all(rt: Any) -> None:
        # one event loop for the whole run: the runtime's queues and locks belong to it
        # the first turn after start, as a newcomer's would be (the engine's shared
        # transcript opening not yet computed), then the rest
        t0 = now_ms()
        await rt.turns.ask("warm up", deep_inline=True)
        first_turn.append(now_ms() - t0)
        for _ in range(rounds):
            for path in files:
                piped = await _pipelined(rt, stt, tts, path)
                seq = await _sequential(rt, stt, tts, path)
                for key in TIMING_KEYS:
                    if key in piped:
                        per_stage[key].append(piped[key])
                # a turn with no audio is counted, not dropped
                for name, t, out in (
                    ("pipelined", piped, pipe_first),
                    ("sequential", seq, seq_first),
                ):
                    if t.get("first_audio"):
                        out.append(t["first_audio"])
                    else:
                        no_audio[name] += 1
                if live:
                    heard = await _live(rt, stt, tts, path)
                    live_turns.append(len(heard))
                    live_names.append(path.name)
                    for timings in heard:
                        if not timings.get("first_audio"):
                            no_audio["live"] += 1
                        for key, value in timings.items():
                            live_stage.setdefault(key, []).append(value)

    with tempfile.TemporaryDirectory() as tmp, Runtime(replace(settings, data_dir=Path(tmp))) as rt:
        asyncio.run(run_all(rt))
        engine = "embedded llama.cpp (Gemma 3 270M)" if rt.embedded else rt.base_url
    return {
        "bench": "voice",
        "engine": engine,
        # where speech ran: the user's speech servers, or the embedded models
        "speech": {
            "stt": settings.speech.stt_url or "embedded",
            "tts": settings.speech.tts_url or "embedded",
        },
        "audio_dir": str(audio_dir or AUDIO_DIR),
        "files": [p.name for p in files],
        "rounds": rounds,
        "first_turn_after_start_ms": round(first_turn[0], 1) if first_turn else None,
        "push_to_talk": _stages(per_stage),
        "push_to_talk_first_audio": _stages({"pipelined": pipe_first, "sequential": seq_first}),
        "turns_without_audio": no_audio,
    } | (_live_report(live_stage, live_turns, live_names) if live else {})


def _live_report(
    per_stage: dict[str, list[float]], turns: list[int], names: list[str]
) -> dict[str, Any]:
    first = per_stage.get("first_audio", [])
    p50 = percentile(first, 0.5) if first else None
    p95 = percentile(first, 0.95) if first else None
    played = len(turns)
    return {
        "live": _stages(per_stage),
        "live_first_audio_from_last_word": {
            "p50_ms": None if p50 is None else round(p50, 1),
            "p95_ms": None if p95 is None else round(p95, 1),
            "n": len(first),
        },
        # each recording is one request: more than one turn is a false cut-off; none, a
        # request lost (merged away or ignored)
        "live_recordings_played": played,
        "live_false_cutoff_share": round(sum(t > 1 for t in turns) / played, 3) if played else None,
        "live_lost_share": round(sum(t == 0 for t in turns) / played, 3) if played else None,
        # which recording was cut or lost, in the order played
        "live_turns_by_recording": [[n, t] for n, t in zip(names, turns, strict=True)],
        "live_target_ms": {"p50": LIVE_TARGET_P50_MS, "p95": LIVE_TARGET_P95_MS},
        "live_target_met": p50 is not None
        and p95 is not None
        and p50 <= LIVE_TARGET_P50_MS
        and p95 <= LIVE_TARGET_P95_MS
        and not any(t > 1 for t in turns),
    }


if __name__ == "__main__":
    from assistant.settings import load_settings

    print(json.dumps(bench_voice(load_settings(), 1), indent=2))
