"""The provider event store's contract, on every engine (an expired record still in the table and
injected conflicts on moto and DynamoDB Local).

An event takes effect once, however many copies arrive and however concurrently; a status only
moves forward; and an event record past its retention, still in the table, is no repeat.
"""

from __future__ import annotations

from datetime import timedelta

from sendonce.adapters.dynamodb_items import event_key
from sendonce.messages.ids import new_message_id
from sendonce.messages.model import Message, MessageFailure, Status
from sendonce.provider_events.model import ProviderEvent, ProviderEventType
from sendonce.provider_events.ports import EventOutcome

from tests.store.conftest import NOW, DynamoDbEngine, Engine, Stores, build_stores, conflicts, created, race

COPIES = 10


def _sending(stores: Stores, body: str = "hello") -> Message:
    message = created(stores, body=body)
    claimed = stores.delivery.claim("ws_a", message.id, NOW, 60)
    assert isinstance(claimed, Message)
    return claimed


def _event(
    message_id: str, kind: ProviderEventType, event_id: str = "evt-1", error: MessageFailure | None = None
) -> ProviderEvent:
    return ProviderEvent(
        provider="twilio",
        event_id=event_id,
        message_id=message_id,
        type=kind,
        occurred_at="2036-11-30T12:00:00Z",
        error=error,
    )


def _status(stores: Stores, message_id: str) -> str:
    message = stores.sending.get("ws_a", message_id)
    assert message is not None
    return message.status.value


def test_given_10_copies_of_one_event_at_once_then_applied_once_and_the_rest_repeats(
    engine: Engine, stores: Stores
) -> None:
    message = _sending(stores)
    event = _event(message.id, ProviderEventType.DELIVERED)

    answers = race(COPIES, lambda _: stores.events.apply_provider_event(event, NOW))

    outcomes = [answer[0] for answer in answers if isinstance(answer, tuple)]
    assert outcomes.count(EventOutcome.APPLIED) == 1, answers
    assert outcomes.count(EventOutcome.REPEATED) == COPIES - 1, answers
    assert _status(stores, message.id) == "delivered"


def test_given_sent_and_delivered_events_at_once_then_the_status_ends_delivered_and_never_goes_back(
    engine: Engine, stores: Stores
) -> None:
    message = _sending(stores)
    events = [
        _event(
            message.id, ProviderEventType.SENT if i % 2 else ProviderEventType.DELIVERED, event_id=f"evt-{i}"
        )
        for i in range(COPIES)
    ]

    answers = race(COPIES, lambda i: stores.events.apply_provider_event(events[i], NOW))

    outcomes = [answer[0] for answer in answers if isinstance(answer, tuple)]
    assert len(outcomes) == COPIES, answers
    assert 1 <= outcomes.count(EventOutcome.APPLIED) <= 2  # delivered, or sent then delivered
    assert EventOutcome.REPEATED not in outcomes
    assert _status(stores, message.id) == "delivered"


def test_given_a_delivered_message_then_a_late_sent_is_ignored(engine: Engine, stores: Stores) -> None:
    message = _sending(stores)
    assert (
        stores.events.apply_provider_event(_event(message.id, ProviderEventType.DELIVERED), NOW)[0]
        is EventOutcome.APPLIED
    )

    outcome, current = stores.events.apply_provider_event(
        _event(message.id, ProviderEventType.SENT, "evt-2"), NOW
    )

    assert outcome is EventOutcome.IGNORED
    assert current is not None
    assert current.status is Status.DELIVERED
    assert _status(stores, message.id) == "delivered"


def test_given_an_event_for_no_message_then_ignored_and_its_copy_is_a_repeat(
    engine: Engine, stores: Stores
) -> None:
    event = _event(new_message_id(), ProviderEventType.DELIVERED)

    first = stores.events.apply_provider_event(event, NOW)
    second = stores.events.apply_provider_event(event, NOW + timedelta(seconds=1))

    assert first == (EventOutcome.IGNORED, None)
    assert second == (EventOutcome.REPEATED, None)


