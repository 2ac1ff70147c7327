"""The edit transaction of the sending store, on every engine (its items and an injected conflict on
moto and DynamoDB Local).

One transaction moves the message, its dedup lock and its key tie together or not at all: a new
content another message holds refuses the edit with nothing written, a claim, a cancel or another
edit that came first refuses it, and a lock or tie that is no longer the message's is left alone. A
message handed to its queue stays editable until its claim; an edit and a claim racing on one
item are written one after the other, and the claim returns the content as it then stood.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest
from msgspec.structs import replace
from sendonce.adapters.dynamodb_items import lock_key, message_key, tie_key
from sendonce.clock import rfc3339
from sendonce.dedup.identity import dedup_identity
from sendonce.dispatch.ports import ClaimedMessage, ClaimRefused, OutboxEntry
from sendonce.errors import MessageNotFound
from sendonce.idempotency.keys import tie_identity
from sendonce.messages.edits import MessageChanges, plan_edit
from sendonce.messages.handoff import HANDOFF_GRACE, handoff_due_at
from sendonce.messages.model import Message, Status
from sendonce.messages.ports import ContentHeld, Edited, EditOutcome, EditRaced, MessageEdit, NotEditable

from tests.store.conftest import (
    DEDUP_WINDOW,
    NOW,
    DynamoDbEngine,
    Engine,
    Stores,
    conflicts,
    created,
    only,
    outbox_due,
    race,
)
from tests.unit.unit_fakes import TEST_KEYED_HASH

HOUR = timedelta(hours=1)
LATER = NOW + timedelta(minutes=1)
FOREVER = NOW + timedelta(days=365)  # every entry of the outbox is due by then


def _scheduled(stores: Stores, body: str = "hello", **changes: Any) -> Message:
    send_at = NOW + HOUR
    return created(
        stores,
        body=body,
        status=Status.SCHEDULED,
        send_at=send_at,
        handoff_due_at=handoff_due_at(NOW, send_at),
        **changes,
    )


def _plan(message: Message, now: datetime = LATER, **changes: Any) -> MessageEdit:
    return plan_edit(
        message, MessageChanges(**changes), now, dedup_window=DEDUP_WINDOW, keyed=TEST_KEYED_HASH
    )


def _edit(stores: Stores, message: Message, now: datetime = LATER, **changes: Any) -> EditOutcome:
    return stores.sending.edit(_plan(message, now, **changes), now)


def _lock_holder(engine: Engine, workspace: str, to: str, body: str) -> str | None:
    return engine.lock_holder(TEST_KEYED_HASH(dedup_identity(workspace, to, None, body)))


def test_given_a_body_edit_then_the_message_and_its_lock_move_together(
    engine: Engine, stores: Stores
) -> None:
    message = _scheduled(stores)

    outcome = _edit(stores, message, body="goodbye", metadata={"k": "v"})

    assert isinstance(outcome, Edited), outcome
    stored = stores.sending.get("ws_a", message.id)
    assert stored == outcome.message
    assert stored is not None
    assert (stored.body, stored.metadata, stored.updated_at) == ("goodbye", {"k": "v"}, LATER)
    assert _lock_holder(engine, "ws_a", message.to, "hello") is None
    assert _lock_holder(engine, "ws_a", message.to, "goodbye") == message.id
    assert stored.dedup_lock_id == TEST_KEYED_HASH(dedup_identity("ws_a", message.to, None, "goodbye"))


def test_given_a_send_at_edit_then_the_lock_stays_and_the_outbox_due_time_moves(
    dynamodb_engine: DynamoDbEngine, stores: Stores
) -> None:
    message = _scheduled(stores)
    lock_before = dynamodb_engine.item(lock_key(message.dedup_lock_id or ""))
    send_at = NOW + 5 * HOUR

    assert isinstance(_edit(stores, message, send_at=send_at), Edited)

    item = dynamodb_engine.item(message_key(message.id))
    assert item is not None
    assert item["outboxDueAt"]["S"] == "2036-11-30T16:45:00.000Z"  # 15 minutes before the new sendAt
    assert item["sendAt"]["S"] == "2036-11-30T17:00:00.000Z"
    assert dynamodb_engine.item(lock_key(message.dedup_lock_id or "")) == lock_before


def test_given_the_new_content_held_by_another_message_then_content_held_and_nothing_written(
    engine: Engine, stores: Stores
) -> None:
    holder = _scheduled(stores, body="taken")
    message = _scheduled(stores, body="mine", key="k1")
    before = engine.snapshot()

    outcome = _edit(stores, message, body="taken")

    assert outcome == ContentHeld(holder.id)
    assert engine.snapshot() == before


def test_given_an_expired_lock_on_the_new_content_then_the_edit_takes_it(
    engine: Engine, stores: Stores
) -> None:
    _scheduled(stores, body="taken")
    message = _scheduled(stores, body="mine")
    later = NOW + DEDUP_WINDOW + timedelta(seconds=1)

    assert isinstance(_edit(stores, message, now=later, body="taken"), Edited)
    assert _lock_holder(engine, "ws_a", message.to, "taken") == message.id


def test_given_the_old_lock_taken_by_a_newer_message_then_the_edit_leaves_it(
    engine: Engine, stores: Stores
) -> None:
    message = _scheduled(stores, body="hello")
    later = NOW + DEDUP_WINDOW + timedelta(seconds=1)
    newer = created(stores, now=later, body="hello")

    assert isinstance(_edit(stores, message, now=later, body="changed"), Edited)
    assert _lock_holder(engine, "ws_a", message.to, "hello") == newer.id
    assert _lock_holder(engine, "ws_a", message.to, "changed") == message.id


def test_given_a_key_tie_then_it_takes_the_edited_payload_s_fingerprint(
    dynamodb_engine: DynamoDbEngine, stores: Stores
) -> None:
    message = _scheduled(stores, key="k1", fingerprint="original")
    plan = _plan(message, body="edited")
    assert plan.tie is not None

    assert isinstance(stores.sending.edit(plan, LATER), Edited)

    tie = dynamodb_engine.item(tie_key(TEST_KEYED_HASH(tie_identity("ws_a", "k1", message.to))))
    assert tie is not None
    assert tie["payloadFingerprint"]["S"] == plan.tie.payload_fingerprint != "original"
    assert tie["messageId"]["S"] == message.id


def test_given_a_key_but_no_tie_then_the_edit_is_written_without_one(
    dynamodb_engine: DynamoDbEngine, stores: Stores
) -> None:
    message = _scheduled(stores, key="k1")
    dynamodb_engine.client.delete_item(
        TableName="MessagesTable", Key=tie_key(TEST_KEYED_HASH(tie_identity("ws_a", "k1", message.to)))
    )

    assert isinstance(_edit(stores, message, body="edited"), Edited)
    assert dynamodb_engine.item(tie_key(TEST_KEYED_HASH(tie_identity("ws_a", "k1", message.to)))) is None


def _handed_over(stores: Stores, message: Message) -> Message:
    """The message as the outbox leaves it once it handed it over: due again after sendAt's grace."""
    assert message.send_at is not None
    entry = OutboxEntry(
        id=message.id,
        workspace_id="ws_a",
        channel=message.channel,
        status=Status.SCHEDULED,
        due_at=handoff_due_at(NOW, message.send_at),
        send_at=message.send_at,
    )
    assert stores.outbox.move_outbox_entry(
        entry, LATER, status=Status.SCHEDULED, due_at=message.send_at + HANDOFF_GRACE
    )
    current = stores.sending.get("ws_a", message.id)
    assert current is not None
    return current


