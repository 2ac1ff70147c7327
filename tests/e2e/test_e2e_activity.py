"""The console's API end to end, through `sendonce run`: a delivered message's timeline, the promise's
counts of the day, and the listing's filters, over HTTP against the local stack."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import pytest
import requests

from tests.e2e.e2e_support import (
    call,
    created_id,
    eventually,
    formatted,
    imessage,
    send,
    sms,
    unique_body,
    unique_phone,
    wait_status,
)

if TYPE_CHECKING:
    from tests.e2e.conftest import LocalStack

pytestmark = pytest.mark.e2e


def _get(stack: LocalStack, path: str, key: str | None = None, **params: str) -> dict[str, Any]:
    answer = requests.get(f"{stack.api}{path}", params=params, headers=stack.auth(key), timeout=10)
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def test_a_delivered_messages_timeline_shows_its_statuses_attempt_and_provider_event(
    stack: LocalStack,
) -> None:
    # iMessage goes through the sandbox's HTTP provider, which reports the delivery back.
    message_id = created_id(send(stack, imessage(unique_phone(), unique_body("timeline"))))
    wait_status(stack, message_id, "delivered")

    def complete() -> list[dict[str, Any]] | None:
        timeline: list[dict[str, Any]] = _get(stack, f"/v1/messages/{message_id}/timeline")["timeline"]
        told = [entry["status"] for entry in timeline if entry["kind"] == "status"]
        return timeline if told[-1:] == ["delivered"] else None

    timeline = eventually(complete)

    kinds = {entry["kind"] for entry in timeline}
    assert {"created", "status", "provider_attempt", "provider_event"} <= kinds
    assert [entry["at"] for entry in timeline] == sorted(entry["at"] for entry in timeline)
    other = requests.get(
        f"{stack.api}/v1/messages/{message_id}/timeline", headers=stack.auth(stack.other_api_key), timeout=10
    )
    assert other.status_code == 404


def test_the_days_counts_grow_by_a_duplicate_and_a_replay(stack: LocalStack) -> None:
    before = _get(stack, "/v1/promise", days="1")["days"][0]
    body = sms(unique_phone(), unique_body("promise"))
    key = f"promise-{uuid.uuid4()}"
    original = created_id(send(stack, body, idempotency_key=key))
    assert send(stack, body, idempotency_key=key).headers["Idempotency-Replayed"] == "true"
    duplicate = send(stack, body)
    assert duplicate.json()["duplicateOnly"] is True

    def counted() -> dict[str, Any] | None:
        today: dict[str, Any] = _get(stack, "/v1/promise", days="1")["days"][0]
        grown = (
            today["newMessages"] > before["newMessages"]
            and today["duplicatesBlocked"] > before["duplicatesBlocked"]
            and today["replays"] > before["replays"]
        )
        return today if grown else None

    eventually(counted)
    blocked = _get(stack, "/v1/events", type="message.duplicate_blocked", messageId=original)["events"]
    assert [event["data"]["message"]["id"] for event in blocked] == [original]


def test_the_listing_filters_by_recipient_in_any_form_and_by_channel(stack: LocalStack) -> None:
    phone = unique_phone()
    ours = created_id(send(stack, sms(phone, unique_body("filter"))))
    listed = _get(stack, "/v1/messages", to=formatted(phone))["messages"]
    assert [message["id"] for message in listed] == [ours]
    assert all(m["channel"] == "email" for m in _get(stack, "/v1/messages", channel="email")["messages"])
    assert call(stack, "GET", "/v1/messages?channel=fax").status_code == 400
