"""The page's chat and voice turns: Gradio callbacks that stream a turn into the Chatbot.

Callbacks stay short: the turn is the conversation's session's (`assistant.session`); this
module only turns the page's inputs into its requests, and its events into chat messages and
audio chunks.
"""

from __future__ import annotations

import contextlib
import html
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import gradio as gr

from assistant.errors import AssistantError
from assistant.records import STAGES, StoredTurn, TurnEvent, TurnResult, now_ms
from assistant.session import Ask, Session, Sessions
from assistant.session.voice import chosen_voice
from assistant.settings import Settings
from assistant.speech.audio import wav_bytes
from assistant.speech.models import SpeechModels
from assistant.web.edge.identity import owner_of

log = logging.getLogger(__name__)

UI_EVERY_S = 0.05
"""Text updates are sent to the browser at most this often (audio goes out at once)."""
WINDOW_NOTICE = "earlier turns are no longer in the model's view (its context window is full)"
"""Under the conversation's first reply whose request left earlier turns out (stored, shown)."""


@dataclass
class Tab:
    """One browser tab: the conversation it shows, and job notices held while a turn runs."""

    conversation_id: str | None = None
    owner: str | None = None
    busy: bool = False
    turns_ended: int = 0
    """Counts finished turns: a job notice tick tells from it that its chat value went stale."""
    pending: list[dict[str, Any]] = field(default_factory=list)


def session_of(sessions: Sessions, tab: Tab, owner: str) -> Session:
    """The tab's conversation's session: started on its first turn (and again if the login
    changed, or it was deleted meanwhile); the login reopens it after a reload."""
    cid = tab.conversation_id if tab.owner == owner else None
    session = sessions.of(owner, cid, remember_new=True)
    tab.conversation_id, tab.owner = session.conversation_id, owner
    return session


def history_of(turns: list[StoredTurn]) -> list[dict[str, Any]]:
    """A stored conversation as Chatbot messages, exactly as its turns were shown live."""
    history: list[dict[str, Any]] = []
    said = False  # earlier turns out of the model's view: said at the first turn that left some
    for t in turns:
        t.result.window_notice = t.result.dropped > 0 and not said
        said = said or t.result.dropped > 0
        view = TurnView(history, t.user_text)
        if t.source == "voice":
            view.apply(TurnEvent("transcript", text=t.user_text))
        if t.result.reasoning:
            view.apply(TurnEvent("reasoning", text=t.result.reasoning))
        view.finish(t.result)
        history = view.history
    return history


def meta_line(result: TurnResult) -> str:
    """The small line under a reply: lane, reason and the latency record."""
    parts = [result.lane, result.reason]
    parts += [f"{STAGES.get(k, k)} {v:.0f} ms" for k, v in result.timings.as_dict().items()]
    if result.tokens_per_s:
        parts.append(f"{result.tokens_per_s:.0f} tok/s")
    if result.job_id:
        parts.append(f"job {result.job_id}")
    if result.offer:  # a "yes" next turn hands this task to the deep lane (issue 30)
        parts.append(f"offer: {result.offer} (say yes to hand it off)")
    if result.window_notice:  # once per conversation (issue 48)
        parts.append(WINDOW_NOTICE)
    return "<sub>" + " · ".join(html.escape(str(p)) for p in parts) + "</sub>"


