"""The limits context's ports: a workspace's limits, its rate counters and its quota usage."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from sendonce.limits.model import Limits, RateDecision


class LimitsStore(Protocol):
    def limits_of(self, workspace_id: str) -> Limits:
        """The workspace's override where one is set, otherwise the defaults (cached briefly)."""
        ...

    def count_request(self, workspace_id: str, limits: Limits, now: datetime) -> RateDecision:
        """One more request in the current window, and whether it is within the rate."""
        ...

    def used_today(self, workspace_id: str, limits: Limits, now: datetime) -> int:
        """New messages accepted in `now`'s UTC day."""
        ...