def _due(stores: Stores, message: Message) -> str:
    """When the outbox has the message due, as the adapter writes it."""
    [due] = [entry.due_at for entry in outbox_due(stores, FOREVER, 1_000) if entry.id == message.id]
    return rfc3339(due)


def test_given_the_outbox_handed_it_over_then_a_content_edit_applies_and_the_due_time_stays(
    engine: Engine, stores: Stores
) -> None:
    current = _handed_over(stores, _scheduled(stores))
    due = _due(stores, current)
    later = LATER + timedelta(seconds=1)

    outcome = _edit(stores, current, now=later, body="in time", metadata={"k": "v"})

    assert isinstance(outcome, Edited), outcome
    assert stores.sending.get("ws_a", current.id) == outcome.message
    assert (outcome.message.body, outcome.message.status) == ("in time", Status.SCHEDULED)
    assert _due(stores, current) == due  # the record queued by the outbox still covers it
    assert _lock_holder(engine, "ws_a", current.to, "in time") == current.id
    assert _lock_holder(engine, "ws_a", current.to, "hello") is None


def test_given_a_handed_over_message_whose_send_at_moves_then_its_due_time_follows(
    engine: Engine, stores: Stores
) -> None:
    current = _handed_over(stores, _scheduled(stores))
    later = LATER + timedelta(seconds=1)
    earlier_send = later + timedelta(minutes=5)

    outcome = _edit(stores, current, now=later, send_at=earlier_send)

    assert isinstance(outcome, Edited), outcome
    assert _due(stores, current) == rfc3339(earlier_send + HANDOFF_GRACE)


