"""The page: banner, chat (typed and spoken), Jobs panel, dashboard, and the named API endpoints.

Only wiring lives here; the callbacks are in `ui_turns`, `ui_jobs`, `ui_dash` and `ui_api`.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import gradio as gr

from assistant.engine.embedded import EmbeddedEngine
from assistant.runtime import EngineInfo, Runtime, probe
from assistant.settings import Settings
from assistant.web.page.api import Api, add_api
from assistant.web.page.conversations_panel import (
    CLOSE_SIDEBAR_ON_PHONE_JS,
    DOWNLOAD_EXPORT_JS,
    ConversationsPanel,
    Library,
    VoiceSettings,
    build_conversations_panel,
    build_voice_panel,
    wire_voice_settings,
)
from assistant.web.page.dashboard import EngineWatch
from assistant.web.page.dashboard_panel import REFRESH_S as DASH_REFRESH_S
from assistant.web.page.dashboard_panel import Dash, add_dashboard
from assistant.web.page.jobs_panel import Jobs, build_jobs_panel
from assistant.web.page.turns import SpeechModels, Tab, Turns

BANNER_EVERY_S = 10.0
PROBE_CACHE_S = 5.0
# Stop and barge-in also silence what the browser is already playing.
PAUSE_AUDIO_JS = "() => { document.querySelectorAll('audio').forEach((a) => a.pause()); }"
STOP_JS = (
    "(session) => { document.querySelectorAll('audio').forEach((a) => a.pause()); "
    "return [session]; }"
)
"""Stop: the page's audio pauses at once, before the server stops the turn."""
STAMP_SENT_JS = (
    "(audio, history, session, speak, sent) => [audio, history, session, speak, Date.now()]"
)
"""Push-to-talk: the page stamps the moment it sends a recording (its clock, epoch ms)."""
CACHE_CHECK_S = 3600
"""How often Gradio's cache is swept for files older than `cache_max_age_s`."""
CLICK_KEY_JS = (
    "(text, history, session, speak, key) => [text, history, session, speak, "
    "Array.from(crypto.getRandomValues(new Uint8Array(16)), "
    "(b) => b.toString(16).padStart(2, '0')).join('')]"
)
"""Delegate: a random job key per click (getRandomValues works without a secure context)."""
CALL_HTML = """<div class="call">
<button class="call-button" type="button" aria-pressed="false">Start call</button>
<div class="call-status"><span class="call-state">Start a call</span>
<div class="call-level" aria-hidden="true"><span></span></div></div></div>"""
"""The call control (`handsfree.js` drives it): start/end, its state, the microphone level."""


class EngineStatus:
    """Whether the engine answers, probed at most every few seconds for all sessions."""

    def __init__(
        self,
        info: EngineInfo,
        settings: Settings,
        *,
        base_url: str,
        warnings: list[str],
        embedded: tuple[EmbeddedEngine, ...] = (),
        notice: str | None = None,
        speech: SpeechModels | None = None,
    ):
        self.info = info
        self.settings = settings
        self.base_url = base_url
        self.warnings = warnings
        """The engine's own warnings list (it grows while the app runs)."""
        self.embedded = embedded
        """The embedded engine's processes (one per lane), when the app runs them."""
        self.notice = notice
        self.speech = speech
        self.checked = time.monotonic()
        self._lock = asyncio.Lock()

    async def check(self) -> EngineInfo:
        if self.embedded:
            # our own processes: their supervisors know. No HTTP probe, because llama-cpp-python's
            # server stops a running generation when any request (even GET /models) arrives.
            # the chat lane's (the first): the deep lane's restart is said by its crash line,
            # and chat goes on meanwhile
            up = self.embedded[0].ready.is_set()
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
        for engine in self.embedded:
            if crash := engine.status():
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


