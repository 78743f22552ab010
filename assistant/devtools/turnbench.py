"""`assistant bench turns [--audio DIR]`: turn ends measured as the field measures them.

On recordings with a `transcripts.json` (like ../shared/audio), the app's own streaming VAD
(Silero, 32 ms frames, as `call.listener` runs it) finds the silences: one of at least
`candidate_ms` between voiced frames is a mid-utterance pause (speech went on: not an end),
the one after the last voiced frame is the real end (the recording is padded with silence to
past the fallback). At each silence offset (200, 300, ... 1500 ms) the real turn-end model
(Smart Turn v3.2) is asked about the utterance's audio up to there, as the listener gives it
(from its preroll before the first word, trailing silence included). `turncurve` then reads
off the share of pauses taken for an end against the delay after real ends, as LiveKit's
eot-bench reports detectors. Nothing is tuned here: the rule is `ListenConfig`'s.

A stereo recording whose transcript names `text_left` and `text_right` is two recordings,
one per channel.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from assistant.call.hearing import FRAME, FRAME_MS, RATE, ListenConfig
from assistant.call.listener import TAIL_FRAMES
from assistant.devtools.turncurve import (
    Rule,
    Silence,
    by_delay,
    end_delays,
    summary_figures,
    unfinished,
)
from assistant.devtools.turncurve import sweep as sweep_rule
from assistant.devtools.voicebench import recordings
from assistant.stats import percentile

OFFSETS = tuple(range(200, 1501, 100))
"""Silence offsets the model is asked at: every candidate/recheck time of the listener's
schedule (200, 500, 800, 1100, 1400) and of any first-verdict delay on a 100 ms grid."""
LIVEKIT = {
    "source": "LiveKit eot-bench (github.com/livekit/eot-bench), its own dataset of real "
    "human-to-agent turns, 14 languages",
    "livekit_turn_detector_v1": {"false_end_share_at_300ms": 0.099, "delay_within_5pct_ms": 543},
    "smart_turn_v3_2": {"false_end_share_at_300ms": 0.352, "delay_within_5pct_ms": 1051},
}


def load_recordings(audio_dir: Path) -> list[tuple[str, np.ndarray]]:
    """(name, 16 kHz mono float32) per recording a `transcripts.json` in `audio_dir` names;
    a stereo one with a transcript per channel as two."""
    from faster_whisper.audio import decode_audio

    files = recordings(audio_dir)  # the index and its files checked as the voice bench does
    names = json.loads((audio_dir / "transcripts.json").read_text())
    out: list[tuple[str, np.ndarray]] = []
    for path in files:
        name = path.relative_to(audio_dir).as_posix()
        meta = names[name]
        if isinstance(meta, dict) and "text_left" in meta and "text_right" in meta:
            left, right = decode_audio(str(path), sampling_rate=RATE, split_stereo=True)
            out += [(f"{name}:left", left), (f"{name}:right", right)]
        else:
            out.append((name, decode_audio(str(path), sampling_rate=RATE)))
    return out


def voiced_frames(samples: np.ndarray, vad: Any, threshold: float) -> np.ndarray:
    """Voiced or not, per 32 ms frame, by a fresh streaming VAD (the listener's)."""
    n = len(samples) // FRAME
    frames = samples[: n * FRAME].reshape(n, FRAME).astype(np.float32)
    return vad.probs(frames) >= threshold


def find_silences(voiced: np.ndarray, min_ms: float) -> tuple[list[tuple[int, int]], int | None]:
    """The pauses, as (first silent frame, frames long), of at least `min_ms` between voiced
    frames; and the frame after the last voiced one (None: nothing voiced)."""
    idx = np.flatnonzero(voiced)
    if not len(idx):
        return [], None
    pauses = []
    for a, b in pairwise(idx.tolist()):
        gap = int(b - a - 1)
        if gap and gap * FRAME_MS >= min_ms:
            pauses.append((int(a) + 1, gap))
    return pauses, int(idx[-1]) + 1


def probe(
    name: str,
    samples: np.ndarray,
    model: Any,
    vad: Any,
    config: ListenConfig,
    offsets: Sequence[int] = OFFSETS,
    timings: list[float] | None = None,
    stt: Any = None,
) -> list[Silence]:
    """Every pause and the end of one recording, each with the model's verdicts (and with
    `stt`, the words up to it, to the last word's release as the listener transcribes)."""
    import time

    tail = int(RATE * (max(offsets) + 500) / 1000)
    padded = np.concatenate([samples.astype(np.float32), np.zeros(tail, dtype=np.float32)])
    voiced = voiced_frames(padded, vad, config.threshold)
    pauses, end = find_silences(voiced, config.candidate_ms)
    if end is None:
        return []
    first = int(np.flatnonzero(voiced)[0])
    start = max(0, first - int(config.preroll_ms // FRAME_MS)) * FRAME
    spans = [("pause", at, n * FRAME_MS) for at, n in pauses]
    spans.append(("end", end, float(max(offsets))))
    out = []
    for kind, at, length in spans:
        probs = {}
        for d in offsets:
            if d > length:
                break
            upto = at * FRAME + int(RATE * d / 1000)
            t0 = time.perf_counter()
            probs[d] = round(float(model.probability(padded[start:upto])), 4)
            if timings is not None:
                timings.append((time.perf_counter() - t0) * 1000)
        text = None
        if stt is not None:
            text = stt.transcribe(padded[start : (at + TAIL_FRAMES) * FRAME]).text
        out.append(Silence(name, kind, round(length), probs, text))  # type: ignore[arg-type]
    return out


def measure(
    audio_dirs: Sequence[Path],
    config: ListenConfig | None = None,
    offsets: Sequence[int] = OFFSETS,
    model: Any = None,
    stt: Any = None,
) -> dict:
    """The bench: every recording of `audio_dirs` probed, the curve and its summary; with
    `stt`, also the curve with the settled text as a second signal (`Rule.text_gate`)."""
    from assistant.speech.turn_end import load_turn_end
    from assistant.speech.vad import StreamingVad, vad_session

    config = config or ListenConfig()
    model = model or load_turn_end()
    session = vad_session()
    silences: list[Silence] = []
    timings: list[float] = []
    names: dict[str, list[str]] = {}
    for audio_dir in audio_dirs:
        for name, samples in load_recordings(audio_dir):
            names.setdefault(str(audio_dir), []).append(name)
            vad = StreamingVad(session)  # a fresh stream per recording, as per call
            silences += probe(name, samples, model, vad, config, offsets, timings, stt)
    return report(silences, config, offsets, audio_dirs, names, timings)


def report(
    silences: Sequence[Silence],
    config: ListenConfig,
    offsets: Sequence[int],
    audio_dirs: Sequence[Path],
    names: dict[str, list[str]],
    timings: Sequence[float] = (),
) -> dict:
    rule = Rule(config.candidate_ms, config.recheck_ms, config.fallback_ms, config.end_threshold)
    pauses = [s.length_ms for s in silences if s.kind == "pause"]
    firsts = [d for d in offsets if d <= config.fallback_ms]
    sweep = sweep_rule(silences, firsts, rule)
    figures = summary_figures(sweep)
    listener = by_delay(silences, firsts, rule)
    delays = end_delays(silences, rule)
    result = {
        "bench": "turns",
        "model": "Smart Turn v3.2 (smart-turn-v3.2-cpu.onnx, one thread)",
        "audio_dirs": [str(d) for d in audio_dirs],
        "recordings": [n for group in names.values() for n in group],
        "rule": asdict(rule),
        "n_pauses": len(pauses),
        "n_ends": sum(s.kind == "end" for s in silences),
        "pause_ms": {
            "p50": round(percentile(pauses, 0.5)) if pauses else None,
            "max": round(max(pauses)) if pauses else None,
            "n": len(pauses),
        },
        "model_ms": {
            "p50": round(percentile(timings, 0.5), 1) if timings else None,
            "p95": round(percentile(timings, 0.95), 1) if timings else None,
            "n": len(timings),
        },
        "listener_by_delay": listener,
        "listener_end_delay": delays,
        "first_verdict_sweep": sweep,
        "figures": figures,
        "with_text": _with_text(silences, firsts, rule),
        "by_dir": {d: _part(silences, set(group), firsts, rule) for d, group in names.items()},
        "livekit_anchors": LIVEKIT,
        "silences": [asdict(s) for s in silences],
    }
    result["summary"] = _summary(result)
    return result


def _part(silences: Sequence[Silence], names: set[str], firsts: list[int], rule: Rule) -> dict:
    """The figures of one directory's recordings (names are unique within a directory only:
    the same name in two directories is counted in both)."""
    part = [s for s in silences if s.recording in names]
    return {
        "figures": summary_figures(sweep_rule(part, firsts, rule)),
        "listener_by_delay": by_delay(part, SCHEDULE, rule),
        "listener_end_delay": end_delays(part, rule),
    }


def _with_text(silences: Sequence[Silence], firsts: list[int], rule: Rule) -> dict | None:
    """The same, a silence whose words end on one a sentence does not end on never taken for
    an end by the model (None: no transcripts)."""
    if not any(s.text is not None for s in silences):
        return None
    gated = replace(rule, text_gate=True)
    return {
        "unfinished": {
            "pauses": sum(s.kind == "pause" and unfinished(s.text) for s in silences),
            "ends": sum(s.kind == "end" and unfinished(s.text) for s in silences),
        },
        "figures": summary_figures(sweep_rule(silences, firsts, gated)),
        "listener_by_delay": by_delay(silences, SCHEDULE, gated),
        "listener_end_delay": end_delays(silences, gated),
    }


SCHEDULE = (200, 500, 800, 1100, 1400, 1500)
"""The delays at which the listener's rule can decide (candidate, rechecks, fallback)."""


def _from(ms: int | None) -> str:
    return "at no delay up to the fallback" if ms is None else f"from {ms} ms"


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{share * 100:.1f}%"


def _summary(r: dict) -> list[str]:
    f, d = r["figures"], r["listener_end_delay"]
    lines = [
        f"turns: {len(r['recordings'])} recordings, {r['n_pauses']} mid-utterance pauses, "
        f"{r['n_ends']} real ends; model {r['model_ms']['p50']} ms a verdict (p50)",
        "the listener's rule (first verdict at "
        f"{r['rule']['first_ms']} ms, again every {r['rule']['recheck_ms']} ms, fallback "
        f"{r['rule']['fallback_ms']} ms):",
        "  delay ms | pauses taken for ends | real ends detected",
    ]
    for row in r["listener_by_delay"]:
        lines.append(
            f"  {row['delay_ms']:>8} | {_pct(row['false_end_share']):>8} of {row['n_pauses']}"
            f" | {_pct(row['ends_detected_share']):>8} of {row['n_ends']}"
        )
    lines += [
        f"  delay after real ends: p50 {d['p50_ms']} / p95 {d['p95_ms']} ms (n={d['n']}, "
        f"{d['by_fallback']} by the fallback)",
        "first verdict at d ms (eot-bench's trade-off):",
        "  d ms | pauses taken for ends | delay after real ends p50 / p95",
    ]
    for row in r["first_verdict_sweep"]:
        e = row["end_delay"]
        lines.append(
            f"  {row['first_ask_ms']:>4} | {_pct(row['false_end_share']):>8} of "
            f"{row['n_pauses']} | {e['p50_ms']} / {e['p95_ms']} ms (n={e['n']})"
        )
    within = f["smallest_delay_within_5pct_ms"]
    lines.append(
        f"false ends at 300 ms: {_pct(f['false_end_share_at_300ms'])} (n={f['n_pauses']} "
        "pauses; eot-bench: LiveKit v1 9.9%, Smart Turn v3.2 35.2%); <= 5% false: "
        + (
            f"from {within} ms, real ends then decided after p50 {f['end_delay_p50_ms_there']}"
            f" ms (n={f['n_ends']})"
            if within is not None
            else f"at no delay up to the fallback (n={f['n_ends']} ends)"
        )
        + " (eot-bench: 543 and 1,051 ms)"
    )
    if r["with_text"]:
        t, u = r["with_text"]["figures"], r["with_text"]["unfinished"]
        lines.append(
            f"with the settled text ({u['pauses']} pauses and {u['ends']} ends end on a word a"
            f" sentence does not end on): false at 300 ms {_pct(t['false_end_share_at_300ms'])}"
            f"; <= 5% {_from(t['smallest_delay_within_5pct_ms'])}"
        )
    for d, part in r["by_dir"].items():
        f = part["figures"]
        lines.append(
            f"  {d}: false at 300 ms {_pct(f['false_end_share_at_300ms'])} of {f['n_pauses']}"
            f" pauses; <= 5% {_from(f['smallest_delay_within_5pct_ms'])} ({f['n_ends']} ends)"
        )
    return lines
