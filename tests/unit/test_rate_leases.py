"""The request rate taken in leases: several execution environments (one `RequestLimits` each) share
one window counter that a lease adds to as the adapter's `ADD` does. Together they never admit more
than a window's quota; most requests of a busy environment cost no call; a small quota is counted
exactly; leftovers die with their window; the check fails open. Time is a clock the tests move.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sendonce.limits.model import LEASE_MAX, Grant, Limits, LimitsChange, RateDecision, Window
from sendonce.limits.service import RequestLimits

from tests.unit.unit_fakes import FakeLimits, ManualClock

# The start of a window, so a test's requests stay in it until the clock is moved.
START = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
WS = "ws"


def fake(rate: int) -> FakeLimits:
    return FakeLimits(defaults=Limits(rate_per_second=rate, daily_quota=0))


def environments(store: FakeLimits, clock: ManualClock, count: int, seed: int = 0) -> list[RequestLimits]:
    shards = random.Random(seed)
    return [RequestLimits(store, clock=clock, shard_of=shards.randrange) for _ in range(count)]


def check(environment: RequestLimits, workspace: str = WS) -> RateDecision:
    decision = environment.check_rate(workspace)
    assert decision is not None
    return decision


def drain(environment: RequestLimits, shards: int) -> int:
    """Requests until the environment has found every shard full: what it still admits."""
    admitted = refused = 0
    while refused < shards:
        if check(environment).allowed:
            admitted += 1
        else:
            refused += 1
    return admitted


def warm(environment: RequestLimits, clock: ManualClock, requests: int) -> None:
    """`requests` admitted in the window before the one the test then runs in."""
    clock.now = START
    for _ in range(requests):
        assert check(environment).allowed
    clock.advance(2)


# ---------------------------------------------------------------------------- the lease's size
@pytest.mark.parametrize(
    ("rate", "ceiling"), [(1, 1), (19, 1), (20, 2), (50, 5), (100, 10), (1_000, 10), (100_000, 10)]
)
def test_the_largest_lease_follows_the_window_quota_and_is_1_for_a_small_one(rate: int, ceiling: int) -> None:
    assert Limits(rate_per_second=rate, daily_quota=0).lease_ceiling == ceiling


def test_a_lease_is_a_quarter_of_what_the_environment_admitted_lately() -> None:
    local, default = Limits(1_000, 0), Limits(50, 0)

    assert [local.lease_size(n) for n in (0, 7, 8, 20, 40, 4_000)] == [1, 1, 2, 5, 10, 10]
    assert default.lease_size(4_000) == 5


@given(cap=st.integers(1, 50), asks=st.lists(st.integers(1, LEASE_MAX), max_size=30))
def test_a_shards_grants_sum_to_what_was_asked_up_to_its_cap_and_never_past_it(
    cap: int, asks: list[int]
) -> None:
    count, granted = 0, []
    for asked in asks:
        count += asked  # the ADD
        grant = Grant(asked, count, cap)
        granted.append(grant.granted)
        assert grant.shard_full == (count >= cap)
        assert grant.left == max(0, cap - count)

    assert sum(granted) == min(cap, sum(asks))
    assert all(0 <= g <= a for g, a in zip(granted, asks, strict=True))


# ---------------------------------------------------------------------------- never past the quota
@settings(max_examples=60, deadline=None)
@given(
    rate=st.sampled_from([1, 5, 20, 50, 300, 600, 1_500]),
    count=st.integers(1, 6),
    steps=st.lists(st.tuples(st.integers(0, 5), st.sampled_from([0, 0, 0, 0.05, 0.7])), max_size=400),
    seed=st.integers(0, 2**16),
)
def test_many_environments_together_never_admit_more_than_a_windows_quota(
    rate: int, count: int, steps: list[tuple[int, float]], seed: int
) -> None:
    store, clock = fake(rate), ManualClock(START)
    envs = environments(store, clock, count, seed)
    limits = store.defaults
    admitted: Counter[int] = Counter()

    for index, advance in steps:
        clock.advance(advance)
        decision = check(envs[index % count])
        assert 0 <= decision.remaining <= limits.window_quota
        assert decision.limit == limits.window_quota
        if decision.allowed:
            admitted[Window.at(clock()).number] += 1
    assert all(n <= limits.window_quota for n in admitted.values())

    # In the last window, the environments spend what they hold and take the rest: exactly the quota.
    last = Window.at(clock()).number
    for environment in envs:
        admitted[last] += drain(environment, limits.rate_shards)
    assert admitted[last] == limits.window_quota


def test_threads_of_several_environments_racing_admit_exactly_the_quota() -> None:
    store, clock = fake(100), ManualClock(START)  # 200 a window
    envs = environments(store, clock, 3)
    for environment in envs:
        warm(environment, clock, 60)  # leases of 10 in the window raced in (the ceiling; 60 // 4 = 15)
    barrier = threading.Barrier(8)
    allowed: list[int] = [0] * 8

    def contender(index: int) -> None:
        barrier.wait()
        allowed[index] = sum(check(envs[index % 3]).allowed for _ in range(60))

    threads = [threading.Thread(target=contender, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    raced = sum(allowed)
    assert raced <= 200
    assert raced + sum(drain(environment, 1) for environment in envs) == 200


# ---------------------------------------------------------------------------- calls
def test_most_requests_of_a_busy_environment_cost_no_call() -> None:
    store, clock = fake(1_000), ManualClock(START)
    (environment,) = environments(store, clock, 1)
    calls_by_window = []

    for _ in range(5):
        before = len(store.leases)
        assert all(check(environment).allowed for _ in range(100))
        calls_by_window.append(len(store.leases) - before)
        clock.advance(2)

    assert calls_by_window[0] < 30  # leases of 1 while it has admitted little, then growing
    assert calls_by_window[1:] == [10, 10, 10, 10]  # leases of 10: a tenth of a call a request
    assert {tokens for _, window, _, tokens in store.leases if window > store.leases[0][1]} == {10}


def test_an_environment_that_sees_a_workspace_seldom_takes_leases_of_1() -> None:
    store, clock = fake(1_000), ManualClock(START)
    (environment,) = environments(store, clock, 1)

    for _ in range(6):  # one request a window: nothing stranded
        assert check(environment).allowed
        clock.advance(2)

    assert [tokens for *_, tokens in store.leases] == [1] * 6
    assert sum(store.counters.values()) == 6


def test_a_small_quota_is_counted_exactly_across_environments() -> None:
    store, clock = fake(5), ManualClock(START)  # 10 a window: leases of 1
    first, second = environments(store, clock, 2)
    for index in range(10):  # both busy in the window before
        assert check((first, second)[index % 2]).allowed
    clock.advance(2)

    decisions = [check((first, second)[i % 2]) for i in range(13)]

    assert [d.allowed for d in decisions] == [True] * 10 + [False] * 3
    assert [d.remaining for d in decisions] == [9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0, 0]
    window = Window.at(clock()).number
    # One call a request, until each environment has found the window full; none after that.
    assert [tokens for _, w, _, tokens in store.leases if w == window] == [1] * 11


# ---------------------------------------------------------------------------- windows, grants, refusals
def test_a_window_change_drops_the_leftovers() -> None:
    store, clock = fake(500), ManualClock(START)  # one shard, leases up to 10
    (environment,) = environments(store, clock, 1)
    warm(environment, clock, 40)
    assert check(environment).allowed  # a lease of 10, one spent
    leased = len(store.leases)

    clock.advance(2)
    assert check(environment).allowed

    assert len(store.leases) == leased + 1  # the 9 left were not spent in the new window
    (_, window, _, tokens) = store.leases[-1]
    assert window == Window.at(clock()).number
    assert store.counters[(WS, window, 0)] == tokens == 1  # sized on the 1 admitted in the last window


def test_new_limits_drop_the_leftovers_taken_under_the_old_ones() -> None:
    store, clock = fake(500), ManualClock(START)  # one shard, leases up to 10
    (environment,) = environments(store, clock, 1)
    warm(environment, clock, 40)
    assert check(environment).allowed
    leased = len(store.leases)

    store.overrides[WS] = Limits(rate_per_second=1, daily_quota=0)
    decision = check(environment)

    assert len(store.leases) == leased + 1
    assert decision.limit == 2
    assert not decision.allowed  # the window's count (10) is past the new quota's cap


def test_a_partial_grant_admits_what_it_got_and_then_the_full_shard_costs_no_call() -> None:
    store, clock = fake(50), ManualClock(START)  # 100 a window, leases up to 5
    (environment,) = environments(store, clock, 1)
    warm(environment, clock, 20)
    window = Window.at(clock()).number
    store.counters[(WS, window, 0)] = 98  # the other environments took 98

    decisions = [check(environment) for _ in range(4)]

    assert [d.allowed for d in decisions] == [True, True, False, False]
    assert [d.remaining for d in decisions] == [1, 0, 0, 0]
    assert [(w, tokens) for _, w, _, tokens in store.leases if w == window] == [(window, 5)]  # one call
    refused = decisions[2].headers()
    assert refused["Retry-After"] == str(Window.at(clock()).reset_seconds)
    assert refused["RateLimit"] == '"workspace";r=0;t=2'


def test_a_shard_found_full_is_not_asked_again_in_its_window() -> None:
    store, clock = fake(1_500), ManualClock(START)  # 3,000 a window on 3 shards of 1,000
    environment = RequestLimits(store, clock=clock, shard_of=lambda n: 0)  # the first shard not full
    window = Window.at(clock()).number
    store.counters[(WS, window, 0)] = 1_000
    store.counters[(WS, window, 2)] = 1_000

    decisions = [check(environment) for _ in range(3)]
    store.counters[(WS, window, 1)] = 1_000
    late = [check(environment) for _ in range(3)]

    assert [d.allowed for d in decisions] == [False, True, True]  # shard 0 refused once, then shard 1
    assert [d.allowed for d in late] == [False, False, False]
    assert [shard for _, _, shard, _ in store.leases] == [0, 1, 1, 1, 2]  # then no call at all


def test_the_rate_check_fails_open_when_a_lease_cannot_be_taken() -> None:
    store, clock = fake(1), ManualClock(START)
    (environment,) = environments(store, clock, 1)
    store.down = True

    assert [environment.check_rate(WS) for _ in range(5)] == [None] * 5  # uncounted, all let through

    store.down = False
    assert [check(environment).allowed for _ in range(3)] == [True, True, False]


def test_leases_of_workspaces_not_seen_lately_are_forgotten() -> None:
    store, clock = fake(1_000), ManualClock(START)
    (environment,) = environments(store, clock, 1)
    for index in range(50):
        check(environment, f"ws_{index}")

    clock.advance(4)
    check(environment, "ws_now")

    assert set(environment._leases) == {"ws_now"}


def test_a_rate_change_takes_effect_at_a_windows_start_for_every_environment_at_once() -> None:
    """No window is counted under two rates: every environment applies the change from the same
    window on (`change_at`), so a window's shards and caps are one layout, and its count its own."""
    store, clock = fake(1_000), ManualClock(START)  # 2,000 a window on 2 shards
    change = Window.at(START).number * 2 + 4  # two windows later (epoch seconds, a window's start)
    store.changes[WS] = (LimitsChange(change, rate_per_second=300, daily_quota=None),)  # 600, 1 shard
    fleet = environments(store, clock, 4, seed=7)

    admitted: Counter[int] = Counter()
    for _ in range(4):  # four windows, the change at the start of the third
        for _ in range(700):
            for environment in fleet:
                if check(environment).allowed:
                    admitted[Window.at(clock()).number] += 1
        clock.advance(2)

    first = Window.at(START).number
    assert [admitted[first + i] for i in range(4)] == [2_000, 2_000, 600, 600]
    shards = {window: {shard for (_, w, shard) in store.counters if w == window} for window in admitted}
    assert shards[first] == shards[first + 1] == {0, 1}
    assert shards[first + 2] == shards[first + 3] == {0}
