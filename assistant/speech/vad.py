"""Silero VAD on a live stream: the model faster-whisper ships, carried across chunks."""

from __future__ import annotations

from typing import Any

import numpy as np

CONTEXT = 64
"""Samples of the previous frame Silero v6 reads before each frame."""


def vad_session() -> Any:
    """Silero's ONNX session, loaded once (faster-whisper caches it); every call's
    `StreamingVad` keeps its own state on it."""
    from faster_whisper.vad import get_vad_model

    return get_vad_model().session


class StreamingVad:
    """Silero VAD carried across calls (its LSTM state and the 64-sample context), so a
    stream cut into any chunks gets the probabilities one long array would."""

    def __init__(self, session: Any | None = None):
        self.session = session if session is not None else vad_session()
        self.h = np.zeros((1, 1, 128), dtype=np.float32)
        self.c = np.zeros((1, 1, 128), dtype=np.float32)
        self.context = np.zeros(CONTEXT, dtype=np.float32)

    def probs(self, frames: np.ndarray) -> np.ndarray:
        """Speech probability per 512-sample frame of `frames` (shape (n, 512), float32)."""
        if len(frames) == 0:
            return np.zeros(0, dtype=np.float32)
        before = np.vstack([self.context[None, :], frames[:-1, -CONTEXT:]])
        x = np.concatenate([before, frames], axis=1).astype(np.float32)
        out, self.h, self.c = self.session.run(None, {"input": x, "h": self.h, "c": self.c})
        self.context = frames[-1, -CONTEXT:].copy()
        return np.asarray(out, dtype=np.float32).reshape(-1)[: len(frames)]
