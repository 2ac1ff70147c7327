"""The limits' arithmetic: windows and their edges, shards and their caps, the RateLimit fields."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sendonce.limits.model import (
    MAX_DAILY_QUOTA,
    MAX_RATE_PER_SECOND,
    MIN_SHARD_CAP,
    QUOTA_SHARDS,
    Limits,
    QuotaCharge,
    RateDecision,
    Window,
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


@given(st.integers(min_value=1, max_value=MAX_DAILY_QUOTA))
def test_the_quota_shards_caps_sum_to_the_quota_and_none_is_empty(quota: int) -> None:
    limits = Limits(rate_per_second=50, daily_quota=quota)
    caps = [limits.quota_shard_cap(shard) for shard in range(limits.quota_shards)]

    assert sum(caps) == quota
    assert min(caps) >= min(quota, MIN_SHARD_CAP)  # room for two bulk transactions
    assert max(caps) - min(caps) <= 1
    assert limits.quota_shards == max(1, min(quota // MIN_SHARD_CAP, QUOTA_SHARDS))


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
        def limits_of(self, workspace_id: str) -> Limits:
            from sendonce.errors import DependencyUnavailable  # noqa: PLC0415

            raise DependencyUnavailable("the limits table is down")

    assert RequestLimits(Down()).check_rate("ws") is None


def test_a_charge_larger_than_a_shards_cap_is_refused_before_any_write() -> None:
    from sendonce.adapters.dynamodb_limits import DynamoDbLimits  # noqa: PLC0415

    charge = QuotaCharge.of("ws", Limits(rate_per_second=50, daily_quota=150), at("2026-11-30T12:00:00"))
    assert charge is not None
    limits = DynamoDbLimits(client=None, table_name="LimitsTable", defaults=Limits(50, 150))

    assert limits.charge_item(charge, 0, 150)["Update"]["ExpressionAttributeValues"][":room"] == {"N": "0"}
    with pytest.raises(ValueError, match="do not fit"):
        limits.charge_item(charge, 0, 151)


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
    shards = charge.limits.quota_shards
    limits = DynamoDbLimits(
        client=None, table_name="LimitsTable", defaults=Limits(50, 150), shard_of=lambda n: start % n
    )
    for shard in full:
        if shard < shards:
            limits.mark_full(charge, shard)

    in_turn = [(start % shards + i) % shards for i in range(shards)]
    assert limits.shards_to_try(charge) == [shard for shard in in_turn if shard not in full]