def test_given_an_edit_s_hand_off_refused_then_owed_at_once_while_as_the_edit_wrote_it(
    engine: Engine, stores: Stores
) -> None:
    message = _scheduled(stores)
    plan = _plan(message, send_at=LATER + timedelta(minutes=5))
    assert isinstance(stores.sending.edit(plan, LATER), Edited)
    owed_at = LATER + timedelta(seconds=1)

    assert stores.sending.owe_handoff(plan, owed_at) is True

    assert [entry.id for entry in outbox_due(stores, owed_at, 10)] == [message.id]
    assert _due(stores, message) == rfc3339(owed_at)


def test_given_a_newer_send_at_edit_or_a_claim_then_a_refused_hand_off_is_not_owed_again(
    engine: Engine, stores: Stores
) -> None:
    message = _scheduled(stores)
    plan = _plan(message, send_at=LATER + timedelta(minutes=5))
    assert isinstance(stores.sending.edit(plan, LATER), Edited)
    newer = _plan(plan.edited, now=LATER, send_at=LATER + timedelta(minutes=7))
    assert isinstance(stores.sending.edit(newer, LATER), Edited)

    assert stores.sending.owe_handoff(plan, LATER) is False  # the newer edit owes its own
    assert _due(stores, message) == rfc3339(LATER + timedelta(minutes=9))

    assert stores.delivery.claim("ws_a", message.id, LATER + timedelta(minutes=7), 60)
    assert stores.sending.owe_handoff(newer, LATER) is False  # claimed: nothing is owed any more


def test_given_a_canceled_message_then_not_editable(engine: Engine, stores: Stores) -> None:
    message = _scheduled(stores)
    stores.sending.cancel("ws_a", message.id, LATER)

    assert _edit(stores, message, body="too late") == NotEditable(Status.CANCELED)


def test_given_another_workspace_then_not_found(stores: Stores) -> None:
    message = _scheduled(stores)

    with pytest.raises(MessageNotFound):
        _edit(stores, replace(message, workspace_id="ws_b"), body="mine")


def test_given_another_edit_came_first_then_edit_raced(engine: Engine, stores: Stores) -> None:
    message = _scheduled(stores)
    assert isinstance(_edit(stores, message, metadata={"first": "edit"}), Edited)

    assert _edit(stores, message, body="stale") == EditRaced()  # planned on the message before it
    assert _lock_holder(engine, "ws_a", message.to, "hello") == message.id


def test_given_a_conflict_then_the_edit_is_tried_again(
    dynamodb_engine: DynamoDbEngine, stores: Stores
) -> None:
    message = _scheduled(stores)
    calls = conflicts(dynamodb_engine.client, times=2)

    assert isinstance(_edit(stores, message, body="after conflicts"), Edited)
    assert len(calls) == 3


def test_given_edits_at_once_then_one_wins_whole_and_the_others_raced(engine: Engine, stores: Stores) -> None:
    message = _scheduled(stores)

    answers = race(8, lambda i: _edit(stores, message, body=f"edit {i}", metadata={"by": str(i)}))

    winners = only(answers, Edited)
    assert len(winners) == 1, answers
    assert len(only(answers, EditRaced)) == 7, answers
    stored = stores.sending.get("ws_a", message.id)
    assert stored == winners[0].message
    assert stored is not None
    assert engine.locks() == [(stored.dedup_lock_id, message.id)]
    assert stored.body == f"edit {stored.metadata['by']}"


