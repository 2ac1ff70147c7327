"""The outbox store's contract, on every engine (its pages of the Outbox index on moto and DynamoDB
Local).

The outbox sees every overdue message, whatever its shard and however many share a shard, page by
page; it reads what nothing else will do apart from messages that only wait in their queue; it
moves an entry only if nobody moved it since it was read; and it counts and caps the reclaims of
a dead claim.
"""

from __future__ import annotations

from datetime import timedelta

from sendonce.adapters.dynamodb_items import outbox_shard
from sendonce.adapters.dynamodb_outbox import DynamoDbOutboxStore
from sendonce.dispatch.outbox import FIRST, WAITING
from sendonce.dispatch.ports import OutboxEntry, Reclaim
from sendonce.messages.ids import new_message_id
from sendonce.messages.model import Message, Status

from tests.store.conftest import NOW, TABLE, DynamoDbEngine, Engine, Stores, created, outbox_due, race

CLAIMERS = 10
CLAIM_SECONDS = 60


def _all_due(outbox: DynamoDbOutboxStore, statuses: frozenset[Status] = FIRST | WAITING) -> list[OutboxEntry]:
    return [entry for page in outbox.due_pages(NOW, statuses) for entry in page]


def _status(stores: Stores, message_id: str) -> Status:
    message = stores.sending.get("ws_a", message_id)
    assert message is not None
    return message.status


def _ids_in_one_shard(count: int) -> list[str]:
    """Message ids that all fall in one Outbox shard, oldest first."""
    start_ms = int(NOW.timestamp() * 1000)
    shard, ids = None, []
    for offset in range(100_000):
        message_id = new_message_id(start_ms + offset)
        if shard is None:
            shard = outbox_shard(message_id)
        if outbox_shard(message_id) == shard:
            ids.append(message_id)
            if len(ids) == count:
                return ids
    raise AssertionError("no ids found")


# ---------------------------------------------------------------------------- reading
def test_given_overdue_messages_across_shards_then_the_outbox_gives_each_once_oldest_first(
    engine: Engine, stores: Stores
) -> None:
    due = [
        created(stores, body=f"due {i}", handoff_due_at=NOW - timedelta(seconds=60 - i)) for i in range(12)
    ]
    not_due = [
        created(stores, body=f"later {i}", handoff_due_at=NOW + timedelta(seconds=1)) for i in range(3)
    ]
    shards = {outbox_shard(message.id) for message in due}
    assert len(shards) > 1  # the sweep reads more than one shard

    entries = outbox_due(stores, NOW, 100)

    assert [entry.id for entry in entries] == [message.id for message in due]
    assert not {entry.id for entry in entries} & {message.id for message in not_due}
    assert [entry.id for entry in outbox_due(stores, NOW, 5)] == [message.id for message in due[:5]]


def test_given_more_due_entries_in_a_shard_than_a_page_holds_then_every_page_is_read(
    dynamodb_engine: DynamoDbEngine, stores: Stores
) -> None:
    crowded = _ids_in_one_shard(7)
    for index, message_id in enumerate(crowded):
        created(
            stores,
            message_id=message_id,
            body=f"crowded {index}",
            handoff_due_at=NOW - timedelta(seconds=60 - index),
        )
    elsewhere = [
        created(stores, body=f"elsewhere {i}", handoff_due_at=NOW - timedelta(seconds=1)) for i in range(5)
    ]
    later = created(
        stores, message_id=_ids_in_one_shard(8)[-1], body="later", handoff_due_at=NOW + timedelta(seconds=1)
    )
    outbox = DynamoDbOutboxStore(dynamodb_engine.client, TABLE, page_size=2)

    pages = list(outbox.due_pages(NOW, FIRST | WAITING))
    entries = [entry for page in pages for entry in page]

    assert max(len(page) for page in pages) <= 2
    assert sorted(entry.id for entry in entries) == sorted(crowded + [message.id for message in elsewhere])
    assert later.id not in {entry.id for entry in entries}
    in_shard = [entry.id for entry in entries if entry.id in crowded]
    assert in_shard == crowded  # oldest first within a shard


def test_given_waiting_and_owed_entries_then_each_kind_is_read_apart(
    dynamodb_engine: DynamoDbEngine, stores: Stores
) -> None:
    waiting = [
        created(stores, body=f"waiting {i}", handoff_due_at=NOW - timedelta(hours=1)) for i in range(4)
    ]
    scheduled = created(
        stores,
        body="scheduled",
        status=Status.SCHEDULED,
        send_at=NOW,
        handoff_due_at=NOW - timedelta(minutes=15),
    )
    stranded = created(stores, body="stranded", handoff_due_at=NOW - timedelta(hours=2))
    claimed = stores.delivery.claim("ws_a", stranded.id, NOW - timedelta(minutes=5), CLAIM_SECONDS)
    assert isinstance(claimed, Message)
    outbox = DynamoDbOutboxStore(dynamodb_engine.client, TABLE, page_size=1)

    first = _all_due(outbox, FIRST)
    then = _all_due(outbox, WAITING)

    assert {(entry.id, entry.status) for entry in first} == {
        (scheduled.id, Status.SCHEDULED),
        (stranded.id, Status.SENDING),
    }
    assert sorted(entry.id for entry in then) == sorted(message.id for message in waiting)
    assert {entry.status for entry in then} == {Status.QUEUED}


