"""From the MessagesTable's stream to events: exactly one event per committed change, whatever crashes.

- `change_of` reads a stream record as the change it tells, if any: a status change into a told
  status, or a caught duplicate (`duplicatesBlocked` counted up); locks, ties, untold statuses and
  removals tell nothing.
- `EventRecorder.record` writes the change's event with the message's `Applied`, then queues its
  deliveries. A crash at any step (before the read, before or after the write, at the enqueue)
  followed by the same record again leaves exactly one event, its deliveries queued, and
  `sequence` counting 1, 2, 3 per message. A record older than the last one told writes nothing.
- `handle_stream_batch` tells each message's records in order (messages side by side): a record
  that fails holds back its message's later records, and the batch is reported from the earliest
  failure on; the records brought back again write nothing new.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from msgspec.structs import replace
from sendonce.activity.counts import PromiseKind
from sendonce.adapters.dynamodb_items import lock_key, tie_key, to_item
from sendonce.adapters.dynamodb_message_stream import POSITION_DIGITS, change_of
from sendonce.api.shapes import message_shape
from sendonce.entrypoints.message_changes import build, handle_stream_batch
from sendonce.messages.model import Channel, Message, Status
from sendonce.settings import MessageChangesSettings
from sendonce.status_webhooks.events import ChangeNotRecorded, EventRecorder
from sendonce.status_webhooks.model import (
    STATUS_EVENTS,
    Change,
    Delivery,
    Endpoint,
    Event,
    SigningSecret,
)
from sendonce.status_webhooks.ports import Applied, Attempt, DeliveryTask
from sendonce.status_webhooks.rules import (
    EventType,
)

from tests.unit.unit_fakes import T0, FakeDeliveryQueue, InMemoryWebhookStore

WS = "ws_1"
OTHER_WS = "ws_2"


# ---------------------------------------------------------------------------- stream records
def message(
    status: Status = Status.QUEUED, at: datetime = T0, message_id: str = "msg_01KDVDNA00QV9D1V5ZMBF8DBMW"
) -> Message:
    return Message(
        id=message_id,
        workspace_id=WS,
        channel=Channel("sms"),
        to="+15550100000",
        body="Your code is 123456",
        status=status,
        created_at=T0,
        updated_at=at,
        metadata={"order": "A-17"},
    )


def image(current: Message, duplicates_blocked: int | None = None) -> dict[str, Any]:
    item: dict[str, Any] = to_item(current, None)
    if duplicates_blocked is not None:
        item["duplicatesBlocked"] = {"N": str(duplicates_blocked)}
    return item


def stream_record(
    sequence: int,
    new: dict[str, Any] | None,
    old: dict[str, Any] | None = None,
    *,
    event_name: str | None = None,
    approximate: int = int(T0.timestamp()),
) -> dict[str, Any]:
    """A record of Lambda's DynamoDB stream event, as the event source mapping hands it over."""
    name = event_name or ("INSERT" if old is None else "MODIFY" if new is not None else "REMOVE")
    keyed = new if new is not None else old
    assert keyed is not None
    dynamodb: dict[str, Any] = {
        "ApproximateCreationDateTime": approximate,
        "Keys": {"pk": keyed["pk"], "sk": keyed["sk"]},
        "SequenceNumber": str(sequence),
        "SizeBytes": 100,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    }
    if new is not None:
        dynamodb["NewImage"] = new
    if old is not None:
        dynamodb["OldImage"] = old
    return {
        "eventID": f"e{sequence}",
        "eventName": name,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": dynamodb,
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/MessagesTable/stream/x",
    }


def status_change(
    sequence: int, old: Status | None, new: Status, at: datetime = T0, **kw: Any
) -> dict[str, Any]:
    return stream_record(
        sequence,
        image(message(new, at, **kw)),
        image(message(old, T0, **kw)) if old is not None else None,
    )


def change(sequence: int, old: Status | None, new: Status, at: datetime = T0, **kw: Any) -> Change:
    found = change_of(status_change(sequence, old, new, at, **kw))
    assert found is not None
    return found


