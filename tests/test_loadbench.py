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


def test_the_apps_loop_lag_over_a_phase_comes_from_its_histogram() -> None:
    """Read from the app's own /metrics text before and after a phase."""
    from assistant.devtools.loadclient import lag_between, lag_histogram
    from assistant.metrics import AppMetrics

    metrics = AppMetrics(depth=dict, job_counts=dict)
    for lag in (0.002, 0.003):
        metrics.loop_lag.observe(lag)
    before = lag_histogram(metrics.render().decode())
    for lag in [0.0005] * 18 + [0.2, 1.7]:  # the phase: mostly quick, two stalls
        metrics.loop_lag.observe(lag)
    got = lag_between(before, lag_histogram(metrics.render().decode()))
    assert got == {
        "n": 20,
        "p50_ms_at_most": 1.0,
        "p95_ms_at_most": 250.0,
        "max_ms_at_most": 2500.0,
    }


def test_cpu_ms_reads_this_process_and_never_goes_back() -> None:
    first = cpu_ms(os.getpid())
    sum(i * i for i in range(200_000))
    assert 0 <= first <= cpu_ms(os.getpid())


def test_per_turn_batches_divides_each_batch_by_its_answered_turns() -> None:
    # readings before the first turn and after each of 5 turns, batches of 2 turns
    marks = [(0, True), (10, True), (30, True), (40, True), (80, True), (90, True)]
    assert per_turn_batches(marks, 2) == [15.0, 25.0]
    assert per_turn_batches(marks[:2], 2) == []
    # a failed turn costs little: the batch's CPU is per answered turn, and a batch with
    # none answered has no figure at all
    failed = [(0, True), (10, False), (30, True), (31, False), (32, False)]
    assert per_turn_batches(failed, 2) == [30.0]


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


def _session(latencies: list[float], errors: int = 0) -> dict[str, Any]:
    returned = [("c", f"t{i}") for i in range(len(latencies))]
    stages = [{"total": ms - 5} for ms in latencies]
    return {
        "latencies": latencies,
        "stages": stages,
        "errors": ["boom"] * errors,
        "returned": returned,
        "ok": len(latencies) - errors,
    }


def _run(loaded: list[dict[str, Any]]) -> dict[str, Any]:
    meter = {"app_cpu_ms": 100.0, "engine_cpu_ms": 50.0, "client_cpu_ms": 10.0, "wall_s": 2.0}
    return {
        "warm": _session([1.0]),
        "alone": [_session([300.0] * 2) for _ in range(5)],
        "loaded": loaded,
        # the app's CPU before the first turn alone and after each
        "meters": ({**meter, "marks": [(float(i * 8), True) for i in range(11)]}, meter, meter),
        "idle_cpu_ms_per_s": 5.0,
        "job_ids": ["j1", "j2"],
        "job_submit_errors": [],
        "jobs": {"j1": {"state": "done"}},
    }


def test_report_is_one_json_object_with_both_phases_and_the_targets(monkeypatch) -> None:
    monkeypatch.setattr(loadbench, "ALONE_TURNS", 10)
    monkeypatch.setattr(loadbench, "SESSIONS", 3)
    run = {"ways": {"gradio": _run([_session([400.0, 500.0]) for _ in range(3)])},
           "rss": (100.0, 120.0, 110.0)}  # fmt: skip
    checked = {"gradio": {"turns_returned": 16, "turns_stored": 16, "turns_lost": 0}}
    out = json.loads(json.dumps(loadbench.report(run, checked, 2, 10.0)))
    way = out["ways"]["gradio"]
    assert way["alone"]["turns"] == 10 and way["loaded"]["turns"] == 6
    assert way["alone"]["sessions_at_once"] == 1 and way["loaded"]["conversations"] == 3
    assert way["alone"]["app_cpu_ms_per_turn_batches"] == [8.0, 8.0]
    # every percentile carries its n
    assert way["loaded"]["app_stages_ms"]["total"] == {"n": 6, "p50": 395.0, "p95": 495.0}
    assert way["loaded"]["latency_ms"]["n"] == 6
    assert way["alone"]["app_cpu_ms_per_typed_turn"] == {"n": 2, "p50": 8.0}
    assert out["target"]["limit_ms"] == 2 * out["target"]["alone_p95_ms"] + 200
    assert out["target"]["n"] == {"alone": 10, "loaded": 6}
    assert out["target"]["ok"] is True and out["cpu_target"]["ok"] is True
    assert way["jobs_done"] == 1 and way["jobs_lost"] == 1
    assert out["chat_errors"] == 0 and way["turns_lost"] == 0
    assert out["app_rss_mb"] == {"start": 100, "peak": 120, "end": 110}
    # the engine's settings are the ones its command line was made from
    assert out["engine"]["slots"] == int(loadbench.ENGINE[loadbench.ENGINE.index("--slots") + 1])