PAGE_CSS = """
/* the conversation first: the composer's text box takes the row, its buttons stay small */
#composer { align-items: end; }
#composer > button { flex-grow: 0; white-space: nowrap; }
@media (max-width: 640px) {
  #composer { flex-wrap: wrap; }
  /* the text box sits in Gradio's form wrapper: that is the row's child */
  #composer > *:first-child { flex: 1 1 100% !important; }
  #composer > button { flex: 1 1 0 !important; }
}
/* microphone.js: why this page cannot use the microphone (shown only then) */
#mic-notice:not(.mic-notice-on) { display: none; }
#mic-notice.mic-notice-on { padding: 0.6em 0.8em; border-radius: var(--radius-md);
  border: 1px solid var(--color-accent); background: var(--background-fill-secondary); }
#mic .record-button.mic-unusable { opacity: 0.5; cursor: not-allowed; }
/* the call: one prominent control, its state and the microphone's level */
#handsfree .call { display: flex; align-items: center; gap: 0.75em; flex-wrap: wrap; }
#handsfree .call-button { font-size: 1.1em; padding: 0.6em 1.2em; border-radius: 2em;
  border: none; background: var(--button-primary-background-fill);
  color: var(--button-primary-text-color); cursor: pointer; min-width: 11em; }
#handsfree:not([data-state="off"]):not([data-state=""])[data-state] .call-button {
  background: var(--button-cancel-background-fill, #d33); }
#handsfree .call-status { display: flex; flex-direction: column; gap: 0.3em; min-width: 8em; }
#handsfree .call-level { height: 6px; width: 8em; background: var(--border-color-primary);
  border-radius: 3px; overflow: hidden; }
#handsfree .call-level > span { display: block; height: 100%; width: 0;
  background: var(--color-accent); transition: width 80ms linear; }
/* the state as a coloured dot, not an emoji: it shows in fonts without emoji (a phone's) */
#handsfree .call-state::before { content: ""; display: inline-block; width: 0.6em;
  height: 0.6em; border-radius: 50%; margin-right: 0.4em; vertical-align: middle;
  background: var(--border-color-primary); }
#handsfree[data-state="listening"] .call-state::before { background: #2a2; }
#handsfree[data-state="hearing"] .call-state::before { background: var(--color-accent); }
#handsfree[data-state="thinking"] .call-state::before { background: #d90; }
#handsfree[data-state="speaking"] .call-state::before { background: #27d; }
@media (max-width: 640px) {
  #handsfree-row { flex-direction: column; }
  #handsfree .call-button { flex: 1 1 100%; }
  /* a shorter conversation on a phone: the call stays on the first screen under a banner */
  #chatbot { height: 46vh !important; max-height: 46vh !important; }
}
/* the Jobs panel: a table at desk widths, a list of cards on a phone */
#jobs-list { display: none; }
.jobs-list { list-style: none; padding: 0; margin: 0; }
.jobs-list li { padding: 0.5em 0; border-bottom: 1px solid var(--border-color-primary); }
.jobs-list span { font-size: 0.9em; opacity: 0.8; }
#jobs-table th, #jobs-table td { word-break: normal; overflow-wrap: normal; }
@media (max-width: 640px) {
  #jobs-table { display: none !important; }
  #jobs-list { display: block !important; }
}
"""


# Added to a phone's home screen, the page opens full screen: Gradio serves a web app manifest
# (display: standalone) on every page; iOS reads these tags instead
HOME_SCREEN_TAGS = (
    '<meta name="mobile-web-app-capable" content="yes">'
    '<meta name="apple-mobile-web-app-capable" content="yes">'
    '<meta name="apple-mobile-web-app-title" content="Assistant">'
)
PAGE_HEAD = HOME_SCREEN_TAGS + "".join(
    f"<script>{(Path(__file__).parent / name).read_text()}</script>"
    for name in ("microphone.js", "handsfree.js")
)
"""The page's scripts: whether the microphone can work here (`microphone.js`: it says why not),
and hands-free (`handsfree.js`), loaded with the page."""
MIC_CHECK_JS = "() => window.assistantMicrophone.check()"


