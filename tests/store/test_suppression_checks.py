"""The suppression checks inside the writes, on every engine (their calls on moto and DynamoDB Local).

A new send's create and a dispatcher's claim each carry the recipient's suppression checks in their
own transaction: a suppressed recipient is refused by the write itself (nothing written, nothing
claimed), before a duplicate or a key's tie is answered. So a suppression committed before a write
starts is always seen by it: a race test adds one while sends and claims run, and every write that
started after the suppression was in place is refused. The claim sends the message as its queue
record copied it while the message is still as copied, and as it is now otherwise.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta
from typing import Any

from msgspec.structs import replace
from sendonce.adapters.sqs_queue import copy_of, queue_body
from sendonce.dispatch.ports import ClaimedMessage, ClaimRefused, ClaimSuppressed
from sendonce.messages.model import Message, Status
from sendonce.messages.ports import Created, MessageEdit, Suppressed
from sendonce.provider_events.ports import EventOutcome
from sendonce.suppressions.model import Reason, Suppression

from tests.store.conftest import (
    NOW,
    DynamoDbEngine,
    Engine,
    Stores,
    create,
    created,
    draft,
    dynamodb_calls,
    opt_out,
    race,
)

PHONE = "+15550100000"
CLAIM_SECONDS = 60


def _suppress(stores: Stores, workspace: str = "ws_a", reason: Reason = Reason.MANUAL) -> None:
    stores.suppressions.add(workspace, Suppression(to=PHONE, reason=reason, created_at=NOW))


def _stop(stores: Stores, event_id: str, at: Any = NOW) -> None:
    """A STOP to the shared number: an opt-out naming no message, in force for every live workspace."""
    assert stores.events.apply_provider_event(opt_out(event_id, PHONE), at)[0] is EventOutcome.APPLIED


def _copy(message: Message) -> Message:
    """The message as its queue record carries it."""
    copied = copy_of(json.loads(queue_body(message)))
    assert copied is not None
    return copied


def _claim(stores: Stores, message: Message, **kwargs: Any) -> object:
    return stores.delivery.claim("ws_a", message.id, NOW, CLAIM_SECONDS, **kwargs)


# ---------------------------------------------------------------------------- the create
def test_given_a_suppressed_recipient_then_a_duplicate_and_a_keyed_retry_are_refused_not_answered(
    engine: Engine, stores: Stores
) -> None:
    """Refused before the held lock or the key's tie is answered: nothing is sent to them again."""
    first = draft(key="key-1")
    assert isinstance(create(stores, first), Created)
    _suppress(stores, reason=Reason.COMPLAINED)
    before = engine.message_ids()

    duplicate = draft()  # the same content: the lock is held by the first
    retry = replace(first, message=replace(first.message, id=draft().message.id))  # the key's tie

    assert create(stores, duplicate) == Suppressed("complained")
    assert create(stores, retry) == Suppressed("complained")
    assert engine.message_ids() == before


def test_given_a_shared_opt_out_this_workspace_removed_then_its_sends_are_written_and_others_refused(
    engine: Engine, stores: Stores
) -> None:
    _stop(stores, "stop-1")
    assert stores.suppressions.remove("ws_a", PHONE, NOW + timedelta(seconds=1))

    assert isinstance(create(stores, draft(workspace="ws_a")), Created)
    assert create(stores, draft(workspace="ws_b")) == Suppressed("opted_out")
    assert isinstance(create(stores, draft(workspace="ws_b:test")), Created)  # a twin never shares it

    _stop(stores, "stop-2", NOW + timedelta(seconds=2))  # a new STOP: in force again for ws_a
    assert create(stores, draft(workspace="ws_a", body="again")) == Suppressed("opted_out")


# ---------------------------------------------------------------------------- the claim
def test_given_a_recipient_suppressed_after_acceptance_then_the_claim_is_refused_in_its_own_write(
    engine: Engine, stores: Stores
) -> None:
    message = created(stores)
    _suppress(stores)

    refused = _claim(stores, message, seen=_copy(message))

    assert refused == ClaimSuppressed("manual")
    assert stores.sending.get("ws_a", message.id) == message  # nothing claimed, no attempt counted
    ended = _claim(stores, message, unless_suppressed=False)  # claimed regardless, to end it
    assert isinstance(ended, ClaimedMessage)
    assert ended.attempts == 1


def test_given_a_shared_opt_out_then_claims_are_refused_except_where_the_workspace_removed_it(
    engine: Engine, stores: Stores
) -> None:
    in_a = created(stores, workspace="ws_a")
    in_b = created(stores, workspace="ws_b")
    _stop(stores, "stop-claims")
    assert stores.suppressions.remove("ws_a", PHONE, NOW + timedelta(seconds=1))

    claimed = _claim(stores, in_a, seen=_copy(in_a))
    refused = stores.delivery.claim("ws_b", in_b.id, NOW, CLAIM_SECONDS, seen=_copy(in_b))

    assert isinstance(claimed, ClaimedMessage)
    assert refused == ClaimSuppressed("opted_out")


