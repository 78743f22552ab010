"""The doctor's speech checks: each speech server reachable and listing its model, a
one-second transcription, a sentence spoken, and that sentence transcribing back to itself,
each with its time. Without speech servers, the round trip runs on the embedded models.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
import numpy as np

from assistant.errors import AssistantError
from assistant.records import now_ms
from assistant.settings import Settings
from assistant.speech.audio import SAMPLE_RATE, load_array

SENTENCE = "The quick brown fox jumps over the lazy dog."
RECOVERED_OK = 0.7
"""Share of the sentence's words that must come back (tiny.en drops or mishears a word)."""


@dataclass
class SpeechCheck:
    """One finding (the doctor's `Check` shape)."""

    name: str
    ok: bool | None
    detail: str


def speech_checks(settings: Settings) -> list[SpeechCheck]:
    """The speech findings, in order: per server, then the round trip."""
    from assistant.speech.stt import load_stt
    from assistant.speech.tts import load_tts

    s = settings.speech
    checks: list[SpeechCheck] = []
    servers = (("speech-to-text", s.stt_url, s.stt_model, s.stt_key),
               ("text-to-speech", s.tts_url, s.tts_model, s.tts_key))  # fmt: skip
    for what, url, model, key in servers:
        if url:
            checks += _server(what, url, model, key, s.timeout_s)
        else:
            checks.append(SpeechCheck(what, None, "the embedded model (no server set)"))
    try:
        stt, tts = load_stt(settings), load_tts(settings)
    except AssistantError as e:
        return [*checks, SpeechCheck("speech models", False, str(e))]
    # the servers themselves: a fallback standing in would hide what is checked here
    stt, tts = getattr(stt, "server", stt), getattr(tts, "server", tts)
    checks.append(_one_second(stt))
    checks.append(_round_trip(stt, tts))
    return checks


def _server(
    what: str, url: str, model: str, key: str | None, timeout_s: float
) -> list[SpeechCheck]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    start = now_ms()
    try:
        r = httpx.get(url + "/models", headers=headers, timeout=min(timeout_s, 5.0))
    except httpx.HTTPError as e:
        return [SpeechCheck(f"{what} server", False, f"{url} is unreachable: {e}")]
    took = now_ms() - start
    reached = SpeechCheck(f"{what} server", True, f"{url} answers ({took:.0f} ms)")
    ids: list[str] = []
    if r.status_code == 200:
        try:
            ids = [str(m.get("id")) for m in r.json().get("data", [])]
        except (ValueError, AttributeError):
            ids = []
    if model in ids:
        listed = SpeechCheck(f"{what} model", True, f"{model} is listed")
    elif ids:
        listed = SpeechCheck(f"{what} model", None,
                             f"{model} is not in the server's list ({', '.join(ids[:8])}); "
                             "the checks below show whether it answers to that name")  # fmt: skip
    else:
        why = f"the server lists no models (GET /models: HTTP {r.status_code})"
        listed = SpeechCheck(f"{what} model", None, why)
    return [reached, listed]


def _one_second(stt: object) -> SpeechCheck:
    """One second of a quiet tone (loud enough not to be skipped as silence) transcribed."""
    t = np.arange(SAMPLE_RATE) / SAMPLE_RATE
    clip = (np.sin(2 * np.pi * 440 * t) * 0.05).astype(np.float32)
    start = now_ms()
    try:
        stt.transcribe(clip)  # type: ignore[attr-defined]
    except AssistantError as e:
        return SpeechCheck("transcription", False, str(e))
    took = now_ms() - start
    return SpeechCheck("transcription", True, f"one second transcribed in {took:.0f} ms")


def _round_trip(stt: object, tts: object) -> SpeechCheck:
    """`SENTENCE` spoken, then transcribed: the words that came back, and both times."""
    start = now_ms()
    try:
        chunks = list(tts.synthesize(SENTENCE))  # type: ignore[attr-defined]
        spoke = now_ms() - start
        if not chunks:
            return SpeechCheck("spoken sentence", False, "the voice gave no audio")
        pcm = np.frombuffer(b"".join(c.samples for c in chunks), "<i2")
        samples = load_array(pcm, chunks[0].sample_rate, max_seconds=60.0)
        heard = stt.transcribe(samples).text  # type: ignore[attr-defined]
    except AssistantError as e:
        return SpeechCheck("spoken sentence", False, str(e))
    back = now_ms() - start - spoke
    said, got = _words(SENTENCE), set(_words(heard))
    share = sum(w in got for w in said) / len(said)
    detail = (f"spoken in {spoke:.0f} ms, transcribed back in {back:.0f} ms as "
              f"{heard!r} ({share:.0%} of its words)")  # fmt: skip
    return SpeechCheck("spoken sentence", share >= RECOVERED_OK, detail)


def _words(text: str) -> list[str]:
    return "".join(c if c.isalnum() else " " for c in text.lower()).split()
