"""`assistant bench load`: its light client (Gradio's REST call API over httpx), its CPU
readings and its report. Speed is measured by the bench, never asserted here: no timings."""

from __future__ import annotations

import json
import os
from typing import Any

import httpx
import pytest

from assistant.devtools import loadbench
from assistant.devtools.loadbench import CallError, call, cpu_ms, per_turn_batches, sse_result


def test_sse_result_takes_the_complete_event_and_skips_the_rest() -> None:
    lines = ["event: heartbeat", "data: null", "", "event: complete", 'data: [{"reply": "hi"}]']
    assert sse_result(lines) == [{"reply": "hi"}]


def test_sse_result_raises_on_an_error_event_or_no_result() -> None:
    with pytest.raises(CallError, match="too many"):
        sse_result(["event: error", 'data: {"error": "too many"}'])
    with pytest.raises(CallError, match="without a result"):
        sse_result(["event: heartbeat", "data: null"])


def test_cpu_ms_reads_this_process_and_never_goes_back() -> None:
    first = cpu_ms(os.getpid())
    sum(i * i for i in range(200_000))
    assert 0 <= first <= cpu_ms(os.getpid())


def test_per_turn_batches_divides_each_batch_by_its_turns() -> None:
    # readings before the first turn and after each of 5 turns, batches of 2 turns
    assert per_turn_batches([0, 10, 30, 40, 80, 90], 2) == [15.0, 25.0]
    assert per_turn_batches([0, 10], 2) == []


def _gradio(seen: list[dict[str, Any]], outcome: str = "complete") -> httpx.MockTransport:
    """Gradio's call API: POST /gradio_api/call/<api> -> event id; GET .../<id> -> SSE."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            seen.append(json.loads(request.content))
            return httpx.Response(200, json={"event_id": "e1"})
        assert request.url.path == "/gradio_api/call/chat/e1"
        data = '[{"reply": "ok", "conversation_id": "c1"}]' if outcome == "complete" else "null"
        body = f"event: heartbeat\ndata: null\n\nevent: {outcome}\ndata: {data}\n\n"
        return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})

    return httpx.MockTransport(handler)


async def test_call_posts_the_inputs_with_the_session_and_returns_the_first_output() -> None:
    seen: list[dict[str, Any]] = []
    async with httpx.AsyncClient(base_url="http://app/", transport=_gradio(seen)) as http:
        out = await call(http, "chat", "hello", "", False, session="s1")
    assert out == {"reply": "ok", "conversation_id": "c1"}
    assert seen == [{"data": ["hello", "", False], "session_hash": "s1"}]


async def test_call_raises_on_an_error_event() -> None:
    async with httpx.AsyncClient(base_url="http://app/", transport=_gradio([], "error")) as h:
        with pytest.raises(CallError):
            await call(h, "chat", "hello")


def _session(latencies: list[float]) -> dict[str, Any]:
    returned = [("c", f"t{i}") for i in range(len(latencies))]
    stages = [{"total": ms - 5} for ms in latencies]
    return {
        "latencies": latencies,
        "stages": stages,
        "errors": [],
        "returned": returned,
        "ok": 1,
    }


def test_report_is_one_json_object_with_both_phases_and_the_targets() -> None:
    meter = {"app_cpu_ms": 100.0, "engine_cpu_ms": 50.0, "client_cpu_ms": 10.0, "wall_s": 2.0}
    run = {
        "warm": _session([1.0]),
        "alone": [_session([300.0] * 2) for _ in range(5)],
        "loaded": [_session([400.0, 500.0]) for _ in range(3)],
        # the app's CPU before the first turn alone and after each
        "meters": ({**meter, "marks": [float(i * 8) for i in range(11)]}, meter, meter),
        "idle_cpu_ms_per_s": 5.0,
        "job_ids": ["j1", "j2"],
        "job_submit_errors": [],
        "jobs": {"j1": {"state": "done"}},
        "rss": (100.0, 120.0, 110.0),
    }
    checked = {"turns_returned": 16, "turns_stored": 16, "turns_lost": 0}
    out = json.loads(json.dumps(loadbench.report(run, checked, 2, 10.0)))
    assert out["alone"]["turns"] == 10 and out["loaded"]["turns"] == 6
    assert out["alone"]["sessions_at_once"] == 1 and out["loaded"]["conversations"] == 3
    assert out["alone"]["app_cpu_ms_per_turn_batches"] == [8.0, 8.0]
    assert out["loaded"]["app_stages_ms"]["total"] == [395.0, 495.0]  # [p50, p95]
    assert out["target"]["limit_ms"] == 2 * out["alone"]["p95_ms"] + 200
    assert out["target"]["ok"] is True and out["cpu_target"]["ok"] is True
    assert out["jobs_done"] == 1 and out["jobs_lost"] == 1
    assert out["chat_errors"] == 0 and out["turns_lost"] == 0
    assert out["app_rss_mb"] == {"start": 100, "peak": 120, "end": 110}


@pytest.mark.process
@pytest.mark.model
def test_the_bench_runs_end_to_end_against_the_real_app(
    monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """A small run: every turn answered and stored, every job done (no timing asserted)."""
    for name, value in {"SESSIONS": 3, "ALONE_TURNS": 5, "WARMUP_TURNS": 1, "JOBS": 2}.items():
        monkeypatch.setattr(loadbench, name, value)
    monkeypatch.setattr(loadbench, "IDLE_WINDOW_S", 0.5)
    out = loadbench.bench_load(settings, 2)
    assert out["chat_errors"] == 0, out["error_samples"]
    assert out["turns_returned"] == out["turns_expected"] == 5 + 3 * 2
    assert out["turns_lost"] == 0 and out["store_integrity_ok"]
    assert out["jobs_done"] == 2 and out["jobs_lost"] == 0
    assert out["alone"]["app_cpu_ms_per_turn"] > 0
    assert "total" in out["loaded"]["app_stages_ms"]