def endpoint(endpoint_id: str, event_types: tuple[EventType, ...] | None = None, ws: str = WS) -> Endpoint:
    return Endpoint(
        id=endpoint_id,
        workspace_id=ws,
        url=f"https://hooks.example.com/{endpoint_id}",
        event_types=event_types,
        description=None,
        created_at=T0,
        secrets=(SigningSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),),
    )


def recorder(
    store: InMemoryWebhookStore | None = None, queue: FakeDeliveryQueue | None = None
) -> tuple[EventRecorder, InMemoryWebhookStore, FakeDeliveryQueue]:
    store = store if store is not None else InMemoryWebhookStore()
    queue = queue if queue is not None else FakeDeliveryQueue()
    return EventRecorder(events=store, endpoints=store, queue=queue, show_message=message_shape), store, queue


def with_endpoints(store: InMemoryWebhookStore, *endpoints: Endpoint) -> InMemoryWebhookStore:
    for added in endpoints:
        store.add_endpoint(added, limit=10)
    return store


def events_of(store: InMemoryWebhookStore, message_id: str | None = None) -> list[Event]:
    return sorted(
        (e for e in store.event_items.values() if message_id is None or e.message_id == message_id),
        key=lambda e: (e.sequence or 0, e.id),
    )


# ---------------------------------------------------------------------------- change_of
@pytest.mark.parametrize(("status", "event_type"), sorted(STATUS_EVENTS.items()))
def test_an_insert_into_a_told_status_is_that_change(status: Status, event_type: EventType) -> None:
    at = T0 + timedelta(seconds=3)
    found = change_of(status_change(1100000000017454423009, None, status, at))

    assert found is not None
    assert found.type is event_type
    assert found.message.status is status
    assert found.at == at  # the message's updatedAt: the instant of the change
    assert found.position == "1100000000017454423009".zfill(POSITION_DIGITS)
    assert found.is_status_change


@pytest.mark.parametrize(
    ("old", "new", "told"),
    [
        (Status.QUEUED, Status.SENDING, None),  # the service's own step
        (Status.SENDING, Status.SENT, EventType.SENT),
        (Status.SENT, Status.DELIVERED, EventType.DELIVERED),
        (Status.SENDING, Status.QUEUED, EventType.QUEUED),  # a retry is a change of status
        (Status.SENDING, Status.UNKNOWN, EventType.UNKNOWN),
        (Status.UNKNOWN, Status.FAILED, EventType.FAILED),
        (Status.QUEUED, Status.CANCELED, EventType.CANCELED),
        (Status.ACCEPTED, Status.SCHEDULED, EventType.SCHEDULED),
        (Status.QUEUED, Status.QUEUED, None),  # written, but no change of status
    ],
)
def test_a_modify_tells_a_change_into_a_told_status_only(
    old: Status, new: Status, told: EventType | None
) -> None:
    found = change_of(status_change(7, old, new))

    assert (found.type if found else None) is told


def test_an_accepted_message_is_not_told() -> None:
    assert change_of(status_change(1, None, Status.ACCEPTED)) is None


def test_a_removal_tells_nothing() -> None:
    gone = image(message(Status.SENT))
    assert change_of(stream_record(9, None, gone, event_name="REMOVE")) is None


@pytest.mark.parametrize("key", [lock_key("abc"), tie_key("def")], ids=["lock", "tie"])
def test_locks_and_ties_tell_nothing(key: dict[str, Any]) -> None:
    item = {**key, "messageId": {"S": "msg_x"}, "status": {"S": "queued"}}
    assert change_of(stream_record(3, item)) is None
    assert change_of(stream_record(4, {**item, "status": {"S": "sent"}}, item)) is None


@pytest.mark.parametrize(("before", "after"), [(None, 1), (0, 1), (1, 2), (4, 9)])
def test_a_duplicates_blocked_count_going_up_is_a_caught_duplicate(before: int | None, after: int) -> None:
    current = message(Status.SENT)
    approximate = int(T0.timestamp()) + 42
    record = stream_record(11, image(current, after), image(current, before), approximate=approximate)

    found = change_of(record)

    assert found is not None
    assert found.type is EventType.DUPLICATE_BLOCKED
    assert not found.is_status_change
    assert found.message.status is Status.SENT  # the original, as it stands
    assert found.at == datetime.fromtimestamp(approximate, UTC)


