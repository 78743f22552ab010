"""The page's dashboard: per-lane latency plots and the engine panel, refreshed by a timer.

The numbers come from `assistant.web.page.dashboard`; this module only places and wires them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gradio as gr

from assistant.loop_lag import LoopLag
from assistant.settings import Settings
from assistant.turns.conversations import Conversations
from assistant.web.edge.exposure import FORWARDED, is_loopback
from assistant.web.edge.identity import owner_of
from assistant.web.page.dashboard import EngineWatch, bar_order, engine_markdown, latency_frame

REFRESH_S = 5.0
"""How often an open page refreshes the plots and the engine panel (the engine is read at
most this often, for all pages together)."""
RECENT_TURNS = 200
PRIVATE: dict[str, Any] = {"api_visibility": "private"}


@dataclass
class DashPanel:
    """The dashboard's components."""

    plots: dict[str, gr.BarPlot]
    engine: gr.Markdown
    timer: gr.Timer


def _plot(lane: str) -> gr.BarPlot:
    return gr.BarPlot(
        x="bar",
        y="ms",
        color="stat",
        color_title="",
        title=f"{lane} lane",
        x_title="stage",
        y_title="ms",
        color_map={"p50": "#4c78a8", "p95": "#f58518"},
        sort=bar_order(),
        tooltip=["stage", "stat", "ms", "turns"],
        x_label_angle=-30,
        height=330,
        show_label=False,
        elem_id=f"latency-{lane}",
    )


def build_dash_panel() -> DashPanel:
    with gr.Row(equal_height=False, elem_id="dashboard"):
        with gr.Column(scale=3):
            gr.Markdown("### Latency (p50 / p95 over your recent turns)")
            with gr.Row():
                plots = {lane: _plot(lane) for lane in ("chat", "deep")}
        with gr.Column(scale=2):
            gr.Markdown("### Engine")
            engine = gr.Markdown("Reading the engine's metrics…", elem_id="engine-panel")
    return DashPanel(plots, engine, gr.Timer(REFRESH_S))


ADMINS_ONLY = (
    "The engine's details (its address, queue and cache) are shown on this machine and to an "
    "admin login (`ASSISTANT_ADMINS`; by default the first login in `ASSISTANT_AUTH`)."
)


def sees_engine(settings: Settings, request: gr.Request | None) -> bool:
    """Whether this page is shown the engine's details (its URL, the problem reading it, its
    queue): without a login (only this machine is served then), to an admin login, or to a
    client on this machine that no proxy forwarded (issue 38: every login saw the URL)."""
    if not settings.auth:
        return True
    if request is None:
        return False
    if owner_of(settings, request) in settings.admin_logins:
        return True
    headers = {k.lower() for k in (request.headers or {})}
    peer = request.client.host if request.client else ""
    return bool(peer) and is_loopback(peer) and not any(h in headers for h in FORWARDED)


class Dash:
    """The dashboard's callbacks."""

    def __init__(
        self,
        conversations: Conversations,
        settings: Settings,
        depth: Callable[[], dict[str, int]],
        watch: EngineWatch,
        loop_lag: LoopLag | None = None,
    ):
        self.loop_lag = loop_lag
        self.conversations = conversations
        self.settings = settings
        self.depth = depth
        self.watch = watch

    async def latency(self, request: gr.Request) -> tuple[Any, ...]:
        """The caller's recent turns as one plot per lane."""
        owner = owner_of(self.settings, request)
        rows = await asyncio.to_thread(self.conversations.recent_timings, owner, RECENT_TURNS)
        frame = latency_frame(rows)
        out = []
        for lane in ("chat", "deep"):
            part = frame[frame["lane"] == lane]
            n = int(part["turns"].max()) if len(part) else 0
            caption = f"{n} turn{'s' * (n != 1)} measured" if n else "no turns yet"
            # None, not an empty frame: the page's plot stays blank after an empty frame
            out.append(gr.BarPlot(value=part if n else None, caption=caption))
        return tuple(out)

    async def engine(self, request: gr.Request) -> str:
        if not sees_engine(self.settings, request):
            return ADMINS_ONLY
        reading = await self.watch.reading()
        loop = self.loop_lag.summary(time.monotonic() - 60) if self.loop_lag else None
        return engine_markdown(reading, self.depth(), loop)


def add_dashboard(dash: Dash, demo: gr.Blocks) -> Dash:
    """Place the dashboard in the current Blocks and wire its refreshes."""
    panel = build_dash_panel()
    plots = [panel.plots["chat"], panel.plots["deep"]]
    quiet: dict[str, Any] = {"show_progress": "hidden", "queue": False, **PRIVATE}
    for event in (demo.load, panel.timer.tick):
        # ticks stay out of the bounded queue, like the Jobs panel's
        event(dash.latency, outputs=plots, **quiet)
        event(dash.engine, outputs=panel.engine, **quiet)
    return dash
