"""`assistant bench idle`: what the app costs while nobody uses it (it runs 24/7).

`assistant serve` on the embedded engine (as a user starts it), as its own process. Once its
start-up work is over (speech models warmed: a second under SETTLED_MS of CPU, and at least
START_S after start), the app's CPU time (utime+stime from /proc, all threads) is read over
`rounds` windows of WINDOW_S: first with no page open and no client, then with one page
open in Debian's Chromium (headless, via Playwright) and left alone. The embedded engine
process (the app's child) is read apart. Reports ms of CPU per second with its n (windows);
targets: at most 5 ms/s with no page, 15 ms/s with one page.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from assistant.devtools.launcher import running
from assistant.devtools.loadbench import cpu_ms, rss_mb
from assistant.devtools.loadclient import children, group_cpu_ms, named_children  # noqa: F401
from assistant.engine.embedded import free_port
from assistant.settings import Settings
from assistant.stats import percentile

WINDOW_S = 10.0
WINDOWS = 3
START_S = 30.0
SETTLED_MS = 100.0
TARGETS = {"no_page": 5.0, "one_page": 15.0}
CHROMIUM = Path("/usr/bin/chromium")


def settle(pid: int, started: float, budget_s: float = 180.0) -> float:
    """Wait for the end of start-up work; seconds it took after START_S."""
    deadline = time.monotonic() + budget_s
    while time.monotonic() < deadline:
        before = cpu_ms(pid)
        time.sleep(1.0)
        if cpu_ms(pid) - before < SETTLED_MS and time.monotonic() - started >= START_S:
            break
    return time.monotonic() - started


def windows(groups: dict[str, list[int]], n: int, window_s: float) -> dict[str, list[float]]:
    """CPU ms per second of each group of processes over `n` windows of `window_s`."""
    out: dict[str, list[float]] = {name: [] for name in groups}
    for _ in range(n):
        before = {name: group_cpu_ms(pids) for name, pids in groups.items()}
        t0 = time.monotonic()
        time.sleep(window_s)
        wall = time.monotonic() - t0
        for name, pids in groups.items():
            out[name].append((group_cpu_ms(pids) - before[name]) / wall)
    return out


def summarize(samples: list[float]) -> dict[str, float]:
    return {
        "n": len(samples),
        "p50": round(percentile(samples, 0.5), 1),
        "max": round(max(samples, default=0.0), 1),
        "mean": round(sum(samples) / max(1, len(samples)), 1),
    }


@contextlib.contextmanager
def app_process(data_dir: Path) -> Iterator[tuple[str, int]]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSISTANT_")}
    env["ASSISTANT_DATA_DIR"] = str(data_dir)
    cmd = [sys.executable, "-m", "assistant.cli", "serve", "--port", str(port)]
    url = f"http://127.0.0.1:{port}/"
    log = data_dir / "app.log"
    with running(cmd, url=url, timeout_s=300, env=env, log=log, grace_s=20) as p:
        yield url, p.pid


@contextlib.contextmanager
def page_open(url: str) -> Iterator[None]:
    """One page, loaded and left alone, in a real browser."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            page = browser.new_page()
            # not "networkidle": the page keeps a stream open to the server for good
            page.goto(url, wait_until="load", timeout=120_000)
            page.wait_for_selector("textarea", timeout=120_000)
            time.sleep(5.0)  # the page's own start-up calls are over
            yield
        finally:
            browser.close()


def bench_idle(settings: Settings, rounds: int | None) -> dict[str, Any]:
    n = rounds or WINDOWS
    out: dict[str, Any] = {"bench": "idle", "window_s": WINDOW_S, "engine": "embedded"}
    with tempfile.TemporaryDirectory() as tmp, app_process(Path(tmp)) as (url, pid):
        started = time.monotonic()
        out["settled_after_s"] = round(settle(pid, started), 1)
        pids = {"app": [pid], **named_children(pid)}
        phases = {"no_page": windows(pids, n, WINDOW_S)}
        if CHROMIUM.exists():
            with page_open(url):
                phases["one_page"] = windows(pids, n, WINDOW_S)
        else:
            out["one_page_skipped"] = f"no browser at {CHROMIUM}"
        out["app_rss_mb"] = round(rss_mb(pid))
    for phase, samples in phases.items():
        limit = TARGETS[phase]
        # the app is its web process and its job worker together: both idle at once
        worker = samples.get("worker") or [0.0] * len(samples["app"])
        app = summarize([a + w for a, w in zip(samples["app"], worker, strict=True)])
        out[phase] = {"app_cpu_ms_per_s": app}
        for part in ("worker", "engine"):
            if part in samples:
                out[phase][f"{part}_cpu_ms_per_s"] = summarize(samples[part])
        out[phase]["target"] = {
            "limit_ms_per_s": limit,
            "rule": f"app CPU (web process and job worker) p50 over {n} windows of "
            f"{WINDOW_S:g} s <= {limit:g} ms/s",
            "ok": app["p50"] <= limit,
        }
    return out
