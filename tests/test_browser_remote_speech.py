"""The real page in headless Chromium with both sides of speech on a speech server (the app's
own `/v1/audio/...` on a second app, reached through a counting relay): a push-to-talk turn
and a call are heard, answered and spoken, and every transcription and sentence went to the
server."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import soundfile as sf

from tests.app_proc import CLI_SERVE, App, run_app
from tests.conftest import AUDIO
from tests.fault_speech import Relay, relay
from tests.simengine_proc import run_simengine

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--use-fake-ui-for-media-stream",
    "--use-fake-device-for-media-stream",
    "--autoplay-policy=no-user-gesture-required",
]
RECORD_S = 11.0  # the whole JFK clip
HEARD = re.compile(r"asks? not what your country can do for you", re.IGNORECASE)


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[App, Relay]]:
    """(the app the page is on, the relay to its speech server)."""
    with contextlib.ExitStack() as stack:
        engine = stack.enter_context(run_simengine("--token-ms", "20", "--answer-words", "12"))
        server = stack.enter_context(run_app(tmp_path_factory.mktemp("speech"), engine))
        base, counted = stack.enter_context(relay(server.url))
        page_app = stack.enter_context(
            run_app(
                tmp_path_factory.mktemp("app"),
                engine,
                entry=CLI_SERVE,
                ASSISTANT_STT_URL=base + "/v1",
                ASSISTANT_TTS_URL=base + "/v1",
            )
        )
        yield page_app, counted


@pytest.fixture(scope="module")
def page(apps: tuple[App, Relay], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from playwright.sync_api import expect, sync_playwright

    if not CHROMIUM.exists():
        pytest.fail("needs Debian's chromium at /usr/bin/chromium (scripts/setup.sh --test)")
    data, rate = sf.read(str(AUDIO / "jfk.flac"), dtype="int16")
    mic = tmp_path_factory.mktemp("mic") / "jfk.wav"
    sf.write(str(mic), data, rate, subtype="PCM_16")
    expect.set_options(timeout=60_000)
    with sync_playwright() as pw:
        args = [*ARGS, f"--use-file-for-fake-audio-capture={mic}"]
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=args)
        try:
            tab = browser.new_page(viewport={"width": 1400, "height": 1250})
            tab.set_default_timeout(60_000)
            tab.goto(apps[0].url)
            expect(tab.locator("#banner")).not_to_contain_text("Loading the speech", timeout=90_000)
            yield tab
        finally:
            browser.close()


def test_push_to_talk_is_heard_and_spoken_by_the_server(page, apps) -> None:
    from playwright.sync_api import expect

    _, counted = apps
    before = len(counted.paths)
    mic = page.locator("#mic")
    mic.locator("button.record-button").click()
    page.wait_for_timeout(RECORD_S * 1000)
    mic.locator("button.stop-button").click()
    expect(page.locator("#chatbot [data-testid=user]").last).to_contain_text(HEARD)
    bot = page.locator("#chatbot [data-testid=bot]").last
    expect(bot).to_contain_text(re.compile(r"stt \d+ ms .*1st audio \d+ ms"))
    asked = counted.paths[before:]
    assert asked.count("/v1/audio/transcriptions") == 1, asked
    assert asked.count("/v1/audio/speech") >= 1, asked


def test_a_call_is_heard_and_answered_through_the_server(page, apps) -> None:
    from playwright.sync_api import expect

    _, counted = apps
    before = len(counted.paths)
    users = page.locator("#chatbot [data-testid=user]")
    turns = users.count()
    call = page.locator("#handsfree button.call-button")
    call.click()
    expect(page.locator("#handsfree-live")).to_contain_text("Listening")
    expect(users).to_have_count(turns + 1, timeout=90_000)
    # the looping clip is joined wherever it is: some words of it make the turn
    expect(users.nth(turns)).to_contain_text(re.compile(r"fellow america|your country", re.I))
    bot = page.locator("#chatbot [data-testid=bot]").filter(has_text="endpoint").last
    expect(bot).to_contain_text(re.compile(r"endpoint \d+ ms .*1st audio \d+ ms"), timeout=90_000)
    call.click()
    assert page.wait_for_function("() => !window.assistantHandsFree.active()")
    asked = counted.paths[before:]
    # the call's previews and its final went to the server, and its reply's sentences
    assert asked.count("/v1/audio/transcriptions") >= 2, asked
    assert asked.count("/v1/audio/speech") >= 1, asked
