"""`assistant bench typed`: typed questions through `/v1` on the embedded default, as a person
with no engine of their own first meets the app (`--busy`: with another program on a core).

`assistant serve` with a fresh data directory and nothing set but the embedded engine's layout
(`ASSISTANT_EMBEDDED_THREADS`, `ASSISTANT_EMBEDDED_PER_LANE`, passed through so layouts can be
compared), as its own process. Two unmeasured questions first (the first prefill reads the
prompt's opening cold); then `rounds` questions, one after another in one conversation (each
request carries the history, as OpenAI clients send it), streamed: ms from sending to the
first answer token and to the end of the answer, every figure with its n. Deep work can run
beside them (`deep` jobs handed off through `/v1` as the phase starts), which is the layout's
other half: chat must not wait behind a deep prompt.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from assistant.devtools.launcher import running
from assistant.engine.embedded import free_port
from assistant.settings import Settings
from assistant.stats import summary

QUESTIONS = (
    "What's the capital of France?",
    "How many days are in a week?",
    "Say hi to my sister.",
    "What's a good name for a cat?",
    "How tall is Mount Everest?",
    "Who wrote Hamlet?",
    "What colour is the sky?",
    "Is a tomato a fruit?",
)
"""Chat-lane questions (the lane of each answer is counted: a deep one is not a typed turn)."""
DEEP_TASK = "Write a long, detailed essay on the history of rivers, part {i}."
LAYOUT_VARS = ("ASSISTANT_EMBEDDED_THREADS", "ASSISTANT_EMBEDDED_PER_LANE")
TURN_TIMEOUT_S = 180.0


def _ask(client: httpx.Client, history: list[dict[str, str]], text: str) -> dict[str, Any]:
    """One streamed question; ms to its first answer token and to its end, and its lane."""
    messages = [*history, {"role": "user", "content": text}]
    start = time.perf_counter()
    first: float | None = None
    reply = ""
    body = {"model": "assistant", "messages": messages, "stream": True}
    with client.stream("POST", "/v1/chat/completions", json=body) as r:
        lane = r.headers.get("x-assistant-lane", "")
        if r.status_code != 200:
            r.read()
            return {"error": f"HTTP {r.status_code}: {r.text[:200]}", "lane": lane}
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            for choice in chunk.get("choices") or []:
                content = (choice.get("delta") or {}).get("content")
                if content:
                    first = first or time.perf_counter()
                    reply += content
    end = time.perf_counter()
    history += [{"role": "user", "content": text}, {"role": "assistant", "content": reply}]
    return {
        "ttft_ms": (first - start) * 1000 if first is not None else None,
        "total_ms": (end - start) * 1000,
        "lane": lane,
    }


def _hand_off(client: httpx.Client, i: int) -> str | None:
    task = "delegate: " + DEEP_TASK.format(i=i)
    body = {"model": "assistant", "wait": False, "messages": [{"role": "user", "content": task}]}
    r = client.post("/v1/chat/completions", json=body, headers={"Idempotency-Key": f"typed-{i}"})
    return r.headers.get("x-assistant-lane") if r.status_code == 200 else None


def bench_typed(settings: Settings, rounds: int | None, deep: int = 0) -> dict[str, Any]:
    del settings  # the app under test reads its own (a fresh data directory)
    rounds = rounds or 12
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSISTANT_")}
    env |= {k: os.environ[k] for k in LAYOUT_VARS if k in os.environ}
    layout = {k: os.environ.get(k, "default") for k in LAYOUT_VARS}
    out: dict[str, Any] = {"bench": "typed", "rounds": rounds, "layout": layout, "deep_jobs": deep}
    with tempfile.TemporaryDirectory() as tmp:
        env["ASSISTANT_DATA_DIR"] = tmp
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        cmd = [sys.executable, "-m", "assistant.cli", "serve", "--port", str(port)]
        log = Path(tmp) / "app.log"
        with (
            running(cmd, url=url + "/", timeout_s=300, env=env, log=log, grace_s=20),
            httpx.Client(base_url=url, timeout=TURN_TIMEOUT_S) as client,
        ):
            history: list[dict[str, str]] = []
            for text in ("Hello!", "Thanks."):
                _ask(client, history, text)
            out["deep_lanes"] = [_hand_off(client, i) for i in range(deep)]
            samples = [_ask(client, history, QUESTIONS[i % len(QUESTIONS)]) for i in range(rounds)]
            answering = client.get("/v1/models").status_code  # the app still answers
    ttft = [s["ttft_ms"] for s in samples if s.get("ttft_ms") is not None]
    total = [s["total_ms"] for s in samples if "total_ms" in s]
    out["ttft_ms"] = summary(ttft)
    out["total_ms"] = summary(total)
    out["not_chat_lane"] = sum(s.get("lane") != "chat" for s in samples)
    out["errors"] = [s["error"] for s in samples if "error" in s]
    out["app_answered_after"] = answering == 200
    return out