class TurnView:
    """The Chatbot messages of one turn, updated in place as the turn streams."""

    def __init__(self, history: list[dict[str, Any]] | None, user_text: str):
        self.history: list[dict[str, Any]] = list(history or [])
        self.user = {"role": "user", "content": user_text}
        self.history.append(self.user)
        self.thought: dict[str, Any] | None = None
        self.answer: dict[str, Any] | None = None
        self.text = ""

    def apply(self, u: TurnEvent) -> None:
        if u.kind == "transcript":
            self.user["content"] = f"🎤 {u.text}" if u.text.strip() else "🎤 (nothing heard)"
        elif u.kind == "reasoning":
            if self.thought is None:
                # folded reasoning: a Chatbot "thought" message, shown but never spoken
                meta = {"title": "Reasoning", "status": "pending"}
                self.thought = {"role": "assistant", "content": "", "metadata": meta}
                self.history.append(self.thought)
            self.thought["content"] += u.text
        elif u.kind == "content":
            self.text += u.text
            self._answer(self.text)
        elif u.kind == "error":
            self._answer((self.text + "\n\n" if self.text else "") + f"⚠️ {u.text}")
        elif u.kind == "done" and u.result is not None:
            self.finish(u.result)

    def finish(self, result: TurnResult) -> None:
        if self.thought is not None:
            self.thought["metadata"]["status"] = "done"
        body = result.reply or ""
        if result.error:
            body = (body + "\n\n" if body else "") + f"⚠️ {result.error}"
        self._answer(f"{body}\n\n{meta_line(result)}")

    def _answer(self, text: str) -> None:
        if self.answer is None:
            self.answer = {"role": "assistant", "content": ""}
            self.history.append(self.answer)
        self.answer["content"] = text


async def voice_of(speech: SpeechModels, prefs: dict[str, Any], owner: str | None = None) -> Any:
    """The login's voice (`session.voice`, the one place it is chosen; in `owner`'s share of
    the pools), its warning shown; the page's own "Speak replies" box says whether to speak,
    with each turn."""
    chosen = await chosen_voice(speech, prefs, honour_off=False, owner=owner)
    if chosen.warning:
        gr.Warning(chosen.warning)
    return chosen.tts


MAX_CLOCK_GAP_MS = 60_000.0
"""A page clock further off than this from the server's is not trusted (another device)."""


def waited_ms(sent_at: float | None) -> float:
    """How long ago the page sent a recording, by its stamp; 0 when it has none or its clock
    disagrees (ahead of the server's, or behind by more than `MAX_CLOCK_GAP_MS`)."""
    if not sent_at:
        return 0.0
    waited = time.time() * 1000 - float(sent_at)
    return waited if 0 <= waited <= MAX_CLOCK_GAP_MS else 0.0


