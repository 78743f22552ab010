"""Metrics both ways: reading the engine's Prometheus `/metrics`, and exposing the app's own."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.parser import text_string_to_metric_families

from assistant.loop_lag import BUCKETS_S
from assistant.records import Timings

# sample name -> field; vLLM first, then the older vLLM and llama.cpp server names
_ENGINE_NAMES = {
    "vllm:num_requests_running": "running",
    "vllm:num_requests_waiting": "waiting",
    "vllm:kv_cache_usage_perc": "kv_usage",
    "vllm:gpu_cache_usage_perc": "kv_usage",
    "vllm:prefix_cache_queries_total": "prefix_queries",
    "vllm:prefix_cache_hits_total": "prefix_hits",
    "vllm:gpu_prefix_cache_queries_total": "prefix_queries",
    "vllm:gpu_prefix_cache_hits_total": "prefix_hits",
    "llamacpp:requests_processing": "running",
    "llamacpp:requests_deferred": "waiting",
    "llamacpp:kv_cache_usage_ratio": "kv_usage",
}


@dataclass
class EngineMetrics:
    """The engine numbers the page and doctor care about; None where the engine has none."""

    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = None
    """Fraction 0..1 of KV cache in use."""
    prefix_queries: float | None = None
    prefix_hits: float | None = None

    @property
    def prefix_hit_rate(self) -> float | None:
        if not self.prefix_queries:
            return None
        return (self.prefix_hits or 0.0) / self.prefix_queries


def parse_engine_metrics(text: str) -> EngineMetrics:
    """Sum each known metric over its label sets (several models or engines)."""
    found = EngineMetrics()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            field = _ENGINE_NAMES.get(sample.name)
            if field is None:
                continue
            current = getattr(found, field)
            setattr(found, field, (current or 0.0) + float(sample.value))
    return found


_BUCKETS_MS = (50, 100, 200, 350, 500, 750, 1000, 1500, 2500, 4000, 7000, 12000, 30000, 60000)


class AppMetrics:
    """The app's own metrics in Prometheus format, on its own registry."""

    def __init__(
        self,
        depth: Callable[[], dict[str, int]],
        job_counts: Callable[[], dict[str, int]],
        speech_calls: Callable[[], int] = lambda: 0,
    ):
        self.registry = CollectorRegistry()
        self.latency = Histogram(
            "assistant_turn_latency_ms",
            "Per-turn latency by lane and stage (milliseconds)",
            ["lane", "stage"],
            buckets=_BUCKETS_MS,
            registry=self.registry,
        )
        self.loop_lag = Histogram(
            "assistant_event_loop_lag_seconds",
            "How late the web process's event loop woke a timer (seconds)",
            buckets=BUCKETS_S,
            registry=self.registry,
        )
        self.loop_held = Histogram(
            "assistant_event_loop_held_seconds",
            "The event loop's lag less the time its thread waited for a CPU that other work "
            "had: how long the process's own work held the loop (seconds)",
            buckets=BUCKETS_S,
            registry=self.registry,
        )
        self.registry.register(_Live(depth, job_counts, speech_calls))

    def observe(self, lane: str, timings: Timings) -> None:
        for stage, ms in timings.as_dict().items():
            self.latency.labels(lane=lane, stage=stage).observe(ms)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _Live:
    """Queue depth and job counts, read when scraped rather than kept in sync."""

    def __init__(
        self,
        depth: Callable[[], dict[str, int]],
        jobs: Callable[[], dict[str, int]],
        speech_calls: Callable[[], int],
    ):
        self.depth = depth
        self.jobs = jobs
        self.speech_calls = speech_calls

    def collect(self) -> Iterable[GaugeMetricFamily]:
        queue = GaugeMetricFamily(
            "assistant_lane_requests", "Requests per lane and state", labels=["lane", "state"]
        )
        for key, value in self.depth().items():
            lane, state = key.split("_", 1)
            queue.add_metric([lane, state], value)
        yield queue
        jobs = GaugeMetricFamily("assistant_jobs", "Delegated jobs by state", labels=["state"])
        counts = self.jobs()
        for state in ("queued", "running", "done", "failed", "cancelled"):
            jobs.add_metric([state], counts.get(state, 0))
        yield jobs
        yield GaugeMetricFamily(
            "assistant_speech_calls",
            "Logins' speech calls on the speech pools, holding or waiting for a login's place",
            value=self.speech_calls(),
        )
