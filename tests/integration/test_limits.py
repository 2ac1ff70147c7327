"""Per-workspace limits against moto, through the real API handler: the quota is exact under a race,
a replay and a caught duplicate are answered when it is spent, a 429 is never stored under a key,
and the request rate answers 429 with its fields. Overrides are set as the CLI sets them. The rate's
leases on the real table: several execution environments (one `RequestLimits` each, threads racing
in each) never admit more than a window's quota, and most of their requests cost no call.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from sendonce.adapters.dynamodb_limits import DynamoDbLimits
from sendonce.limits.model import Limits, SendControlsChange, Window
from sendonce.limits.service import RequestLimits

from tests.integration.conftest import REGION, WORKSPACE, ApiAnswer, Stack

OTHER_WORKSPACE = "ws_other"


def set_limits(
    workspace: str = WORKSPACE,
    rate: int | None = None,
    daily_quota: int | None = None,
    controls: SendControlsChange | None = None,
) -> None:
    """As `sendonce workspace set-limits --wait` does, for functions that keep no limits cached."""
    limits = DynamoDbLimits(boto3.client("dynamodb", region_name=REGION), "LimitsTable", Limits(1, 0))
    change = limits.set_limits(workspace, rate, daily_quota, cache_seconds=0, controls=controls)
    time.sleep(max(0.0, change.at - time.time()))


@pytest.fixture
def limited(stack: Stack) -> Stack:
    stack.setenv("SENDONCE_LIMITS_CACHE_SECONDS", "0")  # an override is seen at once
    stack.warm_api()
    return stack


def sms(body: str, to: str = "+15550100001") -> dict[str, Any]:
    return {"channel": "sms", "to": to, "body": body}


def race(count: int, run: Any) -> list[ApiAnswer]:
    barrier = threading.Barrier(count)
    answers: list[Any] = [None] * count

    def contender(index: int) -> None:
        barrier.wait()
        answers[index] = run(index)

    threads = [threading.Thread(target=contender, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def usage(stack: Stack, workspace: str = WORKSPACE) -> dict[str, Any]:
    answer = stack.call(stack.event("api_get_message.json", path="/v1/usage", workspace=workspace))
    assert answer.status == 200, answer.raw_body
    report: dict[str, Any] = answer.json
    return report


def test_given_a_quota_of_n_when_n_plus_50_new_sends_race_then_exactly_n_are_accepted(limited: Stack) -> None:
    quota = 20
    set_limits(daily_quota=quota)

    answers = race(quota + 50, lambda i: limited.send(body=sms(f"race {i}", to=f"+1555010{i:04d}")))

    statuses = Counter(answer.status for answer in answers)
    assert statuses == {201: quota, 429: 50}
    refused = [answer for answer in answers if answer.status == 429]
    assert {answer.json["error"]["code"] for answer in refused} == {"quota_exceeded"}
    assert all(int(answer.header("Retry-After") or 0) >= 1 for answer in refused)
    assert len(limited.messages()) == quota  # a message refused for quota is never written,
    assert limited.queue_depth("sms") == quota  # so never handed to a queue nor sent
    assert usage(limited)["quota"] == {**usage(limited)["quota"], "daily": quota, "usedToday": quota}


def test_given_the_quota_is_spent_then_a_replay_and_a_duplicate_are_still_answered(limited: Stack) -> None:
    set_limits(daily_quota=2)
    first = limited.send(body=sms("keyed"), key="order-1")
    second = limited.send(body=sms("keyless"))
    assert (first.status, second.status) == (201, 201)

    replay = limited.send(body=sms("keyed"), key="order-1")
    duplicate = limited.send(body=sms("keyless"))
    new = limited.send(body=sms("one too many"))

    assert replay.status == 201
    assert replay.header("Idempotency-Replayed") == "true"
    assert replay.json["message"]["id"] == first.json["message"]["id"]
    assert duplicate.status == 200
    assert duplicate.json["duplicateOnly"] is True
    assert duplicate.json["message"]["id"] == second.json["message"]["id"]
    assert new.status == 429
    assert new.json["error"]["code"] == "quota_exceeded"
    assert usage(limited)["quota"]["usedToday"] == 2  # the replay and the duplicate took nothing


def test_given_a_429_under_a_key_then_nothing_is_stored_and_the_key_works_once_there_is_room(
    limited: Stack,
) -> None:
    set_limits(daily_quota=1)
    assert limited.send(body=sms("the one")).status == 201

    refused = limited.send(body=sms("later"), key="retry-me")
    set_limits(daily_quota=2)
    retried = limited.send(body=sms("later"), key="retry-me")

    assert refused.status == 429
    assert retried.status == 201
    assert retried.header("Idempotency-Replayed") is None


def send_batch(stack: Stack, count: int, label: str) -> list[int]:
    items = [sms(f"{label} {i}", to=f"+1555011{i:04d}") for i in range(count)]
    answer = stack.call(stack.event("api_send_sms.json", body={"messages": items}, path="/v1/messages/batch"))
    assert answer.status == 200, answer.raw_body
    return [result["status"] for result in answer.json["results"]]


def around_a_change(stack: Stack, label: str, batch: int) -> int:
    """30 sends racing a batch of `batch` items, as the outside suite sent them: how many were new."""

    def contender(index: int) -> list[int]:
        if index == 30:
            return send_batch(stack, batch, f"{label} batch")
        return [stack.send(body=sms(f"{label} {index}", to=f"+1555012{index:04d}")).status]

    statuses = [status for answer in race(31, contender) for status in answer]
    assert set(statuses) <= {201, 429}, statuses
    return statuses.count(201)


def test_given_the_quota_lowered_to_one_more_than_used_then_usage_is_kept_and_one_more_is_sent(
    limited: Stack,
) -> None:
    set_limits(daily_quota=100_000)
    assert send_batch(limited, 61, "morning") == [201] * 61
    set_limits(daily_quota=62)

    kept = usage(limited)["quota"]
    accepted = around_a_change(limited, "after", batch=60)

    assert kept["usedToday"] == 61  # it said 0 before
    assert kept["daily"] == 62
    assert accepted == 1  # 121 accepted on a quota of 62, before
    assert usage(limited)["quota"]["usedToday"] == 62
    assert len(limited.messages()) == 62


def test_given_the_quota_raised_then_lowered_then_raised_the_day_never_passes_the_quota_in_force(
    limited: Stack,
) -> None:
    set_limits(daily_quota=150)
    assert send_batch(limited, 150, "morning") == [201] * 150

    set_limits(daily_quota=200)
    raised = around_a_change(limited, "raised", batch=120)
    set_limits(daily_quota=120)
    lowered = around_a_change(limited, "lowered", batch=60)
    set_limits(daily_quota=260)
    raised_again = around_a_change(limited, "raised again", batch=120)

    assert raised == 50  # 100 more, and 250 used of 200, before
    assert lowered == 0
    assert raised_again == 60
    assert usage(limited)["quota"] == {**usage(limited)["quota"], "daily": 260, "usedToday": 260}
    assert len(limited.messages()) == 260


def test_given_a_spent_quota_then_another_workspace_still_sends(limited: Stack) -> None:
    set_limits(daily_quota=1)
    assert limited.send(body=sms("mine")).status == 201
    assert limited.send(body=sms("mine too")).status == 429

    theirs = limited.send(body=sms("theirs"), workspace=OTHER_WORKSPACE)

    assert theirs.status == 201
    assert usage(limited, OTHER_WORKSPACE)["quota"]["usedToday"] == 1


def test_given_a_batch_past_the_quota_then_each_new_item_counts_and_the_rest_get_429(limited: Stack) -> None:
    set_limits(daily_quota=5)
    assert limited.send(body=sms("item 0")).status == 201  # one already used, and repeated below
    items = [sms(f"item {i}") for i in range(8)]

    answer = limited.call(
        limited.event("api_send_sms.json", body={"messages": items}, path="/v1/messages/batch")
    )

    assert answer.status == 200, answer.raw_body
    results = answer.json["results"]
    assert [r["status"] for r in results] == [200, 201, 201, 201, 201, 429, 429, 429]
    assert results[0]["duplicateOnly"] is True  # a caught duplicate spends nothing
    assert {r["error"]["code"] for r in results[5:]} == {"quota_exceeded"}
    assert len(limited.messages()) == 5


def test_given_a_batch_key_and_items_past_the_quota_then_the_answer_is_not_stored(limited: Stack) -> None:
    set_limits(daily_quota=1)
    items = [sms("a"), sms("b")]
    event = limited.event(
        "api_send_sms.json",
        body={"messages": items},
        path="/v1/messages/batch",
        headers={"Idempotency-Key": "batch-1"},
    )
    first = limited.call(event)
    set_limits(daily_quota=2)
    second = limited.call(event)

    assert [r["status"] for r in first.json["results"]] == [201, 429]
    assert second.header("Idempotency-Replayed") is None  # run again, not replayed
    assert [r["status"] for r in second.json["results"]] == [200, 201]


def test_given_a_rate_then_requests_past_it_get_429_with_the_ratelimit_fields(limited: Stack) -> None:
    set_limits(rate=1)  # 2 requests a 2-second window

    # Six cheap requests at once (an unknown message: one read past the rate check), so however
    # slow the machine they fall in one or two windows of two; tried again if they straddled more.
    def burst() -> list[Any]:
        event = limited.event("api_get_message.json", path="/v1/messages/msg_00000000000000000000000000")
        with ThreadPoolExecutor(max_workers=6) as pool:
            return list(pool.map(lambda _: limited.call(event), range(6)))

    for _ in range(3):
        answers = burst()
        if any(answer.status == 429 for answer in answers):
            break

    statuses = [answer.status for answer in answers]
    assert statuses.count(429) >= 1
    assert set(statuses) <= {404, 429}
    refused = next(answer for answer in answers if answer.status == 429)
    assert refused.json["error"]["code"] == "rate_limited"
    assert 1 <= int(refused.header("Retry-After") or 0) <= 2
    for answer in answers:  # every authenticated answer carries both fields
        assert answer.header("RateLimit-Policy") == '"workspace";q=2;w=2'
        assert (answer.header("RateLimit") or "").startswith('"workspace";r=')
    assert "r=0;" in (refused.header("RateLimit") or "")


def test_given_a_rate_limited_send_then_nothing_is_written(limited: Stack) -> None:
    set_limits(rate=1)
    answers = [limited.send(body=sms(f"burst {i}")) for i in range(5)]

    created = [answer for answer in answers if answer.status == 201]
    assert len(created) + sum(answer.status == 429 for answer in answers) == 5
    assert len(limited.messages()) == len(created)
    quota_units = sum(
        int(i["used"]["N"]) for i in limited.scan("LimitsTable") if i["pk"]["S"].startswith("QUOTA#")
    )
    assert quota_units == len(created)  # a refused request spent no quota


def test_public_routes_carry_no_ratelimit_fields(limited: Stack) -> None:
    answer = limited.call(
        limited.event("api_get_message.json", path="/v1/health", workspace=None, method="GET")
    )

    assert answer.status == 200
    assert answer.header("RateLimit") is None


def test_counters_carry_the_expiry_ttl_removes_them_by(limited: Stack) -> None:
    limited.send(body=sms("counted"))

    counters = [item for item in limited.scan("LimitsTable") if item["sk"]["S"] == "count"]

    assert {item["pk"]["S"].split("#")[0] for item in counters} == {"RATE", "QUOTA"}
    assert all("expiresAt" in item for item in counters)


# ---------------------------------------------------------------------------- the rate's leases
WINDOW_START = datetime(2026, 11, 30, 12, 0, 2, tzinfo=UTC)  # a window's first instant
LEASED = "ws_leased"


class Environment:
    """One execution environment's rate check on the emulated table, its clock set by the test,
    counting its `UpdateItem` calls."""

    def __init__(self, rate: int, seed: int) -> None:
        self.now = WINDOW_START
        self.calls = 0
        client = boto3.client("dynamodb", region_name=REGION)
        client.meta.events.register("before-call.dynamodb.UpdateItem", self._count)
        store = DynamoDbLimits(client, "LimitsTable", defaults=Limits(rate, 0), cache_seconds=600)
        self.limits = RequestLimits(store, clock=lambda: self.now, shard_of=random.Random(seed).randrange)

    def _count(self, **_: Any) -> None:
        self.calls += 1

    def check(self) -> bool:
        decision = self.limits.check_rate(LEASED)
        assert decision is not None
        return decision.allowed

    def drain(self, shards: int) -> int:
        """Requests until it has found every shard of the window full: what it still admits."""
        admitted = refused = 0
        while refused < shards:
            if self.check():
                admitted += 1
            else:
                refused += 1
        return admitted


def race_in(environments: list[Environment], threads: int, requests: int) -> int:
    """`threads` threads spread over the environments, each making `requests` requests: the admitted."""
    admitted = [0] * threads

    def run(index: int) -> None:
        admitted[index] = sum(environments[index % len(environments)].check() for _ in range(requests))

    answers = race(threads, run)
    assert answers == [None] * threads
    return sum(admitted)


def rate_counts(stack: Stack) -> dict[str, int]:
    return {
        item["pk"]["S"]: int(item["hits"]["N"])
        for item in stack.scan("LimitsTable")
        if item["pk"]["S"].startswith(f"RATE#{LEASED}#")
    }


def warm(environments: list[Environment], requests: int) -> None:
    """Each admits `requests` in the window before, as a busy environment has: its leases grow."""
    for environment in environments:
        environment.now = datetime.fromtimestamp(WINDOW_START.timestamp() - 2, UTC)
        assert all(environment.check() for _ in range(requests))
        environment.now = WINDOW_START


@pytest.mark.parametrize(("rate", "shards"), [(100, 1), (1_000, 2)])
def test_given_environments_racing_on_leases_then_never_more_than_the_windows_quota(
    stack: Stack, rate: int, shards: int
) -> None:
    environments = [Environment(rate, seed) for seed in range(4)]
    quota = Limits(rate, 0).window_quota
    warm(environments, 40)  # leases of 10 from then on
    calls_before = sum(environment.calls for environment in environments)

    raced = race_in(environments, threads=12, requests=quota // 4)  # three times the quota asked
    calls = sum(environment.calls for environment in environments) - calls_before

    assert raced <= quota
    # Leases of 10: a tenth of a call a request; then one lease per shard crosses its cap, and each
    # thread may be refused once per shard before its environment knows the shard full.
    assert calls <= quota // 10 + shards + 12 * shards
    drained = sum(environment.drain(shards) for environment in environments)
    assert raced + drained == quota  # every token granted was spent, and no more
    window = Window.at(WINDOW_START).number
    counts = {pk: n for pk, n in rate_counts(stack).items() if f"#{window}#" in pk}
    assert len(counts) == shards
    assert sum(counts.values()) >= quota  # what was asked; granted only up to each shard's cap


def test_given_a_small_rate_then_environments_take_leases_of_one_and_count_exactly(stack: Stack) -> None:
    environments = [Environment(5, seed) for seed in range(3)]  # 10 a window
    warm(environments[:1], 10)

    raced = race_in(environments, threads=6, requests=5)

    assert raced == 10
    window = Window.at(WINDOW_START).number
    counts = rate_counts(stack)
    # One call a request until each environment has found the window full: 1 token each.
    calls = sum(environment.calls for environment in environments) - 10
    assert counts[f"RATE#{LEASED}#{window}#0"] == calls
    assert calls <= 10 + 6