class Turns:
    """The chat and voice callbacks. `streamed`: the audio output takes sentence chunks."""

    def __init__(
        self, sessions: Sessions, settings: Settings, speech: SpeechModels, *, streamed: bool
    ):
        self.sessions = sessions
        self.settings = settings
        self.speech = speech
        self.streamed = streamed

    async def chat(
        self,
        text: str,
        history: list[dict[str, Any]],
        tab: Tab,
        speak: bool,
        request: gr.Request,
    ) -> AsyncIterator[tuple[Any, ...]]:
        """Send: a typed turn. Outputs: chatbot, textbox, audio."""
        typed = self._typed(text, history, tab, speak, request, deep=False)
        async with contextlib.aclosing(typed) as outs:
            async for out in outs:
                yield out

    async def delegate(
        self,
        text: str,
        history: list[dict[str, Any]],
        tab: Tab,
        speak: bool,
        key: str,
        request: gr.Request,
    ) -> AsyncIterator[tuple[Any, ...]]:
        """Delegate: the same turn, sent to the deep lane as a job; `key`: the click's own
        job key (one job per click, however often it is sent)."""
        typed = self._typed(text, history, tab, speak, request, deep=True, key=key)
        async with contextlib.aclosing(typed) as outs:
            async for out in outs:
                yield out

    async def _typed(
        self,
        text: str,
        history: list[dict[str, Any]],
        tab: Tab,
        speak: bool,
        request: gr.Request,
        *,
        deep: bool,
        key: str = "",
    ) -> AsyncIterator[tuple[Any, ...]]:
        text = (text or "").strip()
        if not text:
            yield gr.skip(), gr.skip(), gr.skip()
            return
        owner = owner_of(self.settings, request)
        session = session_of(self.sessions, tab, owner)
        view = TurnView(history, text)
        ask = Ask(
            text=text, speak=speak, force_deep=deep, job_key=key.strip()[:200] or None,
            from_page=True,
        )  # fmt: skip
        turn = session.ask(ask, voice=lambda: self._tts(owner))
        cleared = False
        async with contextlib.aclosing(self._stream(view, turn, tab)) as outs:
            async for history_out, audio in outs:
                # the textbox is cleared once, as the turn starts: what the user types next
                # while the reply still streams or plays must not be wiped by a later update
                yield history_out, gr.skip() if cleared else "", audio
                cleared = True

    async def stop(self, tab: Tab, request: gr.Request) -> None:
        """Stop: the tab's turn, and a call's reply, end through their session (the page's
        own audio is paused in the browser at once)."""
        owner = owner_of(self.settings, request)
        cid = tab.conversation_id if tab.owner == owner else None
        await self.sessions.stop(owner, cid, "Stop")

    async def voice(
        self,
        audio_path: str | None,
        history: list[dict[str, Any]],
        tab: Tab,
        speak: bool,
        sent_at: float | None,
        request: gr.Request,
    ) -> AsyncIterator[tuple[Any, ...]]:
        """A recording stopped or a file was uploaded. Outputs: chatbot, audio out, audio in.
        `sent_at`: when the page sent it (epoch ms, its clock): latency counts from there, so
        the upload and the wait in the queue are in `stt`, `first_audio` and `total`."""
        if not audio_path:
            yield gr.skip(), gr.skip(), gr.skip()
            return
        received = now_ms() - waited_ms(sent_at)
        owner = owner_of(self.settings, request)
        view = TurnView(history, "🎤 …")
        try:
            stt = await self.speech.stt()  # heard in the login's share of the pool (`Session`)
        except AssistantError as e:
            view.apply(TurnEvent("error", text=str(e)))
            yield view.history, gr.skip(), None
            return
        session = session_of(self.sessions, tab, owner)
        ask = Ask(
            audio=audio_path, speak=speak, received_ms=received, source="voice", from_page=True
        )
        turn = session.ask(ask, stt=stt, voice=lambda: self._tts(owner))
        async with contextlib.aclosing(self._stream(view, turn, tab)) as outs:
            async for history_out, audio in outs:
                yield history_out, audio, gr.skip()
        notice = getattr(stt, "take_notice", lambda: None)()
        if notice:  # the embedded model stood in for a failed speech server: said once
            gr.Warning(notice)
        yield gr.skip(), gr.skip(), None  # clear the recorder for the next turn

    async def _tts(self, owner: str) -> Any:
        """The login's voice, speaking in the login's share of the pool (as `voice` hears)."""
        return await voice_of(self.speech, self.sessions.conversations.prefs(owner), owner)

    async def _stream(
        self, view: TurnView, turn: AsyncIterator[TurnEvent], tab: Tab
    ) -> AsyncIterator[tuple[Any, Any]]:
        """Fold updates into the view; yield (history, audio) at a bounded rate.

        Audio is `gr.skip()` until there is some: a streamed output opens its stream on the
        first value it gets, and a stream left empty for seconds makes the player give up."""
        tab.busy = True
        chunks: list[bytes] = []
        rate = 22050
        last = 0.0
        try:
            # not streamed: clear the previous reply's audio so it does not play again
            yield view.history, gr.skip() if self.streamed else None
            async with contextlib.aclosing(turn) as updates:
                async for u in updates:
                    view.apply(u)
                    if u.kind == "audio" and u.audio is not None:
                        if self.streamed:
                            last = time.monotonic()
                            yield view.history, wav_bytes(u.audio.samples, u.audio.sample_rate)
                        else:
                            chunks.append(u.audio.samples)
                            rate = u.audio.sample_rate
                        continue
                    if u.kind in ("content", "reasoning") and time.monotonic() - last < UI_EVERY_S:
                        continue
                    last = time.monotonic()
                    if u.kind != "done":
                        yield view.history, gr.skip()
        except AssistantError as e:  # e.g. the message is too long
            view.apply(TurnEvent("error", text=str(e)))
        finally:
            tab.busy = False
            tab.turns_ended += 1
        # notices that arrived while the turn ran go after it
        view.history.extend(tab.pending)
        tab.pending.clear()
        # without a stream encoder (no ffmpeg) the reply is spoken once, when it is complete
        yield view.history, wav_bytes(b"".join(chunks), rate) if chunks else gr.skip()
