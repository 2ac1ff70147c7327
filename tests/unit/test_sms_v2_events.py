"""AWS End User Messaging SMS text events, as SNS brings them to the events queue: which are ours,
what each type means for the message, and each applied once."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sendonce.entrypoints.status import UnreadableEvent, handle_batch, provider_event
from sendonce.messages.model import Channel, Message, MessageFailure, Status
from sendonce.provider_events.model import ProviderEventType, from_json
from sendonce.provider_events.sms_v2_events import from_sms_v2_event, is_sms_v2_event

from tests.unit.unit_fakes import InMemoryProviderEvents, InMemoryStore, InMemorySuppressions

KEY = "sendonce_message_id"
OURS = "msg_01KDVDNA00QV9D1V5ZMBF8DBMW"
SAMPLE = Path(__file__).parents[2] / "events" / "status_sms_v2_delivered.json"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _event(kind: str = "TEXT_DELIVERED", **changes: Any) -> dict[str, Any]:
    """An SMS event as AWS's "Example SMS event data" shows one, with our message's id in `context`."""
    event: dict[str, Any] = {
        "eventType": kind,
        "eventVersion": "1.0",
        "eventTimestamp": 1767225603470,
        "isFinal": True,
        "originationPhoneNumber": "+12065550152",
        "destinationPhoneNumber": "+15550100000",
        "isInternationalSend": False,
        "messageId": "862a8790-60c0-4430-9b2b-658bdexample",
        "messageRequestTimestamp": 1767225601170,
        "messageEncoding": "GSM",
        "messageType": "TRANSACTIONAL",
        "messageStatus": kind.removeprefix("TEXT_"),
        "messageStatusDescription": "Message has been accepted by phone",
        "context": {KEY: OURS},
        "totalMessageParts": 1,
    }
    event.update(changes)
    return event


def _sns(message: object) -> str:
    """The SQS body of an SNS notification (no raw delivery): the event as a JSON string in it."""
    return json.dumps(
        {
            "Type": "Notification",
            "MessageId": "5c0fa4f8-e4ba-4d02-a101-c795472fccd0",
            "TopicArn": "arn:aws:sns:us-east-1:123456789012:sms-events",
            "Message": message if isinstance(message, str) else json.dumps(message),
            "Timestamp": "2026-01-01T00:00:03.512Z",
        }
    )


@pytest.mark.parametrize(
    ("kind", "expected"),
    [("TEXT_DELIVERED", ProviderEventType.DELIVERED), ("TEXT_SUCCESSFUL", ProviderEventType.SENT)],
)
def test_given_a_delivery_or_carrier_acceptance_then_it_names_our_message(
    kind: str, expected: ProviderEventType
) -> None:
    event = from_sms_v2_event(_event(kind), KEY)

    assert event is not None
    assert event.provider == "sms-v2"
    assert event.type is expected
    assert event.message_id == OURS
    assert event.error is None
    assert event.suppress is None
    assert event.occurred_at == "2026-01-01T00:00:03.470Z"  # AWS's milliseconds since the epoch


@pytest.mark.parametrize(
    "kind",
    [
        "TEXT_BLOCKED",
        "TEXT_CARRIER_BLOCKED",
        "TEXT_CARRIER_UNREACHABLE",
        "TEXT_INVALID",
        "TEXT_INVALID_MESSAGE",
        "TEXT_PROTECT_BLOCKED",
        "TEXT_SPAM",
        "TEXT_TTL_EXPIRED",
        "TEXT_UNKNOWN",
        "TEXT_UNREACHABLE",
    ],
)
def test_given_a_final_failure_then_the_message_fails_with_its_type(kind: str) -> None:
    event = from_sms_v2_event(_event(kind, messageStatusDescription="Blocked by the carrier"), KEY)

    assert event is not None
    assert event.type is ProviderEventType.FAILED
    assert event.error == MessageFailure(f"sms_v2_{kind.lower()}", "Blocked by the carrier")
    assert event.suppress is None  # a failed text is no opt-out: the recipient stays sendable


def test_given_a_failure_that_is_not_final_then_it_changes_nothing_yet() -> None:
    assert from_sms_v2_event(_event("TEXT_CARRIER_UNREACHABLE", isFinal=False), KEY) is None
    # not saying whether it is final: its type is its last word
    without = _event("TEXT_SPAM")
    del without["isFinal"]
    event = from_sms_v2_event(without, KEY)
    assert event is not None
    assert event.type is ProviderEventType.FAILED


def test_given_a_failure_without_a_description_then_its_status_or_type_is_told() -> None:
    event = from_sms_v2_event(_event("TEXT_INVALID", messageStatusDescription=None), KEY)
    assert event is not None
    assert event.error == MessageFailure("sms_v2_text_invalid", "INVALID")


@pytest.mark.parametrize("kind", ["TEXT_QUEUED", "TEXT_PENDING", "TEXT_SOMETHING_NEW", "VOICE_COMPLETED"])
def test_given_a_state_in_between_or_an_unknown_type_then_it_is_ignored(kind: str) -> None:
    assert from_sms_v2_event(_event(kind), KEY) is None


@pytest.mark.parametrize(
    "changes",
    [
        {"context": None},
        {"context": {}},
        {"context": {"account": "bar"}},
        {"context": {KEY: ""}},
        {"context": {KEY: 12}},
        {"context": "sendonce_message_id"},
        {"eventType": None},
    ],
)
def test_given_an_event_not_naming_our_message_then_it_is_not_ours(changes: dict[str, Any]) -> None:
    assert from_sms_v2_event(_event(**changes), KEY) is None


def test_the_same_event_again_is_the_same_event_and_another_type_another() -> None:
    delivered = from_sms_v2_event(_event("TEXT_DELIVERED"), KEY)
    again = from_sms_v2_event(_event("TEXT_DELIVERED", eventTimestamp=1767225609999), KEY)
    successful = from_sms_v2_event(_event("TEXT_SUCCESSFUL"), KEY)

    assert delivered is not None
    assert again is not None
    assert successful is not None
    assert delivered.event_id == "862a8790-60c0-4430-9b2b-658bdexample:TEXT_DELIVERED"
    assert again.event_id == delivered.event_id
    assert successful.event_id != delivered.event_id


def test_given_no_aws_id_then_the_event_id_is_ours_and_its_type() -> None:
    event = from_sms_v2_event(_event("TEXT_DELIVERED", messageId=None), KEY)
    assert event is not None
    assert event.event_id == f"{OURS}:TEXT_DELIVERED"


@pytest.mark.parametrize("timestamp", [None, "1767225603470", True, 10**20, float("nan")])
def test_given_an_unreadable_time_then_the_event_still_counts_without_one(timestamp: object) -> None:
    event = from_sms_v2_event(_event(eventTimestamp=timestamp), KEY)
    assert event is not None
    assert event.occurred_at == ""  # as SES's events without a timestamp


def test_an_event_round_trips_through_the_queue_format() -> None:
    event = from_sms_v2_event(_event("TEXT_SPAM"), KEY)
    assert event is not None
    assert from_json(event.to_json()) == event


def test_sms_events_are_told_from_ses_notifications() -> None:
    assert is_sms_v2_event(_event())
    assert not is_sms_v2_event({"eventType": "Delivery", "mail": {"messageId": "ses-1"}})
    assert not is_sms_v2_event({"notificationType": "Bounce"})
    assert not is_sms_v2_event(["TEXT_DELIVERED"])


def test_given_an_sns_notification_of_an_sms_event_then_the_status_function_reads_it() -> None:
    event = provider_event(_sns(_event("TEXT_DELIVERED")))
    assert event is not None
    assert (event.provider, event.type, event.message_id) == ("sms-v2", ProviderEventType.DELIVERED, OURS)
    # an SES notification on the same queue is still SES's
    ses = {
        "eventType": "Delivery",
        "mail": {"messageId": "ses-1", "tags": {"sendonce-message-id": [OURS]}},
        "delivery": {"timestamp": "2026-01-01T00:00:01Z"},
    }
    read = provider_event(_sns(ses))
    assert read is not None
    assert read.provider == "ses"


def test_given_an_sms_event_not_ours_then_the_status_function_passes_it_by() -> None:
    assert provider_event(_sns(_event(context={}))) is None
    assert provider_event(_sns(_event("TEXT_QUEUED"))) is None


@pytest.mark.parametrize("message", ["{not json", '"TEXT_DELIVERED"', "[1, 2]"])
def test_given_an_unreadable_notification_then_the_record_is_unreadable(message: str) -> None:
    with pytest.raises(UnreadableEvent):
        provider_event(_sns(message))


def _message(status: Status) -> Message:
    return Message(
        id=OURS,
        workspace_id="ws_a",
        channel=Channel("sms"),
        to="+15550100000",
        body="hello",
        status=status,
        created_at=NOW,
        updated_at=NOW,
        dedup_lock_id="lock",
    )


def test_the_sample_event_settles_an_unknown_message_once() -> None:
    store = InMemoryStore()
    store.messages[OURS] = _message(Status.UNKNOWN)  # its answer was lost: the event settles it
    events = InMemoryProviderEvents(store, InMemorySuppressions())
    batch = json.loads(SAMPLE.read_text())

    assert handle_batch(events, batch) == {"batchItemFailures": []}
    assert store.messages[OURS].status is Status.DELIVERED
    assert handle_batch(events, batch) == {"batchItemFailures": []}  # SNS again: a repeat
    assert len(events.recorded) == 1
