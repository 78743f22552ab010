"""`GET /metrics` on the app's own server: its `AppMetrics` in Prometheus text format.

Without a login the app only listens on loopback (`assistant serve` refuses otherwise), so
the route is as open as the page. With `ASSISTANT_AUTH` set, it answers loopback clients
only, and not requests a reverse proxy forwarded: a scraper runs beside the app, Gradio's
login is a cookie flow a scraper cannot follow, and a second password check here would be a
way around the login's throttling.
"""

from __future__ import annotations

import asyncio
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from assistant.runtime import Runtime
from assistant.web.edge.exposure import FORWARDED, is_loopback


def scrape_allowed(request: Request, auth_on: bool) -> bool:
    if not auth_on:
        return True
    peer = request.client.host if request.client else ""
    return is_loopback(peer) and not any(h in request.headers for h in FORWARDED)


def add_metrics_route(app: Any, rt: Runtime) -> None:
    """Register `/metrics` on the app's FastAPI server."""
    auth_on = bool(rt.settings.auth)

    async def metrics(request: Request) -> Response:
        if not scrape_allowed(request, auth_on):
            return PlainTextResponse("metrics are served to loopback clients only\n", 403)
        # the job counts are a SQLite query: off the event loop
        body = await asyncio.to_thread(rt.metrics.render)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    app.add_api_route("/metrics", metrics, methods=["GET"], include_in_schema=False)
