"""Percentiles (nearest rank) and the most common value."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def summary_ms(seconds: Sequence[float]) -> dict[str, float]:
    return {
        name: round(percentile(seconds, fraction) * 1000, 2)
        for name, fraction in (("p50", 0.50), ("p95", 0.95), ("p99", 0.99))
    }


def mode(values: Sequence[int]) -> int:
    return Counter(values).most_common(1)[0][0]
