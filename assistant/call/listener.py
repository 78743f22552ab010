"""Hands-free listening: a live microphone stream, a transcript that grows while the person
speaks, and the end of their turn decided by a turn-end model.

The page streams 16 kHz int16 PCM in real time (`web.call`); `Listener.feed` frames it
(`call.frames`: Silero VAD, on the loop) and queues what happened (`Heard`; its kinds:
`call.hearing`). It never awaits Whisper (`call.transcribing`) or the turn-end model
(`call.verdicts`): they run in the background, so a backlog is heard whole first."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Coroutine
from typing import Any, Literal

import numpy as np

from assistant.call.echo import is_echo, words
from assistant.call.frames import Frames
from assistant.call.hearing import FRAME_MS, Heard, ListenConfig, Outbox
from assistant.call.transcribing import Job, Transcriber
from assistant.call.verdicts import Verdicts
from assistant.records import now_ms
from assistant.speech.stages import SpeechToText, TurnEndModel
from assistant.speech.turn_end import run_turn_end
from assistant.speech.vad import StreamingVad
from assistant.turns.stream import cancel_all

CHECK_EVERY_MS = 250
TAIL_FRAMES = 4
"""Frames kept after the last voiced one for the transcript (128 ms: the word's release)."""


class Listener:
    """One microphone stream. `feed` queues what it heard and returns what is ready; the
    transcriptions (its `Transcriber`, whose hooks it implements) and the turn-end model run
    in the background (`next` waits for more)."""

    def __init__(
        self,
        stt: SpeechToText,
        config: ListenConfig | None = None,
        *,
        vad: StreamingVad | None = None,
        turn_end: TurnEndModel | None = None,
    ):
        self.stt = stt
        self.config = config or ListenConfig()
        self.frames = Frames(vad or StreamingVad(), self.config.threshold)
        self.verdicts = Verdicts(turn_end, self.config)
        self.count = 0
        self._preroll: deque[np.ndarray] = deque(
            maxlen=max(1, int(self.config.preroll_ms // FRAME_MS))
        )
        self._playing: str | None = None
        self.out = Outbox()
        self._tasks: set[asyncio.Task[Any]] = set()
        self.transcriber = Transcriber(stt, self.config.preview_every_ms, self)
        self._epoch = 0
        """Bumped whenever what an in-flight result was for is gone (speech resumed, the
        utterance ended): a result from an older epoch is dropped."""
        self._uid = 0
        self._held: list[tuple[np.ndarray, bool, float]] = []
        self._closed: list[np.ndarray] | None = None
        """The last committed utterance's audio, and the silence since, while it may go on."""
        self._closed_number = 0
        self._closed_gap_ms = 0.0
        self._reset()

    def _reset(self) -> None:
        self._epoch += 1
        self._uid += 1
        self._forced = False
        self._active = False
        self._audio: list[np.ndarray] = []  # this utterance's frames
        self._voiced_ms = 0.0
        self._silence_ms = 0.0
        self._last_voiced = 0  # frames into the utterance, after its last voiced frame
        self._last_word_ms = 0.0
        self._preview_at = 0
        self._shown = ""
        self._announced = False
        self._echo = False
        self._checked_ms = 0.0
        self.transcriber.waiting = None
        # the candidate end: its transcript, the model's verdict, the decision
        self._candidate = False
        self._text: str | None = None
        self._text_upto = 0
        self.verdicts.clear()
        self._committed: tuple[float, float] | None = None  # (endpoint_ms, decided_at)
        self._decided_by = ""
        self._candidate_sent = False
        self._went_on = False
        """This utterance continues the last committed one (its audio first): the person's."""

    def playing(self, text: str | None) -> None:
        """The reply being spoken to the user (None once it stops): the echo guard."""
        self._playing = text or None

    def _close_window(self) -> None:
        """The last committed utterance can no longer go on: said (`closed`), so its turn is
        the person's for good, decided on the audio's clock, never by polling the listener."""
        if self._closed is not None:
            self._closed = None
            self.out.say(Heard("closed", self._closed_number))

    async def feed(
        self, pcm: bytes, received_ms: float | None = None, *, take: bool = True
    ) -> list[Heard]:
        """Audio in; never waits for a model. What was heard so far (`take=False`: for `next`)."""
        received = now_ms() if received_ms is None else received_ms
        for frame, voiced, at_ms in self.frames.split(pcm, received):
            self._frame(frame, voiced, at_ms)
        return self.take() if take else []

    def _frame(self, frame: np.ndarray, voiced: bool, at_ms: float) -> None:
        cfg = self.config
        if self._committed is not None:
            # the turn is decided and waits for its transcript: what comes next is the next
            # utterance's, heard once this one is said
            self._held.append((frame, voiced, at_ms))
            return
        if not self._active:
            if not voiced:
                self._preroll.append(frame)
                if self._closed is not None:
                    self._closed.append(frame)
                    self._closed_gap_ms += FRAME_MS
                    if self._closed_gap_ms > cfg.merge_ms:
                        self._close_window()
                return
            self._active = True
            self._audio = list(self._preroll)
            if self._closed is not None:  # the preroll is in both: keep it once
                del self._closed[len(self._closed) - len(self._preroll) :]
            self._preroll.clear()
        self._audio.append(frame)
        if voiced:
            if self._candidate and not self._forced:
                self._resume()
            self._voiced_ms += FRAME_MS
            self._silence_ms = 0.0
            self._last_voiced = len(self._audio)
            self._last_word_ms = at_ms
        else:
            self._silence_ms += FRAME_MS
        if not self._announced and not self._echo:
            self._maybe_announce()
        since = len(self._audio) - self._preview_at
        if self._announced and self._silence_ms == 0.0 and self.transcriber.due(since):
            self._preview_at = len(self._audio)
            self._transcribe("preview", len(self._audio))
        too_long = len(self._audio) * FRAME_MS >= cfg.max_utterance_s * 1000
        if not self._candidate and (self._silence_ms >= cfg.candidate_ms or too_long):
            self._candidate_end()
        if self._candidate and self._committed is None:
            if self._silence_ms >= cfg.fallback_ms or too_long:
                self._forced = too_long
                self._commit(None)
            elif self.verdicts.due(self._silence_ms):
                self._ask_model()

    def _maybe_announce(self) -> None:
        cfg = self.config
        need = cfg.barge_min_speech_ms if self._playing else cfg.min_speech_ms
        if self._voiced_ms < need:
            return
        if self._playing:
            # while the reply plays, its own voice may leak into the microphone: hear what
            # was said before interrupting it; a few words are needed to tell, so look again
            # every 250 ms of speech (in the background) until there are three
            if self._voiced_ms < self._checked_ms + CHECK_EVERY_MS:
                return
            running = self.transcriber.running
            if running is not None and running.kind == "check":
                return
            self._checked_ms = self._voiced_ms
            self._transcribe("check", len(self._audio))
            return
        self._announce()

    def _announce(self, text: str = "") -> None:
        """Say "speech"; over a reply, with the words heard so far (a backchannel keeps the
        floor: `call.turn_taking.backchannel`) and the voiced time."""
        self._announced = True
        if self._closed is not None:
            # soon after the last turn was committed: the same turn, going on
            prefix, self._closed = self._closed, None
            self._went_on = True
            offset = len(prefix)
            self._audio = prefix + self._audio
            self._last_voiced += offset
            self._preview_at += offset
            self._text, self._text_upto = None, 0
            self._uid += 1  # in-flight work read the short audio: its results are dropped
            self.transcriber.waiting = None
            self.out.say(Heard("resumed", self._closed_number))
        else:
            self.count += 1
        self.out.say(Heard("speech", self.count, text, audio_s=self._voiced_ms / 1000))

    def _final_upto(self) -> int:
        """The frames a final transcript reads: to the last word and its release."""
        return min(len(self._audio), self._last_voiced + TAIL_FRAMES)

    # -- the end of the turn -----------------------------------------------------------------

    def _candidate_end(self) -> None:
        """A pause: maybe the end. Start the final transcript and ask the model."""
        cfg = self.config
        self._candidate = True
        audio_s = len(self._audio) * FRAME_MS / 1000
        if self._voiced_ms < cfg.min_speech_ms or self._echo:
            reason = "echo" if self._echo else "too short"
            number = self.count if self._announced else self.count + 1
            self.out.say(Heard("ignored", number, reason=reason, audio_s=audio_s))
            self._drop(keep=reason == "too short")
            return
        if self._text is None or self._text_upto < self._last_voiced:
            self._text = None
            # a pass running since the last word will do
            if not self.transcriber.covers(self._epoch, self._last_voiced):
                self._transcribe("final", self._final_upto())
        self._ask_model()

    def _ask_model(self) -> None:
        model = self.verdicts.ask(self._silence_ms)
        if model is None:
            return
        audio, epoch, asked = np.concatenate(self._audio), self._epoch, now_ms()

        async def ask() -> None:
            p = await run_turn_end(model.probability, audio)
            if epoch == self._epoch and self.verdicts.answered(p) and self._committed is None:
                # the decision came this long after the model was asked, on top of the pause
                self._commit(now_ms() - asked)

        self.spawn(ask())

    def _commit(self, model_ms: float | None) -> None:
        """The end is decided (model_ms: how long the model took; None: the fallback)."""
        frames_after = len(self._audio) - self._last_voiced
        if model_ms is None:
            endpoint = frames_after * FRAME_MS
        else:
            endpoint = (self.verdicts.asked_at_ms or frames_after * FRAME_MS) + model_ms
        self._committed = (endpoint, now_ms())
        self._decided_by = "pause" if model_ms is None else "model"
        self._finish()

    def _finish(self) -> None:
        """Say the candidate and the final, once the transcript and the decision are in;
        then hear the audio that arrived meanwhile."""
        said = self._say_end()
        if said and self._held:
            held, self._held = self._held, []
            for frame, voiced, at_ms in held:
                self._frame(frame, voiced, at_ms)

    def _say_end(self) -> bool:
        """True once the utterance ended (said, or dropped)."""
        text = self._text
        if text is None:
            return False  # the transcript is still running: it calls back here
        number = self.count if self._announced else self.count + 1
        audio_s = len(self._audio) * FRAME_MS / 1000
        if not text:
            self.out.say(Heard("ignored", number, reason="no words", audio_s=audio_s))
            self._drop(keep=True)  # Whisper hears no word in "Ask": the rest may follow
            return True
        # a turn that went on is the person's: it was heard as them before it was joined to
        # what they said first, and a reply that quotes those first words (as the scripted
        # engine's "You said: ..." does) would otherwise pass the whole for its echo
        if self._playing and not self._went_on and is_echo(text, self._playing):
            self.out.say(Heard("ignored", number, text, reason="echo", audio_s=audio_s))
            # a word or two the reply also has is weak evidence (a faint "Ask" is heard as
            # "And"): soon after the last turn it stays with it, in case the person goes on
            self._drop(keep=len(words(text)) <= 2)
            return True
        if not self._announced:
            merging = self._closed is not None
            self._announce(text)
            if merging:  # it went on from the last turn: the whole is transcribed again
                self._transcribe("final", self._final_upto())
                return False
        if not self._candidate_sent:
            self._candidate_sent = True
            self.out.say(
                Heard("candidate", self.count, text, last_word_ms=self._last_word_ms,
                      audio_s=audio_s)
            )  # fmt: skip
        if self._committed is None:
            return False
        endpoint, decided = self._committed
        self.out.say(
            Heard(
                "final",
                self.count,
                text,
                last_word_ms=self._last_word_ms,
                reason=self._decided_by,
                endpoint_ms=endpoint,
                stt_ms=max(0.0, now_ms() - decided),
                probability=self.verdicts.verdict,
                audio_s=audio_s,
            )
        )
        audio, gap = self._audio, (len(self._audio) - self._last_voiced) * FRAME_MS
        self._reset()
        # the window for going on counts from the last word, not from the commit
        self._closed, self._closed_number, self._closed_gap_ms = audio, self.count, gap
        if gap > self.config.merge_ms:
            self._close_window()
        return True

    def _drop(self, *, keep: bool) -> None:
        """End this utterance unheard. `keep`: a sound soon after the last turn that is not
        yet words ("Ask | not what ..."): kept with that turn's audio, and the window for going
        on with it runs from it."""
        audio, gap = self._audio, (len(self._audio) - self._last_voiced) * FRAME_MS
        self._reset()
        if keep and self._closed is not None:
            self._closed += audio
            self._closed_gap_ms = gap
        else:
            self._close_window()

    def _resume(self) -> None:
        """Speech after a candidate end: the same utterance goes on."""
        self._epoch += 1
        if self._candidate_sent:
            self.out.say(Heard("resumed", self.count))
        self._candidate = False
        self._candidate_sent = False
        self.verdicts.clear()
        self._committed = None

    # -- what it heard, for its one reader --------------------------------------------------

    def take(self) -> list[Heard]:
        return self.out.take()

    async def next(self) -> list[Heard]:
        """Wait until something was heard; what was."""
        return await self.out.next()

    async def settle(self) -> list[Heard]:
        """Wait for every transcription and model call in flight; what they produced."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        return self.take()

    # -- transcription (`Transcriber`'s hooks) ------------------------------------------------

    def _transcribe(self, kind: Literal["preview", "check", "final"], upto: int) -> None:
        self.transcriber.request(Job(kind, upto, self._epoch, self._uid, self._audio))

    def current(self, job: Job) -> bool:
        return job.utterance == self._uid and (job.kind == "preview" or job.epoch == self._epoch)

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def notice(self, reason: str) -> None:
        self.out.say(Heard("notice", self.count, reason=reason))

    def failed(self, job: Job, reason: str) -> None:
        """An utterance waiting for its words ends, with the reason (a preview's failure
        while the person speaks waits for the next one)."""
        if job.utterance != self._uid or not self._candidate or self._text is not None:
            return
        number = self.count if self._announced else self.count + 1
        self.out.say(Heard("ignored", number, reason=f"speech recognition failed: {reason}"))
        self._reset()
        self._close_window()

    def transcribed(self, job: Job, text: str) -> None:
        if job.utterance != self._uid:
            return  # that utterance has ended
        covers_tail = job.upto >= self._last_voiced
        if job.kind == "check":
            # a few words are needed to tell the reply's echo from a person (or the end); at
            # a pause, words short of it wait for the final ("I" of "I see" is no backchannel)
            at_end = self._candidate and covers_tail
            if len(words(text)) >= 3 or self._voiced_ms >= 1500 or at_end:
                if not text or (self._playing and is_echo(text, self._playing)):
                    self._echo = bool(text)
                elif not self._announced:
                    self._announce(text)
                    if job.utterance != self._uid:  # it went on from the last turn
                        if self._candidate:
                            # at a pause already: the whole's words are needed now (nothing
                            # else asks for them, and the turn waited for them for ever)
                            self._transcribe("final", self._final_upto())
                        return  # this text is of a part
        if self._announced and text and text != self._shown:
            self._shown = text
            self.out.say(Heard("partial", self.count, text))
        final = covers_tail and job.epoch == self._epoch and self.transcriber.whole(job)
        if self._candidate and final and self._text is None:
            self._text, self._text_upto = text, job.upto
            self._finish()
        elif self._candidate and self._text is None and self.transcriber.idle():
            self._transcribe("final", self._final_upto())  # what finished was older than the pause

    async def close(self) -> None:
        await cancel_all(list(self._tasks))
        self._reset()
        self.frames.clear()
        self._preroll.clear()
        self._held.clear()
        self.out.take()
