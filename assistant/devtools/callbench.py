"""`assistant bench voice --calls N`: N calls at once through a running app's real `/listen`
socket, each playing the recordings at real-time pace (100 ms frames, as the page's worklet
sends them), each after the reply to the one before has ended (as a person waits for it), with
the embedded engine unless `ASSISTANT_ENGINE_URL` names another.

Each call is its own login (calls are capped per login), so each has its own conversation.
Reported: first audio from the last word (the app's own record of each call turn, as the page's
latency line shows it), p50/p95 with n; recordings cut into two turns or lost; the app's CPU
(its own process and the job worker, not the engine) per call-minute, beside the engines'
(both lanes' processes); why the app ended a call, if it did.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from assistant.devtools.launcher import running
from assistant.devtools.loadclient import group_cpu_ms, named_children
from assistant.engine.embedded import free_port
from assistant.speech.audio import load_audio
from assistant.stats import percentile
from assistant.store.db import Store

CHUNK_S = 0.1
TAIL_S = 2.5
"""Silence after each recording: past any turn-end fallback, and time for the reply."""
REPLY_WAIT_S = 20.0
"""After each recording, how long a call waits for its reply to end before going on (or, after
the last, hanging up)."""


def _pcm(path: Path) -> bytes:
    samples = load_audio(path, max_bytes=10**9, max_seconds=600)
    pcm = (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()
    return pcm + bytes(int(16000 * 2 * TAIL_S))


async def _login(url: str, user: str, password: str) -> str:
    """The Cookie header of a logged-in session."""
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        r = await http.post("/login", data={"username": user, "password": password})
        r.raise_for_status()
        return "; ".join(f"{k}={v}" for k, v in http.cookies.items())


async def _call(url: str, cookie: str, recordings: list[bytes]) -> dict[str, Any]:
    """One call: the recordings one after another at real time; what the app sent back, and
    why the app ended the call if it did (None: the bench hung up)."""
    import websockets

    got: dict[str, Any] = {
        "turns": 0, "audio_frames": 0, "ended_by_app": None
    }  # fmt: skip
    where = url.replace("http://", "ws://") + "listen"
    async with websockets.connect(where, additional_headers={"Cookie": cookie}) as ws:

        async def read() -> None:
            try:
                async for message in ws:
                    if isinstance(message, bytes):
                        got["audio_frames"] += 1
                        continue
                    said = json.loads(message)
                    if said.get("kind") == "turn":
                        got["turns"] += 1
                    elif said.get("kind") == "state" and said.get("state") == "listening":
                        answered.set()
                    elif said.get("kind") == "state":
                        answered.clear()
            except websockets.ConnectionClosed:
                pass  # an error code (4408: quiet) ends the iteration with an exception
            got["ended_by_app"] = f"{ws.close_code} {ws.close_reason}".strip()
            answered.set()

        async def listen_until_answered(turns_before: int) -> None:
            """As a person does: until the reply to what they said has ended (a turn since,
            and the call listening again), the page sending silence meanwhile; bounded."""
            deadline = time.monotonic() + REPLY_WAIT_S
            while time.monotonic() < deadline and got["ended_by_app"] is None:
                if got["turns"] > turns_before and answered.is_set():
                    return
                await ws.send(bytes(step))
                await asyncio.sleep(CHUNK_S)

        answered = asyncio.Event()
        reader = asyncio.create_task(read())
        step = int(16000 * 2 * CHUNK_S)
        try:
            for pcm in recordings:
                turns_before = got["turns"]
                began = time.monotonic()
                for n, i in enumerate(range(0, len(pcm), step)):
                    # real time: frame n goes when its last sample would have been spoken
                    await asyncio.sleep(max(0.0, began + (n + 1) * CHUNK_S - time.monotonic()))
                    await ws.send(pcm[i : i + step])
                # the next recording waits for this one's reply: speaking over a reply that
                # is still being thought of stops it (kept, but unanswered and not measured)
                await listen_until_answered(turns_before)
        finally:
            reader.cancel()
            with contextlib.suppress(BaseException):
                await reader
    return got


def _first_audio(db: Path, users: list[str]) -> tuple[list[float], list[int]]:
    """Each call turn's first audio from the last word (ms), and the turns each call stored."""
    store = Store(db)
    try:
        firsts: list[float] = []
        per_call: list[int] = []
        for user in users:
            turns = [
                t
                for c in store.conversations(user)
                for t in store.transcript(c.id)
                if t.source == "voice"
            ]
            per_call.append(len(turns))
            firsts += [t.result.timings.first_audio for t in turns if t.result.timings.first_audio]
        return firsts, per_call
    finally:
        store.close()


def bench_calls(n: int, rounds: int, files: list[Path]) -> dict[str, Any]:
    users = {f"call{i}": secrets.token_urlsafe(12) for i in range(n)}
    recordings = [_pcm(p) for p in files] * rounds
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        port = free_port()
        env = dict(
            os.environ,
            ASSISTANT_DATA_DIR=str(data),
            ASSISTANT_AUTH=",".join(f"{u}:{p}" for u, p in users.items()),
        )
        cmd = [sys.executable, "-m", "assistant.cli", "serve", "--port", str(port)]
        url = f"http://127.0.0.1:{port}/"
        with running(cmd, url=url, timeout_s=300, env=env, log=data / "app.log") as p:

            async def run() -> list[dict[str, Any]]:
                cookies = [await _login(url, u, pw) for u, pw in users.items()]
                return await asyncio.gather(*(_call(url, c, recordings) for c in cookies))

            groups = {"app": [p.pid], **named_children(p.pid)}
            before = {name: group_cpu_ms(pids) for name, pids in groups.items()}
            began = time.monotonic()
            calls = asyncio.run(run())
            wall_s = time.monotonic() - began
            used = {name: group_cpu_ms(pids) - before[name] for name, pids in groups.items()}
        firsts, per_call = _first_audio(data / "assistant.db", list(users))
    call_minutes = n * wall_s / 60
    app_ms = used["app"] + used.get("worker", 0.0)
    played = len(recordings)
    return {
        "calls": n,
        "recordings_per_call": played,
        "first_audio_from_last_word": {
            "p50_ms": round(percentile(firsts, 0.5), 1) if firsts else None,
            "p95_ms": round(percentile(firsts, 0.95), 1) if firsts else None,
            "n": len(firsts),
        },
        "turns_stored_per_call": per_call,
        "false_cutoffs": sum(max(0, t - played) for t in per_call),
        "lost": sum(max(0, played - t) for t in per_call),
        "app_cpu_ms_per_call_minute": round(app_ms / call_minutes, 1),
        "engine_cpu_ms_per_call_minute": round(used.get("engine", 0.0) / call_minutes, 1),
        "call_minutes": round(call_minutes, 2),
        "replies_heard": [c["audio_frames"] > 0 for c in calls],
        "ended_by_app": [c["ended_by_app"] for c in calls],
    }
