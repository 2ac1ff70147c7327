"""An email to several recipients, on every engine (its calls on moto and DynamoDB Local).

The create checks every recipient inside its one transaction while the checks fit (a live workspace
checks two items a recipient: its own entry and the shared opt-out), so the common path, nobody
suppressed, stays one call; past that (more than 47 recipients) it reads their entries first in one
BatchGetItem and checks what fits. Suppressed recipients are dropped and named, the rest written;
nobody left is Suppressed, with nothing written. The claim does the same in its own write.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sendonce.dedup.identity import message_identity
from sendonce.dispatch.ports import ClaimedMessage, ClaimSuppressed
from sendonce.limits.model import Limits, LimitsTimeline, QuotaCharge
from sendonce.messages.ids import new_message_id
from sendonce.messages.model import Channel, Message, Status
from sendonce.messages.ports import Created, DedupClaim, Suppressed
from sendonce.provider_events.model import from_ses_notification
from sendonce.provider_events.ports import EventOutcome
from sendonce.suppressions.model import Reason, Suppression

from tests.store.conftest import NOW, DynamoDbEngine, Engine, Stores, dynamodb_calls, opt_out

CLAIM_SECONDS = 60
TAG = "sendonce-message-id"


def _email(
    to: list[str], *, cc: list[str] | None = None, bcc: list[str] | None = None, workspace: str = "ws_a"
) -> tuple[Message, DedupClaim]:
    recipients = [*to, *(cc or []), *(bcc or [])]
    message = Message(
        id=new_message_id(),
        workspace_id=workspace,
        channel=Channel("email"),
        to=recipients[0],
        body="hello",
        subject="s",
        status=Status.QUEUED,
        created_at=NOW,
        updated_at=NOW,
        to_list=tuple(to),
        cc=tuple(cc) if cc is not None else None,
        bcc=tuple(bcc) if bcc is not None else None,
        reply_to="desk@x.io",
        html="<p>hello</p>",
    )
    lock = message_identity(workspace, [a.lower() for a in recipients], "s", "hello", "<p>hello</p>")
    return message, DedupClaim(lock, NOW + timedelta(minutes=15))


def _create(stores: Stores, made: tuple[Message, DedupClaim], **kwargs: Any) -> Any:
    message, claim = made
    return stores.sending.create(message, claim, None, NOW + timedelta(minutes=2), NOW, **kwargs)


def _suppress(stores: Stores, *addresses: str, workspace: str = "ws_a") -> None:
    for address in addresses:
        stores.suppressions.add(workspace, Suppression(to=address, reason=Reason.BOUNCED, created_at=NOW))


def _stop(stores: Stores, event_id: str, address: str) -> None:
    """An opt-out naming no message: the shared entry every live workspace is subject to."""
    assert stores.events.apply_provider_event(opt_out(event_id, address), NOW)[0] is EventOutcome.APPLIED


def _addresses(count: int) -> list[str]:
    return [f"r{i:02d}@x.io" for i in range(count)]


def test_given_one_of_three_suppressed_then_written_without_it_and_it_is_named(
    engine: Engine, stores: Stores
) -> None:
    _suppress(stores, "b@x.io")

    outcome = _create(stores, _email(["a@x.io", "B@x.io"], cc=["c@x.io"]))

    assert isinstance(outcome, Created)
    stored = stores.sending.get("ws_a", outcome.message.id)
    assert stored == outcome.message
    assert (stored.to, stored.to_list, stored.cc, stored.bcc) == ("a@x.io", ("a@x.io",), ("c@x.io",), None)
    assert stored.suppressed_recipients == ("B@x.io",)
    assert (stored.reply_to, stored.html) == ("desk@x.io", "<p>hello</p>")


def test_given_every_recipient_suppressed_then_suppressed_with_the_first_ones_reason_and_nothing_written(
    engine: Engine, stores: Stores
) -> None:
    stores.suppressions.add("ws_a", Suppression(to="a@x.io", reason=Reason.COMPLAINED, created_at=NOW))
    _suppress(stores, "b@x.io")
    before = engine.message_ids()

    assert _create(stores, _email(["a@x.io"], bcc=["b@x.io"])) == Suppressed("complained")
    assert engine.message_ids() == before
    assert engine.locks() == []


@pytest.mark.parametrize("count", [47, 48, 50])
def test_given_a_live_email_near_the_item_limit_then_its_suppressed_recipients_are_dropped(
    engine: Engine, stores: Stores, count: int
) -> None:
    """Past 47 recipients a live workspace's checks (two each) do not fit beside the create's own
    items: read first, and still every suppressed one is left out, the shared opt-outs included."""
    addresses = _addresses(count)
    _suppress(stores, addresses[0], addresses[count - 1])
    _stop(stores, "stop-1", addresses[10])
    _stop(stores, "stop-2", addresses[20])
    assert stores.suppressions.remove("ws_a", addresses[20], NOW + timedelta(seconds=1))  # this one removed

    outcome = _create(stores, _email(addresses[:30], cc=addresses[30:40], bcc=addresses[40:]))

    assert isinstance(outcome, Created)
    stored = stores.sending.get("ws_a", outcome.message.id)
    assert stored is not None
    dropped = (addresses[0], addresses[10], addresses[count - 1])
    assert stored.suppressed_recipients == tuple(sorted(dropped))
    assert stored.recipients == tuple(a for a in addresses if a not in dropped)
    assert stored.bcc == tuple(a for a in addresses[40:] if a not in dropped)


def test_given_a_test_twins_email_to_50_then_every_recipient_is_checked(
    engine: Engine, stores: Stores
) -> None:
    addresses = _addresses(50)
    _suppress(stores, addresses[49], workspace="ws_a:test")

    outcome = _create(stores, _email(addresses[:25], cc=addresses[25:], workspace="ws_a:test"))

    assert isinstance(outcome, Created)
    assert outcome.message.suppressed_recipients == (addresses[49],)


def test_given_a_charged_create_then_a_suppressed_recipient_is_dropped_and_one_unit_taken(
    engine: Engine,
) -> None:
    store, limits = engine.charged_store()
    engine.stores().suppressions.add("ws_a", Suppression(to="b@x.io", reason=Reason.BOUNCED, created_at=NOW))
    quota = QuotaCharge.of("ws_a", Limits(rate_per_second=50, daily_quota=5), NOW)
    message, claim = _email(["a@x.io", "b@x.io"])

    outcome = store.create(message, claim, None, NOW + timedelta(minutes=2), NOW, quota=quota)

    assert isinstance(outcome, Created)
    assert outcome.message.suppressed_recipients == ("b@x.io",)
    assert limits.used_today("ws_a", LimitsTimeline(Limits(50, 5)), NOW) == 1


def test_given_recipients_suppressed_after_acceptance_then_the_claim_drops_them_in_its_own_write(
    engine: Engine, stores: Stores
) -> None:
    outcome = _create(stores, _email(["a@x.io", "b@x.io"], cc=["c@x.io"]))
    assert isinstance(outcome, Created)
    _suppress(stores, "b@x.io")

    claimed = stores.delivery.claim("ws_a", outcome.message.id, NOW, CLAIM_SECONDS, seen=outcome.message)

    assert isinstance(claimed, ClaimedMessage)
    assert (claimed.to_list, claimed.cc, claimed.suppressed_recipients) == (
        ("a@x.io",),
        ("c@x.io",),
        ("b@x.io",),
    )
    stored = stores.sending.get("ws_a", outcome.message.id)
    assert stored is not None
    assert stored.status is Status.SENDING
    assert stored.suppressed_recipients == ("b@x.io",)
    assert stored.recipients == ("a@x.io", "c@x.io")


def test_given_every_recipient_suppressed_after_acceptance_then_the_claim_is_refused(
    engine: Engine, stores: Stores
) -> None:
    outcome = _create(stores, _email(["a@x.io"], bcc=["b@x.io"]))
    assert isinstance(outcome, Created)
    _suppress(stores, "a@x.io", "b@x.io")

    claimed = stores.delivery.claim("ws_a", outcome.message.id, NOW, CLAIM_SECONDS)

    assert claimed == ClaimSuppressed("bounced")
    stored = stores.sending.get("ws_a", outcome.message.id)
    assert stored is not None
    assert stored.status is Status.QUEUED


def test_given_a_live_email_to_50_then_the_claim_drops_the_last_one_suppressed(
    engine: Engine, stores: Stores
) -> None:
    """50 recipients' two checks and the update are 101 items: the claim reads first, too."""
    addresses = _addresses(50)
    outcome = _create(stores, _email(addresses))
    assert isinstance(outcome, Created)
    _stop(stores, "stop-1", addresses[49])

    claimed = stores.delivery.claim("ws_a", outcome.message.id, NOW, CLAIM_SECONDS)

    assert isinstance(claimed, ClaimedMessage)
    assert claimed.recipients == tuple(addresses[:49])
    assert claimed.suppressed_recipients == (addresses[49],)


