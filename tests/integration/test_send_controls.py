"""Send controls against moto, through the real API handler, set as the CLI sets them: the frequency
cap is exact under a race and never counts a replay or a duplicate, its 429 leaves the key unused,
quiet hours hold a message as `scheduled` until they end, a critical send passes both, a send's
expiry and zone are checked, and `GET /v1/usage` shows the workspace's controls.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sendonce.limits.model import SendControlsChange

from tests.integration.conftest import WORKSPACE, Stack
from tests.integration.test_limits import race, set_limits, usage

TO = "+15550100007"


def set_controls(workspace: str = WORKSPACE, **controls: Any) -> None:
    """The workspace's send controls, as `sendonce workspace set-limits --wait` sets them."""
    set_limits(workspace, controls=SendControlsChange(**controls))


@pytest.fixture
def controlled(stack: Stack) -> Stack:
    stack.setenv("SENDONCE_LIMITS_CACHE_SECONDS", "0")  # an override is seen at once
    stack.warm_api()
    return stack


def sms(body: str, to: str = TO, **fields: Any) -> dict[str, Any]:
    return {"channel": "sms", "to": to, "body": body, **fields}


def quiet_now() -> str:
    """Quiet hours around this moment, in UTC: from an hour ago to two hours ahead."""
    now = datetime.now(UTC)
    return f"{(now - timedelta(hours=1)):%H:%M}-{(now + timedelta(hours=2)):%H:%M}"


def test_given_a_cap_of_3_when_30_different_sends_to_one_recipient_race_then_exactly_3_are_accepted(
    controlled: Stack,
) -> None:
    set_controls(per_recipient=3, per_recipient_window=3600)

    answers = race(30, lambda i: controlled.send(body=sms(f"race {i}")))

    statuses = sorted(answer.status for answer in answers)
    assert statuses == [201] * 3 + [429] * 27
    refused = [answer for answer in answers if answer.status == 429]
    assert {answer.json["error"]["code"] for answer in refused} == {"recipient_capped"}
    assert all(0 < int(answer.header("Retry-After") or 0) <= 3600 + 360 for answer in refused)
    assert len(controlled.messages()) == 3


def test_given_a_full_cap_then_a_replay_and_a_duplicate_are_answered_and_count_nothing(
    controlled: Stack,
) -> None:
    set_controls(per_recipient=2, per_recipient_window=600)
    first = controlled.send(body=sms("keyed"), key="order-1")
    second = controlled.send(body=sms("keyless"))
    assert (first.status, second.status) == (201, 201)

    replay = controlled.send(body=sms("keyed"), key="order-1")
    duplicate = controlled.send(body=sms("keyless"))
    third = controlled.send(body=sms("one too many"))

    assert replay.status == 201
    assert replay.header("Idempotency-Replayed") == "true"
    assert duplicate.status == 200
    assert duplicate.json["duplicateOnly"] is True
    assert third.status == 429
    assert third.json["error"]["code"] == "recipient_capped"


def test_given_a_429_under_a_key_then_the_key_stays_unused_and_a_critical_send_passes(
    controlled: Stack,
) -> None:
    set_controls(per_recipient=1, per_recipient_window=600)
    assert controlled.send(body=sms("the one")).status == 201

    refused = controlled.send(body=sms("your code is 1234"), key="otp-1")
    critical = controlled.send(body=sms("your code is 1234", priority="critical"), key="otp-1")

    assert refused.status == 429
    assert critical.status == 201  # the key was left unused by the 429
    assert critical.header("Idempotency-Replayed") is None
    assert critical.json["message"]["priority"] == "critical"


def test_given_a_cap_then_another_recipient_is_not_counted(controlled: Stack) -> None:
    set_controls(per_recipient=1, per_recipient_window=600)
    assert controlled.send(body=sms("one")).status == 201
    assert controlled.send(body=sms("two", to="+15550100008")).status == 201
    assert controlled.send(body=sms("three")).status == 429


