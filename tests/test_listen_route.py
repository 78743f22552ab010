"""`/listen` bounds its calls: per login and in all, a refused call says why, and a socket
that sends nothing is dropped. Starlette's test client on the real route (no login: "local"),
each call a real `Call` on a runtime that is never asked for a turn (only silence is
sent)."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest
from fastapi import FastAPI
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from assistant.call import calls as calls_module
from assistant.call import idle
from assistant.call.calls import Calls
from assistant.settings import Settings
from assistant.web import call as listen_route
from assistant.web.call import add_listen_route
from assistant.web.edge.asgi import header_map
from assistant.web.edge.exposure import Refusal
from assistant.web.edge.login_wall import LoginWall


class Speech:
    """The route's speech models: never asked for in these tests beyond loading."""

    async def stt(self):
        return object()

    async def turn_end(self):
        return None

    async def vad(self):
        return None  # StreamingVad's own (the real Silero)


class SlowSpeech(Speech):
    """Models that take seconds to load (the first call on a busy machine)."""

    async def turn_end(self):
        await asyncio.sleep(LOAD_S)
        return None


LOAD_S = 3.0


def client(
    speech: Speech | None = None, settings: Settings | None = None, calls: Calls | None = None
) -> tuple[TestClient, FastAPI]:
    app = FastAPI()
    rt = SimpleNamespace(
        settings=settings or Settings(), turns=None, conversations=None, router=None,
        calls=calls or Calls(),
    )  # fmt: skip
    add_listen_route(app, rt, speech or Speech())  # type: ignore[arg-type]
    return TestClient(app), app


def test_calls_are_capped_per_login_and_in_all():
    calls = Calls(per_login=2, total=3)
    assert calls.admit("ann") is None and calls.admit("ann") is None
    assert "already have 2 calls" in (calls.admit("ann") or "")
    assert calls.admit("bob") is None
    assert "3 calls open" in (calls.admit("cy") or "")
    calls.leave("ann")
    assert calls.admit("cy") is None and calls.open == {"ann": 1, "bob": 1, "cy": 1}


def test_a_third_call_from_one_login_is_refused_with_the_reason():
    tc, app = client()
    with tc.websocket_connect("/listen") as one, tc.websocket_connect("/listen") as two:
        one.send_bytes(bytes(3200))
        two.send_bytes(bytes(3200))
        with tc.websocket_connect("/listen") as three:
            said = three.receive_json()
            assert said["kind"] == "error" and "already have 2 calls" in said["text"]
            with pytest.raises(WebSocketDisconnect) as closed:
                three.receive_json()
            assert closed.value.code == 4429
        assert app.state.calls.open == {"local": 2}
    # the calls that ended are counted out: a new one is admitted
    with tc.websocket_connect("/listen") as again:
        again.send_bytes(bytes(3200))
        again.close()


def test_a_socket_that_sends_nothing_is_dropped(monkeypatch):
    monkeypatch.setattr(listen_route, "IDLE_S", 0.5)
    tc, app = client()
    with tc.websocket_connect("/listen") as ws:
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
        assert closed.value.code == 4408
    assert app.state.calls.open == {}


def test_audio_sent_while_the_models_load_is_not_taken_for_a_flood(monkeypatch):
    # The page streams from the moment the socket opens. Read only once the models were
    # loaded, those seconds came in as one burst and the pace check ended the call unheard.
    monkeypatch.setattr(listen_route, "IDLE_S", 1.0)
    tc, app = client(SlowSpeech())
    with tc.websocket_connect("/listen") as ws:
        started = time.monotonic()
        while time.monotonic() - started < LOAD_S + 1.0:  # real time, 100 ms frames
            ws.send_bytes(bytes(3200))
            time.sleep(0.1)
        # then the page goes quiet: the call ends for that (4408), not for its pace
        with pytest.raises(WebSocketDisconnect) as closed:
            said = ws.receive_json()
            pytest.fail(f"the call said {said}")
        assert closed.value.code == 4408
    assert app.state.calls.open == {}