# ---------------------------------------------------------------------------- calls
def test_given_nobody_suppressed_then_a_create_to_47_is_one_call_and_to_48_reads_first(
    dynamodb_engine: DynamoDbEngine, stores: Stores
) -> None:
    addresses = _addresses(48)
    with dynamodb_calls(dynamodb_engine) as to_three:
        assert isinstance(_create(stores, _email(addresses[:3])), Created)
    with dynamodb_calls(dynamodb_engine) as to_47:
        assert isinstance(_create(stores, _email(addresses[:47])), Created)
    with dynamodb_calls(dynamodb_engine) as to_48:
        assert isinstance(_create(stores, _email(addresses)), Created)

    assert to_three == ["TransactWriteItems"]
    assert to_47 == ["TransactWriteItems"]
    assert to_48 == ["BatchGetItem", "TransactWriteItems"]


def test_given_one_suppressed_then_the_create_is_written_again_at_once_without_it(
    dynamodb_engine: DynamoDbEngine, stores: Stores
) -> None:
    _suppress(stores, "b@x.io")
    with dynamodb_calls(dynamodb_engine) as made:
        outcome = _create(stores, _email(["a@x.io", "b@x.io", "c@x.io"]))

    assert isinstance(outcome, Created)
    assert made == ["TransactWriteItems", "TransactWriteItems"]
    item = dynamodb_engine.item({"pk": {"S": f"MSG#{outcome.message.id}"}, "sk": {"S": "MESSAGE"}})
    assert item is not None
    assert item["toList"] == {"L": [{"S": "a@x.io"}, {"S": "c@x.io"}]}
    assert item["suppressedRecipients"] == {"L": [{"S": "b@x.io"}]}


