"""Provider events: parsing webhook bodies and SES notifications, and applying each once."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError
from sendonce.messages.model import Channel, Message, Status
from sendonce.provider_events.applier import apply_event
from sendonce.provider_events.http_body import HttpProviderEvent
from sendonce.provider_events.model import (
    APPLIES_FROM,
    ProviderEvent,
    ProviderEventType,
    from_json,
    from_ses_notification,
)
from sendonce.provider_events.ports import ApplyResult, EventOutcome

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _message(status: Status) -> Message:
    return Message(
        id="msg_01JAAAAAAAAAAAAAAAAAAAAAAA",
        workspace_id="ws",
        channel=Channel("imessage"),
        to="+15550100000",
        body="hi",
        status=status,
        created_at=NOW,
        updated_at=NOW,
        dedup_lock_id="lock",
    )


def test_given_a_provider_event_body_when_parsed_then_it_round_trips_through_the_queue() -> None:
    body = {
        "eventId": "ev_1",
        "messageId": "msg_x",
        "type": "failed",
        "occurredAt": "2026-01-01T00:00:00Z",
        "error": {"code": "unreachable", "message": "handset off"},
    }
    event = HttpProviderEvent.model_validate_json(json.dumps(body)).to_event("http")
    assert from_json(event.to_json()) == event
    assert event.error is not None
    assert event.error.code == "unreachable"


@pytest.mark.parametrize(
    "body",
    [
        {"messageId": "m", "type": "sent", "occurredAt": "2026-01-01T00:00:00Z"},
        {"eventId": "e", "messageId": "m", "type": "opened", "occurredAt": "2026-01-01T00:00:00Z"},
        {"eventId": "e", "messageId": "m", "type": "sent", "occurredAt": "yesterday"},
        {"eventId": "", "messageId": "m", "type": "sent", "occurredAt": "2026-01-01T00:00:00Z"},
    ],
)
def test_given_a_malformed_provider_event_body_when_parsed_then_it_is_refused(body: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        HttpProviderEvent.model_validate_json(json.dumps(body))


def _ses(kind: str, message_id: str | None = "msg_1") -> dict[str, object]:
    tags = {"sendonce-message-id": [message_id]} if message_id else {}
    return {
        "eventType": kind,
        "mail": {"messageId": "ses-1", "timestamp": "2026-01-01T00:00:00Z", "tags": tags},
        "delivery": {"timestamp": "2026-01-01T00:00:01Z"},
        "bounce": {
            "bounceType": "Permanent",
            "bounceSubType": "General",
            "timestamp": "2026-01-01T00:00:02Z",
        },
    }


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("Delivery", ProviderEventType.DELIVERED),
        ("Bounce", ProviderEventType.FAILED),
        ("Send", ProviderEventType.SENT),
    ],
)
def test_given_an_ses_notification_when_read_then_it_names_our_message(
    kind: str, expected: ProviderEventType
) -> None:
    event = from_ses_notification(_ses(kind), "sendonce-message-id")
    assert event is not None
    assert event.type is expected
    assert event.message_id == "msg_1"
    # the same notification, delivered again by SNS, is the same event
    again = from_ses_notification(_ses(kind), "sendonce-message-id")
    assert again is not None
    assert again.event_id == event.event_id


def test_given_an_ses_notification_without_our_tag_when_read_then_it_is_not_ours() -> None:
    assert from_ses_notification(_ses("Delivery", None), "sendonce-message-id") is None
    assert from_ses_notification(_ses("Open"), "sendonce-message-id") is None


def test_status_only_moves_forward() -> None:
    assert Status.DELIVERED not in APPLIES_FROM[ProviderEventType.SENT]
    assert Status.FAILED not in APPLIES_FROM[ProviderEventType.DELIVERED]
    for final in (Status.CANCELED, Status.FAILED, Status.DELIVERED):
        assert final not in APPLIES_FROM[ProviderEventType.SENT]


class _Store:
    def __init__(self, result: ApplyResult) -> None:
        self.result = result
        self.released: list[str] = []

    def apply_provider_event(self, event: ProviderEvent, now: datetime) -> ApplyResult:
        return self.result

    def release_dedup_lock(self, message: Message) -> None:
        self.released.append(message.id)


def _event(kind: ProviderEventType) -> ProviderEvent:
    return ProviderEvent("http", "ev", "msg_01JAAAAAAAAAAAAAAAAAAAAAAA", kind, "2026-01-01T00:00:00Z")


def test_given_a_failed_event_applied_then_the_dedup_lock_is_released() -> None:
    store = _Store((EventOutcome.APPLIED, _message(Status.SENT)))
    assert apply_event(store, _event(ProviderEventType.FAILED)) is EventOutcome.APPLIED
    assert store.released == ["msg_01JAAAAAAAAAAAAAAAAAAAAAAA"]


@pytest.mark.parametrize("outcome", [EventOutcome.REPEATED, EventOutcome.IGNORED])
def test_given_a_failed_event_not_applied_then_the_lock_stays(outcome: EventOutcome) -> None:
    store = _Store((outcome, _message(Status.DELIVERED)))
    assert apply_event(store, _event(ProviderEventType.FAILED)) is outcome
    assert store.released == []