def test_a_quiet_call_is_warned_then_ended_after_the_idle_time():
    # the person says nothing: the page is told before the call ends, then it ends (4408);
    # the socket keeps sending, so it is the quiet that ends it, not a silent wire
    tc, app = client(settings=Settings(call_idle_s=2.0))
    with tc.websocket_connect("/listen") as ws:
        ws.send_bytes(bytes(3200))
        warned = ws.receive_json()
        assert warned["kind"] == "idle" and 0 < warned["ends_in_s"] <= 1, warned
        said = ws.receive_json()
        assert said["kind"] == "error" and "nothing said for 2 s" in said["text"], said
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
        assert closed.value.code == idle.IDLE_CODE
    assert app.state.calls.open == {}


class WallOnly:
    """The edge's login wall alone, before the app (as `EdgeGuard` runs it)."""

    def __init__(self, app, wall: LoginWall) -> None:
        self.app, self.wall = app, wall

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "websocket":
            admitted = await self.wall.admit(scope, receive, send, header_map(scope))
            assert not isinstance(admitted, Refusal)
        await self.app(scope, receive, send)


def test_a_call_ends_when_its_login_expires():
    # the login lasts 1.5 s from its first use (the call's socket): then the call ends (4401),
    # though the page goes on sending and nothing else asks the app anything
    tc, app = client(settings=Settings(auth=(("ann", "ann-secret-1"),)))
    app.cookie_id, app.tokens = "c", {"tok": "ann"}  # type: ignore[attr-defined]
    app.add_middleware(WallOnly, wall=LoginWall(max_age_s=1.5))
    started = time.monotonic()
    with tc.websocket_connect("/listen", headers={"cookie": "access-token-c=tok"}) as ws:
        ws.send_bytes(bytes(3200))
        said = ws.receive_json()
        assert said["kind"] == "error" and "expired" in said["text"], said
        assert time.monotonic() - started >= 1.5
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
        assert closed.value.code == 4401
    assert app.state.calls.open == {}


def test_when_every_place_is_taken_the_quietest_call_gives_its_place(monkeypatch):
    # one place in all: a call left quiet gives it to a new call and is told why (4409); a
    # call quiet for less than YIELD_AFTER_S keeps it and the new one is refused (4429)
    monkeypatch.setattr(idle, "YIELD_AFTER_S", 0.0)
    monkeypatch.setattr(calls_module, "YIELD_AFTER_S", 0.0)
    tc, app = client(calls=Calls(per_login=2, total=1))
    with tc.websocket_connect("/listen") as old:
        old.send_bytes(bytes(3200))
        _wait_joined(app)
        with tc.websocket_connect("/listen") as new:
            said = old.receive_json()
            assert said["kind"] == "error" and "quiet for" in said["text"], said
            with pytest.raises(WebSocketDisconnect) as closed:
                old.receive_json()
            assert closed.value.code == idle.YIELDED_CODE
            new.send_bytes(bytes(3200))
            _wait_joined(app)
            assert app.state.calls.open == {"local": 1}
            monkeypatch.setattr(calls_module, "YIELD_AFTER_S", 3600.0)
            with tc.websocket_connect("/listen") as third:
                refused = third.receive_json()
                assert refused["kind"] == "error" and "1 calls open" in refused["text"]


def _wait_joined(app: FastAPI) -> None:
    """Until the newest call has joined (its models loaded): only then can it give way."""
    deadline = time.monotonic() + 30
    while not app.state.calls._quiet and time.monotonic() < deadline:
        time.sleep(0.05)
    assert app.state.calls._quiet


def test_the_calls_path_loads_no_gradio():
    # a call (its socket, its session, the speech models) is the app's own code: a second
    # transport (a phone line) can reuse it without the page's framework
    import subprocess
    import sys

    code = (
        "import sys, assistant.web.call, assistant.call.call, "
        "assistant.speech.models; print('gradio' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
