"""Another login's first token beside one login's flood (issue 49, item 2): bob's time to first
token through `/v1`, alone and while ann holds 8 streams open (all `/v1` lets one login have),
on the simulated engine (four slots, 50 ms a token, replies of two minutes, so ann's requests
never end during the run).

    .venv/bin/python scripts/bench_fair.py -n 9

Each of bob's questions is a new conversation; his stream is closed at its first token (the
request ends there). Target: beside the flood, p95 <= 2 x alone p95 + 200 ms. The whole run
ends within `--deadline` seconds (default 300) and says so if it stops early.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import httpx

from assistant.devtools.launcher import running
from assistant.devtools.vllm_server import free_port
from assistant.stats import percentile

USERS = {"ann": "ann-password-1", "bob": "bob-password-2"}
FLOOD = 8
"""Ann's streams: as many as one login may hold open on `/v1` (`max_api_per_user`)."""


def ask(text: str) -> dict:
    return {"model": "assistant", "stream": True, "reasoning_effort": "low",
            "messages": [{"role": "user", "content": text}]}  # fmt: skip


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {user}:{USERS[user]}"}


async def first_token_ms(http: httpx.AsyncClient, user: str, text: str) -> float:
    """Seconds from the request to its first content delta, in ms; the stream is then closed."""
    began = time.monotonic()
    body = ask(text)
    async with http.stream("POST", "v1/chat/completions", json=body, headers=auth(user)) as r:
        if r.status_code != 200:
            await r.aread()
            raise RuntimeError(f"{user}: HTTP {r.status_code} {r.text[:200]}")
        async for line in r.aiter_lines():
            if line.startswith("data:") and '"content":' in line and '"content":""' not in line:
                return (time.monotonic() - began) * 1000
    raise RuntimeError(f"{user}: the stream ended without a token")


async def hold(http: httpx.AsyncClient, text: str) -> None:
    """One of ann's streams, read to its end (it lasts longer than the run)."""
    async with http.stream("POST", "v1/chat/completions", json=ask(text), headers=auth("ann")) as r:
        async for _ in r.aiter_lines():
            pass


async def chat_lane(http: httpx.AsyncClient) -> dict[str, int]:
    """The chat lane's requests at the engine ("running") and waiting in the app."""
    text = (await http.get("metrics")).text
    return {
        state: int(float(m.group(1)))
        for state in ("running", "waiting")
        if (m := re.search(rf'assistant_lane_requests{{lane="chat",state="{state}"}} (\S+)', text))
    }


async def measure(url: str, n: int) -> dict:
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        await first_token_ms(http, "bob", "warm up, please")
        alone = [await first_token_ms(http, "bob", f"bob alone {i}: what time is it?")
                 for i in range(n)]  # fmt: skip
        flood = [asyncio.create_task(hold(http, f"ann flood {i}: tell me a story"))
                 for i in range(FLOOD)]  # fmt: skip
        try:
            lane: dict[str, int] = {}
            while sum(lane.values()) < FLOOD:  # all of ann's requests are at the lanes
                if failed := [t for t in flood if t.done()]:
                    raise RuntimeError(f"ann's stream ended: {failed[0].exception()!r}")
                await asyncio.sleep(0.1)
                lane = await chat_lane(http)
            beside = [await first_token_ms(http, "bob", f"bob beside {i}: what time is it?")
                      for i in range(n)]  # fmt: skip
        finally:
            for task in flood:
                task.cancel()
            await asyncio.gather(*flood, return_exceptions=True)
    a95, b95 = percentile(alone, 0.95), percentile(beside, 0.95)
    limit = 2 * a95 + 200
    return {
        "bench": "fair", "n": n, "flood": FLOOD, "anns_at_engine": lane.get("running"),
        "anns_waiting_in_app": lane.get("waiting"),
        "alone_ms": {"p50": round(percentile(alone, 0.5)), "p95": round(a95)},
        "beside_flood_ms": {"p50": round(percentile(beside, 0.5)), "p95": round(b95)},
        "target": {"rule": "beside p95 <= 2 x alone p95 + 200 ms", "limit_ms": round(limit),
                   "ok": b95 <= limit},
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=9, help="bob's questions per condition")
    parser.add_argument("--deadline", type=float, default=300.0)
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="bench-fair-"))
    engine = [sys.executable, "-m", "assistant.devtools.simengine", "--port", "0", "--slots",
              "4", "--token-ms", "50", "--answer-words", "2400"]  # fmt: skip
    with running(engine, ready_line=True, timeout_s=60, log=data / "engine.log") as sim:
        port = free_port()
        env = dict(os.environ, ASSISTANT_ENGINE_URL=sim.url, ASSISTANT_DATA_DIR=str(data / "d"),
                   ASSISTANT_AUTH=",".join(f"{u}:{p}" for u, p in USERS.items()))  # fmt: skip
        cmd = [sys.executable, "-m", "assistant.cli", "serve", "--port", str(port)]
        url = f"http://127.0.0.1:{port}/"
        with running(cmd, url=url, timeout_s=180, env=env, log=data / "app.log"):
            try:
                out = asyncio.run(asyncio.wait_for(measure(url, args.n), args.deadline))
            except TimeoutError:
                print(f"stopped early: the run passed its deadline of {args.deadline:.0f} s")
                return 1
    print(json.dumps(out))
    return 0 if out["target"]["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
