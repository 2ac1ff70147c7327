"""A message's `expiresAt` through the real functions on moto: the stream's hand-off, the channel's
queue, the dispatcher, the status webhooks.

- A message that sat in its queue past its `expiresAt` is never delivered: it ends `expired`, its
  dedup lock released, and it is told as `message.expired`.
- A message still valid goes out with its time left: the HTTP provider gets `expiresAt`, Twilio
  (the local sandbox's) a `ValidityPeriod`.

Each message is created through the sending store, as the API's create writes it, with its
`expiresAt` set (what a send's `expiresAt` or `validForSeconds` gives it).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sendonce.adapters.dynamodb_items import lock_key
from sendonce.adapters.dynamodb_sending import DynamoDbSendingStore
from sendonce.clock import rfc3339
from sendonce.dedup.identity import dedup_identity
from sendonce.messages.ids import new_message_id
from sendonce.messages.model import Channel, Message, Status
from sendonce.messages.ports import Created, DedupClaim
from standardwebhooks.webhooks import Webhook

from sendonce_local.deliveries import DeliveryLog
from sendonce_local.faults import FaultBoard
from sendonce_local.twilio_sandbox import TwilioProvider, TwilioServer
from tests.integration.conftest import WORKSPACE, FakeHttpProvider, Stack, WebhookReceiver, aws_client
from tests.support.ports import free_port

TO = "+15550100000"


def _created(
    stack: Stack,
    *,
    valid_for: timedelta,
    created_ago: timedelta = timedelta(0),
    channel: str = "sms",
    body: str = "Your code is 123456",
) -> Message:
    """A message created `created_ago`, valid for `valid_for` from then, written through the sending
    store (its dedup lock with it), for the stream to hand over."""
    created_at = datetime.now(UTC) - created_ago
    message = Message(
        id=new_message_id(),
        workspace_id=WORKSPACE,
        channel=Channel(channel),
        to=TO,
        body=body,
        status=Status.QUEUED,
        created_at=created_at,
        updated_at=created_at,
        expires_at=created_at + valid_for,
    )
    claim = DedupClaim(
        stack.keyed_hash(dedup_identity(WORKSPACE, TO, None, body)), created_at + timedelta(minutes=15)
    )
    store = DynamoDbSendingStore(aws_client("dynamodb"), "MessagesTable", keyed_hash=stack.keyed_hash)
    outcome = store.create(message, claim, None, created_at + timedelta(minutes=2), created_at)
    assert isinstance(outcome, Created), outcome
    return outcome.message


def _lock_held(stack: Stack, message: Message) -> bool:
    assert message.dedup_lock_id is not None
    found = stack.dynamodb.get_item(TableName="MessagesTable", Key=lock_key(message.dedup_lock_id))
    return "Item" in found


def _sns_texts() -> list[Any]:
    from moto.core import DEFAULT_ACCOUNT_ID  # noqa: PLC0415
    from moto.sns import sns_backends  # noqa: PLC0415

    return list(sns_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].sms_messages.values())


# ---------------------------------------------------------------------------- never delivered
def test_a_message_that_sat_in_the_queue_past_its_expires_at_is_never_delivered(stack: Stack) -> None:
    # Accepted ten minutes ago, valid for five: its record waited in the queue past that.
    message = _created(stack, valid_for=timedelta(minutes=5), created_ago=timedelta(minutes=10))
    assert _lock_held(stack, message)
    records = stack.receive("sms")
    assert len(records) == 1

    result = stack.dispatch("sms", records)

    assert result == {"batchItemFailures": []}
    item = stack.message_item(message.id)
    assert item["status"]["S"] == "expired"
    assert item["error"]["M"]["code"]["S"] == "expired"
    assert "outboxDueAt" not in item  # nothing owed: out of the outbox
    assert _sns_texts() == []  # no provider was called
    assert not _lock_held(stack, message)
    shown = stack.message(message.id)
    assert (shown["status"], shown["error"]["code"]) == ("expired", "expired")
    assert shown["expiresAt"] == rfc3339(message.expires_at)  # type: ignore[arg-type]
    # A second copy of the record changes nothing.
    assert stack.dispatch("sms", records) == {"batchItemFailures": []}
    assert stack.message_item(message.id)["status"]["S"] == "expired"
    assert _sns_texts() == []


def test_an_expired_message_is_told_as_message_expired_to_the_endpoints(
    stack: Stack, webhook_receiver: WebhookReceiver
) -> None:
    stack.setenv("SENDONCE_WEBHOOK_ALLOW_PRIVATE_TARGETS", "true")
    answer = stack.call(
        stack.event(
            "api_send_sms.json",
            method="POST",
            path="/v1/webhook-endpoints",
            body={"url": webhook_receiver.url},
        )
    )
    assert answer.status == 201, answer.raw_body
    secret = answer.json["endpoint"]["secret"]
    message = _created(stack, valid_for=timedelta(minutes=5), created_ago=timedelta(minutes=10))
    stack.dispatch("sms")

    assert stack.tell_changes() == {"batchItemFailures": []}
    stack.deliver_webhooks()

    payloads = [Webhook(secret).verify(r.body, r.headers) for r in webhook_receiver.requests]
    told = [
        (p["type"], p["data"]["message"]["status"])
        for p in payloads
        if p["data"]["message"]["id"] == message.id
    ]
    assert told == [("message.queued", "queued"), ("message.expired", "expired")]
    expired = next(p for p in payloads if p["type"] == "message.expired")
    assert expired["data"]["message"]["error"]["code"] == "expired"
    assert expired["data"]["message"]["expiresAt"] == rfc3339(message.expires_at)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- the time left, given
def test_a_message_still_valid_goes_to_the_http_provider_with_its_expires_at(
    stack: Stack, http_provider: FakeHttpProvider
) -> None:
    stack.setenv("SENDONCE_HTTP_PROVIDER_URL", http_provider.url)
    stack.put_secret("HttpProviderTokenSecret", "secret-token")
    message = _created(stack, valid_for=timedelta(minutes=10), channel="imessage")

    assert stack.dispatch("imessage") == {"batchItemFailures": []}

    assert stack.message_item(message.id)["status"]["S"] == "sent"
    (call,) = http_provider.calls
    assert call.body["messageId"] == message.id
    assert call.body["expiresAt"] == rfc3339(message.expires_at)  # type: ignore[arg-type]


@pytest.fixture
def twilio_sandbox(stack: Stack) -> Iterator[DeliveryLog]:
    deliveries = DeliveryLog()
    server = TwilioServer(
        "127.0.0.1", free_port(), TwilioProvider(deliveries, FaultBoard(), lambda: stack.secrets.twilio)
    )
    server.start()
    stack.setenv("SENDONCE_SMS_PROVIDERS", "twilio")
    stack.setenv("SENDONCE_TWILIO_BASE_URL", f"http://127.0.0.1:{server.port}")
    stack.setenv("SENDONCE_TWILIO_FROM", "+15005550006")
    try:
        yield deliveries
    finally:
        server.stop()


def test_a_message_still_valid_goes_to_twilio_with_its_time_left_as_validity_period(
    stack: Stack, twilio_sandbox: DeliveryLog
) -> None:
    message = _created(stack, valid_for=timedelta(minutes=10))

    assert stack.dispatch("sms") == {"batchItemFailures": []}

    assert stack.message_item(message.id)["status"]["S"] == "sent"
    (delivery,) = twilio_sandbox.all()
    assert delivery["messageId"] == message.id
    assert 590 <= delivery["validityPeriod"] <= 600  # the time left at the call, in whole seconds
