"""The dashboard's numbers: the engine panel, the latency plot's data, and the app's /metrics."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import httpx
import pytest
from gradio_client import Client
from prometheus_client.parser import text_string_to_metric_families
from starlette.requests import Request

from assistant.metrics import parse_engine_metrics
from assistant.records import Timings, TurnResult
from assistant.stats import percentile
from assistant.store.db import Store
from assistant.web.metrics_route import scrape_allowed
from assistant.web.page.dashboard import EngineWatch, bar_order, engine_markdown, latency_frame
from tests.app_proc import free_port, run_app
from tests.simengine_proc import root_url, run_simengine, sim_reset
from tests.waiting import wait_until


@pytest.fixture(scope="module")
def sim() -> Iterator[str]:
    # one slot, so a second request visibly waits behind a first
    with run_simengine("--slots", "1", "--token-ms", "2") as url:
        yield url


def vllm_text(queries: float, hits: float, running: int = 1, waiting: int = 0) -> str:
    """vLLM's metric names, as a real engine prints them."""
    label = '{engine="0",model_name="m"}'
    rows = [
        ("num_requests_running", "gauge", running),
        ("num_requests_waiting", "gauge", waiting),
        ("kv_cache_usage_perc", "gauge", 0.25),
        ("prefix_cache_queries_total", "counter", queries),
        ("prefix_cache_hits_total", "counter", hits),
    ]
    return "".join(f"# TYPE vllm:{n} {k}\nvllm:{n}{label} {float(v)}\n" for n, k, v in rows)


async def ask(url: str, fault: str = "", stream: bool = False) -> httpx.Response:
    messages = [
        {"role": "system", "content": "You are a helpful assistant. " * 20},
        {"role": "user", "content": "hello"},
    ]
    body = {"model": "sim-model", "messages": messages, "max_tokens": 8, "stream": stream}
    headers = {"X-Sim-Fault": fault} if fault else {}
    async with httpx.AsyncClient(timeout=30) as client:
        return await client.post(f"{url}/chat/completions", json=body, headers=headers)


# the engine panel


async def test_panel_reads_the_simulated_engine_and_sees_its_prefix_cache_hit(sim):
    sim_reset(sim)
    watch = EngineWatch(sim)
    assert watch.url == root_url(sim) + "/metrics"
    idle = await watch.poll()
    assert idle.problem is None and idle.metrics is not None
    assert (idle.metrics.running, idle.metrics.waiting, idle.metrics.kv_usage) == (0, 0, 0)
    for _ in range(2):  # the second request finds the first one's system prompt cached
        assert (await ask(sim)).status_code == 200
        reading = await watch.poll()
    assert reading.recent_hit_rate is not None and 0 < reading.recent_hit_rate < 1
    assert not reading.zero_hits
    text = engine_markdown(reading, {"chat_running": 1, "deep_waiting": 2})
    assert f"{reading.recent_hit_rate:.0%} recently" in text
    assert "| 0 | 0 | 0% |" in text and "stayed at 0%" not in text
    assert "chat 1 running" in text and "deep 0 running, 2 waiting" in text


async def test_panel_shows_running_and_waiting_requests(sim):
    watch = EngineWatch(sim)
    # a request that stalls holds the only slot; a second one waits behind it
    held = asyncio.create_task(ask(sim, fault="stall:1", stream=True))
    queued: asyncio.Task[httpx.Response] | None = None
    try:
        # the second request is sent only once the stalled one holds the slot: sent together,
        # either may reach the engine first, and a quick one would finish before the poll
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            reading = await watch.poll()
            counts = (reading.metrics.running, reading.metrics.waiting) if reading.metrics else None
            if counts == (1, 0) and queued is None:
                queued = asyncio.create_task(ask(sim, stream=True))
            elif counts == (1, 1) and queued is not None:
                break
            await asyncio.sleep(0.1)
        assert reading.metrics is not None
        assert (reading.metrics.running, reading.metrics.waiting) == (1, 1)
        assert reading.metrics.kv_usage is not None and reading.metrics.kv_usage > 0
        assert "| 1 | 1 |" in engine_markdown(reading)
    finally:
        tasks = [t for t in (held, queued) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def test_zero_hit_rate_while_queries_grow_warns():
    watch = EngineWatch("http://gpu-box:8000/v1")
    readings = [watch.add(parse_engine_metrics(vllm_text(q, 0))) for q in (100, 400, 900)]
    assert [r.zero_hits for r in readings] == [False, False, True]
    assert readings[-1].recent_hit_rate == 0
    text = engine_markdown(readings[-1])
    assert "stayed at 0%" in text and "--enable-prefix-caching" in text


@pytest.mark.parametrize(
    ("counters", "warns"),
    [
        ([(100, 0), (400, 150), (900, 500)], False),  # hits grow with the queries
        ([(900, 0), (900, 0), (900, 0)], False),  # idle: nothing to judge
        ([(100, 0), (400, 0)], False),  # one round: the first request cannot hit
        ([(5000, 2000), (100, 0), (400, 0), (900, 0)], True),  # restart, then never a hit
    ],
)
def test_zero_hit_warning_needs_growth_without_hits(counters, warns):
    watch = EngineWatch("http://gpu-box:8000/v1")
    for queries, hits in counters:
        reading = watch.add(parse_engine_metrics(vllm_text(queries, hits)))
    assert reading.zero_hits is warns


async def test_bearer_key_is_sent_and_readings_are_shared_between_polls():
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, text=vllm_text(100 * len(seen), 0, running=3, waiting=2))

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    watch = EngineWatch("http://gpu-box:8000/v1/", "sk-test", every_s=60, client=client)
    first = await watch.reading()
    again = await watch.reading()
    assert again is first and len(seen) == 1, "polled at most once per interval"
    assert str(seen[0].url) == "http://gpu-box:8000/metrics"
    assert seen[0].headers["authorization"] == "Bearer sk-test"
    assert "| 3 | 2 | 25% |" in engine_markdown(first)
    await client.aclose()