def build_ui(rt: Runtime, speech: SpeechModels | None = None) -> gr.Blocks:
    """The whole page for one runtime; `speech` is shared with whoever warms the models and
    with the `/listen` route that hears a call."""
    settings = rt.settings
    speech = speech or SpeechModels(settings)
    # Gradio encodes a streamed audio output with ffmpeg; without it, speak whole replies
    streamed = shutil.which("ffmpeg") is not None
    # each part of the page gets the services it uses, nothing more
    turns = Turns(rt.sessions, settings, speech, streamed=streamed)
    jobs = Jobs(rt.jobs, settings, speech, prefs=rt.conversations.prefs, calls=rt.calls)
    library = Library(rt.conversations, settings)
    voices = VoiceSettings(rt.conversations, settings)
    status = EngineStatus(
        rt.info,
        settings,
        base_url=rt.base_url,
        warnings=rt.engine.warnings,
        embedded=tuple(rt.embedded_lanes.values()),
        notice=rt.notice,
        speech=speech,
    )
    api = Api(rt.sessions, rt.jobs, settings, speech)
    watch = EngineWatch(rt.base_url, settings.api_key, every_s=DASH_REFRESH_S)
    dash = Dash(rt.conversations, settings, rt.scheduler.depth, watch, rt.loop_lag)
    private: dict[str, Any] = {"api_visibility": "private"}

    # Gradio's cache otherwise grows for as long as the app runs (issue 26)
    cache = (min(CACHE_CHECK_S, settings.cache_max_age_s), settings.cache_max_age_s)
    with gr.Blocks(title="Assistant", delete_cache=cache) as demo:
        session = gr.State(Tab())
        side = build_conversations_panel()
        banner = gr.Markdown(elem_id="banner")
        with gr.Tabs(elem_id="tabs"):
            with gr.Tab("Chat", id="chat", elem_id="tab-chat"):
                chatbot = gr.Chatbot(
                    label="Conversation", height="58vh", buttons=["copy"], elem_id="chatbot"
                )
                with gr.Row(elem_id="composer"):
                    text = gr.Textbox(
                        placeholder="Type a message, or record one below",
                        show_label=False,
                        scale=1,
                        min_width=220,
                        max_lines=8,
                        elem_id="message",
                    )
                    send = gr.Button("Send", variant="primary", scale=0, min_width=90, size="md")
                    delegate = gr.Button("Delegate", scale=0, min_width=90, size="md")
                    stop = gr.Button(
                        "Stop", variant="stop", scale=0, min_width=90, size="md",
                        elem_id="stop-button",
                    )  # fmt: skip
                with gr.Row(elem_id="handsfree-row"):
                    # the call: one control with its state; the session on the server runs it.
                    # Right under the composer, so a phone shows it on the first screen
                    gr.HTML(CALL_HTML, elem_id="handsfree")
                    gr.HTML("", elem_id="handsfree-live")
                with gr.Row():
                    mic = gr.Audio(
                        sources=["microphone", "upload"],
                        type="filepath",
                        label="Speak",
                        scale=3,
                        min_width=220,
                        elem_id="mic",
                    )
                    reply_audio = gr.Audio(
                        label="Reply",
                        streaming=streamed,
                        autoplay=True,
                        interactive=False,
                        buttons=[],
                        scale=2,
                        min_width=220,
                        elem_id="reply-audio",
                    )
                # filled by microphone.js when this page cannot use the microphone, and why
                gr.HTML("", elem_id="mic-notice", padding=False)
                # a call's turn is stored by the server; this reloads the chat from the store
                call_refresh = gr.Button("refresh", visible="hidden", elem_id="call-refresh")
                sent_at = gr.Number(visible="hidden", elem_id="voice-sent-at")
                job_key = gr.Textbox(visible="hidden", elem_id="delegate-key")
                notice_audio = gr.Audio(autoplay=True, visible="hidden")
                voice = build_voice_panel(settings)
            with gr.Tab("Jobs", id="jobs", elem_id="tab-jobs"):
                panel = build_jobs_panel()
            with gr.Tab("Dashboard", id="dashboard", elem_id="tab-dashboard"):
                add_dashboard(dash, demo)
        add_api(api)

        speak = voice.speak
        chat_io = {
            "inputs": [text, chatbot, session, speak],
            "outputs": [chatbot, text, reply_audio],
        }
        replies = [
            send.click(turns.chat, **chat_io, **private),
            text.submit(turns.chat, **chat_io, **private),
            # a key per click: a click sent twice (a reconnecting page) makes one job
            delegate.click(
                turns.delegate,
                inputs=[*chat_io["inputs"], job_key],
                outputs=chat_io["outputs"],
                js=CLICK_KEY_JS,
                **private,
            ),
        ]
        voice_io = {
            "inputs": [mic, chatbot, session, speak, sent_at],
            "outputs": [chatbot, reply_audio, mic],
            "js": STAMP_SENT_JS,  # the recording's latency counts from when the page sent it
        }
        replies += [
            mic.stop_recording(turns.voice, **voice_io, **private),
            mic.upload(turns.voice, **voice_io, **private),
        ]
        call_refresh.click(
            library.reopen, inputs=session,
            outputs=[chatbot, side.listing, side.title, side.export, side.confirm_row],
            show_progress="hidden", **private,
        )  # fmt: skip
        demo.load(None, js=MIC_CHECK_JS, **private)
        # Stop, or starting to speak again (barge-in), cancels the reply and its speech
        # Stop: the session stops the turn (and a call's reply, so the page sends no stop of
        # its own on the call's socket); `cancels` ends the page's callbacks waiting on it.
        # Off the queue: a full queue must not hold a Stop back.
        stop.click(turns.stop, inputs=[session], js=STOP_JS, cancels=replies,
                   queue=False, **private)  # fmt: skip
        mic.start_recording(None, js=PAUSE_AUDIO_JS, cancels=replies, **private)
        wire_conversations(demo, side, library, session, chatbot, replies)
        wire_voice_settings(demo, voice, voices, reply_audio, private)

        demo.load(status.banner, outputs=banner, **private)
        gr.Timer(BANNER_EVERY_S).tick(
            status.banner, outputs=banner, show_progress="hidden", **private
        )

        p = panel
        refresh_out = [p.table, p.listing, p.selected, p.view, p.download]
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


