"""The HTTP edge: Gradio's launch options that keep its known weak spots shut, login
throttling, and the one middleware that refuses what must not reach a route: unknown hosts
and network requests without a login (`exposure`), requests from other sites, and requests
without the login or for another login's session (`login_wall`).

Gradio's own CORS middleware only decides which response headers to send: a cross-site
`<form>` POST (an upload, a login, a queued call) still reaches the route and runs, and the
browser merely hides the answer. `EdgeGuard` refuses such requests before any route sees them.
README "Security" lists the advisories each option answers.
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from assistant.limits import DailyBytes
from assistant.limits import uploads as uploads_per_day
from assistant.settings import Settings
from assistant.web.edge.asgi import (
    Receive,
    Scope,
    Send,
    TooLarge,
    capped,
    counted,
    header_map,
    read_body,
    refuse,
    replay,
)
from assistant.web.edge.exposure import Exposure, Refusal, is_loopback  # noqa: F401  (re-exported)
from assistant.web.edge.login_wall import LoginWall
from assistant.web.edge.throttle import LoginThrottle, client_network  # noqa: F401  (re-exported)

LOGIN_BODY_MAX = 16 * 1024
"""A login form is two short fields; anything bigger is not a login."""
UPLOAD_PATH = "/gradio_api/upload"
MULTIPART_SLACK = 64 * 1024
"""Room for an upload's multipart framing (boundaries, part headers) over the file itself."""


def launch_options(settings: Settings) -> dict[str, Any]:
    """The security-relevant `Blocks.launch()` arguments."""
    return {
        "share": False,  # no public tunnel, ever
        # SSR proxies requests through a local Node server, which made forged `Host:
        # localhost` requests look local (CVE-2026-134825, affects 6.27-6.31)
        "ssr_mode": False,
        # run history is the feature that advisory reaches; it also keeps past calls
        # (conversations) in the browser's storage
        "run_history": False,
        "mcp_server": False,  # the endpoints are not offered as MCP tools
        "strict_cors": True,  # no "null" origin (CVE-2024-47165)
        "max_file_size": settings.max_upload_bytes,
        "blocked_paths": blocked_paths(settings),
        "auth": list(settings.auth) or None,
    }


def blocked_paths(settings: Settings) -> list[str]:
    """What Gradio's file route must never serve: the data directory (store, logs, models).

    Blocking wins over every path Gradio allows, so it holds even if Gradio's upload folder
    (GRADIO_TEMP_DIR) is set inside the data directory. A data directory that *contains*
    Gradio's working folders (e.g. `/tmp`) cannot be blocked whole without breaking uploads:
    then the store's files are blocked one by one.
    """
    from gradio.utils import get_upload_folder

    data = settings.data_dir.expanduser().resolve()
    working = [Path(get_upload_folder()), Path(tempfile.gettempdir()), Path.cwd() / ".gradio"]
    if any(data == w.resolve() or data in w.resolve().parents for w in working):
        db = settings.db_path.expanduser().resolve()
        return [str(db.with_name(db.name + suffix)) for suffix in ("", "-wal", "-shm")]
    return [str(data)]


def same_origin(origin: str, host: str | None) -> bool:
    """Whether a browser's `Origin` names the host the request was sent to."""
    try:
        o = urlsplit(origin)
        h = urlsplit(f"{o.scheme}://{host}")
        if o.scheme not in ("http", "https") or not o.hostname or not h.hostname:
            return False
        default = 443 if o.scheme == "https" else 80
        return (o.hostname.lower(), o.port or default) == (h.hostname.lower(), h.port or default)
    except ValueError:  # a malformed port or address
        return False


