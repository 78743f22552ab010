"""Has the person finished? Smart Turn v3.2, a turn-end model that reads the audio itself.

A pause alone cannot tell "Yes." (done) from "Ask not what your country ..." (a breath
before the rest): people pause 300-900 ms inside a sentence, and a finished short answer
should not wait for the longest of those. Smart Turn (pipecat-ai, BSD-2) hears intonation
and the words' shape: a Whisper-tiny encoder over the last 8 s of the utterance, 80 log-mel
bins, one sigmoid out. The 8 MB ONNX file ships inside the `pipecat-ai` wheel, which the
set-up installs without its dependencies (`scripts/setup.sh`): the file and its feature
extractor are read from the wheel's files by path, and the `pipecat` package itself is never
imported (it pulls in loguru and replaces `asyncio.wait_for` on Python 3.11).

The input format follows pipecat's own `LocalSmartTurnAnalyzerV3`: 16 kHz float audio of the
utterance (from just before its first word to now, trailing silence included), its last 8 s,
zero-padded at the start to 8 s, Whisper log-mel features with waveform normalisation.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from assistant.errors import AssistantError

RATE = 16000
WINDOW_S = 8
MODEL_FILE = "pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx"
FEATURES_FILE = "pipecat/audio/turn/smart_turn/_whisper_features.py"


class TurnEndUnavailable(AssistantError):
    pass


def _wheel_file(relative: str) -> Path:
    try:
        dist = metadata.distribution("pipecat-ai")
    except metadata.PackageNotFoundError as e:
        raise TurnEndUnavailable(
            "the turn-end model is not installed: run ./scripts/setup.sh (it installs the "
            "pipecat-ai wheel without its dependencies)"
        ) from e
    path = Path(str(dist.locate_file(relative)))
    if not path.is_file():
        raise TurnEndUnavailable(f"the pipecat-ai wheel has no {relative}")
    return path


def _features_module() -> ModuleType:
    # by path, under a private name: importing `pipecat.audio...` would run pipecat/__init__
    spec = importlib.util.spec_from_file_location(
        "assistant_smart_turn_features", _wheel_file(FEATURES_FILE)
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class TurnEnd:
    """P(the turn is complete) for an utterance's audio; one onnxruntime thread (about 100 ms
    a call on this CPU), so it never takes both cores from the engine."""

    def __init__(self, threads: int = 1):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.inter_op_num_threads = 1
        options.intra_op_num_threads = threads
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session: Any = ort.InferenceSession(
            str(_wheel_file(MODEL_FILE)), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._features = _features_module().compute_whisper_log_mel_features
        self._lock = threading.Lock()  # one session, one call at a time

    def probability(self, audio: np.ndarray) -> float:
        """`audio`: 16 kHz mono float32, the utterance up to now."""
        x = np.asarray(audio, dtype=np.float32)[-WINDOW_S * RATE :]
        if len(x) < WINDOW_S * RATE:
            x = np.pad(x, (WINDOW_S * RATE - len(x), 0))
        features = self._features(x, do_normalize=True)[None]
        with self._lock:
            out = self.session.run(None, {"input_features": features})
        return float(np.asarray(out[0]).reshape(-1)[0])

    def warm(self) -> TurnEnd:
        self.probability(np.zeros(RATE, dtype=np.float32))
        return self


_model: TurnEnd | None = None
_model_lock = threading.Lock()


def load_turn_end() -> TurnEnd:
    """The process-wide model, loaded once (raises TurnEndUnavailable if not installed)."""
    global _model
    with _model_lock:
        if _model is None:
            _model = TurnEnd().warm()
        return _model


_turn_end_pool: Any = None


async def run_turn_end(fn: Callable[[np.ndarray], float], audio: np.ndarray) -> float:
    """The turn-end model on its own one-thread pool: never queued behind Whisper."""
    global _turn_end_pool
    if _turn_end_pool is None:
        from concurrent.futures import ThreadPoolExecutor

        _turn_end_pool = ThreadPoolExecutor(1, thread_name_prefix="turn-end")
    return await asyncio.get_running_loop().run_in_executor(_turn_end_pool, fn, audio)
