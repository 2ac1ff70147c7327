"""The response models, built from domain values, are the only serializer of what the API shows.

Each shape is pinned here as docs/api.md shows it: its fields, in order, with their nulls, and the
JSON text `to_json` writes (no ASCII escapes; compact for a stored answer). A status webhook's
`data.message` is the API's Message, and an event shows the message it stored exactly as stored.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel
from sendonce.api.campaign_view import campaign_shape
from sendonce.api.errors import ApiError
from sendonce.api.routers.usage import SimulatedDeliveryModel
from sendonce.api.routers.webhooks import EventModel, WebhookEndpointModel
from sendonce.api.shapes import MessageModel, SuppressionModel, message_shape, to_json
from sendonce.campaigns.model import Campaign, CampaignStatus, Counts
from sendonce.messages.model import (
    AttemptOutcome,
    Channel,
    Message,
    MessageFailure,
    ProviderAttempt,
    Status,
    TemplateRef,
)
from sendonce.simulator.ports import SimulatedDelivery
from sendonce.status_webhooks.model import (
    Delivery,
    DeliveryStatus,
    Endpoint,
    Event,
    SigningSecret,
)
from sendonce.status_webhooks.rules import (
    EventType,
)
from sendonce.suppressions.model import Reason, Suppression

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)

text = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
moments = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC))
maybe = st.one_of
messages = st.builds(
    Message,
    id=text,
    workspace_id=text,
    channel=st.sampled_from(["sms", "imessage", "email"]).map(Channel),
    to=text,
    body=text,
    status=st.sampled_from(Status),
    created_at=moments,
    updated_at=moments,
    subject=maybe(st.none(), text),
    send_at=maybe(st.none(), moments),
    metadata=st.dictionaries(text, text, max_size=3),
    idempotency_key=maybe(st.none(), text),
    attempts=st.integers(0, 50),
    error=maybe(st.none(), st.builds(MessageFailure, text, text)),
    to_list=maybe(st.none(), st.tuples(text, text)),
    cc=maybe(st.none(), st.lists(text, max_size=2).map(tuple)),
    bcc=maybe(st.none(), st.lists(text, max_size=2).map(tuple)),
    reply_to=maybe(st.none(), text),
    html=maybe(st.none(), text),
    suppressed_recipients=st.lists(text, max_size=2).map(tuple),
    provider=maybe(st.none(), text),
    provider_attempts=st.lists(
        st.builds(ProviderAttempt, text, st.sampled_from(AttemptOutcome), moments), max_size=2
    ).map(tuple),
)


def _shows(model: BaseModel, expected: dict[str, Any]) -> None:
    shown = model.model_dump(mode="json")
    assert shown == expected
    assert list(shown) == list(expected)  # the key order
    assert to_json(model) == json.dumps(expected, ensure_ascii=False)
    assert to_json(model, compact=True) == json.dumps(expected, ensure_ascii=False, separators=(",", ":"))


def _message(**changes: Any) -> Message:
    fields: dict[str, Any] = {
        "id": "msg_01KDVDNA00QV9D1V5ZMBF8DBMW",
        "workspace_id": "ws",
        "channel": Channel("email"),
        "to": "ada@example.com",
        "body": 'Hello, 世界 "q" \\ \n',
        "status": Status.FAILED,
        "created_at": T0,
        "updated_at": T0 + timedelta(seconds=2, milliseconds=5),
    }
    return Message(**(fields | changes))


def test_a_message_with_every_field_set() -> None:
    message = _message(
        subject="Über",
        send_at=T0 + timedelta(days=1),
        metadata={"order": "A-17"},
        idempotency_key="k-1",
        attempts=3,
        error=MessageFailure("provider_rejected", "no"),
        template=TemplateRef("welcome", 3),
        provider_attempts=(
            ProviderAttempt("twilio", AttemptOutcome.NOT_ACCEPTED, T0),
            ProviderAttempt("http", AttemptOutcome.FAILED, T0 + timedelta(seconds=1)),
        ),
    )

    _shows(
        MessageModel.of(message),
        {
            "id": "msg_01KDVDNA00QV9D1V5ZMBF8DBMW",
            "channel": "email",
            "to": "ada@example.com",
            "subject": "Über",
            "body": 'Hello, 世界 "q" \\ \n',
            "encoding": None,
            "segments": None,
            "template": {"name": "welcome", "version": 3},
            "status": "failed",
            "sendAt": "2026-01-02T12:00:00.000Z",
            "metadata": {"order": "A-17"},
            "idempotencyKey": "k-1",
            "attempts": 3,
            "provider": None,
            "providerAttempts": [
                {"provider": "twilio", "outcome": "not_accepted", "at": "2026-01-01T12:00:00.000Z"},
                {"provider": "http", "outcome": "failed", "at": "2026-01-01T12:00:01.000Z"},
            ],
            "error": {"code": "provider_rejected", "message": "no"},
            "createdAt": "2026-01-01T12:00:00.000Z",
            "updatedAt": "2026-01-01T12:00:02.005Z",
        },
    )


def test_an_email_with_every_list_field_shows_them_after_to_and_before_subject() -> None:
    message = _message(
        subject="s",
        to="ada@example.com",
        to_list=("ada@example.com", "bo@example.com"),
        cc=(),
        bcc=("cy@example.com",),
        reply_to="desk@example.com",
        html="<p>hi</p>",
        suppressed_recipients=("dee@example.com",),
    )

    shown = MessageModel.of(message).model_dump(mode="json")

    assert list(shown)[:9] == [
        "id",
        "channel",
        "to",
        "cc",
        "bcc",
        "replyTo",
        "html",
        "suppressedRecipients",
        "subject",
    ]
    assert shown["to"] == ["ada@example.com", "bo@example.com"]
    assert (shown["cc"], shown["bcc"]) == ([], ["cy@example.com"])
    assert (shown["replyTo"], shown["html"]) == ("desk@example.com", "<p>hi</p>")
    assert shown["suppressedRecipients"] == ["dee@example.com"]
    assert shown == message_shape(message)


def test_a_message_with_its_nulls() -> None:
    shown = message_shape(_message(channel=Channel("sms"), to="+15550100000", status=Status.QUEUED))

    assert shown == {
        "id": "msg_01KDVDNA00QV9D1V5ZMBF8DBMW",
        "channel": "sms",
        "to": "+15550100000",
        "subject": None,
        "body": 'Hello, 世界 "q" \\ \n',
        "encoding": "UCS-2",
        "segments": 1,
        "status": "queued",
        "sendAt": None,
        "metadata": {},
        "idempotencyKey": None,
        "attempts": 0,
        "provider": None,
        "providerAttempts": [],
        "error": None,
        "createdAt": "2026-01-01T12:00:00.000Z",
        "updatedAt": "2026-01-01T12:00:02.005Z",
    }


@given(messages)
def test_any_message_shows_as_its_webhook_payload_and_back(message: Message) -> None:
    shown = message_shape(message)

    assert MessageModel.model_validate(shown) == MessageModel.of(message)
    assert json.loads(to_json(MessageModel.of(message))) == shown
    assert list(MessageModel.of(message).model_dump(mode="json")) == list(shown)  # field for field, in order


MESSAGE_EVENTS = [kind for kind in EventType if kind is not EventType.CAMPAIGN_COMPLETED]


@given(messages, st.sampled_from(MESSAGE_EVENTS), maybe(st.none(), st.integers(1, 9)))
def test_an_event_shows_its_stored_message_as_stored(
    message: Message, kind: EventType, sequence: int | None
) -> None:
    stored = json.loads(json.dumps(message_shape(message)))  # as the webhooks table gives it back
    event = Event("evt_1", "ws", message.id, kind, T0, stored, sequence)

    shown = EventModel.of(event).model_dump(mode="json")

    assert shown == {"id": "evt_1", **event.payload(), "deliveries": []}
    assert list(shown["data"]["message"]) == list(stored)


def test_a_campaigns_event_shows_its_stored_campaign_as_stored() -> None:
    campaign = Campaign(
        id="cmp_01KDVDNA00QV9D1V5ZMBF8DBMW",
        workspace_id="ws",
        name="launch",
        channel="sms",
        status=CampaignStatus.COMPLETED,
        content={"body": "hi"},
        rate_per_second=25,
        created_at=T0,
        counts=Counts(total=3, accepted=1, duplicates=1, invalid=1, sent=1, delivered=1),
        started_at=T0 + timedelta(seconds=1),
        completed_at=T0 + timedelta(seconds=9),
    )
    stored = json.loads(json.dumps(campaign_shape(campaign)))
    event = Event("evt_1", "ws", campaign.id, EventType.CAMPAIGN_COMPLETED, T0, stored, None)

    shown = EventModel.of(event).model_dump(mode="json")

    assert shown == {"id": "evt_1", **event.payload(), "deliveries": []}
    assert "message" not in shown["data"]
    fields = [
        "id",
        "name",
        "channel",
        "status",
        "pausedReason",
        "counts",
        "createdAt",
        "startedAt",
        "completedAt",
    ]
    assert list(shown["data"]["campaign"]) == list(stored) == fields
    assert shown["data"]["campaign"]["completedAt"] == "2026-01-01T12:00:09.000Z"


def test_an_event_with_its_deliveries() -> None:
    event = Event(
        "evt_1",
        "ws",
        "msg_1",
        EventType.SENT,
        T0,
        message_shape(_message()),
        2,
        (Delivery("whep_1", DeliveryStatus.FAILED, 8, T0, 503), Delivery("whep_2")),
    )

    _shows(
        EventModel.of(event),
        {
            "id": "evt_1",
            "type": "message.sent",
            "timestamp": "2026-01-01T12:00:00.000Z",
            "data": {"message": message_shape(_message()), "sequence": 2},
            "deliveries": [
                {
                    "endpointId": "whep_1",
                    "status": "failed",
                    "attempts": 8,
                    "lastAttemptAt": "2026-01-01T12:00:00.000Z",
                    "lastResponseStatus": 503,
                },
                {
                    "endpointId": "whep_2",
                    "status": "pending",
                    "attempts": 0,
                    "lastAttemptAt": None,
                    "lastResponseStatus": None,
                },
            ],
        },
    )


def test_an_endpoint_shows_its_secret_only_when_asked() -> None:
    endpoint = Endpoint(
        "whep_1",
        "ws",
        "https://hooks.example.com/in",
        (EventType.SENT, EventType.FAILED),
        None,
        T0,
        (SigningSecret("whsec_new"), SigningSecret("whsec_old", T0)),
    )
    without = {
        "id": "whep_1",
        "url": "https://hooks.example.com/in",
        "eventTypes": ["message.sent", "message.failed"],
        "description": None,
        "createdAt": "2026-01-01T12:00:00.000Z",
    }

    _shows(WebhookEndpointModel.of(endpoint), without)
    _shows(WebhookEndpointModel.of(endpoint, with_secret=True), {**without, "secret": "whsec_new"})


def test_a_suppression_and_a_simulated_delivery() -> None:
    _shows(
        SuppressionModel.of(Suppression("+15550100000", Reason.OPTED_OUT, T0, "msg_1")),
        {
            "to": "+15550100000",
            "reason": "opted_out",
            "createdAt": "2026-01-01T12:00:00.000Z",
            "messageId": "msg_1",
        },
    )
    delivery = SimulatedDelivery("ws:test", "msg_1", "sms", "+15550100000", None, "hi", T0, "sim_1", "k")
    _shows(
        SimulatedDeliveryModel.of(delivery),
        {
            "messageId": "msg_1",
            "channel": "sms",
            "to": "+15550100000",
            "subject": None,
            "body": "hi",
            "at": "2026-01-01T12:00:00.000Z",
        },
    )


def test_the_error_body_names_details_only_when_there_are_some() -> None:
    assert json.loads(ApiError(404, "not_found", "No.").body()) == {
        "success": False,
        "error": {"code": "not_found", "message": "No."},
    }
    assert ApiError(409, "duplicate_content", "Held.", details={"messageId": "msg_1"}).body() == (
        '{"success": false, "error": {"code": "duplicate_content", "message": "Held.", '
        '"details": {"messageId": "msg_1"}}}'
    )
