"""Abuse and cost protections against moto, through the real API handler (CONTRACT section 18): a
premium-rate number is refused with its key left unused; concurrent sends against an sms budget
accept exactly the segments that fit, decided in the create's transaction; a workspace's retention
is its messages' expiry. Overrides are set as the CLI sets them.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from sendonce.adapters.dynamodb_limits import DynamoDbLimits
from sendonce.limits.model import Limits, ProtectionChange

from tests.integration.conftest import REGION, WORKSPACE, Stack
from tests.integration.test_limits import race, sms, usage

PREMIUM_RATE = "+19002345678"  # phonenumbers: PREMIUM_RATE
US = "+14155550100"


def protect(**values: Any) -> None:
    """As `sendonce workspace set-limits --wait` does, for functions that keep no limits cached."""
    limits = DynamoDbLimits(boto3.client("dynamodb", region_name=REGION), "LimitsTable", Limits(1, 0))
    change = limits.set_limits(WORKSPACE, None, None, cache_seconds=0, protection=ProtectionChange(**values))
    time.sleep(max(0.0, change.at - time.time()))


@pytest.fixture
def limited(stack: Stack) -> Stack:
    stack.setenv("SENDONCE_LIMITS_CACHE_SECONDS", "0")  # an override is seen at once
    stack.warm_api()
    return stack


def test_given_a_premium_rate_number_then_422_nothing_is_stored_and_the_key_works_once_allowed(
    limited: Stack,
) -> None:
    refused = limited.send(body=sms("win a prize", to=PREMIUM_RATE), key="premium-1")

    assert refused.status == 422, refused.raw_body
    assert refused.json["error"]["code"] == "destination_not_allowed"
    assert refused.json["error"]["details"] == {"reason": "premium_rate"}
    assert limited.messages() == []
    assert limited.scan("IdempotencyTable") == []  # never stored under the key

    protect(allow_premium_numbers=True)
    retried = limited.send(body=sms("win a prize", to=PREMIUM_RATE), key="premium-1")
    assert retried.status == 201, retried.raw_body
    assert retried.header("Idempotency-Replayed") is None


def test_given_a_budget_of_10_segments_when_50_single_segment_sends_race_then_exactly_10_are_accepted(
    limited: Stack,
) -> None:
    protect(daily_sms_segments=10)

    answers = race(50, lambda i: limited.send(body=sms(f"race {i}", to=f"+1415555{i:04d}")))

    assert Counter(answer.status for answer in answers) == {201: 10, 429: 40}
    refused = [answer for answer in answers if answer.status == 429]
    assert {answer.json["error"]["code"] for answer in refused} == {"sms_budget_exceeded"}
    assert all(1 <= int(answer.header("Retry-After") or 0) <= 86_400 for answer in refused)
    assert len(limited.messages()) == 10  # a refused send is never written,
    assert limited.queue_depth("sms") == 10  # so never handed to a queue nor sent
    assert usage(limited)["protections"]["smsBudget"] == {"dailySegments": 10, "usedToday": 10}


def test_given_a_budget_of_10_when_one_and_two_segment_sends_race_then_exactly_those_that_fit_are_accepted(
    limited: Stack,
) -> None:
    protect(daily_sms_segments=10)
    segments = [1 + i % 2 for i in range(50)]
    bodies = [f"mixed {i}".ljust(161 if n == 2 else 10, ".") for i, n in enumerate(segments)]

    answers = race(50, lambda i: limited.send(body=sms(bodies[i], to=f"+1415556{i:04d}")))

    accepted = sum(n for n, answer in zip(segments, answers, strict=True) if answer.status == 201)
    refused = [n for n, answer in zip(segments, answers, strict=True) if answer.status == 429]
    assert len(refused) + sum(answer.status == 201 for answer in answers) == 50
    assert accepted <= 10
    assert all(accepted + n > 10 for n in refused)  # no refused send would have fitted
    assert {answer.json["error"]["code"] for answer in answers if answer.status == 429} == {
        "sms_budget_exceeded"
    }
    assert len(limited.messages()) == 50 - len(refused)


def test_given_a_workspace_retention_then_its_messages_expire_after_it(limited: Stack) -> None:
    protect(retention_days=30)

    answer = limited.send(body=sms("kept a month", to=US))

    assert answer.status == 201, answer.raw_body
    item = limited.message_item(answer.json["message"]["id"])
    created = datetime.fromisoformat(item["createdAt"]["S"].replace("Z", "+00:00"))
    expires = datetime.fromtimestamp(int(item["expiresAt"]["N"]), UTC)
    assert abs(expires - (created + timedelta(days=30))) < timedelta(seconds=2)
    assert usage(limited)["protections"] == {
        "smsCountries": [],
        "allowPremiumNumbers": False,
        "smsBudget": None,
        "retentionDays": 30,
    }
