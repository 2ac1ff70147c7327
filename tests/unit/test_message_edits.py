"""Edits of scheduled messages against in-memory ports: the service, the fake's rules, and the API's 400s."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace
from sendonce import composition
from sendonce.api import dependencies
from sendonce.api.app import handle
from sendonce.api.shapes import message_shape
from sendonce.channels import normalise_recipient
from sendonce.dedup.identity import dedup_identity
from sendonce.errors import DuplicateContent, InvalidEdit, MessageNotEditable, MessageNotFound
from sendonce.idempotency.keys import payload_fingerprint, tie_identity
from sendonce.messages.edits import MessageChanges, edited_payload, plan_edit
from sendonce.messages.handoff import HANDOFF_GRACE, MAX_QUEUE_DELAY, handoff_due_at
from sendonce.messages.model import Channel, Message, Status
from sendonce.messages.ports import Edited, EditRaced, MessageEdit
from sendonce.messages.service import MessageService, SendCommand

from tests.support.lambda_context import FakeLambdaContext
from tests.unit.unit_fakes import (
    TEST_KEYED_HASH,
    FakeQueue,
    InMemoryApiKeys,
    InMemoryStore,
    ManualClock,
    fake_api_dependencies,
    hand_off,
    key_of,
)

WS = "ws_a"
HOUR = timedelta(hours=1)
EVENTS = Path(__file__).resolve().parents[2] / "events"


def _service(store: InMemoryStore, queue: FakeQueue, clock: ManualClock) -> MessageService:
    return MessageService(store=store, queue=queue, dedup_window=timedelta(seconds=900), clock=clock)


def _send(service: MessageService, clock: ManualClock, body: str = "hello", **changes: Any) -> Message:
    command = SendCommand(
        workspace_id=WS,
        channel=Channel("sms"),
        recipient=normalise_recipient(Channel("sms"), "+15550100000"),
        body=body,
        send_at=clock.now + HOUR,
    )
    result = service.send(replace(command, **changes))
    assert result.created, result
    assert result.message is not None
    return result.message


def _lock(message: Message, body: str, subject: str | None = None) -> str:
    return TEST_KEYED_HASH(dedup_identity(message.workspace_id, message.to, subject, body))


# ---------------------------------------------------------------------------- the service and the fake
def test_given_a_scheduled_message_when_its_body_is_edited_then_the_lock_follows_the_content(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock)
    original = _send(service, clock)
    clock.advance(60)

    edited = service.edit(WS, original.id, MessageChanges(body="goodbye"))

    assert edited.body == "goodbye"
    assert edited.status is Status.SCHEDULED
    assert edited.updated_at == clock.now
    assert store.messages[original.id] == edited
    assert _lock(original, "hello") not in store.locks  # the old identity is free
    assert store.locks[_lock(original, "goodbye")].message_id == original.id
    assert edited.dedup_lock_id == _lock(original, "goodbye")
    assert queue.enqueued == []  # an hour ahead: the outbox hands it over when it comes due


def test_given_only_metadata_and_send_at_edited_then_the_lock_stays_and_the_due_time_moves(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock)
    original = _send(service, clock)
    lock = store.locks[_lock(original, "hello")]

    later = clock.now + 3 * HOUR
    edited = service.edit(WS, original.id, MessageChanges(send_at=later, metadata={"k": "v"}))

    assert edited.send_at == later
    assert edited.metadata == {"k": "v"}
    assert store.locks[_lock(original, "hello")] is lock
    assert store.outbox_due[original.id] == handoff_due_at(clock.now, later) == later - MAX_QUEUE_DELAY


def test_given_a_send_at_edited_within_sqs_reach_then_it_is_handed_over_at_once(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock)
    original = _send(service, clock)
    send_at = clock.now + timedelta(seconds=90)

    edited = service.edit(WS, original.id, MessageChanges(send_at=send_at))

    assert queue.enqueued == [(original.id, 90)]
    assert edited.status is Status.SCHEDULED
    assert store.outbox_due[original.id] == send_at + HANDOFF_GRACE
    # Handed over, and still editable until the claim: the record names the message, not its content.
    again = service.edit(WS, original.id, MessageChanges(body="again"))
    assert again.body == "again"
    assert queue.enqueued == [(original.id, 90)]  # the record already queued still covers it
    assert store.outbox_due[original.id] == send_at + HANDOFF_GRACE


def test_given_metadata_edited_then_it_replaces_the_old_metadata(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock)
    original = _send(service, clock, metadata={"a": "1", "b": "2"})

    assert service.edit(WS, original.id, MessageChanges(metadata={"c": "3"})).metadata == {"c": "3"}


def test_given_the_new_content_is_another_messages_then_duplicate_content_and_nothing_changes(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock)
    holder = _send(service, clock, body="taken")
    original = _send(service, clock, body="mine")
    before = (dict(store.messages), dict(store.locks), dict(store.ties))

    with pytest.raises(DuplicateContent) as caught:
        service.edit(WS, original.id, MessageChanges(body="taken", metadata={"x": "y"}))

    assert caught.value.message_id == holder.id
    assert (store.messages, store.locks, store.ties) == before


def test_given_the_holder_s_lock_expired_then_the_edit_takes_it(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock)
    _send(service, clock, body="taken")
    clock.advance(901)
    original = _send(service, clock, body="mine")

    edited = service.edit(WS, original.id, MessageChanges(body="taken"))

    assert store.locks[_lock(original, "taken")].message_id == edited.id


def test_given_the_old_lock_expired_and_was_taken_then_the_edit_leaves_it_to_its_holder(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock)
    original = _send(service, clock, body="hello")
    clock.advance(901)
    newer = _send(service, clock, body="hello")

    service.edit(WS, original.id, MessageChanges(body="changed"))

    assert store.locks[_lock(original, "hello")].message_id == newer.id


@pytest.mark.parametrize(
    "status", [Status.QUEUED, Status.ACCEPTED, Status.SENDING, Status.SENT, Status.CANCELED]
)
def test_given_a_message_that_is_not_scheduled_then_not_editable(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock, status: Status
) -> None:
    service = _service(store, queue, clock)
    original = _send(service, clock)
    store.messages[original.id] = original.with_status(status, clock.now)

    with pytest.raises(MessageNotEditable) as caught:
        service.edit(WS, original.id, MessageChanges(body="too late"))

    assert caught.value.status == status.value
    assert store.messages[original.id].body == "hello"


def test_given_a_canceled_message_then_not_editable(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock)
    original = _send(service, clock)
    service.cancel(WS, original.id)

    with pytest.raises(MessageNotEditable):
        service.edit(WS, original.id, MessageChanges(body="too late"))


def _handed_over(store: InMemoryStore, message: Message) -> datetime:
    """The message as the outbox leaves it once it handed it over: due again after sendAt's grace."""
    assert message.send_at is not None
    store.outbox_due[message.id] = message.send_at + HANDOFF_GRACE
    return store.outbox_due[message.id]


