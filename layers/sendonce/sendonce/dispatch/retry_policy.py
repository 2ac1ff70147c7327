"""When a transient failure is tried again: exponential backoff with jitter, capped.

Two budgets. A provider that throttles has taken nothing and asks only for patience, so throttling
is retried on time: until `throttle_budget_seconds` (an hour) have passed since the message's first
attempt, however many attempts that takes. Any other transient failure is retried on a count:
`max_attempts` attempts that were not throttled.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from msgspec import Struct

THROTTLE_BUDGET_SECONDS = 3600.0


class RetryPolicy(Struct, frozen=True):
    max_attempts: int = 5
    base_seconds: float = 2.0
    cap_seconds: float = 300.0
    throttle_budget_seconds: float = THROTTLE_BUDGET_SECONDS
    throttle_cap_seconds: float = 300.0

    def may_retry(self, attempts_made: int) -> bool:
        """`attempts_made`: the attempts that were not throttled, the one that just failed included."""
        return attempts_made < self.max_attempts

    def delay_seconds(self, attempts_made: int) -> int:
        return _backoff(attempts_made, self.base_seconds, self.cap_seconds)

    def may_retry_throttled(self, first_attempt_at: datetime, now: datetime) -> bool:
        """A throttled message fails only once an attempt made a full budget after its first one
        was throttled too."""
        return now - first_attempt_at < timedelta(seconds=self.throttle_budget_seconds)

    def throttle_delay_seconds(self, throttled_attempts: int) -> int:
        """`throttled_attempts`: the throttled attempts so far, the one that just failed included."""
        return _backoff(throttled_attempts, self.base_seconds, self.throttle_cap_seconds)


def _backoff(attempts_made: int, base_seconds: float, cap_seconds: float) -> int:
    # The exponent is bounded first: after an hour of throttling, 2 ** attempts would overflow a float.
    ceiling = min(cap_seconds, base_seconds * 2 ** min(max(attempts_made - 1, 0), 62))
    return max(1, round(random.uniform(ceiling / 2, ceiling)))
