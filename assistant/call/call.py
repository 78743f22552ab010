"""A call: one voice session per open page, on the server, owning that page's voice turns.

The session hears what the `Listener` hears and runs the turn (a kept task of the conversation's
`assistant.session.Session`): the end is the listener's turn-end model's; it knows what it is
saying (the reply's text, the audio sent), barges in by cancelling the turn, and sends the
reply's audio back on the socket. The page only shows the session's events and plays its audio.

Replies are prepared before the end is confirmed: at a candidate end (200 ms of silence) the
turn starts on the candidate's transcript (route, chat-lane request, first sentence's speech)
and its events are held; the committed end releases them, a resumption cancels the turn and
it is forgotten (never stored). A deep turn waits for the commit: no job for words that went on.
What it tells the page: `assistant.call.messages`; whose turn it is: `call.turn_taking`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import Awaitable, Callable
from typing import Any

from assistant.call.echo import Playout
from assistant.call.hearing import Heard
from assistant.call.listener import Listener
from assistant.call.messages import shown
from assistant.call.playback import Played
from assistant.call.turn_taking import Action, CallState, Event, Phase, decide, quiet, resolve
from assistant.call.voice_turn import VoiceTurn
from assistant.records import TurnEvent, TurnResult, now_ms
from assistant.turns.pipeline import Playback, TurnRequest
from assistant.turns.stream import cancel_all

log = logging.getLogger(__name__)

SendJson = Callable[[dict[str, Any]], Awaitable[None]]
SendBytes = Callable[[bytes], Awaitable[None]]
PLAYBACK_SLACK_MS = 300.0
"""After the last audio is due to end on the page, the echo guard stays on this long."""


class Call:
    """The call of one page. `run` until the socket closes; `close` cancels what runs."""

    def __init__(
        self,
        listener: Listener,
        session: Callable[[], Any],
        *,
        owner: str,
        tts: Callable[[], Awaitable[Any]],
        send_json: SendJson,
        send_bytes: SendBytes,
        on_done: Callable[[TurnResult], None] | None = None,
        end_call: Callable[[str], Awaitable[None]] | None = None,
    ):
        self.listener = listener
        self.session = session
        """The `assistant.session.Session` the page has open (asked at each turn): the call's
        turns are its turns, run and cancelled by it."""
        self.owner = owner
        self.tts = tts
        self.send_json = send_json
        self.send_bytes = send_bytes
        self.on_done = on_done
        self.end_call = end_call
        """Ends the call with a reason the page is told (the socket's; None: nothing to end)."""
        self.turn: VoiceTurn | None = None
        self.state = Phase.LISTENING
        self._playout = Playout(self._played_out)
        """Until the reply's audio has played out on the page: the echo guard stays on, and a
        turn is not the conversation's until then."""
        self._recent: dict[int, VoiceTurn] = {}
        """The last turns that spoke: the page may report playback after one ended (a barge-in)."""
        self._told: set[asyncio.Task[None]] = set()
        """The table hearing that the audio played out (from `Playout`'s timer)."""
        self._hearing = asyncio.Lock()
        """What was heard is handled in order, one at a time (the socket's reader and the
        listener's background work both deliver)."""
        self.conversation_id: str | None = None  # the conversation of the latest turn
        self._own = 0
        """Numbers for turns the listener did not hear (typed, notices): below zero."""
        self._notices: list[str] = []
        self._notice_task: asyncio.Task[None] | None = None
        self.changed = asyncio.Event()
        """The state or the turn changed (notices, `idle.watch`); cleared by a waiter."""
        self._aside: int | None = None  # the utterance taken as a backchannel
        self.heard_seq = 0
        """The listener's number (`Heard.seq`) of the last thing it said that the call has
        handled, its turn started if it starts one."""

    async def run(self) -> None:
        while True:
            for heard in await self.listener.next():
                await self.hear(heard)

    async def feed(self, pcm: bytes, received_ms: float) -> None:
        """Audio in: never waits for what the session does with it (`run` hears it)."""
        await self.listener.feed(pcm, received_ms, take=False)

    async def hear(self, heard: Heard) -> None:
        async with self._hearing:
            voiced = heard.audio_s if heard.kind == "speech" else None
            await self._apply(Event(heard.kind, heard.utterance, heard.text, voiced), heard)
            self.heard_seq = max(self.heard_seq, heard.seq)
            self.changed.set()

    async def settled(self, said: int) -> None:
        """Until the call has handled all its listener `said` (`Outbox.said`) and no turn of it
        runs: what a bench or a test waits for after the last audio. (A turn being prepared
        is not the call's `turn` until it is routed: "no turn" alone can come too early.)"""
        while self.heard_seq < said or self.turn is not None:
            self.changed.clear()
            await self.changed.wait()

    async def _apply(self, event: Event, heard: Heard | None = None, source: str = "") -> None:
        """One row of the turn-taking table (`assistant.call.turn_taking`), carried out."""
        before = self._view()
        step = decide(before, event)
        for action in step.actions:
            await self._act(action, event, heard, source)
        phase = resolve(step.next, before, self._view())
        if phase is not None:
            await self._state(phase)

    async def _act(self, action: Action, event: Event, heard: Heard | None, source: str) -> None:
        turn = self.turn
        if action is Action.BARGE:
            await self.barge_in()
        elif action is Action.DISCARD:
            await self._cancel(discard=True)
        elif action is Action.SILENCE:
            await self.send_json({"kind": "barge", "utterance": event.utterance})
        elif action is Action.PREPARE and heard is not None:
            await self._start(heard, committed=False)
        elif action is Action.COMMIT and turn is not None and heard is not None:
            turn.heard = heard
            turn.stamp()
            turn.committed.set()
        elif action is Action.KEEP and turn is not None:
            turn.kept.set()
        elif action is Action.START and heard is not None:
            await self._start(heard, committed=True)
        elif action is Action.START:  # typed, or push-to-talk: no listener's words
            self._begin(self._own_turn(event.text, source), self._run)
        elif action is Action.SHOW:
            await self._show(event, heard)
        elif action in (Action.ASIDE, Action.HEED):  # a backchannel, or no longer one
            self._aside = event.utterance if action is Action.ASIDE else None
        elif action is Action.END_CALL and self.end_call is not None:
            await self.end_call("you logged out; the call ends")

    async def _show(self, event: Event, heard: Heard | None) -> None:
        if event.kind == "notice" and heard is not None:
            log.warning("call of %s: %s", self.owner, heard.reason)  # the operator sees it too
        utterance = self._own if event.kind == "typed" else event.utterance
        message = shown(event, utterance, heard.reason if heard is not None else "")
        if message is not None:
            await self.send_json(message)

    def _view(self) -> CallState:
        """What the table reads: the phase, the current turn, whether its audio still plays."""
        view = self.turn.view() if self.turn is not None else None
        return CallState(Phase(self.state), view, self._playout.playing(), self._aside)

    async def barge_in(self) -> None:
        """Stop the reply (the person speaking over it) through its session; a committed turn
        is kept, marked stopped, with what it had said."""
        turn = self.turn
        if turn is None:
            return
        await self._cancel(discard=not turn.committed.is_set())
        await self.send_json({"kind": "barge", "utterance": turn.utterance})

    async def logout(self) -> None:
        """The call's login is gone: the reply stops (kept as heard) and the call ends."""
        async with self._hearing:
            await self._apply(Event("logout"))

    async def say(self, text: str, source: str = "typed") -> None:
        """A question typed on the page during the call, or said with push-to-talk
        (`source="voice"`): a turn of the call like a spoken one (answered aloud; a newer turn
        than the reply in progress, which it stops)."""
        async with self._hearing:
            await self._apply(Event("typed", text=text), source=source)

    def announce(self, text: str) -> None:
        """Say `text` (a job's notice) in the call once it is quiet: never over the person or
        a reply; speaking over it stops it, like a reply."""
        self._notices.append(text)
        if self._notice_task is None or self._notice_task.done():
            self._notice_task = asyncio.create_task(self._announce(), name="call-notices")

    async def _announce(self) -> None:
        while self._notices:
            while not quiet(self._view()):  # no turn, no sound
                self.changed.clear()
                await self.changed.wait()
            turn = self._own_turn(" ".join(self._notices), "notice")
            self._notices.clear()
            with contextlib.suppress(asyncio.CancelledError):
                await self._begin(turn, self._speak)

    async def _speak(self, turn: VoiceTurn) -> None:
        """A notice's speech: shown and said, not a turn of the conversation (never stored)."""
        stopped_here = False
        try:
            tts = await self.tts()
            await self.send_json({"kind": "reply", "utterance": turn.utterance, "text": turn.text})
            if tts is not None:
                from assistant.speech.pools import speech_pools

                chunks = await speech_pools().run_tts(lambda: list(tts.synthesize(turn.text)))
                for chunk in chunks:
                    await self._send(turn, TurnEvent("audio", text=chunk.text, audio=chunk))
        except Exception as e:  # a notice that cannot be said must not end the call
            log.warning("call notice not spoken: %s", e)
        except asyncio.CancelledError:
            stopped_here = self.turn is turn  # Stop on the conversation: the page stops it
            raise
        finally:
            self._let_go(turn)
            with contextlib.suppress(Exception):
                await self._apply(Event("stop" if stopped_here else "ended", turn.utterance))

    async def _start(self, heard: Heard, *, committed: bool) -> None:
        decision = None  # routed here, once: the request carries the decision into the turn
        if not committed:
            with contextlib.suppress(Exception):
                decision = await self.session().route(heard.text)
            if decision is not None and decision.lane == "deep":
                return  # never speculative: a job waits for the committed end
        turn = VoiceTurn(heard.utterance, heard.text, heard, decision=decision)
        if committed:
            turn.committed.set()
        self._begin(turn, self._run)

    def _own_turn(self, text: str, source: str) -> VoiceTurn:
        """A turn the listener did not hear (typed, push-to-talk, a notice): committed, with a
        number below zero."""
        self._own -= 1
        turn = VoiceTurn(self._own, text, None, source=source)
        turn.committed.set()
        return turn

    def _begin(
        self, turn: VoiceTurn, run: Callable[[VoiceTurn], Awaitable[None]]
    ) -> asyncio.Task[None]:
        """The turn runs as a task of the conversation's session, its one owner: Stop on the
        conversation ends it there; the call only hears and speaks it."""
        self.turn = turn
        self.changed.set()
        session = turn.session = self.session()
        self.conversation_id = session.conversation_id
        turn.task = session.keep(run(turn), name=f"call-turn-{turn.utterance}")
        return turn.task

    def _let_go(self, turn: VoiceTurn) -> None:
        if self.turn is turn:
            self.turn = None
            self.changed.set()

    async def _cancel(self, *, discard: bool) -> None:
        turn, self.turn = self.turn, None
        self.changed.set()
        if turn is None or turn.task is None:
            return
        turn.discard = discard
        with contextlib.suppress(BaseException):
            await turn.session.stop("barge-in", turn.task)
        turn.keep_unstarted()
        self.listener.playing(None)

    async def _run(self, turn: VoiceTurn) -> None:
        held: list[TurnEvent] = []
        result: TurnResult | None = None
        stopped_here = False  # by the session (Stop), not by the call itself
        try:
            tts = await self.tts()
            heard = turn.heard
            session = turn.session
            request = session.request(TurnRequest(
                text=turn.text,
                speak=tts is not None,
                # a typed turn's latency counts from when it arrived
                received_ms=heard.last_word_ms if heard is not None else now_ms(),
                source=turn.source,
                heard_ms={},
                decision=turn.decision,
            ))  # fmt: skip
            turn.request = request
            turn.voiced = tts is not None
            turn.playback = Playback(turn.heard_of)
            if turn.committed.is_set():
                turn.stamp()
            # stored if stopped once it is the person's (committed), unless the call forgot it
            turn.began = True
            stream = session.events(
                request, tts=tts, playback=turn.playback, hold=lambda: self._said(turn),
                keep_stopped=lambda: turn.committed.is_set() and not turn.discard,
            )  # fmt: skip
            async with contextlib.aclosing(stream) as events:
                async for event in events:
                    if not turn.committed.is_set():
                        held.append(event)
                        if event.kind == "audio":
                            # prepared up to its first audio: wait for the end to be decided
                            await turn.committed.wait()
                            turn.stamp()
                            # the person hears it from now, not from when it was ready
                            said_at = heard.last_word_ms if heard is not None else None
                            request.heard_ms["first_audio"] = now_ms() - (said_at or now_ms())
                            for e in held:
                                await self._send(turn, e)
                            held.clear()
                        continue
                    if held:
                        turn.stamp()
                        for e in held:
                            await self._send(turn, e)
                        held.clear()
                    if event.kind == "done":
                        result = event.result
                    await self._send(turn, event)
        except asyncio.CancelledError:
            # the call's own cancels (a barge-in, a newer turn) let go of the turn first
            stopped_here = self.turn is turn
            turn.keep_unstarted()  # Stop on the conversation while the voice was chosen
            raise
        except Exception as e:  # a failed turn must not end the call
            log.warning("voice turn failed: %s", e)
            await self.send_json({"kind": "reply", "utterance": turn.utterance, "text": f"⚠️ {e}"})
        finally:
            self._let_go(turn)
            if stopped_here:
                self.listener.playing(None)
            if result is not None and self.on_done is not None:
                self.on_done(result)
            if not turn.discard:
                with contextlib.suppress(Exception):
                    await self.send_json(
                        {"kind": "done", "utterance": turn.utterance,
                         "stopped": result is None}
                    )  # fmt: skip
            if not turn.discard:  # a forgotten turn's end is no event of the call
                with contextlib.suppress(Exception):
                    await self._apply(Event("stop" if stopped_here else "ended", turn.utterance))

    async def _said(self, turn: VoiceTurn) -> None:
        """Until the turn is the person's (committed, and the listener said they did not go on
        with it: `closed`) and its audio has played out on the page: a reply is what it said,
        so speaking over it stops it, even once generated. A short reply may end before the
        person goes on: the turn is then still theirs to continue, not stored yet."""
        await turn.committed.wait()
        if turn.heard is not None:  # typed: nothing to go on with, only its audio to play out
            await turn.kept.wait()
        await self._playout.ended.wait()
        if turn.discard or self.turn is not turn:
            raise asyncio.CancelledError  # superseded while it ran: never stored

    async def _send(self, turn: VoiceTurn, event: TurnEvent) -> None:
        if event.kind == "content":
            turn.reply += event.text
            await self.send_json({"kind": "reply", "utterance": turn.utterance, "text": turn.reply})
        elif event.kind == "audio" and event.audio is not None:
            chunk = event.audio
            if turn.first_audio_at is None:
                turn.first_audio_at = now_ms()
                await self._apply(Event("audio", turn.utterance))
            rate = chunk.sample_rate
            # one binary frame: the sample rate (uint32, little-endian), then int16 PCM
            await self.send_bytes(struct.pack("<I", rate) + bytes(chunk.samples))
            ms = len(chunk.samples) / 2 / rate * 1000
            turn.audio_ms += ms
            turn.spoken.append((chunk.text, ms))
            self._recent[turn.utterance] = turn
            while len(self._recent) > 8:
                del self._recent[next(iter(self._recent))]
            # the echo guard: what is being said, until its audio has played out
            self.listener.playing(turn.reply or chunk.text)
            self._playout.until(turn.first_audio_at + turn.audio_ms + PLAYBACK_SLACK_MS)
        elif event.kind == "error":
            await self.send_json(
                {"kind": "reply", "utterance": turn.utterance, "text": f"⚠️ {event.text}"}
            )

    async def played(self, report: Played) -> None:
        """The page's playback report for one utterance's reply (see `call.playback`)."""
        turn = self._recent.get(report.utterance)
        if turn is None:
            return
        if report.interrupted:
            turn.played_ms = report.played_ms
            playback = turn.playback
            if playback is not None and playback.turn_id and turn.session is not None:
                await turn.session.heard(playback, turn.heard_of(turn.reply))
        elif turn is self.turn and report.played_ms >= turn.audio_ms - 50:
            # all it was sent has played: the echo guard is off now, not at an estimate
            self._playout.until(now_ms())

    def _played_out(self) -> None:
        """The reply's audio has played out (`Playout`'s timer): the echo guard is off, and the
        table hears it."""
        self.listener.playing(None)
        task = asyncio.create_task(self._apply(Event("played_out")), name="played-out")
        self._told.add(task)
        task.add_done_callback(self._told.discard)

    async def _state(self, state: str) -> None:
        self.changed.set()  # also when it stays: a turn may have ended in it
        if state != self.state:
            self.state = state
            await self.send_json({"kind": "state", "state": state})

    async def close(self) -> None:
        self._playout.cancel()
        notices = [self._notice_task] if self._notice_task is not None else []
        await cancel_all([*notices, *self._told])
        await self._cancel(discard=False)
