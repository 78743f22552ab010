"""The arithmetic of `bench turns` (issue 51, item 7): the listener's rule read off given
verdicts, no model."""

from __future__ import annotations

from assistant.devtools.turncurve import (
    Rule,
    Silence,
    by_delay,
    decided_at,
    end_delays,
    summary_figures,
    sweep,
    unfinished,
)

RULE = Rule(first_ms=200, recheck_ms=300, fallback_ms=1500, threshold=0.5)
GRID = range(200, 1501, 100)


def flat(p: float, upto: int = 1500) -> dict[int, float]:
    return {d: p for d in GRID if d <= upto}


def test_the_rule_asks_at_its_schedule_only():
    # 0.9 at 300 ms is never seen: the listener asks at 200, then 500
    s = Silence("a", "end", 1500, flat(0.1) | {300: 0.9, 500: 0.6})
    assert decided_at(s, RULE) == 500
    # "not finished" all through: the fallback decides
    assert decided_at(Silence("a", "end", 1500, flat(0.1)), RULE) == 1500


def test_a_pause_is_taken_for_an_end_only_while_it_lasts():
    later = Silence("a", "pause", 450, flat(0.1, 450) | {500: 0.9})
    assert decided_at(later, RULE) is None  # speech resumed before the 500 ms verdict
    early = Silence("a", "pause", 450, flat(0.9, 450))
    assert decided_at(early, RULE) == 200
    # a pause past the fallback is an end whatever the model says
    assert decided_at(Silence("a", "pause", 1600, flat(0.0)), RULE) == 1500


def test_the_curve_counts_false_ends_and_detected_ends_by_delay():
    silences = [
        Silence("a", "pause", 1100, flat(0.1, 1100) | {800: 0.7}),  # false at 800
        Silence("a", "pause", 300, flat(0.9, 300)),  # false at 200
        Silence("b", "pause", 900, flat(0.1, 900)),  # never
        Silence("b", "pause", 250, flat(0.1, 250)),  # never
        Silence("a", "end", 1500, flat(0.9)),  # 200
        Silence("b", "end", 1500, flat(0.1) | {1100: 0.6}),  # 1100
    ]
    rows = {r["delay_ms"]: r for r in by_delay(silences, [200, 500, 800, 1500], RULE)}
    assert rows[200]["false_end_share"] == 0.25 and rows[200]["n_pauses"] == 4
    assert rows[800]["false_end_share"] == 0.5
    assert rows[500]["ends_detected_share"] == 0.5 and rows[500]["n_ends"] == 2
    assert rows[1500]["ends_detected_share"] == 1.0
    d = end_delays(silences, RULE)
    assert (d["p50_ms"], d["p95_ms"], d["n"], d["by_fallback"]) == (200, 1100, 2, 0)


def test_the_sweep_and_livekits_two_figures():
    silences = [
        Silence("a", "pause", 250, flat(0.9, 250)),  # escapes once the first ask is past 250
        Silence("a", "pause", 600, flat(0.1, 600) | {500: 0.8}),  # asked at 500: first 200
        Silence("a", "pause", 700, flat(0.1, 700) | {600: 0.8}),  # asked at 600: first 300
        *[Silence("c", "pause", 1000, flat(0.1, 1000)) for _ in range(17)],
        Silence("a", "end", 1500, flat(0.9)),
    ]
    rows = sweep(silences, [200, 300, 400, 700], RULE)
    assert [r["false_end_share"] for r in rows] == [0.1, 0.05, 0.0, 0.0]
    assert [r["end_delay"]["p50_ms"] for r in rows] == [200, 300, 400, 700]
    f = summary_figures(rows)
    assert f["false_end_share_at_300ms"] == 0.05 and f["n_pauses"] == 20 and f["n_ends"] == 1
    assert f["smallest_delay_within_5pct_ms"] == 300
    assert f["end_delay_p50_ms_there"] == 300


def test_the_settled_text_keeps_an_unfinished_sentence_open():
    gated = Rule(text_gate=True)
    to = Silence("a", "pause", 900, flat(0.9, 900), text="I want a flight to")
    done = Silence("a", "end", 1500, flat(0.9), text="I want a flight to Paris.")
    assert unfinished(to.text) and not unfinished(done.text) and not unfinished(None)
    assert decided_at(to, RULE) == 200 and decided_at(to, gated) is None
    assert decided_at(done, gated) == 200
    # an unfinished one is still ended by the fallback
    long = Silence("a", "pause", 1600, flat(0.9), text="and the")
    assert decided_at(long, gated) == 1500
