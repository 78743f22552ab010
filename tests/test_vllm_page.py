"""The page on real vLLM, in a real Chromium: a typed turn, a spoken (push-to-talk) turn, the
dashboard's prefix-cache figure from vLLM's own /metrics, and Stop closing the real request."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assistant.devtools.vllm_server import VllmServer
from assistant.records import TurnResult
from assistant.store.db import Store
from assistant.turns.pipeline import STOPPED
from tests.app_proc import CLI_SERVE, App, run_app
from tests.chromium import CHROMIUM, needs_chromium
from tests.test_browser import (  # noqa: F401
    ARGS,
    HEARD,
    RECORD_S,
    last_bot,
    mic_wav,
    tab,
)
from tests.vllm_proc import ANSWER, finished, metrics, vllm, wait_running
from tests.waiting import wait_until

OWNER = "local"  # no login: every turn is the local user's
pytestmark = [
    pytest.mark.timeout(900),
    needs_chromium,
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    with vllm(tmp_path_factory.mktemp("vllm-page"), "all", max_num_seqs=4) as s:
        yield s


@pytest.fixture(scope="module")
def app(server: VllmServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    data = tmp_path_factory.mktemp("app")
    # a chat budget long enough that "[[long]]" still streams when Stop is pressed (the tiny
    # model makes ~1k tokens in a second or two)
    (data / "assistant.toml").write_text("[chat]\nmax_tokens = 30000\n")
    with run_app(data, server.url, entry=CLI_SERVE) as running:
        yield running


@pytest.fixture(scope="module")
def page(app: App, mic_wav: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:  # noqa: F811
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=90_000)
    with sync_playwright() as pw:
        browser = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("profile")),
            executable_path=str(CHROMIUM),
            headless=True,
            args=[*ARGS, f"--use-file-for-fake-audio-capture={mic_wav}"],
            viewport={"width": 1400, "height": 1250},
        )
        try:
            tab_ = browser.new_page()
            tab_.set_default_timeout(90_000)
            tab_.goto(app.url)
            yield tab_
        finally:
            browser.close()


def test_a_typed_turn_is_answered(page):
    from playwright.sync_api import expect

    page.get_by_placeholder("Type a message").fill("What is the capital of France?")
    page.get_by_role("button", name="Send", exact=True).click()
    expect(last_bot(page)).to_contain_text(ANSWER)
    expect(last_bot(page)).to_contain_text(re.compile(r"chat · .*ttft \d+ ms"))
    expect(page.locator("#banner")).not_to_contain_text("unreachable")


def test_a_spoken_turn_is_heard_and_answered(page):
    from playwright.sync_api import expect

    mic = page.locator("#mic")
    mic.locator("button.record-button").click()
    page.wait_for_timeout(RECORD_S * 1000)
    mic.locator("button.stop-button").click()
    heard = page.locator("#chatbot [data-testid=user]").last
    expect(heard).to_contain_text(HEARD)
    expect(last_bot(page)).to_contain_text(ANSWER)
    expect(last_bot(page)).to_contain_text(re.compile(r"stt \d+ ms"))


def test_stop_closes_the_real_request(page, server, app):
    from playwright.sync_api import expect

    ended_before = finished(server)
    page.get_by_placeholder("Type a message").fill("Keep talking please [[long]]")
    page.get_by_role("button", name="Send", exact=True).click()
    # Stop while vLLM generates this turn. Not after the page shows text: on a busy machine
    # the page can fall a minute behind the tiny model, which spends even a 30,000-token
    # budget in about that, and a request that ended by itself proves nothing.
    assert wait_running(server, lambda m: (m.running or 0) >= 1).running >= 1
    page.get_by_role("button", name="Stop", exact=True).click()
    idle = wait_running(server, lambda m: (m.running or 0) == 0)
    assert idle.running == 0, "Stop left the request running in vLLM"
    # closed by Stop, not ended by itself (its budget spent) before Stop reached it
    assert finished(server) == ended_before, "the request ended by itself: Stop came too late"

    def stopped() -> tuple[str, TurnResult] | None:
        store = Store(app.data_dir / "assistant.db")
        try:
            (conv,) = store.conversations(OWNER)
            said, last = store.turns(conv.id)[-1]
        finally:
            store.close()
        return (said, last) if last.error == STOPPED else None

    said, turn = wait_until(stopped, 60, "the stopped turn to be stored")
    expect(page.locator("#chatbot [data-testid=user]").last).to_contain_text(said)
    assert said == "Keep talking please [[long]]" and turn.incomplete  # kept, marked stopped
    # short of what the whole budget makes (100,000 characters): stopped, not finished
    assert len(turn.reply) < 100_000


def test_the_dashboard_shows_vllms_own_prefix_cache_figure(page, server):
    from playwright.sync_api import expect

    m = metrics(server)  # nothing else asks the engine now: its counters hold still
    assert m.prefix_queries and m.prefix_hit_rate is not None
    tab(page, "Dashboard")
    panel = page.locator("#engine-panel")
    expect(panel).to_contain_text("prefix cache hits")
    # the page's figure is vLLM's own counters' ratio (hits / queries)
    expect(panel).to_contain_text(f"{m.prefix_hit_rate:.0%}")
    tab(page, "Chat")
