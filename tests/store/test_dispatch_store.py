"""The dispatch store's contract, on every engine (the items of a settled message on moto and
DynamoDB Local).

A message is claimed by one dispatcher at a time, an attempt is finished only by the claim that
started it, and the outbox sees every overdue message, whatever its shard, and moves an entry only
if nobody moved it since it was read. Every claim knows when the first attempt started and how many
attempts were throttled; an `unknown` message is settled once, and only while it is `unknown`. A
claim carries the message's expiry, and ends it `expired` as any attempt, once, out of the outbox.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from msgspec.structs import replace
from sendonce.adapters.dynamodb_items import LISTING_SHARDS, lock_key, message_key, shard_of
from sendonce.clock import rfc3339
from sendonce.dispatch.ports import ClaimedMessage, ClaimRefused, SettleRefused
from sendonce.dispatch.resolution import Resolution, resolve_unknown
from sendonce.messages.ids import new_message_id
from sendonce.messages.model import AttemptOutcome, Message, MessageFailure, ProviderAttempt, Status
from sendonce.messages.ports import Created
from sendonce.provider_events.model import ProviderEvent, ProviderEventType
from sendonce.provider_events.ports import EventOutcome

from tests.store.conftest import (
    NOW,
    DynamoDbEngine,
    Engine,
    Stores,
    create,
    created,
    draft,
    only,
    outbox_due,
    race,
)

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
    stored = stores.sending.get("ws_a", message.id)
    assert stored is not None
    assert stored.attempts == 1


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
    [entry] = outbox_due(stores, later, 10)
    assert stores.outbox.move_outbox_entry(entry, later, status=Status.QUEUED, due_at=later)
    second = stores.delivery.claim("ws_a", message.id, later, CLAIM_SECONDS)
    assert isinstance(second, Message)
    assert second.attempts == 2

    assert not stores.delivery.finish_attempt(first, Status.SENT, later, provider_message_id="late")
    assert not stores.delivery.finish_attempt(message, Status.SENT, later)  # never claimed as such
    assert stores.delivery.finish_attempt(second, Status.SENT, later, provider_message_id="p-2")
    assert not stores.delivery.finish_attempt(second, Status.FAILED, later)  # already finished

    stored = stores.sending.get("ws_a", message.id)
    assert stored is not None
    assert stored.status is Status.SENT
    assert stored.provider_message_id == "p-2"
    assert outbox_due(stores, later + timedelta(days=1), 10) == []  # out of the outbox


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
        error=MessageFailure("provider_unavailable", "503"),
        handoff_due_at=retry_at,
    )

    assert finished
    [entry] = outbox_due(stores, retry_at, 10)
    assert (entry.id, entry.status, entry.due_at) == (message.id, Status.QUEUED, retry_at)
    assert outbox_due(stores, retry_at - timedelta(seconds=1), 10) == []


# ---------------------------------------------------------------------------- retries on time
def test_given_several_claims_then_each_knows_the_first_attempts_time_and_the_throttled_attempts(
    engine: Engine, stores: Stores
) -> None:
    message = created(stores)
    throttled = MessageFailure("provider_throttled", "sns throttled the message: Throttling")
    unavailable = MessageFailure("provider_unavailable", "sns could not be reached")
    seen: list[tuple[int, object, int]] = []

    # Two attempts throttled, then one failing otherwise, each put back for a later claim.
    for minutes, ended_throttled in ((0, True), (5, True), (10, False)):
        at = NOW + timedelta(minutes=minutes)
        claimed = stores.delivery.claim("ws_a", message.id, at, CLAIM_SECONDS)
        assert isinstance(claimed, ClaimedMessage)
        seen.append((claimed.attempts, claimed.first_attempt_at, claimed.throttled_attempts))
        error = throttled if ended_throttled else unavailable
        assert stores.delivery.finish_attempt(
            claimed, Status.QUEUED, at, error=error, handoff_due_at=at, throttled=ended_throttled
        )
    last = stores.delivery.claim("ws_a", message.id, NOW + timedelta(minutes=15), CLAIM_SECONDS)
    assert isinstance(last, ClaimedMessage)
    seen.append((last.attempts, last.first_attempt_at, last.throttled_attempts))

    # The first claim's time, kept by every later one; the attempts that ended throttled, counted.
    assert seen == [(1, NOW, 0), (2, NOW, 1), (3, NOW, 2), (4, NOW, 2)]


# ---------------------------------------------------------------------------- settling `unknown`
def _unknown(stores: Stores, **changes: Any) -> Message:
    message = created(stores, **changes)
    claimed = stores.delivery.claim("ws_a", message.id, NOW, CLAIM_SECONDS)
    assert isinstance(claimed, Message)
    assert stores.delivery.finish_attempt(
        claimed, Status.UNKNOWN, NOW, error=MessageFailure("provider_timeout", "ses did not answer in time")
    )
    return claimed


def test_given_an_unknown_message_settled_as_failed_then_failed_with_its_cause_and_its_lock_released(
    dynamodb_engine: DynamoDbEngine, stores: Stores
) -> None:
    message = _unknown(stores)
    assert message.dedup_lock_id is not None
    assert dynamodb_engine.item(lock_key(message.dedup_lock_id)) is not None
    later = NOW + timedelta(hours=1)

    resolved = resolve_unknown(stores.delivery, message.id, Status.FAILED, lambda: later)

    assert resolved.resolution is Resolution.SETTLED
    item = dynamodb_engine.item(message_key(message.id))
    assert item is not None
    assert item["status"]["S"] == "failed"
    assert item["workspaceStatus"]["S"] == f"ws_a#failed#{shard_of(message.id, LISTING_SHARDS)}"
    assert item["error"]["M"]["code"]["S"] == "provider_timeout"  # the attempt's cause stays
    assert item["updatedAt"]["S"].startswith(later.strftime("%Y-%m-%dT%H:%M:%S"))
    assert dynamodb_engine.item(lock_key(message.dedup_lock_id)) is None  # a deliberate retry may send again


def test_given_an_unknown_message_settled_as_sent_then_sent_without_an_error_and_its_lock_kept(
    dynamodb_engine: DynamoDbEngine, stores: Stores
) -> None:
    message = _unknown(stores)
    assert message.dedup_lock_id is not None

    settled = stores.delivery.settle_unknown(message.id, Status.SENT, NOW)

    assert isinstance(settled, Message)
    assert (settled.status, settled.error) == (Status.SENT, None)
    item = dynamodb_engine.item(message_key(message.id))
    assert item is not None
    shard = shard_of(message.id, LISTING_SHARDS)
    assert (item["status"]["S"], item["workspaceStatus"]["S"]) == ("sent", f"ws_a#sent#{shard}")
    assert "error" not in item
    assert dynamodb_engine.item(lock_key(message.dedup_lock_id)) is not None


def test_given_a_message_that_is_not_unknown_then_settling_is_refused_and_changes_nothing(
    engine: Engine, stores: Stores
) -> None:
    queued = created(stores, body="queued")
    sent = created(stores, body="sent")
    claimed = stores.delivery.claim("ws_a", sent.id, NOW, CLAIM_SECONDS)
    assert isinstance(claimed, Message)
    assert stores.delivery.finish_attempt(claimed, Status.SENT, NOW, provider_message_id="p-1")
    before = engine.snapshot()

    for message, status in ((queued, Status.QUEUED), (sent, Status.SENT)):
        refused = stores.delivery.settle_unknown(message.id, Status.FAILED, NOW + timedelta(hours=1))
        assert isinstance(refused, SettleRefused)
        assert refused.current is not None
        assert refused.current.status is status
        assert engine.snapshot() == before
    assert stores.delivery.settle_unknown(new_message_id(), Status.SENT, NOW) == SettleRefused(current=None)


def test_given_operators_settling_one_unknown_message_at_once_then_exactly_one_settles_it(
    engine: Engine, stores: Stores
) -> None:
    message = _unknown(stores)

    answers = race(
        CLAIMERS,
        lambda i: stores.delivery.settle_unknown(message.id, Status.SENT if i % 2 else Status.FAILED, NOW),
    )

    settled = only(answers, Message)
    assert len(settled) == 1, answers
    assert len(only(answers, SettleRefused)) == CLAIMERS - 1, answers
    stored = stores.sending.get("ws_a", message.id)
    assert stored is not None
    assert stored.status is settled[0].status


# ---------------------------------------------------------------------------- provider attempts
def _attempt(provider: str, outcome: AttemptOutcome, seconds: int = 0) -> ProviderAttempt:
    return ProviderAttempt(provider, outcome, NOW + timedelta(seconds=seconds))


def test_a_failover_keeps_the_claim_only_for_its_holder_and_the_attempts_are_kept(stores: Stores) -> None:
    message = created(stores)
    claimed = stores.delivery.claim("ws_a", message.id, NOW, CLAIM_SECONDS)
    assert isinstance(claimed, ClaimedMessage)
    refused = (_attempt("twilio", AttemptOutcome.NOT_ACCEPTED),)

    following = stores.delivery.next_attempt(claimed, NOW + timedelta(seconds=1), CLAIM_SECONDS, refused)

    assert following is not None
    assert (following.attempts, following.provider_attempts) == (2, refused)
    assert stores.delivery.next_attempt(claimed, NOW, CLAIM_SECONDS, refused) is None  # not its holder now
    taken = (*refused, _attempt("http", AttemptOutcome.ACCEPTED, 2))
    assert stores.delivery.finish_attempt(
        following, Status.SENT, NOW + timedelta(seconds=2), provider="http", provider_attempts=taken
    )
    stored = stores.sending.get("ws_a", message.id)
    assert stored is not None
    assert (stored.provider, stored.provider_attempts) == ("http", taken)


def test_an_attempt_ended_by_the_providers_own_event_is_recorded_taken_only_then(stores: Stores) -> None:
    message = created(stores)
    claimed = stores.delivery.claim("ws_a", message.id, NOW, CLAIM_SECONDS)
    assert isinstance(claimed, ClaimedMessage)
    taken = (_attempt("twilio", AttemptOutcome.ACCEPTED),)

    assert not stores.delivery.record_taken(claimed, "twilio", taken)  # still `sending`: no event yet
    delivered = ProviderEvent(
        "twilio", "SM1:delivered", message.id, ProviderEventType.DELIVERED, rfc3339(NOW)
    )
    assert stores.events.apply_provider_event(delivered, NOW)[0] is EventOutcome.APPLIED
    assert stores.delivery.record_taken(claimed, "twilio", taken)
    assert not stores.delivery.record_taken(claimed, "twilio", (*taken, *taken))  # recorded already

    stored = stores.sending.get("ws_a", message.id)
    assert stored is not None
    assert (stored.status, stored.provider, stored.provider_attempts) == (Status.DELIVERED, "twilio", taken)


# ---------------------------------------------------------------------------- expiry
def test_a_claim_carries_the_messages_expiry_and_ends_it_expired_out_of_the_outbox(
    engine: Engine, stores: Stores
) -> None:
    """The dispatcher ends a message past its `expiresAt` through its claim: the claim must carry the
    expiry, whether it sends the record's copy or the item it read, and its end must leave nothing owed."""
    expires_at = NOW + timedelta(minutes=5)
    copied, read = (_expiring(stores, expires_at, body=body) for body in ("sent as copied", "sent as read"))

    from_copy = stores.delivery.claim("ws_a", copied.id, NOW, CLAIM_SECONDS, seen=copied)
    from_item = stores.delivery.claim("ws_a", read.id, NOW, CLAIM_SECONDS)
    assert isinstance(from_copy, ClaimedMessage)
    assert isinstance(from_item, ClaimedMessage)
    assert (from_copy.expires_at, from_item.expires_at) == (expires_at, expires_at)

    later = expires_at + timedelta(seconds=1)
    expired = MessageFailure("expired", "not handed to a provider before its expiresAt")
    assert stores.delivery.finish_attempt(from_copy, Status.EXPIRED, later, error=expired)
    stores.delivery.release_dedup_lock(from_copy)

    stored = stores.sending.get("ws_a", copied.id)
    assert stored is not None
    assert (stored.status, stored.error, stored.expires_at) == (Status.EXPIRED, expired, expires_at)
    assert engine.lock_holder(copied.dedup_lock_id or "") is None
    assert engine.lock_holder(read.dedup_lock_id or "") == read.id
    assert [entry.id for entry in outbox_due(stores, later + timedelta(days=1), 10)] == [read.id]
    assert not stores.delivery.finish_attempt(from_copy, Status.SENT, later)  # ended once


def _expiring(stores: Stores, expires_at: datetime, **changes: Any) -> Message:
    made = draft(**changes)
    outcome = create(stores, replace(made, message=replace(made.message, expires_at=expires_at)))
    assert isinstance(outcome, Created), outcome
    return outcome.message