def test_a_caught_duplicate_is_never_told_before_the_originals_last_change() -> None:
    # The stream's creation time is whole seconds: the catch at 12:00:07.250 reads as 12:00:07.
    current = message(Status.QUEUED, T0 + timedelta(seconds=7, milliseconds=200))
    record = stream_record(11, image(current, 1), image(current), approximate=int(T0.timestamp()) + 7)

    found = change_of(record)

    assert found is not None
    assert found.at == current.updated_at


@pytest.mark.parametrize(("before", "after"), [(1, 1), (2, 1), (None, None)])
def test_a_duplicates_blocked_count_not_going_up_tells_nothing(before: int | None, after: int | None) -> None:
    current = message(Status.SENT)
    assert change_of(stream_record(11, image(current, after), image(current, before))) is None


def test_a_record_whose_sequence_number_is_not_a_number_is_refused() -> None:
    record = status_change(1, None, Status.QUEUED)
    record["dynamodb"]["SequenceNumber"] = "12a"
    with pytest.raises(ValueError, match="sequence number"):
        change_of(record)


def test_a_message_with_an_unknown_status_is_refused() -> None:
    record = status_change(1, None, Status.QUEUED)
    record["dynamodb"]["NewImage"]["status"] = {"S": "teleported"}
    with pytest.raises(ValueError, match="status"):
        change_of(record)


def test_positions_compare_in_stream_order_though_their_lengths_differ() -> None:
    earlier = change(99_999_999_999_999_999_999, None, Status.QUEUED)
    later = change(100_000_000_000_000_000_000, Status.SENDING, Status.SENT)

    assert earlier.position < later.position


def test_an_event_id_is_the_same_for_every_copy_of_a_record_and_differs_between_records() -> None:
    first, again = change(21, None, Status.QUEUED), change(21, None, Status.QUEUED)
    other = change(22, None, Status.QUEUED)

    assert first.event_id == again.event_id
    assert first.event_id != other.event_id
    assert first.event_id.startswith("evt_")
    assert len(first.event_id) == 30


# ---------------------------------------------------------------------------- EventRecorder
def test_a_change_becomes_one_event_with_a_delivery_for_each_endpoint_that_wants_it() -> None:
    store = with_endpoints(
        InMemoryWebhookStore(),
        endpoint("whep_all"),
        endpoint("whep_sent", (EventType.SENT,)),
        endpoint("whep_queued", (EventType.QUEUED, EventType.FAILED)),
        endpoint("whep_elsewhere", ws=OTHER_WS),
    )
    rec, store, queue = recorder(store)
    told = change(10, None, Status.QUEUED)

    event = rec.record(told)

    assert event is not None
    assert events_of(store) == [event]
    assert event.id == told.event_id
    assert event.sequence == 1
    assert event.type is EventType.QUEUED
    assert event.message == message_shape(told.message)
    assert [d.endpoint_id for d in event.deliveries] == ["whep_all", "whep_queued"]
    assert all(d == Delivery(d.endpoint_id) for d in event.deliveries)
    assert queue.tasks == [DeliveryTask(WS, event.id, "whep_all"), DeliveryTask(WS, event.id, "whep_queued")]
    assert store.applied(told.message.id) == Applied(1, told.position)


def test_a_workspace_with_no_endpoints_still_has_its_events_and_queues_nothing() -> None:
    rec, store, queue = recorder()

    event = rec.record(change(10, None, Status.QUEUED))

    assert event is not None
    assert event.deliveries == ()
    assert len(store.event_items) == 1
    assert queue.tasks == []


def test_sequence_counts_each_messages_status_changes_from_one() -> None:
    rec, store, _ = recorder()
    a, b = "msg_01KDVDNA00QV9D1V5ZMBF8DBAA", "msg_01KDVDNA00QV9D1V5ZMBF8DBBB"
    changes = [
        change(1, None, Status.QUEUED, message_id=a),
        change(2, None, Status.SCHEDULED, message_id=b),
        change(3, Status.SENDING, Status.SENT, message_id=a),
        change(4, Status.SCHEDULED, Status.QUEUED, message_id=b),
        change(5, Status.SENT, Status.DELIVERED, message_id=a),
    ]
    for each in changes:
        rec.record(each)

    assert [(e.type, e.sequence) for e in events_of(store, a)] == [
        (EventType.QUEUED, 1),
        (EventType.SENT, 2),
        (EventType.DELIVERED, 3),
    ]
    assert [(e.type, e.sequence) for e in events_of(store, b)] == [
        (EventType.SCHEDULED, 1),
        (EventType.QUEUED, 2),
    ]