# ---------------------------------------------------------------------------- moving
def test_given_an_outbox_entry_moved_since_it_was_read_then_a_second_move_is_refused(
    engine: Engine, stores: Stores
) -> None:
    message = created(stores, handoff_due_at=NOW - timedelta(seconds=1))
    [entry] = _all_due(stores.outbox)

    moved = stores.outbox.move_outbox_entry(
        entry, NOW, status=Status.QUEUED, due_at=NOW + timedelta(minutes=2)
    )
    again = stores.outbox.move_outbox_entry(
        entry, NOW, status=Status.QUEUED, due_at=NOW + timedelta(minutes=4)
    )

    assert moved
    assert not again
    due = NOW + timedelta(minutes=2)
    assert [(entry.id, entry.due_at) for entry in outbox_due(stores, due, 10)] == [(message.id, due)]


def test_given_an_outbox_entry_claimed_since_it_was_read_then_the_outbox_leaves_it(
    engine: Engine, stores: Stores
) -> None:
    message = created(stores, handoff_due_at=NOW - timedelta(seconds=1))
    [entry] = _all_due(stores.outbox)
    assert isinstance(stores.delivery.claim("ws_a", message.id, NOW, CLAIM_SECONDS), Message)

    assert not stores.outbox.move_outbox_entry(entry, NOW, status=Status.QUEUED, due_at=None)
    assert _status(stores, message.id) is Status.SENDING


def test_given_sweeps_moving_one_entry_at_once_then_exactly_one_moves_it(
    engine: Engine, stores: Stores
) -> None:
    created(stores, handoff_due_at=NOW - timedelta(seconds=1))
    [entry] = _all_due(stores.outbox)

    answers = race(
        CLAIMERS,
        lambda i: stores.outbox.move_outbox_entry(
            entry, NOW, status=Status.QUEUED, due_at=NOW + timedelta(seconds=i + 1)
        ),
    )

    assert answers.count(True) == 1, answers
    assert answers.count(False) == CLAIMERS - 1, answers


# ---------------------------------------------------------------------------- reclaiming dead claims
def _strand(stores: Stores, message_id: str, at: timedelta) -> OutboxEntry:
    """A dispatcher claims the message at NOW + `at` and dies; the entry, read once its claim lapsed."""
    claimed = stores.delivery.claim("ws_a", message_id, NOW + at, CLAIM_SECONDS)
    assert isinstance(claimed, Message), claimed
    lapsed = NOW + at + timedelta(seconds=CLAIM_SECONDS + 1)
    [entry] = [entry for page in stores.outbox.due_pages(lapsed, FIRST) for entry in page]
    assert entry.status is Status.SENDING
    return entry


def test_given_a_claim_that_dies_every_time_then_it_is_reclaimed_up_to_the_cap_and_counted(
    engine: Engine, stores: Stores
) -> None:
    message = created(stores)
    outcomes = []
    for round_ in range(3):
        entry = _strand(stores, message.id, timedelta(minutes=10 * round_))
        outcomes.append(
            stores.outbox.reclaim(entry, NOW, due_at=NOW + timedelta(minutes=10 * round_ + 5), max_reclaims=2)
        )

    assert outcomes == [Reclaim.RECLAIMED, Reclaim.RECLAIMED, Reclaim.CAP_REACHED]
    assert engine.reclaims(message.id) == 2
    assert _status(stores, message.id) is Status.SENDING  # left as it was: the sweep decides what comes next
    assert stores.outbox.move_outbox_entry(entry, NOW, status=Status.UNKNOWN, due_at=None)


def test_given_a_dead_claim_moved_since_it_was_read_then_the_reclaim_is_superseded(
    engine: Engine, stores: Stores
) -> None:
    message = created(stores)
    entry = _strand(stores, message.id, timedelta(0))
    assert stores.outbox.move_outbox_entry(entry, NOW, status=Status.UNKNOWN, due_at=None)

    assert stores.outbox.reclaim(entry, NOW, due_at=NOW, max_reclaims=3) is Reclaim.SUPERSEDED
    assert engine.reclaims(message.id) == 0
    assert _status(stores, message.id) is Status.UNKNOWN


def test_given_sweeps_reclaiming_one_dead_claim_at_once_then_it_is_reclaimed_once(
    engine: Engine, stores: Stores
) -> None:
    message = created(stores)
    entry = _strand(stores, message.id, timedelta(0))

    answers = race(CLAIMERS, lambda i: stores.outbox.reclaim(entry, NOW, due_at=NOW, max_reclaims=3))

    assert answers.count(Reclaim.RECLAIMED) == 1, answers
    assert answers.count(Reclaim.SUPERSEDED) == CLAIMERS - 1, answers
    assert engine.reclaims(message.id) == 1
    assert _status(stores, message.id) is Status.QUEUED