@pytest.mark.parametrize(
    "changes",
    [
        MessageChanges(body="edited"),
        MessageChanges(metadata={"k": "v"}),
        MessageChanges(body="edited", metadata={"k": "v"}),
    ],
)
def test_given_a_scheduled_message_already_handed_over_then_a_content_edit_applies_and_enqueues_nothing(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock, changes: MessageChanges
) -> None:
    service = _service(store, queue, clock)
    original = _send(service, clock)
    due = _handed_over(store, original)

    edited = service.edit(WS, original.id, changes)

    assert store.messages[original.id] == edited
    assert edited.body == (changes.body or original.body)
    assert edited.metadata == (changes.metadata or {})
    assert edited.status is Status.SCHEDULED
    assert queue.enqueued == []  # the record the outbox queued names the message: it still covers it
    assert store.outbox_due[original.id] == due  # and the outbox's due time stays as it was


def test_given_a_message_sent_within_sqs_reach_then_it_stays_editable_until_its_claim(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock)
    original = _send(service, clock, send_at=clock.now + timedelta(minutes=10))
    hand_off(store, queue, clock)  # the stream hands it over at once, held back 10 minutes
    assert queue.enqueued == [(original.id, 600)]
    due = store.outbox_due[original.id]

    edited = service.edit(WS, original.id, MessageChanges(body="still in time"))

    assert edited.body == "still in time"
    assert queue.enqueued == [(original.id, 600)]
    assert store.outbox_due[original.id] == due


def test_given_a_handed_over_message_when_its_send_at_moves_earlier_then_it_is_handed_over_again(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock)
    original = _send(service, clock, send_at=clock.now + timedelta(minutes=10))
    hand_off(store, queue, clock)
    earlier = clock.now + timedelta(minutes=2)

    service.edit(WS, original.id, MessageChanges(send_at=earlier))

    # A fresh record with the new delay; the old one (600 s) finds the message sent and skips.
    assert queue.enqueued == [(original.id, 600), (original.id, 120)]
    assert store.outbox_due[original.id] == earlier + HANDOFF_GRACE