def wire_conversations(
    demo: gr.Blocks,
    side: ConversationsPanel,
    library: Library,
    session: gr.State,
    chatbot: gr.Chatbot,
    replies: list[Any],
) -> None:
    """The sidebar: switching conversation stops the reply in progress (its partial turn is
    kept), the list follows every turn, and a reload reopens the last conversation."""
    private: dict[str, Any] = {"api_visibility": "private"}
    view = [chatbot, side.listing, side.title, side.export, side.confirm_row]
    summary = [side.listing, side.title, side.export]
    for trigger, handler, inputs in (
        (side.listing.input, library.open, [side.listing, session]),
        (side.new.click, library.new, [session]),
        (chatbot.clear, library.new, [session]),  # the chat's own bin: a new conversation
    ):
        trigger(None, js=PAUSE_AUDIO_JS, **private)
        trigger(handler, inputs=inputs, outputs=view, cancels=replies, **private).then(
            None, js=CLOSE_SIDEBAR_ON_PHONE_JS, **private
        )
    side.rename.click(library.rename, inputs=[side.title, session], outputs=summary, **private)
    side.title.submit(library.rename, inputs=[side.title, session], outputs=summary, **private)
    side.delete.click(library.ask_delete, inputs=session, outputs=side.confirm_row, **private)
    side.keep.click(lambda: gr.Row(visible=False), outputs=side.confirm_row, **private)
    side.confirm.click(library.delete, inputs=session, outputs=view, cancels=replies, **private)
    side.export.click(library.export, inputs=session, outputs=side.export_file, **private).success(
        None, js=DOWNLOAD_EXPORT_JS, **private
    )
    for reply in replies:
        reply.then(library.after_turn, inputs=session, outputs=summary, **private)
    demo.load(library.reopen, inputs=session, outputs=view, **private).then(
        None, js=CLOSE_SIDEBAR_ON_PHONE_JS, **private
    )
