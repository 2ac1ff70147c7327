"""The limits context's ports: a workspace's limits, its rate counters and its quota usage."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from sendonce.limits.model import Limits, Window


class LimitsStore(Protocol):
    def limits_of(self, workspace_id: str) -> Limits:
        """The workspace's override where one is set, otherwise the defaults (cached briefly)."""
        ...

    def take_lease(self, workspace_id: str, window: Window, shard: int, tokens: int) -> int:
        """Add `tokens` to one shard of the workspace's `window` in one atomic step, and return the
        count the shard now holds (what the lease was granted follows from it: `Grant`)."""
        ...

    def used_today(self, workspace_id: str, limits: Limits, now: datetime) -> int:
        """New messages accepted in `now`'s UTC day."""
        ...