def test_given_the_records_copy_then_the_claim_is_the_message_as_its_update_leaves_it(
    engine: Engine, stores: Stores
) -> None:
    message = created(stores)

    claimed = _claim(stores, message, seen=_copy(message))

    assert isinstance(claimed, ClaimedMessage)
    assert (claimed.status, claimed.attempts, claimed.first_attempt_at) == (Status.SENDING, 1, NOW)
    assert claimed.body == message.body
    assert stores.sending.get("ws_a", message.id) == replace(
        message, status=Status.SENDING, attempts=1, updated_at=NOW
    )
    # A second copy of the record finds the claim: refused, whatever it carries.
    again = _claim(stores, message, seen=_copy(message))
    assert isinstance(again, ClaimRefused)
    assert again.current is not None
    assert again.current.status is Status.SENDING


def test_given_a_copy_older_than_an_edit_then_the_claim_sends_the_edited_message(
    engine: Engine, stores: Stores
) -> None:
    send_at = NOW + timedelta(minutes=5)
    message = created(stores, status=Status.SCHEDULED, send_at=send_at)
    copied = _copy(message)
    edited = replace(message, body="edited", updated_at=NOW + timedelta(seconds=1))
    stores.sending.edit(MessageEdit(message, edited, None, None, None), NOW + timedelta(seconds=1))

    claimed = stores.delivery.claim("ws_a", message.id, send_at, CLAIM_SECONDS, seen=copied)

    assert isinstance(claimed, ClaimedMessage)
    assert claimed.body == "edited"


def test_given_a_copy_of_another_workspace_or_no_message_then_refused_with_nothing(
    engine: Engine, stores: Stores
) -> None:
    message = created(stores)
    stranger = replace(message, workspace_id="ws_b")

    answer = stores.delivery.claim("ws_b", message.id, NOW, CLAIM_SECONDS, seen=_copy(stranger))

    assert answer == ClaimRefused(current=None)
    assert stores.sending.get("ws_a", message.id) == message


# ---------------------------------------------------------------------------- the race
WRITES_AFTER = 2  # each writer's writes once the suppression is in place


def test_given_a_suppression_added_while_sends_and_claims_run_then_every_later_write_is_refused(
    engine: Engine, stores: Stores
) -> None:
    """Writers send and claim, one write after another, while one suppression is added among them:
    it is added once each writer has written, and each keeps writing until it has written twice
    after it. Every write is written or refused by its own check, and every one that started once
    the suppression was in place is refused: none slips between a check and its write, as one would
    past a read made before the write."""
    claims_each = 12
    pools = {i: [created(stores, body=f"accepted {i}.{n}") for n in range(claims_each)] for i in (2, 4, 6)}
    first_writes = threading.Barrier(len(pools) + 3 + 1)  # every writer, and the suppression
    added = threading.Event()
    added_at: list[float] = []

    def write(i: int, n: int) -> object:
        if n < len(pools.get(i, [])):
            message = pools[i][n]
            return _claim(stores, message, seen=_copy(message))
        return create(stores, draft(body=f"new {i}.{n}"))  # a claimer past its pool sends

    def contender(i: int) -> object:
        if i == 0:
            first_writes.wait(30)
            _suppress(stores)
            added_at.append(time.monotonic())
            added.set()
            return "added"
        writes: list[tuple[float, object]] = []
        after, n, deadline = 0, -1, time.monotonic() + 30
        while time.monotonic() < deadline:
            n += 1
            began = time.monotonic()
            writes.append((began, write(i, n)))
            if n == 0:
                first_writes.wait(30)
            if added.is_set():
                after += 1
                if after == WRITES_AFTER:
                    break
        return writes

    answers = race(len(pools) + 3 + 1, contender)

    assert answers[0] == "added", answers
    writes = [write for answer in answers[1:] for write in answer]  # type: ignore[union-attr]
    for began, outcome in writes:
        assert isinstance(outcome, ClaimedMessage | ClaimSuppressed | Created | Suppressed), writes
        if began > added_at[0]:
            assert isinstance(outcome, ClaimSuppressed | Suppressed), (began - added_at[0], outcome)
    written = [outcome for _, outcome in writes if isinstance(outcome, ClaimedMessage | Created)]
    refused = [outcome for _, outcome in writes if isinstance(outcome, ClaimSuppressed | Suppressed)]
    assert len(written) >= 6, writes  # each writer's first, made before the suppression began
    assert len(refused) >= 6, writes  # each writer's last, made once it was in place
    assert create(stores, draft(body="late")) == Suppressed("manual")


# ---------------------------------------------------------------------------- calls
def test_a_new_send_and_a_claim_from_its_record_are_one_call_each_checks_included(
    dynamodb_engine: DynamoDbEngine, stores: Stores
) -> None:
    made = draft()
    with dynamodb_calls(dynamodb_engine) as sending:
        assert isinstance(create(stores, made), Created)
    with dynamodb_calls(dynamodb_engine) as claiming:
        assert isinstance(_claim(stores, made.message, seen=_copy(made.message)), ClaimedMessage)
    other = created(stores, body="from the outbox")
    with dynamodb_calls(dynamodb_engine) as from_the_outbox:  # an outbox record carries no copy
        assert isinstance(_claim(stores, other), ClaimedMessage)

    assert sending == ["TransactWriteItems"]
    assert claiming == ["TransactWriteItems"]
    assert from_the_outbox == ["GetItem", "TransactWriteItems"]
