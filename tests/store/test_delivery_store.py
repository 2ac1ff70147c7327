"""The delivery store's contract, on moto and on DynamoDB Local.

A message is claimed by one dispatcher at a time, an attempt is finished only by the claim that
started it, and the outbox sees every overdue message, whatever its shard, and moves an entry only
if nobody moved it since it was read.
"""

from __future__ import annotations

from datetime import timedelta

from sendonce.adapters.dynamodb_items import message_key, outbox_shard
from sendonce.delivery.ports import ClaimRefused
from sendonce.messages.ids import new_message_id
from sendonce.messages.model import Message, MessageError, Status

from tests.store.conftest import NOW, Engine, Stores, created, only, race

CLAIMERS = 10
CLAIM_SECONDS = 60


def test_given_10_dispatchers_claiming_one_message_at_once_then_exactly_one_claims_it(
    engine: Engine, stores: Stores
) -> None:
    message = created(stores)

    answers = race(CLAIMERS, lambda _: stores.delivery.claim("ws_a", message.id, NOW, CLAIM_SECONDS))

    claimed = only(answers, Message)
    refused = only(answers, ClaimRefused)
    assert len(claimed) == 1, answers
    assert len(refused) == CLAIMERS - 1, answers
    assert claimed[0].status is Status.SENDING
    assert claimed[0].attempts == 1
    assert {answer.current.status for answer in refused} == {Status.SENDING}
    item = engine.item(message_key(message.id))
    assert item is not None
    assert item["attempts"]["N"] == "1"


def test_given_a_message_not_yet_due_then_the_claim_is_refused_until_its_send_at(
    engine: Engine, stores: Stores
) -> None:
    send_at = NOW + timedelta(minutes=10)
    message = created(stores, status=Status.SCHEDULED, send_at=send_at)

    early = stores.delivery.claim("ws_a", message.id, NOW, CLAIM_SECONDS)
    on_time = stores.delivery.claim("ws_a", message.id, send_at, CLAIM_SECONDS)

    assert early == ClaimRefused(current=message, not_due_until=send_at)
    assert isinstance(on_time, Message)
    assert on_time.status is Status.SENDING


def test_given_another_workspace_or_no_message_then_the_claim_is_refused_with_nothing(
    engine: Engine, stores: Stores
) -> None:
    message = created(stores)

    assert stores.delivery.claim("ws_b", message.id, NOW, CLAIM_SECONDS) == ClaimRefused(current=None)
    assert stores.delivery.claim("ws_a", new_message_id(), NOW, CLAIM_SECONDS) == ClaimRefused(current=None)


def test_given_a_claimed_attempt_then_only_its_own_claim_finishes_it_and_only_once(
    engine: Engine, stores: Stores
) -> None:
    message = created(stores)
    first = stores.delivery.claim("ws_a", message.id, NOW, CLAIM_SECONDS)
    assert isinstance(first, Message)
    # Its claim lapsed: the outbox put it back, and a second dispatcher claimed it again.
    later = NOW + timedelta(seconds=CLAIM_SECONDS + 1)
    [entry] = stores.outbox.outbox_due(later, 10)
    assert stores.outbox.move_outbox_entry(entry, later, status=Status.QUEUED, due_at=later)
    second = stores.delivery.claim("ws_a", message.id, later, CLAIM_SECONDS)
    assert isinstance(second, Message)
    assert second.attempts == 2

    assert not stores.delivery.finish_attempt(first, Status.SENT, later, provider_message_id="late")
    assert not stores.delivery.finish_attempt(message, Status.SENT, later)  # never claimed as such
    assert stores.delivery.finish_attempt(second, Status.SENT, later, provider_message_id="p-2")
    assert not stores.delivery.finish_attempt(second, Status.FAILED, later)  # already finished

    item = engine.item(message_key(message.id))
    assert item is not None
    assert item["status"]["S"] == "sent"
    assert item["providerMessageId"]["S"] == "p-2"
    assert "outboxDueAt" not in item
    assert "outboxShard" not in item


def test_given_an_attempt_that_failed_for_now_then_it_stays_in_the_outbox_with_its_error(
    engine: Engine, stores: Stores
) -> None:
    message = created(stores)
    claimed = stores.delivery.claim("ws_a", message.id, NOW, CLAIM_SECONDS)
    assert isinstance(claimed, Message)
    retry_at = NOW + timedelta(minutes=5)

    finished = stores.delivery.finish_attempt(
        claimed,
        Status.QUEUED,
        NOW,
        error=MessageError("provider_unavailable", "503"),
        handoff_due_at=retry_at,
    )

    assert finished
    [entry] = stores.outbox.outbox_due(retry_at, 10)
    assert (entry.id, entry.status, entry.due_at) == (message.id, Status.QUEUED, retry_at)
    assert stores.outbox.outbox_due(retry_at - timedelta(seconds=1), 10) == []


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

    entries = stores.outbox.outbox_due(NOW, 100)

    assert [entry.id for entry in entries] == [message.id for message in due]
    assert not {entry.id for entry in entries} & {message.id for message in not_due}
    assert [entry.id for entry in stores.outbox.outbox_due(NOW, 5)] == [message.id for message in due[:5]]


def test_given_an_outbox_entry_moved_since_it_was_read_then_a_second_move_is_refused(
    engine: Engine, stores: Stores
) -> None:
    message = created(stores, handoff_due_at=NOW - timedelta(seconds=1))
    [entry] = stores.outbox.outbox_due(NOW, 10)

    moved = stores.outbox.move_outbox_entry(
        entry, NOW, status=Status.QUEUED, due_at=NOW + timedelta(minutes=2)
    )
    again = stores.outbox.move_outbox_entry(
        entry, NOW, status=Status.QUEUED, due_at=NOW + timedelta(minutes=4)
    )

    assert moved
    assert not again
    item = engine.item(message_key(message.id))
    assert item is not None
    assert item["outboxDueAt"]["S"].startswith((NOW + timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M:%S"))


def test_given_an_outbox_entry_claimed_since_it_was_read_then_the_outbox_leaves_it(
    engine: Engine, stores: Stores
) -> None:
    message = created(stores, handoff_due_at=NOW - timedelta(seconds=1))
    [entry] = stores.outbox.outbox_due(NOW, 10)
    assert isinstance(stores.delivery.claim("ws_a", message.id, NOW, CLAIM_SECONDS), Message)

    assert not stores.outbox.move_outbox_entry(entry, NOW, status=Status.QUEUED, due_at=None)
    item = engine.item(message_key(message.id))
    assert item is not None
    assert item["status"]["S"] == "sending"


def test_given_sweeps_moving_one_entry_at_once_then_exactly_one_moves_it(
    engine: Engine, stores: Stores
) -> None:
    created(stores, handoff_due_at=NOW - timedelta(seconds=1))
    [entry] = stores.outbox.outbox_due(NOW, 10)

    answers = race(
        CLAIMERS,
        lambda i: stores.outbox.move_outbox_entry(
            entry, NOW, status=Status.QUEUED, due_at=NOW + timedelta(seconds=i + 1)
        ),
    )

    assert answers.count(True) == 1, answers
    assert answers.count(False) == CLAIMERS - 1, answers
