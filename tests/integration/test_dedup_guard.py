"""The atomic dedup guard through the API handler on moto (docs/guarantees.md, Sending)."""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

SMS = {"channel": "sms", "to": "+15550100000", "body": "Your code is 123456"}
EMAIL = {"channel": "email", "to": "ada@example.com", "subject": "Hi", "body": "Hello Ada"}


def test_given_a_second_identical_request_then_200_duplicate_only_with_the_original_and_its_age(
    stack,
) -> None:
    first = stack.send(body=SMS)

    second = stack.send(body=SMS)

    assert first.status == 201
    assert second.status == 200
    assert second.json["success"] is True
    assert second.json["duplicateOnly"] is True
    assert second.json["message"] == first.json["message"]
    assert re.search(r"\b\d+s ago\b", second.json["duplicateMessage"]), second.json["duplicateMessage"]
    assert len(stack.messages()) == 1
    assert stack.queue_depth("sms") == 1


@pytest.mark.parametrize("variant", ["+1 (555) 010-0000", "+1 555 010 0000", "+1-555-010-0000"])
def test_given_formatting_variants_of_one_phone_then_duplicates(stack, variant: str) -> None:
    first = stack.send(body=SMS)

    answer = stack.send(body=SMS | {"to": variant})

    assert answer.status == 200
    assert answer.json["message"]["id"] == first.json["message"]["id"]


@pytest.mark.parametrize("variant", ["ADA@EXAMPLE.COM", "Ada@Example.com", "ada@EXAMPLE.com"])
def test_given_email_case_variants_then_duplicates(stack, variant: str) -> None:
    first = stack.send("api_send_email.json", body=EMAIL)

    answer = stack.send("api_send_email.json", body=EMAIL | {"to": variant})

    assert answer.status == 200
    assert answer.json["duplicateOnly"] is True
    assert answer.json["message"]["id"] == first.json["message"]["id"]


def test_given_metadata_alone_differs_then_a_duplicate(stack) -> None:
    stack.send(body=SMS | {"metadata": {"a": "1"}})

    assert stack.send(body=SMS | {"metadata": {"a": "2"}}).status == 200


@pytest.mark.parametrize(
    ("change", "workspace"),
    [
        ({"body": "Your code is 123457"}, "ws_local"),
        ({"to": "+15550100001"}, "ws_local"),
        ({}, "ws_other"),
    ],
)
def test_given_another_body_recipient_or_workspace_then_not_a_duplicate(
    stack, change: dict, workspace: str
) -> None:
    stack.send(body=SMS)

    answer = stack.send(body=SMS | change, workspace=workspace)

    assert answer.status == 201
    assert stack.queue_depth("sms") == 2


def test_given_one_body_to_50_recipients_then_50_messages(stack) -> None:
    answers = [stack.send(body=SMS | {"to": f"+1555010{index:04d}"}) for index in range(50)]

    assert [a.status for a in answers] == [201] * 50
    assert len({a.json["message"]["id"] for a in answers}) == 50
    assert stack.queue_depth("sms") == 50


def test_given_the_window_is_over_then_a_new_message_although_the_expired_lock_is_still_stored(stack) -> None:
    stack.setenv("SENDONCE_DEDUP_WINDOW_SECONDS", "1")
    first = stack.send(body=SMS)
    locks = [item for item in stack.scan("MessagesTable") if item["sk"]["S"] == "LOCK"]
    assert len(locks) == 1
    time.sleep(2.05)
    # moto never runs a TTL sweep: the expired lock is still there
    assert [item for item in stack.scan("MessagesTable") if item["sk"]["S"] == "LOCK"] == locks

    again = stack.send(body=SMS)

    assert again.status == 201
    assert again.json["message"]["id"] != first.json["message"]["id"]
    assert stack.queue_depth("sms") == 2


def test_given_30_concurrent_identical_requests_then_exactly_one_is_sent(stack) -> None:
    stack.warm_api()
    with ThreadPoolExecutor(max_workers=30) as pool:
        answers = list(pool.map(lambda _: stack.send(body=SMS), range(30)))

    statuses = sorted(a.status for a in answers)
    assert statuses == [200] * 29 + [201], [a.raw_body for a in answers if a.status not in (200, 201)]
    created = next(a for a in answers if a.status == 201)
    for duplicate in (a for a in answers if a.status == 200):
        assert duplicate.json["duplicateOnly"] is True
        assert duplicate.json["message"]["id"] == created.json["message"]["id"]
    assert len(stack.messages()) == 1
    assert stack.queue_depth("sms") == 1


def test_given_failed_validation_then_no_lock_is_taken(stack) -> None:
    invalid = stack.send(body=SMS | {"unknown": "field"})
    assert invalid.status == 400

    assert [item for item in stack.scan("MessagesTable") if item["sk"]["S"] == "LOCK"] == []
    assert stack.send(body=SMS).status == 201


def test_given_a_message_that_ends_failed_then_its_lock_is_released_and_a_retry_sends(
    stack, http_provider
) -> None:
    stack.setenv("SENDONCE_SMS_PROVIDER", "http")
    stack.setenv("SENDONCE_HTTP_PROVIDER_URL", http_provider.url)
    http_provider.answer_next(400)
    first = stack.send(body=SMS).json["message"]

    result = stack.dispatch("sms")

    assert result == {"batchItemFailures": []}
    item = stack.message_item(first["id"])
    assert item["status"]["S"] == "failed"
    assert item["error"]["M"]["code"]["S"] == "provider_rejected"
    retry = stack.send(body=SMS)
    assert retry.status == 201
    assert retry.json["message"]["id"] != first["id"]


def test_given_a_canceled_message_then_its_lock_is_released(stack) -> None:
    first = stack.send(body=SMS).json["message"]
    event = stack.event("api_get_message.json", path=f"/v1/messages/{first['id']}", method="DELETE")
    event["pathParameters"] = {"id": first["id"]}
    assert stack.call(event).status == 200

    assert stack.send(body=SMS).status == 201


def test_given_a_new_idempotency_key_then_the_guard_still_catches_the_duplicate(stack) -> None:
    first = stack.send(body=SMS, key="first-key")

    answer = stack.send(body=SMS, key="second-key")

    assert answer.status == 200
    assert answer.json["duplicateOnly"] is True
    assert answer.json["message"]["id"] == first.json["message"]["id"]
