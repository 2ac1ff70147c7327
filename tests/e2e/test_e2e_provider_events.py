"""Issue 7, end to end: provider events (signed webhooks, SES notifications) applied once, forward only."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pytest
from sendonce.provider_events.signature import sign

from tests.e2e.e2e_support import (
    as_raw,
    created_id,
    email,
    eventually,
    http_body,
    imessage,
    message,
    post_webhook,
    reports,
    send,
    settle_events,
    sms,
    unique_body,
    unique_email,
    unique_phone,
    wait_status,
)

if TYPE_CHECKING:
    from tests.e2e.conftest import LocalStack

pytestmark = pytest.mark.e2e

HTTP_MESSAGES = 6  # six consecutive sends cover the sandbox's every-3rd repeat and late `sent`


def sent_sms(stack: LocalStack, label: str) -> dict[str, Any]:
    """An sms (SNS reports no delivery: it stays `sent` unless a webhook moves it)."""
    message_id = created_id(send(stack, sms(unique_phone(), unique_body(label))))
    return wait_status(stack, message_id, "sent")


def test_http_messages_end_delivered_while_the_sandbox_repeats_and_reorders(stack: LocalStack) -> None:
    ids = [
        created_id(send(stack, imessage(unique_phone(), unique_body(f"events {n}"))))
        for n in range(HTTP_MESSAGES)
    ]

    first_seen = {message_id: wait_status(stack, message_id, "delivered") for message_id in ids}

    def all_reported() -> list[dict[str, Any]] | None:
        ours = [entry for entry in reports(stack) if entry["messageId"] in first_seen]
        kinds = {entry["kind"] for entry in ours}
        return ours if {"first", "repeat", "late"} <= kinds else None

    ours = eventually(all_reported)
    assert {entry["answer"] for entry in ours} == {200}
    assert all(entry["provider"] == "http" for entry in ours)
    repeated = [entry for entry in ours if entry["kind"] == "repeat"]
    late = [entry for entry in ours if entry["kind"] == "late"]
    assert all(entry["type"] == "sent" for entry in late)
    firsts = {entry["eventId"] for entry in ours if entry["kind"] == "first"}
    assert {entry["eventId"] for entry in repeated} <= firsts  # the very same events, again
    settle_events(stack)
    for message_id, seen in first_seen.items():
        final = message(stack, message_id)
        assert final["status"] == "delivered"
        assert final["updatedAt"] == seen["updatedAt"]  # the repeat and the late `sent` changed nothing


def test_forged_webhooks_are_401_and_change_nothing(stack: LocalStack) -> None:
    target = sent_sms(stack, "forged")
    body = as_raw(http_body(target["id"], "delivered"))
    now = int(time.time())
    tampered = as_raw(http_body(target["id"], "delivered") | {"eventId": "evt_tampered"})

    forgeries = {
        "bad signature": post_webhook(stack, body, signature=f"t={now},v1={'0' * 64}"),
        "wrong secret": post_webhook(stack, body, secret="not-the-secret"),
        "stale timestamp": post_webhook(stack, body, timestamp=now - 600),
        "from the future": post_webhook(stack, body, timestamp=now + 600),
        "tampered body": post_webhook(stack, tampered, signature=sign(stack.webhook_secret, now, body)),
        "no timestamp": post_webhook(
            stack, body, signature=sign(stack.webhook_secret, now, body).split(",")[1]
        ),
    }

    for name, answer in forgeries.items():
        assert answer.status_code == 401, (name, answer.text)
        assert answer.json()["error"]["code"] == "unauthorized", name
    settle_events(stack)
    after = message(stack, target["id"])
    assert after["status"] == "sent"
    assert after["updatedAt"] == target["updatedAt"]


def test_a_replayed_webhook_is_200_and_changes_nothing(stack: LocalStack) -> None:
    first, other = sent_sms(stack, "replayed"), sent_sms(stack, "replayed other")
    event = http_body(first["id"], "delivered")
    raw = as_raw(event)

    signature = sign(stack.webhook_secret, int(time.time()), raw)
    assert post_webhook(stack, raw, signature=signature).status_code == 200
    delivered = wait_status(stack, first["id"], "delivered")

    replay = post_webhook(stack, raw, signature=signature)  # the very same request
    same_event_elsewhere = post_webhook(stack, as_raw(event | {"messageId": other["id"]}))

    assert replay.status_code == 200, replay.text
    assert same_event_elsewhere.status_code == 200, same_event_elsewhere.text
    settle_events(stack)
    assert message(stack, first["id"])["updatedAt"] == delivered["updatedAt"]
    assert message(stack, other["id"])["status"] == "sent"  # that eventId already took effect


def test_a_late_sent_after_delivered_changes_nothing(stack: LocalStack) -> None:
    target = sent_sms(stack, "late sent")
    assert post_webhook(stack, as_raw(http_body(target["id"], "delivered"))).status_code == 200
    delivered = wait_status(stack, target["id"], "delivered")

    late = post_webhook(stack, as_raw(http_body(target["id"], "sent")))

    assert late.status_code == 200, late.text
    settle_events(stack)
    after = message(stack, target["id"])
    assert after["status"] == "delivered"
    assert after["updatedAt"] == delivered["updatedAt"]


def test_an_email_ends_delivered_through_the_ses_notification_path(stack: LocalStack) -> None:
    message_id = created_id(send(stack, email(unique_email(), unique_body("ses events"))))

    final = wait_status(stack, message_id, "delivered")

    ses = [entry for entry in reports(stack) if entry["messageId"] == message_id]
    assert ses, "the sandbox reported nothing for this email"
    assert {entry["provider"] for entry in ses} == {"ses"}
    assert final["attempts"] == 1
