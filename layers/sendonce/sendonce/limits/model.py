"""A workspace's limits and their arithmetic: the request-rate window and its leases, the quota's day,
its shards and their plans, and the timeline of an operator's changes.

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
`ITEM_WRITES_PER_SECOND` writes, and a day's quota on its plan's shards. A window's caps sum to its
quota exactly. A quota shard holds what it has taken (`used`) and what it may still take (its
allowance); a plan's allowances sum to the quota less what the day has used, so no more than the
quota in force is ever accepted.

A change of a workspace's limits takes effect at an instant written with it (`change_at`), later
than any execution environment can still hold the limits before it: at every instant all
environments apply the same limits, so no window is counted under two, and the first charge under
a new quota re-plans the day (`dynamodb_limits`), keeping every unit already used.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from msgspec import Struct
from msgspec.structs import replace

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
# The longest an execution environment keeps a workspace's limits before reading them again, and a
# second for the clocks of the environments and of the writer: a change takes effect after both.
MAX_CACHE_SECONDS = 5
CLOCK_MARGIN_SECONDS = 1
# How far back a workspace's changes are kept: the counters of a day are charged until it ends.
HISTORY_DAYS = 2


class Limits(Struct, frozen=True):
    """A workspace's request rate (a second) and daily send quota (0: none), and its send controls:
    a frequency cap of `per_recipient` messages (0: none) a `per_recipient_window` seconds, its quiet
    hours ("HH:MM-HH:MM", empty: none) and its zone (`sendonce.controls`)."""

    rate_per_second: int
    daily_quota: int
    per_recipient: int = 0
    per_recipient_window: int = 0
    quiet_hours: str = ""
    timezone: str = "UTC"

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


def check_rate(value: int) -> None:
    if not 1 <= value <= MAX_RATE_PER_SECOND:
        raise ValueError(f"the request rate must be 1 to {MAX_RATE_PER_SECOND:,} a second, not {value}")


def check_daily_quota(value: int) -> None:
    if not 0 <= value <= MAX_DAILY_QUOTA:
        raise ValueError(f"the daily quota must be 0 (none) to {MAX_DAILY_QUOTA:,}, not {value}")


class Window(Struct, frozen=True):
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


class Grant(Struct, frozen=True):
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


class RateDecision(Struct, frozen=True):
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


def start_of_day(now: datetime) -> datetime:
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def next_day(now: datetime) -> datetime:
    """When the quota of `now`'s UTC day resets: the next midnight, UTC."""
    return start_of_day(now) + timedelta(days=1)


def seconds_to_next_day(now: datetime) -> int:
    return max(1, math.ceil((next_day(now) - now).total_seconds()))


class LimitsChange(Struct, frozen=True):
    """An operator's override, in force from `at` (epoch seconds, a window's start) until the next
    change; a value None is the stack's default (for a send control: none, and the zone UTC)."""

    at: int
    rate_per_second: int | None
    daily_quota: int | None
    per_recipient: int | None = None
    per_recipient_window: int | None = None
    quiet_hours: str | None = None
    timezone: str | None = None

    def __post_init__(self) -> None:
        if self.rate_per_second is not None:
            check_rate(self.rate_per_second)
        if self.daily_quota is not None:
            check_daily_quota(self.daily_quota)


