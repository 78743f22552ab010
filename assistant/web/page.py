"""The page: banner, chat (typed and spoken), Jobs panel, dashboard, and the named API endpoints.

Only wiring lives here; the callbacks are in `ui_turns`, `ui_jobs`, `ui_dash` and `ui_api`.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from dataclasses import replace
from typing import Any

import gradio as gr

from assistant.engine.embedded import EmbeddedEngine
from assistant.runtime import EngineInfo, Runtime, probe
from assistant.settings import Settings
from assistant.web.api import Api, add_api
from assistant.web.dashboard import EngineWatch
from assistant.web.dashboard_panel import REFRESH_S as DASH_REFRESH_S
from assistant.web.dashboard_panel import Dash, add_dashboard
from assistant.web.jobs_panel import Jobs, build_jobs_panel
from assistant.web.turns import Session, SpeechModels, Turns

BANNER_EVERY_S = 10.0
PROBE_CACHE_S = 5.0
# Stop and barge-in also silence what the browser is already playing.
PAUSE_AUDIO_JS = "() => { document.querySelectorAll('audio').forEach((a) => a.pause()); }"


class EngineStatus:
    """Whether the engine answers, probed at most every few seconds for all sessions."""

    def __init__(
        self,
        info: EngineInfo,
        settings: Settings,
        *,
        base_url: str,
        warnings: list[str],
        embedded: EmbeddedEngine | None = None,
        notice: str | None = None,
        speech: SpeechModels | None = None,
    ):
        self.info = info
        self.settings = settings
        self.base_url = base_url
        self.warnings = warnings
        """The engine's own warnings list (it grows while the app runs)."""
        self.embedded = embedded
        self.notice = notice
        self.speech = speech
        self.checked = time.monotonic()
        self._lock = asyncio.Lock()

    async def check(self) -> EngineInfo:
        if self.embedded is not None:
            # our own process: its supervisor knows. No HTTP probe, because llama-cpp-python's
            # server stops a running generation when any request (even GET /models) arrives.
            up = self.embedded.ready.is_set()
            return replace(self.info, reachable=up, error=None if up else "restarting")
        async with self._lock:
            if time.monotonic() - self.checked >= PROBE_CACHE_S:
                s = self.settings
                self.info = await asyncio.to_thread(
                    probe, self.base_url, s.api_key, s.engine_kind, 2.0
                )
                self.checked = time.monotonic()
        return self.info

    async def banner(self) -> str:
        info = await self.check()
        lines = []
        if not info.reachable:
            lines.append(
                f"⚠️ **The engine at `{self.base_url}` is unreachable** ({info.error}). "
                "Chat fails until it is back; this page keeps checking."
            )
        crash = self.embedded.status() if self.embedded is not None else ""
        if crash:
            lines.append(f"⚠️ {crash[0].upper()}{crash[1:]}")
        # e.g. "the engine rejected request priority": said once, shown while it holds
        lines += [f"⚠️ {warning}" for warning in self.warnings]
        if self.speech is not None and self.speech.loading:
            lines.append(
                f"⏳ {self.speech.loading}: voice turns start once they are ready; "
                "typed chat works now."
            )
        if self.notice:
            lines.append(f"Note: {self.notice}")
        if shutil.which("ffmpeg") is None:
            lines.append("Note: ffmpeg is not installed, so replies are spoken once complete.")
        return "\n\n".join(lines)


