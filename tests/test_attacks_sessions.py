"""Attacks on another login's page session (issue 49, item 1), over real HTTP on the running
app with two logins, ann and bob. Each failed on the code before the fix.

Bob, with ann's page session hash (a browser makes it; anything that sees her page's traffic
learns it), posted to `/gradio_api/run/predict` with the sidebar's "open" handler: the error
listed ann's conversation ids; the page's chat handler, Stop and the job-notices tick ran on
her session too. The login wall checked the session on a list of routes (`queue/join`,
`cancel`, `reset`, `stream`) that had gone stale; now any route's path, query and body are
read for the session ids they carry.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.app_proc import CLI_SERVE, App, run_app
from tests.page_session import PageSession
from tests.simengine_proc import run_simengine

USERS = {"ann": "pw-ann-49", "bob": "pw-bob-49"}
AUTH = ",".join(f"{u}:{p}" for u, p in USERS.items())


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    data = tmp_path_factory.mktemp("sessions")
    with run_simengine("--token-ms", "5") as sim:
        with run_app(data, sim, entry=CLI_SERVE, ASSISTANT_AUTH=AUTH) as app:
            yield app


@pytest.fixture(scope="module")
def ann(guarded: App) -> Iterator[PageSession]:
    """Ann's page: three conversations of hers, and a session the page has used."""
    page = PageSession(guarded.url, auth=("ann", USERS["ann"]))
    bearer = {"Authorization": f"Bearer ann:{USERS['ann']}"}
    page.conversations = []  # type: ignore[attr-defined]
    for n in range(3):
        body = {"model": "assistant", "messages": [{"role": "user", "content": f"ann {n}"}]}
        r = httpx.post(guarded.url + "v1/chat/completions", json=body, headers=bearer,
                       timeout=60)  # fmt: skip
        r.raise_for_status()
        page.conversations.append(r.headers["x-assistant-conversation"])  # type: ignore[attr-defined]
    # her page's heartbeat: the session is hers from then on (a stream; its start is enough)
    with page.http.stream("GET", f"/gradio_api/heartbeat/{page.session_hash}") as beat:
        assert beat.status_code == 200
    yield page
    page.close()


@pytest.fixture(scope="module")
def bob(guarded: App) -> Iterator[PageSession]:
    page = PageSession(guarded.url, auth=("bob", USERS["bob"]))
    yield page
    page.close()


def handler(page: PageSession, name: str) -> dict[str, Any]:
    """One of the page's (private) handlers, by the Python function it runs."""
    found = [d for d in page.config["dependencies"] if d.get("api_name") == name]
    assert found, sorted(str(d.get("api_name")) for d in page.config["dependencies"])
    return found[0]


def body(fn: dict[str, Any], session: str, data: list[Any] | None = None) -> dict[str, Any]:
    trigger = fn["targets"][0][0] if fn["targets"] else None
    return {"data": data if data is not None else [None] * len(fn["inputs"]),
            "fn_index": fn["id"], "session_hash": session, "event_data": None,
            "trigger_id": trigger}  # fmt: skip


def test_run_predict_on_anothers_session_is_refused_and_shows_nothing(ann, bob):
    # the finding: the sidebar's "open" with a value not in the list; the error named ann's
    # conversations (the list Gradio kept for her session)
    opener = handler(bob, "open")
    sent = body(opener, ann.session_hash, ["not-a-conversation", None])
    refused = bob.http.post("/gradio_api/run/predict", json=sent)
    assert refused.status_code == 403, refused.text[:500]
    assert not any(cid in refused.text for cid in ann.conversations)  # type: ignore[attr-defined]
    # the same call on his own session is Gradio's to answer
    mine = body(opener, bob.session_hash, ["not-a-conversation", None])
    own = bob.http.post("/gradio_api/run/predict", json=mine)
    assert own.status_code != 403, own.text[:500]


@pytest.mark.parametrize("name", ["chat_1", "stop", "notices", "refresh_1"])
def test_no_page_handler_runs_on_anothers_session(ann, bob, name):
    # the chat handler rewrote ann's tab's state (200); Stop and the notices tick ran too
    fn = handler(bob, name)
    for route in ("/gradio_api/run/predict", "/gradio_api/api/predict"):
        r = bob.http.post(route, json=body(fn, ann.session_hash))
        assert r.status_code == 403, (route, r.status_code, r.text[:300])


def test_every_route_that_names_a_session_checks_it(ann, bob):
    """Gradio 6.31's routes that take a session hash, in the body, the query or the path, and
    routes no list names (one Gradio may add): all refuse ann's session to bob."""
    theirs = ann.session_hash
    call = {"json": {"data": ["hi", "", False], "session_hash": theirs}}
    form = {"session_hash": theirs, "component_id": "0", "fn_name": "x", "data": "null"}
    unlabelled = {"content": json.dumps({"data": [], "session_hash": theirs}),
                  "headers": {"content-type": "text/plain"}}  # fmt: skip
    query = {"params": {"session_hash": theirs}}
    cancel = {"json": {"session_hash": theirs, "event_id": "e", "fn_index": 0}}
    attempts: list[tuple[str, str, dict[str, Any]]] = [
        ("POST", "/gradio_api/run/chat", call),
        ("POST", "/gradio_api/api/chat", call),
        ("POST", "/gradio_api/call/chat", call),
        ("POST", "/gradio_api/call/v2/chat", {"json": {"text": "hi", "session_hash": theirs}}),
        ("POST", "/gradio_api/component_server",
         {"json": {**form, "component_id": 0, "data": None}}),
        ("POST", "/gradio_api/component_server", {"files": {"f": ("a", b"x")}, "data": form}),
        # JSON labelled as something else is JSON to FastAPI all the same
        ("POST", "/gradio_api/run/predict", unlabelled),
        ("POST", "/gradio_api/a-route-gradio-adds-later", {"json": {"session_hash": theirs}}),
        ("GET", "/gradio_api/deep_link", query),
        ("GET", "/gradio_api/queue/data", query),
        ("GET", "/gradio_api/info", query),
        ("GET", f"/gradio_api/heartbeat/{theirs}", {}),
        ("GET", f"/gradio_api/stream/{theirs}/0/1/playlist.m3u8", {}),
        ("POST", "/gradio_api/cancel", cancel),
    ]  # fmt: skip
    answered: dict[str, int | str] = {}
    for method, path, kw in attempts:
        try:  # the status only: an admitted stream (queue data, a heartbeat) never ends
            with bob.http.stream(method, path, timeout=10, **kw) as r:
                answered[f"{method} {path} {sorted(kw)}"] = r.status_code
        except httpx.HTTPError as e:
            answered[f"{method} {path} {sorted(kw)}"] = repr(e)
    assert set(answered.values()) == {403}, answered


def test_the_owner_still_uses_her_session(ann):
    # the rule refuses others, not the page: ann's own handlers and API calls run
    opener = handler(ann, "open")
    own = ann.http.post("/gradio_api/run/predict", json=body(opener, ann.session_hash,
                                                            [None, None]))  # fmt: skip
    assert own.status_code == 200, own.text[:500]
    call = ann.http.post(
        "/gradio_api/call/jobs", json={"data": [], "session_hash": ann.session_hash}
    )
    assert call.status_code == 200, call.text
    done = ann.http.get(f"/gradio_api/call/jobs/{call.json()['event_id']}", timeout=30)
    assert done.status_code == 200 and "event: complete" in done.text, done.text[:300]