class EdgeGuard:
    """ASGI middleware, in order: refuses unknown hosts and (without a login) anything from
    the network (`exposure`), cross-site requests, and (with a login) requests without it or
    for another login's Gradio session (`login_wall`); throttles failed logins."""

    def __init__(
        self,
        app: Any,
        exposure: Exposure,
        throttle: LoginThrottle | None = None,
        wall: LoginWall | None = None,
        upload_max: int = 0,
        uploads: DailyBytes | None = None,
        on_logout: Callable[[str], Awaitable[None]] | None = None,
        disk: Callable[[str], str | None] | None = None,
    ):
        self.app = app
        self.uploads = uploads
        """Upload bytes per login per day (with a login; `assistant.limits`)."""
        self.disk = disk
        """Why a login may store nothing more (`max_disk_bytes_per_user`): its uploads are
        refused too (each is for a turn it could not take)."""
        self.exposure = exposure
        self.throttle = throttle
        self.wall = wall
        self.upload_max = upload_max
        """An upload request's bytes at most (all its files and their multipart framing)."""
        self.on_logout = on_logout
        """Told the login once Gradio has ended its sessions (its open calls end at once)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = header_map(scope)
        refusal = self.exposure.refusal(scope, headers)
        if refusal is not None:
            await refuse(scope, send, refusal.status, refusal.reason)
            return
        origin = headers.get("origin")
        # Browsers send Origin on every cross-site fetch and form POST; clients that are not
        # browsers (gradio_client, curl) send none and cannot carry a victim's cookies anyway.
        if origin is not None and not any(
            same_origin(origin, h) for h in (headers.get("host"), headers.get("x-forwarded-host"))
        ):
            await refuse(scope, send, 403, "cross-origin request refused")
            return
        # Gradio's GET /logout ends every session of the login; a link or an <img> on another
        # site must not (a GET carries no Origin, but browsers say where it came from)
        if scope["path"].rstrip("/") == "/logout" and headers.get("sec-fetch-site") in (
            "cross-site",
            "same-site",
        ):
            await refuse(scope, send, 403, "a logout from another site refused")
            return
        if self.wall is not None:
            admitted = await self.wall.admit(scope, receive, send, headers)
            if isinstance(admitted, Refusal):
                await refuse(scope, send, admitted.status, admitted.reason)
                return
            receive, send = admitted
        if self.upload_max and scope["type"] == "http" and scope["path"] == UPLOAD_PATH:
            # Gradio caps each file, not the request: one request could carry any number
            declared = headers.get("content-length", "")
            if declared.isdigit() and int(declared) > self.upload_max:
                await refuse(scope, send, 413, f"an upload request is at most "
                             f"{self.upload_max} bytes (max_upload_bytes)")  # fmt: skip
                return
            receive = capped(receive, self.upload_max)
            user = self.wall.login_of(scope, headers) if self.wall is not None else None
            if self.uploads is not None and user is not None:
                why = self.uploads.refusal(user, int(declared) if declared.isdigit() else 0)
                why = why or (self.disk(user) if self.disk is not None else None)
                if why is not None:
                    await refuse(scope, send, 429, why)
                    return
                receive = counted(receive, functools.partial(self.uploads.add, user))
        if (
            self.throttle is not None
            and scope["type"] == "http"
            and scope["method"] == "POST"
            and scope["path"].rstrip("/").endswith("/login")
        ):
            await self._login(scope, receive, send)
            return
        if self.on_logout is not None and scope["path"].rstrip("/") == "/logout":
            # who it was, read before Gradio forgets the token; told once it has
            user = self.wall.login_of(scope, headers) if self.wall is not None else None
            await self.app(scope, receive, send)
            if user is not None:
                await self.on_logout(user)
            return
        await self.app(scope, receive, send)

    async def _login(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.throttle is not None
        try:
            body = await read_body(receive, LOGIN_BODY_MAX)
        except TooLarge:
            await refuse(scope, send, 413, "login form too large")
            return
        if body is None:
            return
        form = parse_qs(body.decode("utf-8", "replace")) if body else {}
        user = (form.get("username") or [""])[0].strip()
        client = (scope.get("client") or ("unknown", 0))[0]
        wait = self.throttle.retry_after(user, client)
        if wait > 0:
            await refuse(
                scope, send, 429, "too many failed logins; try again later",
                {"retry-after": str(int(wait) + 1)},
            )  # fmt: skip
            return

        status = 0

        async def watch(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        await self.app(scope, replay(body, receive), watch)
        if status == 200:
            self.throttle.succeeded(user, client)
        elif 400 <= status < 500:  # Gradio answers a wrong password with 400
            self.throttle.failed(user, client)


def content_security_policy(sources: Iterable[str] = ()) -> str:
    """The page's content security policy: scripts, images, media, styles, fonts and
    connections from the app's own origin only (and the operator's `page_sources`), framed
    only by itself (issue 38: a reply's `![x](http://elsewhere/?d=...)` loaded by itself, and
    another site could frame the page).

    Inline scripts and `eval` stay allowed: Gradio's page is an inline configuration and its
    `js=` handlers are compiled from strings. The microphone's AudioWorklet is a `blob:`, and
    push-to-talk's recording is a `blob:` the page fetches to upload ("Failed to fetch" on a
    phone over HTTPS, and no turn, without it)."""
    extra = "".join(f" {s}" for s in sources)
    return "; ".join(
        (
            "default-src 'self'",
            f"script-src 'self' 'unsafe-inline' 'unsafe-eval' blob:{extra}",
            f"img-src 'self' data: blob:{extra}",
            f"media-src 'self' data: blob:{extra}",
            "style-src 'self' 'unsafe-inline'",
            "font-src 'self' data:",
            # blob: and data: the recorder's own audio, read back with fetch() to upload it
            "connect-src 'self' blob: data:",
            "worker-src 'self' blob:",
            "object-src 'none'",
            "base-uri 'self'",
            "form-action 'self'",
            "frame-ancestors 'self'",
        )
    )


def lax_cookie(header: bytes) -> bytes:
    """A `Set-Cookie` value with `SameSite=Lax`: Gradio sets its login cookie `SameSite=None`
    (for pages framed elsewhere), which sends it with another site's requests and frames."""
    parts = header.split(b";")
    kept = [p for p in parts[1:] if not p.strip().lower().startswith(b"samesite")]
    return b";".join([parts[0], *kept, b" SameSite=Lax"])


