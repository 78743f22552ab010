"""Audio in, for the listener: 16 kHz int16 PCM in chunks of any size -> Silero's 32 ms
frames, each voiced or not and stamped with the wall-clock time it ended.

Voice activity detection runs here, on the loop (0.5 ms a chunk), never in a thread: a
backlog is framed whole before a model's verdict lands (in a thread, calls lost words)."""

from __future__ import annotations

import numpy as np

from assistant.call.hearing import FRAME, RATE
from assistant.speech.vad import StreamingVad

Frame = tuple[np.ndarray, bool, float]
"""Its samples (float32), whether it is voiced, and when it ended (`now_ms()` clock)."""


class Frames:
    """One stream's framing and voice activity detection."""

    def __init__(self, vad: StreamingVad, threshold: float):
        self.vad, self.threshold = vad, threshold
        self.heard = 0
        """Frames so far: the audio's clock."""
        self._pending = np.zeros(0, dtype=np.float32)  # samples short of a whole frame

    def split(self, pcm: bytes, received_ms: float) -> list[Frame]:
        """The whole frames `pcm` completes (what is left over waits for the next chunk)."""
        samples = np.frombuffer(pcm[: len(pcm) // 2 * 2], dtype="<i2").astype(np.float32) / 32768
        self._pending = np.concatenate([self._pending, samples])
        n = len(self._pending) // FRAME
        if not n:
            return []
        frames = self._pending[: n * FRAME].reshape(n, FRAME)
        self._pending = self._pending[n * FRAME :]
        probs = self.vad.probs(frames)
        self.heard += n
        out: list[Frame] = []
        for i, (frame, p) in enumerate(zip(frames, probs, strict=True)):
            # when this frame ended: the chunk's arrival less what followed it
            behind_ms = ((n - 1 - i) * FRAME + len(self._pending)) * 1000 / RATE
            out.append((frame, float(p) >= self.threshold, received_ms - behind_ms))
        return out

    def clear(self) -> None:
        self._pending = np.zeros(0, dtype=np.float32)
