"""The limits' arithmetic: windows and their edges, shards and their caps, the RateLimit fields."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from msgspec.structs import replace
from sendonce.limits.model import (
    MAX_CACHE_SECONDS,
    MAX_DAILY_QUOTA,
    MAX_RATE_PER_SECOND,
    MIN_SHARD_CAP,
    QUOTA_SHARDS,
    WINDOW_SECONDS,
    Limits,
    LimitsChange,
    LimitsTimeline,
    QuotaCharge,
    QuotaPlan,
    RateDecision,
    Window,
    change_at,
    day_of,
    next_day,
    seconds_to_next_day,
)
from sendonce.limits.service import RequestLimits

from tests.unit.unit_fakes import FakeLimits


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_a_window_is_two_seconds_and_says_how_long_is_left() -> None:
    start = Window.at(at("2026-11-30T12:00:00"))
    later = Window.at(at("2026-11-30T12:00:01.999"))
    next_one = Window.at(at("2026-11-30T12:00:02"))

    assert start.number == later.number == next_one.number - 1
    assert start.reset_seconds == 2
    assert later.reset_seconds == 1  # never 0: Retry-After is at least one second
    assert next_one.ends_at_epoch == int(at("2026-11-30T12:00:04").timestamp())


def test_a_rate_allows_bursts_to_twice_it_in_one_window() -> None:
    assert Limits(rate_per_second=50, daily_quota=0).window_quota == 100


@pytest.mark.parametrize(
    ("rate", "shards"), [(1, 1), (50, 1), (500, 1), (501, 2), (5_000, 10), (100_000, 200)]
)
def test_a_rate_is_counted_on_enough_shards_that_none_takes_over_500_writes_a_second(
    rate: int, shards: int
) -> None:
    limits = Limits(rate_per_second=rate, daily_quota=0)

    caps = [limits.rate_shard_cap(shard) for shard in range(shards)]
    assert limits.rate_shards == shards
    assert sum(caps) == limits.window_quota  # never more than the window's quota across the shards
    assert max(caps) - min(caps) <= 1


@given(st.integers(min_value=1, max_value=MAX_DAILY_QUOTA), st.integers(min_value=0))
def test_a_plans_shares_sum_to_what_it_splits_and_none_is_empty(quota: int, total: int) -> None:
    plan = QuotaPlan(quota, since=0)
    shares = [plan.share(shard) for shard in range(plan.shards)]

    assert sum(shares) == quota
    assert min(shares) >= min(quota, MIN_SHARD_CAP)  # room for two bulk transactions
    assert max(shares) - min(shares) <= 1
    assert plan.shards == max(1, min(quota // MIN_SHARD_CAP, QUOTA_SHARDS))
    assert sum(plan.share(shard, total) for shard in range(plan.shards)) == total


@given(st.integers(min_value=0, max_value=MAX_DAILY_QUOTA), st.integers(min_value=0, max_value=2**40))
def test_a_plans_stamp_names_it(quota: int, since: int) -> None:
    plan = QuotaPlan(quota, since)

    assert QuotaPlan.from_stamp(plan.stamp) == plan
    assert QuotaPlan.from_stamp("replanning:0123abcd") is None


def test_no_quota_charges_nothing() -> None:
    assert QuotaCharge.of("ws", Limits(50, 0), at("2026-11-30T12:00:00")) is None


def test_the_quota_day_is_the_utc_day_and_resets_at_midnight() -> None:
    now = at("2026-11-30T23:59:59.500")

    assert day_of(now) == "2026-11-30"
    assert next_day(now) == at("2026-12-01T00:00:00")
    assert seconds_to_next_day(now) == 1
    charge = QuotaCharge.of("ws", Limits(50, 10), now)
    assert charge is not None
    assert charge.expires_at == at("2026-12-03T00:00:00")  # counters outlive their day by two


@pytest.mark.parametrize(
    ("rate", "quota"), [(0, 10), (-1, 10), (MAX_RATE_PER_SECOND + 1, 10), (50, -1), (50, MAX_DAILY_QUOTA + 1)]
)
def test_absurd_limits_are_refused(rate: int, quota: int) -> None:
    with pytest.raises(ValueError, match="must be"):
        Limits(rate_per_second=rate, daily_quota=quota)


def test_the_ratelimit_fields_follow_the_ietf_draft() -> None:
    allowed = RateDecision(allowed=True, limit=100, remaining=42, reset_seconds=1)
    refused = RateDecision(allowed=False, limit=100, remaining=0, reset_seconds=2)

    assert allowed.headers() == {
        "RateLimit-Policy": '"workspace";q=100;w=2',
        "RateLimit": '"workspace";r=42;t=1',
    }
    assert refused.headers()["Retry-After"] == "2"
    assert refused.headers()["RateLimit"] == '"workspace";r=0;t=2'


def test_the_rate_check_refuses_past_the_window_quota_and_counts_per_workspace() -> None:
    now = at("2026-11-30T12:00:00.100")
    store = FakeLimits(overrides={"ws": Limits(rate_per_second=2, daily_quota=0)})
    limits = RequestLimits(store, clock=lambda: now)

    decisions = [limits.check_rate("ws") for _ in range(5)]
    other = limits.check_rate("ws_other")

    assert [d.allowed for d in decisions if d] == [True, True, True, True, False]
    assert [d.remaining for d in decisions if d] == [3, 2, 1, 0, 0]
    assert other is not None
    assert other.allowed


def test_the_rate_check_fails_open_when_the_limits_cannot_be_read() -> None:
    class Down(FakeLimits):
        def timeline(self, workspace_id: str) -> LimitsTimeline:
            from sendonce.errors import DependencyUnavailable  # noqa: PLC0415

            raise DependencyUnavailable("the limits table is down")

    assert RequestLimits(Down()).check_rate("ws") is None


def test_a_fresh_plans_charge_may_start_a_shard_only_with_units_its_share_holds() -> None:
    from sendonce.adapters.dynamodb_limits import DynamoDbLimits  # noqa: PLC0415

    charge = QuotaCharge.of("ws", Limits(rate_per_second=50, daily_quota=150), at("2026-11-30T12:00:00"))
    assert charge is not None
    assert charge.fresh
    limits = DynamoDbLimits(client=None, table_name="LimitsTable", defaults=Limits(50, 150))

    fits = limits.charge_item(charge, 0, 150)["Update"]
    too_many = limits.charge_item(charge, 0, 151)["Update"]
    not_fresh = limits.charge_item(replace(charge, fresh=False), 0, 1)["Update"]

    assert fits["ExpressionAttributeValues"][":share"] == {"N": "150"}
    assert "attribute_not_exists" in fits["ConditionExpression"]
    assert "attribute_not_exists" not in too_many["ConditionExpression"]
    assert "attribute_not_exists" not in not_fresh["ConditionExpression"]


def test_set_limits_checks_every_value_before_writing_any() -> None:
    from sendonce.adapters.dynamodb_limits import DynamoDbLimits  # noqa: PLC0415

    limits = DynamoDbLimits(client=None, table_name="LimitsTable", defaults=Limits(50, 150))

    for rate, quota in ((5, -1), (-1, None), (None, None)):
        with pytest.raises(ValueError, match=r"must be|give"):
            limits.set_limits("ws", rate, quota)  # a write would fail on the missing client


@given(
    daily_quota=st.integers(min_value=1, max_value=MAX_DAILY_QUOTA),
    start=st.integers(min_value=0),
    full=st.sets(st.integers(min_value=0, max_value=QUOTA_SHARDS)),
)
def test_the_shards_to_try_are_every_shard_not_known_full_once_in_turn_from_a_random_one(
    daily_quota: int, start: int, full: set[int]
) -> None:
    from sendonce.adapters.dynamodb_limits import DynamoDbLimits  # noqa: PLC0415

    limits_of_the_day = Limits(rate_per_second=50, daily_quota=daily_quota)
    charge = QuotaCharge.of("ws", limits_of_the_day, at("2026-11-30T12:00:00"))
    assert charge is not None
    shards = charge.plan.shards
    limits = DynamoDbLimits(
        client=None, table_name="LimitsTable", defaults=Limits(50, 150), shard_of=lambda n: start % n
    )
    for shard in full:
        if shard < shards:
            limits.mark_full(charge, shard)

    in_turn = [(start % shards + i) % shards for i in range(shards)]
    assert limits.shards_to_try(charge) == [shard for shard in in_turn if shard not in full]


# ---------------------------------------------------------------------------- changes over time
DEFAULTS = Limits(rate_per_second=50, daily_quota=10_000)


def epoch(text: str) -> int:
    return int(at(text).timestamp())


def test_a_change_takes_effect_at_a_windows_start_once_every_environment_can_have_read_it() -> None:
    written = at("2026-11-30T12:00:00.300")

    effective = change_at(written)  # 12:00:01 + 5 s of cache + 1 s for the clocks, to a window's start
    local = change_at(written, cache_seconds=1)

    assert effective == epoch("2026-11-30T12:00:08")
    assert effective % WINDOW_SECONDS == 0
    assert local == epoch("2026-11-30T12:00:04")
    assert change_at(written, cache_seconds=3600) == effective  # never more than MAX_CACHE_SECONDS
    assert effective - written.timestamp() <= 10  # docs/guarantees.md: at most 8 seconds later


@given(st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)), st.integers(0, 60))
def test_a_change_is_never_in_effect_before_the_cache_has_turned_over(written: datetime, cache: int) -> None:
    written = written.replace(tzinfo=UTC)
    effective = change_at(written, cache)

    assert effective >= written.timestamp() + min(cache, MAX_CACHE_SECONDS) + 1
    assert effective <= written.timestamp() + MAX_CACHE_SECONDS + 1 + WINDOW_SECONDS
    assert effective % WINDOW_SECONDS == 0


def test_the_limits_in_force_follow_the_changes_and_none_is_the_default() -> None:
    timeline = LimitsTimeline(
        DEFAULTS,
        (
            LimitsChange(epoch("2026-11-30T10:00:00"), rate_per_second=5, daily_quota=None),
            LimitsChange(epoch("2026-11-30T11:00:00"), rate_per_second=5, daily_quota=62),
        ),
    )

    assert timeline.at(at("2026-11-30T09:59:59")) == DEFAULTS
    assert timeline.at(at("2026-11-30T10:00:00")) == Limits(5, 10_000)
    assert timeline.at(at("2026-11-30T11:00:00")) == Limits(5, 62)


def test_a_days_quota_plans_are_the_one_at_its_start_and_each_new_quota_since_it_took_effect() -> None:
    timeline = LimitsTimeline(
        DEFAULTS,
        (
            LimitsChange(epoch("2026-11-29T08:00:00"), rate_per_second=None, daily_quota=100_000),
            LimitsChange(epoch("2026-11-30T10:00:00"), rate_per_second=7, daily_quota=100_000),  # rate only
            LimitsChange(epoch("2026-11-30T11:00:00"), rate_per_second=7, daily_quota=62),
            LimitsChange(epoch("2026-11-30T13:00:00"), rate_per_second=7, daily_quota=200),
        ),
    )
    day_start = epoch("2026-11-30T00:00:00")

    assert timeline.quota_plans(at("2026-11-30T12:00:00")) == [
        QuotaPlan(100_000, day_start),  # in force since before the day: named by the day's start
        QuotaPlan(62, epoch("2026-11-30T11:00:00")),
    ]
    morning = QuotaCharge.of("ws", timeline, at("2026-11-30T10:30:00"))
    noon = QuotaCharge.of("ws", timeline, at("2026-11-30T12:00:00"))
    assert morning is not None
    assert noon is not None
    assert morning.fresh  # shards start with their share at their first charge
    assert not noon.fresh  # only a re-plan gives shards their share after a change
    assert noon.plan == QuotaPlan(62, epoch("2026-11-30T11:00:00"))
    tomorrow = QuotaCharge.of("ws", timeline, at("2026-12-01T00:00:01"))
    assert tomorrow is not None
    assert tomorrow.fresh
    assert tomorrow.plan == QuotaPlan(200, epoch("2026-12-01T00:00:00"))


def test_a_quota_of_none_charges_nothing_and_its_day_keeps_what_was_charged_before() -> None:
    timeline = LimitsTimeline(
        DEFAULTS, (LimitsChange(epoch("2026-11-30T11:00:00"), rate_per_second=None, daily_quota=0),)
    )

    assert QuotaCharge.of("ws", timeline, at("2026-11-30T12:00:00")) is None
    assert timeline.quota_plans(at("2026-11-30T12:00:00"))[0] == QuotaPlan(
        10_000, epoch("2026-11-30T00:00:00")
    )


def test_a_new_change_replaces_one_pending_at_its_instant_and_old_ones_are_folded() -> None:
    now = at("2026-11-30T12:00:00")
    old = [
        LimitsChange(epoch(f"2026-11-{day}T08:00:00"), None, quota)
        for day, quota in ((20, 1), (25, 2), (27, 3))
    ]
    pending = LimitsChange(change_at(now), None, 4)
    timeline = LimitsTimeline(DEFAULTS, (*old, pending))

    changed = timeline.with_change(LimitsChange(change_at(now), 9, 5), now)

    # The one in force two days ago stays (it sets the value then); the older ones go.
    assert changed.changes == (old[2], LimitsChange(change_at(now), 9, 5))
    assert changed.at(now - timedelta(days=2)) == timeline.at(now - timedelta(days=2))


def test_the_settings_never_let_limits_be_kept_longer_than_a_change_waits() -> None:
    from sendonce.settings import LIMITS_CACHE_MAX_SECONDS  # noqa: PLC0415

    assert LIMITS_CACHE_MAX_SECONDS == MAX_CACHE_SECONDS
