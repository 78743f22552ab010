"""A call in a real headless Chromium: the microphone stays open, the server's voice session
ends turns (a pause inside a sentence does not), runs them, and speaking over a reply stops it.

Chromium's fake microphone plays one file (real recordings from ../shared/audio): jfk.flac
(one request with 1.1 s pauses inside it), silence, a second request, and a third that starts
while the second one's reply is still being generated. Only the call button is clicked. Every
wait is for something the page shows, never a fixed time: the gaps in the file only have to
be longer than the merge window (2 s) and the time to a reply's first audio on a busy machine
(about 3.5 s), and shorter than the reply's speech (25 words, about 9 s).
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from assistant.prompting.history import INTERRUPTED_MARK
from assistant.store.db import Store
from tests.app_proc import CLI_SERVE, App, run_app
from tests.chromium import AUTOPLAY, MICROPHONE, launch, needs_chromium
from tests.conftest import AUDIO
from tests.simengine_proc import run_simengine, sim_requests
from tests.waiting import wait_until

pytestmark = needs_chromium
RATE = 16000


def mono16k(path: Path, channel: int | None = None) -> np.ndarray:
    data, rate = sf.read(str(path), dtype="float32", always_2d=True)
    x = data[:, channel] if channel is not None else data.mean(axis=1)
    n = int(len(x) * RATE / rate)
    x = np.interp(np.linspace(0, len(x) - 1, n), np.arange(len(x)), x).astype(np.float32)
    loud = np.flatnonzero(np.abs(x) > 0.02)  # trim the silence around the words
    return x[max(0, loud[0] - 1600) : loud[-1] + 1600]


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * RATE), dtype=np.float32)


@pytest.fixture(scope="module")
def mic_wav(tmp_path_factory: pytest.TempPathFactory) -> Path:
    stereo = AUDIO / "stereo_diarization.wav"
    audio = np.concatenate(
        [
            silence(1.5),
            mono16k(AUDIO / "jfk.flac"),  # "And so my fellow Americans, ask not ..."
            silence(20.0),  # its whole reply, generated and played
            mono16k(stereo, 1),  # "The horizon seems extremely distant."
            # past the merge window, and past the reply's first audio on a busy machine (3.3 s
            # after the request in CI: 3.0 s of silence let the next request stop it before any
            # of it played, kept as ""); its 25 words still play when ...
            silence(6.0),
            mono16k(AUDIO / "hotwords.mp3"),  # "... go into your ComfyUI folder ..."
            silence(40.0),
        ]
    )
    path = tmp_path_factory.mktemp("mic") / "three-requests.wav"
    sf.write(str(path), (audio * 32767).astype(np.int16), RATE, subtype="PCM_16")
    return path


@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    # replies of about 10 s of speech: the first has played out before the second request,
    # the second still plays when the third speaks (a reply lasts until it was heard)
    with run_simengine("--priority-policy", "--token-ms", "40", "--answer-words", "25") as url:
        yield url


@pytest.fixture(scope="module")
def app(engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    with contextlib.ExitStack() as stack:
        yield stack.enter_context(run_app(tmp_path_factory.mktemp("app"), engine, entry=CLI_SERVE))


@pytest.fixture(scope="module")
def page(app: App, mic_wav: Path) -> Iterator[Any]:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=60_000)
    # %noloop: the file plays once, from when the microphone opens
    args = [*MICROPHONE, f"--use-file-for-fake-audio-capture={mic_wav}%noloop", AUTOPLAY]
    with sync_playwright() as pw:
        browser = launch(pw, *args)
        try:
            tab = browser.new_page(viewport={"width": 1400, "height": 1250})
            tab.set_default_timeout(60_000)
            tab.goto(app.url)
            expect(tab.locator("#banner")).not_to_contain_text("Loading the speech", timeout=90_000)
            yield tab
        finally:
            browser.close()


def test_pauses_end_turns_and_speech_over_a_reply_interrupts_it(page, app, engine):
    from playwright.sync_api import expect

    users = page.locator("#chatbot [data-testid=user]")
    bots = page.locator("#chatbot [data-testid=bot]")
    call = page.locator("#handsfree button.call-button")
    call.click()  # the only click
    expect(page.locator("#handsfree-live")).to_contain_text("Listening")
    expect(call).to_have_attribute("aria-pressed", "true")

    # the transcript grows while the person speaks, then the turn starts by itself; the
    # pauses inside the sentence do not cut it: one turn with the whole sentence
    expect(page.locator("#handsfree-live")).to_contain_text("fellow America")
    expect(users.nth(0)).to_contain_text("for your country")
    expect(users.nth(0)).to_contain_text("fellow America")
    expect(bots.nth(0)).to_contain_text(re.compile(r"endpoint \d+ ms · stt \d+ ms"))
    expect(users.nth(1)).to_contain_text("horizon")
    # the third request, spoken while the second reply streamed: that reply was stopped ...
    expect(users.nth(2)).to_contain_text("folder", timeout=90_000)
    # ... and the third is a turn of its own, answered in full
    third = bots.filter(has_text="folder").last
    expect(third).to_contain_text(re.compile(r"endpoint \d+ ms .*1st audio \d+ ms"), timeout=90_000)
    expect(users).to_have_count(3)
    # cut short, never finished: the chat (reloaded from the store) says so; it shows what the
    # page had played of it, which may end before "The horizon"
    second = bots.filter(has_text="stopped before the answer was complete")
    expect(second).to_have_count(1)
    expect(second).not_to_contain_text("folder")
    store = Store(app.data_dir / "assistant.db")
    try:
        (conversation,) = store.conversations("local")
        turns = store.transcript(conversation.id)
    finally:
        store.close()
    assert [t.source for t in turns] == ["voice"] * 3  # two requests and the barge-in
    assert turns[0].result.error is None and turns[0].result.timings.endpoint is not None
    # the whole sentence, pauses and all, is the first turn (Whisper under load may hear
    # "asks not" or "America", so the check is on the words either side of each pause)
    first = turns[0].user_text.lower()
    assert "fellow america" in first and re.search(r"\basks? not\b", first), first
    assert "what you can do for your country" in first, first
    assert turns[1].result.error and "stopped" in turns[1].result.error  # the barge-in
    # what was heard is what is kept: the stopped reply is stored as far as the page played
    # it (25 words were generated), and the third request's prompt carries just that
    cut = turns[1].result.reply
    assert 0 < len(cut.split()) < 25, cut
    asked = [r["body"]["messages"] for r in sim_requests(engine)]
    third = next(m for m in reversed(asked) if "folder" in m[-1]["content"].lower())
    after_horizon = [
        b["content"]
        for a, b in itertools.pairwise(third)
        if a["role"] == "user" and "horizon" in a["content"].lower() and b["role"] == "assistant"
    ]
    assert after_horizon == [cut + INTERRUPTED_MARK], (after_horizon, cut)
    assert turns[2].result.error is None and "folder" in turns[2].user_text.lower()

    call.click()  # the call ends: the microphone is released
    assert page.wait_for_function("() => !window.assistantHandsFree.active()")
    expect(page.locator("#handsfree-live")).to_have_text("")
    expect(page.locator("#handsfree")).to_have_attribute("data-state", "off")


def test_the_call_control_fits_a_phone(page, app):
    from playwright.sync_api import expect

    # a page opened on a phone (its sidebar starts closed)
    phone = page.context.browser.new_page(viewport={"width": 390, "height": 844})
    try:
        phone.goto(app.url)
        button = phone.locator("#handsfree button.call-button")
        expect(button).to_be_visible()
        # the label is words only: a font without emoji shows it whole
        expect(button).to_have_text("Start call")
        box = button.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
        assert box["height"] >= 36  # a thumb's target
        # one tap away: on the first screen, nothing scrolled (it sat below the recorder)
        assert phone.evaluate("() => window.scrollY") == 0
        assert box["y"] >= 0 and box["y"] + box["height"] <= 844, box
        # and while the banner says something (speech still loading on a busy machine)
        phone.evaluate(
            "() => { document.querySelector('#banner').innerHTML = "
            "'<p>⏳ Loading the speech model (Whisper)</p><p>⚠️ The engine is unreachable.</p>'; }"
        )
        box = button.bounding_box()
        assert box is not None and box["y"] + box["height"] <= 844, box
        state = phone.locator("#handsfree .call-state")
        assert state.inner_text().isascii()
    finally:
        phone.close()


def test_stop_during_a_call_stops_its_reply_through_the_session(page, app, engine):
    """The page's Stop during a call: its event stops the call's reply (the page sends no
    stop of its own on the call's socket); the turn is kept, marked stopped, as heard."""
    from playwright.sync_api import expect

    sent: list[str] = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda f: sent.append(str(f))))
    call = page.locator("#handsfree button.call-button")
    call.click()  # the recording has played out: the call hears silence
    expect(page.locator("#handsfree")).to_have_attribute("data-state", "listening")
    page.get_by_placeholder("Type a message").fill("tell me about the moon")
    page.get_by_role("button", name="Send", exact=True).click()
    # the reply is being said (about 10 s of speech): Stop now
    expect(page.locator("#handsfree")).to_have_attribute("data-state", "speaking")
    page.get_by_role("button", name="Stop", exact=True).click()
    expect(page.locator("#handsfree")).to_have_attribute("data-state", "listening")

    def stopped() -> Any:
        store = Store(app.data_dir / "assistant.db")
        try:
            (conversation,) = store.conversations("local")
            turns = store.transcript(conversation.id)
        finally:
            store.close()
        typed = [t for t in turns if "moon" in t.user_text]
        return typed[0] if typed and typed[0].result.error else None

    turn = wait_until(stopped, 60, "the stopped turn to be stored")
    assert turn.source == "typed" and "stopped" in turn.result.error
    assert len(turn.result.reply.split()) < 25  # cut where the page was, not all 25 words
    assert not any('"stop"' in f for f in sent)  # one cancel: the session's, not the socket's
    call.click()
    assert page.wait_for_function("() => !window.assistantHandsFree.active()")
