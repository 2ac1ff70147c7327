"""The sending store's contract, on every engine (its ClientRequestToken, TTL attributes and injected
conflicts on moto and DynamoDB Local).

One identity, one message: of 30 identical sends at once exactly one is created and the others are
duplicates of it; of 30 sends under one Idempotency-Key exactly one is created and the others are
tied to it. A canceled transaction is explained by its reasons, an expired lock the TTL sweep has
not deleted yet never blocks, and listing pages through the indexes gives each message once.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sendonce.adapters import dynamodb_sending
from sendonce.adapters.dynamodb_items import lock_key
from sendonce.adapters.dynamodb_writes import MAX_ATTEMPTS
from sendonce.errors import DependencyUnavailable, InvalidCursor, MessageNotCancelable, MessageNotFound
from sendonce.messages.ids import new_message_id
from sendonce.messages.model import Channel, Status
from sendonce.messages.ports import MAX_FILTERED_READS, Created, DuplicateOf, MessageFilter, TiedToKey
from sendonce.messages.recipients import Recipient
from sendonce.messages.service import MessageService, SendCommand

from tests.store.conftest import (
    DEDUP_WINDOW,
    DYNAMODB_LOCAL,
    MOTO,
    NOW,
    DynamoDbEngine,
    Engine,
    Stores,
    build_stores,
    conflicts,
    create,
    created,
    draft,
    only,
    outbox_due,
    race,
)
from tests.unit import unit_fakes

CONTENDERS = 30
RACE_ROUNDS = 3


# ---------------------------------------------------------------------------- races
@pytest.mark.parametrize("round_", range(RACE_ROUNDS))
def test_given_30_identical_sends_at_once_then_one_is_created_and_29_are_duplicates_of_it(
    engine: Engine, stores: Stores, round_: int
) -> None:
    drafts = [draft(body=f"race {round_}") for _ in range(CONTENDERS)]

    answers = race(CONTENDERS, lambda i: create(stores, drafts[i]))

    winners = only(answers, Created)
    duplicates = only(answers, DuplicateOf)
    assert len(winners) == 1, answers
    assert len(duplicates) == CONTENDERS - 1, answers
    assert {duplicate.original.id for duplicate in duplicates} == {winners[0].message.id}
    assert {duplicate.locked_at for duplicate in duplicates} == {NOW}
    assert engine.message_ids() == {winners[0].message.id}


@pytest.mark.parametrize("round_", range(RACE_ROUNDS))
def test_given_30_sends_under_one_idempotency_key_at_once_then_one_is_created_and_29_are_tied_to_it(
    engine: Engine, stores: Stores, round_: int
) -> None:
    # Different words each (different dedup identities), one key and one destination (one tie).
    drafts = [draft(body=f"tie {round_} #{i}", key=f"key-{round_}") for i in range(CONTENDERS)]

    answers = race(CONTENDERS, lambda i: create(stores, drafts[i]))

    winners = only(answers, Created)
    tied = only(answers, TiedToKey)
    assert len(winners) == 1, answers
    assert len(tied) == CONTENDERS - 1, answers
    assert {answer.original.id for answer in tied} == {winners[0].message.id}
    assert {answer.payload_fingerprint for answer in tied} == {"fingerprint-1"}
    assert engine.message_ids() == {winners[0].message.id}


# ---------------------------------------------------------------------------- cancellation reasons
def test_given_a_held_lock_when_the_same_words_are_sent_then_a_duplicate_of_the_original_and_its_lock_time(
    engine: Engine, stores: Stores
) -> None:
    original = created(stores)

    outcome = create(stores, draft(now=NOW + timedelta(seconds=42)), NOW + timedelta(seconds=42))

    assert isinstance(outcome, DuplicateOf)
    assert outcome.original == original
    assert outcome.locked_at == NOW
    assert engine.message_ids() == {original.id}


def test_given_a_taken_key_tie_when_other_words_are_sent_under_it_then_tied_with_the_first_fingerprint(
    engine: Engine, stores: Stores
) -> None:
    original = created(stores, key="k", fingerprint="first")

    outcome = create(stores, draft(body="other words", key="k", fingerprint="second"))

    assert isinstance(outcome, TiedToKey)
    assert outcome.original == original
    assert outcome.payload_fingerprint == "first"
    assert engine.message_ids() == {original.id}


def test_given_a_taken_key_tie_and_a_held_lock_then_the_tie_answers(engine: Engine, stores: Stores) -> None:
    original = created(stores, key="k")

    outcome = create(stores, draft(key="k"))

    assert isinstance(outcome, TiedToKey)
    assert outcome.original == original


def test_given_the_same_key_for_another_destination_then_a_new_message(
    engine: Engine, stores: Stores
) -> None:
    first = created(stores, key="k", body="one")

    outcome = create(stores, draft(key="k", body="one", to="+15550100001"))

    assert isinstance(outcome, Created)
    assert engine.message_ids() == {first.id, outcome.message.id}


def test_given_a_message_id_already_taken_then_dependency_unavailable_and_nothing_of_the_second_written(
    engine: Engine, stores: Stores
) -> None:
    original = created(stores)
    collision = draft(body="other words", message_id=original.id)

    with pytest.raises(DependencyUnavailable):
        create(stores, collision)

    assert engine.lock_holder(collision.claim.lock_id) is None
    assert stores.sending.get("ws_a", original.id) == original


# ---------------------------------------------------------------------------- TTL: expired, still present
def test_given_a_lock_past_its_expiry_still_in_the_table_then_it_never_blocks(
    dynamodb_engine: DynamoDbEngine, stores: Stores
) -> None:
    first = created(stores, window=timedelta(seconds=60))
    later = NOW + timedelta(seconds=120)
    lock = dynamodb_engine.item(lock_key(first.dedup_lock_id or ""))
    assert lock is not None  # no TTL sweep has deleted it
    assert int(lock["expiresAt"]["N"]) < later.timestamp()

    outcome = create(stores, draft(now=later), later)

    assert isinstance(outcome, Created)
    lock = dynamodb_engine.item(lock_key(first.dedup_lock_id or ""))
    assert lock is not None
    assert lock["messageId"]["S"] == outcome.message.id
    assert lock["lockedAt"]["S"].startswith(later.strftime("%Y-%m-%dT%H:%M:%S"))


def test_given_a_lock_at_the_end_of_its_window_then_it_still_blocks_a_second_before(
    engine: Engine, stores: Stores
) -> None:
    first = created(stores, window=timedelta(seconds=60))
    almost = NOW + timedelta(seconds=59)

    outcome = create(stores, draft(now=almost), almost)

    assert isinstance(outcome, DuplicateOf)
    assert outcome.original == first


@pytest.mark.parametrize("fraction", [0.0, 0.1, 0.9])
def test_a_lock_is_held_for_its_whole_window_whatever_the_second_it_began_in(
    engine: Engine, stores: Stores, fraction: float
) -> None:
    """The lock's expiry is a whole second, rounded up: a 3-second window begun late in a second is
    not over two seconds on (rounded down, it was), and it is over a second after it ends."""
    began = NOW + timedelta(seconds=fraction)
    first = created(stores, now=began, window=timedelta(seconds=3))

    for later in (2.0, 2.5, 2.99):
        at = began + timedelta(seconds=later)
        assert isinstance(create(stores, draft(now=at), at), DuplicateOf), later
    free = began + timedelta(seconds=4)
    outcome = create(stores, draft(now=free), free)

    assert isinstance(outcome, Created)
    assert outcome.message.id != first.id


# ---------------------------------------------------------------------------- releasing a lock
def test_given_a_released_lock_then_the_same_words_make_a_new_message(engine: Engine, stores: Stores) -> None:
    first = created(stores)
    stores.sending.release_dedup_lock(first)

    outcome = create(stores, draft())

    assert isinstance(outcome, Created)
    assert outcome.message.id != first.id


def test_given_a_lock_now_held_by_a_later_message_then_the_first_cannot_release_it(
    engine: Engine, stores: Stores
) -> None:
    first = created(stores, window=timedelta(seconds=60))
    later = NOW + timedelta(seconds=61)
    second = create(stores, draft(now=later), later)
    assert isinstance(second, Created)

    stores.sending.release_dedup_lock(first)

    assert engine.lock_holder(first.dedup_lock_id or "") == second.message.id


# ---------------------------------------------------------------------------- cancel
def test_given_a_queued_message_then_canceled_once_and_never_again(engine: Engine, stores: Stores) -> None:
    message = created(stores)
    later = NOW + timedelta(seconds=5)

    canceled = stores.sending.cancel("ws_a", message.id, later)

    assert canceled.status is Status.CANCELED
    assert canceled.updated_at == later
    with pytest.raises(MessageNotCancelable):
        stores.sending.cancel("ws_a", message.id, later)
    with pytest.raises(MessageNotFound):
        stores.sending.cancel("ws_b", message.id, later)  # another workspace's message does not exist
    with pytest.raises(MessageNotFound):
        stores.sending.cancel("ws_a", new_message_id(), later)
    assert outbox_due(stores, later + timedelta(days=1), 10) == []  # nothing more is owed


def test_given_a_claimed_message_then_it_cannot_be_canceled(engine: Engine, stores: Stores) -> None:
    message = created(stores)
    stores.delivery.claim("ws_a", message.id, NOW, 60)

    with pytest.raises(MessageNotCancelable) as refused:
        stores.sending.cancel("ws_a", message.id, NOW)

    assert refused.value.status == Status.SENDING.value


# ---------------------------------------------------------------------------- GSI paging
def test_given_messages_of_two_workspaces_when_listed_page_by_page_then_each_once_newest_first(
    engine: Engine, stores: Stores
) -> None:
    start_ms = int(NOW.timestamp() * 1000)
    mine = [created(stores, body=f"mine {i}", message_id=new_message_id(start_ms + i)).id for i in range(23)]
    theirs = [created(stores, workspace="ws_b", body=f"theirs {i}").id for i in range(4)]
    canceled = mine[::3]
    for message_id in canceled:
        stores.sending.cancel("ws_a", message_id, NOW)
    queued = [message_id for message_id in mine if message_id not in canceled]

    assert _all_pages(stores, "ws_a", None, 5) == sorted(mine, reverse=True)
    assert _all_pages(stores, "ws_a", Status.QUEUED, 4) == sorted(queued, reverse=True)
    assert _all_pages(stores, "ws_a", Status.CANCELED, 8) == sorted(canceled, reverse=True)
    assert _all_pages(stores, "ws_b", None, 2) == sorted(theirs, reverse=True)
    assert _all_pages(stores, "ws_a", Status.SENT, 5) == []


def test_given_messages_too_large_for_one_query_page_then_full_pages_and_a_cursor_until_the_last(
    engine: Engine, stores: Stores
) -> None:
    # 24 messages of ~100 KB: DynamoDB stops a query at 1 MB, so a page of 20 takes several queries.
    start_ms = int(NOW.timestamp() * 1000)
    ids = [
        created(stores, body=f"{i} " + "x" * 100_000, message_id=new_message_id(start_ms + i)).id
        for i in range(24)
    ]

    first = stores.sending.list("ws_a", MessageFilter(), 20, None)
    assert [message.id for message in first.messages] == sorted(ids, reverse=True)[:20]
    assert first.next_cursor is not None
    last = stores.sending.list("ws_a", MessageFilter(), 20, first.next_cursor)
    assert [message.id for message in last.messages] == sorted(ids, reverse=True)[20:]
    assert last.next_cursor is None
    assert _all_pages(stores, "ws_a", Status.QUEUED, 7) == sorted(ids, reverse=True)


def test_given_a_page_that_ends_the_list_then_no_cursor(engine: Engine, stores: Stores) -> None:
    ids = [created(stores, body=f"m{i}").id for i in range(4)]

    page = stores.sending.list("ws_a", MessageFilter(), 4, None)

    assert [message.id for message in page.messages] == sorted(ids, reverse=True)
    assert page.next_cursor is None


def test_given_a_cursor_that_is_no_message_id_then_invalid_cursor(engine: Engine, stores: Stores) -> None:
    with pytest.raises(InvalidCursor):
        stores.sending.list("ws_a", MessageFilter(), 5, "not-a-cursor")


def _all_pages(stores: Stores, workspace: str, status: Status | None, limit: int) -> list[str]:
    seen: list[str] = []
    cursor: str | None = None
    for _ in range(100):
        page = stores.sending.list(workspace, MessageFilter(status=status), limit, cursor)
        assert len(page.messages) <= limit
        seen.extend(message.id for message in page.messages)
        cursor = page.next_cursor
        if cursor is None:
            assert len(seen) == len(set(seen)), seen
            return seen
    raise AssertionError("the cursor never ended")


# ---------------------------------------------------------------------------- a lost answer
class RecordingQueue:
    def __init__(self) -> None:
        self.enqueued: list[str] = []

    def enqueue(self, message: Any, delay_seconds: int = 0) -> None:
        self.enqueued.append(message.id)


# How each engine answers the retry of a committed create with the same ClientRequestToken.
# DynamoDB Local, like DynamoDB, recognises the token: a no-op success. moto ignores the token and
# runs the transaction again, which its own first run cancels: the message id and the lock are taken
# (the recipient's two suppression checks pass).
RETRY_ANSWER: dict[str, tuple[int, list[str]]] = {
    DYNAMODB_LOCAL: (200, []),
    MOTO: (400, ["ConditionalCheckFailed", "ConditionalCheckFailed", "None", "None"]),
}


def test_given_the_answer_to_a_committed_create_is_lost_when_the_sdk_retries_then_created_once(
    dynamodb_engine: DynamoDbEngine,
) -> None:
    client = dynamodb_engine.new_client()
    answers: list[dict[str, Any]] = []

    def lose_the_first_answer(response: Any, attempts: int, **_: Any) -> float | None:
        # The transaction committed; its answer is treated as lost, so the SDK sends the same
        # request (the same ClientRequestToken) again, as after a dropped connection.
        answers.append(response[1] if response else {})
        return 0 if attempts == 1 else None

    client.meta.events.register_first("needs-retry.dynamodb.TransactWriteItems", lose_the_first_answer)
    queue = RecordingQueue()
    service = MessageService(
        store=build_stores(client).sending, queue=queue, dedup_window=DEDUP_WINDOW, clock=lambda: NOW
    )

    result = service.send(
        SendCommand(
            workspace_id="ws_a",
            channel=Channel("sms"),
            recipient=Recipient(address="+15550100000", dedup_form="+15550100000"),
            body="hello",
        )
    )

    assert len(answers) == 2
    retry = answers[1]
    reasons = [reason["Code"] for reason in retry.get("CancellationReasons", [])]
    assert (retry["ResponseMetadata"]["HTTPStatusCode"], reasons) == RETRY_ANSWER[dynamodb_engine.name], retry
    assert result.created
    assert not result.duplicate
    assert result.message is not None
    # Created, not a duplicate of itself: the stream's one INSERT of it is its hand-off.
    assert queue.enqueued == []
    assert dynamodb_engine.message_ids() == {result.message.id}


def test_given_a_create_repeated_with_the_same_message_then_created_both_times_and_written_once(
    engine: Engine, stores: Stores
) -> None:
    made = draft()

    first, second = create(stores, made), create(stores, made)

    assert isinstance(first, Created)
    assert isinstance(second, Created)
    assert engine.message_ids() == {made.message.id}


# ---------------------------------------------------------------------------- injected conflicts
def test_given_conflicts_on_the_first_tries_then_create_tries_again_and_succeeds(
    dynamodb_engine: DynamoDbEngine,
) -> None:
    client = dynamodb_engine.new_client()
    calls = conflicts(client, 3)

    outcome = create(build_stores(client), draft(key="k"))

    assert isinstance(outcome, Created)
    assert len(calls) == 4
    assert dynamodb_engine.message_ids() == {outcome.message.id}


def test_given_conflicts_on_every_try_then_dependency_unavailable_and_nothing_written(
    dynamodb_engine: DynamoDbEngine,
) -> None:
    client = dynamodb_engine.new_client()
    calls = conflicts(client, 1000)

    with pytest.raises(DependencyUnavailable):
        create(build_stores(client), draft())

    assert len(calls) == MAX_ATTEMPTS
    assert dynamodb_engine.items() == []


def _filtered_pages(stores: Stores, which: MessageFilter, limit: int) -> list[list[str]]:
    pages: list[list[str]] = []
    cursor: str | None = None
    for _ in range(100):
        page = stores.sending.list("ws_a", which, limit, cursor)
        assert len(page.messages) <= limit
        pages.append([message.id for message in page.messages])
        cursor = page.next_cursor
        if cursor is None:
            return pages
    raise AssertionError("the cursor never ended")


@pytest.mark.parametrize("budget", [MAX_FILTERED_READS, 7])
def test_given_a_recipient_filter_then_pages_reach_each_of_its_messages_once_newest_first(
    engine: Engine, stores: Stores, budget: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filter only the items tell (the recipient): with the read budget, a page ends early where
    its reads did, and the cursor goes on from there: nothing skipped, nothing twice."""
    monkeypatch.setattr(dynamodb_sending, "MAX_FILTERED_READS", budget)
    monkeypatch.setattr(unit_fakes, "MAX_FILTERED_READS", budget)
    start_ms = int(NOW.timestamp() * 1000)
    ours: list[str] = []
    for i in range(30):
        to = "+15550100077" if i % 3 == 0 else f"+1555010{i:04d}"
        made = created(stores, to=to, body=f"m{i}", message_id=new_message_id(start_ms + i)).id
        if i % 3 == 0:
            ours.append(made)
    which = MessageFilter(recipient="+15550100077")

    pages = _filtered_pages(stores, which, 4)

    assert [message_id for page in pages for message_id in page] == sorted(ours, reverse=True)
    if budget == MAX_FILTERED_READS:
        assert [len(page) for page in pages] == [4, 4, 2]  # full pages whenever more exist
    for nobody in (MessageFilter(recipient="+15550100099"), MessageFilter(channel="email")):
        pages = _filtered_pages(stores, nobody, 5)
        assert all(page == [] for page in pages)
        assert len(pages) == (1 if budget == MAX_FILTERED_READS else -(-30 // budget))
