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
