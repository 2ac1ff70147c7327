"""Provider delivery events against moto: signed webhooks and SES notifications, each applied once.

The webhook acknowledges once its event is on the events queue; the status function applies it.
Repeats, concurrent copies and late events must change nothing, and status never moves backwards.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from sendonce.aws_clients import client
from sendonce.settings import DispatcherSettings

from tests.integration.conftest import FakeHttpProvider, Stack, function, sqs_event
from tests.support.lambda_context import FakeLambdaContext

SECRET = "integration-webhook-secret"


@pytest.fixture
def sent_imessage(stack: Stack, http_provider: FakeHttpProvider) -> str:
    """An iMessage the HTTP provider accepted: `sent`, waiting for the provider's events."""
    stack.put_secret("WebhookSigningSecret", SECRET)
    stack.setenv("SENDONCE_HTTP_PROVIDER_URL", http_provider.url)
    answer = stack.send(
        "api_send_imessage.json",
        body={"channel": "imessage", "to": "+15550100031", "body": f"events {time.monotonic_ns()}"},
    )
    assert answer.status == 201, answer.raw_body
    stack.dispatch("imessage")
    message_id: str = answer.json["message"]["id"]
    assert stack.message(message_id)["status"] == "sent"
    return message_id


def _webhook(stack: Stack, payload: dict[str, Any], secret: str = SECRET, at: int | None = None) -> Any:
    return stack.provider_webhook(payload, secret, at)


def _event(message_id: str, kind: str, event_id: str) -> dict[str, Any]:
    return {"eventId": event_id, "messageId": message_id, "type": kind, "occurredAt": "2026-01-01T00:00:00Z"}


def _apply_queued(stack: Stack) -> dict[str, Any]:
    """Feed the events queue to the status function, as its event source mapping would."""
    records = stack.receive("events")
    event = sqs_event(records, stack.queue_arn("events"))
    result: dict[str, Any] = function("status").handler(event, FakeLambdaContext(function_name="status"))
    return result


def test_given_a_signed_delivered_event_then_the_message_ends_delivered(
    stack: Stack, sent_imessage: str
) -> None:
    acknowledged = _webhook(stack, _event(sent_imessage, "delivered", "ev-1"))
    assert acknowledged.status == 200
    assert acknowledged.json == {"success": True}

    assert _apply_queued(stack) == {"batchItemFailures": []}
    assert stack.message(sent_imessage)["status"] == "delivered"


def test_given_the_same_event_twice_then_the_second_changes_nothing(stack: Stack, sent_imessage: str) -> None:
    _webhook(stack, _event(sent_imessage, "delivered", "ev-twice"))
    _apply_queued(stack)
    before = stack.message(sent_imessage)

    assert _webhook(stack, _event(sent_imessage, "delivered", "ev-twice")).status == 200
    _apply_queued(stack)

    assert stack.message(sent_imessage) == before


def test_given_concurrent_copies_of_one_event_then_it_takes_effect_once(
    stack: Stack, sent_imessage: str
) -> None:
    for _ in range(8):
        _webhook(stack, _event(sent_imessage, "failed", "ev-storm"))
    records = stack.receive("events")

    def apply(record: dict[str, Any]) -> None:
        event = sqs_event([record], stack.queue_arn("events"))
        function("status").handler(event, FakeLambdaContext(function_name="status"))

    threads = [threading.Thread(target=apply, args=(record,)) for record in records]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    items = [
        item
        for item in stack.scan("MessagesTable")
        if item["sk"]["S"] == "EVENT" and item["messageId"]["S"] == sent_imessage
    ]
    assert len(records) == 8
    assert len(items) == 1
    assert stack.message(sent_imessage)["status"] == "failed"


def test_given_a_late_sent_after_delivered_then_status_does_not_move_backwards(
    stack: Stack, sent_imessage: str
) -> None:
    _webhook(stack, _event(sent_imessage, "delivered", "ev-delivered"))
    _apply_queued(stack)
    delivered = stack.message(sent_imessage)

    _webhook(stack, _event(sent_imessage, "sent", "ev-late-sent"))
    _apply_queued(stack)

    assert stack.message(sent_imessage) == delivered


