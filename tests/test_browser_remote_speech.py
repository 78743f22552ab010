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

import numpy as np
import pytest
import soundfile as sf

from assistant.store.db import Store
from tests.app_proc import CLI_SERVE, App, run_app
from tests.chromium import AUTOPLAY, MICROPHONE, launch
from tests.conftest import AUDIO
from tests.fault_speech import Relay, relay
from tests.simengine_proc import run_simengine

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


@contextlib.contextmanager
def browser_on(app: App, mic: Path) -> Iterator[Any]:
    """A page of `app` in Chromium, its fake microphone playing `mic`."""
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=60_000)
    with sync_playwright() as pw:
        browser = launch(pw, *MICROPHONE, f"--use-file-for-fake-audio-capture={mic}", AUTOPLAY)
        try:
            tab = browser.new_page(viewport={"width": 1400, "height": 1250})
            tab.set_default_timeout(60_000)
            tab.goto(app.url)
            expect(tab.locator("#banner")).not_to_contain_text("Loading the speech", timeout=90_000)
            yield tab
        finally:
            browser.close()


def mic_file(folder: Path, *, once: bool) -> Path:
    """JFK as a 16-bit WAV (all Chromium's fake capture reads); `once`: after silence, then
    silence, played once from when the microphone opens (`%noloop`), as a call hears it."""
    data, rate = sf.read(str(AUDIO / "jfk.flac"), dtype="int16")
    data = data.reshape(len(data), -1)[:, 0]  # mono
    if once:
        gap = np.zeros(int(rate * 1.5), dtype=np.int16)
        data = np.concatenate([gap, data, np.zeros(rate * 40, dtype=np.int16)])
    path = folder / ("call.wav" if once else "jfk.wav")
    sf.write(str(path), data, rate, subtype="PCM_16")
    return path


@pytest.fixture
def page(apps: tuple[App, Relay], tmp_path: Path) -> Iterator[Any]:
    with browser_on(apps[0], mic_file(tmp_path, once=False)) as tab:
        yield tab


@pytest.fixture
def call_page(apps: tuple[App, Relay], tmp_path: Path) -> Iterator[Any]:
    mic = mic_file(tmp_path, once=True)
    with browser_on(apps[0], Path(f"{mic}%noloop")) as tab:
        yield tab


def stored_turns(app: App) -> int:
    store = Store(app.data_dir / "assistant.db")
    try:
        return sum(len(store.transcript(c.id)) for c in store.conversations("local"))
    finally:
        store.close()


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


def test_a_call_is_heard_and_answered_through_the_server(call_page, apps) -> None:
    from playwright.sync_api import expect

    page, (app, counted) = call_page, apps
    before = len(counted.paths)
    users = page.locator("#chatbot [data-testid=user]")
    bots = page.locator("#chatbot [data-testid=bot]")
    # the page opens on this login's conversation: the push-to-talk turn may be there already
    turns = stored_turns(app)
    expect(users).to_have_count(turns)
    call = page.locator("#handsfree button.call-button")
    call.click()
    expect(page.locator("#handsfree-live")).to_contain_text("Listening")
    live = page.locator("#handsfree-live")
    try:
        expect(users).to_have_count(turns + 1, timeout=90_000)
        expect(users.last).to_contain_text("for your country")
        expect(users.last).to_contain_text("fellow America")  # one turn: the pauses did not cut it
        expect(bots).to_have_count(turns + 1)
        expect(bots.last).to_contain_text(re.compile(r"endpoint \d+ ms .*1st audio \d+ ms"),
                                          timeout=90_000)  # fmt: skip
    except AssertionError as e:
        log = app.log.read_text(errors="replace")[-3000:]
        raise AssertionError(
            f"{e}; live: {live.inner_text()!r}; sent: {counted.paths[before:]}; app log: {log}"
        ) from e
    call.click()
    assert page.wait_for_function("() => !window.assistantHandsFree.active()")
    asked = counted.paths[before:]
    # the call's previews and its final went to the server, and its reply's sentences
    assert asked.count("/v1/audio/transcriptions") >= 2, asked
    assert asked.count("/v1/audio/speech") >= 1, asked
