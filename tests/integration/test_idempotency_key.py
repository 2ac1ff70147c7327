"""Idempotency-Key through the API handler on moto, every answer the README's Idempotency-Key table names."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

SMS = {"channel": "sms", "to": "+15550100000", "body": "Your code is 123456"}


def _records(stack, channel: str = "sms") -> int:
    return stack.queue_depth(channel)


def test_given_a_completed_request_when_replayed_then_same_status_byte_identical_body_and_nothing_sent(
    stack,
) -> None:
    first = stack.send(body=SMS, key="order-1")
    again = stack.send(body=SMS, key="order-1")

    assert first.status == 201
    assert first.header("Idempotency-Replayed") is None
    assert first.json["message"]["idempotencyKey"] == "order-1"
    assert again.status == 201
    assert again.raw_body == first.raw_body
    assert again.header("Idempotency-Replayed") == "true"
    assert len(stack.messages()) == 1
    assert _records(stack) == 1


def test_given_the_same_key_and_a_different_payload_then_422_and_nothing_sent(stack) -> None:
    stack.send(body=SMS, key="order-2")

    answer = stack.send(body=SMS | {"body": "another text"}, key="order-2")

    assert answer.status == 422
    assert answer.json["error"]["code"] == "idempotency_key_reused"
    assert len(stack.messages()) == 1
    assert _records(stack) == 1


def test_given_the_same_payload_with_other_key_order_and_white_space_then_a_replay(stack) -> None:
    first = stack.send(body=json.dumps(SMS), key="order-3")
    reordered = json.dumps(dict(reversed(list(SMS.items()))), indent=4)

    again = stack.send(body=reordered, key="order-3")

    assert again.status == 201
    assert again.header("Idempotency-Replayed") == "true"
    assert again.raw_body == first.raw_body


def test_given_a_quoted_key_then_the_same_key_as_the_bare_one(stack) -> None:
    first = stack.send(body=SMS, key="order-4")

    again = stack.send(body=SMS, key='"order-4"')

    assert again.header("Idempotency-Replayed") == "true"
    assert again.raw_body == first.raw_body


def test_given_a_request_still_running_then_409_with_retry_after(stack) -> None:
    # The first request's record is written INPROGRESS before it runs: simulate it being mid-flight
    # by holding the first call inside the store while a second one arrives.
    import sendonce.adapters.dynamodb_sending as adapter  # noqa: PLC0415

    original_create = adapter.DynamoDbSendingStore.create
    answers = {}

    def slow_create(self, *args, **kwargs):
        answers["second"] = stack.send(body=SMS, key="order-5")
        return original_create(self, *args, **kwargs)

    stack.monkeypatch.setattr(adapter.DynamoDbSendingStore, "create", slow_create)
    first = stack.send(body=SMS, key="order-5")

    assert first.status == 201
    second = answers["second"]
    assert second.status == 409
    assert second.json["error"]["code"] == "idempotency_in_progress"
    assert second.header("Retry-After") == "1"
    assert _records(stack) == 1


@pytest.mark.parametrize("key", ["", "x" * 256, "has space", "caf\u00e9", "tab\tin", '"a\\b"'])
def test_given_an_invalid_key_then_400_invalid_idempotency_key_and_nothing_written(stack, key: str) -> None:
    answer = stack.send(body=SMS, key=key)

    assert answer.status == 400
    assert answer.json["error"]["code"] == "invalid_idempotency_key"
    assert stack.messages() == []
    assert stack.scan("IdempotencyTable") == []


def test_given_keys_are_required_and_none_is_sent_then_400_missing_idempotency_key_and_nothing_written(
    stack,
) -> None:
    stack.setenv("SENDONCE_REQUIRE_IDEMPOTENCY_KEY", "true")

    answer = stack.send(body=SMS)

    assert answer.status == 400
    assert answer.json["error"]["code"] == "missing_idempotency_key"
    assert stack.messages() == []
    assert _records(stack) == 0
    assert stack.send(body=SMS, key="now-with-a-key").status == 201


@pytest.mark.parametrize(
    ("broken", "status"),
    [
        ({"body": SMS | {"body": ""}}, 400),
        ({"workspace": None}, 401),
        ({"headers": {"content-type": "text/plain"}}, 415),
        ({"body": SMS | {"metadata": {"pad": "x" * (260 * 1024)}}}, 413),
    ],
)
def test_given_a_request_rejected_before_processing_then_not_stored_and_a_fixed_retry_with_the_key_is_201(
    stack, broken: dict, status: int
) -> None:
    rejected = stack.send(
        body=broken.get("body", SMS),
        key="fix-me",
        workspace=broken.get("workspace", "ws_local"),
        headers=broken.get("headers"),
    )
    assert rejected.status == status
    assert stack.scan("IdempotencyTable") == []

    fixed = stack.send(body=SMS, key="fix-me")

    assert fixed.status == 201
    assert fixed.header("Idempotency-Replayed") is None


def test_given_the_same_key_in_two_workspaces_then_two_messages(stack) -> None:
    mine = stack.send(body=SMS, key="shared-key")
    theirs = stack.send(body=SMS, key="shared-key", workspace="ws_other")

    assert mine.status == theirs.status == 201
    assert theirs.header("Idempotency-Replayed") is None
    assert mine.json["message"]["id"] != theirs.json["message"]["id"]
    assert _records(stack) == 2


def _expire_idempotency_records(stack) -> None:
    """The window is over: the Powertools record is gone (DynamoDB's TTL sweep removed it)."""
    for item in stack.scan("IdempotencyTable"):
        stack.dynamodb.delete_item(TableName="IdempotencyTable", Key={"id": item["id"]})


@pytest.mark.parametrize("how", ["deleted", "expired"])
def test_given_the_window_is_over_then_the_same_key_and_payload_get_the_original_message_back(
    stack, how: str
) -> None:
    stack.setenv("SENDONCE_IDEMPOTENCY_TTL_SECONDS", "1")
    first = stack.send(body=SMS, key="late-retry")
    if how == "deleted":
        _expire_idempotency_records(stack)
    else:
        time.sleep(2.1)  # the record is still in the table, but expired

    again = stack.send(body=SMS, key="late-retry")

    assert again.status == 201
    assert again.header("Idempotency-Replayed") == "true"
    assert again.json["message"]["id"] == first.json["message"]["id"]
    assert again.json["duplicateOnly"] is False
    assert len(stack.messages()) == 1
    assert _records(stack) == 1


def test_given_the_window_is_over_then_the_same_key_and_another_payload_get_422(stack) -> None:
    stack.setenv("SENDONCE_IDEMPOTENCY_TTL_SECONDS", "1")
    stack.send(body=SMS, key="late-change")
    _expire_idempotency_records(stack)

    answer = stack.send(body=SMS | {"metadata": {"changed": "yes"}}, key="late-change")

    assert answer.status == 422
    assert answer.json["error"]["code"] == "idempotency_key_reused"
    assert len(stack.messages()) == 1
    assert _records(stack) == 1


def test_given_the_window_is_over_and_the_original_canceled_then_422(stack) -> None:
    stack.setenv("SENDONCE_IDEMPOTENCY_TTL_SECONDS", "1")
    first = stack.send(body=SMS, key="late-cancel").json["message"]
    event = stack.event("api_get_message.json", path=f"/v1/messages/{first['id']}", method="DELETE")
    event["pathParameters"] = {"id": first["id"]}
    assert stack.call(event).status == 200
    _expire_idempotency_records(stack)

    answer = stack.send(body=SMS, key="late-cancel")

    assert answer.status == 422
    assert answer.json["error"]["code"] == "idempotency_key_reused"
    assert len(stack.messages()) == 1


def test_given_20_concurrent_requests_with_one_key_then_exactly_one_message_and_the_rest_replays_or_409(
    stack,
) -> None:
    stack.warm_api()
    with ThreadPoolExecutor(max_workers=20) as pool:
        answers = list(pool.map(lambda _: stack.send(body=SMS, key="burst"), range(20)))

    created = [a for a in answers if a.status == 201 and a.header("Idempotency-Replayed") is None]
    replays = [a for a in answers if a.status == 201 and a.header("Idempotency-Replayed") == "true"]
    in_progress = [a for a in answers if a.status == 409]
    assert len(created) == 1, [a.raw_body for a in answers]
    assert len(created) + len(replays) + len(in_progress) == 20, [a.raw_body for a in answers]
    assert all(a.raw_body == created[0].raw_body for a in replays)
    assert all(a.header("Retry-After") == "1" for a in in_progress)
    assert len(stack.messages()) == 1
    assert _records(stack) == 1


def test_given_a_key_then_the_dedup_guard_still_applies_to_a_new_key(stack) -> None:
    first = stack.send(body=SMS, key="key-a")

    answer = stack.send(body=SMS, key="key-b")

    assert answer.status == 200
    assert answer.json["duplicateOnly"] is True
    assert answer.json["message"]["id"] == first.json["message"]["id"]
    assert _records(stack) == 1
