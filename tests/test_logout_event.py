"""The edge tells the app who logged out, once Gradio has ended the login's sessions (a call
open for that login then ends at once, `test_session.py`); a refused logout tells nothing."""

from __future__ import annotations

import asyncio

from assistant.settings import Settings
from assistant.web.edge.exposure import Exposure
from assistant.web.edge.security import EdgeGuard


class Wall:
    """A login wall that knows one login, whose token Gradio forgets at its logout."""

    def __init__(self) -> None:
        self.logged_in = True

    def login_of(self, scope, headers):
        return "ann" if self.logged_in else None

    async def admit(self, scope, receive, send, headers):
        return receive, send


def _logout(headers: list[tuple[bytes, bytes]]) -> tuple[list[str], list[int]]:
    wall, told, statuses = Wall(), [], []

    async def gradio(scope, receive, send):  # Gradio's /logout: the token is gone, 302
        wall.logged_in = False
        await send({"type": "http.response.start", "status": 302, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def on_logout(user: str) -> None:
        assert not wall.logged_in  # told after Gradio ended the sessions, not before
        told.append(user)

    settings = Settings(auth=(("ann", "ann-secret-1"),))
    guard = EdgeGuard(gradio, Exposure.of(settings), wall=wall, on_logout=on_logout)  # type: ignore[arg-type]

    async def send(message):
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    async def receive():
        return {"type": "http.request", "body": b""}

    host = [(b"host", b"127.0.0.1:7860")]
    scope = {"type": "http", "method": "GET", "path": "/logout", "query_string": b"",
             "headers": [*host, *headers], "client": ("127.0.0.1", 1)}  # fmt: skip
    asyncio.run(guard(scope, receive, send))
    return told, statuses


def test_a_logout_is_told_once_gradio_has_ended_the_logins_sessions():
    told, statuses = _logout([(b"sec-fetch-site", b"same-origin")])
    assert told == ["ann"] and statuses == [302]


def test_a_logout_refused_from_another_site_tells_nothing():
    told, statuses = _logout([(b"sec-fetch-site", b"cross-site")])
    assert told == [] and statuses == [403]
