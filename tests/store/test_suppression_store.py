"""The suppression list's contract, on every engine (its items on moto and DynamoDB Local).

A workspace's entries, the shared opt-out every workspace is subject to and a workspace's removal of
it; the send's checks inside its create transaction (nothing written when refused); the listing
newest first over both; provider events that suppress, applied once; and races.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from sendonce import channels
from sendonce.errors import InvalidCursor, RecipientSuppressed
from sendonce.messages.model import Channel, Message, Status
from sendonce.messages.service import MessageService, SendCommand
from sendonce.provider_events.model import ProviderEvent, ProviderEventType
from sendonce.provider_events.ports import EventOutcome
from sendonce.suppressions.model import Reason, Suppression
from sendonce.suppressions.ports import SuppressionStore

from tests.store.conftest import NOW, DynamoDbEngine, Engine, Stores, created, opt_out, race

PHONE = "+15550100000"
COPIES = 10


@pytest.fixture
def suppressions(stores: Stores) -> SuppressionStore:
    return stores.suppressions


def _entry(
    to: str = PHONE, reason: Reason = Reason.MANUAL, minutes: int = 0, message_id: str | None = None
) -> Suppression:
    return Suppression(
        to=to, reason=reason, created_at=NOW + timedelta(minutes=minutes), message_id=message_id
    )


class _NoQueue:
    """A new send hands nothing to a queue itself (the table's stream does)."""

    def enqueue(self, message: object, delay_seconds: int = 0) -> None:
        raise AssertionError("a new send never enqueues")

    def enqueue_batch(self, handoffs: object) -> list[object]:
        raise AssertionError("a new send never enqueues")


def _send(stores: Stores, suppressions: SuppressionStore, workspace: str = "ws_a", body: str = "hi") -> str:
    """A send through the sending use case on these stores: "created", or the refusal's reason."""
    messages = MessageService(stores.sending, _NoQueue(), timedelta(minutes=15), lambda: NOW)
    command = SendCommand(
        workspace_id=workspace,
        channel=Channel("sms"),
        recipient=channels.normalise_recipient("sms", PHONE),
        body=body,
    )
    try:
        result = messages.send(command)
    except RecipientSuppressed as refused:
        return refused.reason
    assert result.created
    return "created"


def test_given_an_entry_then_found_for_its_workspace_only_and_kept_as_first_written(
    suppressions: SuppressionStore,
) -> None:
    bounced = _entry("Ann@x.io", Reason.BOUNCED, message_id="msg_1")

    assert suppressions.add("ws_a", bounced) == (bounced, True)
    assert suppressions.add("ws_a", _entry("ann@X.io", minutes=5)) == (bounced, False)  # folded: the same

    assert suppressions.find_many("ws_a", ["ann@x.io", PHONE]) == {"ann@x.io": bounced}
    assert suppressions.find_many("ws_b", ["ann@x.io"]) == {}


def test_given_an_entry_removed_then_gone_and_not_found_a_second_time(
    suppressions: SuppressionStore,
) -> None:
    suppressions.add("ws_a", _entry())

    assert suppressions.remove("ws_a", PHONE, NOW)
    assert suppressions.find_many("ws_a", [PHONE]) == {}
    assert not suppressions.remove("ws_a", PHONE, NOW)


def test_given_a_shared_opt_out_then_every_workspace_until_it_removes_it_and_a_new_stop_renews_it(
    stores: Stores, suppressions: SuppressionStore
) -> None:
    assert stores.events.apply_provider_event(opt_out("stop-1"), NOW)[0] is EventOutcome.APPLIED

    for workspace in ("ws_a", "ws_b"):
        assert suppressions.find_many(workspace, [PHONE])[PHONE].reason is Reason.OPTED_OUT
        assert _send(stores, suppressions, workspace) == "opted_out"

    assert suppressions.remove("ws_a", PHONE, NOW + timedelta(minutes=1))
    assert suppressions.find_many("ws_a", [PHONE]) == {}
    assert PHONE in suppressions.find_many("ws_b", [PHONE])
    assert _send(stores, suppressions, "ws_a") == "created"
    assert _send(stores, suppressions, "ws_b", body="other") == "opted_out"

    later = NOW + timedelta(minutes=2)
    assert stores.events.apply_provider_event(opt_out("stop-2"), later)[0] is EventOutcome.APPLIED
    assert suppressions.find_many("ws_a", [PHONE])[PHONE].created_at == later
    assert _send(stores, suppressions, "ws_a", body="again") == "opted_out"


def test_given_a_shared_opt_out_then_a_test_twin_is_not_subject_to_it(
    stores: Stores, suppressions: SuppressionStore
) -> None:
    """A STOP to the shared number silences every live workspace; a twin's messages never use it."""
    assert stores.events.apply_provider_event(opt_out("stop-twin"), NOW)[0] is EventOutcome.APPLIED

    assert PHONE in suppressions.find_many("ws_a", [PHONE])
    assert suppressions.find_many("ws_a:test", [PHONE]) == {}
    assert suppressions.list("ws_a:test", 10, None).suppressions == []
    assert _send(stores, suppressions, "ws_a:test") == "created"
    assert _send(stores, suppressions, "ws_a") == "opted_out"


def test_given_a_suppressed_recipient_then_a_send_writes_nothing(
    engine: Engine, stores: Stores, suppressions: SuppressionStore
) -> None:
    suppressions.add("ws_a", _entry(reason=Reason.COMPLAINED))
    before = engine.message_ids()

    assert _send(stores, suppressions) == "complained"

    assert engine.message_ids() == before
    assert engine.locks() == []


def test_given_an_opt_out_naming_a_message_then_only_its_workspace_and_applied_once(
    stores: Stores, suppressions: SuppressionStore
) -> None:
    message = created(stores, workspace="ws_a", to=PHONE)
    event = opt_out("stop-m", message_id=message.id)

    answers = race(COPIES, lambda _: stores.events.apply_provider_event(event, NOW))

    outcomes = [answer[0] for answer in answers if isinstance(answer, tuple)]
    assert outcomes.count(EventOutcome.APPLIED) == 1, answers
    assert outcomes.count(EventOutcome.REPEATED) == COPIES - 1, answers
    entry = suppressions.find_many("ws_a", [PHONE])[PHONE]
    assert (entry.reason, entry.message_id) == (Reason.OPTED_OUT, message.id)
    assert suppressions.find_many("ws_b", [PHONE]) == {}

    suppressions.remove("ws_a", PHONE, NOW)  # the recipient opted back in
    assert stores.events.apply_provider_event(event, NOW)[0] is EventOutcome.REPEATED  # redelivered: nothing
    assert suppressions.find_many("ws_a", [PHONE]) == {}


def test_given_a_permanent_bounce_then_the_message_fails_and_its_recipient_is_suppressed_at_once(
    engine: Engine, stores: Stores, suppressions: SuppressionStore
) -> None:
    message = created(stores, to="reader@example.com")
    claimed = stores.delivery.claim("ws_a", message.id, NOW, 60)
    assert isinstance(claimed, Message)
    bounce = ProviderEvent(
        provider="ses",
        event_id="bounce-1",
        message_id=message.id,
        type=ProviderEventType.FAILED,
        occurred_at="2036-11-30T12:00:00Z",
        suppress=Reason.BOUNCED,
    )

    assert stores.events.apply_provider_event(bounce, NOW)[0] is EventOutcome.APPLIED

    stored = stores.sending.get("ws_a", message.id)
    assert stored is not None
    assert stored.status is Status.FAILED
    assert (
        suppressions.find_many("ws_a", ["reader@example.com"])["reader@example.com"].reason is Reason.BOUNCED
    )


def test_given_an_opt_out_naming_an_unknown_message_then_nobody_is_silenced(
    stores: Stores, suppressions: SuppressionStore
) -> None:
    event = opt_out("stop-x", message_id="msg_01JAAAAAAAAAAAAAAAAAAAAAAA")

    assert stores.events.apply_provider_event(event, NOW)[0] is EventOutcome.IGNORED
    assert suppressions.find_many("ws_a", [PHONE]) == {}


def test_the_list_is_newest_first_over_own_and_shared_entries_and_pages_reach_each_once(
    stores: Stores, suppressions: SuppressionStore
) -> None:
    for minute in range(5):
        suppressions.add("ws_a", _entry(f"+1555010000{minute}", minutes=minute))
    suppressions.add("ws_b", _entry("+15550100009", minutes=9))  # another workspace's: never listed
    stores.events.apply_provider_event(opt_out("stop-l", to="+15550100007"), NOW + timedelta(minutes=7))
    stores.events.apply_provider_event(opt_out("stop-r", to="+15550100008"), NOW + timedelta(minutes=8))
    suppressions.remove("ws_a", "+15550100008", NOW + timedelta(minutes=8, seconds=1))

    seen: list[str] = []
    cursor = None
    while True:
        page = suppressions.list("ws_a", 2, cursor)
        assert len(page.suppressions) == 2 or page.next_cursor is None
        seen += [entry.to for entry in page.suppressions]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor

    assert seen == [
        "+15550100007",
        "+15550100004",
        "+15550100003",
        "+15550100002",
        "+15550100001",
        "+15550100000",
    ]


@pytest.mark.parametrize("cursor", ["nope!", "bm90IGEgY3Vyc29y", ""])
def test_given_a_cursor_the_list_never_gave_then_invalid_cursor(
    suppressions: SuppressionStore, cursor: str
) -> None:
    with pytest.raises(InvalidCursor):
        suppressions.list("ws_a", 2, cursor)


def test_given_10_concurrent_manual_adds_of_one_recipient_then_one_entry_created(
    suppressions: SuppressionStore,
) -> None:
    answers = race(COPIES, lambda i: suppressions.add("ws_a", _entry(minutes=i)))

    created_flags = [answer[1] for answer in answers if isinstance(answer, tuple)]
    assert len(created_flags) == COPIES, answers
    assert created_flags.count(True) == 1
    entries = {answer[0] for answer in answers if isinstance(answer, tuple) and not answer[1]}
    assert entries <= {suppressions.find_many("ws_a", [PHONE])[PHONE]}


def test_given_sends_racing_a_stop_then_each_is_written_or_refused_and_every_later_one_refused(
    stores: Stores, suppressions: SuppressionStore
) -> None:
    """However they interleave, a send is written (its write came before the STOP: the dispatcher's
    claim checks again) or refused by its own write; none fails, and every send after the STOP is
    refused."""

    def contender(i: int) -> object:
        if i == 0:
            return stores.events.apply_provider_event(opt_out("stop-race"), NOW)
        return _send(stores, suppressions, body=f"race {i}")

    answers = race(COPIES, contender)

    assert answers[0][0] is EventOutcome.APPLIED  # type: ignore[index]
    assert set(answers[1:]) <= {"created", "opted_out"}, answers
    assert _send(stores, suppressions, body="after") == "opted_out"


def test_entries_and_removals_carry_no_expiry_so_they_outlive_message_retention(
    dynamodb_engine: DynamoDbEngine, stores: Stores, suppressions: SuppressionStore
) -> None:
    suppressions.add("ws_a", _entry("ann@x.io"))
    stores.events.apply_provider_event(opt_out("stop-ttl"), NOW)
    suppressions.remove("ws_b", PHONE, NOW + timedelta(minutes=1))

    kept = [item for item in dynamodb_engine.items() if item["sk"]["S"] == "SUPPRESSION"]
    assert len(kept) == 3  # ws_a's entry, the shared opt-out, ws_b's removal of it
    assert all("expiresAt" not in item for item in kept)