# ---------------------------------------------------------------------------- the edit and the claim
EDITORS, CLAIMERS, EDITS_EACH = 4, 4, 6


@dataclass
class _Written:
    """How many edits were written so far: the claims start once `needed` were."""

    needed: int
    count: int = 0
    enough: threading.Condition = field(default_factory=threading.Condition)

    def one_more(self) -> None:
        with self.enough:
            self.count += 1
            self.enough.notify_all()

    def wait(self) -> None:
        with self.enough:
            self.enough.wait_for(lambda: self.count >= self.needed, timeout=10)


def _editor(
    stores: Stores, message_id: str, index: int, at: datetime, written: _Written
) -> list[EditOutcome]:
    """Edits the message again and again, each on the message as read, until it is no longer editable."""
    outcomes: list[EditOutcome] = []
    for round_ in range(EDITS_EACH):
        current = stores.sending.get("ws_a", message_id)
        assert current is not None
        if current.status is not Status.SCHEDULED:
            outcomes.append(NotEditable(current.status))
            break
        by = f"{index}.{round_}"
        outcome = stores.sending.edit(_plan(current, now=at, body=f"edit {by}", metadata={"by": by}), at)
        outcomes.append(outcome)
        if isinstance(outcome, Edited):
            written.one_more()
        if isinstance(outcome, NotEditable):
            break
    return outcomes


def _claimer(
    stores: Stores, message_id: str, index: int, at: datetime, written: _Written
) -> ClaimedMessage | ClaimRefused:
    written.wait()  # the claims land among the edits, not all before them
    time.sleep(0.003 * index)
    return stores.delivery.claim("ws_a", message_id, at, 60)


@pytest.mark.parametrize("edits_first", [1, 3, 6])
def test_given_edits_and_claims_at_once_then_one_claim_wins_with_the_last_edit_before_it_whole(
    engine: Engine, stores: Stores, edits_first: int
) -> None:
    send_at = NOW + timedelta(seconds=30)
    message = created(
        stores,
        body="original",
        status=Status.SCHEDULED,
        send_at=send_at,
        handoff_due_at=handoff_due_at(NOW, send_at),
    )
    at = send_at + timedelta(milliseconds=1)  # due: the claims may win

    written = _Written(needed=edits_first)

    answers = race(
        EDITORS + CLAIMERS,
        lambda i: (
            _editor(stores, message.id, i, at, written)
            if i < EDITORS
            else _claimer(stores, message.id, i - EDITORS, at, written)
        ),
    )

    errors = [answer for answer in answers if isinstance(answer, BaseException)]
    assert errors == [], errors
    claims = answers[EDITORS:]
    winners = only(claims, ClaimedMessage)
    assert len(winners) == 1, claims
    assert len(only(claims, ClaimRefused)) == CLAIMERS - 1
    edits = [outcome for outcomes in answers[:EDITORS] for outcome in outcomes]  # type: ignore[union-attr]
    assert all(isinstance(o, Edited | EditRaced) or o == NotEditable(Status.SENDING) for o in edits), edits
    claimed = winners[0]
    print(
        "DIAG",
        engine.name,
        len(only(edits, Edited)),
        len(only(edits, EditRaced)),
        len(only(edits, NotEditable)),
    )
    # Never a mix: the body and metadata of one edit (or the original's, untouched).
    if claimed.metadata:
        assert claimed.body == f"edit {claimed.metadata['by']}"
    else:
        assert claimed.body == "original"
    # The last edit written before the claim, and none after it.
    chain = sorted(only(edits, Edited), key=lambda edited: edited.message.updated_at)
    assert len(chain) >= edits_first  # the claims waited for the first edits
    assert claimed.body == chain[-1].message.body
    stored = stores.sending.get("ws_a", message.id)
    assert stored is not None
    assert (stored.status, stored.body, stored.metadata) == (Status.SENDING, claimed.body, claimed.metadata)
    assert engine.locks() == [
        (TEST_KEYED_HASH(dedup_identity("ws_a", message.to, None, claimed.body)), message.id)
    ]
