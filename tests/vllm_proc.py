"""Real `vllm serve` processes for the real-vLLM tier: one per module, on the tiny scripted model.

The model (`assistant.devtools.tiny_model`) follows a script, so replies are known: thinking
off answers "The answer is ready."; thinking on reasons first ("Let me think this through: ...")
and closes its thinking; markers in the request steer it ("[[delegate]]" calls the delegate
tool, "[[never-close]]" reasons and stops without an answer, "[[long]]" never ends).
Without vLLM (scripts/setup_vllm.sh makes .venv-vllm) these tests skip, and CI fails a skip.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from assistant.devtools.vllm_server import FLAGS, MAX_MODEL_LEN, VllmMissing, VllmServer, run_vllm
from assistant.metrics import EngineMetrics, parse_engine_metrics

ANSWER = "The answer is ready."
REASONING_START = "Let me think this through:"


@contextlib.contextmanager
def vllm(tmp: Path, flags: str | list[str], **kw) -> Iterator[VllmServer]:
    try:
        with run_vllm(tmp, FLAGS[flags] if isinstance(flags, str) else flags, **kw) as server:
            yield server
    except VllmMissing as e:
        pytest.skip(str(e))


def metrics_text(server: VllmServer) -> str:
    return httpx.get(server.root + "/metrics", timeout=30).text


def metrics(server: VllmServer) -> EngineMetrics:
    return parse_engine_metrics(metrics_text(server))


def finished(server: VllmServer) -> float:
    """Requests vLLM counts as ended by themselves (`vllm:request_success_total`: a stop, the
    budget spent, ...). A request its client closed is not among them."""
    from prometheus_client.parser import text_string_to_metric_families

    return sum(
        sample.value
        for family in text_string_to_metric_families(metrics_text(server))
        for sample in family.samples
        if sample.name == "vllm:request_success_total"
        and sample.labels.get("finished_reason") != "abort"
    )


def wait_running(server: VllmServer, condition, timeout_s: float = 120.0) -> EngineMetrics:
    """Poll the real /metrics until `condition(metrics)` holds (an event, not a fixed sleep)."""
    deadline = time.monotonic() + timeout_s
    while True:
        m = metrics(server)
        if condition(m) or time.monotonic() > deadline:
            return m
        time.sleep(0.1)


class Held:
    """What `holding` kept busy: `ended` counts streams that ended by themselves (their budget
    spent) before the block did, which would free a sequence the test meant to keep full."""

    def __init__(self) -> None:
        self.ended = 0


@contextlib.contextmanager
def holding(server: VllmServer, n: int, tokens: int = MAX_MODEL_LEN - 256) -> Iterator[Held]:
    """`n` long streams that keep `n` of the engine's sequences busy; closed (and so aborted
    by vLLM) when the block ends. Returns once the engine counts them. The budget is nearly
    the whole context: about two minutes of the tiny model at four streams on this machine."""
    stop = threading.Event()
    held = Held()
    before = metrics(server)
    base = (before.running or 0) + (before.waiting or 0)

    def one() -> None:
        body = {
            "model": "tiny",
            "messages": [{"role": "user", "content": "Count [[long]]"}],
            "max_tokens": tokens,
            "stream": True,
            "priority": 10,
        }
        timeout = httpx.Timeout(None, connect=5)
        url = server.url + "/chat/completions"
        with httpx.stream("POST", url, json=body, timeout=timeout) as r:
            for _ in r.iter_lines():
                if stop.is_set():
                    return
        if not stop.is_set():
            held.ended += 1

    threads = [threading.Thread(target=one, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    try:
        wait_running(server, lambda m: (m.running or 0) + (m.waiting or 0) >= base + n)
        yield held
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
        # and until vLLM has dropped them: the next test starts from a quiet engine
        wait_running(server, lambda m: (m.running or 0) + (m.waiting or 0) <= base, 60)
