"""Settling an `unknown` message (`sendonce resolve`): only an `unknown` one, as sent or failed;
`failed` releases its lock, `sent` keeps it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from msgspec.structs import replace
from sendonce.dedup.identity import dedup_identity
from sendonce.dispatch.resolution import Resolution, resolve_unknown
from sendonce.messages.ids import new_message_id
from sendonce.messages.model import Channel, Message, MessageFailure, Status
from sendonce.messages.ports import Created, DedupClaim
from sendonce_cli.main import build_parser
from sendonce_cli.resolve import describe, resolve

from tests.unit.unit_fakes import InMemoryStore, ManualClock


def _queued(store: InMemoryStore, clock: ManualClock) -> Message:
    message = Message(
        id=new_message_id(),
        workspace_id="ws_a",
        channel=Channel("email"),
        to="ann@example.com",
        subject="Hi",
        body="hello",
        status=Status.QUEUED,
        created_at=clock.now,
        updated_at=clock.now,
    )
    claim = DedupClaim(dedup_identity("ws_a", message.to, "Hi", "hello"), clock.now + timedelta(minutes=15))
    created = store.create(message, claim, None, clock.now, clock.now)
    assert isinstance(created, Created)
    return created.message


def _unknown(store: InMemoryStore, clock: ManualClock) -> str:
    message = _queued(store, clock)
    store.messages[message.id] = replace(
        message.with_status(Status.UNKNOWN, clock.now),
        attempts=1,
        error=MessageFailure("provider_error", "ses answered 503 ServiceUnavailable"),
    )
    return message.id


def test_given_an_unknown_message_settled_as_failed_then_failed_with_its_cause_and_the_lock_released(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message_id = _unknown(store, clock)
    clock.advance(60)

    resolved = resolve_unknown(store, message_id, Status.FAILED, clock)

    assert resolved.resolution is Resolution.SETTLED
    settled = store.messages[message_id]
    assert settled.status is Status.FAILED
    assert settled.updated_at == clock.now
    assert settled.error == MessageFailure("provider_error", "ses answered 503 ServiceUnavailable")
    assert store.released == [message_id]
    assert not store.locks


def test_given_an_unknown_message_settled_as_sent_then_sent_and_the_lock_kept(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message_id = _unknown(store, clock)

    resolved = resolve_unknown(store, message_id, Status.SENT, clock)

    assert resolved.resolution is Resolution.SETTLED
    assert resolved.message is not None
    assert resolved.message.status is Status.SENT
    assert resolved.message.error is None
    assert store.released == []
    assert store.locks


@pytest.mark.parametrize(
    "status", [Status.QUEUED, Status.SENDING, Status.SENT, Status.FAILED, Status.DELIVERED]
)
def test_given_a_message_that_is_not_unknown_then_refused_and_nothing_changes(
    store: InMemoryStore, clock: ManualClock, status: Status
) -> None:
    message = _queued(store, clock)
    store.messages[message.id] = before = message.with_status(status, clock.now)

    resolved = resolve_unknown(store, message.id, Status.FAILED, clock)

    assert resolved.resolution is Resolution.NOT_UNKNOWN
    assert resolved.message == before
    assert store.messages[message.id] == before
    assert store.released == []
    assert f"is {status.value}, not unknown" in describe(resolved, message.id, "failed")


def test_given_no_such_message_then_not_found(store: InMemoryStore, clock: ManualClock) -> None:
    message_id = new_message_id()

    resolved = resolve_unknown(store, message_id, Status.SENT, clock)

    assert resolved.resolution is Resolution.NOT_FOUND
    assert "no message" in describe(resolved, message_id, "sent")


def test_given_an_outcome_other_than_sent_or_failed_then_refused(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message_id = _unknown(store, clock)

    with pytest.raises(ValueError, match="sent or failed"):
        resolve_unknown(store, message_id, Status.DELIVERED, clock)
    with pytest.raises(ValueError, match="not a message id"):
        resolve(object(), "MessagesTable", "msg_nope", "sent")
    assert store.messages[message_id].status is Status.UNKNOWN


def test_the_command_line() -> None:
    args = build_parser().parse_args(["resolve", "msg_01JDZ0000000000000000000000", "--as", "failed"])

    assert (args.message_id, args.outcome, args.table, args.endpoint_url, args.aws) == (
        "msg_01JDZ0000000000000000000000",
        "failed",
        "MessagesTable",
        None,
        False,
    )
    deployed = build_parser().parse_args(
        ["resolve", "msg_01JDZ0000000000000000000000", "--as", "sent", "--aws", "--table", "prod-Messages"]
    )
    assert (deployed.aws, deployed.table) == (True, "prod-Messages")
    for wrong in (["resolve", "msg_x", "--as", "delivered"], ["resolve", "msg_x"]):
        with pytest.raises(SystemExit):
            build_parser().parse_args(wrong)