def test_given_a_cap_then_a_batch_counts_each_item_and_refuses_the_rest(controlled: Stack) -> None:
    set_controls(per_recipient=2, per_recipient_window=600)
    items = [sms(f"batch {i}") for i in range(4)] + [sms("elsewhere", to="+15550100009")]

    answer = controlled.call(
        controlled.event("api_send_sms.json", body={"messages": items}, path="/v1/messages/batch")
    )

    assert answer.status == 200, answer.raw_body
    results = answer.json["results"]
    assert [result["status"] for result in results] == [201, 201, 429, 429, 201]
    assert results[2]["error"]["code"] == "recipient_capped"


def test_given_quiet_hours_now_then_a_send_is_held_until_they_end_and_a_critical_one_is_not(
    controlled: Stack,
) -> None:
    hours = quiet_now()
    set_controls(quiet_hours=hours, timezone="UTC")

    held = controlled.send(body=sms("a reminder"))
    critical = controlled.send(body=sms("your code is 9876", priority="critical"))

    assert held.status == 201, held.raw_body
    message = held.json["message"]
    assert message["status"] == "scheduled"
    assert message["heldFor"] == "quiet_hours"
    ends = datetime.fromisoformat(message["sendAt"].replace("Z", "+00:00"))
    assert f"{ends:%H:%M}" == hours.split("-")[1]
    assert timedelta(hours=1) < ends - datetime.now(UTC) <= timedelta(hours=2)
    assert critical.json["message"]["status"] == "queued"
    assert "heldFor" not in critical.json["message"]


def test_given_quiet_hours_then_a_send_with_its_own_zone_outside_them_goes_at_once(controlled: Stack) -> None:
    set_controls(quiet_hours=quiet_now(), timezone="UTC")

    # Their wall clocks are 5:30 ahead of UTC and 6 hours behind: outside hours from an hour
    # before UTC's now to two hours after.
    answers = [
        controlled.send(body=sms(f"zone {zone}", timezone=zone))
        for zone in ("Asia/Kolkata", "America/Mexico_City")
    ]

    assert [answer.json["message"]["status"] for answer in answers] == ["queued", "queued"]


def test_given_send_controls_then_usage_shows_them(controlled: Stack) -> None:
    assert usage(controlled)["sendControls"] == {"frequencyCap": None, "quietHours": None, "timezone": "UTC"}

    set_controls(
        per_recipient=5, per_recipient_window=3600, quiet_hours="21:00-08:00", timezone="Europe/Paris"
    )

    assert usage(controlled)["sendControls"] == {
        "frequencyCap": {"perRecipient": 5, "windowSeconds": 3600},
        "quietHours": {"hours": "21:00-08:00"},
        "timezone": "Europe/Paris",
    }


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"expiresAt": "2020-01-01T00:00:00Z"}, "expiresAt"),
        ({"validForSeconds": 59}, "validForSeconds"),
        ({"validForSeconds": 30 * 24 * 3600 + 1}, "validForSeconds"),
        ({"timezone": "Mars/Olympus_Mons"}, "timezone"),
        ({"priority": "urgent"}, "priority"),
    ],
)
def test_a_send_with_a_bad_control_is_400(controlled: Stack, fields: dict[str, Any], field: str) -> None:
    answer = controlled.send(body=sms("checked", **fields))

    assert answer.status == 400, answer.raw_body
    assert answer.json["error"]["code"] == "validation_error"
    assert field in {detail["field"] for detail in answer.json["error"]["details"]}


def test_a_send_valid_for_a_while_shows_when_it_expires(controlled: Stack) -> None:
    later = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0)
    by_instant = controlled.send(body=sms("until then", expiresAt=later.isoformat().replace("+00:00", "Z")))
    by_validity = controlled.send(body=sms("for ten minutes", validForSeconds=600))

    shown = datetime.fromisoformat(by_instant.json["message"]["expiresAt"].replace("Z", "+00:00"))
    assert shown == later
    expires = datetime.fromisoformat(by_validity.json["message"]["expiresAt"].replace("Z", "+00:00"))
    assert timedelta(minutes=9) < expires - datetime.now(UTC) <= timedelta(minutes=10)