def test_a_caught_duplicate_has_no_sequence_and_does_not_count_as_a_change() -> None:
    rec, store, _ = recorder(with_endpoints(InMemoryWebhookStore(), endpoint("whep_1")))
    original = message(Status.QUEUED)
    rec.record(change(1, None, Status.QUEUED))
    caught = change_of(stream_record(2, image(original, 1), image(original)))
    assert caught is not None

    duplicate = rec.record(caught)
    later = change(3, Status.SENDING, Status.SENT)
    sent = rec.record(later)

    assert duplicate is not None
    assert duplicate.sequence is None
    assert duplicate.payload()["data"] == {"message": message_shape(original), "sequence": None}
    assert sent is not None
    assert sent.sequence == 2
    assert store.applied(original.id) == Applied(2, later.position)


def test_the_promise_counts_a_new_message_and_a_duplicate_once_each_however_often_told() -> None:
    """Each count rides in its event's write: a record told again (the stream's retry) adds none."""
    rec, store, _ = recorder()
    original = message(Status.QUEUED)
    created = change(1, None, Status.QUEUED)
    caught = change_of(stream_record(2, image(original, 1), image(original)))
    assert caught is not None
    for told in (created, created, caught, caught, change(3, Status.SENDING, Status.SENT)):
        rec.new_batch()
        rec.record(told)

    (day,) = store.promise_counts.days(WS, [T0.date().isoformat()])
    assert day.counts == {PromiseKind.NEW_MESSAGES: 1, PromiseKind.DUPLICATES_BLOCKED: 1}


def test_the_same_record_again_writes_nothing_and_queues_only_deliveries_never_attempted() -> None:
    store = with_endpoints(InMemoryWebhookStore(), endpoint("whep_1"), endpoint("whep_2"))
    rec, store, queue = recorder(store)
    told = change(10, None, Status.QUEUED)
    event = rec.record(told)
    assert event is not None
    store.record_attempt(WS, event.id, "whep_1", Attempt(T0, 200, succeeded=True, final=False))
    queue.tasks.clear()

    again = rec.record(told)

    assert again is not None
    assert again.id == event.id
    assert len(store.event_items) == 1
    assert store.applied(told.message.id) == Applied(1, told.position)
    assert queue.tasks == [DeliveryTask(WS, event.id, "whep_2")]  # whep_1 was attempted already

    store.record_attempt(WS, event.id, "whep_2", Attempt(T0, 500, succeeded=False, final=False))
    queue.tasks.clear()
    rec.record(told)
    assert queue.tasks == []  # a delivery being retried has its own record on the queue


def test_a_record_older_than_the_last_one_told_writes_nothing() -> None:
    rec, store, queue = recorder(with_endpoints(InMemoryWebhookStore(), endpoint("whep_1")))
    rec.record(change(20, Status.SENDING, Status.SENT))
    written, queued = dict(store.event_items), list(queue.tasks)

    stale = rec.record(change(10, None, Status.QUEUED))

    assert stale is None
    assert store.event_items == written
    assert queue.tasks == queued
    assert store.applied(message().id) == Applied(1, change(20, Status.SENDING, Status.SENT).position)


CRASHES = {
    "before the read": lambda store, queue: setattr(store, "crash_before_read", 1),
    "before the write": lambda store, queue: setattr(store, "crash_before_record", 1),
    "after the write": lambda store, queue: setattr(store, "crash_after_record", 1),
    "at the enqueue": lambda store, queue: setattr(queue, "fail", 1),
}


