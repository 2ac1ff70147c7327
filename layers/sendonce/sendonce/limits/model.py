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
from enum import StrEnum
from typing import TYPE_CHECKING

from msgspec import Struct
from msgspec.structs import replace

if TYPE_CHECKING:
    from sendonce.controls.destinations import DestinationRules

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
MAX_DAILY_SMS_SEGMENTS = 1_000_000_000
# A workspace's own retention of its messages (CONTRACT section 18).
MIN_RETENTION_DAYS, MAX_RETENTION_DAYS = 1, 365
# The longest an execution environment keeps a workspace's limits before reading them again, and a
# second for the clocks of the environments and of the writer: a change takes effect after both.
MAX_CACHE_SECONDS = 5
CLOCK_MARGIN_SECONDS = 1
# How far back a workspace's changes are kept: the counters of a day are charged until it ends.
HISTORY_DAYS = 2


class Ledger(StrEnum):
    """A daily ledger counted on sharded counters (`QuotaCharge`), named by its items' key prefix."""

    QUOTA = "QUOTA"  # new messages: the daily send quota
    SMS_SEGMENTS = "SMSSEG"  # sms segments: the daily sms budget


class Limits(Struct, frozen=True):
    """A workspace's request rate (a second) and daily send quota (0: none), and its send controls:
    a frequency cap of `per_recipient` messages (0: none) a `per_recipient_window` seconds, its quiet
    hours ("HH:MM-HH:MM", empty: none) and its zone (`sendonce.controls`). Its protections (CONTRACT
    section 18): the countries an sms may go to (ISO 3166 alpha-2, empty: all), whether premium-rate
    and shared-cost numbers may be sent to, the sms segments a UTC day (0: none), and how many days
    its messages are kept (None: the stack's retention)."""

    rate_per_second: int
    daily_quota: int
    per_recipient: int = 0
    per_recipient_window: int = 0
    quiet_hours: str = ""
    timezone: str = "UTC"
    sms_countries: tuple[str, ...] = ()
    allow_premium_numbers: bool = False
    daily_sms_segments: int = 0
    retention_days: int | None = None

    def __post_init__(self) -> None:
        check_rate(self.rate_per_second)
        check_daily_quota(self.daily_quota)
        check_daily_sms_segments(self.daily_sms_segments)
        if self.retention_days is not None:
            check_retention_days(self.retention_days)

    def allowance(self, ledger: Ledger) -> int:
        """What a UTC day may take of `ledger` (0: none counted)."""
        return self.daily_quota if ledger is Ledger.QUOTA else self.daily_sms_segments

    @property
    def destinations(self) -> DestinationRules:
        """Where the workspace's sms and iMessage to phone numbers may go."""
        from sendonce.controls.destinations import DestinationRules  # noqa: PLC0415  # the API's only

        return DestinationRules(frozenset(self.sms_countries), self.allow_premium_numbers)

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


def check_daily_sms_segments(value: int) -> None:
    if not 0 <= value <= MAX_DAILY_SMS_SEGMENTS:
        raise ValueError(
            f"the daily sms segments must be 0 (none) to {MAX_DAILY_SMS_SEGMENTS:,}, not {value}"
        )


def check_retention_days(value: int) -> None:
    if not MIN_RETENTION_DAYS <= value <= MAX_RETENTION_DAYS:
        raise ValueError(
            f"the retention must be {MIN_RETENTION_DAYS} to {MAX_RETENTION_DAYS} days, not {value}"
        )


