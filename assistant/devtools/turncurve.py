"""The arithmetic of `assistant bench turns`: from the turn-end model's verdicts at each
silence offset, when the listener's rule takes a silence for the end of the turn.

Pure (no model, no audio): a `Silence` carries the probabilities it was given, and the curve
is read off them, as LiveKit's eot-bench reads its detectors: the share of mid-utterance
pauses taken for an end (false ends) against the delay after real ends.

The rule is the listener's (`call.listener`): the model is first asked after `first_ms` of
silence (`ListenConfig.candidate_ms`), asked again every `recheck_ms` while it says "not
finished", and a silence of `fallback_ms` ends the turn whatever it says. A mid-utterance
pause can only be taken for an end while it lasts: once speech resumes, nothing is decided.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from assistant.stats import percentile


@dataclass(frozen=True)
class Silence:
    """One silence of a recording and what the model said of it."""

    recording: str
    kind: Literal["pause", "end"]
    """"pause": speech went on after it (not an end); "end": after the last word."""
    length_ms: float
    """How long it lasted (an end: as long as it was listened to)."""
    probs: dict[int, float] = field(default_factory=dict)
    """P(the turn is complete) asked at that many ms of silence, the audio up to there."""
    text: str | None = None
    """The utterance's words up to the silence (None: not transcribed)."""


@dataclass(frozen=True)
class Rule:
    """The listener's schedule (defaults: `ListenConfig`'s)."""

    first_ms: int = 200
    recheck_ms: int = 300
    fallback_ms: int = 1500
    threshold: float = 0.5
    text_gate: bool = False
    """The settled text as well: words that end on one that cannot end a sentence ("... to
    the") are not an end, whatever the model says (only the fallback ends them)."""


def decided_at(silence: Silence, rule: Rule) -> float | None:
    """The silence offset (ms) at which the rule takes this silence for an end; None: it
    does not (speech resumed first). A verdict not in `probs` is not counted as an end."""
    ask = rule.first_ms
    if rule.text_gate and unfinished(silence.text):
        ask = rule.fallback_ms  # the model is not heeded
    while ask < rule.fallback_ms and ask <= silence.length_ms:
        p = silence.probs.get(ask)
        if p is not None and p >= rule.threshold:
            return float(ask)
        ask += rule.recheck_ms
    if silence.length_ms >= rule.fallback_ms:
        return float(rule.fallback_ms)
    return None


NEVER_LAST = frozenset(
    (
        "a an the and but or nor because if than to of for with from my your our their its um uh"
    ).split()
)
"""Words a spoken request does not end on: articles, conjunctions, a few prepositions,
possessives, fillers (a fixed list, not fitted to the data; words a command can end on,
"in", "on", "her", "that", "you", are left out)."""


def unfinished(text: str | None) -> bool:
    """The words stop on one a sentence does not end on (no words: not known, False)."""
    words = (text or "").lower().replace(",", " ").split()
    return bool(words) and words[-1].strip(".?!;:-\"'") in NEVER_LAST


def _share(hits: int, n: int) -> float | None:
    return round(hits / n, 3) if n else None


def by_delay(silences: Sequence[Silence], delays: Sequence[int], rule: Rule) -> list[dict]:
    """For each delay d: the share of pauses the rule took for an end by d (false ends),
    and the share of real ends it had detected by d, each with its n."""
    pauses = [decided_at(s, rule) for s in silences if s.kind == "pause"]
    ends = [decided_at(s, rule) for s in silences if s.kind == "end"]
    return [
        {
            "delay_ms": d,
            "false_end_share": _share(sum(t is not None and t <= d for t in pauses), len(pauses)),
            "n_pauses": len(pauses),
            "ends_detected_share": _share(sum(t is not None and t <= d for t in ends), len(ends)),
            "n_ends": len(ends),
        }
        for d in delays
    ]


def end_delays(silences: Sequence[Silence], rule: Rule) -> dict:
    """How long after real ends the rule decided: p50/p95, n, and how many by the fallback."""
    times = [decided_at(s, rule) for s in silences if s.kind == "end"]
    decided = [t for t in times if t is not None]
    return {
        "p50_ms": round(percentile(decided, 0.5)) if decided else None,
        "p95_ms": round(percentile(decided, 0.95)) if decided else None,
        "n": len(times),
        "by_fallback": sum(t == rule.fallback_ms for t in decided),
        "never": len(times) - len(decided),
    }


def sweep(silences: Sequence[Silence], firsts: Sequence[int], rule: Rule) -> list[dict]:
    """The trade-off as eot-bench draws it: the first verdict waited for `first` ms of
    silence (the rest of the rule unchanged); per setting, the share of pauses taken for an
    end and the delay after real ends."""
    rows = []
    for first in firsts:
        at = Rule(first, rule.recheck_ms, rule.fallback_ms, rule.threshold, rule.text_gate)
        pauses = [decided_at(s, at) for s in silences if s.kind == "pause"]
        rows.append(
            {
                "first_ask_ms": first,
                "false_end_share": _share(sum(t is not None for t in pauses), len(pauses)),
                "n_pauses": len(pauses),
                "end_delay": end_delays(silences, at),
            }
        )
    return rows


FALSE_BUDGET = 0.05
"""eot-bench's budget: the delay a detector needs to take at most 5% of pauses for ends."""


def summary_figures(rows: Sequence[dict]) -> dict:
    """The two figures LiveKit quotes, from a `sweep`: false ends when the first verdict is
    at 300 ms, and the smallest first-verdict delay with false ends <= 5% (with the delay
    after real ends it costs)."""
    at_300 = next((r for r in rows if r["first_ask_ms"] == 300), None)
    within = [
        r for r in rows if r["false_end_share"] is not None and r["false_end_share"] <= FALSE_BUDGET
    ]
    best = min(within, key=lambda r: r["first_ask_ms"]) if within else None
    return {
        "false_end_share_at_300ms": at_300 and at_300["false_end_share"],
        "end_delay_p50_ms_at_300ms": at_300 and at_300["end_delay"]["p50_ms"],
        "smallest_delay_within_5pct_ms": best and best["first_ask_ms"],
        "false_end_share_there": best and best["false_end_share"],
        "end_delay_p50_ms_there": best and best["end_delay"]["p50_ms"],
        "n_pauses": rows[0]["n_pauses"] if rows else 0,
        "n_ends": rows[0]["end_delay"]["n"] if rows else 0,
    }
