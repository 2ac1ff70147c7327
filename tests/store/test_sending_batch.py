"""The bulk create of the sending store, on every engine (its transactions on moto and DynamoDB Local).

Messages and their locks go in as few transactions as fit (50 messages a transaction); a lock held
by another message, read from the cancellation reasons, makes its entry a counted duplicate and the
rest are written again; an expired lock never blocks; a conflict is tried again. The transactions
go side by side, and one that keeps failing leaves its own entries NotWritten and no other.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sendonce.adapters.dynamodb_items import lock_key, message_key
from sendonce.messages.ports import Created, DuplicateOf, NewMessage, NotWritten

from tests.store.conftest import (
    NOW,
    Draft,
    DynamoDbEngine,
    Engine,
    Stores,
    conflicts,
    created,
    draft,
    outbox_due,
)


def entry(made: Draft) -> NewMessage:
    return NewMessage(made.message, made.claim, made.handoff_due_at)


def counting_transactions(engine: DynamoDbEngine) -> list[int]:
    calls: list[int] = []

    def count(**_: Any) -> None:
        calls.append(1)

    engine.client.meta.events.register("before-call.dynamodb.TransactWriteItems", count)
    return calls


def test_given_120_new_messages_then_all_are_created_in_three_transactions(
    dynamodb_engine: DynamoDbEngine, stores: Stores
) -> None:
    drafts = [draft(body=f"bulk {i}") for i in range(120)]
    transactions = counting_transactions(dynamodb_engine)

    outcomes = stores.sending.create_many([entry(d) for d in drafts], NOW)

    assert all(isinstance(o, Created) for o in outcomes)
    assert [o.message.id for o in outcomes if isinstance(o, Created)] == [d.message.id for d in drafts]
    assert len(transactions) == 3
    assert dynamodb_engine.message_ids() == {d.message.id for d in drafts}
    assert dynamodb_engine.item(lock_key(drafts[0].claim.lock_id))["messageId"]["S"] == drafts[0].message.id  # type: ignore[index]


def test_given_held_locks_then_those_entries_are_counted_duplicates_and_the_rest_created(
    dynamodb_engine: DynamoDbEngine, stores: Stores
) -> None:
    held = [created(stores, body=f"held {i}") for i in range(3)]
    drafts = [draft(body=f"held {i}") for i in range(3)] + [draft(body=f"free {i}") for i in range(60)]
    mixed = [drafts[3], drafts[0], drafts[4], drafts[1], *drafts[5:], drafts[2]]

    outcomes = stores.sending.create_many([entry(d) for d in mixed], NOW + timedelta(seconds=5))

    duplicates = [o for o in outcomes if isinstance(o, DuplicateOf)]
    assert [o.original.id for o in duplicates if o.original] == [held[0].id, held[1].id, held[2].id]
    assert {o.locked_at for o in duplicates} == {NOW}
    assert sum(isinstance(o, Created) for o in outcomes) == 60
    for original in held:
        assert dynamodb_engine.item(message_key(original.id))["duplicatesBlocked"] == {"N": "1"}  # type: ignore[index]
    assert len(dynamodb_engine.message_ids()) == 63


def test_given_an_expired_lock_not_yet_swept_then_it_never_blocks(engine: Engine, stores: Stores) -> None:
    created(stores, body="old")
    later = NOW + timedelta(hours=1)
    made = draft(body="old", now=later)

    outcomes = stores.sending.create_many([entry(made)], later)

    assert isinstance(outcomes[0], Created)


def test_given_a_bulk_create_then_each_new_message_is_owed_to_the_outbox_at_its_hand_off_time(
    stores: Stores,
) -> None:
    drafts = [draft(body=f"owed {i}", handoff_due_at=NOW + timedelta(seconds=i + 1)) for i in range(3)]

    stores.sending.create_many([entry(d) for d in drafts], NOW)

    assert outbox_due(stores, NOW, 10) == []
    due = outbox_due(stores, NOW + timedelta(seconds=3), 10)
    assert [(e.id, e.due_at) for e in due] == [(d.message.id, d.handoff_due_at) for d in drafts]


def test_given_a_conflict_then_the_transaction_is_tried_again(
    dynamodb_engine: DynamoDbEngine, stores: Stores
) -> None:
    calls = conflicts(dynamodb_engine.client, times=2)
    drafts = [draft(body=f"conflict {i}") for i in range(3)]

    outcomes = stores.sending.create_many([entry(d) for d in drafts], NOW)

    assert all(isinstance(o, Created) for o in outcomes)
    assert len(calls) == 3


def test_given_conflicts_without_end_then_the_entries_are_not_written(
    dynamodb_engine: DynamoDbEngine, stores: Stores
) -> None:
    conflicts(dynamodb_engine.client, times=100)

    outcomes = stores.sending.create_many([entry(draft(body="never"))], NOW)

    assert isinstance(outcomes[0], NotWritten)
    assert dynamodb_engine.message_ids() == set()


def test_given_one_transaction_that_keeps_failing_then_only_its_entries_are_not_written(
    dynamodb_engine: DynamoDbEngine, stores: Stores
) -> None:
    drafts = [draft(body=f"side by side {i}") for i in range(120)]
    conflicts(dynamodb_engine.client, times=100, only_with=drafts[60].message.id)  # the second of three

    outcomes = stores.sending.create_many([entry(d) for d in drafts], NOW)

    assert [isinstance(o, NotWritten) for o in outcomes] == [False] * 50 + [True] * 50 + [False] * 20
    assert dynamodb_engine.message_ids() == {d.message.id for d in drafts[:50] + drafts[100:]}