def build_ui(rt: Runtime, speech: SpeechModels | None = None) -> gr.Blocks:
    """The whole page for one runtime; `speech` is shared with whoever warms the models."""
    settings = rt.settings
    speech = speech or SpeechModels(settings)
    # Gradio encodes a streamed audio output with ffmpeg; without it, speak whole replies
    streamed = shutil.which("ffmpeg") is not None
    # each part of the page gets the services it uses, nothing more
    turns = Turns(rt.turns, rt.conversations, settings, speech, streamed=streamed)
    jobs = Jobs(rt.jobs, settings, speech)
    status = EngineStatus(
        rt.info,
        settings,
        base_url=rt.base_url,
        warnings=rt.engine.warnings,
        embedded=rt.embedded,
        notice=rt.notice,
        speech=speech,
    )
    api = Api(rt.turns, rt.jobs, rt.conversations, settings, speech)
    watch = EngineWatch(rt.base_url, settings.api_key, every_s=DASH_REFRESH_S)
    dash = Dash(rt.conversations, settings, rt.scheduler.depth, watch)
    private: dict[str, Any] = {"api_visibility": "private"}

    with gr.Blocks(title="Assistant") as demo:
        session = gr.State(Session())
        banner = gr.Markdown(elem_id="banner")
        with gr.Row():
            with gr.Column(scale=3):
                chatbot = gr.Chatbot(
                    label="Conversation", height=520, buttons=["copy"], elem_id="chatbot"
                )
                with gr.Row():
                    text = gr.Textbox(
                        placeholder="Type a message, or record one below",
                        show_label=False,
                        scale=5,
                        max_lines=8,
                    )
                    send = gr.Button("Send", variant="primary", scale=1)
                    delegate = gr.Button("Delegate", scale=1)
                    stop = gr.Button("Stop", variant="stop", scale=1)
                with gr.Row():
                    mic = gr.Audio(
                        sources=["microphone", "upload"],
                        type="filepath",
                        label="Speak",
                        scale=3,
                        elem_id="mic",
                    )
                    with gr.Column(scale=2):
                        speak = gr.Checkbox(label="Speak replies", value=True)
                        reply_audio = gr.Audio(
                            label="Reply",
                            streaming=streamed,
                            autoplay=True,
                            interactive=False,
                            buttons=[],
                            elem_id="reply-audio",
                        )
                        notice_audio = gr.Audio(autoplay=True, visible="hidden")
            with gr.Column(scale=2):
                panel = build_jobs_panel()
        add_dashboard(dash, demo)
        add_api(api)

        chat_io = {
            "inputs": [text, chatbot, session, speak],
            "outputs": [chatbot, text, reply_audio],
        }
        replies = [
            send.click(turns.chat, **chat_io, **private),
            text.submit(turns.chat, **chat_io, **private),
            delegate.click(turns.delegate, **chat_io, **private),
        ]
        voice_io = {
            "inputs": [mic, chatbot, session, speak],
            "outputs": [chatbot, reply_audio, mic],
        }
        replies += [
            mic.stop_recording(turns.voice, **voice_io, **private),
            mic.upload(turns.voice, **voice_io, **private),
        ]
        # Stop, or starting to speak again (barge-in), cancels the reply and its speech
        stop.click(None, js=PAUSE_AUDIO_JS, cancels=replies, **private)
        mic.start_recording(None, js=PAUSE_AUDIO_JS, cancels=replies, **private)

        demo.load(status.banner, outputs=banner, **private)
        gr.Timer(BANNER_EVERY_S).tick(
            status.banner, outputs=banner, show_progress="hidden", **private
        )

        p = panel
        refresh_out = [p.table, p.selected, p.view, p.download]
        demo.load(jobs.refresh, inputs=p.selected, outputs=refresh_out, **private)
        p.timer.tick(
            jobs.refresh, inputs=p.selected, outputs=refresh_out, show_progress="hidden",
            queue=False, **private,
        )  # fmt: skip
        p.timer.tick(
            jobs.notices,
            inputs=[chatbot, session, speak],
            outputs=[chatbot, notice_audio],
            show_progress="hidden",
            queue=False,  # timer ticks must not take places in the bounded queue
            **private,
        )
        p.selected.change(jobs.show, inputs=p.selected, outputs=[p.view, p.download], **private)
        p.table.select(jobs.pick, outputs=p.selected, **private)
        p.cancel.click(jobs.cancel, inputs=p.selected, **private)
        p.retry.click(jobs.retry, inputs=p.selected, **private)
    return demo