def test_given_a_handed_over_message_when_its_send_at_moves_later_within_sqs_reach_then_a_fresh_record(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock)
    original = _send(service, clock, send_at=clock.now + timedelta(minutes=2))
    hand_off(store, queue, clock)
    later = clock.now + timedelta(minutes=12)

    service.edit(WS, original.id, MessageChanges(send_at=later))

    assert queue.enqueued == [(original.id, 120), (original.id, 720)]
    assert store.outbox_due[original.id] == later + HANDOFF_GRACE


def test_given_a_handed_over_message_when_its_send_at_moves_beyond_sqs_reach_then_the_outbox_owns_it(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock)
    original = _send(service, clock, send_at=clock.now + timedelta(minutes=10))
    hand_off(store, queue, clock)
    later = clock.now + 2 * HOUR

    service.edit(WS, original.id, MessageChanges(send_at=later))

    assert queue.enqueued == [(original.id, 600)]  # nothing more: SQS cannot hold it back that long
    assert store.outbox_due[original.id] == later - MAX_QUEUE_DELAY


def test_given_the_same_send_at_again_then_nothing_is_handed_over_and_the_due_time_stays(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock)
    original = _send(service, clock, send_at=clock.now + timedelta(minutes=10))
    assert original.send_at is not None
    due = _handed_over(store, original)

    service.edit(WS, original.id, MessageChanges(body="same time", send_at=original.send_at))

    assert queue.enqueued == []
    assert store.outbox_due[original.id] == due


def test_given_the_queue_refuses_a_new_send_at_s_hand_off_then_the_outbox_owes_it_at_once(
    store: InMemoryStore, clock: ManualClock
) -> None:
    queue = FakeQueue(fail=True)
    service = _service(store, queue, clock)
    original = _send(service, clock)
    clock.advance(5)

    edited = service.edit(WS, original.id, MessageChanges(send_at=clock.now + timedelta(minutes=5)))

    assert edited.status is Status.SCHEDULED  # the edit is written: the hand-off is the outbox's now
    assert store.outbox_due[original.id] == clock.now  # not 5 minutes and the grace later


def test_given_another_send_at_edit_came_between_then_a_refused_hand_off_leaves_its_due_time(
    store: InMemoryStore, clock: ManualClock
) -> None:
    service = _service(store, FakeQueue(), clock)
    original = _send(service, clock)
    plan = plan_edit(
        original,
        MessageChanges(send_at=clock.now + timedelta(minutes=5)),
        clock.now,
        dedup_window=HOUR,
        keyed=TEST_KEYED_HASH,
    )
    assert isinstance(store.edit(plan, clock.now), Edited)
    newer = service.edit(WS, original.id, MessageChanges(send_at=clock.now + timedelta(minutes=7)))
    assert newer.send_at is not None

    assert store.owe_handoff(plan, clock.now) is False  # the newer edit owes its own hand-off
    assert store.outbox_due[original.id] == newer.send_at + HANDOFF_GRACE


def test_plan_of_a_handed_over_message_keeps_its_due_time_unless_send_at_moves(clock: ManualClock) -> None:
    store, queue = InMemoryStore(), FakeQueue()
    original = _send(_service(store, queue, clock), clock, send_at=clock.now + timedelta(minutes=10))
    new_send_at = clock.now + timedelta(minutes=30)

    body_only = plan_edit(
        original, MessageChanges(body="x"), clock.now, dedup_window=HOUR, keyed=TEST_KEYED_HASH
    )
    moved = plan_edit(
        original, MessageChanges(send_at=new_send_at), clock.now, dedup_window=HOUR, keyed=TEST_KEYED_HASH
    )

    assert body_only.handoff_due_at is None
    assert body_only.edited.body == "x"
    assert moved.handoff_due_at == handoff_due_at(clock.now, new_send_at) == new_send_at - MAX_QUEUE_DELAY


def test_given_the_claim_came_first_then_409_and_the_provider_gets_the_content_as_claimed(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock)
    original = _send(service, clock, send_at=clock.now + timedelta(seconds=30))
    service.edit(WS, original.id, MessageChanges(body="last in time"))
    clock.advance(30)
    claimed = store.claim(WS, original.id, clock.now, 60)
    assert isinstance(claimed, Message)

    with pytest.raises(MessageNotEditable) as caught:
        service.edit(WS, original.id, MessageChanges(body="too late"))

    assert caught.value.status == "sending"
    assert "handed" not in str(caught.value)
    assert claimed.body == store.messages[original.id].body == "last in time"


