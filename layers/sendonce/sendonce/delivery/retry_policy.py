"""When a transient failure is tried again: exponential backoff with full jitter, capped."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 5
    base_seconds: float = 2.0
    cap_seconds: float = 300.0

    def may_retry(self, attempts_made: int) -> bool:
        return attempts_made < self.max_attempts

    def delay_seconds(self, attempts_made: int) -> int:
        ceiling = min(self.cap_seconds, self.base_seconds * 2 ** max(attempts_made - 1, 0))
        return max(1, round(random.uniform(ceiling / 2, ceiling)))
