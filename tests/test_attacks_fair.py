"""Attacks on another login's share of the engine (issue 49, item 2), over real HTTP on the
running app with two logins, ann and bob, and the simulated engine (four slots, FIFO, replies
of two minutes). Each failed on the code before the fix.

Ann kept 8 `/v1` streams and 8 Gradio API chats open: the per-way-in bounds add up, so all 16
of her requests went to the engine at once, and bob's first token waited behind them (0.05 s
alone, 2.1-3.8 s beside them). Ann's five jobs filled her job limit, and her inline deep
answers were still accepted, beside the worker's jobs rather than under the same deep cap.
How long bob waits is a figure for the closing report and the benchmarks; here, the order of
events: bob's request reaches the engine while ann's flood waits in the app.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.app_proc import CLI_SERVE, App, run_app
from tests.simengine_proc import run_simengine, sim_requests
from tests.test_attacks import AUTH, ask_body, bearer, client_of, join_chat
from tests.waiting import wait_until

SHARE = 2
"""A login's requests at the engine at once where the app does not know the engine's slots
(`engine.lanes.SHARE_UNKNOWN_SLOTS`): the default the app runs with here."""


@pytest.fixture(scope="module")
def flooded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[App, str]]:
    data = tmp_path_factory.mktemp("fair")
    with run_simengine("--token-ms", "50", "--answer-words", "2400") as slow:
        with run_app(data, slow, entry=CLI_SERVE, ASSISTANT_AUTH=AUTH) as app:
            yield app, slow


def lane_requests(app: App, lane: str, state: str) -> int:
    text = httpx.get(app.url + "metrics", timeout=30).text
    pattern = rf'assistant_lane_requests{{lane="{lane}",state="{state}"}} (\S+)'
    found = re.search(pattern, text)
    assert found is not None, text[:500]
    return int(float(found.group(1)))


def engine_texts(sim: str) -> list[str]:
    """The last user message of each request the engine received, in arrival order."""
    out = []
    for r in sim_requests(sim):
        users = [m for m in r["body"]["messages"] if m.get("role") == "user"]
        out.append(str(users[-1]["content"]) if users else "")
    return out


def first_token(app: App, user: str, text: str, effort: str = "low") -> str:
    """The first content of `user`'s streamed answer (the stream is then left)."""
    body = ask_body(text, True) | {"reasoning_effort": effort}
    with httpx.Client(timeout=httpx.Timeout(120, connect=10)) as http:
        url = app.url + "v1/chat/completions"
        with http.stream("POST", url, json=body, headers=bearer(user)) as r:
            assert r.status_code == 200, r.read()[:300]
            for line in r.iter_lines():
                if '"content"' in line:
                    return line
    raise AssertionError(f"{user}'s stream ended without content")


async def _stream_held(http: httpx.AsyncClient, user: str, text: str) -> None:
    """`user`'s streamed question, held open (its answer unread) until cancelled."""
    body = ask_body(text, True)
    async with http.stream("POST", "v1/chat/completions", json=body, headers=bearer(user)) as r:
        assert r.status_code == 200, await r.aread()
        await asyncio.Event().wait()


def test_one_logins_flood_waits_its_turn_and_anothers_request_goes_to_the_engine(flooded):
    app, sim = flooded

    async def flood() -> None:
        async with httpx.AsyncClient(base_url=app.url, timeout=300) as http:
            # ann's 8 /v1 streams at once (each answers only at its first token)
            anns = [asyncio.create_task(_stream_held(http, "ann", f"ann flood v1 {n}"))
                    for n in range(8)]  # fmt: skip
            try:
                await asyncio.to_thread(gradio_flood_and_bob, app, sim, anns)
            finally:
                for task in anns:
                    task.cancel()
                await asyncio.gather(*anns, return_exceptions=True)

    asyncio.run(flood())
    texts = engine_texts(sim)
    bob_at = next(i for i, t in enumerate(texts) if "bob's own question" in t)
    # behind her share, not her flood (a request refused for its tools is sent again: once)
    before = {t for t in texts[:bob_at] if "ann flood" in t}
    assert len(before) == SHARE, texts[: bob_at + 1]


def gradio_flood_and_bob(app: App, sim: str, anns: list[asyncio.Task]) -> None:
    with contextlib.ExitStack() as held:
        ann = held.enter_context(client_of(app, "ann"))
        for n in range(8):  # and 8 Gradio API chats
            joined = join_chat(ann, f"ann-fair-{n}", f"ann flood gradio {n}")
            assert joined.status_code == 200, joined.text
            cancel = {"session_hash": f"ann-fair-{n}", "event_id": joined.json()["event_id"],
                      "fn_index": 0}  # fmt: skip
            held.callback(ann.post, "gradio_api/cancel", json=cancel)  # they end with the test
        # all 16 are at the lanes: her share at the engine, the rest waiting in the app
        wait_until(
            lambda: (
                lane_requests(app, "chat", "running") + lane_requests(app, "chat", "waiting") == 16
                or any(t.done() for t in anns)
            ),
            120,
            "ann's 16 requests to reach the lanes",
        )
        assert not any(t.done() for t in anns), [t.exception() for t in anns if t.done()]
        assert lane_requests(app, "chat", "running") == SHARE
        # bob's first token comes while ann's flood still waits in the app: he was not put
        # behind it (each of her replies takes two minutes)
        first_token(app, "bob", "bob's own question")
        assert lane_requests(app, "chat", "waiting") == 16 - SHARE


def test_an_inline_deep_answer_counts_among_the_logins_jobs(flooded):
    app, _ = flooded
    url = app.url + "v1/chat/completions"
    handoff = {"wait": False, "reasoning_effort": "medium"}
    with httpx.Client(timeout=120) as http:
        for n in range(5):  # ann's five jobs: her limit
            body = ask_body(f"delegate: write the fair report number {n}", False) | handoff
            r = http.post(url, json=body, headers=bearer("ann"))
            assert r.status_code == 200 and r.headers.get("x-assistant-job"), r.text[:300]
        refused = http.post(url, json=ask_body("a hard one", True) | {"reasoning_effort": "high"},
                            headers=bearer("ann"))  # fmt: skip
        assert refused.status_code == 429, refused.text[:300]
        assert "max_jobs_per_user" in refused.json()["error"]["message"]


def test_an_inline_deep_answer_waits_for_the_deep_cap_the_jobs_share(flooded):
    app, _ = flooded
    # ann's jobs (the test before) fill the deep cap in the worker: bob's inline deep answer
    # waits for a place there instead of going to the engine beside them
    wait_until(lambda: lane_requests(app, "deep", "running") >= 2, 120, "the jobs to run")
    body = ask_body("bob's hard one", True) | {"reasoning_effort": "high"}
    with httpx.Client(timeout=httpx.Timeout(120, connect=10)) as http:
        url = app.url + "v1/chat/completions"
        with ThreadPoolExecutor(1) as pool:
            asked = pool.submit(lambda: http.post(url, json=body, headers=bearer("bob"), timeout=8))
            wait_until(
                lambda: lane_requests(app, "deep", "waiting") == 1 or asked.done(),
                60,
                "bob's inline deep answer to wait for the deep cap",
            )
            assert not asked.done(), asked.result()
            assert lane_requests(app, "deep", "running") == 2
            with contextlib.suppress(httpx.HTTPError):
                asked.result()  # he gives up (his client's read timeout): the turn stops
