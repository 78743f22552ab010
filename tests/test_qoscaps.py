"""`bench qos --vllm --deep-caps`: every part of the sweep is bounded (the engine's start, each
row, the table), and rows go out as they are made."""

from __future__ import annotations

from types import SimpleNamespace

import pytest


def test_caps_are_checked():
    from assistant.devtools.qoscaps import parse_caps
    from assistant.errors import BadInput

    assert parse_caps("1,2,3") == [1, 2, 3]
    for bad in ("0,1", "5", "a", ""):
        with pytest.raises(BadInput):
            parse_caps(bad)


def test_an_engine_that_never_answers_is_given_up_on_in_time():
    import time

    from assistant.devtools.vllm_server import VllmServer, VllmStartFailed, _wait_ready

    proc = SimpleNamespace(poll=lambda: None, returncode=None)  # alive, never listening
    server = VllmServer(
        "http://127.0.0.1:9/v1", proc, __import__("pathlib").Path("/nonexistent"), []
    )
    began = time.monotonic()
    with pytest.raises(VllmStartFailed, match="did not start in 2 s"):
        _wait_ready(server, 2.0)
    assert time.monotonic() - began < 6


def test_a_failed_start_is_a_row_and_the_sweep_goes_on(monkeypatch, settings):
    import contextlib

    from assistant.devtools import qoscaps
    from assistant.devtools.vllm_server import VllmStartFailed

    starts = []

    @contextlib.contextmanager
    def failing(scratch, flags, **kw):
        starts.append(kw["start_timeout_s"])
        raise VllmStartFailed("vllm serve exited with code 1:\nout of memory")
        yield

    monkeypatch.setattr(qoscaps, "run_vllm", failing)
    rows: list[dict] = []
    out = qoscaps.bench_qos_caps(settings, 2, "shared", [1, 3], ("fcfs", "priority"), rows.append)
    assert [(r["policy"], r["row"]) for r in rows] == [
        ("fcfs", "engine start"),
        ("priority", "engine start"),
    ]
    assert "out of memory" in rows[0]["error"] and out["rows"] == rows
    assert starts == [qoscaps.START_BOUND_S] * 2
    assert "engine did not start" in out["summary"][0]


def test_a_row_that_runs_out_stops_its_jobs_and_says_so(monkeypatch):
    import asyncio

    from assistant.devtools import qoscaps

    job = SimpleNamespace(id="j1", state="running", reasoning_tokens=40, answer_tokens=0)
    listed = iter([[], [job]])
    cancelled = []
    rt = SimpleNamespace(
        store=SimpleNamespace(jobs=lambda owner: next(listed)),
        jobs=SimpleNamespace(cancel=cancelled.append),
    )

    async def forever(*a, **kw):
        await asyncio.sleep(3600)

    monkeypatch.setattr(qoscaps, "_saturated", forever)
    monkeypatch.setattr(qoscaps, "ROW_BOUND_S", 1.2)
    monkeypatch.setattr(qoscaps, "ROW_MARGIN_S", 0.2)
    row = asyncio.run(qoscaps._bounded(rt, 2, 1))
    assert row["timed_out"] is True and row["after_s"] < 2
    assert (row["jobs_done"], row["deep_tokens"], cancelled) == (0, 40, ["j1"])
    assert "ran out" in qoscaps.row_line({"policy": "fcfs", "row": "cap 1"} | row)
