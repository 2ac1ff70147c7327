"""Send controls through `sendonce run` (CONTRACT section 16), set with the CLI on the second
workspace and removed at the end: the frequency cap's 429 and its Retry-After, a critical send past
it, quiet hours holding a message as `scheduled` with its reason, `GET /v1/usage` showing them, and a
message that waits past its expiry ending `expired`, never delivered."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import requests

from tests.e2e.conftest import LocalStack
from tests.e2e.e2e_support import (
    deliveries_of,
    error_code,
    parse_time,
    rfc3339,
    send,
    sms,
    unique_body,
    unique_phone,
    wait_status,
)
from tests.e2e.test_e2e_limits import set_limits, usage


@pytest.fixture
def controlled(stack: LocalStack) -> Iterator[LocalStack]:
    yield stack
    removed = set_limits(stack, "--per-recipient", "0", "--quiet-hours", "none", "--timezone", "UTC")
    assert removed.returncode == 0, removed.stderr


def test_the_cap_refuses_past_it_tells_when_and_lets_a_critical_send_through(controlled: LocalStack) -> None:
    stack = controlled
    done = set_limits(stack, "--per-recipient", "2", "--per-recipient-window", "600")
    assert done.returncode == 0, done.stderr
    assert "at most 2 a recipient in 600 s" in done.stdout
    phone, key = unique_phone(), stack.other_api_key

    first = send(stack, sms(phone, unique_body("capped one")), key=key)
    second = send(stack, sms(phone, unique_body("capped two")), key=key)
    duplicate = send(stack, sms(phone, first.json()["message"]["body"]), key=key)
    third = send(stack, sms(phone, unique_body("capped three")), key=key)
    critical = send(stack, {**sms(phone, unique_body("your code")), "priority": "critical"}, key=key)

    assert (first.status_code, second.status_code, duplicate.status_code) == (201, 201, 200)
    assert third.status_code == 429
    assert error_code(third) == "recipient_capped"
    assert 0 < int(third.headers["Retry-After"]) <= 660
    assert critical.status_code == 201
    assert usage(stack).json()["sendControls"]["frequencyCap"] == {"perRecipient": 2, "windowSeconds": 600}


def test_quiet_hours_hold_a_message_until_they_end_and_usage_shows_them(controlled: LocalStack) -> None:
    stack = controlled
    now = datetime.now(UTC)
    hours = f"{now - timedelta(hours=1):%H:%M}-{now + timedelta(hours=2):%H:%M}"
    done = set_limits(stack, "--quiet-hours", hours, "--timezone", "UTC")
    assert done.returncode == 0, done.stderr

    answer = send(stack, sms(unique_phone(), unique_body("held")), key=stack.other_api_key)

    assert answer.status_code == 201, answer.text
    message = answer.json()["message"]
    assert (message["status"], message["heldFor"]) == ("scheduled", "quiet_hours")
    assert f"{parse_time(message['sendAt']):%H:%M}" == hours.split("-")[1]
    controls = usage(stack).json()["sendControls"]
    assert controls["quietHours"] == {"hours": hours}
    assert controls["timezone"] == "UTC"


def test_a_message_due_after_its_expiry_ends_expired_and_is_never_delivered(stack: LocalStack) -> None:
    now = datetime.now(UTC)
    request = {
        **sms(unique_phone(), unique_body("too late")),
        "sendAt": rfc3339(now + timedelta(seconds=4)),
        "expiresAt": rfc3339(now + timedelta(seconds=2)),
    }

    answer = send(stack, request)

    assert answer.status_code == 201, answer.text
    message_id = answer.json()["message"]["id"]
    ended = wait_status(stack, message_id, ("expired", "sent", "delivered", "failed"))
    assert ended["status"] == "expired"
    assert deliveries_of(stack, message_id) == []
    same_again = send(stack, {**request, "sendAt": None, "expiresAt": None})
    assert same_again.status_code == 201  # its dedup lock was released


def test_a_send_with_an_expiry_in_the_past_is_400(stack: LocalStack) -> None:
    answer = requests.post(
        f"{stack.api}/v1/messages",
        json={**sms(unique_phone(), unique_body("stale")), "expiresAt": "2020-01-01T00:00:00Z"},
        headers=stack.auth(None),
        timeout=30,
    )

    assert answer.status_code == 400
    assert error_code(answer) == "validation_error"