class PageHeaders:
    """ASGI middleware: every HTTP response gets the content security policy and the headers
    that keep it out of other sites' frames and guesses, and every cookie `SameSite=Lax`."""

    def __init__(self, app: Any, sources: Iterable[str] = ()):
        self.app = app
        policy = content_security_policy(sources)
        self.headers = [
            (b"content-security-policy", policy.encode()),
            (b"x-frame-options", b"SAMEORIGIN"),
            (b"x-content-type-options", b"nosniff"),
            (b"referrer-policy", b"same-origin"),
        ]
        self.names = {name for name, _ in self.headers}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, lax_cookie(v) if k.lower() == b"set-cookie" else v)
                    for k, v in message.get("headers", [])
                    if k.lower() not in self.names
                ]
                message = {**message, "headers": [*headers, *self.headers]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def edge_middleware(
    settings: Settings,
    certificate_names: Iterable[str] = (),
    on_logout: Callable[[str], Awaitable[None]] | None = None,
    disk: Callable[[str], str | None] | None = None,
) -> list[Any]:
    """The middleware list for the app (FastAPI's `middleware=` argument). `certificate_names`:
    the names the served TLS certificate is for, served like ASSISTANT_ALLOWED_HOSTS;
    `on_logout`: told each login that logged out (its calls end); `disk`: why a login may
    store nothing more (its uploads are refused)."""
    from starlette.middleware import Middleware

    login = bool(settings.auth)
    guard = Middleware(
        EdgeGuard,
        exposure=Exposure.of(settings, certificate_names),
        throttle=LoginThrottle() if login else None,
        wall=LoginWall(settings.login_max_age_s) if login else None,
        upload_max=settings.max_upload_bytes + MULTIPART_SLACK,
        uploads=uploads_per_day(settings) if login else None,
        on_logout=on_logout if login else None,
        disk=disk if login else None,
    )
    # outermost: the refusals get the page's headers too
    return [Middleware(PageHeaders, sources=settings.page_sources), guard]