def test_given_an_unknown_or_another_workspace_s_message_then_not_found(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock)
    original = _send(service, clock)

    with pytest.raises(MessageNotFound):
        service.edit("ws_other", original.id, MessageChanges(body="mine now"))
    with pytest.raises(MessageNotFound):
        service.edit(WS, "msg_01KDVDNA00QV9D1V5ZMBF8DBMW", MessageChanges(body="x"))


def test_given_a_subject_for_a_channel_without_one_then_invalid_edit(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock)
    original = _send(service, clock)

    with pytest.raises(InvalidEdit) as caught:
        service.edit(WS, original.id, MessageChanges(subject="Hi"))

    assert caught.value.field == "subject"


def test_given_an_email_then_its_subject_is_part_of_the_new_identity(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock)
    original = _send(
        service,
        clock,
        channel=Channel("email"),
        recipient=normalise_recipient(Channel("email"), "Ann@Example.com"),
        subject="Hi",
    )

    edited = service.edit(WS, original.id, MessageChanges(subject="Hello"))

    assert edited.subject == "Hello"
    assert (
        store.locks[TEST_KEYED_HASH(dedup_identity(WS, "ann@example.com", "Hello", "hello"))].message_id
        == original.id
    )


def test_given_a_message_sent_with_a_key_then_its_tie_takes_the_edited_payload_s_fingerprint(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock)
    original = _send(service, clock, idempotency_key="k1", payload_fingerprint="original")
    tie = TEST_KEYED_HASH(tie_identity(WS, "k1", original.to))
    assert store.ties[tie] == (original.id, TEST_KEYED_HASH("original"))

    edited = service.edit(WS, original.id, MessageChanges(body="edited"))

    assert store.ties[tie] == (original.id, TEST_KEYED_HASH(payload_fingerprint(edited_payload(edited))))
    assert edited_payload(edited) == {
        "channel": "sms",
        "to": "+15550100000",
        "body": "edited",
        "sendAt": message_shape(edited)["sendAt"],
    }


def test_given_another_edit_came_between_read_and_write_then_the_edit_reads_again(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock)
    original = _send(service, clock)
    first_edit = store.edit
    raced: list[int] = []

    def racing_edit(edit: MessageEdit, now: datetime) -> Any:
        if not raced:
            raced.append(1)
            # Another edit commits first: this one's read is stale.
            store.messages[original.id] = replace(original, metadata={"other": "edit"}, updated_at=now)
        return first_edit(edit, now)

    store.edit = racing_edit  # type: ignore[method-assign]

    edited = service.edit(WS, original.id, MessageChanges(body="mine"))

    assert edited.body == "mine"
    assert edited.metadata == {"other": "edit"}  # applied on top of the other edit, not over it


def test_given_a_stale_read_then_the_fake_answers_edit_raced(
    store: InMemoryStore, clock: ManualClock
) -> None:
    service = _service(store, FakeQueue(), clock)
    original = _send(service, clock)
    store.messages[original.id] = replace(original, updated_at=clock.now + timedelta(seconds=1))
    plan = MessageEdit(
        seen=original,
        edited=replace(original, body="x"),
        claim=None,
        tie=None,
        handoff_due_at=clock.now,
    )

    assert store.edit(plan, clock.now) == EditRaced()


