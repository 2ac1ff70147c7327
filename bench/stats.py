"""Percentiles (nearest rank), the most common value, and a ratio taken over rounds.

A ratio that decides a target is measured in at least ROUNDS rounds of one run, alternating with
what it is compared against, and is the median of the rounds' ratios: one slow stretch of a shared
machine moves one round, not the figure. The rounds themselves are kept (`spread`), so a reader
sees what the figure is worth.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Any, TypeVar

T = TypeVar("T")

# Rounds of every ratio that decides a target.
ROUNDS = 3


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


def in_rounds(samples: Sequence[T], rounds: int = ROUNDS) -> list[list[T]]:
    """`samples`, taken in order, cut into `rounds` consecutive parts of (nearly) equal size."""
    if len(samples) < rounds:
        raise ValueError(f"{len(samples)} samples cannot make {rounds} rounds")
    bounds = [len(samples) * number // rounds for number in range(rounds + 1)]
    return [list(samples[start:end]) for start, end in itertools.pairwise(bounds)]


def median_of_rounds(values: Sequence[float], digits: int = 2) -> float:
    """The figure of a ratio measured round by round: the median of its rounds."""
    return round(statistics.median(values), digits)


def spread(values: Sequence[float], digits: int = 3) -> dict[str, Any]:
    """A ratio's rounds as results.json keeps them: each round's value, the least and the most."""
    rounded = [round(value, digits) for value in values]
    return {"rounds": rounded, "min": min(rounded), "max": max(rounded)}
