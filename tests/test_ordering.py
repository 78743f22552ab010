"""The priority probe's baseline: taken once the engine's own count stops falling."""

from __future__ import annotations

import asyncio

import httpx

from assistant.engine import ordering
from assistant.engine.ordering import PriorityProbe


def metrics_text(running: int, waiting: int) -> str:
    return (
        "# TYPE vllm:num_requests_running gauge\n"
        f'vllm:num_requests_running{{model_name="tiny"}} {running}\n'
        "# TYPE vllm:num_requests_waiting gauge\n"
        f'vllm:num_requests_waiting{{model_name="tiny"}} {waiting}\n'
    )


def test_the_baseline_waits_for_closed_requests_to_be_dropped(monkeypatch):
    # a previous run's four requests, closed by their client, leave the engine one by one
    readings = iter([(4, 0), (3, 0), (1, 0), (0, 0), (0, 0), (0, 0)])
    asked = []

    def serve(request: httpx.Request) -> httpx.Response:
        running, waiting = next(readings)
        asked.append(running)
        return httpx.Response(200, text=metrics_text(running, waiting))

    monkeypatch.setattr(ordering, "STEADY_S", 0.01)

    async def run():
        async with httpx.AsyncClient(transport=httpx.MockTransport(serve)) as client:
            probe = PriorityProbe(client, model="tiny", metrics_url="http://engine/metrics")
            first = await probe._metrics()
            return await probe._steady(first)

    steady = asyncio.run(run())
    assert (steady.running, steady.waiting) == (0, 0)  # not the 4 that were on their way out
    assert asked == [4, 3, 1, 0, 0]  # it stopped asking once the count held


def test_the_doctor_looks_again_when_the_probe_could_not_tell_for_a_passing_reason(monkeypatch):
    from types import SimpleNamespace

    from assistant import doctor
    from assistant.engine.ordering import Ordering

    outcomes = [
        Ordering(None, "cannot confirm: a probe request failed (ConnectTimeout)", settled=False),
        Ordering(True, "a priority-0 request overtook 2 queued priority-10 ones", 2, sequences=3),
    ]
    runs = []

    class Probe:
        def __init__(self, client, **kw):
            pass

        async def run(self):
            runs.append(1)
            return outcomes[len(runs) - 1]

    monkeypatch.setattr(doctor, "PriorityProbe", Probe)
    engine = SimpleNamespace(
        profile=SimpleNamespace(priority=True), model="tiny", window=SimpleNamespace(size=None)
    )
    rt = SimpleNamespace(
        engine=engine, settings=SimpleNamespace(api_key=None), base_url="http://engine/v1"
    )
    check, seen = asyncio.run(doctor._priority_check(rt))
    assert (check.ok, len(runs)) == (True, 2) and "overtook" in check.detail
    assert seen == 3  # the sequences it filled, for the doctor's "deep lane" check

    # a reason that stays (no /metrics) is said at once, without a second run
    outcomes[0] = Ordering(None, "cannot confirm: the engine serves no /metrics")
    runs.clear()
    check, seen = asyncio.run(doctor._priority_check(rt))
    assert (check.ok, len(runs), seen) == (None, 1, None)
