"""The embedded models standing in for a failed speech server, only when the user asked for
it (`ASSISTANT_SPEECH_FALLBACK=local`).

After a failure the server is left alone for `RETRY_AFTER_S` (every sentence of a reply
would otherwise wait for the same dead server again), then tried again. The switch is said
once per outage: logged, and kept as a notice the turn shows (`take_notice`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from assistant.records import AudioChunk, Transcript
from assistant.speech.remote import RemoteSpeechError

log = logging.getLogger(__name__)

RETRY_AFTER_S = 30.0


@dataclass
class Outage:
    """One server's state, shared by every view of it (each speaking rate of a voice)."""

    what: str
    down_until: float = 0.0
    notice: str | None = None
    said: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def usable(self) -> bool:
        return time.monotonic() >= self.down_until

    def failed(self, e: RemoteSpeechError) -> None:
        with self.lock:
            self.down_until = time.monotonic() + RETRY_AFTER_S
            if not self.said:  # once per outage
                self.said = True
                self.notice = f"{e}; using the embedded {self.what} model instead"
                log.warning("%s", self.notice)

    def recovered(self) -> None:
        with self.lock:
            if self.said:
                log.warning("the %s server answers again", self.what)
            self.said = False

    def take_notice(self) -> str | None:
        with self.lock:
            notice, self.notice = self.notice, None
            return notice


class FallbackSTT:
    """A remote transcriber (`server`), and the embedded one when it fails."""

    remote = True
    """Run on the pools' remote executor (`speech.pools`)."""

    def __init__(self, remote: Any, local: Callable[[], Any]) -> None:
        self.server, self._local = remote, local
        self.outage = Outage("speech-to-text")

    def transcribe(self, samples: np.ndarray, *, hotwords: str | None = None) -> Transcript:
        if self.outage.usable():
            try:
                transcript = self.server.transcribe(samples, hotwords=hotwords)
                self.outage.recovered()
                return transcript
            except RemoteSpeechError as e:
                self.outage.failed(e)
        return self._local().transcribe(samples, hotwords=hotwords)

    def take_notice(self) -> str | None:
        return self.outage.take_notice()

    def warm(self) -> None:
        self.server.warm()


class FallbackTTS:
    """A remote voice (`server`), and the embedded one (at the same rate) when it fails."""

    remote = True

    def __init__(
        self, remote: Any, local: Callable[[], Any], outage: Outage | None = None, rate: float = 1.0
    ) -> None:
        self.server, self._local, self.rate = remote, local, rate
        self.outage = outage or Outage("text-to-speech")

    def synthesize(self, text: str) -> Iterator[AudioChunk]:
        if self.outage.usable():
            try:
                # all of it or none: half a reply in one voice and half in another is worse
                chunks = list(self.server.synthesize(text))
                self.outage.recovered()
                yield from chunks
                return
            except RemoteSpeechError as e:
                self.outage.failed(e)
        yield from self._local().at_rate(self.rate).synthesize(text)

    def at_rate(self, rate: float) -> FallbackTTS:
        return FallbackTTS(self.server.at_rate(rate), self._local, self.outage, rate)

    def take_notice(self) -> str | None:
        return self.outage.take_notice()

    def warm(self) -> None:
        self.server.warm()
