"""The real Open WebUI (0.12.4, from the registry, offline) on the app's /v1, used in its own page
in a headless Chromium as a new user would (issue 31): a chat question, a deep request and a
follow-up, each followed by Open WebUI's own background tasks (title, tags, follow-ups); and
its microphone and "Read Aloud" served by the app's /v1/audio.

What must hold: every answer appears in Open WebUI's page, the deep one with its thinking folded;
the engine saw no deep request for a housekeeping task; the app's sidebar holds the person's one
conversation, under the person's words (not "### Task: ..."). The simulated engine answers, so
the replies are known ("You said: ...").

Without .venv-owui (scripts/setup_openwebui.sh) or Chromium these tests skip; CI fails a skip.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import pytest

from assistant.store.db import Store
from tests.app_proc import App, run_app
from tests.chromium import launch, needs_chromium
from tests.openwebui_proc import run_openwebui
from tests.simengine_proc import run_simengine, sim_requests
from tests.waiting import wait_until

pytestmark = needs_chromium
QUESTION = "What is the capital of France?"
DEEP = "Delegate: write a long report on rivers."
FOLLOW_UP = "Thanks! And in one line?"
ANSWER_S = 120.0
"""A turn, the deep one included (a job on the simulated engine takes a second or two)."""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, App, str]]:
    """(the simulated engine's URL, the app, Open WebUI's page URL)."""
    data = tmp_path_factory.mktemp("app")
    with contextlib.ExitStack() as stack:
        sim = stack.enter_context(run_simengine("--token-ms", "5", "--slots", "8"))
        app = stack.enter_context(run_app(data, sim))
        owui = stack.enter_context(run_openwebui(tmp_path_factory.mktemp("owui"), app.url + "v1"))
        yield sim, app, owui


@pytest.fixture(scope="module")
def page(stack: tuple[str, App, str]) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = launch(pw)
        try:
            tab = chromium.new_page(viewport={"width": 1280, "height": 900})
            tab.set_default_timeout(60_000)
            tab.goto(stack[2])
            # a new user first gets the release notes
            tab.get_by_text("Okay, Let's Go!").click()
            yield tab
        finally:
            chromium.close()


def send(page: Any, text: str) -> None:
    box = page.locator("#chat-input")
    box.click()
    box.type(text)
    page.keyboard.press("Enter")


def answers(page: Any) -> list[str]:
    return page.locator("#response-content-container").all_inner_texts()


def answered(page: Any, n: int) -> list[str]:
    """Open WebUI's answers once the `n`th has arrived whole: its actions show under it (Open
    WebUI draws a response's Copy button once the message is done), so its text is final."""
    wait_until(
        lambda: (
            page.locator(".copy-response-button").count() >= n
            and len(answers(page)) >= n
            and "You said" in answers(page)[n - 1]
        ),
        ANSWER_S,
        f"answer {n} in Open WebUI's page",
        every=0.25,
    )
    return answers(page)


def test_a_chat_question_a_deep_request_and_a_follow_up_in_open_webui(
    stack: tuple[str, App, str], page: Any
) -> None:
    from playwright.sync_api import expect

    sim, app, _ = stack
    send(page, QUESTION)
    assert QUESTION in answered(page, 1)[0]
    send(page, DEEP)
    deep = answered(page, 2)[1]
    assert "report on rivers" in deep and "Handed off" not in deep
    # its thinking, folded: Open WebUI's "Thought for ..." toggle, closed
    second = page.locator("#response-content-container").nth(1)
    thought = second.locator("button", has_text="Thought")
    expect(thought).to_have_attribute("aria-expanded", "false")
    send(page, FOLLOW_UP)
    assert "in one line" in answered(page, 3)[2]

    # Open WebUI's tasks reached the engine, all on the chat lane; the deep lane saw the report
    def asked() -> list[tuple[str, str]]:
        seen = []
        for r in sim_requests(sim):
            body = r["body"]
            user = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
            seen.append((body.get("reasoning_effort") or "", str(user)))
        return seen

    def after_follow_up() -> bool:
        # the follow-up's request may lead with the conversation's job status (its last message
        # is "<status>\n\n<the follow-up>": docs/routing.md), so it is found by its end
        texts = [text for _, text in asked()]
        ours = [i for i, text in enumerate(texts) if text.endswith(FOLLOW_UP)]
        return bool(ours) and "### Task" in "".join(texts[ours[0] :])

    # the follow-up's own tasks come after its answer
    wait_until(after_follow_up, 60, "Open WebUI's tasks after the follow-up", every=0.25)
    seen = asked()
    tasks = [effort for effort, text in seen if text.startswith("### Task")]
    assert tasks and set(tasks) == {"low"}, seen
    assert [text for effort, text in seen if effort == "high"] == ["write a long report on rivers."]

    store = Store(app.data_dir / "assistant.db")
    try:
        conversations = store.conversations("local")
        assert [c.title for c in conversations] == [QUESTION], conversations
        turns = store.turns(conversations[0].id)
        jobs = store.jobs()
    finally:
        store.close()
    assert [(u, r.lane) for u, r in turns] == [(QUESTION, "chat"), (DEEP, "deep"),
                                               (FOLLOW_UP, "chat")]  # fmt: skip
    # the report ran as a job (the Jobs panel has it), and Open WebUI got its answer
    assert len(jobs) == 1 and jobs[0].state == "done" and jobs[0].notified


def test_open_webui_hears_and_speaks_through_the_app(
    stack: tuple[str, App, str], page: Any
) -> None:
    # Open WebUI set up with the app as its OpenAI speech-to-text and text-to-speech engine
    # (it has no speech of its own offline): what its page asks of its backend when the person
    # records a message and when a reply is read aloud, with the page's own login
    import io

    import httpx
    import soundfile as sf

    from tests.conftest import AUDIO

    _, app, owui = stack
    token = page.evaluate("() => localStorage.token")
    auth = {"Authorization": f"Bearer {token}"}
    data, rate = sf.read(str(AUDIO / "jfk.flac"), dtype="int16")
    wav = io.BytesIO()
    sf.write(wav, data, rate, format="WAV", subtype="PCM_16")
    with httpx.Client(base_url=owui, headers=auth, timeout=120) as http:
        heard = http.post(
            "api/v1/audio/transcriptions", files={"file": ("recording.wav", wav.getvalue())}
        )
        assert heard.status_code == 200, heard.text
        assert "country" in heard.json()["text"].lower()  # the app's Whisper heard it
        # a sentence tiny.en hears back every time (25 of 25 here): Piper's voice varies from
        # one synthesis to the next, and "Paris is the capital of France." came back as
        # "Parishes the capital ..." 3 times in 20
        asked = "The weather today is sunny with a light breeze."
        said = http.post("api/v1/audio/speech", json={"input": asked})
    assert said.status_code == 200, said.text
    assert said.headers["content-type"].startswith("audio/") and len(said.content) > 4000
    # and back through the app: the speech Open WebUI got is the sentence asked for
    with httpx.Client(base_url=app.url, timeout=120) as http:
        back = http.post("v1/audio/transcriptions", files={"file": ("s.audio", said.content)})
    assert back.status_code == 200, back.text
    assert {"weather", "sunny", "breeze"} <= set(re.findall(r"[a-z]+", back.json()["text"].lower()))