def test_an_error_fails_the_target_and_counts_in_the_percentiles(monkeypatch) -> None:
    monkeypatch.setattr(loadbench, "ALONE_TURNS", 10)
    monkeypatch.setattr(loadbench, "SESSIONS", 3)
    # one loaded turn failed after 5 s: it is in the p95, and the target fails even though
    # the other turns were quick
    loaded = [_session([400.0, 400.0]), _session([400.0, 400.0]), _session([400.0, 5000.0], 1)]
    run = {"ways": {"gradio": _run(loaded)}, "rss": (1.0, 1.0, 1.0)}
    checked = {"gradio": {"turns_returned": 16, "turns_stored": 16, "turns_lost": 0}}
    out = loadbench.report(run, checked, 2, 10.0)
    assert out["target"]["loaded_p95_ms"] == 5000.0
    assert out["ways"]["gradio"]["loaded"]["answered"] == 5
    assert out["target"]["ok"] is False and out["chat_errors"] == 1
    # CPU per turn is per answered turn: 100 ms over 5, not over 6
    assert out["ways"]["gradio"]["loaded"]["app_cpu_ms_per_turn"] == 20.0
    # quick but with turns missing from the store: not met either
    run = {"ways": {"gradio": _run([_session([400.0, 400.0]) for _ in range(3)])},
           "rss": (1.0, 1.0, 1.0)}  # fmt: skip
    checked = {"gradio": {"turns_returned": 16, "turns_stored": 15, "turns_lost": 1}}
    assert loadbench.report(run, checked, 2, 10.0)["target"]["ok"] is False


async def test_completion_reads_the_stream_and_its_final_extra_field() -> None:
    from assistant.devtools.loadbench import completion

    def handler(request: httpx.Request) -> httpx.Response:
        assert json.loads(request.content)["stream"] is True
        body = "".join(
            f"data: {json.dumps(c)}\n\n"
            for c in (
                {"choices": [{"delta": {"role": "assistant", "content": ""}}]},
                {"choices": [{"delta": {"content": "Par"}}]},
                {"choices": [{"delta": {"content": "is"}}]},
                {"choices": [{"delta": {}, "finish_reason": "stop"}],
                 "assistant": {"conversation_id": "c1", "lane": "chat", "error": None}},
            )
        ) + "data: [DONE]\n\n"  # fmt: skip
        return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})

    async with httpx.AsyncClient(
        base_url="http://app/", transport=httpx.MockTransport(handler)
    ) as h:
        out = await completion(h, [{"role": "user", "content": "capital?"}])
        assert out["reply"] == "Paris" and out["conversation_id"] == "c1"

        def refused(request: httpx.Request) -> httpx.Response:
            return httpx.Response(429, json={"error": {"message": "busy"}})

        h._transport = httpx.MockTransport(refused)
        with pytest.raises(CallError, match="429"):
            await completion(h, [{"role": "user", "content": "capital?"}])


@pytest.mark.process
@pytest.mark.model
def test_the_bench_runs_end_to_end_against_the_real_app(
    monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """A small run: every turn answered and stored, every job done (no timing asserted). Nine
    sessions at once, one more than one login's /v1 cap: the burst came back refused (429)."""
    for name, value in {"SESSIONS": 9, "ALONE_TURNS": 5, "WARMUP_TURNS": 1, "JOBS": 2}.items():
        monkeypatch.setattr(loadbench, name, value)
    monkeypatch.setattr(loadbench, "IDLE_WINDOW_S", 0.5)
    out = loadbench.bench_load(settings, 2, "openai")
    assert set(out["ways"]) == {"gradio", "openai"}  # both ways in, in one run
    for way in out["ways"].values():
        assert way["chat_errors"] == 0, way["error_samples"]
        assert way["turns_returned"] == way["turns_expected"] == 5 + 9 * 2
        assert way["turns_stored"] == way["turns_expected"]
        assert way["turns_lost"] == 0 and way["store_integrity_ok"]
        assert way["jobs_done"] == 2 and way["jobs_lost"] == 0
        assert way["alone"]["app_cpu_ms_per_turn"] > 0
        assert "total" in way["loaded"]["app_stages_ms"]


async def test_the_soak_reads_the_memory_after_warm_up_and_as_it_goes(monkeypatch) -> None:
    monkeypatch.setattr(loadbench, "SOAK_CLIENTS", 2)
    monkeypatch.setattr(loadbench, "SOAK_WARMUP", 50)
    monkeypatch.setattr(loadbench, "SOAK_EVERY", 100)
    calls: list[bool] = []

    async def fake_session(http, way, index, turns, fresh=False, **kw):
        calls.append(fresh)
        return {"errors": []}

    rss = iter(range(500, 10_000, 10))
    monkeypatch.setattr(loadbench, "session", fake_session)
    monkeypatch.setattr(loadbench, "rss_mb", lambda pid: float(next(rss)))
    out = await loadbench.soak_way(None, "gradio", 1, 300)  # type: ignore[arg-type]
    assert out["turns"] == 300 and out["errors"] == 0
    assert [n for n, _ in out["rss_mb_curve"]][:2] == [0, 50]  # the start, then warm-up
    assert all(calls)  # a fresh Gradio session per call: the worst case
    assert out["grew_mb"] == out["end_mb"] - out["after_warmup_mb"]
    assert out["target"]["ok"] is (out["grew_mb"] <= loadbench.SOAK_LIMIT_MB)
