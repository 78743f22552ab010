"""With a login, every route needs it, Gradio's own included, and a Gradio session belongs to
the login that first used it (issue 26, item 3).

Gradio checks the login on most of its routes but not all: `/gradio_api/cancel`, `/reset`,
`/heartbeat/*` and `/stream/*` answer anyone. And a Gradio session id (`session_hash`) is a
random string the browser makes: Gradio serves whoever sends it, so another login that learns
it could stop or read that session's replies, or run the page's handlers on its state. Here a
request without a login is refused (401) unless its route is part of the login page itself,
and a session id, or an event id the app handed to one login, used by another gets 403.

Which routes name a session is not a list (one went stale, issue 49: `/run/predict` ran the
page's handlers on another login's session): every Gradio route is read for the ids it
carries, in its path, its query and its body (JSON or a form), whatever the route; only the
file uploads' bodies are not read (they name no session).
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any
from urllib.parse import parse_qs

from starlette.requests import cookie_parser

from assistant.web.edge.asgi import Message, Receive, Scope, Send, TooLarge, read_body, replay
from assistant.web.edge.exposure import Refusal
from assistant.web.edge.identity import LOGIN_LEFT, login_cookie

PUBLIC_PAGES = frozenset(
    {"/", "/favicon.ico", "/robots.txt", "/manifest.json", "/theme.css", "/logout",
     "/gradio_api/theme.css", "/gradio_api/login_check", "/gradio_api/login_check/",
     "/gradio_api/startup-events"}
)  # fmt: skip
"""What the login page itself loads (GET/HEAD): Gradio serves `/` as the login form. Gradio's
`launch()` calls `startup-events` itself, without a login (it runs them once, at start)."""
PUBLIC_PREFIXES = ("/assets/", "/static/", "/svelte/", "/pwa_icon")
LOGIN = frozenset({"/login", "/login/"})
OWN_CHECKS = ("/v1/", "/metrics")
"""Routes that check who calls them themselves: `/v1` a bearer login (a client cannot follow
Gradio's cookie flow), `/metrics` loopback only."""
API = "/gradio_api"
FILE_BODIES = ("/upload", "/process_recording")
"""Gradio routes whose body is a file, not read here (they have caps of their own); Gradio
reads no session from them (an upload's `session_hash` header only labels its profiling)."""
MINTS_EVENTS = ("/queue/join", "/call/")
"""Gradio routes that answer with a new event id."""
JSON_BODY_MAX = 16 * 1024 * 1024
"""A Gradio call's JSON at most (the page sends its chat history with each turn); Gradio
itself parses any size."""
LOGIN_MAX_AGE_S = 7 * 86400.0
"""How long a login lasts by default (`login_max_age_s`)."""
MAX_OWNED = 20_000
"""Session and event ids remembered, the least recently used forgotten first. Gradio keeps
the state of far fewer sessions (`server.SESSION_STATES`), so an id forgotten here has no
state left to take over."""


def is_public(scope: Scope) -> bool:
    path, method = scope["path"], scope.get("method", "GET")
    if scope["type"] == "http" and method == "POST" and path in LOGIN:
        return True
    if path.startswith(OWN_CHECKS):
        return True
    return method in ("GET", "HEAD") and (path in PUBLIC_PAGES or path.startswith(PUBLIC_PREFIXES))


class Owners:
    """Which login each Gradio session id and event id belongs to (bounded, LRU)."""

    def __init__(self, capacity: int = MAX_OWNED):
        self.capacity = capacity
        self._owner: OrderedDict[str, str] = OrderedDict()

    def claim(self, key: str, user: str, *, first_use_claims: bool = True) -> bool:
        """Whether `user` may use `key`; an unknown key becomes theirs if `first_use_claims`."""
        owner = self._owner.get(key)
        if owner is None:
            if first_use_claims:
                self.note(key, user)
            return True
        self._owner.move_to_end(key)
        return owner == user

    def note(self, key: str, user: str) -> None:
        self._owner[key] = user
        self._owner.move_to_end(key)
        while len(self._owner) > self.capacity:
            self._owner.popitem(last=False)


def ids_in_path(path: str, method: str) -> Iterator[str]:
    """Session ("s:") and event ("e:") ids in a Gradio route's path."""
    parts = path.removeprefix(API).strip("/").split("/")
    if parts[0] == "heartbeat" and len(parts) > 1:
        yield f"s:{parts[1]}"
    elif parts[0] == "stream" and len(parts) > 1:
        # GET /stream/{session}/{run}/{component}/...; POST /stream/{event}[/close]
        yield f"{'s' if method == 'GET' else 'e'}:{parts[1]}"
    elif parts[0] == "call" and len(parts) > 2 and method == "GET":
        yield f"e:{parts[-1]}"


ID_FIELDS = (("session_hash", "s"), ("event_id", "e"))


def ids_in_json(body: bytes) -> Iterator[str]:
    try:
        data = json.loads(body) if body else None
    except ValueError:
        return  # Gradio answers it with 422
    if isinstance(data, dict):
        for field, kind in ID_FIELDS:
            if isinstance(data.get(field), str):  # Gradio takes strings only (pydantic)
                yield f"{kind}:{data[field]}"


async def ids_in_form(body: bytes, content_type: str) -> list[str]:
    """Ids in a multipart form's fields (Gradio's `component_server` takes one), read with
    the parser Gradio's is copied from (Starlette's, over python-multipart), so both see the
    same fields."""
    from starlette.datastructures import Headers
    from starlette.formparsers import MultiPartException, MultiPartParser

    async def stream() -> AsyncIterator[bytes]:
        yield body

    parser = MultiPartParser(Headers({"content-type": content_type}), stream())
    try:
        form = await parser.parse()
    except MultiPartException:
        return []  # Gradio refuses it too (400)
    try:
        return [f"{kind}:{value}" for field, kind in ID_FIELDS
                for value in form.getlist(field) if isinstance(value, str)]  # fmt: skip
    finally:
        await form.close()


async def ids_in_body(body: bytes, content_type: str) -> list[str]:
    """Session and event ids a request's body names: as JSON (however it is labelled, as
    FastAPI reads a body without a content type), else as a multipart form."""
    if content_type.lower().startswith("multipart/form-data"):
        return await ids_in_form(body, content_type)
    return list(ids_in_json(body))


class LoginWall:
    """Admits a request only with a login (outside the public routes), and a Gradio session or
    event only for the login it belongs to."""

    def __init__(
        self,
        max_age_s: float = LOGIN_MAX_AGE_S,
        owners: Owners | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.max_age_s = max_age_s
        self.owners = owners or Owners()
        self.clock = clock
        self._seen: dict[str, float] = {}
        """When each login token was first used (right after its login)."""

    def login_of(self, scope: Scope, headers: dict[str, str]) -> str | None:
        """The login behind a request; None once its token is older than `max_age_s` (Gradio
        keeps tokens for as long as it runs): then Gradio forgets it too, and its page shows
        the login form again. The seconds it has left go in the scope (`LOGIN_LEFT`): a call
        ends when they run out."""
        found = login_cookie(scope.get("app"), cookie_parser(headers.get("cookie", "")))
        if found is None:
            return None
        tokens, token = found
        now = self.clock()
        if (age := now - self._seen.setdefault(token, now)) <= self.max_age_s:
            scope[LOGIN_LEFT] = self.max_age_s - age
            self._forget_gone(tokens)
            return str(tokens[token])
        tokens.pop(token, None)
        self._seen.pop(token, None)
        return None

    def _forget_gone(self, tokens: dict[str, Any]) -> None:
        # tokens Gradio no longer has (logged out) need no date: memory stays bounded
        if len(self._seen) > 2 * len(tokens) + 100:
            self._seen = {t: at for t, at in self._seen.items() if t in tokens}

    async def admit(
        self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str]
    ) -> Refusal | tuple[Receive, Send]:
        """Why it is refused, or the (receive, send) to go on with."""
        user = self.login_of(scope, headers)
        if user is None:
            if is_public(scope):
                return receive, send
            return Refusal(401, "log in first")
        path, method = scope["path"], scope.get("method", "GET")
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        ids = [f"{kind}:{v}" for field, kind in ID_FIELDS for v in query.get(field, [])]
        if path.startswith(API + "/"):
            ids += ids_in_path(path, method)
            if scope["type"] == "http" and not path.removeprefix(API).startswith(FILE_BODIES):
                try:
                    body = await read_body(receive, JSON_BODY_MAX)
                except TooLarge:
                    return Refusal(413, f"the request is larger than {JSON_BODY_MAX} bytes")
                if body is None:
                    return receive, send  # the client left; nothing to answer
                ids += await ids_in_body(body, headers.get("content-type", ""))
                receive = replay(body, receive)
        # an event id is the app's to hand out: one it never handed out claims nothing
        if not all(self.owners.claim(i, user, first_use_claims=i[0] == "s") for i in ids):
            return Refusal(403, "that session belongs to another login")
        if method == "POST" and path.removeprefix(API).startswith(MINTS_EVENTS):
            send = self._noting_events(send, user)
        return receive, send

    def _noting_events(self, send: Send, user: str) -> Send:
        """A `send` that records the event id in the answer as `user`'s."""
        body = b""

        async def noting(message: Message) -> None:
            nonlocal body
            if message["type"] == "http.response.body":
                body += message.get("body", b"")
                if not message.get("more_body", False) and len(body) < 4096:
                    for key in ids_in_json(body):
                        if key.startswith("e:"):
                            self.owners.note(key, user)
            await send(message)

        return noting
