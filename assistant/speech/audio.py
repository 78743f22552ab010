"""User audio in: anything uploaded or recorded becomes 16 kHz mono float32, or a BadInput.

Decoding goes through PyAV (bundled FFmpeg, the same decoder faster-whisper uses), so every
common format works (wav, flac, mp3, ogg/opus, webm, m4a). Sizes are checked before any
decoding, durations as early as the container states them.
"""

from __future__ import annotations

import io
import os
import struct
import wave
from pathlib import Path

import av
import numpy as np

from assistant.errors import BadInput

SAMPLE_RATE = 16000
"""What Whisper and Silero VAD expect."""
SILENCE_DBFS = -50.0
"""Below this, the loudest 30 ms of a clip is treated as silence (no model call needed)."""

# Containers whose header states the exact length, so a shortfall means a truncated file.
# Compressed streams (mp3 without a Xing header, ogg) only estimate it; checking those would
# reject valid files.
_EXACT_LENGTH = {"wav", "flac", "aiff", "w64", "caf"}

AudioSource = bytes | bytearray | memoryview | str | os.PathLike

READABLE_FORMATS = "wav,w64,flac,mp3,ogg,matroska,webm,mov,mp4,m4a,3gp,aiff,caf,aac,ac3,amr,au,wv"
"""The only demuxers the decoder may use (FFmpeg's `format_whitelist`): audio containers that
hold their sound themselves. Not playlists (HLS), concat lists (`ffconcat`), image sequences
or anything else that makes FFmpeg open other files or URLs: an "audio" upload could name a
file on the server and get its transcript back (issue 38)."""


def load_audio(data: AudioSource, *, max_bytes: int, max_seconds: float) -> np.ndarray:
    """Decode user audio (bytes or a path) to 16 kHz mono float32, or raise BadInput."""
    size = _size(data)
    if size == 0:
        raise BadInput("the audio is empty (0 bytes)")
    if size > max_bytes:
        raise BadInput(f"the audio is too big: {_human(size)} (the limit is {_human(max_bytes)})")
    source = io.BytesIO(bytes(data)) if _is_bytes(data) else os.fspath(data)
    _check_wav_header(_head(data), size)
    # a path is opened as a file, bytes through no protocol at all; nested opens by neither
    options = {"format_whitelist": READABLE_FORMATS,
               "protocol_whitelist": "none" if _is_bytes(data) else "file"}  # fmt: skip
    try:
        container = av.open(source, mode="r", metadata_errors="ignore", options=options)
    except (av.FFmpegError, OSError, ValueError) as e:
        raise BadInput(
            "not an audio file (the format could not be recognised; wav, flac, mp3, ogg, "
            "webm, m4a and the like are read)"
        ) from e
    with container:
        return _decode(container, max_seconds)


def load_array(samples: np.ndarray, sample_rate: int, *, max_seconds: float) -> np.ndarray:
    """A recorded array (any dtype, mono or (n, channels)) as 16 kHz mono float32."""
    x = np.asarray(samples)
    if x.size == 0:
        raise BadInput("the recording is empty")
    if np.issubdtype(x.dtype, np.integer):
        x = x.astype(np.float32) / float(np.iinfo(x.dtype).max + 1)
    x = x.astype(np.float32)
    if x.ndim == 2:
        # Gradio gives (n, channels); a (channels, n) array has far fewer rows than columns.
        x = x.mean(axis=1 if x.shape[0] >= x.shape[1] else 0)
    x = x.reshape(-1)
    if x.size / sample_rate > max_seconds:
        raise BadInput(_too_long(x.size / sample_rate, max_seconds))
    if sample_rate == SAMPLE_RATE:
        return x
    return _resample(x, sample_rate)


