"""The sidebar of conversations (new, reopen, rename, delete, export) and the voice settings.

A conversation's Markdown export is made when the person asks for it (the Export button), not
after every turn: writing the whole conversation again at each turn cost a turn's CPU and left
a copy of it per turn in Gradio's cache (issue 49, item 6).

Both are remembered per login in the store (`Conversations.prefs`): the page reopens the
conversation a user was in after a reload, and speaks in the voice and at the rate they chose.
"""

from __future__ import annotations

import re
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr

from assistant.datadir import write_private
from assistant.records import ConversationInfo
from assistant.settings import Settings
from assistant.speech.tts import MAX_RATE, MIN_RATE, voice_choices
from assistant.turns.conversations import UNTITLED, Conversations
from assistant.web.edge.identity import owner_of
from assistant.web.page.turns import Tab, history_of

# a phone-width sidebar covers the whole page: close it at start and once a conversation is
# picked there, so the conversation itself comes first
CLOSE_SIDEBAR_ON_PHONE_JS = """() => {
  if (window.innerWidth > 768) return;
  const bar = document.querySelector('#sidebar');
  if (bar && bar.classList.contains('open')) bar.querySelector('.toggle-button')?.click();
}"""
# the export was just made into the hidden download button: its click downloads it (a
# DownloadButton downloads the file it holds when clicked, so it cannot make the file itself)
DOWNLOAD_EXPORT_JS = """() => {
  setTimeout(() => document.querySelector('#export-file')?.click(), 0);
}"""


@dataclass
class ConversationsPanel:
    """The sidebar's components."""

    new: gr.Button
    listing: gr.Radio
    title: gr.Textbox
    rename: gr.Button
    export: gr.Button
    """Makes the file, then has the browser download it (`export_file`)."""
    export_file: gr.DownloadButton
    """Hidden: holds the file just made, and is clicked by the page to download it."""
    delete: gr.Button
    confirm_row: gr.Row
    confirm: gr.Button
    keep: gr.Button


def build_conversations_panel() -> ConversationsPanel:
    with gr.Sidebar(label="Conversations", open=True, width=300, elem_id="sidebar"):
        new = gr.Button("New conversation", size="sm", variant="primary", elem_id="new-chat")
        listing = gr.Radio(label="Conversations", choices=[], value=None, elem_id="conversations")
        title = gr.Textbox(label="Title", max_lines=1, elem_id="conversation-title")
        with gr.Row():
            rename = gr.Button("Rename", size="sm", elem_id="rename", min_width=60)
            export = gr.Button(
                "Export .md", size="sm", elem_id="export", min_width=60, interactive=False
            )
            export_file = gr.DownloadButton(
                "Export .md", value=None, visible="hidden", elem_id="export-file"
            )
            delete = gr.Button("Delete", size="sm", variant="stop", elem_id="delete", min_width=60)
        with gr.Row(visible=False, elem_id="confirm-delete") as confirm_row:
            gr.Markdown("Delete this conversation and its turns for good?")
            confirm = gr.Button("Delete for good", size="sm", variant="stop", min_width=60)
            keep = gr.Button("Keep it", size="sm", min_width=60)
    return ConversationsPanel(
        new, listing, title, rename, export, export_file, delete, confirm_row, confirm, keep
    )


def label(info: ConversationInfo, now: float | None = None) -> str:
    """A list entry: the title, and when it was last active (the time today, else the day)."""
    now = time.time() if now is None else now
    same_day = time.localtime(now)[:3] == time.localtime(info.updated_at)[:3]
    when = time.strftime("%H:%M" if same_day else "%b %d", time.localtime(info.updated_at))
    title = info.title or UNTITLED
    return f"{title if len(title) <= 48 else title[:47] + '…'} · {when}"