def change_at(written_at: datetime, cache_seconds: int = MAX_CACHE_SECONDS) -> int:
    """When a change written at `written_at` takes effect: once every execution environment can have
    read it (its cache, and a second for the clocks), at the start of a window, so no window is
    counted under two limits. At most `cache_seconds + 1 + WINDOW_SECONDS` after it was written."""
    waited = min(cache_seconds, MAX_CACHE_SECONDS) + CLOCK_MARGIN_SECONDS
    earliest = math.ceil(written_at.timestamp()) + waited
    return -(-earliest // WINDOW_SECONDS) * WINDOW_SECONDS


class LimitsTimeline(Struct, frozen=True):
    """A workspace's limits over time: the defaults, and its overrides by when each takes effect.

    Every execution environment holds a copy at most MAX_CACHE_SECONDS old, and a change takes
    effect later than that (`change_at`): so at every instant all environments apply the same
    limits, and the counters they share are never counted under two limits at once.
    """

    defaults: Limits
    changes: tuple[LimitsChange, ...] = ()  # oldest first

    def at(self, when: datetime) -> Limits:
        return self._limits(self._in_force(when.timestamp()))

    def _in_force(self, epoch: float) -> LimitsChange | None:
        in_force = None
        for change in self.changes:
            if change.at > epoch:
                break
            in_force = change
        return in_force

    def _limits(self, change: LimitsChange | None) -> Limits:
        if change is None:
            return self.defaults
        rate, quota = change.rate_per_second, change.daily_quota
        return Limits(
            rate_per_second=self.defaults.rate_per_second if rate is None else rate,
            daily_quota=self.defaults.daily_quota if quota is None else quota,
            per_recipient=change.per_recipient or 0,
            per_recipient_window=change.per_recipient_window or 0,
            quiet_hours=change.quiet_hours or "",
            timezone=change.timezone or "UTC",
        )

    def quota_plans(self, when: datetime) -> list[QuotaPlan]:
        """The quota plans in force in `when`'s UTC day up to `when`, the one in force now last.

        A plan's `since` is when its quota took effect, or the day's start for one already in force
        then: a change of the rate alone is no new plan, and every environment names a plan alike.
        """
        day_start = int(start_of_day(when).timestamp())
        now = when.timestamp()
        plans = [QuotaPlan(self._limits(self._in_force(day_start)).daily_quota, day_start)]
        for change in self.changes:
            if day_start < change.at <= now:
                quota = self._limits(change).daily_quota
                if quota != plans[-1].quota:
                    plans.append(QuotaPlan(quota, change.at))
        return plans

    def with_change(self, change: LimitsChange, now: datetime) -> LimitsTimeline:
        """This timeline with `change` added (replacing one pending at the same instant), and without
        changes no longer needed: the one in force HISTORY_DAYS ago and every later one are kept,
        so any day a counter can still be charged for is planned alike."""
        horizon = (now - timedelta(days=HISTORY_DAYS)).timestamp()
        kept = [existing for existing in self.changes if existing.at < change.at]
        oldest = max((i for i, existing in enumerate(kept) if existing.at <= horizon), default=0)
        return replace(self, changes=(*kept[oldest:], change))

    def pending(self) -> LimitsChange | None:
        """The last change written: what a new one with a value left out keeps of it."""
        return self.changes[-1] if self.changes else None


class QuotaPlan(Struct, frozen=True):
    """How a day's quota is split over its shards while `quota` is in force (from `since`, epoch s).

    A shard's allowance is what it may still take; a fresh plan gives each its share of the
    quota, and a plan made after a change gives each its share of what is left under the new quota.
    """

    quota: int
    since: int

    @property
    def shards(self) -> int:
        """As many shards as the quota allows, each with an allowance of at least MIN_SHARD_CAP."""
        return max(1, min(QUOTA_SHARDS, self.quota // MIN_SHARD_CAP))

    def share(self, shard: int, total: int | None = None) -> int:
        """Shard `shard`'s part of `total` (the quota when None): the parts sum to it."""
        base, extra = divmod(self.quota if total is None else total, self.shards)
        return base + (1 if shard < extra else 0)

    def supersedes(self, other: QuotaPlan) -> bool:
        """This plan, not `other`, is the day's: it took effect later. Two in force as long (the
        stack's default changed by a deploy while its environments are replaced) agree on the
        smaller quota, so every environment settles on one."""
        return self.since > other.since or (self.since == other.since and self.quota < other.quota)

    @property
    def stamp(self) -> str:
        """The plan's name on every shard it planned; parsed back by `from_stamp`."""
        return f"{self.quota}@{self.since}"

    @classmethod
    def from_stamp(cls, stamp: str) -> QuotaPlan | None:
        """The plan a stamp names; None for anything else (a shard being re-planned)."""
        quota, at, since = stamp.partition("@")
        if not at or not quota.isdigit() or not since.isdigit():
            return None
        return cls(int(quota), int(since))


class QuotaCharge(Struct, frozen=True):
    """A new message's (or a bulk transaction's) claim on its workspace's quota for `day`, under
    `plan`. `fresh`: the plan has been in force since the day began, so a shard it has not charged
    yet may take its share at its first charge; after a change, only a re-plan gives shards theirs."""

    workspace_id: str
    day: str
    plan: QuotaPlan
    fresh: bool
    expires_at: datetime  # when its counters may go: two days after the day ends

    @classmethod
    def of(cls, workspace_id: str, limits: Limits | LimitsTimeline, now: datetime) -> QuotaCharge | None:
        """None when the workspace has no quota now: nothing is counted."""
        timeline = limits if isinstance(limits, LimitsTimeline) else LimitsTimeline(limits)
        plans = [plan for plan in timeline.quota_plans(now) if plan.quota > 0]
        if not plans or plans[-1].quota != timeline.at(now).daily_quota:
            return None
        return cls(
            workspace_id,
            day_of(now),
            plans[-1],
            fresh=plans[-1].since == int(start_of_day(now).timestamp()),
            expires_at=next_day(now) + timedelta(days=2),
        )

    def adopting(self, plan: QuotaPlan) -> QuotaCharge:
        """This charge under the plan the shards carry (a later one than this environment knew)."""
        return replace(self, plan=plan, fresh=False)


class Usage(Struct, frozen=True):
    limits: Limits
    used_today: int
    resets_at: datetime


class SendControlsChange(Struct, frozen=True):
    """An operator's change of a workspace's send controls; a value None keeps the one in force.
    `per_recipient` 0 removes the cap; `quiet_hours` "" removes the quiet hours."""

    per_recipient: int | None = None
    per_recipient_window: int | None = None
    quiet_hours: str | None = None
    timezone: str | None = None

    @property
    def empty(self) -> bool:
        return all(
            value is None
            for value in (self.per_recipient, self.per_recipient_window, self.quiet_hours, self.timezone)
        )

    def applied_to(self, change: LimitsChange) -> LimitsChange:
        """`change` with these values in place of its own; ValueError when the result is no set of
        send controls (a cap without its window, hours that are not HH:MM-HH:MM, an unknown zone)."""
        from sendonce.controls.cap import check_cap  # noqa: PLC0415  # the operator's command only
        from sendonce.controls.quiet_hours import QuietHours, zone_of  # noqa: PLC0415

        merged = replace(
            change,
            per_recipient=change.per_recipient if self.per_recipient is None else self.per_recipient,
            per_recipient_window=(
                change.per_recipient_window
                if self.per_recipient_window is None
                else self.per_recipient_window
            ),
            quiet_hours=change.quiet_hours if self.quiet_hours is None else self.quiet_hours,
            timezone=change.timezone if self.timezone is None else self.timezone,
        )
        if merged.per_recipient and not merged.per_recipient_window:
            raise ValueError("a cap needs its window: give --per-recipient-window SECONDS too")
        check_cap(merged.per_recipient or 0, merged.per_recipient_window or 0)
        if merged.quiet_hours:
            QuietHours.parse(merged.quiet_hours)
        if merged.timezone is not None:
            zone_of(merged.timezone)
        return merged