@pytest.mark.parametrize("crash", list(CRASHES))
@pytest.mark.parametrize("before", [0, 1, 2], ids=["first change", "second change", "third change"])
def test_a_crash_at_any_step_then_the_record_again_leaves_exactly_one_event(crash: str, before: int) -> None:
    rec, store, queue = recorder(
        with_endpoints(InMemoryWebhookStore(), endpoint("whep_1"), endpoint("whep_2"))
    )
    steps = [
        change(1, None, Status.QUEUED),
        change(2, Status.SENDING, Status.SENT),
        change(3, Status.SENT, Status.DELIVERED),
    ]
    for earlier in steps[:before]:
        rec.record(earlier)
    crashing = steps[before]
    CRASHES[crash](store, queue)

    with pytest.raises(Exception):  # noqa: B017, PT011 (whatever the crash raised)
        rec.record(crashing)
    rec.new_batch()
    event = rec.record(crashing)  # the stream brings the record back
    for later in steps[before + 1 :]:
        rec.record(later)

    assert event is not None
    told = events_of(store)
    assert [(e.type, e.sequence) for e in told] == [(s.type, n) for n, s in enumerate(steps, start=1)]
    assert told[before].id == crashing.event_id
    for each in told:  # every delivery of every event was queued, at least once
        queued = {t.endpoint_id for t in queue.tasks if t.event_id == each.id}
        assert queued == {"whep_1", "whep_2"}
    assert store.applied(crashing.message.id) == Applied(len(steps), steps[-1].position)


@pytest.mark.parametrize("crash", list(CRASHES))
def test_a_crash_then_the_record_twice_more_still_leaves_one_event(crash: str) -> None:
    rec, store, queue = recorder(with_endpoints(InMemoryWebhookStore(), endpoint("whep_1")))
    told = change(1, None, Status.QUEUED)
    CRASHES[crash](store, queue)
    with pytest.raises(Exception):  # noqa: B017, PT011
        rec.record(told)

    first, second = rec.record(told), rec.record(told)

    assert first is not None
    assert second is not None
    assert first.id == second.id == told.event_id
    assert list(store.event_items) == [(WS, told.event_id)]
    assert {t.endpoint_id for t in queue.tasks} == {"whep_1"}


def test_a_caught_duplicate_crashing_after_its_write_is_one_event_too() -> None:
    rec, store, queue = recorder(with_endpoints(InMemoryWebhookStore(), endpoint("whep_1")))
    original = message(Status.QUEUED)
    caught = change_of(stream_record(5, image(original, 1), image(original, 0)))
    assert caught is not None
    store.crash_after_record = 1
    with pytest.raises(RuntimeError):
        rec.record(caught)

    again = rec.record(caught)

    assert again is not None
    assert again.sequence is None
    assert list(store.event_items) == [(WS, caught.event_id)]
    assert [t.event_id for t in queue.tasks] == [caught.event_id]
    assert store.applied(original.id) is None


class MovingStore(InMemoryWebhookStore):
    """A store where another writer moves the message's `Applied` on between each read and write."""

    def record(
        self, event: Event, position: str, previous: Applied | None, tally: Any = None, promise: Any = None
    ) -> bool:
        current = self.applied_items.get(event.message_id)
        self.applied_items[event.message_id] = Applied((current.sequence if current else 0) + 1, "0")
        return super().record(event, position, previous, tally, promise)


def test_a_message_whose_events_keep_moving_is_handed_back_not_told_twice() -> None:
    rec, store, queue = recorder(MovingStore())

    with pytest.raises(ChangeNotRecorded):
        rec.record(change(1, None, Status.QUEUED))

    assert store.event_items == {}
    assert queue.tasks == []


def test_endpoints_are_read_once_a_batch() -> None:
    reads: list[str] = []

    class CountingStore(InMemoryWebhookStore):
        def endpoints(self, workspace_id: str) -> list[Endpoint]:
            reads.append(workspace_id)
            return super().endpoints(workspace_id)

    rec, store, _ = recorder(with_endpoints(CountingStore(), endpoint("whep_1")))
    rec.record(change(1, None, Status.QUEUED))
    rec.record(change(2, Status.SENDING, Status.SENT))
    assert reads == [WS]

    store.add_endpoint(endpoint("whep_2"), limit=10)
    rec.new_batch()
    later = rec.record(change(3, Status.SENT, Status.DELIVERED))
    assert reads == [WS, WS]
    assert later is not None
    assert [d.endpoint_id for d in later.deliveries] == ["whep_1", "whep_2"]


