"""Per-workspace limits against moto, through the real API handler: the quota is exact under a race,
a replay and a caught duplicate are answered when it is spent, a 429 is never stored under a key,
and the request rate answers 429 with its fields. Overrides are set as the CLI sets them.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import boto3
import pytest
from sendonce.adapters.dynamodb_limits import DynamoDbLimits
from sendonce.limits.model import Limits

from tests.integration.conftest import REGION, WORKSPACE, ApiAnswer, Stack

OTHER_WORKSPACE = "ws_other"


def set_limits(workspace: str = WORKSPACE, rate: int | None = None, daily_quota: int | None = None) -> None:
    """As `sendonce workspace set-limits` does."""
    limits = DynamoDbLimits(boto3.client("dynamodb", region_name=REGION), "LimitsTable", Limits(1, 0))
    limits.set_limits(workspace, rate, daily_quota)


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

    answers = [
        limited.call(limited.event("api_get_message.json", path="/v1/messages", query={})) for _ in range(5)
    ]

    statuses = [answer.status for answer in answers]
    assert statuses.count(429) >= 1  # five requests span at most two windows of two
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
