"""A login's disk (issue 49, item 6), on the running app (`assistant serve`, two logins, a
small `max_disk_bytes_per_user`). Failed on the code before the fix: nothing bounded what a
login stored, so one login could fill the disk every other login's conversations live on.

What must hold: past its limit a login's next turn, job and upload are refused on every way
in (`/v1` as 429, the page's message, the Gradio API's error), each naming the setting; the
app keeps running; another login is unaffected; nothing the first login stored is deleted.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from gradio_client import Client

from assistant.store.db import Store
from tests.app_proc import CLI_SERVE, App, run_app
from tests.page_session import PageSession, chat_text
from tests.simengine_proc import run_simengine

USERS = {"ann": "pw-ann-49d", "bob": "pw-bob-49d"}
AUTH = ",".join(f"{u}:{p}" for u, p in USERS.items())
LIMIT = 20_000
SETTING = "max_disk_bytes_per_user"


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    data = tmp_path_factory.mktemp("disk")
    with run_simengine("--token-ms", "2") as sim:
        with run_app(data, sim, entry=CLI_SERVE, ASSISTANT_AUTH=AUTH,
                     ASSISTANT_MAX_DISK_BYTES_PER_USER=str(LIMIT)) as running:  # fmt: skip
            yield running


def bearer(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {user}:{USERS[user]}"}


def v1_turn(app: App, user: str, text: str) -> httpx.Response:
    body = {"model": "assistant", "messages": [{"role": "user", "content": text}]}
    return httpx.post(app.url + "v1/chat/completions", json=body, headers=bearer(user),
                      timeout=120)  # fmt: skip


def stored(app: App, owner: str) -> dict[str, list[str]]:
    """`owner`'s conversations as the store holds them: id -> the requests of its turns."""
    store = Store(app.data_dir / "assistant.db")
    try:
        return {c.id: [t.user_text for t in store.transcript(c.id)]
                for c in store.conversations(owner)}  # fmt: skip
    finally:
        store.close()


def test_a_login_over_its_disk_is_refused_everywhere_naming_the_limit_and_keeps_all(app):
    # ann stores turns of 7,000 characters until the app refuses her next one
    kept: list[str] = []
    for n in range(10):
        r = v1_turn(app, "ann", f"turn {n} " + "x" * 7000)
        if r.status_code != 200:
            break
        kept.append(r.headers["x-assistant-conversation"])
    else:
        pytest.fail("ten turns of 7,000 characters, none refused")
    assert r.status_code == 429 and SETTING in r.text, r.text
    assert 2 <= len(kept) <= 4, len(kept)  # refused once past 20,000 bytes, not before
    before = stored(app, "ann")
    assert set(kept) <= set(before)

    # the Gradio API: a turn and a job, each a readable error naming the setting
    ann = Client(app.url, auth=("ann", USERS["ann"]), verbose=False)
    for api, args in (("/chat", ("one more", "", False)), ("/delegate", ("a job", ""))):
        with pytest.raises(Exception, match=SETTING):
            ann.predict(*args, api_name=api)
    # the page: its message in the chat, and an upload (a recording to say) refused with 429
    page = PageSession(app.url, auth=("ann", USERS["ann"]))
    try:
        out = page.call("chat_1", "and one from the page", [], None, False)
        assert out.ok, out.error
        assert SETTING in chat_text(out.data[0]), out.data[0]
        upload = page.http.post("/gradio_api/upload", files={"files": ("a.wav", b"RIFF")})
        assert upload.status_code == 429 and SETTING in upload.text, upload.text
    finally:
        page.close()

    # bob is not held to ann's disk
    theirs = v1_turn(app, "bob", "bob's question")
    assert theirs.status_code == 200, theirs.text
    bob = Client(app.url, auth=("bob", USERS["bob"]), verbose=False)
    assert bob.predict("bob on the API", "", False, api_name="/chat")["reply"]

    # nothing of ann's was deleted, and none of the refused turns was stored
    assert stored(app, "ann") == before
    assert app.proc.poll() is None  # the app keeps running