def sms_countries(text: str) -> tuple[str, ...]:
    """The countries a comma-separated list names (ISO 3166 alpha-2, any case; empty: all), sorted;
    ValueError for anything that is not a pair of letters."""
    codes = sorted({code.strip().upper() for code in text.split(",") if code.strip()})
    wrong = [code for code in codes if len(code) != 2 or not code.isascii() or not code.isalpha()]
    if wrong:
        raise ValueError(f"countries are ISO 3166 alpha-2 codes such as US,CA, not {', '.join(wrong)}")
    return tuple(codes)


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
    sms_countries: tuple[str, ...] | None = None  # () sets all countries, whatever the default
    allow_premium_numbers: bool | None = None
    daily_sms_segments: int | None = None
    retention_days: int | None = None

    def __post_init__(self) -> None:
        if self.rate_per_second is not None:
            check_rate(self.rate_per_second)
        if self.daily_quota is not None:
            check_daily_quota(self.daily_quota)
        if self.daily_sms_segments is not None:
            check_daily_sms_segments(self.daily_sms_segments)
        if self.retention_days is not None:
            check_retention_days(self.retention_days)


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
        defaults = self.defaults
        return Limits(
            rate_per_second=defaults.rate_per_second if rate is None else rate,
            daily_quota=defaults.daily_quota if quota is None else quota,
            per_recipient=change.per_recipient or 0,
            per_recipient_window=change.per_recipient_window or 0,
            quiet_hours=change.quiet_hours or "",
            timezone=change.timezone or "UTC",
            sms_countries=defaults.sms_countries if change.sms_countries is None else change.sms_countries,
            allow_premium_numbers=(
                defaults.allow_premium_numbers
                if change.allow_premium_numbers is None
                else change.allow_premium_numbers
            ),
            daily_sms_segments=(
                defaults.daily_sms_segments
                if change.daily_sms_segments is None
                else change.daily_sms_segments
            ),
            retention_days=defaults.retention_days
            if change.retention_days is None
            else change.retention_days,
        )

    def quota_plans(self, when: datetime, ledger: Ledger = Ledger.QUOTA) -> list[QuotaPlan]:
        """The plans of `ledger` in force in `when`'s UTC day up to `when`, the one in force now last.

        A plan's `since` is when its allowance took effect, or the day's start for one already in
        force then: a change of another limit is no new plan, and every environment names a plan alike.
        """
        day_start = int(start_of_day(when).timestamp())
        now = when.timestamp()
        plans = [QuotaPlan(self._limits(self._in_force(day_start)).allowance(ledger), day_start)]
        for change in self.changes:
            if day_start < change.at <= now:
                quota = self._limits(change).allowance(ledger)
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
    """A new message's (or a bulk transaction's) claim on its workspace's `ledger` for `day` (the
    quota by default, or the sms budget), under `plan`. `fresh`: the plan has been in force since the
    day began, so a shard it has not charged yet may take its share at its first charge; after a
    change, only a re-plan gives shards theirs."""

    workspace_id: str
    day: str
    plan: QuotaPlan
    fresh: bool
    expires_at: datetime  # when its counters may go: two days after the day ends
    ledger: Ledger = Ledger.QUOTA
    units: int = 1  # what one create takes: a message of the quota, its segments of the sms budget

    @classmethod
    def of(
        cls,
        workspace_id: str,
        limits: Limits | LimitsTimeline,
        now: datetime,
        ledger: Ledger = Ledger.QUOTA,
    ) -> QuotaCharge | None:
        """None when the workspace has no allowance of `ledger` now: nothing is counted."""
        timeline = limits if isinstance(limits, LimitsTimeline) else LimitsTimeline(limits)
        plans = [plan for plan in timeline.quota_plans(now, ledger) if plan.quota > 0]
        if not plans or plans[-1].quota != timeline.at(now).allowance(ledger):
            return None
        return cls(
            workspace_id,
            day_of(now),
            plans[-1],
            fresh=plans[-1].since == int(start_of_day(now).timestamp()),
            expires_at=next_day(now) + timedelta(days=2),
            ledger=ledger,
        )

    def taking(self, units: int) -> QuotaCharge:
        """This charge for `units` (a message's sms segments)."""
        return replace(self, units=units)

    def adopting(self, plan: QuotaPlan) -> QuotaCharge:
        """This charge under the plan the shards carry (a later one than this environment knew)."""
        return replace(self, plan=plan, fresh=False)


class Usage(Struct, frozen=True):
    limits: Limits
    used_today: int
    resets_at: datetime
    sms_segments_today: int = 0  # of the sms budget (0 without one)


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


class ProtectionChange(Struct, frozen=True):
    """An operator's change of a workspace's protections (CONTRACT section 18); a value None keeps
    the one in force. `sms_countries` () allows every country; `daily_sms_segments` 0 removes the
    budget."""

    sms_countries: tuple[str, ...] | None = None
    allow_premium_numbers: bool | None = None
    daily_sms_segments: int | None = None
    retention_days: int | None = None

    def __post_init__(self) -> None:
        if self.daily_sms_segments is not None:
            check_daily_sms_segments(self.daily_sms_segments)
        if self.retention_days is not None:
            check_retention_days(self.retention_days)

    @property
    def empty(self) -> bool:
        return all(
            value is None
            for value in (
                self.sms_countries,
                self.allow_premium_numbers,
                self.daily_sms_segments,
                self.retention_days,
            )
        )

    def applied_to(self, change: LimitsChange) -> LimitsChange:
        """`change` with these values in place of its own."""
        return replace(
            change,
            sms_countries=change.sms_countries if self.sms_countries is None else self.sms_countries,
            allow_premium_numbers=(
                change.allow_premium_numbers
                if self.allow_premium_numbers is None
                else self.allow_premium_numbers
            ),
            daily_sms_segments=(
                change.daily_sms_segments if self.daily_sms_segments is None else self.daily_sms_segments
            ),
            retention_days=change.retention_days if self.retention_days is None else self.retention_days,
        )
