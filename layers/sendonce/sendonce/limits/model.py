"""A workspace's limits and their arithmetic: the request-rate window and its leases, the quota's day
and shards.

The request rate is counted in fixed windows of `WINDOW_SECONDS` allowing `WINDOW_SECONDS * rate`
requests each: a workspace sustains its rate and may burst to twice it, which is what the IETF
`RateLimit-Policy` field `q=<quota>;w=<window>` says. The daily send quota counts new messages per
UTC day.

A window is taken in leases: an execution environment adds a lease's size to a shard's count in
one atomic `ADD`, and is granted what of it fell under the shard's cap (`Grant`), never more; so
every token spent was counted on the shared counter first, and a window admits no more than its
quota across all environments. A lease is 1 for a window quota under `LEASE_DIVISOR * 2` (the count
is exact), and never more than `LEASE_MAX`, a shard's cap, nor a `LEASE_SHARE`th of what the
environment admitted of the workspace lately (docs/scaling.md, "Limits").

No counter is one hot item: a window is counted on `rate_shards` items, each taking at most
`ITEM_WRITES_PER_SECOND` writes, and a day's quota on `quota_shards` items; each shard has its own
cap, a window's caps summing to its quota exactly and a day's to the daily quota. A new message
takes one unit of one shard below its cap, so no more than the quota is ever accepted; a shard found
full is never full by mistake, since counts only grow within a day (and a window's within its
window).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

WINDOW_SECONDS = 2
# Half of a DynamoDB partition's 1,000 writes a second: a counter item never throttles.
ITEM_WRITES_PER_SECOND = 500
# A quota shard is written inside the create transaction; transactions on one item at once
# conflict, so each shard takes few a second (docs/scaling.md): 512 shards carry 5,000 sends/s.
QUOTA_SHARDS = 512
# Each shard's cap holds at least two bulk transactions (49 messages each), so a batch is counted
# a transaction at a time: a quota under 51,200 has fewer shards, one of 200 or less has one.
MIN_SHARD_CAP = 100
# A rate lease (docs/scaling.md, "Limits"): at most a `LEASE_DIVISOR`th of the window's quota, so
# an environment that idles on its lease strands at most 5% of a window; at most `LEASE_MAX`, a
# tenth of a call a request for a busy environment; at most a `LEASE_SHARE`th of what the
# environment admitted of the workspace in this window or the last, so one that sees it seldom
# takes leases of 1 and strands nothing.
LEASE_DIVISOR = 20
LEASE_MAX = 10
LEASE_SHARE = 4
# Sanity bounds of an override: a rate or quota above them is a typo, not a plan.
MAX_RATE_PER_SECOND = 100_000
MAX_DAILY_QUOTA = 1_000_000_000


@dataclass(frozen=True, slots=True)
class Limits:
    """A workspace's request rate (a second) and daily send quota (0: none)."""

    rate_per_second: int
    daily_quota: int

    def __post_init__(self) -> None:
        check_rate(self.rate_per_second)
        check_daily_quota(self.daily_quota)

    @property
    def window_quota(self) -> int:
        return self.rate_per_second * WINDOW_SECONDS

    @property
    def rate_shards(self) -> int:
        return max(1, math.ceil(self.rate_per_second / ITEM_WRITES_PER_SECOND))

    def rate_shard_cap(self, shard: int) -> int:
        """The caps sum to the window's quota: the first `quota % shards` take one more."""
        base, extra = divmod(self.window_quota, self.rate_shards)
        return base + (1 if shard < extra else 0)

    @property
    def lease_ceiling(self) -> int:
        """The largest lease: 1 (an exact count) for a window quota under 2 * LEASE_DIVISOR."""
        smallest_cap = self.window_quota // self.rate_shards
        return max(1, min(LEASE_MAX, self.window_quota // LEASE_DIVISOR, smallest_cap))

    def lease_size(self, admitted_lately: int) -> int:
        """The tokens an environment asks for, having admitted `admitted_lately` requests of the
        workspace in this window or the last (the larger): 1 up to the ceiling."""
        return max(1, min(self.lease_ceiling, admitted_lately // LEASE_SHARE))

    @property
    def quota_shards(self) -> int:
        """As many shards as the quota allows, each with a cap of at least MIN_SHARD_CAP."""
        return max(1, min(QUOTA_SHARDS, self.daily_quota // MIN_SHARD_CAP))

    def quota_shard_cap(self, shard: int) -> int:
        """The caps sum to the daily quota: the first `quota % shards` take one more."""
        base, extra = divmod(self.daily_quota, self.quota_shards)
        return base + (1 if shard < extra else 0)


def check_rate(value: int) -> None:
    if not 1 <= value <= MAX_RATE_PER_SECOND:
        raise ValueError(f"the request rate must be 1 to {MAX_RATE_PER_SECOND:,} a second, not {value}")


def check_daily_quota(value: int) -> None:
    if not 0 <= value <= MAX_DAILY_QUOTA:
        raise ValueError(f"the daily quota must be 0 (none) to {MAX_DAILY_QUOTA:,}, not {value}")


@dataclass(frozen=True, slots=True)
class Window:
    """One rate window: its number since the epoch and the seconds left in it (at least 1)."""

    number: int
    reset_seconds: int

    @classmethod
    def at(cls, now: datetime) -> Window:
        epoch = now.timestamp()
        number = int(epoch // WINDOW_SECONDS)
        return cls(number, max(1, math.ceil((number + 1) * WINDOW_SECONDS - epoch)))

    @property
    def ends_at_epoch(self) -> int:
        return (self.number + 1) * WINDOW_SECONDS


@dataclass(frozen=True, slots=True)
class Grant:
    """One lease's answer: `asked` tokens added to a shard of cap `cap`, whose count is now `count`.

    Granted are the tokens that fell under the cap: all of them, some (the cap was reached), or none
    (the shard was full already). The count only grows within its window, so a full shard stays full.
    """

    asked: int
    count: int
    cap: int

    @property
    def granted(self) -> int:
        return max(0, min(self.asked, self.cap - (self.count - self.asked)))

    @property
    def shard_full(self) -> bool:
        return self.count >= self.cap

    @property
    def left(self) -> int:
        """What the shard has left under its cap."""
        return max(0, self.cap - self.count)


@dataclass(frozen=True, slots=True)
class RateDecision:
    """What the rate check found: allowed or not, and what the RateLimit fields tell the caller."""

    allowed: bool
    limit: int  # requests a window
    remaining: int  # an estimate once leased: the counter's left at the last lease, plus unspent tokens
    reset_seconds: int

    def headers(self) -> dict[str, str]:
        """draft-ietf-httpapi-ratelimit-headers: the policy, and what is left of it."""
        fields = {
            "RateLimit-Policy": f'"workspace";q={self.limit};w={WINDOW_SECONDS}',
            "RateLimit": f'"workspace";r={self.remaining};t={self.reset_seconds}',
        }
        if not self.allowed:
            fields["Retry-After"] = str(self.reset_seconds)
        return fields


def day_of(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%d")


def next_day(now: datetime) -> datetime:
    """When the quota of `now`'s UTC day resets: the next midnight, UTC."""
    today = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return today + timedelta(days=1)


def seconds_to_next_day(now: datetime) -> int:
    return max(1, math.ceil((next_day(now) - now).total_seconds()))


@dataclass(frozen=True, slots=True)
class QuotaCharge:
    """One new message's (or a bulk transaction's) claim on its workspace's quota for `day`."""

    workspace_id: str
    day: str
    limits: Limits
    expires_at: datetime  # when its counters may go: two days after the day ends

    @classmethod
    def of(cls, workspace_id: str, limits: Limits, now: datetime) -> QuotaCharge | None:
        """None when the workspace has no quota: nothing is counted."""
        if limits.daily_quota == 0:
            return None
        return cls(workspace_id, day_of(now), limits, next_day(now) + timedelta(days=2))


@dataclass(frozen=True, slots=True)
class Usage:
    limits: Limits
    used_today: int
    resets_at: datetime
