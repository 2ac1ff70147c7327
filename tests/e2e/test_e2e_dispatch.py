"""Issue 6, end to end: delivery guarantees under provider faults, bursts, schedules and cancels."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
import requests

from tests.e2e.e2e_support import (
    SETTLED,
    arm_fault,
    created_id,
    deliveries_of,
    deliveries_with_body,
    email,
    eventually,
    formatted,
    imessage,
    message,
    parse_time,
    rfc3339,
    send,
    sms,
    unique_body,
    unique_email,
    unique_phone,
    wait_status,
)

if TYPE_CHECKING:
    from tests.e2e.conftest import LocalStack

pytestmark = pytest.mark.e2e

SCHEDULE_AHEAD_SECONDS = 8


def test_transient_errors_are_retried_until_delivered_once(stack: LocalStack) -> None:
    phone, body = unique_phone(), unique_body("two 500s")
    arm_fault(stack, "error_500", to=phone, count=2)

    message_id = created_id(send(stack, imessage(phone, body)))
    final = wait_status(stack, message_id, SETTLED, timeout=60)

    assert final["attempts"] == 3
    assert final["error"] is None
    assert len(deliveries_of(stack, message_id)) == 1


def test_a_permanent_error_fails_at_once_and_delivers_nothing(stack: LocalStack) -> None:
    phone = unique_phone()
    arm_fault(stack, "error_400", to=phone)

    message_id = created_id(send(stack, imessage(phone, unique_body("a 400"))))
    final = wait_status(stack, message_id, ("failed", *SETTLED))

    assert final["status"] == "failed"
    assert final["attempts"] == 1
    assert final["error"]["code"] == "provider_rejected"
    assert deliveries_of(stack, message_id) == []


def test_a_lost_provider_answer_is_retried_with_the_same_key_and_delivered_once(
    short_stack: LocalStack,
) -> None:
    phone = unique_phone()
    arm_fault(short_stack, "timeout", to=phone)  # recorded, then answered after the 2 s timeout

    answer = send(short_stack, imessage(phone, unique_body("timeout")), idempotency_key=str(uuid.uuid4()))
    message_id = created_id(answer)
    final = wait_status(short_stack, message_id, "sent", timeout=60)

    assert final["attempts"] == 2  # the first attempt's answer was lost: tried again
    delivered = deliveries_of(short_stack, message_id)
    assert len(delivered) == 1  # the sandbox saw the same Idempotency-Key and delivered nothing new
    assert delivered[0]["provider"] == "http"


def _burst_requests(label: str) -> list[tuple[str, list[dict[str, Any]]]]:
    """Per unique message (its body), the variants that must all be one message."""
    unique: list[tuple[str, list[dict[str, Any]]]] = []
    for _ in range(2):
        phone, body = unique_phone(), unique_body(f"{label} sms")
        unique.append((body, [sms(phone, body), sms(formatted(phone), body)] * 2))
        phone, body = unique_phone(), unique_body(f"{label} imessage")
        unique.append((body, [imessage(phone, body), imessage(formatted(phone), body)] * 2))
        address, body = unique_email("Burst"), unique_body(f"{label} email")
        unique.append((body, [email(address, body), email(address.lower(), body)] * 2))
    return unique


def test_a_mixed_burst_of_duplicates_delivers_each_unique_message_once(stack: LocalStack) -> None:
    unique = _burst_requests("burst")
    requests_ = [request for _, variants in unique for request in variants]

    with ThreadPoolExecutor(max_workers=len(requests_)) as pool:
        answers = list(pool.map(lambda request: send(stack, request), requests_))

    codes = Counter(answer.status_code for answer in answers)
    assert codes == {201: len(unique), 200: len(requests_) - len(unique)}, codes
    ids = {created_id(answer) for answer in answers if answer.status_code == 201}
    for message_id in ids:
        wait_status(stack, message_id, SETTLED)
    for body, _ in unique:
        assert len(deliveries_with_body(stack, body)) == 1, body


@dataclass(frozen=True)
class Scheduled:
    send_at: datetime
    kept: str
    canceled: str


@pytest.fixture(scope="module")
def scheduled(stack: LocalStack) -> Scheduled:
    """Two sends for the same time: one kept, one canceled at once (set up together, saving a wait)."""
    send_at = datetime.now(UTC) + timedelta(seconds=SCHEDULE_AHEAD_SECONDS)
    kept = send(stack, sms(unique_phone(), unique_body("scheduled")) | {"sendAt": rfc3339(send_at)})
    canceled = send(stack, imessage(unique_phone(), unique_body("canceled")) | {"sendAt": rfc3339(send_at)})
    assert kept.json()["status"] == "scheduled", kept.text
    assert canceled.json()["status"] == "scheduled", canceled.text
    answer = requests.delete(
        f"{stack.api}/v1/messages/{created_id(canceled)}", headers=stack.auth(), timeout=10
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["message"]["status"] == "canceled"
    return Scheduled(send_at, created_id(kept), created_id(canceled))


def test_a_scheduled_send_arrives_no_earlier_than_send_at(stack: LocalStack, scheduled: Scheduled) -> None:
    assert message(stack, scheduled.kept)["status"] in ("scheduled", *SETTLED)

    final = wait_status(stack, scheduled.kept, SETTLED, timeout=SCHEDULE_AHEAD_SECONDS + 60)

    delivered = deliveries_of(stack, scheduled.kept)
    assert len(delivered) == 1
    assert parse_time(delivered[0]["at"]) >= scheduled.send_at
    assert final["sendAt"] is not None


def test_a_canceled_scheduled_send_never_arrives(stack: LocalStack, scheduled: Scheduled) -> None:
    # Wait past its time, and past the time its sibling (due at the same instant) was delivered.
    eventually(lambda: deliveries_of(stack, scheduled.kept), timeout=SCHEDULE_AHEAD_SECONDS + 60)
    time.sleep(max(0.0, (scheduled.send_at - datetime.now(UTC)).total_seconds()) + 3)

    assert deliveries_of(stack, scheduled.canceled) == []
    final = message(stack, scheduled.canceled)
    assert final["status"] == "canceled"
    assert final["attempts"] == 0
