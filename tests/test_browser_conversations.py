"""Conversations and the layout, in a real headless Chromium, with two logins.

ann keeps two conversations, switches between them, reloads, renames, exports and deletes;
bob, logged in beside her, sees none of it. The page is also looked at at phone width
(390 px): the conversation comes first and the Jobs panel is a list. The tests run in order.

The layout screenshots are always taken (and checked); with ASSISTANT_SCREENSHOTS=DIR set they
are saved there too (`scripts/screenshots.py` does this for docs/screenshots).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from assistant.store.db import Store
from tests.app_proc import CLI_SERVE, App, run_app
from tests.chromium import launch, needs_chromium
from tests.page_session import PageSession, chat_text
from tests.simengine_proc import run_simengine
from tests.waiting import wait_until

pytestmark = needs_chromium
USERS = {"ann": "ann-secret-1", "bob": "bob-secret-2"}
DESK = {"width": 1400, "height": 1250}
PHONE = {"width": 390, "height": 844}
SHOTS = os.environ.get("ASSISTANT_SCREENSHOTS")
SIDEBAR_AWAY_JS = "() => document.querySelector('#sidebar').getBoundingClientRect().right <= 1"


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    data = tmp_path_factory.mktemp("app")
    # chat-lane thinking on, so replies come with reasoning to fold (and to reopen folded)
    (data / "assistant.toml").write_text("[chat]\nthinking = true\n")
    auth = ",".join(f"{u}:{p}" for u, p in USERS.items())
    with contextlib.ExitStack() as stack:
        engine = stack.enter_context(run_simengine("--priority-policy", "--token-ms", "10"))
        yield stack.enter_context(run_app(data, engine, entry=CLI_SERVE, ASSISTANT_AUTH=auth))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=60_000)
    with sync_playwright() as pw:
        chromium = launch(pw)
        try:
            yield chromium
        finally:
            chromium.close()


def logged_in(browser: Any, app: App, user: str, viewport: dict[str, int]) -> Any:
    """A new browser context (its own cookies) logged in as `user`; returns its page."""
    from playwright.sync_api import expect

    context = browser.new_context(viewport=viewport, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(app.url)
    page.get_by_label("username").fill(user)
    page.get_by_label("password").fill(USERS[user])
    page.get_by_role("button", name="Login").click()
    expect(page.locator("#chatbot")).to_be_visible()
    return page


@pytest.fixture(scope="module")
def ann(browser: Any, app: App) -> Iterator[Any]:
    page = logged_in(browser, app, "ann", DESK)
    yield page
    page.context.close()


def entries(page: Any) -> Any:
    return page.locator("#conversations label")


def say(page: Any, text: str) -> None:
    """Send a typed message and wait for its whole turn (the latency line comes last)."""
    from playwright.sync_api import expect

    page.get_by_placeholder("Type a message").fill(text)
    page.get_by_role("button", name="Send", exact=True).click()
    bot = page.locator("#chatbot [data-testid=bot]").last
    expect(bot).to_contain_text(f"You said: {text}")
    expect(bot).to_contain_text(re.compile(r"total \d+ ms"))


def shot(page: Any, name: str, tmp: Path) -> Path:
    path = tmp / f"{name}.png"
    page.screenshot(path=str(path))
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"))
    return path


def test_two_conversations_switch_and_a_reload_reopens_the_last(ann, tmp_path):
    from playwright.sync_api import expect

    say(ann, "apples are red")
    chat = ann.locator("#chatbot")
    expect(chat.get_by_text("Reasoning")).to_have_count(1)  # folded, as it streamed
    expect(entries(ann)).to_have_count(1)
    expect(entries(ann).first).to_contain_text("apples are red")

    ann.get_by_role("button", name="New conversation").click()
    expect(chat.locator("[data-testid=bot]")).to_have_count(0)
    say(ann, "bananas are yellow")
    expect(entries(ann)).to_have_count(2)
    expect(entries(ann).first).to_contain_text("bananas are yellow")  # newest first

    entries(ann).filter(has_text="apples").click()
    expect(chat).to_contain_text("You said: apples are red")
    expect(chat).not_to_contain_text("bananas")
    expect(chat).to_contain_text(re.compile(r"chat · .*ttft \d+ ms.*total \d+ ms"))
    expect(chat.get_by_text("Reasoning")).to_have_count(1)

    ann.reload()
    expect(chat).to_contain_text("You said: apples are red")
    expect(chat).not_to_contain_text("bananas")
    expect(ann.locator("#conversations input:checked")).to_have_count(1)
    # the conversation continues where it was: the next turn joins it
    say(ann, "and cherries")
    expect(entries(ann).first).to_contain_text("apples are red")
    expect(entries(ann)).to_have_count(2)

    path = shot(ann, "conversations-1400", tmp_path)
    assert Image.open(path).size == (DESK["width"], DESK["height"])


def test_rename_export_and_delete_with_a_confirmation(ann, app, tmp_path):
    from playwright.sync_api import expect

    title = ann.locator("#conversation-title input, #conversation-title textarea").first
    expect(title).to_have_value("apples are red")
    title.fill("Fruit talk")
    ann.get_by_role("button", name="Rename", exact=True).click()
    expect(entries(ann).first).to_contain_text("Fruit talk")

    with ann.expect_download() as got:
        ann.locator("#export").click()
    exported = Path(got.value.path()).read_text()
    assert exported.startswith("# Fruit talk\n")
    assert "apples are red" in exported and "and cherries" in exported
    assert "## Assistant" in exported and "<summary>Reasoning</summary>" in exported
    assert re.search(r"\*chat lane, .*total \d+ ms\*", exported)

    ann.get_by_role("button", name="Delete", exact=True).click()
    ann.get_by_role("button", name="Keep it").click()  # asked first; kept
    expect(ann.locator("#confirm-delete")).to_be_hidden()
    expect(entries(ann)).to_have_count(2)
    ann.get_by_role("button", name="Delete", exact=True).click()
    ann.get_by_role("button", name="Delete for good").click()
    expect(entries(ann)).to_have_count(1)
    expect(entries(ann).first).to_contain_text("bananas are yellow")
    expect(ann.locator("#chatbot [data-testid=bot]")).to_have_count(0)
    store = Store(app.data_dir / "assistant.db")
    try:
        assert [c.title for c in store.conversations("ann")] == ["bananas are yellow"]
    finally:
        store.close()

    ann.reload()  # deleted stays deleted; the page opens empty, not on a deleted conversation
    expect(entries(ann)).to_have_count(1)
    expect(ann.locator("#chatbot [data-testid=bot]")).to_have_count(0)


def test_another_login_sees_none_of_them(browser, app, ann):
    from playwright.sync_api import expect

    bob = logged_in(browser, app, "bob", DESK)
    try:
        expect(entries(bob)).to_have_count(0)
        say(bob, "bob's own question")
        expect(entries(bob)).to_have_count(1)
        expect(bob.locator("#sidebar")).not_to_contain_text("bananas")
    finally:
        bob.context.close()
    ann.reload()
    expect(entries(ann)).to_have_count(1)
    expect(ann.locator("#sidebar")).not_to_contain_text("bob")

    # bob's page calling the sidebar's own handlers with ann's conversation id gets nothing
    store = Store(app.data_dir / "assistant.db")
    try:
        (ann_cid,) = [c.id for c in store.conversations("ann")]
    finally:
        store.close()
    page = PageSession(app.url, auth=("bob", USERS["bob"]))
    try:
        opened = page.call("open", ann_cid, None)
        assert "bananas" not in chat_text(opened.data[0] if opened.ok else [])
        assert "bananas" not in json.dumps(opened.data)
        page.call("rename", "taken over", None)
        page.call("delete", None)
    finally:
        page.close()
    store = Store(app.data_dir / "assistant.db")
    try:
        assert [c.title for c in store.conversations("ann")] == ["bananas are yellow"]
    finally:
        store.close()


def test_voice_settings_are_remembered_per_login(ann, app):
    from playwright.sync_api import expect

    ann.get_by_text("Voice settings").click()
    rate = ann.locator("#rate input[type=number]")
    rate.fill("1.5")
    rate.press("Tab")  # the typed rate is saved as typed (it once saved the old one on leaving)
    ann.get_by_label("Speak replies").uncheck()
    expect(ann.locator("#reply-audio")).to_be_hidden()  # no player when nothing is spoken

    stored: list[dict] = [{}]  # the last read, for a failure to say what was saved instead

    def saved(rate: float, speak: bool) -> bool:
        store = Store(app.data_dir / "assistant.db")
        try:
            prefs = store.prefs("ann")
        finally:
            store.close()
        stored[0] = prefs
        return prefs.get("rate") == rate and prefs.get("speak") is speak

    def shown() -> str:
        box = ann.get_by_label("Speak replies").is_checked()
        return f"stored {stored[0]}, shown rate {rate.input_value()} and speak {box}"

    # before the page is reloaded
    try:
        wait_until(lambda: saved(1.5, False), 60, "ann's rate and speech choice saved")
    except AssertionError as e:  # an intermittent miss in CI: say what was saved and shown
        raise AssertionError(f"{e}: {shown()}") from e
    ann.reload()
    ann.get_by_text("Voice settings").click()
    expect(ann.get_by_label("Speak replies")).not_to_be_checked()
    expect(ann.locator("#rate input[type=number]")).to_have_value("1.5")
    expect(ann.locator("#reply-audio")).to_be_hidden()
    store = Store(app.data_dir / "assistant.db")
    try:
        prefs = store.prefs("ann")
        assert prefs["rate"] == 1.5 and prefs["speak"] is False
        assert store.prefs("bob").get("speak", True) is True  # ann's choice is hers only
    finally:
        store.close()
    ann.get_by_label("Speak replies").check()
    expect(ann.locator("#reply-audio")).to_be_visible()

    # changes one after another, quickly: every one is saved, the last one wins per field
    box = ann.get_by_label("Speak replies")
    box.uncheck()
    box.check()  # sent while the untick's save is on its way (Gradio dropped it)
    rate.fill("0.8")
    rate.fill("1.2")
    rate.press("Tab")
    expect(box).to_be_checked()
    try:
        wait_until(lambda: saved(1.2, True), 60, "ann's last rate and speech choice saved")
    except AssertionError as e:
        raise AssertionError(f"{e}: {shown()}") from e


def test_at_phone_width_the_conversation_comes_first(browser, app, tmp_path):
    from playwright.sync_api import expect

    page = logged_in(browser, app, "ann", PHONE)
    try:
        chat = page.locator("#chatbot")
        sidebar = page.locator("#sidebar")
        expect(sidebar).not_to_have_class(re.compile(r"\bopen\b"))  # closed: chat first
        expect(entries(page)).to_have_count(1)
        sidebar.locator(".toggle-button").click()
        expect(sidebar).to_have_class(re.compile(r"\bopen\b"))
        entries(page).filter(has_text="bananas").click()
        expect(chat).to_contain_text("You said: bananas are yellow")
        expect(sidebar).not_to_have_class(re.compile(r"\bopen\b"))  # picked: out of the way
        page.wait_for_function(SIDEBAR_AWAY_JS)  # it slides out
        box = chat.bounding_box()
        assert box is not None and box["y"] < 200 and box["width"] > 300
        composer = page.get_by_placeholder("Type a message")
        expect(composer).to_be_in_viewport()
        assert composer.bounding_box()["width"] >= 280  # the whole row: placeholder uncut
        path = shot(page, "conversations-390", tmp_path)
        assert Image.open(path).size == (PHONE["width"], PHONE["height"])

        page.get_by_role("button", name="Delegate", exact=True).wait_for()
        composer.fill("plan a three day trip to Lisbon")
        page.get_by_role("button", name="Delegate", exact=True).click()
        expect(chat).to_contain_text(re.compile(r"as job \w+"))
        page.get_by_role("tab", name="Jobs").click()
        cards = page.locator("#jobs-list li")
        expect(cards.first).to_contain_text("plan a three day trip to Lisbon")
        expect(page.locator("#jobs-table")).to_be_hidden()  # a list, not a squeezed table
        shot(page, "jobs-390", tmp_path)
    finally:
        page.context.close()