def test_given_a_failed_event_then_the_dedup_lock_is_released(stack: Stack, sent_imessage: str) -> None:
    body = stack.message(sent_imessage)["body"]
    failure = {
        **_event(sent_imessage, "failed", "ev-failed"),
        "error": {"code": "unreachable", "message": "off"},
    }
    _webhook(stack, failure)
    _apply_queued(stack)

    failed = stack.message(sent_imessage)
    assert failed["status"] == "failed"
    assert failed["error"] == {"code": "unreachable", "message": "off"}
    retry = stack.send(
        "api_send_imessage.json", body={"channel": "imessage", "to": "+15550100031", "body": body}
    )
    assert retry.status == 201
    assert retry.json["duplicateOnly"] is False


@pytest.mark.parametrize(
    ("secret", "age"),
    [pytest.param("wrong-secret", 0, id="wrong secret"), pytest.param(SECRET, 400, id="stale")],
)
def test_given_a_forged_webhook_then_it_is_refused_and_nothing_is_queued(
    stack: Stack, sent_imessage: str, secret: str, age: int
) -> None:
    answer = _webhook(stack, _event(sent_imessage, "delivered", "ev-forged"), secret, int(time.time()) - age)

    assert answer.status == 401
    assert answer.json["error"]["code"] == "unauthorized"
    assert stack.receive("events") == []
    assert stack.message(sent_imessage)["status"] == "sent"


def test_given_an_event_for_an_unknown_message_then_it_is_acknowledged_and_changes_nothing(
    stack: Stack, sent_imessage: str
) -> None:
    stranger = "msg_01JZZZZZZZZZZZZZZZZZZZZZZZ"
    assert _webhook(stack, _event(stranger, "delivered", "ev-stranger")).status == 200
    assert _apply_queued(stack) == {"batchItemFailures": []}
    assert stack.message(sent_imessage)["status"] == "sent"


def test_given_ses_delivery_and_bounce_notifications_through_sns_then_they_apply(stack: Stack) -> None:
    sender = DispatcherSettings.from_environment().email_from
    client("ses").verify_email_identity(EmailAddress=sender)
    answer = stack.send(
        "api_send_email.json",
        body={"channel": "email", "to": "reader@example.com", "subject": "Hi", "body": "ses events"},
    )
    message_id = answer.json["message"]["id"]
    stack.dispatch("email")

    def notification(kind: str, detail: dict[str, Any]) -> str:
        ses_event = {
            "eventType": kind,
            "mail": {
                "timestamp": "2026-01-01T00:00:00.000Z",
                "messageId": "0100018c-ses-id",
                "destination": ["reader@example.com"],
                "tags": {"sendonce-message-id": [message_id], "ses:configuration-set": ["sendonce-email"]},
            },
            kind[0].lower() + kind[1:]: detail,
        }
        return json.dumps({"Type": "Notification", "MessageId": kind, "Message": json.dumps(ses_event)})

    events_queue = stack.queue_urls["EventsQueue"]
    delivery = notification(
        "Delivery", {"timestamp": "2026-01-01T00:00:01.000Z", "recipients": ["reader@example.com"]}
    )
    bounce = notification("Bounce", {"bounceType": "Permanent", "bounceSubType": "General", "timestamp": "x"})
    for body in (delivery, delivery, bounce):  # SNS delivers at least once; the bounce comes too late
        stack.sqs.send_message(QueueUrl=events_queue, MessageBody=body)

    assert _apply_queued(stack) == {"batchItemFailures": []}
    assert stack.message(message_id)["status"] == "delivered"


def test_given_an_unreadable_events_record_then_it_fails_alone(stack: Stack, sent_imessage: str) -> None:
    _webhook(stack, _event(sent_imessage, "delivered", "ev-neighbour"))
    records = stack.receive("events")
    bad = {**records[0], "MessageId": "bad-event", "Body": "{not json"}
    event = sqs_event([bad, *records], stack.queue_arn("events"))

    result = function("status").handler(event, FakeLambdaContext(function_name="status"))

    assert result == {"batchItemFailures": [{"itemIdentifier": "bad-event"}]}
    assert stack.message(sent_imessage)["status"] == "delivered"