# ---------------------------------------------------------------------------- handle_stream_batch
def test_a_batch_tells_each_change_once_in_order_and_skips_what_is_no_change() -> None:
    rec, store, queue = recorder(with_endpoints(InMemoryWebhookStore(), endpoint("whep_1")))
    lock = {**lock_key("abc"), "messageId": {"S": message().id}}
    batch = [
        status_change(1, None, Status.QUEUED),
        stream_record(2, lock),
        status_change(3, Status.QUEUED, Status.SENDING),
        status_change(4, Status.SENDING, Status.SENT),
        stream_record(5, None, lock, event_name="REMOVE"),
    ]

    assert handle_stream_batch(rec, {"Records": batch}) == {"batchItemFailures": []}

    assert [(e.type, e.sequence) for e in events_of(store)] == [(EventType.QUEUED, 1), (EventType.SENT, 2)]
    assert len(queue.tasks) == 2


def test_duplicated_records_in_a_batch_and_a_batch_fed_twice_are_one_event_each() -> None:
    rec, store, queue = recorder(with_endpoints(InMemoryWebhookStore(), endpoint("whep_1")))
    queued, sent = status_change(1, None, Status.QUEUED), status_change(2, Status.SENDING, Status.SENT)
    batch = [queued, queued, sent, sent, queued]

    assert handle_stream_batch(rec, {"Records": batch}) == {"batchItemFailures": []}
    assert handle_stream_batch(rec, {"Records": batch}) == {"batchItemFailures": []}

    assert [(e.type, e.sequence) for e in events_of(store)] == [(EventType.QUEUED, 1), (EventType.SENT, 2)]
    assert {(t.event_id, t.endpoint_id) for t in queue.tasks} == {(e.id, "whep_1") for e in events_of(store)}


class CrashingFor(InMemoryWebhookStore):
    """Crashes the next `times` writes of one message's events, whichever thread makes them."""

    def __init__(self, message_id: str, times: int = 1) -> None:
        super().__init__()
        self.crashing, self.times = message_id, times

    def record(
        self, event: Event, position: str, previous: Applied | None, tally: Any = None, promise: Any = None
    ) -> bool:
        if event.message_id == self.crashing and self.times:
            self.times -= 1
            raise RuntimeError("crashed before the event was written")
        return super().record(event, position, previous, tally, promise)


def test_a_failing_record_holds_back_its_messages_later_changes_and_the_batch_is_reported_from_it() -> None:
    crashing = CrashingFor(message().id, times=0)
    rec, store, queue = recorder(with_endpoints(crashing, endpoint("whep_1")))
    other = "msg_01KDVDNA00QV9D1V5ZMBF8DBOO"
    batch = [
        status_change(2, Status.SENDING, Status.SENT),  # fails
        status_change(3, None, Status.QUEUED, message_id=other),
        status_change(4, Status.SENT, Status.DELIVERED),  # held back behind it
        status_change(5, Status.QUEUED, Status.SENDING, message_id=other),
        status_change(6, Status.SENDING, Status.SENT, message_id=other),
    ]
    rec.record(change(1, None, Status.QUEUED))
    crashing.times = 1

    answer = handle_stream_batch(rec, {"Records": batch})

    assert answer == {"batchItemFailures": [{"itemIdentifier": str(n)} for n in range(2, 7)]}
    assert [(e.type, e.sequence) for e in events_of(store, message().id)] == [(EventType.QUEUED, 1)]
    # Another message's changes are told side by side, each in its order.
    assert [(e.type, e.sequence) for e in events_of(store, other)] == [
        (EventType.QUEUED, 1),
        (EventType.SENT, 2),
    ]

    assert handle_stream_batch(rec, {"Records": batch}) == {"batchItemFailures": []}  # the records again
    assert [(e.type, e.sequence) for e in events_of(store, message().id)] == [
        (EventType.QUEUED, 1),
        (EventType.SENT, 2),
        (EventType.DELIVERED, 3),
    ]
    assert [(e.type, e.sequence) for e in events_of(store, other)] == [
        (EventType.QUEUED, 1),
        (EventType.SENT, 2),
    ]
    assert {(t.event_id, t.endpoint_id) for t in queue.tasks} == {(e.id, "whep_1") for e in events_of(store)}


