"""MessageService.send against in-memory ports: created, duplicate, key tie; and the hand-off that
follows a creation from the table's stream (HandoffFunction on the store's stream of creations)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from msgspec.structs import replace
from sendonce import composition
from sendonce.api import dependencies
from sendonce.api.app import handle
from sendonce.channels import normalise_recipient
from sendonce.errors import IdempotencyKeyReused, MessageNotCancelable
from sendonce.messages.handoff import handoff_due_at
from sendonce.messages.model import Channel, Status
from sendonce.messages.service import MessageService, SendCommand

from tests.support.lambda_context import FakeLambdaContext
from tests.unit.unit_fakes import (
    FakeQueue,
    InMemoryApiKeys,
    InMemoryStore,
    ManualClock,
    fake_api_dependencies,
    hand_off,
    key_of,
)


def _service(store: InMemoryStore, queue: FakeQueue, clock: ManualClock, window: int = 900) -> MessageService:
    return MessageService(store=store, queue=queue, dedup_window=timedelta(seconds=window), clock=clock)


def _command(**changes: object) -> SendCommand:
    command = SendCommand(
        workspace_id="ws_a",
        channel=Channel("sms"),
        recipient=normalise_recipient(Channel("sms"), "+15550100000"),
        body="hello",
    )
    return replace(command, **changes)  # type: ignore[arg-type]


def test_given_a_new_message_when_sent_then_created_queued_and_enqueued_once_from_the_stream(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    result = _service(store, queue, clock).send(_command())
    assert queue.enqueued == []  # the request makes no second call
    assert hand_off(store, queue, clock) == {"batchItemFailures": []}

    assert result.created
    assert not result.duplicate
    assert not result.replayed
    assert result.message is not None
    assert result.message.status is Status.QUEUED
    assert result.message.to == "+15550100000"
    assert queue.enqueued == [(result.message.id, 0)]
    assert store.messages[result.message.id].status is Status.QUEUED


def test_given_the_queue_is_down_when_sent_then_created_queued_and_its_record_comes_back_to_the_stream(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    queue.fail = True

    result = _service(store, queue, clock).send(_command())

    assert result.created
    assert result.message is not None
    assert result.message.status is Status.QUEUED
    record = store.stream[0]
    assert hand_off(store, queue, clock) == {
        "batchItemFailures": [{"itemIdentifier": record["dynamodb"]["SequenceNumber"]}]
    }
    queue.fail = False
    store.stream.append(record)  # the stream brings it back
    assert hand_off(store, queue, clock) == {"batchItemFailures": []}
    assert queue.enqueued == [(result.message.id, 0)]


def test_given_a_send_at_within_15_minutes_when_sent_then_scheduled_and_enqueued_with_a_delay(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    result = _service(store, queue, clock).send(_command(send_at=clock.now + timedelta(seconds=90.5)))
    hand_off(store, queue, clock)

    assert result.message is not None
    assert result.message.status is Status.SCHEDULED
    assert queue.enqueued == [(result.message.id, 91)]


def test_given_a_send_at_days_ahead_when_sent_then_scheduled_and_left_to_the_outbox(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    result = _service(store, queue, clock).send(_command(send_at=clock.now + timedelta(days=3)))
    hand_off(store, queue, clock)

    assert result.message is not None
    assert result.message.status is Status.SCHEDULED
    assert queue.enqueued == []
    assert handoff_due_at(clock.now, clock.now + timedelta(days=3)) == clock.now + timedelta(
        days=3
    ) - timedelta(minutes=15)


def test_given_a_send_at_in_the_past_when_sent_then_queued_now(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    result = _service(store, queue, clock).send(_command(send_at=clock.now - timedelta(hours=1)))
    hand_off(store, queue, clock)

    assert result.message is not None
    assert result.message.status is Status.QUEUED
    assert queue.enqueued == [(result.message.id, 0)]


def test_given_an_identical_send_within_the_window_then_duplicate_only_with_the_original_and_its_age(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock)
    first = service.send(_command())
    clock.advance(42)

    second = service.send(_command())

    assert second.duplicate
    assert not second.created
    assert second.message is not None
    assert first.message is not None
    assert second.message.id == first.message.id
    assert second.original_age_seconds == 42
    hand_off(store, queue, clock)
    assert len(queue.enqueued) == 1


def test_given_an_identical_send_after_the_window_then_a_new_message(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock, window=60)
    first = service.send(_command())
    clock.advance(61)

    second = service.send(_command())

    assert second.created
    assert second.message is not None
    assert first.message is not None
    assert second.message.id != first.message.id


@pytest.mark.parametrize(
    "change",
    [
        {"workspace_id": "ws_b"},
        {"body": "hello!"},
        {"recipient": normalise_recipient(Channel("sms"), "+15550100001")},
        {"subject": "a subject"},
    ],
)
def test_given_a_different_identity_then_not_a_duplicate(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock, change: dict[str, object]
) -> None:
    service = _service(store, queue, clock)
    service.send(_command())

    assert service.send(_command(**change)).created


def test_given_metadata_differs_then_still_a_duplicate(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock)
    service.send(_command(metadata={"a": "1"}))

    assert service.send(_command(metadata={"a": "2"})).duplicate


def test_given_the_same_words_on_another_channel_to_the_same_address_then_a_duplicate(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock)
    service.send(_command())

    duplicate = service.send(
        _command(channel=Channel("imessage"), recipient=normalise_recipient("imessage", "+1 555 010 0000"))
    )
    assert duplicate.duplicate


def _keyed(fingerprint: str, **changes: object) -> SendCommand:
    return _command(idempotency_key="key-1", payload_fingerprint=fingerprint, **changes)


def test_given_a_key_tie_and_the_same_payload_then_the_original_is_replayed_without_a_send(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock, window=1)
    first = service.send(_keyed("fp"))
    clock.advance(5)  # the dedup lock is over; the tie is forever

    again = service.send(_keyed("fp"))

    assert again.replayed
    assert not again.created
    assert again.message is not None
    assert first.message is not None
    assert again.message.id == first.message.id
    hand_off(store, queue, clock)
    assert len(queue.enqueued) == 1


def test_given_a_key_tie_and_another_payload_then_idempotency_key_reused(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock)
    service.send(_keyed("fp"))

    with pytest.raises(IdempotencyKeyReused):
        service.send(_keyed("another-fp"))
    hand_off(store, queue, clock)
    assert len(queue.enqueued) == 1


def test_given_a_key_tie_to_a_canceled_message_then_idempotency_key_reused(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock)
    first = service.send(_keyed("fp"))
    assert first.message is not None
    service.cancel("ws_a", first.message.id)

    with pytest.raises(IdempotencyKeyReused):
        service.send(_keyed("fp"))


def test_given_a_canceled_message_then_its_dedup_lock_is_released(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock)
    first = service.send(_command())
    assert first.message is not None

    canceled = service.cancel("ws_a", first.message.id)

    assert canceled.status is Status.CANCELED
    assert service.send(_command()).created


def test_given_a_message_with_an_attempt_when_canceled_then_not_cancelable(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock)
    first = service.send(_command())
    assert first.message is not None
    store.claim("ws_a", first.message.id, clock.now, 60)

    with pytest.raises(MessageNotCancelable):
        service.cancel("ws_a", first.message.id)


def test_given_the_same_key_in_another_workspace_then_another_message(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock)
    first = service.send(_keyed("fp"))
    other = service.send(_keyed("fp", workspace_id="ws_b"))

    assert other.created
    assert other.message is not None
    assert first.message is not None
    assert other.message.id != first.message.id


def test_given_a_page_over_5_mib_then_the_api_shows_fewer_and_a_cursor_that_reaches_every_one() -> None:
    store, clock = InMemoryStore(), ManualClock()
    service = MessageService(store=store, queue=FakeQueue(), dedup_window=timedelta(minutes=15), clock=clock)
    # 100 messages of ~100 KB (4-byte characters): more than 5 MiB in one page of 100.
    for i in range(100):
        clock.advance(0.001)
        service.send(_command(body=f"{i} " + "\U0001f600" * 25_000))
    dependencies.root.use(fake_api_dependencies(service, InMemoryApiKeys.of("ws_a")))
    sizes: list[int] = []
    seen: list[str] = []
    cursor = None
    try:
        while True:
            query = {"limit": "100", **({"cursor": cursor} if cursor else {})}
            answer = handle(_list_event("ws_a", query), FakeLambdaContext())  # type: ignore[arg-type]
            assert answer["statusCode"] == 200
            sizes.append(len(answer["body"].encode()))
            page = json.loads(answer["body"])
            seen.extend(m["id"] for m in page["messages"])
            cursor = page["nextCursor"]
            if cursor is None:
                break
    finally:
        composition.reset_all()
    assert len(sizes) > 1
    assert max(sizes) < 5 * 1024 * 1024
    assert sorted(seen, reverse=True) == seen
    assert len(set(seen)) == 100


def _list_event(workspace: str, query: dict[str, str]) -> dict[str, Any]:
    return {
        "version": "2.0",
        "routeKey": "GET /v1/messages",
        "rawPath": "/v1/messages",
        "rawQueryString": "&".join(f"{k}={v}" for k, v in query.items()),
        "queryStringParameters": query,
        "headers": {"authorization": f"Bearer {key_of(workspace)}"},
        "requestContext": {"http": {"method": "GET", "path": "/v1/messages"}, "stage": "$default"},
        "isBase64Encoded": False,
    }
