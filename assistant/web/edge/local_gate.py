"""Who a `/v1` request is when it comes from the app's own command line (`assistant.app_client`).

The CLI reads this start's secret from the discovery file in the data directory (mode 0600:
only the app's own user, who can read the store beside it anyway) and sends it in
`X-Assistant-Local`. The app takes it as the machine's own user, "local" (the CLI's owner
in-process too), from a loopback peer only and never from a request a proxy forwarded: from
another machine it is refused whatever ASSISTANT_AUTH says, and it is never one of the logins.
"""

from __future__ import annotations

import hmac

from starlette.requests import Request

from assistant.app_client import LOCAL_OWNER, SECRET_HEADER
from assistant.web.edge.exposure import FORWARDED, is_loopback
from assistant.web.openai.wire import ApiError, Gate


class LocalGate:
    """The app's own command line (`assistant.app_client`): a request carrying this start's
    secret (`X-Assistant-Local`, from the discovery file only the app's user can read) is the
    machine's own user, "local", as the CLI is in-process. Taken from a loopback peer only and
    never from a request a proxy forwarded, so it opens nothing to a remote client whatever
    ASSISTANT_AUTH says; a wrong secret is refused and throttled like a wrong password. A
    request without it goes to the login's gate as before."""

    def __init__(self, gate: Gate, secret: str):
        self.gate, self.secret = gate, secret
        self.throttle = gate.throttle

    def owner(self, request: Request) -> str:
        given = request.headers.get(SECRET_HEADER)
        if given is None:
            return self.gate.owner(request)
        peer = request.client.host if request.client else ""
        if not is_loopback(peer) or any(h in request.headers for h in FORWARDED):
            raise ApiError(403, "the local secret is taken from this machine's loopback only",
                           "permission_error", "loopback_only")  # fmt: skip
        wait = self.throttle.retry_after(LOCAL_OWNER, peer)
        if wait > 0:
            raise ApiError(429, "too many failed logins; try again later", "rate_limit_error",
                           "login_throttled", retry_after=wait + 1)  # fmt: skip
        if not hmac.compare_digest(given.encode(), self.secret.encode()):
            self.throttle.failed(LOCAL_OWNER, peer)
            raise ApiError(401, "wrong local secret (from another start of the app?)",
                           "invalid_request_error", "invalid_api_key")  # fmt: skip
        return LOCAL_OWNER