def test_a_failing_enqueue_leaves_the_event_written_and_the_record_again_queues_it() -> None:
    rec, store, queue = recorder(with_endpoints(InMemoryWebhookStore(), endpoint("whep_1")))
    batch = [status_change(1, None, Status.QUEUED), status_change(2, Status.SENDING, Status.SENT)]
    queue.fail = 1

    answer = handle_stream_batch(rec, {"Records": batch})

    assert answer == {"batchItemFailures": [{"itemIdentifier": "1"}, {"itemIdentifier": "2"}]}
    assert [(e.type, e.sequence) for e in events_of(store)] == [(EventType.QUEUED, 1)]
    assert queue.tasks == []
    assert handle_stream_batch(rec, {"Records": batch}) == {"batchItemFailures": []}
    assert [(e.type, e.sequence) for e in events_of(store)] == [(EventType.QUEUED, 1), (EventType.SENT, 2)]
    assert [t.event_id for t in queue.tasks] == [e.id for e in events_of(store)]


def test_an_unreadable_record_is_skipped_not_retried_for_a_day() -> None:
    """No message sendonce wrote: retrying it could only hold its message's later changes back."""
    rec, store, _ = recorder()
    bad = status_change(2, Status.SENDING, Status.SENT)
    bad["dynamodb"]["NewImage"]["status"] = {"S": "teleported"}
    batch = [status_change(1, None, Status.QUEUED), bad, status_change(3, Status.SENT, Status.DELIVERED)]

    answer = handle_stream_batch(rec, {"Records": batch})

    assert answer == {"batchItemFailures": []}
    assert [e.type for e in events_of(store)] == [EventType.QUEUED, EventType.DELIVERED]


@pytest.mark.parametrize("event", [None, [], {}, {"Records": None}, {"Records": "x"}])
def test_an_event_with_no_records_is_an_empty_batch(event: Any) -> None:
    rec, store, _ = recorder()
    assert handle_stream_batch(rec, event) == {"batchItemFailures": []}
    assert store.event_items == {}


def test_a_status_event_payload_is_the_message_right_after_its_change() -> None:
    rec, _, _ = recorder()
    sent_at = T0 + timedelta(seconds=5)
    sent = replace(message(Status.SENT, sent_at), attempts=1)
    record = stream_record(2, image(sent), image(message(Status.SENDING)))
    rec.record(change(1, None, Status.QUEUED))
    told = change_of(record)
    assert told is not None

    event = rec.record(told)

    assert event is not None
    assert event.payload() == {
        "type": "message.sent",
        "timestamp": "2026-01-01T12:00:05.000Z",
        "data": {"message": message_shape(sent), "sequence": 2},
    }
    assert event.payload()["data"]["message"]["metadata"] == {"order": "A-17"}  # echoed for joins


# ---------------------------------------------------------------------------- the function's cold start
class _Client:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def send_message_batch(self, **request: Any) -> dict[str, Any]:
        self.calls.append(request["QueueUrl"])
        return {"Successful": [{"Id": entry["Id"]} for entry in request["Entries"]]}


def test_the_functions_root_builds_sqs_with_the_first_delivery_it_queues() -> None:
    built: list[str] = []

    def clients(service: str, **_: Any) -> _Client:
        built.append(service)
        return _Client()

    recorder = build(
        MessageChangesSettings(webhooks_table="Webhooks", webhook_queue_url="q", messages_table="Messages"),
        clients,
    )
    assert built == ["dynamodb"]  # a change that no endpoint wants queues nothing

    recorder.queue.enqueue([DeliveryTask("ws", "evt_1", "whep_1")])
    assert built == ["dynamodb", "sqs"]


def test_the_function_shows_a_message_without_importing_pydantic() -> None:
    script = "import sys, sendonce.entrypoints.message_changes; print('pydantic' in sys.modules)"
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert completed.stdout.strip() == "False"