@pytest.mark.parametrize(
    ("status", "body", "says"),
    [
        (404, '{"detail":"Not Found"}', "exposes none (HTTP 404)"),  # llama-cpp-python's server
        (501, "This server does not support metrics endpoint.", "HTTP 501"),
        (401, "", "ASSISTANT_API_KEY"),
        (200, "# TYPE up gauge\nup 1\n", "none with vLLM's or llama.cpp's names"),
    ],
)
async def test_an_engine_without_metrics_is_said_plainly(status, body, says):
    transport = httpx.MockTransport(lambda _: httpx.Response(status, text=body))
    async with httpx.AsyncClient(transport=transport) as client:
        reading = await EngineWatch("http://e:1/v1", client=client).poll()
    assert reading.metrics is None and says in (reading.problem or "")
    text = engine_markdown(reading)
    assert "No engine metrics** from `http://e:1/metrics`" in text
    assert "llama-cpp-python's server has none" in text


async def test_an_unreachable_engine_is_said_plainly():
    reading = await EngineWatch(f"http://127.0.0.1:{free_port()}/v1", timeout_s=1).poll()
    assert reading.metrics is None and "unreachable" in (reading.problem or "")


# the latency plot's data


def test_latency_frame_gives_p50_and_p95_per_lane_and_stage(tmp_path):
    store = Store(tmp_path / "a.db")
    cid = store.new_conversation("ann")
    totals = [100.0 * i for i in range(1, 21)]
    for i, total in enumerate(totals):
        # voice turns measure first audio, typed ones do not
        t = Timings(ttft=10.0 + i, total=total, first_audio=500.0 if i % 2 else None)
        store.add_turn(cid, "hi", TurnResult("ok", "chat", "stub", "stop", t), source="text")
    store.add_turn(cid, "task", TurnResult("", "deep", "cue", "delegated", Timings(total=42.0)))
    other = store.new_conversation("bob")
    store.add_turn(other, "x", TurnResult("", "chat", "s", "stop", Timings(total=99999.0)))

    frame = latency_frame(store.recent_timings("ann"))
    chat = frame[frame["lane"] == "chat"].set_index("bar")
    # the benchmarks' percentile (nearest rank): the page and a bench agree on a p95
    assert chat.loc["total p50", "ms"] == percentile(totals, 0.5) == 1000.0  # rank 10 of 20
    assert chat.loc["total p95", "ms"] == percentile(totals, 0.95) == 1900.0
    assert chat.loc["1st token p95", "ms"] == percentile(range(10, 30), 0.95) == 28.0
    assert chat.loc["1st audio p50", "turns"] == 10 and chat.loc["total p50", "turns"] == 20
    assert frame["ms"].max() < 99999, "only the owner's turns"
    deep = frame[frame["lane"] == "deep"]
    assert list(deep["bar"]) == ["total p50", "total p95"] and set(deep["ms"]) == {42.0}
    assert set(frame["bar"]) <= set(bar_order())
    store.close()


def test_latency_frame_of_no_turns_is_empty_with_its_columns():
    frame = latency_frame([])
    assert frame.empty and {"lane", "bar", "stat", "ms"} <= set(frame.columns)


# the app's own /metrics


def scrape(url: str, **headers: str) -> dict[tuple[str, tuple], float]:
    """`/metrics` as {(sample name, sorted labels): value}."""
    r = httpx.get(url + "metrics", headers=headers, timeout=10)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }


def sample(metrics: dict, name: str, **labels: str) -> float | None:
    return metrics.get((name, tuple(sorted(labels.items()))))