def test_given_two_edits_in_one_millisecond_then_updated_at_still_moves_on(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    service = _service(store, queue, clock)
    original = _send(service, clock)

    first = service.edit(WS, original.id, MessageChanges(body="one"))
    second = service.edit(WS, original.id, MessageChanges(body="two"))

    assert original.updated_at < first.updated_at < second.updated_at


# ---------------------------------------------------------------------------- the API's 400s
_BASE = json.loads((EVENTS / "api_get_message.json").read_text(encoding="utf-8"))


@pytest.fixture
def api_store() -> Iterator[tuple[InMemoryStore, ManualClock]]:
    store, clock = InMemoryStore(), ManualClock(datetime.now(UTC))
    dependencies.root.use(fake_api_dependencies(_service(store, FakeQueue(), clock), InMemoryApiKeys.of(WS)))
    yield store, clock
    composition.reset_all()


def _patch(message_id: str, body: Any, raw: str | None = None) -> tuple[int, dict[str, Any]]:
    event = copy.deepcopy(_BASE)
    path = f"/v1/messages/{message_id}"
    event["routeKey"] = event["requestContext"]["routeKey"] = "PATCH /v1/messages/{id}"
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["http"]["method"] = "PATCH"
    event["headers"]["authorization"] = f"Bearer {key_of(WS)}"
    event["pathParameters"] = {"id": message_id}
    text = raw if raw is not None else json.dumps(body)
    event["body"] = text
    event["headers"]["content-type"] = "application/json"
    event["headers"]["content-length"] = str(len(text.encode()))
    response = handle(event, FakeLambdaContext())  # type: ignore[arg-type]
    return response["statusCode"], json.loads(response["body"])


def _scheduled(store: InMemoryStore, clock: ManualClock) -> Message:
    return _send(_service(store, FakeQueue(), clock), clock)


def test_api_given_an_edit_then_200_with_the_edited_message(
    api_store: tuple[InMemoryStore, ManualClock],
) -> None:
    store, clock = api_store
    message = _scheduled(store, clock)
    send_at = (clock.now + 2 * HOUR).isoformat().replace("+00:00", "Z")

    status, body = _patch(message.id, {"body": "edited", "sendAt": send_at, "metadata": {"a": "b"}})

    assert status == 200, body
    assert body["success"] is True
    assert body["message"]["body"] == "edited"
    assert body["message"]["status"] == "scheduled"
    assert body["message"]["metadata"] == {"a": "b"}
    assert body["message"]["sendAt"] == (clock.now + 2 * HOUR).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z"
    )


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({}, "body"),
        ({"to": "+15550100001"}, "to"),
        ({"channel": "email"}, "channel"),
        ({"body": "x", "idempotencyKey": "k"}, "idempotencyKey"),
        ({"body": ""}, "body"),
        ({"body": "x" * 10_001}, "body"),
        ({"body": None}, "body"),
        ({"metadata": None}, "metadata"),
        ({"sendAt": "tomorrow"}, "sendAt"),
        ({"sendAt": "2999-01-01T00:00:00Z"}, "sendAt"),
        ({"sendAt": "0001-01-01T00:00:00+01:00"}, "sendAt"),
        ({"metadata": {"k": 1}}, "metadata.k"),
        ({"metadata": {f"k{i}": "v" for i in range(21)}}, "metadata"),
        ({"subject": "Hi"}, "subject"),  # an sms takes no subject
        ({"body": 5}, "body"),
    ],
)
def test_api_given_an_invalid_edit_then_400_validation_error_and_nothing_changes(
    api_store: tuple[InMemoryStore, ManualClock], payload: dict[str, Any], field: str
) -> None:
    store, clock = api_store
    message = _scheduled(store, clock)

    status, body = _patch(message.id, payload)

    assert status == 400, body
    assert body["error"]["code"] == "validation_error"
    assert field in {detail["field"] for detail in body["error"]["details"]}, body
    assert store.messages[message.id] == message


@pytest.mark.parametrize("raw", ["[]", '"body"', "null", "{"])
def test_api_given_a_body_that_is_not_an_object_then_400(
    api_store: tuple[InMemoryStore, ManualClock], raw: str
) -> None:
    store, clock = api_store
    message = _scheduled(store, clock)

    status, body = _patch(message.id, None, raw=raw)

    assert status == 400, body
    assert body["error"]["code"] == "validation_error"


def test_api_given_an_unknown_id_then_404(api_store: tuple[InMemoryStore, ManualClock]) -> None:
    status, body = _patch("msg_01KDVDNA00QV9D1V5ZMBF8DBMW", {"body": "x"})

    assert (status, body["error"]["code"]) == (404, "not_found")


def test_api_given_a_message_no_longer_scheduled_then_409_message_not_editable(
    api_store: tuple[InMemoryStore, ManualClock],
) -> None:
    store, clock = api_store
    message = _scheduled(store, clock)
    store.messages[message.id] = message.with_status(Status.QUEUED, clock.now)

    status, body = _patch(message.id, {"body": "x"})

    assert (status, body["error"]["code"]) == (409, "message_not_editable")


def test_api_given_content_another_message_holds_then_409_duplicate_content_naming_it(
    api_store: tuple[InMemoryStore, ManualClock],
) -> None:
    store, clock = api_store
    service = _service(store, FakeQueue(), clock)
    holder = _send(service, clock, body="taken")
    message = _send(service, clock, body="mine")

    status, body = _patch(message.id, {"body": "taken"})

    assert status == 409, body
    assert body["error"]["code"] == "duplicate_content"
    assert body["error"]["details"] == {"messageId": holder.id}
    assert store.messages[message.id] == message
