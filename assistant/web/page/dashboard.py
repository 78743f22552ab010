"""What the page's dashboard shows: per-lane latency percentiles, and the engine's own metrics.

Independent of Gradio. `latency_frame` summarizes stored turns for the plot; `EngineWatch`
reads the engine's Prometheus `/metrics` at most every few seconds and notices a prefix cache
that never hits (a silent misconfiguration: every turn then pays the full prefill).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import httpx
import pandas as pd

from assistant.metrics import EngineMetrics, parse_engine_metrics
from assistant.records import STAGES
from assistant.stats import percentile

LANES = ("chat", "deep")
PLOTTED = ("first_audio", "ttft", "total")
"""The stages the plot shows; labelled as under each reply (`records.STAGES`), except that the
plot has always spelled time to first token out."""
PLOT_LABELS = {**STAGES, "ttft": "1st token"}
STATS = {"p50": 50, "p95": 95}
COLUMNS = ["lane", "stage", "stat", "ms", "turns", "bar"]


def bar_order() -> list[str]:
    """The x axis in reading order: each stage's p50 next to its p95."""
    return [f"{PLOT_LABELS[stage]} {stat}" for stage in PLOTTED for stat in STATS]


def latency_frame(rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """p50 and p95 per lane and stage over `Conversations.recent_timings` rows; one row per bar.

    A stage a turn did not measure (a typed turn has no first audio) is left out of it."""
    rows = list(rows)
    records = []
    for lane in LANES:
        for stage in PLOTTED:
            label = PLOT_LABELS[stage]
            values = [
                float(r["timings"][stage])
                for r in rows
                if r.get("lane") == lane and r.get("timings", {}).get(stage) is not None
            ]
            if not values:
                continue
            for stat, q in STATS.items():
                ms = round(percentile(values, q / 100), 1)
                records.append([lane, label, stat, ms, len(values), f"{label} {stat}"])
    # typed even when empty: the page's plot stays broken after an untyped (all-object) frame
    return pd.DataFrame(records, columns=COLUMNS).astype({"ms": "float64", "turns": "int64"})


@dataclass
class EngineReading:
    """One look at the engine's metrics."""

    url: str
    at: float
    metrics: EngineMetrics | None = None
    """None: no metrics could be read; `problem` says why."""
    problem: str | None = None
    recent_hit_rate: float | None = None
    """Prefix-cache hit rate over the recent polls (None: no queries in that window)."""
    zero_hits: bool = False
    """The prefix cache stayed at 0% while its queries grew."""


class EngineWatch:
    """Polls `<engine root>/metrics` (bearer key when set), at most once per `every_s`."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        every_s: float = 5.0,
        window: int = 12,
        timeout_s: float = 2.0,
        client: httpx.AsyncClient | None = None,
    ):
        self.url = base_url.rstrip("/").removesuffix("/v1") + "/metrics"
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.every_s = every_s
        self.timeout_s = timeout_s
        self.client = client
        # (prefix queries, prefix hits) counters over the last `window` polls
        self.samples: deque[tuple[float, float]] = deque(maxlen=window)
        self.latest: EngineReading | None = None
        self._lock = asyncio.Lock()

    async def reading(self) -> EngineReading:
        """The latest reading, polled again once it is `every_s` old (shared by all pages)."""
        async with self._lock:
            if self.latest is None or time.monotonic() - self.latest.at >= self.every_s:
                self.latest = await self.poll()
        return self.latest

    async def poll(self) -> EngineReading:
        """Read the engine's metrics now."""
        try:
            text, status = await self._get()
        except httpx.HTTPError as e:
            return self._without(f"the engine is unreachable ({e!r})")
        if status in (401, 403):
            return self._without(f"the engine refused (HTTP {status}); check ASSISTANT_API_KEY")
        if status != 200:
            return self._without(f"the engine exposes none (HTTP {status})")
        try:
            # vLLM's text runs to hundreds of lines of histograms: parsed off the loop
            metrics = await asyncio.to_thread(parse_engine_metrics, text)
        except (ValueError, TypeError):
            return self._without("the engine exposes none (the answer is not Prometheus text)")
        if all(v is None for v in vars(metrics).values()):
            return self._without("it has metrics, but none with vLLM's or llama.cpp's names")
        return self.add(metrics)

    def add(self, metrics: EngineMetrics) -> EngineReading:
        """Record one parsed reading and judge the prefix cache over the window."""
        reading = EngineReading(self.url, time.monotonic(), metrics)
        if metrics.prefix_queries is None:
            return reading
        sample = (metrics.prefix_queries, metrics.prefix_hits or 0.0)
        if self.samples and sample[0] < self.samples[-1][0]:
            self.samples.clear()  # counters went back: the engine restarted
        self.samples.append(sample)
        first, last = self.samples[0], self.samples[-1]
        queries, hits = last[0] - first[0], last[1] - first[1]
        if queries > 0:
            reading.recent_hit_rate = hits / queries
        pairs = itertools.pairwise(self.samples)
        grew = sum(1 for a, b in pairs if b[0] > a[0])
        # the very first request cannot hit; two rounds of growth with no hit at all can
        reading.zero_hits = grew >= 2 and hits == 0
        return reading

    def _without(self, problem: str) -> EngineReading:
        return EngineReading(self.url, time.monotonic(), problem=problem)

    async def _get(self) -> tuple[str, int]:
        if self.client is None:
            # one client for the app's life: a new one per poll built an SSL context each
            # time, 20-40 ms of CPU on the loop that serves chat
            self.client = httpx.AsyncClient()
        r = await self.client.get(self.url, headers=self.headers, timeout=self.timeout_s)
        return r.text, r.status_code


NO_METRICS = (
    "**No engine metrics** from `{url}`: {problem}. Queue depth, KV cache and prefix-cache "
    "numbers are not available (llama-cpp-python's server has none; vLLM and llama.cpp's "
    "`llama-server --metrics` do)."
)
ZERO_HITS = (
    "⚠️ **The prefix cache hit rate has stayed at 0%** while its queries grew: every turn pays "
    "the full prefill. Check that prefix caching is on (vLLM: `--enable-prefix-caching`) and "
    "that nothing before the history changes from turn to turn."
)


def engine_markdown(
    reading: EngineReading, lanes: dict[str, int] | None = None, loop: dict | None = None
) -> str:
    """The engine panel's text; `loop`: a `LoopLag.summary` of the app's own event loop."""
    m = reading.metrics
    if m is None:
        head = NO_METRICS.format(url=reading.url, problem=reading.problem)
    else:
        overall, recent = m.prefix_hit_rate, reading.recent_hit_rate
        hits = _pct(overall)
        if recent is not None:
            hits = f"{recent:.0%} recently ({hits} overall)"
        head = (
            "| running | waiting | KV cache | prefix cache hits |\n|---|---|---|---|\n"
            f"| {_num(m.running)} | {_num(m.waiting)} | {_pct(m.kv_usage)} | {hits} |"
        )
        if reading.zero_hits:
            head += "\n\n" + ZERO_HITS
    if lanes:
        head += (
            f"\n\nThis app's lanes: chat {lanes.get('chat_running', 0)} running, "
            f"{lanes.get('chat_waiting', 0)} waiting; deep {lanes.get('deep_running', 0)} "
            f"running, {lanes.get('deep_waiting', 0)} waiting."
        )
    if loop and loop.get("n"):
        # the time the app itself holds a turn up, apart from the engine's: a figure to
        # read before blaming the engine for a slow first token
        head += (
            f"\n\nThis app's event loop lag over the last minute: p50 {loop['p50_ms']:.1f} ms, "
            f"p95 {loop['p95_ms']:.1f} ms, max {loop['max_ms']:.1f} ms ({loop['n']} samples)."
        )
    return head


def _num(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.0f}"


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.0%}"