def test_app_metrics_count_each_turn_once_per_lane_with_jobs_and_queues(sim, tmp_path):
    sim_reset(sim)
    with run_app(tmp_path / "app", sim) as app:
        before = scrape(app.url)
        assert sample(before, "assistant_turn_latency_ms_count", lane="chat", stage="total") is None
        client = Client(app.url, verbose=False)
        reply = client.predict("hello there", api_name="/chat")
        assert reply["error"] is None
        job = client.predict("think hard about tea", "", True, api_name="/chat")
        assert job["lane"] == "deep" and job["job_id"]

        def job_done() -> dict | None:
            metrics = scrape(app.url)
            return metrics if sample(metrics, "assistant_jobs", state="done") == 1 else None

        metrics = wait_until(job_done, 180, "the job to be counted done", every=0.5)
    count = "assistant_turn_latency_ms_count"
    assert sample(metrics, count, lane="chat", stage="total") == 1
    assert sample(metrics, count, lane="chat", stage="ttft") == 1
    total = sample(metrics, "assistant_turn_latency_ms_sum", lane="chat", stage="total")
    assert total == pytest.approx(reply["timings_ms"]["total"], abs=0.1)
    assert sample(metrics, count, lane="deep", stage="total") == 1, "the hand-off is a turn"
    assert sample(metrics, count, lane="deep", stage="ttft") is None
    assert sample(metrics, "assistant_jobs", state="done") == 1
    assert sample(metrics, "assistant_jobs", state="failed") == 0
    for lane in ("chat", "deep"):
        for state in ("running", "waiting"):
            assert sample(metrics, "assistant_lane_requests", lane=lane, state=state) == 0


def test_with_a_login_metrics_answer_loopback_only(sim, tmp_path):
    with run_app(tmp_path / "app", sim, ASSISTANT_AUTH="ann:secret-pw") as app:
        page = httpx.get(app.url + "config", timeout=10)
        assert page.status_code == 401, "the page itself needs the login"
        # a scraper beside the app needs no login
        assert sample(scrape(app.url), "assistant_jobs", state="done") == 0
        proxied = httpx.get(app.url + "metrics", headers={"X-Forwarded-For": "203.0.113.9"})
        assert proxied.status_code == 403


def _request(peer: str, *headers: tuple[bytes, bytes]) -> Request:
    scope = {"type": "http", "method": "GET", "path": "/metrics", "headers": list(headers)}
    return Request(scope | {"client": (peer, 50000)})


@pytest.mark.parametrize(
    ("peer", "headers", "auth", "allowed"),
    [
        ("127.0.0.1", (), True, True),
        ("::1", (), True, True),
        ("192.168.1.20", (), True, False),
        ("127.0.0.1", ((b"forwarded", b"for=203.0.113.9"),), True, False),
        ("127.0.0.1", ((b"x-real-ip", b"203.0.113.9"),), True, False),
        ("192.168.1.20", (), False, True),  # no login: the app only listens on loopback
    ],
)
def test_scrape_allowed(peer, headers, auth, allowed):
    assert scrape_allowed(_request(peer, *headers), auth) is allowed


def test_a_broken_observer_never_breaks_a_turn(settings, caplog):
    from assistant.turns.recorder import Recorder

    def boom(_: TurnResult) -> None:
        raise RuntimeError("observer bug")

    rec = Recorder(observe=boom)
    result = rec.finish(TurnResult("x", "chat", "r", "stop"), conversation_id=None, text="x",
                        source="text")  # fmt: skip
    assert result.timings.total is not None  # logs, does not raise
    assert "the turn observer failed" in caplog.text and "observer bug" in caplog.text


def page_request(user: str | None, peer: str, **headers: str):
    """A page's request as the dashboard sees it: its login, peer address and headers."""
    from types import SimpleNamespace

    return SimpleNamespace(
        username=user, client=SimpleNamespace(host=peer), headers={k: v for k, v in headers.items()}
    )


def test_the_engines_details_are_for_this_machine_and_admins_only():
    # every login's Dashboard showed the engine's URL (issue 38, item 5)
    from assistant.settings import Settings
    from assistant.web.page.dashboard_panel import ADMINS_ONLY, Dash, sees_engine

    two = Settings(auth=(("ann", "a"), ("bob", "b")))
    assert two.admin_logins == ("ann",)  # by default the first login
    assert sees_engine(two, page_request("ann", "192.168.1.9"))
    assert not sees_engine(two, page_request("bob", "192.168.1.9"))
    assert sees_engine(two, page_request("bob", "127.0.0.1"))  # on this machine
    # through a proxy on this machine that is not believed: not this machine's client
    assert not sees_engine(two, page_request("bob", "127.0.0.1", **{"x-forwarded-for": "1.2.3.4"}))
    named = Settings(auth=two.auth, admins=("bob",))
    assert sees_engine(named, page_request("bob", "10.0.0.2"))
    assert not sees_engine(named, page_request("ann", "10.0.0.2"))
    assert sees_engine(Settings(), page_request(None, "127.0.0.1"))  # no login: one user

    class Watch:
        async def reading(self):
            raise AssertionError("the engine is not read for a page that may not see it")

    dash = Dash(None, two, lambda: {}, Watch())  # type: ignore[arg-type]
    assert asyncio.run(dash.engine(page_request("bob", "192.168.1.9"))) == ADMINS_ONLY


def test_admins_are_read_from_the_environment(monkeypatch, tmp_path):
    from assistant.settings import load_settings

    monkeypatch.chdir(tmp_path)
    env = {"ASSISTANT_AUTH": "ann:a,bob:b", "ASSISTANT_ADMINS": "bob, cy"}
    assert load_settings(env).admin_logins == ("bob", "cy")
    assert load_settings({**env, "ASSISTANT_ADMINS": "none"}).admin_logins == ()