def test_given_an_event_record_past_its_retention_still_in_the_table_then_its_copy_is_no_repeat(
    dynamodb_engine: DynamoDbEngine, stores: Stores
) -> None:
    message = created(stores)
    event = _event(message.id, ProviderEventType.DELIVERED, "evt-old")
    # Recorded while it could change nothing (the message was still queued).
    assert stores.events.apply_provider_event(event, NOW)[0] is EventOutcome.IGNORED
    assert stores.events.apply_provider_event(event, NOW + timedelta(days=6))[0] is EventOutcome.REPEATED
    eight_days = NOW + timedelta(days=8)
    record = dynamodb_engine.item(event_key("twilio", "evt-old"))
    assert record is not None  # no TTL sweep has deleted it
    assert int(record["expiresAt"]["N"]) < eight_days.timestamp()
    assert isinstance(stores.delivery.claim("ws_a", message.id, eight_days, 60), Message)

    outcome, _ = stores.events.apply_provider_event(event, eight_days)

    assert outcome is EventOutcome.APPLIED
    assert _status(stores, message.id) == "delivered"
    record = dynamodb_engine.item(event_key("twilio", "evt-old"))
    assert record is not None
    assert int(record["expiresAt"]["N"]) > eight_days.timestamp()


def test_given_a_failed_event_then_the_error_is_kept_and_the_lock_can_be_released(
    engine: Engine, stores: Stores
) -> None:
    message = _sending(stores)
    event = _event(
        message.id, ProviderEventType.FAILED, error=MessageFailure("undeliverable", "unknown number")
    )

    outcome, current = stores.events.apply_provider_event(event, NOW)
    assert outcome is EventOutcome.APPLIED
    assert current is not None
    stores.events.release_dedup_lock(current)

    stored = stores.sending.get("ws_a", message.id)
    assert stored is not None
    assert stored.status is Status.FAILED
    assert stored.error is not None
    assert stored.error.code == "undeliverable"
    assert engine.lock_holder(message.dedup_lock_id or "") is None


def test_given_conflicts_on_the_first_tries_then_the_event_is_applied_once(
    dynamodb_engine: DynamoDbEngine, stores: Stores
) -> None:
    message = _sending(stores)
    client = dynamodb_engine.new_client()
    calls = conflicts(client, 2)

    outcome, _ = build_stores(client).events.apply_provider_event(
        _event(message.id, ProviderEventType.SENT), NOW
    )

    assert outcome is EventOutcome.APPLIED
    assert len(calls) == 3
    assert _status(stores, message.id) == "sent"


def test_given_events_of_two_messages_then_each_message_lists_its_own_oldest_first_once(
    engine: Engine, stores: Stores
) -> None:
    """What a message's timeline shows of its provider events (the adapter's ProviderEventsByMessage):
    each recorded once, in the order recorded, its copies not again; an event for no message of
    ours is on no message's list."""
    first, second = _sending(stores, "first"), _sending(stores, "second")
    stores.events.apply_provider_event(_event(first.id, ProviderEventType.SENT, "evt-a"), NOW)
    stores.events.apply_provider_event(_event(second.id, ProviderEventType.DELIVERED, "evt-b"), NOW)
    later = NOW + timedelta(seconds=2)
    stores.events.apply_provider_event(_event(first.id, ProviderEventType.DELIVERED, "evt-c"), later)
    stores.events.apply_provider_event(
        _event(first.id, ProviderEventType.DELIVERED, "evt-c"), later
    )  # a copy
    stores.events.apply_provider_event(_event(new_message_id(), ProviderEventType.SENT, "evt-d"), NOW)

    seen = stores.provider_event_log.of_message(first.id)

    assert [(e.provider, e.type, e.recorded_at) for e in seen] == [
        ("twilio", "sent", NOW),
        ("twilio", "delivered", later),
    ]
    assert all(e.occurred_at == "2036-11-30T12:00:00Z" for e in seen)
    assert [e.type for e in stores.provider_event_log.of_message(second.id)] == ["delivered"]
