"""The edit transaction of the sending store, on moto and on DynamoDB Local.

One transaction moves the message, its dedup lock and its key tie together or not at all: a new
content another message holds refuses the edit with nothing written, a hand-off, a cancel or another
edit that came first refuses it, and a lock or tie that is no longer the message's is left alone.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest
from sendonce.adapters.dynamodb_items import lock_key, message_key, tie_key
from sendonce.dedup.identity import dedup_identity
from sendonce.delivery.ports import OutboxEntry
from sendonce.errors import MessageNotFound
from sendonce.idempotency.keys import tie_identity
from sendonce.messages.edits import MessageChanges, plan_edit
from sendonce.messages.model import Message, Status
from sendonce.messages.ports import ContentHeld, Edited, EditOutcome, EditRaced, MessageEdit, NotEditable
from sendonce.messages.service import handoff_due_at

from tests.store.conftest import DEDUP_WINDOW, NOW, Engine, Stores, conflicts, created, only, race

HOUR = timedelta(hours=1)
LATER = NOW + timedelta(minutes=1)


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
    send_at = changes.get("send_at") or message.send_at
    return plan_edit(
        message,
        MessageChanges(**changes),
        now,
        dedup_window=DEDUP_WINDOW,
        handoff_due_at=handoff_due_at(now, send_at),
    )


def _edit(stores: Stores, message: Message, now: datetime = LATER, **changes: Any) -> EditOutcome:
    return stores.sending.edit(_plan(message, now, **changes), now)


def _lock_holder(engine: Engine, workspace: str, to: str, body: str) -> str | None:
    item = engine.item(lock_key(dedup_identity(workspace, to, None, body)))
    return item["messageId"]["S"] if item else None


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
    assert stored.dedup_lock_id == dedup_identity("ws_a", message.to, None, "goodbye")


def test_given_a_send_at_edit_then_the_lock_stays_and_the_outbox_due_time_moves(
    engine: Engine, stores: Stores
) -> None:
    message = _scheduled(stores)
    lock_before = engine.item(lock_key(message.dedup_lock_id or ""))
    send_at = NOW + 5 * HOUR

    assert isinstance(_edit(stores, message, send_at=send_at), Edited)

    item = engine.item(message_key(message.id))
    assert item is not None
    assert item["outboxDueAt"]["S"] == "2026-11-30T16:45:00.000Z"  # 15 minutes before the new sendAt
    assert item["sendAt"]["S"] == "2026-11-30T17:00:00.000Z"
    assert engine.item(lock_key(message.dedup_lock_id or "")) == lock_before


def test_given_the_new_content_held_by_another_message_then_content_held_and_nothing_written(
    engine: Engine, stores: Stores
) -> None:
    holder = _scheduled(stores, body="taken")
    message = _scheduled(stores, body="mine", key="k1")
    before = sorted(map(str, engine.items()))

    outcome = _edit(stores, message, body="taken")

    assert outcome == ContentHeld(holder.id)
    assert sorted(map(str, engine.items())) == before


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
    engine: Engine, stores: Stores
) -> None:
    message = _scheduled(stores, key="k1", fingerprint="original")
    plan = _plan(message, body="edited")
    assert plan.tie is not None

    assert isinstance(stores.sending.edit(plan, LATER), Edited)

    tie = engine.item(tie_key(tie_identity("ws_a", "k1", message.to)))
    assert tie is not None
    assert tie["payloadFingerprint"]["S"] == plan.tie.payload_fingerprint != "original"
    assert tie["messageId"]["S"] == message.id


def test_given_a_key_but_no_tie_then_the_edit_is_written_without_one(engine: Engine, stores: Stores) -> None:
    message = _scheduled(stores, key="k1")
    engine.client.delete_item(TableName="MessagesTable", Key=tie_key(tie_identity("ws_a", "k1", message.to)))

    assert isinstance(_edit(stores, message, body="edited"), Edited)
    assert engine.item(tie_key(tie_identity("ws_a", "k1", message.to))) is None


def test_given_the_outbox_handed_it_over_then_not_editable(engine: Engine, stores: Stores) -> None:
    message = _scheduled(stores)
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
        entry, LATER, status=Status.SCHEDULED, due_at=message.send_at + timedelta(minutes=2)
    )
    current = stores.sending.get("ws_a", message.id)
    assert current is not None

    assert _edit(stores, current, body="too late") == NotEditable(Status.SCHEDULED)
    assert _lock_holder(engine, "ws_a", message.to, "hello") == message.id


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


def test_given_a_conflict_then_the_edit_is_tried_again(engine: Engine, stores: Stores) -> None:
    message = _scheduled(stores)
    calls = conflicts(engine.client, times=2)

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
    locks = [item for item in engine.items() if item["sk"]["S"] == "LOCK"]
    assert [(lock["pk"]["S"], lock["messageId"]["S"]) for lock in locks] == [
        (f"DEDUP#{stored.dedup_lock_id}", message.id)
    ]
    assert stored.body == f"edit {stored.metadata['by']}"