class Library:
    """The sidebar's callbacks; each reads and changes only the caller's own conversations.

    The "view" outputs, in order: chatbot, list, title, the Export button (enabled when there
    is a conversation to export), the delete confirmation.
    """

    def __init__(self, conversations: Conversations, settings: Settings):
        self.conversations = conversations
        self.settings = settings
        self.exports = Path(tempfile.mkdtemp(prefix="assistant-conversations-"))

    def reopen(self, tab: Tab, request: gr.Request) -> tuple[Any, ...]:
        """Page load: reopen the conversation this login was in."""
        owner = owner_of(self.settings, request)
        cid = self.conversations.prefs(owner).get("conversation")
        turns = self.conversations.turns(cid, owner) if isinstance(cid, str) else None
        tab.owner = owner
        tab.conversation_id = cid if turns is not None else None
        return self._view(tab, owner, history_of(turns or []))

    def open(self, cid: str | None, tab: Tab, request: gr.Request) -> tuple[Any, ...]:
        """A click in the list."""
        owner = owner_of(self.settings, request)
        turns = self.conversations.turns(cid, owner) if isinstance(cid, str) else None
        if turns is None:
            gr.Warning("That conversation is gone (deleted in another tab?).")
            return self._view(tab, owner, gr.skip())
        tab.owner, tab.conversation_id = owner, cid
        self.conversations.remember(owner, conversation=cid)
        return self._view(tab, owner, history_of(turns))

    def new(self, tab: Tab, request: gr.Request) -> tuple[Any, ...]:
        """An empty chat; the conversation is stored with its first turn."""
        owner = owner_of(self.settings, request)
        tab.owner, tab.conversation_id = owner, None
        self.conversations.remember(owner, conversation=None)
        return self._view(tab, owner, [])

    def after_turn(self, tab: Tab, request: gr.Request) -> tuple[Any, ...]:
        """After a turn: the list (a new conversation appears, titled), title and export."""
        owner = owner_of(self.settings, request)
        return self._view(tab, owner, gr.skip())[1:4]

    def rename(self, title: str, tab: Tab, request: gr.Request) -> tuple[Any, ...]:
        owner = owner_of(self.settings, request)
        cid = tab.conversation_id
        if not cid or not self.conversations.rename(cid, owner, title or ""):
            gr.Warning("Open a conversation and give it a title first.")
        return self._view(tab, owner, gr.skip())[1:4]

    def ask_delete(self, tab: Tab, request: gr.Request) -> Any:
        owner = owner_of(self.settings, request)
        cid = tab.conversation_id
        if not cid or self.conversations.get(cid, owner) is None:
            gr.Warning("Open a conversation to delete first.")
            return gr.Row(visible=False)
        return gr.Row(visible=True)

    def delete(self, tab: Tab, request: gr.Request) -> tuple[Any, ...]:
        owner = owner_of(self.settings, request)
        cid = tab.conversation_id
        if cid and self.conversations.delete(cid, owner):
            gr.Info("Conversation deleted.")
        tab.conversation_id = None
        self.conversations.remember(owner, conversation=None)
        return self._view(tab, owner, [])

    def _view(self, tab: Tab, owner: str, history: Any) -> tuple[Any, ...]:
        listed = self.conversations.listed(owner)
        cid = tab.conversation_id
        current = next((c for c in listed if c.id == cid), None)
        choices = [(label(c), c.id) for c in listed]
        return (
            history,
            gr.Radio(choices=choices, value=current.id if current else None),
            current.title if current else "",
            gr.Button(interactive=current is not None),
            gr.Row(visible=False),
        )

    def export(self, tab: Tab, request: gr.Request) -> str | None:
        """The Export button: the open conversation as a Markdown file, made now (the page
        then downloads it)."""
        owner = owner_of(self.settings, request)
        cid = tab.conversation_id
        info = self.conversations.get(cid, owner) if cid else None
        text = self.conversations.markdown(info.id, owner) if info else None
        if info is None or text is None:
            gr.Warning("Open a conversation to export first.")
            return None
        slug = re.sub(r"[^a-z0-9]+", "-", (info.title or "conversation").lower()).strip("-")
        path = self.exports / f"{slug[:40] or 'conversation'}-{info.id[:8]}.md"
        write_private(path, text)
        return str(path)


@dataclass
class VoicePanel:
    """Voice settings, under the chat: which voice, how fast, and whether to speak at all."""

    voice: gr.Dropdown
    rate: gr.Slider
    speak: gr.Checkbox
    stamp: gr.Textbox  # the page and the order of a save (VOICE_STAMP_JS), never shown


def build_voice_panel(settings: Settings) -> VoicePanel:
    # The controls start disabled and `load_voice` enables them with the login's own values:
    # a change made before the page's load event answered (a second or more on a busy machine)
    # would otherwise be overwritten by the stored values and then saved back over the choice.
    choices = voice_choices(settings)
    with gr.Accordion("Voice settings", open=False, elem_id="voice-settings"):
        with gr.Row():
            speak = gr.Checkbox(
                label="Speak replies", value=True, elem_id="speak", scale=1, interactive=False
            )
            voice = gr.Dropdown(
                label="Voice",
                choices=choices,
                value=choices[0][1] if choices else None,
                elem_id="voice",
                scale=2,
                interactive=False,
            )
            rate = gr.Slider(
                MIN_RATE, MAX_RATE, value=1.0, step=0.1, label="Speaking rate",
                elem_id="rate", scale=2, interactive=False,
            )  # fmt: skip
            stamp = gr.Textbox(visible="hidden", elem_id="voice-stamp")
    return VoicePanel(voice, rate, speak, stamp)


