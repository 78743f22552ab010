"""The one percentile: nearest rank, ceil(q * n), checked against values worked out by hand."""

from __future__ import annotations

import pytest

from assistant.stats import percentile, rank, summary


@pytest.mark.parametrize(
    ("n", "q", "expected"),
    [
        # p95 of 12 samples is the worst one: round(0.95 * 11) = 10 (0-based) dropped it
        (12, 0.95, 12),
        (12, 0.5, 6),  # the lower middle one, not round-half-to-even on q * (n - 1)
        (11, 0.5, 6),  # the middle one
        (20, 0.95, 19),  # 0.95 * 20 is 19 exactly, though 0.95 is a little over in binary
        (20, 0.5, 10),
        (100, 0.95, 95),
        (100, 0.99, 99),
        (1, 0.5, 1),
        (1, 0.95, 1),
        (5, 0.0, 1),  # the smallest
        (5, 1.0, 5),  # the largest
        (3, 0.34, 2),
        (3, 0.33, 1),
    ],
)
def test_rank_is_ceil_of_q_times_n(n: int, q: float, expected: int):
    assert rank(n, q) == expected


def test_percentile_of_known_samples():
    values = [float(v) for v in range(1, 13)]  # 1..12, given out of order below
    shuffled = values[::-1]
    assert percentile(shuffled, 0.95) == 12.0
    assert percentile(shuffled, 0.5) == 6.0
    assert percentile([5.0, 1.0], 0.5) == 1.0  # lower middle of two, always the same one
    assert percentile([5.0, 1.0], 0.95) == 5.0
    # Wikipedia's worked example for nearest rank: 15, 20, 35, 40, 50
    five = [15.0, 20.0, 35.0, 40.0, 50.0]
    assert [percentile(five, q) for q in (0.05, 0.3, 0.4, 0.5, 1.0)] == [15, 20, 20, 35, 50]


def test_p50_is_stable_across_neighbouring_counts():
    """Round-half-to-even on q * (n - 1) jumped: p50 of 1..n was the upper middle at n=4
    (round(1.5) = 2) and the lower at n=6 (round(2.5) = 2)."""
    assert [percentile(list(range(1, n + 1)), 0.5) for n in (4, 6, 8)] == [2, 3, 4]


def test_no_samples_and_bad_quantiles():
    assert percentile([], 0.5) == 0.0
    with pytest.raises(ValueError):
        percentile([1.0], 95)  # a percent, not a quantile


def test_summary_carries_n():
    assert summary([3.0, 1.0, 2.0, 10.0]) == {"n": 4, "p50_ms": 2.0, "p95_ms": 10.0}
    assert summary([]) == {"n": 0, "p50_ms": None, "p95_ms": None}
