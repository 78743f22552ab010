"""Validating and decoding user audio: real files in, 16 kHz mono float32 or a clear BadInput."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from assistant.errors import BadInput
from assistant.speech import audio
from assistant.speech.audio import SAMPLE_RATE, is_silent, load_array, load_audio, wav_bytes

AUDIO = Path(os.environ.get("ASSISTANT_TEST_AUDIO", Path(__file__).parents[2] / "shared/audio"))
REFS = json.loads((AUDIO / "transcripts.json").read_text())
LIMITS = {"max_bytes": 20_000_000, "max_seconds": 120.0}


def tone(seconds: float, rate: int = SAMPLE_RATE, amp: float = 0.3) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (amp * np.sin(2 * np.pi * 440 * t)).astype(np.float32)


@pytest.mark.parametrize("name", ["jfk.flac", "hotwords.mp3", "stereo_diarization.wav"])
def test_real_files_decode_to_16k_mono_float(name: str) -> None:
    samples = load_audio(AUDIO / name, **LIMITS)
    assert samples.dtype == np.float32 and samples.ndim == 1
    assert samples.size / SAMPLE_RATE == pytest.approx(REFS[name]["duration_s"], abs=0.15)
    assert 0.05 < np.abs(samples).max() <= 1.0
    assert not is_silent(samples)


def test_bytes_and_path_decode_the_same() -> None:
    path = AUDIO / "jfk.flac"
    from_path = load_audio(path, **LIMITS)
    from_bytes = load_audio(path.read_bytes(), **LIMITS)
    assert np.array_equal(from_path, from_bytes)


def test_stereo_is_mixed_to_mono() -> None:
    stereo, rate = sf.read(AUDIO / "stereo_diarization.wav", dtype="float32")
    assert stereo.ndim == 2 and stereo.shape[1] == 2
    mono = load_audio(AUDIO / "stereo_diarization.wav", **LIMITS)
    assert mono.size == pytest.approx(stereo.shape[0] * SAMPLE_RATE / rate, abs=32)


def test_zero_bytes(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="empty"):
        load_audio(b"", **LIMITS)
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    with pytest.raises(BadInput, match="empty"):
        load_audio(empty, **LIMITS)


def test_text_file_named_wav(tmp_path: Path) -> None:
    fake = tmp_path / "notes.wav"
    fake.write_text("These are my meeting notes, not a recording.\n" * 40)
    with pytest.raises(BadInput, match="not an audio file"):
        load_audio(fake, **LIMITS)


def test_random_bytes_named_mp3(tmp_path: Path) -> None:
    fake = tmp_path / "song.mp3"
    fake.write_bytes(np.random.default_rng(0).bytes(50_000))
    with pytest.raises(BadInput, match="not an audio file"):
        load_audio(fake, **LIMITS)


@pytest.mark.parametrize("keep", [0.3, 0.6, 0.95])
def test_truncated_flac(keep: float) -> None:
    data = (AUDIO / "jfk.flac").read_bytes()
    with pytest.raises(BadInput, match="corrupt or truncated"):
        load_audio(data[: int(len(data) * keep)], **LIMITS)


@pytest.mark.parametrize("keep", [0.02, 0.5, 0.9])
def test_truncated_wav(keep: float) -> None:
    data = wav_bytes(tone(2.0), SAMPLE_RATE)
    with pytest.raises(BadInput, match="truncated"):
        load_audio(data[: int(len(data) * keep)], **LIMITS)


def test_too_long_is_refused_from_the_header() -> None:
    with pytest.raises(BadInput, match=r"too long: 11 s \(the limit is 5 s\)"):
        load_audio(AUDIO / "jfk.flac", max_bytes=20_000_000, max_seconds=5)


def test_too_long_with_unknown_length_in_the_header() -> None:
    # A WAV streamed by a recorder says "length unknown" (0xFFFFFFFF): still refused.
    data = bytearray(wav_bytes(tone(8.0), SAMPLE_RATE))
    data[40:44] = b"\xff\xff\xff\xff"
    data[4:8] = b"\xff\xff\xff\xff"
    with pytest.raises(BadInput, match="too long"):
        load_audio(bytes(data), max_bytes=20_000_000, max_seconds=3)


def test_too_long_when_the_container_states_no_length(monkeypatch: pytest.MonkeyPatch) -> None:
    # Some streams (live recordings, some ogg/webm) state no duration: decoding must stop
    # at the limit instead of running through the whole file.
    monkeypatch.setattr(audio, "_declared_seconds", lambda container, stream: None)
    with pytest.raises(BadInput, match="too long"):
        load_audio(AUDIO / "jfk.flac", max_bytes=20_000_000, max_seconds=5)
    assert load_audio(AUDIO / "jfk.flac", **LIMITS).size == 11 * SAMPLE_RATE


def test_too_big_is_refused_before_decoding(tmp_path: Path) -> None:
    big = tmp_path / "big.wav"
    big.write_bytes(b"\0" * 2_000_001)  # not even audio: the size check comes first
    with pytest.raises(BadInput, match=r"too big: 2.0 MB \(the limit is 1.0 MB\)"):
        load_audio(big, max_bytes=1_000_000, max_seconds=120)


def test_missing_file() -> None:
    with pytest.raises(BadInput, match="no such audio file"):
        load_audio("/nonexistent/recording.wav", **LIMITS)


def test_messages_are_one_line() -> None:
    data = (AUDIO / "jfk.flac").read_bytes()
    for bad in (b"", b"text" * 100, data[: len(data) // 2]):
        with pytest.raises(BadInput) as info:
            load_audio(bad, **LIMITS)
        assert "\n" not in str(info.value) and len(str(info.value)) < 200


def test_load_array_resamples_and_mixes() -> None:
    rate = 48_000
    left = (tone(1.0, rate) * 32767).astype(np.int16)
    stereo = np.stack([left, left], axis=1)
    out = load_array(stereo, rate, max_seconds=10)
    assert out.dtype == np.float32 and out.ndim == 1
    assert out.size == pytest.approx(SAMPLE_RATE, abs=64)
    assert np.abs(out).max() == pytest.approx(0.3, abs=0.02)
    with pytest.raises(BadInput, match="too long"):
        load_array(stereo, rate, max_seconds=0.5)
    with pytest.raises(BadInput, match="empty"):
        load_array(np.zeros(0, np.int16), rate, max_seconds=10)


def test_is_silent_uses_the_loudest_moment() -> None:
    quiet = np.zeros(SAMPLE_RATE * 5, np.float32)
    assert is_silent(quiet)
    assert is_silent(np.zeros(0, np.float32))
    blip = quiet.copy()
    blip[SAMPLE_RATE : SAMPLE_RATE + 800] = tone(0.05)  # 50 ms of sound in 5 s of silence
    assert not is_silent(blip)


def test_wav_bytes_round_trip() -> None:
    pcm = (tone(0.5, 22050) * 32767).astype(np.int16)
    data = wav_bytes(pcm, 22050)
    back, rate = sf.read(io.BytesIO(data), dtype="int16")
    assert rate == 22050 and np.array_equal(back, pcm)
    assert wav_bytes(pcm.tobytes(), 22050) == data
    # float input is scaled, not truncated to zero
    assert np.abs(sf.read(io.BytesIO(wav_bytes(tone(0.1), 16000)))[0]).max() > 0.25


def encode(samples: np.ndarray, fmt: str, codec: str, rate: int) -> bytes:
    """Encode 16 kHz float samples with PyAV, as a browser or phone would send them."""
    import av

    buf = io.BytesIO()
    with av.open(buf, "w", format=fmt) as container:
        stream = container.add_stream(codec, rate=rate)
        stream.layout = "mono"
        frame = av.AudioFrame.from_ndarray(
            (samples * 32767).astype(np.int16).reshape(1, -1), format="s16", layout="mono"
        )
        frame.sample_rate = SAMPLE_RATE
        resampler = av.AudioResampler(format=stream.format.name, layout="mono", rate=rate)
        for part in resampler.resample(frame):
            for packet in stream.encode(part):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("fmt", "codec", "rate"),
    [("webm", "libopus", 48000), ("ogg", "libopus", 48000), ("mp4", "aac", 16000)],
)
def test_browser_and_phone_formats(fmt: str, codec: str, rate: int) -> None:
    jfk = load_audio(AUDIO / "jfk.flac", **LIMITS)
    out = load_audio(encode(jfk, fmt, codec, rate), **LIMITS)
    assert out.size / SAMPLE_RATE == pytest.approx(11.0, abs=0.1)
    assert not is_silent(out)
