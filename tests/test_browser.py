"""The page as people use it, in a real headless Chromium: speak, hear, type, delegate, watch.

Chromium's fake capture device plays ../shared/audio/jfk.flac (converted to a WAV) into the
microphone. The app runs as `python -m assistant.cli serve` on the simulated engine, which is
down when the page first loads and started while the page is open. The tests run in order,
as one session on one page.

With ASSISTANT_SCREENSHOTS=DIR set, the page is saved there in its main states
(`scripts/screenshots.py` does this for docs/screenshots).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import soundfile as sf
from prometheus_client.parser import text_string_to_metric_families

from tests import chromium
from tests.app_proc import CLI_SERVE, App, free_port, run_app
from tests.chromium import needs_chromium
from tests.conftest import AUDIO
from tests.simengine_proc import run_simengine

pytestmark = needs_chromium
ARGS = [
    *chromium.ARGS,
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    *chromium.MICROPHONE,
]
SHOTS = os.environ.get("ASSISTANT_SCREENSHOTS")
RECORD_S = 11.0  # the whole JFK clip
# what the recording must be heard as. The fake microphone loops the clip from wherever it is
# when Record is pressed, and Whisper tiny.en hears the "Americans ask" join either way
# ("American asks not ...") depending on where the cut falls.
HEARD = re.compile(r"asks? not what your country can do for you", re.IGNORECASE)
# every text the last bot message showed, in order: proof that the reply streamed
WATCH_REPLIES_JS = """() => {
  window.__replies = [];
  const log = document.querySelector('#chatbot');
  new MutationObserver(() => {
    const bots = log.querySelectorAll('[data-testid=bot]');
    const text = bots.length ? bots[bots.length - 1].innerText : '';
    if (text && window.__replies[window.__replies.length - 1] !== text) {
      window.__replies.push(text);
    }
  }).observe(log, {subtree: true, childList: true, characterData: true});
}"""
REPLY_PLAYED_JS = """() => {
  const a = document.querySelector('#reply-audio audio');
  return !!a && a.src.startsWith('blob:') && (a.currentTime > 0 || a.played.length > 0);
}"""


class Engine:
    """The simulated engine on a fixed port, started when a test says so."""

    def __init__(self, port: int, stack: contextlib.ExitStack):
        self.url = f"http://127.0.0.1:{port}/v1"
        self.port = port
        self.stack = stack

    def start(self) -> None:
        # vLLM as it should be run; tokens slow enough that the reply visibly streams
        args = ("--port", str(self.port), "--priority-policy", "--token-ms", "30")
        self.stack.enter_context(run_simengine(*args))


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    with contextlib.ExitStack() as stack:
        yield Engine(free_port(), stack)


@pytest.fixture(scope="module")
def app(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    # the engine is down at start: name its kind and model instead of probing them
    env = {"ASSISTANT_ENGINE_KIND": "vllm", "ASSISTANT_MODEL": "sim-model"}
    with run_app(tmp_path_factory.mktemp("app"), engine.url, entry=CLI_SERVE, **env) as running:
        yield running


@pytest.fixture(scope="module")
def mic_wav(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Chromium's fake capture reads only 16-bit WAV."""
    data, rate = sf.read(str(AUDIO / "jfk.flac"), dtype="int16")
    path = tmp_path_factory.mktemp("mic") / "jfk.wav"
    sf.write(str(path), data, rate, subtype="PCM_16")
    return path


@pytest.fixture(scope="module")
def page(app: App, mic_wav: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from playwright.sync_api import expect, sync_playwright

    # a turn ends after its speech, and Piper is slow on a busy CPU: be patient
    expect.set_options(timeout=60_000)
    with sync_playwright() as pw:
        browser = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("profile")),  # a fresh user-data-dir
            executable_path=str(chromium.CHROMIUM),
            headless=True,
            args=[*ARGS, f"--use-file-for-fake-audio-capture={mic_wav}"],
            viewport={"width": 1400, "height": 1250},
        )
        try:
            tab = browser.new_page()
            tab.set_default_timeout(60_000)
            tab.goto(app.url)
            yield tab
        finally:
            browser.close()


def shot(page: Any, name: str, element: Any = None) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        target = element if element is not None else page
        kw = {} if element is not None else {"full_page": True}
        target.screenshot(path=str(Path(SHOTS) / f"{name}.png"), **kw)


def tab(page: Any, name: str) -> None:
    """Open one of the page's tabs: Chat, Jobs or Dashboard."""
    page.get_by_role("tab", name=name).click()


def last_bot(page: Any) -> Any:
    return page.locator("#chatbot [data-testid=bot]").last


def turn_counts(app: App) -> dict[tuple[str, str], float]:
    """The app's own /metrics: finished turns per (lane, stage)."""
    text = httpx.get(app.url + "metrics", timeout=10).text
    return {
        (s.labels["lane"], s.labels["stage"]): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "assistant_turn_latency_ms_count"
    }