def is_silent(samples: np.ndarray, threshold_dbfs: float = SILENCE_DBFS) -> bool:
    """True when even the loudest 30 ms window is below `threshold_dbfs` (float samples)."""
    x = np.asarray(samples, dtype=np.float32).reshape(-1)
    if x.size == 0:
        return True
    win = int(0.03 * SAMPLE_RATE)
    n = max(1, x.size // win)
    frames = x[: n * win].reshape(n, -1) if x.size >= win else x.reshape(1, -1)
    loudest = float(np.sqrt(np.mean(frames.astype(np.float64) ** 2, axis=1)).max())
    return 20 * np.log10(loudest + 1e-12) < threshold_dbfs


def wav_bytes(samples_int16: np.ndarray | bytes, sample_rate: int) -> bytes:
    """A complete mono 16-bit WAV file in memory."""
    pcm = samples_int16 if isinstance(samples_int16, bytes) else _as_int16(samples_int16)
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(pcm)
    return buf.getvalue()


def _decode(container: av.container.InputContainer, max_seconds: float) -> np.ndarray:
    stream = next((s for s in container.streams if s.type == "audio"), None)
    if stream is None:
        raise BadInput("not an audio file (it has no audio track)")
    declared = _declared_seconds(container, stream)
    if declared is not None and declared > max_seconds:
        raise BadInput(_too_long(declared, max_seconds))
    resampler = av.AudioResampler(format="s16", layout="mono", rate=SAMPLE_RATE)
    limit = int(max_seconds * SAMPLE_RATE)
    parts: list[np.ndarray] = []
    total = 0
    try:
        for frame in container.decode(stream):
            for out in resampler.resample(frame):
                parts.append(out.to_ndarray().reshape(-1))
                total += parts[-1].size
            # Containers that state no length are stopped here instead of decoded in full.
            if total > limit:
                raise BadInput(_too_long(total / SAMPLE_RATE, max_seconds))
        for out in resampler.resample(None):
            parts.append(out.to_ndarray().reshape(-1))
    except (av.FFmpegError, ValueError, RuntimeError, OSError) as e:
        raise BadInput(f"the audio is corrupt or truncated ({_reason(e)})") from e
    audio = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int16)
    if audio.size == 0:
        raise BadInput("the audio file contains no sound (0 samples decoded)")
    decoded = audio.size / SAMPLE_RATE
    if decoded > max_seconds:
        raise BadInput(_too_long(decoded, max_seconds))
    if (
        declared is not None
        and container.format.name in _EXACT_LENGTH
        and decoded < declared * 0.98 - 0.05
    ):
        raise BadInput(
            f"the audio is truncated: {decoded:.1f} s decoded of {declared:.1f} s declared"
        )
    return audio.astype(np.float32) / 32768.0


def _check_wav_header(head: bytes, size: int) -> None:
    """A WAV whose data chunk claims more bytes than the file holds was cut short.

    FFmpeg silently decodes what is there (it sizes WAVs from the file), so check it here.
    """
    if head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return
    pos = 12
    while pos + 8 <= len(head):
        chunk_id, chunk_size = head[pos : pos + 4], struct.unpack("<I", head[pos + 4 : pos + 8])[0]
        if chunk_id == b"data":
            available = size - (pos + 8)
            # 0 and 0xFFFFFFFF mean "unknown" (written by streaming recorders): nothing to check.
            if 0 < chunk_size < 0xFFFFFFF0 and chunk_size > available + 1:
                raise BadInput(
                    f"the audio is truncated: the WAV header promises {_human(chunk_size)} "
                    f"of sound but the file holds {_human(max(available, 0))}"
                )
            return
        pos += 8 + chunk_size + (chunk_size & 1)


def _head(data: AudioSource, n: int = 4096) -> bytes:
    if _is_bytes(data):
        return bytes(memoryview(data)[:n])
    with open(os.fspath(data), "rb") as f:
        return f.read(n)


def _declared_seconds(
    container: av.container.InputContainer, stream: av.AudioStream
) -> float | None:
    if stream.duration is not None and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    if container.duration is not None:
        return container.duration / av.time_base
    return None


def resample_int16(pcm: bytes, rate: int, to: int) -> bytes:
    """Mono int16 PCM at `rate` as mono int16 PCM at `to` (FFmpeg's resampler)."""
    if rate == to or not pcm:
        return pcm
    frame = av.AudioFrame.from_ndarray(
        np.frombuffer(pcm, "<i2").reshape(1, -1), format="s16", layout="mono"
    )
    frame.sample_rate = rate
    resampler = av.AudioResampler(format="s16", layout="mono", rate=to)
    frames = [*resampler.resample(frame), *resampler.resample(None)]
    return b"".join(f.to_ndarray().astype("<i2").tobytes() for f in frames)


def _resample(x: np.ndarray, sample_rate: int) -> np.ndarray:
    frame = av.AudioFrame.from_ndarray(x.reshape(1, -1), format="flt", layout="mono")
    frame.sample_rate = sample_rate
    resampler = av.AudioResampler(format="flt", layout="mono", rate=SAMPLE_RATE)
    parts = [f.to_ndarray().reshape(-1) for f in resampler.resample(frame)]
    parts += [f.to_ndarray().reshape(-1) for f in resampler.resample(None)]
    return np.concatenate(parts).astype(np.float32) if parts else np.zeros(0, np.float32)


def _as_int16(samples: np.ndarray) -> bytes:
    x = np.asarray(samples)
    if np.issubdtype(x.dtype, np.floating):
        x = np.clip(x, -1.0, 1.0) * 32767.0
    return x.astype("<i2").tobytes()


def _size(data: AudioSource) -> int:
    if _is_bytes(data):
        return memoryview(data).nbytes
    path = Path(os.fspath(data))
    if not path.is_file():
        raise BadInput(f"no such audio file: {path}")
    return path.stat().st_size


def _is_bytes(data: AudioSource) -> bool:
    return isinstance(data, bytes | bytearray | memoryview)


def _too_long(seconds: float, limit: float) -> str:
    return f"the audio is too long: {seconds:.0f} s (the limit is {limit:.0f} s)"


def _human(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f} MB"
    return f"{n / 1000:.1f} kB" if n >= 1000 else f"{n} bytes"


def _reason(e: Exception) -> str:
    return str(getattr(e, "strerror", None) or e).splitlines()[0][:120]