VOICE_STAMP_JS = (
    "(value, stamp) => { const w = window; "
    "w.assistantVoicePage ??= Array.from(crypto.getRandomValues(new Uint32Array(2))).join(''); "
    "w.assistantVoiceSeq = (w.assistantVoiceSeq || 0) + 1; "
    "return [value, `${w.assistantVoicePage}:${w.assistantVoiceSeq}`]; }"
)
"""A save is stamped with the page it came from and its place among that page's saves: two
saves in flight at once (a change made while Gradio was still sending the one before) may
reach the server, or finish there, in either order, and the older must not win."""

VOICE_FIELDS = ("voice", "rate", "speak")


def wire_voice_settings(
    demo: gr.Blocks, panel: VoicePanel, voices: VoiceSettings, reply_audio: gr.Audio,
    private: dict[str, Any],
) -> None:  # fmt: skip
    """Each control saves its own value and nothing else (on input, not release: a rate typed
    and left with Tab was released with the old value). A save of all three on a change to any
    could carry another control's value from before its own change landed: CI saw the box's
    untick hide the player and yet the store keep the old rate or the old tick for a minute.
    always_last, so a change made while its save is on its way is saved after it with the
    value shown then; stamped, so the newest save of a control wins however the saves land."""
    for field, control in zip(VOICE_FIELDS, (panel.voice, panel.rate, panel.speak), strict=True):
        control.input(
            voices.saver(field), inputs=[control, panel.stamp],
            outputs=reply_audio if field == "speak" else None,
            js=VOICE_STAMP_JS, trigger_mode="always_last", **private,
        )  # fmt: skip
    demo.load(
        voices.load_voice, outputs=[panel.voice, panel.rate, panel.speak, reply_audio], **private
    )


class VoiceSettings:
    """Reads and remembers a login's voice settings."""

    def __init__(self, conversations: Conversations, settings: Settings):
        self.conversations = conversations
        self.settings = settings
        self._newest: dict[tuple[str, str], tuple[str, int]] = {}
        """(owner, control) -> (page, its newest save)"""
        self._saving = threading.Lock()  # saves run in Gradio's threads

    def load_voice(self, request: gr.Request) -> tuple[Any, Any, Any, Any]:
        """Page load: voice, rate, speak (each enabled now that it shows the login's value), and
        the reply player (hidden when speech is off)."""
        prefs = self.conversations.prefs(owner_of(self.settings, request))
        speak = bool(prefs.get("speak", True))
        voice = gr.update(interactive=True)
        if prefs.get("voice"):
            voice["value"] = prefs["voice"]
        return (
            voice,
            gr.update(value=float(prefs.get("rate", 1.0)), interactive=True),
            gr.update(value=speak, interactive=True),
            gr.Audio(visible=speak),
        )

    def saver(self, field: str) -> Callable[[Any, str | None, gr.Request], Any]:
        """The page's handler for one control (`wire_voice_settings`)."""

        def save(value: Any, stamp: str | None, request: gr.Request) -> Any:
            return self.save(field, value, stamp, request)

        return save

    def save(self, field: str, value: Any, stamp: str | None, request: gr.Request | None) -> Any:
        """One control's value as the page shows it; a save older than one already made of the
        same control from the same page is dropped. The player shows only when speech is on."""
        if field == "voice":
            known = {name for _, name in voice_choices(self.settings)}
            if value and value not in known:
                raise gr.Error(f"unknown voice {value!r}")
            value = value or None
        elif field == "rate":
            value = min(max(float(value or 1.0), MIN_RATE), MAX_RATE)
        elif field == "speak":
            value = bool(value)
        else:
            raise ValueError(f"no voice setting {field!r}")
        owner = owner_of(self.settings, request)
        page, _, seq = (stamp or "").rpartition(":")
        order = int(seq) if seq.isdigit() else 0
        with self._saving:
            newest = self._newest.get((owner, field))
            if page and newest is not None and newest[0] == page and order <= newest[1]:
                return gr.update()  # a newer save of this control from this page landed
            if page:
                self._newest[(owner, field)] = (page, order)
            self.conversations.remember(owner, **{field: value})
        return gr.Audio(visible=value) if field == "speak" else None
