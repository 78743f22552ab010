"""Summaries of latency samples: one percentile definition for the benchmarks and the page.

Nearest rank: the q-quantile of n samples is the ceil(q * n)-th smallest (1-based), so it is
always one of the samples, the p95 of 12 samples is the worst one (rank 12), and the p50 of
an even count is the lower middle one. Rounding on q * (n - 1) instead, as this module once
did, dropped the worst sample from a p95 at n=12 and let p50 jump between neighbours.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

_EPS = 1e-9
"""q * n in floating point: 0.95 * 20 must be rank 19, not 20 (0.95 is a little over)."""


def rank(n: int, q: float) -> int:
    """The 1-based nearest rank of the q-quantile among n samples (n >= 1)."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"a quantile is between 0 and 1, not {q}")
    return min(n, max(1, math.ceil(q * n - _EPS)))


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank, ceil(q * n); 0.0 for no samples."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[rank(len(ordered), q) - 1]


def summary(
    values: Sequence[float], digits: int = 1, quantiles: Sequence[float] = (0.5, 0.95)
) -> dict[str, float | int | None]:
    """{"n", "p50_ms", "p95_ms"} of millisecond samples, as every benchmark reports them (one
    "pNN_ms" per quantile asked for: (0.5, 0.95, 0.99) adds "p99_ms"): a percentile means little
    without its n. None for no samples, never a made-up 0."""
    keys = [f"p{round(q * 100)}_ms" for q in quantiles]
    if not values:
        return {"n": 0} | dict.fromkeys(keys)
    return {"n": len(values)} | {
        key: round(percentile(values, q), digits) for key, q in zip(keys, quantiles, strict=True)
    }
