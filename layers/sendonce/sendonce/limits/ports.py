"""The limits context's ports: a workspace's limits over time, its rate counters and its quota usage."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from sendonce.limits.model import Ledger, LimitsTimeline, Window


class LimitsStore(Protocol):
    def timeline(self, workspace_id: str) -> LimitsTimeline:
        """The workspace's defaults and the overrides set for it, as of at most MAX_CACHE_SECONDS ago."""
        ...

    def take_lease(self, workspace_id: str, window: Window, shard: int, tokens: int) -> int:
        """Add `tokens` to one shard of the workspace's `window` in one atomic step, and return the
        count the shard now holds (what the lease was granted follows from it: `Grant`)."""
        ...

    def used_today(
        self, workspace_id: str, timeline: LimitsTimeline, now: datetime, ledger: Ledger = Ledger.QUOTA
    ) -> int:
        """What `now`'s UTC day took of `ledger` (new messages, or sms segments) under its
        allowances, whatever they were."""
        ...
