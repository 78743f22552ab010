"""`assistant bench load`: many real clients against the real app on a simulated engine.

50 concurrent chat sessions (gradio_client, each its own conversation, several turns) plus 20
deep jobs. Reports errors, lost turns or jobs, chat latency percentiles and the app's memory.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from assistant.devtools.launcher import running, simulated_engine
from assistant.engine.embedded import free_port
from assistant.settings import Settings
from assistant.stats import percentile

SESSIONS = 50
JOBS = 20


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@contextlib.contextmanager
def app_process(engine_url: str, data_dir: Path) -> Iterator[tuple[str, int]]:
    port = free_port()
    config = data_dir / "assistant.toml"
    config.write_text(f"max_jobs_per_user = {JOBS + 5}\nmax_queue = 512\n")
    env = dict(
        os.environ,
        ASSISTANT_ENGINE_URL=engine_url,
        ASSISTANT_DATA_DIR=str(data_dir),
        ASSISTANT_CONFIG=str(config),
        ASSISTANT_DEEP_MAX_IN_FLIGHT="4",
    )
    cmd = [sys.executable, "-m", "assistant.cli", "serve", "--port", str(port)]
    url = f"http://127.0.0.1:{port}/"
    with running(cmd, url=url, timeout_s=120, env=env, log=data_dir / "app.log", grace_s=20) as p:
        yield url, p.pid


def _session(url: str, index: int, turns: int) -> dict[str, Any]:
    """One user's turns in one conversation; records each turn whose call returned."""
    from gradio_client import Client

    latencies: list[float] = []
    errors: list[str] = []
    returned: list[tuple[str, str]] = []
    try:
        client = Client(url, verbose=False)
    except Exception as e:  # a benchmark counts failures; it does not stop on them
        failed = [f"{type(e).__name__}: {e}"] * turns
        return {"latencies": [], "errors": failed, "returned": [], "ok": 0}
    cid, ok = "", 0
    for t in range(turns):
        text = f"session {index} turn {t}"
        start = time.perf_counter()
        try:
            out = client.predict(text, cid, False, api_name="/chat")
        except Exception as e:
            errors.append(f"{type(e).__name__}: {e}")
            continue
        latencies.append((time.perf_counter() - start) * 1000)
        cid = out["conversation_id"]
        returned.append((cid, text))
        if out.get("error") or not out.get("reply"):
            errors.append(out.get("error") or "empty reply")
        else:
            ok += 1
    return {"latencies": latencies, "errors": errors, "returned": returned, "ok": ok}


def bench_load(settings: Settings, rounds: int | None) -> dict:
    from gradio_client import Client

    turns = rounds or 3
    with (
        tempfile.TemporaryDirectory() as tmp,
        simulated_engine(
            "--slots", "16", "--token-ms", "5", "--prefill-ms", "50", "--answer-words", "40"
        ) as engine_url,
        app_process(engine_url, Path(tmp)) as (url, pid),
    ):
        rss_start = _rss_mb(pid)
        started = time.perf_counter()
        admin = Client(url, verbose=False)
        job_ids = [
            admin.predict(f"deep task {i}", f"load-{i}", api_name="/delegate")["id"]
            for i in range(JOBS)
        ]
        peak = rss_start
        with ThreadPoolExecutor(SESSIONS) as pool:
            futures = [pool.submit(_session, url, i, turns) for i in range(SESSIONS)]
            while not all(f.done() for f in futures):
                peak = max(peak, _rss_mb(pid))
                time.sleep(0.5)
            sessions = [f.result() for f in futures]
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            jobs = {j["id"]: j for j in admin.predict(api_name="/jobs")}
            if all(jobs.get(i, {}).get("state") in ("done", "failed") for i in job_ids):
                break
            peak = max(peak, _rss_mb(pid))
            time.sleep(1)
        elapsed = time.perf_counter() - started
        rss_end = _rss_mb(pid)
        from assistant.store.db import Store

        store = Store(Path(tmp) / "assistant.db")
        returned = [pair for s in sessions for pair in s["returned"]]
        stored = {cid: [u for u, _ in store.turns(cid)] for cid in {c for c, _ in returned}}
        # a turn whose call returned must be in the store: anything else is lost
        lost = sum(1 for cid, text in returned if text not in stored[cid])
        stored_turns = sum(len(v) for v in stored.values())
        integrity = store.integrity_ok()
        store.close()
    latencies = [ms for s in sessions for ms in s["latencies"]]
    errors = [e for s in sessions for e in s["errors"]]
    states = [jobs.get(i, {}).get("state", "missing") for i in job_ids]
    return {
        "bench": "load",
        "sessions": SESSIONS,
        "turns_per_session": turns,
        "jobs": JOBS,
        "chat_ok": sum(s["ok"] for s in sessions),
        "chat_errors": len(errors),
        "error_samples": errors[:5],
        "turns_returned": len(returned),
        "turns_stored": stored_turns,
        "turns_lost": lost,
        "turns_expected": SESSIONS * turns,
        "jobs_done": states.count("done"),
        "jobs_lost": states.count("missing"),
        "job_states": {s: states.count(s) for s in set(states)},
        "chat_latency_p50_ms": round(percentile(latencies, 0.5), 1),
        "chat_latency_p95_ms": round(percentile(latencies, 0.95), 1),
        "wall_s": round(elapsed, 1),
        "app_rss_mb": {"start": round(rss_start), "peak": round(peak), "end": round(rss_end)},
        "store_integrity_ok": integrity,
    }