def test_given_a_single_address_email_then_its_item_holds_none_of_the_lists(
    dynamodb_engine: DynamoDbEngine, stores: Stores
) -> None:
    message, claim = _email(["a@x.io"])
    plain = Message(
        id=message.id,
        workspace_id="ws_a",
        channel=message.channel,
        to="a@x.io",
        body="hello",
        subject="s",
        status=Status.QUEUED,
        created_at=NOW,
        updated_at=NOW,
    )
    assert isinstance(_create(stores, (plain, claim)), Created)

    item = dynamodb_engine.item({"pk": {"S": f"MSG#{message.id}"}, "sk": {"S": "MESSAGE"}})
    assert item is not None
    assert not {"toList", "cc", "bcc", "replyTo", "html", "suppressedRecipients"} & set(item)


def test_given_an_ses_bounce_naming_two_of_three_then_those_two_are_suppressed_and_not_the_third(
    engine: Engine, stores: Stores
) -> None:
    outcome = _create(stores, _email(["ann@x.io", "Bob@x.io"], cc=["cy@x.io"]))
    assert isinstance(outcome, Created)
    notification = {
        "eventType": "Bounce",
        "mail": {
            "messageId": "ses-1",
            "timestamp": "2026-01-01T00:00:00Z",
            "tags": {TAG: [outcome.message.id]},
        },
        "bounce": {
            "bounceType": "Permanent",
            "bounceSubType": "General",
            "timestamp": "2026-01-01T00:00:02Z",
            "bouncedRecipients": [{"emailAddress": "BOB@x.io"}, {"emailAddress": "cy@x.io"}],
        },
    }
    event = from_ses_notification(notification, TAG)
    assert event is not None

    assert stores.events.apply_provider_event(event, NOW)[0] is EventOutcome.APPLIED

    found = stores.suppressions.find_many("ws_a", {"ann@x.io", "bob@x.io", "cy@x.io"})
    assert sorted(found) == ["bob@x.io", "cy@x.io"]
    assert found["bob@x.io"].to == "Bob@x.io"  # as the message holds it
    assert found["bob@x.io"].message_id == outcome.message.id