def test_banner_shows_the_engine_down_then_clears_when_it_starts(page, engine):
    from playwright.sync_api import expect

    banner = page.locator("#banner")
    expect(banner).to_contain_text("unreachable", timeout=30_000)
    shot(page, "idle")
    tab(page, "Dashboard")
    expect(page.locator("#engine-panel")).to_contain_text("No engine metrics")
    expect(page.locator("#engine-panel")).to_contain_text("unreachable")
    engine.start()
    # the banner and the engine panel poll by themselves: no reload
    expect(banner).not_to_contain_text("unreachable", timeout=45_000)
    expect(page.locator("#engine-panel")).to_contain_text("prefix cache hits", timeout=30_000)
    tab(page, "Chat")


def test_a_spoken_question_is_heard_answered_as_it_streams_and_spoken(page, app):
    from playwright.sync_api import expect

    page.evaluate(WATCH_REPLIES_JS)
    mic = page.locator("#mic")
    mic.locator("button.record-button").click()
    page.wait_for_timeout(RECORD_S * 1000)
    mic.locator("button.stop-button").click()

    heard = page.locator("#chatbot [data-testid=user]").last
    expect(heard).to_contain_text(HEARD)
    expect(last_bot(page)).to_contain_text("1st audio")
    page.wait_for_function(REPLY_PLAYED_JS, timeout=30_000)

    final = last_bot(page).inner_text()
    assert final.startswith("You said: And so my fellow")
    meta = final.splitlines()[-1]
    assert meta.startswith("chat · ")
    for stage in ("stt", "ttft", "1st audio", "total"):
        assert re.search(rf"{stage} \d+ ms", meta), (stage, meta)
    partial = [t for t in page.evaluate("window.__replies") if "total" not in t]
    grew = [len(t) for t in partial if t.startswith("You said")]
    assert len(grew) >= 3 and grew == sorted(grew) and grew[0] < len(final) // 2, partial
    # the spoken turn was counted once, after its speech: with its first-audio time
    counts = turn_counts(app)
    assert counts[("chat", "total")] == 1 and counts[("chat", "first_audio")] == 1
    shot(page, "voice-turn")


def test_a_typed_turn_shows_its_reply_and_latency_line(page):
    from playwright.sync_api import expect

    box = page.get_by_placeholder("Type a message")
    box.fill("hello there, how are you?")
    page.get_by_role("button", name="Send", exact=True).click()
    expect(box).to_have_value("")  # cleared as the turn starts
    expect(last_bot(page)).to_contain_text("You said: hello there")
    # typing the next message while the reply still streams and is spoken: it stays
    box.fill("the next question")
    expect(last_bot(page)).to_contain_text("You said: hello there, how are you?")
    expect(last_bot(page)).to_contain_text(re.compile(r"ttft \d+ ms · .*total \d+ ms"))
    assert last_bot(page).inner_text().splitlines()[-1].startswith("chat · ")
    page.wait_for_timeout(1000)  # the latency line came in the turn's last update; and after
    expect(box).to_have_value("the next question")
    box.fill("")
    shot(page, "chat-turn")


def test_a_delegated_task_finishes_in_the_jobs_panel(page):
    from playwright.sync_api import expect

    page.get_by_placeholder("Type a message").fill("summarize the history of tea")
    page.get_by_role("button", name="Delegate", exact=True).click()
    # the job's notice may come right after the hand-off: find the hand-off itself
    handoff = page.locator("#chatbot [data-testid=bot]", has_text="Handed off").last
    expect(handoff).to_contain_text(re.compile(r"as job \w+"))
    job_id = re.search(r"as job (\w+)", handoff.inner_text()).group(1)

    tab(page, "Jobs")
    table = page.locator("#jobs-table")
    row = table.locator(".virtual-row", has_text=job_id)  # the rows shown (a hidden copy sizes)
    expect(row).to_contain_text("done")
    row.locator("[role=gridcell]").first.click()  # selecting the row opens the result
    viewer = page.get_by_text(f"Job {job_id}: done")
    expect(viewer).to_be_visible()
    page.wait_for_timeout(2500)  # the panel's refresh ticks keep the selection
    expect(viewer).to_be_visible()
    expect(page.locator("#jobs-selected input")).to_have_value(job_id)
    shot(page, "jobs")
    tab(page, "Chat")  # the notice of the finished job is in the chat
    expect(page.locator("#chatbot")).to_contain_text(f"Job {job_id} is done")


def test_the_dashboard_plots_latency_per_lane_and_shows_the_engine(page):
    from playwright.sync_api import expect

    tab(page, "Dashboard")
    chat_plot = page.locator("#latency-chat")
    # voice and typed turns on the chat lane; the timer refreshes the plot
    expect(chat_plot).to_contain_text(re.compile(r"[2-9] turns measured"), timeout=30_000)
    axis = chat_plot.locator("[aria-roledescription=axis][aria-label^=X-axis]")
    expect(axis).to_have_attribute("aria-label", re.compile("1st audio p50.*1st token p95"))
    expect(chat_plot.locator(".mark-rect path")).to_have_count(6)  # 3 stages x (p50, p95)
    deep_plot = page.locator("#latency-deep")  # the spoken hand-off: first audio and total
    expect(deep_plot).to_contain_text("1 turn measured")
    expect(deep_plot.locator(".mark-rect path")).to_have_count(4)
    engine = page.locator("#engine-panel")
    expect(engine).to_contain_text(re.compile(r"prefix cache hits\s+0\s+0\s+\d+%"))
    expect(engine).to_contain_text("This app's lanes: chat 0 running")
    shot(page, "dashboard", page.locator("#dashboard"))
