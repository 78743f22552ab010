"""Who is asking: one rule for every way in.

Without ASSISTANT_AUTH everyone is the machine's own user, `LOCAL` (loopback only, for the
API); with it, one of the logins, or refused. Each way in carries its credential differently,
read here and nowhere else: the page's Gradio login (`owner_of`), the same login's cookie on
the call's WebSocket (`socket_owner`), `Authorization: Bearer USER:PASSWORD` on `/v1`
(`Gate`), and the app's own command line's secret (`LocalGate`: `X-Assistant-Local`, from
the discovery file only the app's user can read, from a loopback peer only, never through a
proxy).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.websockets import WebSocket

from assistant.app_client import LOCAL_OWNER as LOCAL
from assistant.app_client import SECRET_HEADER
from assistant.settings import Settings
from assistant.web.edge.exposure import FORWARDED, is_loopback
from assistant.web.edge.throttle import LoginThrottle
from assistant.web.openai.wire import ApiError

if TYPE_CHECKING:
    import gradio as gr


def owner_of(settings: Settings, request: gr.Request | None) -> str:
    """With a login, the user name; without, everyone is LOCAL."""
    if settings.auth and request is not None and request.username:
        return str(request.username)
    return LOCAL


def login_cookie(app: Any, cookies: Mapping[str, str]) -> tuple[dict[str, Any], str] | None:
    """Gradio's table of login tokens and the login cookie's token in it (None: no login)."""
    cookie_id, tokens = getattr(app, "cookie_id", None), getattr(app, "tokens", None)
    if cookie_id is None or not isinstance(tokens, dict):
        return None
    token = cookies.get(f"access-token-{cookie_id}") or cookies.get(
        f"access-token-unsecure-{cookie_id}"
    )
    return (tokens, token) if token and tokens.get(token) else None


LOGIN_LEFT = "assistant.login_left_s"
"""The ASGI scope's key for the seconds the request's login has left (`LoginWall` sets it)."""


def login_expiry(ws: WebSocket) -> float | None:
    """When (`time.monotonic`) the socket's login expires: `login_max_age_s` after its first
    use, as the login wall reckons it on the socket's way in. None: it does not (no logins).
    Expiry is the only way a login's token goes other than a logout (Gradio's `/logout`,
    which the app hears as an event), so a call waits for this time, not polls the token."""
    left = ws.scope.get(LOGIN_LEFT)
    return None if left is None else time.monotonic() + float(left)


def socket_owner(app: Any, ws: WebSocket, settings: Settings) -> str | None:
    """The login behind a WebSocket (the page's own login cookie), LOCAL without logins;
    None: no login (logged out, expired)."""
    if not settings.auth:
        return LOCAL
    found = login_cookie(app, ws.cookies)
    return str(found[0][found[1]]) if found else None


class Gate:
    """Who a request is from: a login's name, LOCAL without logins, or an ApiError."""

    def __init__(self, settings: Settings, throttle: LoginThrottle | None = None):
        self.auth = settings.auth
        self.throttle = throttle or LoginThrottle()

    def owner(self, request: Request) -> str:
        peer = request.client.host if request.client else ""
        if not self.auth:
            if is_loopback(peer) and not any(h in request.headers for h in FORWARDED):
                return LOCAL
            raise ApiError(403, "without ASSISTANT_AUTH the API answers loopback clients only",
                           "permission_error", "loopback_only")  # fmt: skip
        scheme, _, credential = request.headers.get("authorization", "").partition(" ")
        user, sep, password = credential.strip().partition(":")
        if scheme.lower() != "bearer" or not sep:
            raise ApiError(401, "send Authorization: Bearer USER:PASSWORD of one of the logins",
                           "invalid_request_error", "invalid_api_key")  # fmt: skip
        wait = self.throttle.retry_after(user, peer)
        if wait > 0:
            raise ApiError(429, "too many failed logins; try again later", "rate_limit_error",
                           "login_throttled", retry_after=wait + 1)  # fmt: skip
        for name, secret in self.auth:
            # both compared whole, in constant time: no early exit tells what matched
            if hmac.compare_digest(name.encode(), user.encode()) & hmac.compare_digest(
                secret.encode(), password.encode()
            ):
                self.throttle.succeeded(user, peer)
                return name
        self.throttle.failed(user, peer)
        raise ApiError(401, "wrong user or password", "invalid_request_error", "invalid_api_key")


class LocalGate:
    """The app's own command line (`assistant.app_client`): a request carrying this start's
    secret (`X-Assistant-Local`, from the discovery file only the app's user can read) is the
    machine's own user, "local", as the CLI is in-process. Taken from a loopback peer only and
    never from a request a proxy forwarded, so it opens nothing to a remote client whatever
    ASSISTANT_AUTH says. A request without it goes to the login's gate as before.

    A wrong secret is refused and not counted (issue 49): counted per address with the
    logins, five wrong ones from any local process locked the right one out for a minute
    (and twenty, every login from loopback). Nothing is there to guess: the secret is 256
    random bits, compared in constant time (as digests, so not even its length shows)."""

    def __init__(self, gate: Gate, secret: str):
        self.gate = gate
        self._digest = hashlib.sha256(secret.encode()).digest()

    def owner(self, request: Request) -> str:
        given = request.headers.get(SECRET_HEADER)
        if given is None:
            return self.gate.owner(request)
        peer = request.client.host if request.client else ""
        if not is_loopback(peer) or any(h in request.headers for h in FORWARDED):
            raise ApiError(403, "the local secret is taken from this machine's loopback only",
                           "permission_error", "loopback_only")  # fmt: skip
        digest = hashlib.sha256(given.encode()).digest()
        if not hmac.compare_digest(digest, self._digest):
            raise ApiError(401, "wrong local secret (from another start of the app?)",
                           "invalid_request_error", "invalid_api_key")  # fmt: skip
        return LOCAL
